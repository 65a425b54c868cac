//! Ranking segments (S_imp, KN's final context, GES's retrieval): reciprocal-rank fusion of BM25,
//! the embedder and the rarity of the question's entities, and the start share of the window.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::stable_graph::NodeIndex;

use super::{NavigateError, Navigator};
use crate::prompts::PromptId;
use crate::text::Bm25;

/// The constant of reciprocal-rank fusion (Cormack et al. 2009).
const RRF_K: f64 = 60.0;

/// Each fused signal's own order of the segments, best first: BM25, the embedder, the entity
/// weight.
pub(crate) type SignalOrders = [Vec<usize>; 3];

/// Reciprocal-rank fusion of `signals`, each an order of (item, value) best first with its
/// weight. Equal values share a rank, so a signal that cannot tell items apart adds nothing to
/// their order; a signal of weight 0 adds nothing at all.
pub(crate) fn fuse_ranks(signals: &[(&[(usize, f64)], f64)]) -> BTreeMap<usize, f64> {
    let mut fused: BTreeMap<usize, f64> = BTreeMap::new();
    for &(list, w) in signals {
        if w == 0.0 {
            continue;
        }
        let mut rank = 0usize;
        let mut prev: Option<f64> = None;
        for (i, &(item, x)) in list.iter().enumerate() {
            if prev != Some(x) {
                rank = i;
                prev = Some(x);
            }
            *fused.entry(item).or_default() += w / (RRF_K + rank as f64 + 1.0);
        }
    }
    fused
}

impl Navigator<'_> {
    /// Ranks `segments` for `query` by reciprocal-rank fusion of three signals, weighted by
    /// `navigate.rank_weights`: BM25, the embedder's similarity, and the weight of `entities`
    /// each segment holds (the sum of their inverse segment frequencies, so a rare entity of the
    /// question counts more than a common one). Best first, ties by document order; the score is
    /// the fused one. A signal of weight 0 adds nothing, but its order is still returned for the
    /// trace.
    pub(crate) fn rank_segments(
        &self,
        query: &str,
        segments: &BTreeSet<usize>,
        entities: &BTreeSet<NodeIndex>,
    ) -> Result<Vec<(usize, f32)>, NavigateError> {
        Ok(self.rank_segments_by_signal(query, segments, entities)?.0)
    }

    /// [`Navigator::rank_segments`], with each signal's own order (BM25, embedder, entity
    /// weight), best first: the trace shows them, so a reader can see which signal put a
    /// segment where.
    pub(crate) fn rank_segments_by_signal(
        &self,
        query: &str,
        segments: &BTreeSet<usize>,
        entities: &BTreeSet<NodeIndex>,
    ) -> Result<(Vec<(usize, f32)>, SignalOrders), NavigateError> {
        if segments.is_empty() {
            return Ok((Vec::new(), Default::default()));
        }
        let within = |ranked: Vec<(usize, f64)>| -> Vec<(usize, f64)> {
            ranked
                .into_iter()
                .filter(|(s, _)| segments.contains(s))
                .collect()
        };
        let lexical = within(Bm25::over(&self.memory.segments).rank(query));
        let dense = within(
            crate::embed::score_segments(self.embedder, self.memory, query)?
                .into_iter()
                .map(|(s, x)| (s, f64::from(x)))
                .collect(),
        );
        let n = self.memory.segments.len().max(1) as f64;
        let mut weight: BTreeMap<usize, f64> = segments.iter().map(|&s| (s, 0.0)).collect();
        for &e in entities {
            let linked = &self.memory.graph[e].segments;
            let idf = (n / linked.len().max(1) as f64).ln() + 1.0;
            for s in linked {
                if let Some(w) = weight.get_mut(s) {
                    *w += idf;
                }
            }
        }
        let mut by_weight: Vec<(usize, f64)> = weight.into_iter().collect();
        by_weight.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let [w_lexical, w_dense, w_weight] = self.opts.rank_weights;
        let fused = fuse_ranks(&[
            (&lexical, w_lexical),
            (&dense, w_dense),
            (&by_weight, w_weight),
        ]);
        let mut ranked: Vec<(usize, f32)> = fused.into_iter().map(|(s, x)| (s, x as f32)).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let order = |list: &[(usize, f64)]| list.iter().map(|(s, _)| *s).collect::<Vec<_>>();
        let signals = [order(&lexical), order(&dense), order(&by_weight)];
        Ok((ranked, signals))
    }

    /// The ranked start set cut to the start share of the window's segment room (at least its
    /// best segment, if that fits the window at all).
    pub(crate) fn start_share_of(
        &self,
        question: &str,
        ranked: &[(usize, f32)],
    ) -> Result<Vec<usize>, NavigateError> {
        let room = self
            .window()
            .room(self.prompts, PromptId::Answerability, question)?;
        let share = (room as f64 * f64::from(self.opts.start_share.clamp(0.0, 1.0))) as usize;
        let mut kept = Vec::new();
        let mut used = 0usize;
        for &(s, _) in ranked {
            let Some(seg) = self.memory.segments.get(s) else {
                continue;
            };
            let cost = seg.tokens + 1;
            if used + cost <= share || (kept.is_empty() && cost <= room) {
                kept.push(s);
                used += cost;
            }
        }
        Ok(kept)
    }
}

/// Segment scores as a map, keeping the highest score per segment.
pub(crate) fn add_scored(s_add: &mut BTreeMap<usize, f32>, segment: usize, score: f32) {
    let e = s_add.entry(segment).or_insert(score);
    if score > *e {
        *e = score;
    }
}
