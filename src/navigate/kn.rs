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
        let mut last: Option<(Vec<usize>, Check)> = None;
        loop {
            // 2/16: S_mix <- S_imp u S_add; 4: can the LLM answer Q with S_mix? When the
            // segments shown are those of the previous check, its verdict stands (the same prompt
            // at temperature 0): no request is spent on it.
            let add = sorted(&s_add);
            let (_, shown) = self.window().fit(
                self.prompts,
                PromptId::Answerability,
                &run.question,
                self.memory,
                &s_imp,
                &add,
            )?;
            let check = match last.take() {
                Some((prev, check)) if prev == shown => check,
                _ => {
                    let step = Step {
                        entities: self.names(&entities),
                        s_add: add.clone(),
                        ..Step::default()
                    };
                    self.answerability(run, step, &shown).await?
                }
            };
            last = Some((shown, check.clone()));
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
            // 11: e <- the best; with no relation edge leaving E, fall back on the
            // entity-segment links: the entities named in S_mix count as adjacent.
            let pick = if edges.is_empty() {
                self.cooccurrence_step(&query, &entities, &s_mix)?.map(
                    |(node, text, score, candidates)| {
                        (
                            node,
                            ScoredEdge { text, score },
                            candidates,
                            "no relation edges; co-occurring",
                        )
                    },
                )
            } else {
                let scored = crate::embed::score_edges(self.embedder, self.memory, &query, &edges)?;
                let text = |e: EdgeIndex, s: f32| ScoredEdge {
                    text: self.memory.edge_text(e).unwrap_or_default(),
                    score: s,
                };
                scored.first().and_then(|&(best, score)| {
                    other_end.get(&best).map(|&node| {
                        (
                            node,
                            text(best, score),
                            scored.iter().take(5).map(|&(e, s)| text(e, s)).collect(),
                            "added",
                        )
                    })
                })
            };
            let Some((node, chosen, candidates, how)) = pick else {
                run.push(Step {
                    kind: "expand".into(),
                    entities: self.names(&entities),
                    note: "no adjacent entities left".into(),
                    ..Step::default()
                });
                break;
            };
            // 12: E <- E u {e}; 13-14: S_add <- S_add u (S_new \ S_mix), with the score.
            entities.insert(node);
            let mut new_segments = Vec::new();
            for &s in &self.memory.graph[node].segments {
                if !s_mix.contains(&s) {
                    add_scored(&mut s_add, s, chosen.score);
                    new_segments.push(s);
                }
            }
            // 17-19: keep S_add within the window, by score.
            let dropped = self.keep_in_window(run, &s_imp, &mut s_add)?;
            trials += 1;
            let note = format!(
                "trial {trials}: {how} {} -> new segments {new_segments:?}{}",
                self.memory.graph[node].name,
                if dropped.is_empty() {
                    String::new()
                } else {
                    format!(", window dropped {dropped:?}")
                }
            );
            run.push(Step {
                kind: "expand".into(),
                entities: self.names(&entities),
                candidates,
                chosen: vec![chosen],
                s_add: sorted(&s_add),
                reason,
                note,
                ..Step::default()
            });
        }
        // Trials exhausted (or nothing left to expand): answer from the final S_mix.
        let add = sorted(&s_add);
        self.final_answer(run, &s_imp, &add, "answered from the final S_mix")
            .await
    }

    /// Lines 17-19: filters S_add by score to what fits the window beside S_imp; returns the
    /// segments dropped.
    fn keep_in_window(
        &self,
        run: &Run,
        s_imp: &[usize],
        s_add: &mut BTreeMap<usize, f32>,
    ) -> Result<Vec<usize>, NavigateError> {
        let (_, shown) = self.window().fit(
            self.prompts,
            PromptId::Answerability,
            &run.question,
            self.memory,
            s_imp,
            &sorted(s_add),
        )?;
        let dropped: Vec<usize> = s_add
            .keys()
            .copied()
            .filter(|s| !shown.contains(s))
            .collect();
        for s in &dropped {
            s_add.remove(s);
        }
        Ok(dropped)
    }

    /// The co-occurrence fallback: entities (not numbers or dates) named in S_mix's segments,
    /// scored by the query's similarity to "name: its relations". Returns the best one, its text,
    /// score and the top candidates.
    #[allow(clippy::type_complexity)]
    fn cooccurrence_step(
        &self,
        query: &str,
        entities: &BTreeSet<NodeIndex>,
        s_mix: &BTreeSet<usize>,
    ) -> Result<Option<(NodeIndex, String, f32, Vec<ScoredEdge>)>, NavigateError> {
        let g = &self.memory.graph;
        let candidates: Vec<NodeIndex> = g
            .node_indices()
            .filter(|n| !entities.contains(n))
            .filter(|&n| g[n].kind != "number" && g[n].kind != "time")
            .filter(|&n| g[n].segments.iter().any(|s| s_mix.contains(s)))
            .filter(|&n| g[n].segments.iter().any(|s| !s_mix.contains(s)))
            .collect();
        if candidates.is_empty() {
            return Ok(None);
        }
        let texts: Vec<String> = candidates
            .iter()
            .map(|&n| {
                let rels: Vec<String> = self
                    .memory
                    .neighbours(n)
                    .iter()
                    .map(|(_, e)| g[*e].description.clone())
                    .collect();
                if rels.is_empty() {
                    g[n].name.clone()
                } else {
                    format!("{}: {}", g[n].name, rels.join(" "))
                }
            })
            .collect();
        let mut all: Vec<&str> = vec![query];
        all.extend(texts.iter().map(String::as_str));
        let v = crate::embed::embed_exact(self.embedder, &all)?;
        let mut scored: Vec<(usize, f32)> = (0..candidates.len())
            .map(|i| (i, crate::embed::dot(&v[0], &v[i + 1])))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let top = scored
            .iter()
            .take(5)
            .map(|&(i, s)| ScoredEdge {
                text: texts[i].clone(),
                score: s,
            })
            .collect();
        Ok(scored
            .first()
            .map(|&(i, s)| (candidates[i], texts[i].clone(), s, top)))
    }
}

/// S_add by descending score.
pub(crate) fn sorted(s_add: &BTreeMap<usize, f32>) -> Vec<(usize, f32)> {
    let mut v: Vec<(usize, f32)> = s_add.iter().map(|(&s, &x)| (s, x)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}
