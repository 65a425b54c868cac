//! QRMeM-TE: Entity Trial on the bipartite entity-segment graph (no relations).

use std::collections::BTreeSet;

use petgraph::stable_graph::NodeIndex;
use serde::Deserialize;
use serde_json::json;

use super::{Check, NavigateError, Navigator, Run};
use crate::answer::{Step, StepKind};
use crate::llm::{JsonSchema, Message};
use crate::prompts::PromptId;

#[derive(Deserialize)]
struct EntityList {
    #[serde(default)]
    entities: Vec<String>,
}

impl Navigator<'_> {
    /// Entity Trial from the start entities `start` and the ranked, cut start set `s_imp`.
    pub(crate) async fn te(
        &self,
        run: &mut Run,
        start: &BTreeSet<NodeIndex>,
        s_imp: &[usize],
    ) -> Result<Check, NavigateError> {
        let mut entities = start.clone();
        let mut trial = 0usize;
        loop {
            // S_imp first, then the segments of the entities the trials added, ranked.
            let added = self.added_segments(run, start, &entities, s_imp)?;
            let segments: Vec<usize> = s_imp
                .iter()
                .copied()
                .chain(added.iter().map(|(s, _)| *s))
                .collect();
            let (text, shown) = self.window().fit(
                self.prompts,
                PromptId::Answerability,
                &run.question,
                self.memory,
                s_imp,
                &added,
            )?;
            let window_full = shown.len() < segments.len();
            let step = Step {
                entities: self.names(&entities),
                ..Step::default()
            };
            let check = self.answerability(run, step, &shown).await?;
            if check.answered {
                return Ok(Check {
                    answered: true,
                    ..check
                });
            }
            if window_full {
                if let Some(last) = run.steps.last_mut() {
                    last.note = format!(
                        "window full: {} of {} segments fit",
                        shown.len(),
                        segments.len()
                    );
                }
                break;
            }
            if !self.opts.navigation || trial >= self.opts.max_trials {
                break;
            }
            trial += 1;
            // E <- LLM(E, R, S_imp, Q).
            let names = self.names(&entities).join("\n");
            let p = self.prompts.render(
                PromptId::TeUpdate,
                &[
                    ("entities", &names),
                    ("reason", &check.reasoning),
                    ("segments", &text),
                    ("question", &run.question),
                ],
            )?;
            let schema = json!({"type": "object", "properties": {"entities": {"type": "array", "maxItems": 10, "items": {"type": "string", "minLength": 1, "maxLength": 80}}}, "required": ["entities"]});
            let proposed = match self
                .llm
                .chat_json::<EntityList>(
                    "te_update",
                    vec![Message::user(p)],
                    Some(JsonSchema {
                        name: "entities".into(),
                        schema,
                    }),
                )
                .await
            {
                Ok(r) => r.value.entities,
                Err(e) => {
                    run.failures.push(format!("te_update: {e}"));
                    Vec::new()
                }
            };
            let linked = self.link(&proposed, "")?;
            let before = segments.len();
            entities.extend(linked);
            let after = s_imp.len() + self.new_segments(start, &entities, s_imp).len();
            run.push(Step {
                kind: StepKind::TeUpdate,
                entities: self.names(&entities),
                note: format!(
                    "proposed {}; segments {before} -> {after}",
                    proposed.join(", ")
                ),
                ..Step::default()
            });
            if after == before {
                break;
            }
        }
        let added = self.added_segments(run, start, &entities, s_imp)?;
        self.final_answer(run, s_imp, &added, "answered from the entities' segments")
            .await
    }

    /// The segments of the entities the trials added to E_s, less S_imp's, ranked for the
    /// question.
    fn added_segments(
        &self,
        run: &Run,
        start: &BTreeSet<NodeIndex>,
        entities: &BTreeSet<NodeIndex>,
        s_imp: &[usize],
    ) -> Result<Vec<(usize, f32)>, NavigateError> {
        let segments = self.new_segments(start, entities, s_imp);
        self.rank_segments(&run.question, &segments, entities)
    }

    /// The segments of the entities the trials added to E_s, less S_imp's (unranked: counting
    /// them needs no ranking).
    fn new_segments(
        &self,
        start: &BTreeSet<NodeIndex>,
        entities: &BTreeSet<NodeIndex>,
        s_imp: &[usize],
    ) -> BTreeSet<usize> {
        let new: BTreeSet<NodeIndex> = entities.difference(start).copied().collect();
        self.segments_of(&new)
            .into_iter()
            .filter(|s| !s_imp.contains(s))
            .collect()
    }
}
