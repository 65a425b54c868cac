//! The schema-based entity extractor, standing in for CoreNLP (which the paper used and which
//! cannot run here): capitalised spans, dates, numbers and quoted titles, from the segment text
//! only. Deterministic and cheap; its entities are united with the LLM's.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use regex::Regex;

/// An entity found by the extractor: its surface form and kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SchemaEntity {
    pub name: String,
    pub kind: &'static str,
}

/// Capitalised words that start sentences but name nothing.
const FUNCTION_WORDS: &[&str] = &[
    "a",
    "about",
    "after",
    "again",
    "all",
    "also",
    "although",
    "an",
    "and",
    "another",
    "any",
    "as",
    "at",
    "because",
    "before",
    "besides",
    "both",
    "but",
    "by",
    "during",
    "each",
    "even",
    "every",
    "for",
    "from",
    "he",
    "her",
    "here",
    "his",
    "how",
    "however",
    "i",
    "if",
    "in",
    "into",
    "it",
    "its",
    "later",
    "many",
    "more",
    "most",
    "my",
    "no",
    "not",
    "now",
    "of",
    "on",
    "once",
    "one",
    "only",
    "or",
    "other",
    "our",
    "over",
    "she",
    "since",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "though",
    "through",
    "thus",
    "to",
    "under",
    "until",
    "upon",
    "we",
    "what",
    "when",
    "where",
    "whether",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "with",
    "within",
    "without",
    "yet",
    "you",
    "your",
    "today",
    "yesterday",
    "according",
    "among",
    "between",
    "despite",
    "following",
    "further",
    "meanwhile",
    "moreover",
    "nevertheless",
    "instead",
    "unlike",
];

/// Lower-case words allowed inside a capitalised span ("University of Zurich", "Leonardo da Vinci").
const CONNECTORS: &[&str] = &[
    "of", "de", "da", "di", "del", "der", "van", "von", "la", "le", "du", "dos", "y", "bin",
];

const MONTHS: &str =
    "January|February|March|April|May|June|July|August|September|October|November|December";

fn re(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

fn date_re() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    re(
        &R,
        &format!(
            r"\b(?:(?:{MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}|\d{{1,2}}\s+(?:{MONTHS})\s+\d{{4}}|(?:{MONTHS})\s+\d{{4}})\b"
        ),
    )
}

fn number_re() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    re(&R, r"\b\d+(?:[.,]\d+)*\b")
}

fn quoted_re() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    re(&R, r#""([^"\n]{2,80})"|“([^”\n]{2,80})”"#)
}

fn word_re() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    // Words with letters, inner apostrophes, hyphens and periods of initials ("J.", "St.").
    re(&R, r"[\p{L}\p{N}][\p{L}\p{N}'’\-]*\.?")
}

fn is_capitalised(word: &str) -> bool {
    word.chars().next().is_some_and(|c| c.is_uppercase())
}

/// Runs the extractor over one segment's text.
pub fn extract(text: &str) -> Vec<SchemaEntity> {
    let mut found = BTreeSet::new();
    let mut covered: Vec<(usize, usize)> = Vec::new();
    if let Some(r) = date_re() {
        for m in r.find_iter(text) {
            found.insert(SchemaEntity {
                name: m.as_str().to_string(),
                kind: "time",
            });
            covered.push((m.start(), m.end()));
        }
    }
    if let Some(r) = quoted_re() {
        for c in r.captures_iter(text) {
            if let Some(m) = c.get(1).or_else(|| c.get(2)) {
                let t = m.as_str().trim();
                if t.split_whitespace().count() <= 10 && t.chars().any(|c| c.is_alphabetic()) {
                    found.insert(SchemaEntity {
                        name: t.to_string(),
                        kind: "work",
                    });
                }
            }
        }
    }
    if let Some(r) = number_re() {
        for m in r.find_iter(text) {
            if covered
                .iter()
                .any(|(s, e)| m.start() >= *s && m.end() <= *e)
            {
                continue;
            }
            let n = m.as_str();
            let digits = n.chars().filter(|c| c.is_ascii_digit()).count();
            let is_year =
                digits == 4 && n.len() == 4 && (n.starts_with('1') || n.starts_with("20"));
            if digits >= 2 {
                found.insert(SchemaEntity {
                    name: n.to_string(),
                    kind: if is_year { "time" } else { "number" },
                });
            }
        }
    }
    for span in capitalised_spans(text) {
        found.insert(SchemaEntity {
            name: span,
            kind: "other",
        });
    }
    found.into_iter().collect()
}

