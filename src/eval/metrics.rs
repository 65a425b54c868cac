//! The official metrics, exactly as ../shared/data/README.md defines them.

use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;

/// Python's `string.punctuation`.
const PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

fn articles() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"\b(a|an|the)\b").ok())
        .as_ref()
}

/// normalize_answer: lowercase; remove every ASCII punctuation character; replace the words
/// a/an/the with a space; collapse whitespace.
pub fn normalize_answer(s: &str) -> String {
    let lower = s.to_lowercase();
    let no_punct: String = lower
        .chars()
        .filter(|c| !PUNCTUATION.contains(*c))
        .collect();
    let no_articles = match articles() {
        Some(r) => r.replace_all(&no_punct, " ").into_owned(),
        None => no_punct,
    };
    no_articles.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn token_f1(pred: &[&str], gold: &[&str]) -> f64 {
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for t in gold {
        *counts.entry(t).or_default() += 1;
    }
    let mut common = 0i64;
    for t in pred {
        if let Some(c) = counts.get_mut(t) {
            if *c > 0 {
                *c -= 1;
                common += 1;
            }
        }
    }
    if common == 0 {
        return 0.0;
    }
    let p = common as f64 / pred.len() as f64;
    let r = common as f64 / gold.len() as f64;
    2.0 * p * r / (p + r)
}

/// LongBench qa_f1_score of one prediction against one gold answer.
pub fn qa_f1(prediction: &str, gold: &str) -> f64 {
    let (p, g) = (normalize_answer(prediction), normalize_answer(gold));
    let pt: Vec<&str> = p.split_whitespace().collect();
    let gt: Vec<&str> = g.split_whitespace().collect();
    token_f1(&pt, &gt)
}

/// LongBench F1 of an item: the maximum over its gold answers (0 without answers).
pub fn longbench_f1(prediction: &str, golds: &[String]) -> f64 {
    golds
        .iter()
        .map(|g| qa_f1(prediction, g))
        .fold(0.0, f64::max)
}

/// HotpotQA's official exact match: normalised equality.
pub fn hotpot_em(prediction: &str, gold: &str) -> f64 {
    f64::from(u8::from(
        normalize_answer(prediction) == normalize_answer(gold),
    ))
}

/// HotpotQA's official F1: token F1, except that when either normalised side is "yes", "no" or
/// "noanswer" and the two differ, F1 is 0.
pub fn hotpot_f1(prediction: &str, gold: &str) -> f64 {
    let (p, g) = (normalize_answer(prediction), normalize_answer(gold));
    let special = ["yes", "no", "noanswer"];
    if (special.contains(&p.as_str()) || special.contains(&g.as_str())) && p != g {
        return 0.0;
    }
    let pt: Vec<&str> = p.split_whitespace().collect();
    let gt: Vec<&str> = g.split_whitespace().collect();
    token_f1(&pt, &gt)
}

/// QuALITY accuracy of one item: the predicted option letter equals the gold letter.
pub fn choice_accuracy(predicted_letter: &str, gold_letter: &str) -> f64 {
    let norm = |s: &str| {
        s.trim()
            .trim_matches(|c| c == '(' || c == ')' || c == '.')
            .to_ascii_uppercase()
    };
    f64::from(u8::from(
        !gold_letter.trim().is_empty() && norm(predicted_letter) == norm(gold_letter),
    ))
}

/// A dataset score: 100 x the mean (0 for no items).
pub fn score(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        100.0 * values.iter().sum::<f64>() / values.len() as f64
    }
}

/// (EM, F1) of `prediction` against `answers` by `dataset`'s official metric (HotpotQA's own
/// F1 for `hotpotqa`, LongBench's over the answer list otherwise; accuracy for a letter).
pub fn answer_scores(
    dataset: &str,
    answers: &[String],
    gold_letter: Option<&str>,
    prediction: &str,
) -> (f64, f64) {
    if let Some(letter) = gold_letter {
        let acc = choice_accuracy(prediction, letter);
        return (acc, acc);
    }
    let em = answers
        .iter()
        .map(|g| hotpot_em(prediction, g))
        .fold(0.0, f64::max);
    let f1 = if dataset == "hotpotqa" {
        answers
            .iter()
            .map(|g| hotpot_f1(prediction, g))
            .fold(0.0, f64::max)
    } else {
        longbench_f1(prediction, answers)
    };
    (em, f1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn normalisation_matches_the_official_rules() {
        assert_eq!(normalize_answer("The  Eiffel Tower!"), "eiffel tower");
        assert_eq!(normalize_answer("An apple, a day."), "apple day");
        // Articles only as whole words; punctuation is removed before articles are matched.
        assert_eq!(
            normalize_answer("Theatre of the-Absurd"),
            "theatre of theabsurd"
        );
        assert_eq!(normalize_answer("a.b"), "ab");
        assert_eq!(normalize_answer("  A  "), "");
        // Non-ASCII punctuation is kept (Python's string.punctuation is ASCII only).
        assert_eq!(normalize_answer("“Rome”"), "“rome”");
    }

    #[test]
    fn f1_by_hand() {
        // pred: "rome italy" gold: "rome" -> common 1, P 1/2, R 1 -> F1 2/3.
        assert!(close(qa_f1("Rome, Italy", "Rome"), 2.0 / 3.0));
        // Multiset intersection: pred "a b b" vs gold "b b b" (no articles here: x y y vs y y y).
        assert!(close(
            qa_f1("x y y", "y y y"),
            2.0 * (2.0 / 3.0) * (2.0 / 3.0) / (4.0 / 3.0)
        ));
        assert_eq!(qa_f1("Paris", "Rome"), 0.0);
        assert_eq!(qa_f1("the", "a"), 0.0, "both normalise to nothing");
        // Max over gold answers.
        assert!(close(
            longbench_f1("New York City", &["NYC".into(), "New York".into()]),
            0.8
        ));
        assert_eq!(longbench_f1("x", &[]), 0.0);
    }

    #[test]
    fn hotpot_yes_no_rule() {
        assert_eq!(hotpot_em("Yes.", "yes"), 1.0);
        assert_eq!(hotpot_f1("yes", "yes"), 1.0);
        assert_eq!(
            hotpot_f1("yes it is", "yes"),
            0.0,
            "gold is yes and they differ"
        );
        assert_eq!(
            hotpot_f1("no", "no way"),
            0.0,
            "prediction is no and they differ"
        );
        // LongBench F1 has no such rule.
        assert!(close(qa_f1("yes it is", "yes"), 0.5));
        assert!(close(hotpot_f1("The Rome", "Rome Italy"), 2.0 / 3.0));
        assert_eq!(hotpot_em("Rome", "Rome, Italy"), 0.0);
    }

    #[test]
    fn accuracy_and_score() {
        assert_eq!(choice_accuracy("B", "(B)"), 1.0);
        assert_eq!(choice_accuracy("b.", "B"), 1.0);
        assert_eq!(choice_accuracy("C", "B"), 0.0);
        assert_eq!(choice_accuracy("", ""), 0.0);
        assert!(close(score(&[1.0, 0.0, 0.5]), 50.0));
        assert_eq!(score(&[]), 0.0);
    }
}
