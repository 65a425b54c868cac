//! Tolerant JSON extraction from model replies: strip code fences, take the first JSON value.

use serde_json::Value;

/// How many candidate start positions are tried before giving up.
const MAX_STARTS: usize = 64;

/// Finds the first JSON object or array in `text`.
///
/// Small models wrap JSON in prose or Markdown fences; this takes the body of the first fence
/// when there is one, then parses from the first `{` or `[` that starts a complete value
/// (trailing text is ignored). Returns a short description of the problem when nothing parses.
pub fn extract_json(text: &str) -> Result<Value, String> {
    let trimmed = text.trim().trim_start_matches('\u{feff}');
    if trimmed.is_empty() {
        return Err("the reply is empty".to_string());
    }
    let mut candidates = Vec::with_capacity(2);
    if let Some(body) = fenced_body(trimmed) {
        candidates.push(body);
    }
    candidates.push(trimmed);
    let mut last_error = String::from("the reply contains no JSON object or array");
    for candidate in candidates {
        for (tried, (start, _)) in candidate
            .char_indices()
            .filter(|(_, c)| *c == '{' || *c == '[')
            .enumerate()
        {
            if tried >= MAX_STARTS {
                break;
            }
            let mut stream =
                serde_json::Deserializer::from_str(&candidate[start..]).into_iter::<Value>();
            match stream.next() {
                Some(Ok(value)) => return Ok(value),
                Some(Err(e)) => last_error = format!("invalid JSON: {e}"),
                None => {}
            }
        }
    }
    Err(last_error)
}

/// The body of the first Markdown code fence (``` or ```json), if the text has one.
fn fenced_body(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after = &text[open + 3..];
    // Skip an info string such as `json` up to the end of the line.
    let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
    let body = &after[body_start..];
    let end = body.find("```").unwrap_or(body.len());
    Some(&body[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_object() {
        assert_eq!(extract_json(r#"{"a": 1}"#).unwrap(), json!({"a": 1}));
    }

    #[test]
    fn fenced_with_language_and_prose() {
        let text = "Sure! Here it is:\n```json\n{\"entities\": [\"Paris\"]}\n```\nHope this helps.";
        assert_eq!(extract_json(text).unwrap(), json!({"entities": ["Paris"]}));
    }

    #[test]
    fn first_value_wins_and_trailing_text_is_ignored() {
        let text = "answer: {\"x\": [1, 2]} and also {\"y\": 3}";
        assert_eq!(extract_json(text).unwrap(), json!({"x": [1, 2]}));
    }

    #[test]
    fn skips_a_brace_that_starts_no_value() {
        let text = "use {curly} braces: [\"a\", \"b\"]";
        assert_eq!(extract_json(text).unwrap(), json!(["a", "b"]));
    }

    #[test]
    fn truncated_json_is_an_error() {
        let err = extract_json("{\"entities\": [\"Par").unwrap_err();
        assert!(err.contains("invalid JSON"), "{err}");
    }

    #[test]
    fn empty_and_jsonless_replies_are_errors() {
        assert!(extract_json("   ").unwrap_err().contains("empty"));
        assert!(extract_json("I cannot help")
            .unwrap_err()
            .contains("no JSON"));
    }
}
