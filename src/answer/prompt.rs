//! The answer prompt every method ends with (`prompts/answer.txt`).

use serde::Deserialize;
use serde_json::json;

use super::AnswerError;
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
