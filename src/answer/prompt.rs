//! The answer prompt every method ends with (`prompts/answer.txt`).

use serde::Deserialize;
use serde_json::json;

use super::{AnswerError, Step, StepKind};
use crate::llm::{JsonSchema, Message, Service};
use crate::prompts::{PromptId, Prompts};

#[derive(Deserialize)]
struct FinalAnswer {
    #[serde(default)]
    reasoning: String,
    answer: String,
}

/// The answer prompt shared by every method (`prompts/answer.txt`) over `segments_text`:
/// (answer, reasoning). A reply that never parses fails the question.
pub async fn answer_from(
    llm: &Service,
    prompts: &Prompts,
    question: &str,
    segments_text: &str,
) -> Result<(String, String), AnswerError> {
    let p = prompts.render(
        PromptId::Answer,
        &[("segments", segments_text), ("question", question)],
    )?;
    let schema = json!({"type": "object", "properties": {
        "reasoning": {"type": "string", "maxLength": 600},
        "answer": {"type": "string", "minLength": 1, "maxLength": 200}
    }, "required": ["reasoning", "answer"]});
    let r = llm
        .chat_json::<FinalAnswer>(
            "answer",
            vec![Message::user(p)],
            Some(JsonSchema {
                name: "answer".into(),
                schema,
            }),
        )
        .await
        .map_err(|source| AnswerError::Step {
            step: "answer".into(),
            source,
        })?;
    Ok((r.value.answer, r.value.reasoning))
}

/// The answer step as a method records it: the answer, the model's reasoning and the trace
/// step (the units shown, the reasoning as its reason, the method's note).
pub struct Answered {
    /// The reply's answer, as given (a method trims it or maps it to an option letter).
    pub answer: String,
    pub reasoning: String,
    pub step: Step,
}

/// The final answer every method's context goes through: the answer prompt over `text` (one
/// request, [`answer_from`]) and the trace step that records it, `units` being the segments or
/// passages `text` holds.
pub async fn answer_step(
    llm: &Service,
    prompts: &Prompts,
    question: &str,
    text: &str,
    units: Vec<usize>,
    note: String,
) -> Result<Answered, AnswerError> {
    let (answer, reasoning) = answer_from(llm, prompts, question, text).await?;
    let step = Step {
        kind: StepKind::Answer,
        segments: units,
        reason: reasoning.clone(),
        note,
        ..Step::default()
    };
    Ok(Answered {
        answer,
        reasoning,
        step,
    })
}
