//! The answerability check (Appendix E): the verdict and the answer of a check's reply, and
//! P(answerable) read from the action token's log probabilities.

use serde::Deserialize;
use serde_json::json;

use super::{NavigateError, Navigator, Run};
use crate::answer::{Step, StepKind};
use crate::llm::{JsonSchema, Message};
use crate::prompts::PromptId;
use crate::text::whole_word;

/// The answerability reply. The server's grammar makes the model write a reply's keys in the
/// order the schema sends them, its `required` order ([`crate::llm::JsonSchema::as_sent`]): the
/// reasoning, then the action, then the answer, as the paper reasons. Before commit 0e74414 the
/// schema went out sorted by name, so the keys were named to sort in that order too: named
/// "action" and "answer" they sorted first, and the 0.5B model chose -2 before writing any
/// reasoning (32 of 32 checks of runs/navigation-longbench-style's first attempt). The names stay
/// (reply-cache keys carry the schema); the old names are still read.
#[derive(Deserialize)]
struct Answerability {
    #[serde(default)]
    reasoning: String,
    #[serde(rename = "verdict_action", alias = "action")]
    action: i32,
    #[serde(default, rename = "verdict_answer", alias = "answer")]
    answer: String,
}

/// Whether an answer only repeats the answerability prompt's description of the answer field
/// ("the final answer, or an empty string for -1"), as small models sometimes do.
pub(crate) fn is_template_echo(answer: &str) -> bool {
    let a: String = answer
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace())
        .collect();
    let a = a.split_whitespace().collect::<Vec<_>>().join(" ");
    a.is_empty()
        || a == "the final answer"
        || a == "final answer"
        || a.starts_with("the final answer or an empty string")
}

/// The answer of an answerability reply, or why it gives none (empty for a plain -1). Only a
/// reply with action -2 answers (-1 keeps the paper's meaning, "cannot answer", whatever its
/// other fields say), and a -2 does not when its reasoning says the information is missing (the
/// 0.5B model often says -2 and, in the same reply, that the text does not say). Its answer is
/// the answer field, unless that is empty or only the prompt's description of the field; a
/// longer answer field than [`LONG_ANSWER_WORDS`] words is a copy of the text, not an answer
/// (except for multiple choice, whose options can be long). Failing the field, the answer the
/// small models write into the reasoning: the whole reasoning when it is a short phrase (at most
/// [`SHORT_ANSWER_WORDS`] words), or the phrase after "the answer is" in it, only if the phrase
/// is written in the `shown` text (or is yes/no), so that "Not sure" is no answer.
pub(crate) fn check_answer(
    action: i32,
    answer: &str,
    reasoning: &str,
    shown: &str,
    question: &str,
    multiple_choice: bool,
) -> Result<String, String> {
    if action != -2 {
        return Err(String::new());
    }
    if !multiple_choice && is_yes_no(answer) && !is_polar(question) {
        return Err(format!(
            "action -2 with {answer:?} to a question that is not a yes/no question: counted as -1"
        ));
    }
    if let Some(cue) = says_missing(reasoning) {
        return Err(format!(
            "action -2, but its reasoning says the information is missing ({cue:?}): counted as -1"
        ));
    }
    let field = answer.trim();
    if !field.is_empty() && !is_template_echo(field) {
        let words = field.split_whitespace().count();
        if multiple_choice || words <= LONG_ANSWER_WORDS {
            return Ok(field.to_string());
        }
        return Err(format!(
            "action -2 with an answer of {words} words, a copy of the text rather than an answer: counted as -1"
        ));
    }
    let shown_lower = shown.to_lowercase();
    let grounded = |p: &str| {
        let l = p.to_lowercase();
        !p.is_empty()
            && p.split_whitespace().count() <= SHORT_ANSWER_WORDS
            && !is_template_echo(p)
            && (l == "yes" || l == "no" || whole_word(&shown_lower, &l))
    };
    let r = reasoning.trim().trim_end_matches('.').trim();
    if grounded(r) {
        return Ok(r.to_string());
    }
    let lower = reasoning.to_lowercase();
    for cue in ["the answer is", "the final answer is", "answer:"] {
        if let Some(at) = lower.rfind(cue) {
            // Lowercasing keeps byte offsets for the ASCII cue, but not always for the rest.
            let Some(rest) = reasoning.get(at + cue.len()..) else {
                continue;
            };
            let phrase = rest
                .split(['.', '\n', ';'])
                .next()
                .unwrap_or("")
                .trim()
                .trim_matches(|c: char| c == '"' || c == '\'' || c == ':' || c == ',')
                .trim();
            if grounded(phrase) {
                return Ok(phrase.to_string());
            }
        }
    }
    Err(format!(
        "action -2 with no answer (the answer field is empty or the prompt's placeholder: {answer:?}; none in the reasoning): counted as -1"
    ))
}

