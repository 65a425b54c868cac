//! QRMeM-KN: reflection-based knowledge navigation, Algorithm 1 of the paper.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::stable_graph::{EdgeIndex, NodeIndex};

use super::{add_scored, Check, NavigateError, Navigator, Run};
use crate::answer::{ScoredEdge, Step, StepKind};
use crate::config::FinalContext;
use crate::prompts::PromptId;

/// Neighbours taken in one question that changed nothing shown, at most: then navigation stops.
/// A neighbour whose segments are all shown already, or lose to the window, spends no trial.
pub(crate) const MAX_IDLE_PICKS: usize = 12;

/// The margin within which a picked neighbour's segments are ordered among themselves: far below
/// the differences between edge scores that decide between neighbours.
const EDGE_TIE: f32 = 1e-3;

impl Navigator<'_> {
    /// Algorithm 1 from the start entities `start` and the ranked, cut start set `s_imp`;
    /// `start_order` is the start set's whole order before the cut (the hop's with `-hop`).
    pub(crate) async fn kn(
        &self,
        run: &mut Run,
        start: &BTreeSet<NodeIndex>,
        s_imp: &[usize],
        start_order: &[usize],
    ) -> Result<Check, NavigateError> {
        // 1: S_imp (ranked and cut to the start share of the window); S_add <- {}.
        let mut s_add: BTreeMap<usize, f32> = BTreeMap::new();
        let mut entities = start.clone();
        let mut trials = 0usize;
        let mut idle = 0usize;
        let mut last: Option<(Vec<usize>, Check)> = None;
        // Every segment an expansion brought, shown or dropped by the window.
        let mut found: BTreeSet<usize> = BTreeSet::new();
        // The neighbours that trials reached through relation edges: the path from the
        // question's entities towards the answer (co-occurrences and idle picks are not on it).
        let mut path: BTreeSet<NodeIndex> = BTreeSet::new();
        'trials: loop {
            // 2/16: S_mix <- S_imp u S_add; 4: can the LLM answer Q with S_mix? When the
            // segments shown are those of the previous check, its verdict stands (the same prompt
            // at temperature 0): no request is spent on it.
            let add = sorted(&s_add);
            let shown = self.shown(run, s_imp, &add)?;
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
            last = Some((shown.clone(), check.clone()));
            if check.answered {
                return Ok(Check {
                    answered: true,
                    ..check
                });
            }
            if check.stop {
                // The check's P(answerable) passed the threshold but its reply gives no
                // answer: answer from what it was shown.
                run.focus.extend(path.iter().copied());
                return self
                    .final_answer(
                        run,
                        &shown,
                        &[],
                        "the check's P(answerable) passed the threshold: answered from its segments",
                    )
                    .await;
            }
            if !self.opts.navigation {
                return self
                    .final_answer(run, s_imp, &[], "no navigation (ablation)")
                    .await;
            }
            if trials >= self.opts.max_trials {
                break;
            }
            // 7: R <- the reason.
            let reason = check.reasoning;
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
            // 8-14, until a neighbour changes what the next check shows: that is a trial.
            loop {
                let s_mix: BTreeSet<usize> =
                    s_imp.iter().copied().chain(s_add.keys().copied()).collect();
                let Some(pick) = self.pick(run, &query, &reason, &entities, &s_mix)? else {
                    run.push(Step {
                        kind: StepKind::Expand,
                        entities: self.names(&entities),
                        note: "no adjacent entities left".into(),
                        ended: true,
                        ..Step::default()
                    });
                    break 'trials;
                };
                // 12: E <- E u {e}; 13-14: S_add <- S_add u (S_new \ S_mix), with the score.
                entities.insert(pick.node);
                found.extend(pick.segments.iter().map(|&(s, _)| s));
                let mut new_segments = Vec::new();
                for &(s, score) in &pick.segments {
                    if !s_mix.contains(&s) {
                        add_scored(&mut s_add, s, score);
                        new_segments.push(s);
                    }
                }
                // 17-19: keep S_add within the window, by score.
                let dropped = self.keep_in_window(run, s_imp, &mut s_add)?;
                let now = self.shown(run, s_imp, &sorted(&s_add))?;
                let name = &self.memory.graph[pick.node].name;
                let window_note = if dropped.is_empty() {
                    String::new()
                } else {
                    format!(", window dropped {dropped:?}")
                };
                // Nothing new shown: the reason cannot change either, so no trial is spent.
                let idle_pick = now == shown;
                let what = format!(
                    "{} {name} -> new segments {new_segments:?}{window_note}",
                    pick.via.how()
                );
                let (kind, note) = if idle_pick {
                    idle += 1;
                    (
                        StepKind::ExpandIdle,
                        format!("{what}; nothing new shown, no trial spent"),
                    )
                } else {
                    trials += 1;
                    if pick.via == Via::Relation {
                        path.insert(pick.node);
                        if let Some(edge) = pick.edge {
                            run.path.push(edge);
                        }
                    }
                    (StepKind::Expand, format!("trial {trials}: {what}"))
                };
                run.push(Step {
                    kind,
                    entities: self.names(&entities),
                    candidates: pick.candidates,
                    chosen: vec![pick.chosen],
                    s_add: sorted(&s_add),
                    reason: if idle_pick {
                        String::new()
                    } else {
                        reason.clone()
                    },
                    note,
                    ..Step::default()
                });
                if !idle_pick {
                    break;
                }
                if idle >= MAX_IDLE_PICKS {
                    run.push(Step {
                        kind: StepKind::Expand,
                        entities: self.names(&entities),
                        note: format!(
                            "no adjacent entities left that change the shown segments ({idle} tried)"
                        ),
                        ended: true,
                        ..Step::default()
                    });
                    break 'trials;
                }
            }
        }
        // Trials exhausted (or nothing left to expand).
        run.focus.extend(path.iter().copied());
        match self.answer.final_context {
            FinalContext::SMix => {
                let add = sorted(&s_add);
                self.final_answer(run, s_imp, &add, "answered from the final S_mix")
                    .await
            }
            FinalContext::SMixFilled => {
                // The last S_mix as the last check saw it (S_imp in its order, then S_add by
                // score), then the rest of the start's order, then every unit by the
                // question's BM25; the window takes them in this order while they fit.
                let add = sorted(&s_add);
                let last = self.shown(run, s_imp, &add)?;
                let mut order: Vec<usize> = s_imp
                    .iter()
                    .copied()
                    .chain(add.iter().map(|&(s, _)| s))
                    .filter(|s| last.contains(s))
                    .collect();
                let s_mix = order.len();
                let by_question =
                    crate::text::Bm25::over(&self.memory.segments).rank(&run.question);
                for s in start_order
                    .iter()
                    .copied()
                    .chain(by_question.into_iter().map(|(s, _)| s))
                {
                    if !order.contains(&s) {
                        order.push(s);
                    }
                }
                let note = format!(
                    "answered from the final S_mix ({s_mix} units), filled by the start's order and the question's BM25"
                );
                self.final_answer(run, &order, &[], &note).await
            }
            FinalContext::Ranked => {
                // The best of all of S_imp and everything the expansions brought, ranked as the
                // start set is, for [Q; E_path]: the question with the names of the neighbours
                // that trials reached through relation edges, whose segments also count in the
                // entity weight beside E_s's (co-occurrences do not: they are mostly noise).
                // As much of it as a check could show, so both final contexts have one size.
                // S_imp and S_add lie inside the pool already.
                let mut pool = self.segments_of(start);
                pool.extend(&found);
                let path_names = self.names(&path);
                let query = if path_names.is_empty() {
                    run.question.clone()
                } else {
                    format!("{}\n{}", run.question, path_names.join("; "))
                };
                let weighed: BTreeSet<NodeIndex> = start.union(&path).copied().collect();
                let ranked = self.rank_segments(&query, &pool, &weighed)?;
                let ranked = if self.opts.start_bridge {
                    self.bridge_order(start, &ranked).0
                } else if self.opts.start_hop {
                    self.hop_order(&run.question, start, &ranked).0
                } else {
                    ranked
                };
                // The hop's order is kept as given (its own passages may have no score); the
                // others are taken by score.
                let fits = if self.opts.start_hop {
                    let order: Vec<usize> = ranked.iter().map(|&(s, _)| s).collect();
                    self.shown(run, &order, &[])?
                } else {
                    self.shown(run, &[], &ranked)?
                };
                let best: Vec<usize> = ranked
                    .iter()
                    .map(|&(s, _)| s)
                    .filter(|s| fits.contains(s))
                    .collect();
                let note = format!(
                    "answered from the best of S_imp and the expansions' segments ({} of {} ranked fit, path {:?})",
                    best.len(),
                    ranked.len(),
                    path_names
                );
                if self.answer.sentence_tokens > 0 {
                    // Sentences are chosen from every ranked segment, not only those that
                    // would fit whole.
                    let all: Vec<usize> = ranked.iter().map(|&(s, _)| s).collect();
                    return self.sentence_answer(run, &all, &note).await;
                }
                self.final_answer(run, &best, &[], &note).await
            }
        }
    }

    /// The segments the answerability prompt shows for S_imp and S_add.
    fn shown(
        &self,
        run: &Run,
        s_imp: &[usize],
        add: &[(usize, f32)],
    ) -> Result<Vec<usize>, NavigateError> {
        let (_, shown) = self.window().fit(
            self.prompts,
            PromptId::Answerability,
            &run.question,
            self.memory,
            s_imp,
            add,
        )?;
        Ok(shown)
    }

    /// 8-11: the adjacent entities of E through their relation edges, scored by the edge's
    /// similarity to `query` ([Q; R; E]); the best one, with its segments at the edge's score.
    /// With no relation edge leaving E, the entities named in S_mix whose segments S_mix lacks
    /// are the candidates, ranked by their best unseen segment's similarity to [Q; R].
    fn pick(
        &self,
        run: &Run,
        query: &str,
        reason: &str,
        entities: &BTreeSet<NodeIndex>,
        s_mix: &BTreeSet<usize>,
    ) -> Result<Option<Pick>, NavigateError> {
        let mut edges: Vec<EdgeIndex> = Vec::new();
        let mut other_end: BTreeMap<EdgeIndex, NodeIndex> = BTreeMap::new();
        for &e in entities {
            for (n, edge) in self.memory.neighbours(e) {
                if !entities.contains(&n) && !other_end.contains_key(&edge) {
                    edges.push(edge);
                    other_end.insert(edge, n);
                }
            }
        }
        if edges.is_empty() {
            let q_r = if self.opts.reflection {
                format!("{}\n{}", run.question, reason)
            } else {
                run.question.clone()
            };
            return self.cooccurrence_step(&q_r, entities, s_mix);
        }
        let scored = crate::embed::score_edges(self.embedder, self.memory, query, &edges)?;
        let text = |e: EdgeIndex, s: f32| ScoredEdge {
            text: self.memory.edge_text(e).unwrap_or_default(),
            score: s,
        };
        let Some((&(best, score), &node)) = scored
            .first()
            .and_then(|b| other_end.get(&b.0).map(|n| (b, n)))
        else {
            return Ok(None);
        };
        // Every segment of the neighbour comes with the edge's score (lines 13-14); among them,
        // those the chosen relation was extracted from come first, then the rest by their own
        // similarity to the query, by a margin below EDGE_TIE, so the window keeps the
        // neighbour's best segments rather than its first ones.
        let own = crate::embed::score_segments(self.embedder, self.memory, query)?;
        let similarity: BTreeMap<usize, f32> = own.into_iter().collect();
        let stated = self.memory.graph.edge_weight(best).map(|r| &r.segments);
        let segments = self.memory.graph[node]
            .segments
            .iter()
            .map(|&s| {
                let sim = similarity.get(&s).copied().unwrap_or(0.0).clamp(-1.0, 1.0);
                let first = if stated.is_some_and(|t| t.contains(&s)) {
                    0.5
                } else {
                    0.0
                };
                (s, score + EDGE_TIE * (first + 0.25 * (1.0 + sim)))
            })
            .collect();
        Ok(Some(Pick {
            node,
            edge: Some(best),
            segments,
            chosen: text(best, score),
            candidates: scored.iter().take(5).map(|&(e, s)| text(e, s)).collect(),
            via: Via::Relation,
        }))
    }

    /// Lines 17-19: filters S_add by score to what fits the window beside S_imp; returns the
    /// segments dropped.
    fn keep_in_window(
        &self,
        run: &Run,
        s_imp: &[usize],
        s_add: &mut BTreeMap<usize, f32>,
    ) -> Result<Vec<usize>, NavigateError> {
        let shown = self.shown(run, s_imp, &sorted(s_add))?;
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

    /// The co-occurrence fallback: the entities (not numbers, dates or generic entities) named
    /// in S_mix that are also named in segments S_mix lacks; each is scored by its best unseen
    /// segment's similarity to `query` ([Q; R]), and brings its unseen segments at their own
    /// scores.
    fn cooccurrence_step(
        &self,
        query: &str,
        entities: &BTreeSet<NodeIndex>,
        s_mix: &BTreeSet<usize>,
    ) -> Result<Option<Pick>, NavigateError> {
        let g = &self.memory.graph;
        let candidates: Vec<NodeIndex> = g
            .node_indices()
            .filter(|n| !entities.contains(n))
            .filter(|&n| g[n].kind != "number" && g[n].kind != "time" && !g[n].generic)
            .filter(|&n| g[n].segments.iter().any(|s| s_mix.contains(s)))
            .filter(|&n| g[n].segments.iter().any(|s| !s_mix.contains(s)))
            .collect();
        if candidates.is_empty() {
            return Ok(None);
        }
        let scores: BTreeMap<usize, f32> =
            crate::embed::score_segments(self.embedder, self.memory, query)?
                .into_iter()
                .collect();
        let mut scored: Vec<(NodeIndex, usize, f32)> = candidates
            .iter()
            .filter_map(|&n| {
                g[n].segments
                    .iter()
                    .filter(|s| !s_mix.contains(s))
                    .map(|&s| (n, s, scores.get(&s).copied().unwrap_or(f32::MIN)))
                    .max_by(|a, b| a.2.total_cmp(&b.2).then(b.1.cmp(&a.1)))
            })
            .collect();
        scored.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        let text = |n: NodeIndex, s: usize| format!("{} (unseen segment {s})", g[n].name);
        let top = scored
            .iter()
            .take(5)
            .map(|&(n, s, x)| ScoredEdge {
                text: text(n, s),
                score: x,
            })
            .collect();
        Ok(scored.first().map(|&(node, seg, score)| Pick {
            node,
            edge: None,
            segments: g[node]
                .segments
                .iter()
                .filter(|s| !s_mix.contains(s))
                .map(|&s| (s, scores.get(&s).copied().unwrap_or(f32::MIN)))
                .collect(),
            chosen: ScoredEdge {
                text: text(node, seg),
                score,
            },
            candidates: top,
            via: Via::CoOccurrence,
        }))
    }
}

/// A neighbour chosen by one expansion step.
struct Pick {
    node: NodeIndex,
    /// The relation edge it was reached through (none for a co-occurrence).
    edge: Option<EdgeIndex>,
    /// Its segments, with the score they join S_add with.
    segments: Vec<(usize, f32)>,
    chosen: ScoredEdge,
    candidates: Vec<ScoredEdge>,
    via: Via,
}

/// How a neighbour was reached: only relation edges put it on the path the final context
/// ranks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// A relation edge leaving E (lines 8-11).
    Relation,
    /// The co-occurrence fallback, when no relation edge leaves E.
    CoOccurrence,
}

impl Via {
    /// The trace's wording.
    fn how(self) -> &'static str {
        match self {
            Via::Relation => "added",
            Via::CoOccurrence => "no relation edges; co-occurring",
        }
    }
}

/// S_add by descending score.
pub(crate) fn sorted(s_add: &BTreeMap<usize, f32>) -> Vec<(usize, f32)> {
    let mut v: Vec<(usize, f32)> = s_add.iter().map(|(&s, &x)| (s, x)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}
