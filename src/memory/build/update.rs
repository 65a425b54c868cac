//! Relation Update (QRMeM section 2.1): the relations of one entity pair from two or more
//! segments folded, segment by segment, into one description with its helper questions.

use std::collections::{BTreeMap, HashMap};

use futures::stream::{self, StreamExt};
use serde::Deserialize;
use serde_json::json;

use super::extract::question_text;
use super::{
    schema, Builder, Pair, PerSegment, RawRelation, Resolved, RELATION_UPDATES_PER_SEGMENT,
};
use crate::llm::Message;
use crate::prompts::PromptId;
use crate::text::Segment;

/// The outcome of Relation Update for one pair.
pub(super) struct MergedRelation {
    pub(super) description: String,
    pub(super) helper_questions: Vec<String>,
    pub(super) calls: usize,
}

#[derive(Deserialize)]
struct RelationUpdateReply {
    #[serde(default)]
    questions: Vec<String>,
    description: String,
}

fn relation_lines<'a>(relations: impl IntoIterator<Item = &'a RawRelation>) -> String {
    let s: String = relations
        .into_iter()
        .map(|r| format!("- {} -> {}: {}\n", r.head, r.tail, r.description))
        .collect();
    if s.is_empty() {
        "(none)\n".to_string()
    } else {
        s
    }
}

impl Builder<'_> {
    /// Relation Update over the pairs with relations from two or more segments: those spread
    /// over the most segments first, at most one per RELATION_UPDATES_PER_SEGMENT segments (and
    /// `max_relation_updates`); the others keep their joined descriptions. The merged
    /// description (or why it failed) per pair.
    pub(super) async fn update_relations(
        &self,
        segments: &[Segment],
        summary: &str,
        question: Option<&str>,
        groups: &BTreeMap<Pair, Vec<Resolved>>,
    ) -> HashMap<Pair, Result<MergedRelation, String>> {
        let mut plans: Vec<(Pair, PerSegment)> = Vec::new();
        for (key, rels) in groups {
            let mut by_seg: BTreeMap<usize, Vec<RawRelation>> = BTreeMap::new();
            for (_, _, r) in rels {
                by_seg.entry(r.segment).or_default().push(r.clone());
            }
            if by_seg.len() >= 2 {
                plans.push((*key, by_seg.into_iter().collect()));
            }
        }
        plans.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        plans.truncate(
            self.params
                .max_relation_updates
                .min(segments.len().div_ceil(RELATION_UPDATES_PER_SEGMENT)),
        );
        let merged: Vec<(Pair, Result<MergedRelation, String>)> = stream::iter(plans)
            .map(|(key, per_seg)| async move {
                (
                    key,
                    self.merge_relations(segments, summary, question, &per_seg)
                        .await,
                )
            })
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        merged.into_iter().collect()
    }

    /// Folds the relations of one entity pair, segment by segment, with the Relation Update
    /// prompt, giving the merged description, the helper questions Q_s and the calls made.
    pub(super) async fn merge_relations(
        &self,
        segments: &[Segment],
        summary: &str,
        question: Option<&str>,
        per_seg: &[(usize, Vec<RawRelation>)],
    ) -> Result<MergedRelation, String> {
        let Some((first_seg, first)) = per_seg.first() else {
            return Err("no relations".into());
        };
        let mut acc_text = segments
            .get(*first_seg)
            .map(|s| s.text.clone())
            .unwrap_or_default();
        let mut acc_rel = relation_lines(first);
        let mut description = String::new();
        let mut helper = Vec::new();
        let mut calls = 0;
        for (seg, rels) in &per_seg[1..] {
            let seg_text = segments
                .get(*seg)
                .map(|s| s.text.as_str())
                .unwrap_or_default();
            let p = self
                .prompts
                .render(
                    PromptId::RelationUpdate,
                    &[
                        ("question", question_text(question)),
                        ("summary", summary),
                        ("segment1", &acc_text),
                        ("relations1", &acc_rel),
                        ("segment2", seg_text),
                        ("relations2", &relation_lines(rels)),
                    ],
                )
                .map_err(|e| e.to_string())?;
            let r = self
                .llm
                .chat_json::<RelationUpdateReply>(
                    "merge",
                    vec![Message::user(p)],
                    schema(
                        "relation_update",
                        json!({
                            "questions": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 200}},
                            "description": {"type": "string", "minLength": 3, "maxLength": 400}
                        }),
                        &["questions", "description"],
                    ),
                )
                .await
                .map_err(|e| e.to_string())?;
            calls += 1;
            description = r.value.description.trim().to_string();
            helper.extend(
                r.value
                    .questions
                    .into_iter()
                    .map(|q| q.trim().to_string())
                    .filter(|q| !q.is_empty()),
            );
            // The merged relation stands for both segments in the next fold; keep the newer
            // segment's text so the prompt stays within one window.
            acc_text = seg_text.to_string();
            acc_rel = format!("- {description}\n");
        }
        Ok(MergedRelation {
            description,
            helper_questions: helper,
            calls,
        })
    }
}
