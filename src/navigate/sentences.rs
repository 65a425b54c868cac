//! The sentence-grain final context (`answer.sentence_tokens` > 0): instead of whole
//! 600-token segments, the final answer prompt shows the sentences of the final segments that
//! carry the evidence, each with its window (the sentences before and after it in its passage),
//! under their passages' titles, in document order, within a token budget.
//!
//! Which sentences: those of the final segments (best first) that name an entity of the
//! focus (E_s, then the entities the path reached through relation edges) or share words with
//! the query (the question with the path's names). They are ranked by reciprocal-rank fusion of
//! three signals: BM25 of the sentence against the query, the rarity-weighted focus entities it
//! names (the same inverse segment frequency the start ranking uses), and the rank of its
//! segment. The graph's advantage is the focus: a bridge entity the question never names
//! counts like the question's own.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::stable_graph::NodeIndex;

use super::{fuse_ranks, Check, NavigateError, Navigator, Run};
use crate::prompts::PromptId;
use crate::text::sentences::Sentences;
use crate::text::whole_word;
use crate::text::{excerpt, Bm25};

impl Navigator<'_> {
    /// Answers from the sentences of `segments` (best first), within the budget.
    pub(crate) async fn sentence_answer(
        &self,
        run: &mut Run,
        segments: &[usize],
        note: &str,
    ) -> Result<Check, NavigateError> {
        let document: String = self
            .memory
            .segments
            .iter()
            .map(|s| s.text.as_str())
            .collect();
        let index = Sentences::of(&document);
        let query = self.focus_query(run);
        let priority = self.sentence_priority(&document, &index, segments, &run.focus, &query);
        let room = self
            .window()
            .room(self.prompts, PromptId::Answer, &run.question)?;
        let budget = self.answer.sentence_tokens.min(room);
        let shown = excerpt::fit(&document, &index, &priority, budget, true);
        let units: Vec<(usize, usize)> = self
            .memory
            .segments
            .iter()
            .map(|s| (s.start, s.end))
            .collect();
        let note = format!(
            "{note}; sentences: {} of {} candidates, {} tokens (budget {budget})",
            shown.sentences.len(),
            priority.len(),
            shown.tokens
        );
        let check = self
            .answer_with_path(run, shown.text.clone(), shown.units(&index, &units), &note)
            .await?;
        run.answer_spans = Some(shown.spans);
        Ok(check)
    }

    /// The query sentences are ranked against: the question, then the names of the focus
    /// entities the question does not name.
    fn focus_query(&self, run: &Run) -> String {
        let q_lower = run.question.to_lowercase();
        let extra: Vec<String> = self
            .names(&run.focus)
            .into_iter()
            .filter(|n| !q_lower.contains(&n.to_lowercase()))
            .collect();
        if extra.is_empty() {
            run.question.clone()
        } else {
            format!("{}\n{}", run.question, extra.join("; "))
        }
    }

    /// The candidate sentences of `segments`, best first: those that name a focus entity or
    /// share a word with `query`, fused by rank over BM25, the focus entities' weight and their
    /// segment's rank.
    fn sentence_priority(
        &self,
        document: &str,
        index: &Sentences,
        segments: &[usize],
        focus: &BTreeSet<NodeIndex>,
        query: &str,
    ) -> Vec<usize> {
        // (sentence, rank of its segment), each sentence once.
        let mut candidates: Vec<(usize, usize)> = Vec::new();
        let mut seen = BTreeSet::new();
        for (rank, &s) in segments.iter().enumerate() {
            let Some(seg) = self.memory.segments.get(s) else {
                continue;
            };
            for i in index.within((seg.start, seg.end)) {
                if seen.insert(i) {
                    candidates.push((i, rank));
                }
            }
        }
        if candidates.is_empty() {
            return Vec::new();
        }
        let texts: Vec<&str> = candidates
            .iter()
            .map(|&(i, _)| {
                let (a, b) = index.sentences[i].span;
                &document[a..b]
            })
            .collect();
        let bm25: BTreeMap<usize, f64> = Bm25::new(&texts)
            .rank(query)
            .into_iter()
            .filter(|&(_, x)| x > 0.0)
            .collect();
        let n = self.memory.segments.len().max(1) as f64;
        let weights: Vec<f64> = texts
            .iter()
            .map(|text| {
                focus
                    .iter()
                    .filter(|&&e| {
                        let ent = &self.memory.graph[e];
                        std::iter::once(&ent.name)
                            .chain(ent.mentions.iter())
                            .any(|m| !m.trim().is_empty() && whole_word(text, m.trim()))
                    })
                    .map(|&e| (n / self.memory.graph[e].segments.len().max(1) as f64).ln() + 1.0)
                    .sum()
            })
            .collect();
        // Each signal's order over the qualifying candidates (k indexes `candidates`), best
        // first, ties by position.
        let qualifying: Vec<usize> = (0..candidates.len())
            .filter(|&k| bm25.contains_key(&k) || weights[k] > 0.0)
            .collect();
        let order = |key: &dyn Fn(usize) -> f64| -> Vec<(usize, f64)> {
            let mut list: Vec<(usize, f64)> = qualifying.iter().map(|&k| (k, key(k))).collect();
            list.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            list
        };
        let lexical = order(&|k| bm25.get(&k).copied().unwrap_or(0.0));
        let entity = order(&|k| weights[k]);
        let segment = order(&|k| -(candidates[k].1 as f64));
        let fused = fuse_ranks(&[(&lexical, 1.0), (&entity, 1.0), (&segment, 1.0)]);
        let mut ranked: Vec<(usize, f64)> = fused.into_iter().collect();
        ranked.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then(candidates[a.0].0.cmp(&candidates[b.0].0))
        });
        ranked.into_iter().map(|(k, _)| candidates[k].0).collect()
    }
}