/// Whether an answer is only "yes" or "no" (the 0.5B model also writes "No/no").
fn is_yes_no(answer: &str) -> bool {
    let words: Vec<String> = answer
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    !words.is_empty() && words.iter().all(|w| w == "yes" || w == "no")
}

/// Whether a question asks yes or no: it opens with an auxiliary verb ("Are both ...?").
fn is_polar(question: &str) -> bool {
    const AUXILIARIES: [&str; 20] = [
        "is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "has", "have",
        "had", "will", "would", "should", "shall", "may", "might", "must",
    ];
    question
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())
        .is_some_and(|w| AUXILIARIES.contains(&w.to_lowercase().as_str()))
}

/// The phrase of `reasoning` that says the text lacks the information, if any.
pub(crate) fn says_missing(reasoning: &str) -> Option<&'static str> {
    const CUES: [&str; 16] = [
        "not provide",
        "no information",
        "not mention",
        "not say",
        "doesn't say",
        "not state",
        "not specif",
        "cannot be inferred",
        "cannot be determined",
        "can't be determined",
        "not enough information",
        "insufficient",
        "is missing",
        "not contain",
        "doesn't contain",
        "not include",
    ];
    let l = reasoning.to_lowercase().replace('\u{2019}', "'");
    CUES.into_iter().find(|c| l.contains(c))
}

/// The longest answer field taken as an answer (HotpotQA's answers are a few words).
const LONG_ANSWER_WORDS: usize = 12;

/// The longest phrase taken as an answer found in a check's reasoning.
const SHORT_ANSWER_WORDS: usize = 8;

/// The outcome of an answerability check.
#[derive(Clone, Default)]
pub(crate) struct Check {
    /// The check answered: its verdict says stop and its reply gives an answer.
    pub answered: bool,
    pub answer: String,
    pub reasoning: String,
    /// The verdict says stop, but the reply gives no answer (a -1 sampled while P(answerable)
    /// passed `navigate.check_threshold`): the final answer step answers from what was shown.
    pub stop: bool,
}