/// Maximal runs of capitalised words (with connectors inside), leading function words removed.
fn capitalised_spans(text: &str) -> Vec<String> {
    let Some(r) = word_re() else {
        return Vec::new();
    };
    let mut spans = Vec::new();
    let mut current: Vec<(usize, usize, String)> = Vec::new();
    let mut last_end = 0usize;
    let flush = |current: &mut Vec<(usize, usize, String)>, spans: &mut Vec<String>| {
        while current.last().is_some_and(|(_, _, w)| !is_capitalised(w)) {
            current.pop();
        }
        while current.first().is_some_and(|(_, _, w)| {
            FUNCTION_WORDS.contains(&w.to_lowercase().trim_end_matches('.'))
        }) {
            current.remove(0);
        }
        if let (Some(first), Some(last)) = (current.first(), current.last()) {
            let s = text[first.0..last.1].trim_end_matches('.').to_string();
            if s.chars().filter(|c| c.is_alphabetic()).count() >= 2 {
                spans.push(s);
            }
        }
        current.clear();
    };
    for m in r.find_iter(text) {
        let word = m.as_str();
        // A span continues only across a single run of spaces (no punctuation in between).
        let gap = &text[last_end..m.start()];
        let contiguous = current.is_empty() || (!gap.is_empty() && gap.chars().all(|c| c == ' '));
        let prev_ends_sentence = current
            .last()
            .is_some_and(|(_, _, w)| w.ends_with('.') && w.chars().count() > 2);
        if !contiguous || prev_ends_sentence {
            flush(&mut current, &mut spans);
        }
        if is_capitalised(word) || (!current.is_empty() && CONNECTORS.contains(&word)) {
            current.push((m.start(), m.end(), word.to_string()));
        } else {
            flush(&mut current, &mut spans);
        }
        last_end = m.end();
    }
    flush(&mut current, &mut spans);
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        extract(text).into_iter().map(|e| e.name).collect()
    }

    #[test]
    fn spans_dates_numbers_titles() {
        let text = "The Velden Bridge over the river Aare was designed by Clara Hoffmann. It opened on 3 May 1887 \
                    and its span is 38 metres. She studied at the University of Zurich and wrote \"On Arches\".";
        let n = names(text);
        for want in [
            "Velden Bridge",
            "Aare",
            "Clara Hoffmann",
            "3 May 1887",
            "38",
            "University of Zurich",
            "On Arches",
        ] {
            assert!(n.contains(&want.to_string()), "missing {want}: {n:?}");
        }
        assert!(
            !n.contains(&"The".to_string()) && !n.contains(&"It".to_string()),
            "{n:?}"
        );
        assert!(!n.iter().any(|s| s.starts_with("The ")), "{n:?}");
    }

    #[test]
    fn years_and_ranges() {
        let n = extract("Clara Hoffmann (1851-1923) was a civil engineer.");
        assert!(
            n.contains(&SchemaEntity {
                name: "1851".into(),
                kind: "time"
            }),
            "{n:?}"
        );
        assert!(n.contains(&SchemaEntity {
            name: "1923".into(),
            kind: "time"
        }));
        assert!(n.iter().any(|e| e.name == "Clara Hoffmann"));
    }

    #[test]
    fn spans_stop_at_punctuation_and_sentence_ends() {
        let n = names("Lucerne, Bern and Zurich. Geneva lies west.");
        for want in ["Lucerne", "Bern", "Zurich", "Geneva"] {
            assert!(n.contains(&want.to_string()), "{want}: {n:?}");
        }
        assert!(!n.iter().any(|s| s.contains("Zurich Geneva")), "{n:?}");
    }
}
