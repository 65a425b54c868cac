//! QRMeM-TE: Entity Trial on the bipartite entity-segment graph (no relations).

use std::collections::BTreeSet;

use petgraph::stable_graph::NodeIndex;
use serde::Deserialize;
use serde_json::json;

use super::{Check, NavigateError, Navigator, Run, Step};
use crate::llm::{JsonSchema, Message};
use crate::prompts::PromptId;

#[derive(Deserialize)]
struct EntityList {
    #[serde(default)]
    entities: Vec<String>,
}

impl Navigator<'_> {
    pub(crate) async fn te(
        &self,
        run: &mut Run,
        start: &BTreeSet<NodeIndex>,
    ) -> Result<Check, NavigateError> {
        let mut entities = start.clone();
        let mut trial = 0usize;
        loop {
            let segments: Vec<usize> = self.segments_of(&entities).into_iter().collect();
            let (text, shown) = self.window().fit(
                self.prompts,
                PromptId::Answerability,
                &run.question,
                self.memory,
                &segments,
                &[],
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
            let after = self.segments_of(&entities).len();
            run.push(Step {
                kind: "te_update".into(),
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
        let segments: Vec<usize> = self.segments_of(&entities).into_iter().collect();
        self.final_answer(run, &segments, &[], "answered from the entities' segments")
            .await
    }
}