impl Navigator<'_> {
    /// The Appendix E answerability check on the given segments (fitted to the window).
    pub(crate) async fn answerability(
        &self,
        run: &mut Run,
        mut step: Step,
        segments: &[usize],
    ) -> Result<Check, NavigateError> {
        let (text, shown) = self.window().fit(
            self.prompts,
            PromptId::Answerability,
            &run.question,
            self.memory,
            segments,
            &[],
        )?;
        step.kind = StepKind::Answerability;
        step.segments = shown;
        let p = self.prompts.render(
            PromptId::Answerability,
            &[("segments", &text), ("question", &run.question)],
        )?;
        let schema = json!({"type": "object", "properties": {
            "reasoning": {"type": "string", "maxLength": 600},
            "verdict_action": {"type": "integer", "enum": [-2, -1]},
            "verdict_answer": {"type": "string", "maxLength": 200}
        }, "required": ["reasoning", "verdict_action", "verdict_answer"]});
        let check = match self
            .llm
            .chat_json_logprobs::<Answerability>(
                "answerability",
                vec![Message::user(p)],
                Some(JsonSchema {
                    name: "answerability".into(),
                    schema,
                }),
                CHECK_TOP_LOGPROBS,
            )
            .await
        {
            Ok(r) => {
                let p_answerable = p_answerable(&r.reply.logprobs);
                if p_answerable.is_none() && !r.reply.logprobs.is_empty() {
                    tracing::debug!("no action token found among the check's log probabilities");
                }
                if r.reply.logprobs.is_empty() {
                    warn_no_logprobs(self.opts.check_threshold);
                }
                step.p_answerable = p_answerable;
                let a = r.value;
                let given = check_answer(
                    a.action,
                    &a.answer,
                    &a.reasoning,
                    &text,
                    &run.question,
                    run.multiple_choice,
                );
                let sampled = given.is_ok();
                step.action = Some(if sampled { -2 } else { -1 });
                step.reason = a.reasoning.clone();
                // The verdict: P(answerable) against the threshold when both are there, else
                // the sampled action.
                let verdict = match (self.opts.check_threshold, p_answerable) {
                    (t, Some(p)) if t > 0.0 => p >= t,
                    _ => sampled,
                };
                match &given {
                    Err(why) => step.note = why.clone(),
                    Ok(found) if found.as_str() != a.answer.trim() => {
                        step.note = format!(
                        "action -2; answer field {:?}, answer taken from the reasoning: {found:?}",
                        a.answer
                    )
                    }
                    Ok(_) => {}
                }
                if let Some(p) = p_answerable.filter(|_| self.opts.check_threshold > 0.0) {
                    let t = self.opts.check_threshold;
                    let said = if verdict { ">=" } else { "<" };
                    let mut note = format!("P(answerable) {p:.3} {said} {t}");
                    if !step.note.is_empty() {
                        note = format!("{}; {note}", step.note);
                    }
                    step.note = note;
                }
                Check {
                    answered: verdict && sampled,
                    stop: verdict && !sampled,
                    answer: given.unwrap_or(a.answer),
                    reasoning: a.reasoning,
                }
            }
            Err(e) => {
                // An unparsable check counts as "cannot answer" with that reason; navigation goes on.
                run.failures.push(format!("answerability: {e}"));
                step.action = Some(-1);
                step.reason = "the answerability check failed".into();
                step.note = "check failed".into();
                step.failed = true;
                Check {
                    reasoning: step.reason.clone(),
                    ..Check::default()
                }
            }
        };
        run.push(step);
        Ok(check)
    }
}

/// Alternatives read at the check's action token.
const CHECK_TOP_LOGPROBS: u8 = 5;

/// Says once per process that the server gave no log probabilities, so the check's verdict is
/// the sampled action (said only when a threshold was asked for).
fn warn_no_logprobs(threshold: f64) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static SAID: AtomicBool = AtomicBool::new(false);
    if threshold > 0.0 && !SAID.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "the LLM server returned no log probabilities: the answerability check's verdict is the sampled action, navigate.check_threshold ({threshold}) is not applied"
        );
    }
}

