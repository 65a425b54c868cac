//! QRMeM-GES: Graph Expansion Search.

use std::collections::BTreeSet;

use petgraph::stable_graph::{EdgeIndex, NodeIndex};
use petgraph::visit::{EdgeRef, IntoEdgeReferences};
use serde::Deserialize;
use serde_json::json;

use super::{Check, NavigateError, Navigator, Run};
use crate::answer::{ScoredEdge, Step, StepKind};
use crate::llm::{JsonSchema, Message};
use crate::prompts::PromptId;

#[derive(Deserialize)]
struct Elaborated {
    query: String,
}

/// Relations listed in the elaboration prompt at most.
const MAX_RELATIONS: usize = 40;

impl Navigator<'_> {
    pub(crate) async fn ges(
        &self,
        run: &mut Run,
        start: &BTreeSet<NodeIndex>,
    ) -> Result<Check, NavigateError> {
        let mut entities = start.clone();
        // Expand E by adjacent nodes whose edge similarity to Q passes the threshold, until no
        // new edge passes or the iteration limit.
        for iteration in 0..self.opts.ges_max_iterations {
            let mut edges: Vec<(EdgeIndex, NodeIndex)> = Vec::new();
            for &e in &entities {
                for (n, edge) in self.memory.neighbours(e) {
                    if !entities.contains(&n) && !edges.iter().any(|(x, _)| *x == edge) {
                        edges.push((edge, n));
                    }
                }
            }
            if edges.is_empty() {
                run.push(Step {
                    kind: StepKind::GesExpand,
                    entities: self.names(&entities),
                    note: "no adjacent entities left".into(),
                    ended: true,
                    ..Step::default()
                });
                break;
            }
            let ids: Vec<EdgeIndex> = edges.iter().map(|(e, _)| *e).collect();
            let scored =
                crate::embed::score_edges(self.embedder, self.memory, &run.question, &ids)?;
            let passing: Vec<(EdgeIndex, f32)> = scored
                .iter()
                .copied()
                .filter(|(_, s)| *s >= self.opts.ges_threshold)
                .collect();
            let text = |e: EdgeIndex, s: f32| ScoredEdge {
                text: self.memory.edge_text(e).unwrap_or_default(),
                score: s,
            };
            for (e, _) in &passing {
                if let Some((_, n)) = edges.iter().find(|(x, _)| x == e) {
                    entities.insert(*n);
                }
            }
            run.push(Step {
                kind: StepKind::GesExpand,
                entities: self.names(&entities),
                candidates: scored.iter().take(5).map(|&(e, s)| text(e, s)).collect(),
                chosen: passing.iter().map(|&(e, s)| text(e, s)).collect(),
                note: format!(
                    "iteration {}: {} edge(s) passed {:.2}",
                    iteration + 1,
                    passing.len(),
                    self.opts.ges_threshold
                ),
                ..Step::default()
            });
            if passing.is_empty() {
                break;
            }
        }
        // The elaborated query from (E, R, Q).
        let g = &self.memory.graph;
        let relations: Vec<String> = g
            .edge_references()
            .filter(|e| entities.contains(&e.source()) && entities.contains(&e.target()))
            .take(MAX_RELATIONS)
            .map(|e| {
                format!(
                    "- {} -> {}: {}",
                    g[e.source()].name,
                    g[e.target()].name,
                    e.weight().description
                )
            })
            .collect();
        let names = self.names(&entities).join("\n");
        let rel_text = if relations.is_empty() {
            "(none)".to_string()
        } else {
            relations.join("\n")
        };
        let p = self.prompts.render(
            PromptId::Elaborate,
            &[
                ("entities", &names),
                ("relations", &rel_text),
                ("question", &run.question),
            ],
        )?;
        let schema = json!({"type": "object", "properties": {"query": {"type": "string", "minLength": 3, "maxLength": 400}}, "required": ["query"]});
        let elaborated = match self
            .llm
            .chat_json::<Elaborated>(
                "elaborate",
                vec![Message::user(p)],
                Some(JsonSchema {
                    name: "elaborate".into(),
                    schema,
                }),
            )
            .await
        {
            Ok(r) => r.value.query,
            Err(e) => {
                run.failures.push(format!("elaborate: {e}"));
                String::new()
            }
        };
        // c = Q + the elaborated query retrieves the segments the answer is read from, ranked
        // over the whole memory as the start set is (BM25, the embedder, and the weight of the
        // expanded E's entities each segment holds).
        let c = format!("{} {}", run.question, elaborated)
            .trim()
            .to_string();
        let every: BTreeSet<usize> = (0..self.memory.segments.len()).collect();
        let scores = self.rank_segments(&c, &every, &entities)?;
        run.push(Step {
            kind: StepKind::Elaborate,
            entities: self.names(&entities),
            reason: elaborated,
            ..Step::default()
        });
        if self.opts.start_hop {
            // The hop (`-hop`): the best unit (with `-own`, E_s's own passages), then the own
            // passages of the names it holds, then the ranking, taken in that order.
            let (order, via) = self.hop_order(&run.question, start, &scores);
            let order: Vec<usize> = order.into_iter().map(|(s, _)| s).collect();
            let note =
                format!("segments retrieved with Q + the elaborated query, in the hop's order (own passages of {via:?})");
            return self.final_answer(run, &order, &[], &note).await;
        }
        self.final_answer(
            run,
            &[],
            &scores,
            "segments retrieved with Q + the elaborated query",
        )
        .await
    }
}
