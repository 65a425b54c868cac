//! QRMeM-KN: reflection-based knowledge navigation, Algorithm 1 of the paper.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::stable_graph::{EdgeIndex, NodeIndex};

use super::{add_scored, Check, NavigateError, Navigator, Run, ScoredEdge, Step};
use crate::prompts::PromptId;

impl Navigator<'_> {
    pub(crate) async fn kn(
        &self,
        run: &mut Run,
        start: &BTreeSet<NodeIndex>,
    ) -> Result<Check, NavigateError> {
        // 1: S_imp <- segments of E_s; S_add <- {}.
        let s_imp: Vec<usize> = self.segments_of(start).into_iter().collect();
        let mut s_add: BTreeMap<usize, f32> = BTreeMap::new();
        let mut entities = start.clone();
        let mut trials = 0usize;
        loop {
            // 2/16: S_mix <- S_imp u S_add; 4: can the LLM answer Q with S_mix?
            let add = sorted(&s_add);
            let step = Step {
                entities: self.names(&entities),
                s_add: add.clone(),
                ..Step::default()
            };
            let check = self.answerability_mix(run, step, &s_imp, &add).await?;
            if check.answered {
                return Ok(Check {
                    answered: true,
                    ..check
                });
            }
            if !self.opts.navigation {
                return self
                    .final_answer(run, &s_imp, &[], "no navigation (ablation)")
                    .await;
            }
            if trials >= self.opts.max_trials {
                break;
            }
            // 7: R <- the reason; 8-9: adjacent entities and their connecting edges.
            let reason = check.reasoning;
            let s_mix: BTreeSet<usize> =
                s_imp.iter().copied().chain(s_add.keys().copied()).collect();
            let mut edges: Vec<EdgeIndex> = Vec::new();
            let mut other_end: BTreeMap<EdgeIndex, NodeIndex> = BTreeMap::new();
            for &e in &entities {
                for (n, edge) in self.memory.neighbours(e) {
                    if !entities.contains(&n) && !other_end.contains_key(&edge) {
                        edges.push(edge);
                        other_end.insert(edge, n);
                    }
                }
            }
            if edges.is_empty() {
                run.push(Step {
                    kind: "expand".into(),
                    entities: self.names(&entities),
                    note: "no adjacent entities left".into(),
                    ..Step::default()
                });
                break;
            }
            // 10: S <- Similarity([Q; R; E_s], R); 11: e <- the best.
            let query = if self.opts.reflection {
                format!(
                    "{}\n{}\n{}",
                    run.question,
                    reason,
                    self.names(&entities).join("; ")
                )
            } else {
                run.question.clone()
            };
            let scored = crate::embed::score_edges(self.embedder, self.memory, &query, &edges)?;
            let Some(&(best, score)) = scored.first() else {
                break;
            };
            let Some(&node) = other_end.get(&best) else {
                break;
            };
            // 12: E <- E u {e}; 13-14: S_add <- S_add u (S_new \ S_mix), with the score.
            entities.insert(node);
            let mut new_segments = Vec::new();
            for &s in &self.memory.graph[node].segments {
                if !s_mix.contains(&s) {
                    add_scored(&mut s_add, s, score);
                    new_segments.push(s);
                }
            }
            // 17-19: keep S_add within the window, by score.
            let (_, shown) = self.window().fit(
                self.prompts,
                PromptId::Answerability,
                &run.question,
                self.memory,
                &s_imp,
                &sorted(&s_add),
            )?;
            let dropped: Vec<usize> = s_add
                .keys()
                .copied()
                .filter(|s| !shown.contains(s))
                .collect();
            for s in &dropped {
                s_add.remove(s);
            }
            trials += 1;
            let text = |e: EdgeIndex, s: f32| ScoredEdge {
                text: self.memory.edge_text(e).unwrap_or_default(),
                score: s,
            };
            run.push(Step {
                kind: "expand".into(),
                entities: self.names(&entities),
                candidates: scored.iter().take(5).map(|&(e, s)| text(e, s)).collect(),
                chosen: vec![text(best, score)],
                s_add: sorted(&s_add),
                reason,
                note: format!(
                    "trial {trials}: added {} -> new segments {new_segments:?}{}",
                    self.memory.graph[node].name,
                    if dropped.is_empty() {
                        String::new()
                    } else {
                        format!(", window dropped {dropped:?}")
                    }
                ),
                ..Step::default()
            });
        }
        // Trials exhausted (or nothing left to expand): answer from the final S_mix.
        let add = sorted(&s_add);
        self.final_answer(run, &s_imp, &add, "answered from the final S_mix")
            .await
    }

    /// The answerability check on S_mix = S_imp u S_add, fitted to the window.
    async fn answerability_mix(
        &self,
        run: &mut Run,
        step: Step,
        s_imp: &[usize],
        add: &[(usize, f32)],
    ) -> Result<Check, NavigateError> {
        let (_, shown) = self.window().fit(
            self.prompts,
            PromptId::Answerability,
            &run.question,
            self.memory,
            s_imp,
            add,
        )?;
        self.answerability(run, step, &shown).await
    }
}

/// S_add by descending score.
pub(crate) fn sorted(s_add: &BTreeMap<usize, f32>) -> Vec<(usize, f32)> {
    let mut v: Vec<(usize, f32)> = s_add.iter().map(|(&s, &x)| (s, x)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}