/// P(answerable) of an answerability reply: at the token that writes the digit of the
/// `verdict_action` value (-2 or -1), the probability of "2" over that of "1" among the top
/// alternatives (renormalised over the two). The value is found in the text the tokens spell,
/// not in the reply's content: a server may hand back the content without the Markdown fence the
/// model wrote around it (llama-server does, for the 1.5B model's replies), so the two need not
/// agree. None when the reply has no log probabilities, the tokens spell no action key, or
/// neither digit is among the alternatives.
pub(crate) fn p_answerable(logprobs: &[crate::llm::TokenLogprob]) -> Option<f64> {
    let content: String = logprobs.iter().map(|t| t.token.as_str()).collect();
    let key = content
        .find("\"verdict_action\"")
        .or_else(|| content.find("\"action\""))?;
    let after = &content[key..];
    let colon = key + after.find(':')?;
    let value = colon + 1 + content[colon + 1..].find(|c: char| !c.is_whitespace())?;
    // The digit after the sign.
    let digit = if content[value..].starts_with('-') {
        value + 1
    } else {
        value
    };
    let mut at = 0usize;
    for t in logprobs {
        let end = at + t.token.len();
        if digit < end {
            let offset = digit - at;
            let (mut p1, mut p2) = (0.0f64, 0.0f64);
            let alternatives: Vec<(&str, f64)> = if t.top.is_empty() {
                vec![(t.token.as_str(), t.logprob)]
            } else {
                t.top.iter().map(|(s, lp)| (s.as_str(), *lp)).collect()
            };
            for (text, lp) in alternatives {
                match text.as_bytes().get(offset) {
                    Some(b'2') => p2 += lp.exp(),
                    Some(b'1') => p1 += lp.exp(),
                    _ => {}
                }
            }
            if t.top.is_empty() {
                // Only the sampled token is known: the other digit has the rest.
                if p2 > 0.0 {
                    p1 = 1.0 - p2;
                } else if p1 > 0.0 {
                    p2 = 1.0 - p1;
                }
            }
            return (p1 + p2 > 0.0).then(|| p2 / (p1 + p2));
        }
        at = end;
    }
    None
}
#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(pieces: &[(&str, &[(&str, f64)])]) -> Vec<crate::llm::TokenLogprob> {
        pieces
            .iter()
            .map(|(t, top)| crate::llm::TokenLogprob {
                token: t.to_string(),
                logprob: top.first().map_or(0.0, |x| x.1.ln()),
                top: top.iter().map(|(s, p)| (s.to_string(), p.ln())).collect(),
            })
            .collect()
    }

    #[test]
    fn p_answerable_is_read_at_the_action_digit() {
        let content = r#"{"reasoning": "x", "verdict_action": -1, "verdict_answer": ""}"#;
        let split = [
            "{\"", "reason", "ing", "\":", " \"", "x", "\",", " \"", "verdict", "_action", "\":",
            " -", "1", ",", " \"", "verdict", "_answer", "\":", " \"\"", "}",
        ];
        assert_eq!(split.concat(), content);
        let at_digit: &[(&str, f64)] = &[("1", 0.7), ("2", 0.2), ("0", 0.1)];
        let pieces: Vec<(&str, &[(&str, f64)])> = split
            .iter()
            .map(|&t| (t, if t == "1" { at_digit } else { &[][..] }))
            .collect();
        let p = p_answerable(&tokens(&pieces)).unwrap();
        assert!((p - 0.2 / 0.9).abs() < 1e-9, "{p}");
        // The sign and the digit as one token.
        let joined = r#"{"verdict_action": -2}"#;
        let lp = tokens(&[
            ("{\"verdict_action\": ", &[]),
            ("-2", &[("-2", 0.6), ("-1", 0.4)]),
            ("}", &[]),
        ]);
        assert_eq!(
            lp.iter().map(|t| t.token.as_str()).collect::<String>(),
            joined
        );
        let p = p_answerable(&lp).unwrap();
        assert!((p - 0.6).abs() < 1e-9, "{p}");
        // The model wrote a fence the server took off the content: read in the tokens' text.
        let fenced = tokens(&[
            ("```", &[]),
            ("json\n", &[]),
            ("{\"verdict_action\": -", &[]),
            ("1", &[("1", 0.75), ("2", 0.25)]),
            ("}\n```", &[]),
        ]);
        let p = p_answerable(&fenced).unwrap();
        assert!((p - 0.25).abs() < 1e-9, "{p}");
        // No log probabilities, or tokens that spell no action key: no reading.
        assert_eq!(p_answerable(&[]), None);
        assert_eq!(
            p_answerable(&tokens(&[("something else", &[("1", 1.0)])])),
            None
        );
    }

    #[test]
    fn a_check_answer_in_the_wrong_field_is_taken_only_from_the_text() {
        let text = "Delta is the city where Beta has its headquarters. Beta was founded in 1887.";
        let echo = "the final answer, or an empty string for -1";
        let q = "Is Beta in Delta, and where are its headquarters?";
        let ok = |action, answer, reasoning| {
            check_answer(action, answer, reasoning, text, q, false).ok()
        };
        // The answer field itself.
        assert_eq!(
            ok(-2, "Delta", "Beta is in Delta.").as_deref(),
            Some("Delta")
        );
        // -1 keeps its meaning whatever the answer field says.
        assert_eq!(ok(-1, "Delta", ""), None);
        // The answer written into the reasoning: the whole of a short one, or after a cue.
        assert_eq!(ok(-2, echo, "Delta.").as_deref(), Some("Delta"));
        assert_eq!(
            ok(
                -2,
                "",
                "Beta has its headquarters there, so the answer is Delta."
            )
            .as_deref(),
            Some("Delta")
        );
        assert_eq!(ok(-2, " ", "Yes").as_deref(), Some("Yes"));
        // Not written in the text: no answer.
        assert_eq!(ok(-2, echo, "Not sure."), None);
        assert_eq!(ok(-2, "", "The answer is Gamma."), None);
        assert_eq!(
            ok(
                -2,
                "",
                "The text names a city and a company and a year of founding."
            ),
            None
        );
    }

    #[test]
    fn a_minus_2_that_says_the_text_lacks_the_answer_or_copies_the_text_is_minus_1() {
        // Replies of the 0.5B model on the LongBench-style items (runs/navigation-longbench-style).
        let text = "The Thorn in the Heart (French: 'L'épine dans le coeur') is a 2009 French \
                    documentary film directed by Michel Gondry. It was given a special screening.";
        let copied = "The Thorn in the Heart (French: 'L'épine dans le coeur') is a 2009 French documentary film directed by Michel Gondry.";
        let q = "In what city did the \"Prince of tenors\" star in a film based on an opera?";
        let why = check_answer(
            -2,
            "The Thorn in the Heart",
            "The text does not provide any information about the location of the film.",
            text,
            q,
            false,
        )
        .unwrap_err();
        assert!(why.contains("information is missing"), "{why}");
        let why = check_answer(-2, copied, "It is a documentary.", text, q, false).unwrap_err();
        assert!(why.contains("a copy of the text"), "{why}");
        // A long option text is an answer to a multiple-choice question.
        assert_eq!(
            check_answer(-2, copied, "It is a documentary.", text, q, true).as_deref(),
            Ok(copied)
        );
        // "No/no" answers no "which" question, only a yes/no one.
        let which = "Based on a True Story... is an album by which country music star?";
        let why = check_answer(-2, "No/no", "", text, which, false).unwrap_err();
        assert!(why.contains("not a yes/no question"), "{why}");
        assert_eq!(
            check_answer(-2, "No", "", text, "Are both films French?", false).as_deref(),
            Ok("No")
        );
        // A plain -1 needs no note.
        assert_eq!(
            check_answer(-1, "", "Missing.", text, q, false),
            Err(String::new())
        );
    }

    #[test]
    fn template_echoes_are_not_answers() {
        for echo in [
            "the final answer",
            "The final answer, or an empty string for -1",
            "  Final answer. ",
            "",
        ] {
            assert!(is_template_echo(echo), "{echo:?}");
        }
        for real in ["Lucerne", "the final answer is Lucerne", "1887", "no"] {
            assert!(!is_template_echo(real), "{real:?}");
        }
    }
}
