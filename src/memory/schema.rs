//! The schema-based entity extractor, standing in for CoreNLP (which the paper used and which
//! cannot run here): capitalised spans, dates, years, measures and quoted titles, from the
//! segment text only. Deterministic and cheap; its entities are united with the LLM's.
//!
//! What it does not yield, because it names nothing a question can ask about (issue 38): the
//! rendering labels of the datasets' own document layout ("Passage 12:" lines), bare numbers
//! that are neither years, dates nor measures, and a capitalised word that stands alone at the
//! start of a sentence unless the same word is also capitalised mid-sentence in the segment
//! ("Born in Paris" yields "Paris", not "Born").

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

/// A line that is only a document-layout label: "Passage 12:", "Document 3:", "Paragraph 4:".
fn label_re() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    re(
        &R,
        r"(?m)^[ \t]*(?:Passage|Document|Paragraph|Chunk)[ \t]+\d+[ \t]*:[ \t]*$",
    )
}

/// Whether `line` is only a document-layout label ("Passage 12:").
pub fn is_layout_label(line: &str) -> bool {
    label_re().is_some_and(|r| r.is_match(line))
}

/// Words after a number that make it a measure ("38 metres", "12 million", "5 km").
const UNITS: &[&str] = &[
    "%",
    "percent",
    "per",
    "metres",
    "meters",
    "metre",
    "meter",
    "m",
    "km",
    "kilometres",
    "kilometers",
    "cm",
    "mm",
    "miles",
    "mile",
    "mi",
    "feet",
    "ft",
    "foot",
    "inches",
    "inch",
    "in",
    "kg",
    "kilograms",
    "g",
    "grams",
    "tonnes",
    "tons",
    "pounds",
    "lb",
    "lbs",
    "acres",
    "hectares",
    "ha",
    "square",
    "sq",
    "years",
    "year",
    "months",
    "days",
    "hours",
    "minutes",
    "seconds",
    "million",
    "billion",
    "thousand",
    "hundred",
    "people",
    "inhabitants",
    "residents",
    "seats",
    "members",
    "employees",
    "students",
    "episodes",
    "games",
    "goals",
    "points",
    "votes",
    "copies",
    "mph",
    "km/h",
    "degrees",
    "°c",
    "°f",
    "storeys",
    "stories",
    "floors",
    "th",
    "st",
    "nd",
    "rd",
    "century",
    "centuries",
    "bc",
    "bce",
    "ad",
    "ce",
    "s",
];

/// Whether the number found at `start..end` of `text` is a measure: a currency sign before it,
/// or a unit word after it.
fn is_measure(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].trim_end();
    if before.ends_with(['$', '£', '€', '¥']) || before.ends_with("US$") {
        return true;
    }
    let after = text[end..].trim_start_matches([' ', '-']);
    if after.starts_with('%') || after.starts_with('°') {
        return true;
    }
    let word: String = after
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '/' || *c == '°')
        .collect::<String>()
        .to_lowercase();
    // An ordinal suffix glued to the number ("19th") is a measure of time here.
    if text[end..].starts_with(|c: char| c.is_alphabetic()) {
        return matches!(word.as_str(), "th" | "st" | "nd" | "rd" | "s");
    }
    !word.is_empty() && UNITS.contains(&word.as_str())
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
    // Layout labels are blanked (same length, so nothing else moves).
    let blanked;
    let text = match label_re() {
        Some(r) if r.is_match(text) => {
            blanked = r
                .replace_all(text, |c: &regex::Captures<'_>| " ".repeat(c[0].len()))
                .into_owned();
            blanked.as_str()
        }
        _ => text,
    };
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
            if is_year {
                found.insert(SchemaEntity {
                    name: n.to_string(),
                    kind: "time",
                });
            } else if digits >= 2 && is_measure(text, m.start(), m.end()) {
                found.insert(SchemaEntity {
                    name: n.to_string(),
                    kind: "number",
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

/// Whether the word starting at `start` begins a sentence (or a line, or the text).
fn starts_sentence(text: &str, start: usize) -> bool {
    let before = text[..start].trim_end_matches([' ', '\t', '"', '“', '\'', '‘', '(', '[']);
    before.is_empty() || before.ends_with(['.', '!', '?', ':', '\n', '\r'])
}

/// Maximal runs of capitalised words (with connectors inside), leading function words removed;
/// a lone capitalised word at a sentence start is kept only when the segment also capitalises
/// it mid-sentence.
fn capitalised_spans(text: &str) -> Vec<String> {
    let Some(r) = word_re() else {
        return Vec::new();
    };
    let mut spans: Vec<(String, bool)> = Vec::new();
    let mut mid_sentence: BTreeSet<String> = BTreeSet::new();
    let mut current: Vec<(usize, usize, String)> = Vec::new();
    let mut last_end = 0usize;
    let flush = |current: &mut Vec<(usize, usize, String)>, spans: &mut Vec<(String, bool)>| {
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
                let lone_initial = current.len() == 1 && starts_sentence(text, first.0);
                spans.push((s, lone_initial));
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
        if is_capitalised(word) && !starts_sentence(text, m.start()) {
            mid_sentence.insert(word.trim_end_matches('.').to_string());
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
        .into_iter()
        .filter(|(s, lone_initial)| !lone_initial || mid_sentence.contains(s))
        .map(|(s, _)| s)
        .collect()
}

/// A text's paragraphs, lower-cased: its lines, a short line without a full stop (a title)
/// joined to the next, layout labels left out. The relation support check and the navigators'
/// second hop read a segment by them.
pub fn paragraphs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || is_layout_label(l) {
            if !pending.is_empty() {
                out.push(std::mem::take(&mut pending));
            }
            continue;
        }
        if !pending.is_empty() {
            pending.push(' ');
        }
        pending.push_str(&l.to_lowercase());
        let title = l.split_whitespace().count() <= 10 && !l.ends_with(['.', '!', '?', '"']);
        if !title {
            out.push(std::mem::take(&mut pending));
        }
    }
    if !pending.is_empty() {
        out.push(pending);
    }
    out
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
    fn longbench_rendering_yields_no_labels_bare_numbers_or_sentence_initial_words() {
        let text = "Passage 12:\nThe Velden Bridge\nThe Velden Bridge crosses the Aare. Born in \
                    Bern, Clara Hoffmann designed it in 1887; its span is 38 metres and it cost \
                    $120,000. It has 14 arches. Bern honoured her, and she visited Bern often.\n\
                    Passage 13:\nKarl Weber\nKarl Weber was a painter. Later he moved to Lyon.";
        let n = names(text);
        for bad in [
            "Passage",
            "Passage 12",
            "12",
            "13",
            "14",
            "Born",
            "Later",
            "It",
        ] {
            assert!(!n.contains(&bad.to_string()), "{bad} yielded: {n:?}");
        }
        for want in [
            "Velden Bridge",
            "Aare",
            "Bern",
            "Clara Hoffmann",
            "1887",
            "38",
            "120,000",
            "Karl Weber",
            "Lyon",
        ] {
            assert!(n.contains(&want.to_string()), "missing {want}: {n:?}");
        }
    }

    #[test]
    fn a_sentence_initial_word_is_kept_when_also_capitalised_mid_sentence() {
        // "Zurich" starts the second sentence and is named mid-sentence in the first.
        let n = names("She moved to Zurich. Zurich was large. Meanwhile rain fell.");
        assert!(n.contains(&"Zurich".to_string()), "{n:?}");
        assert!(!n.contains(&"Meanwhile".to_string()), "{n:?}");
        // Alone at a sentence start and nowhere else: dropped.
        assert!(!names("Aare flows north.").contains(&"Aare".to_string()));
    }

    #[test]
    fn spans_stop_at_punctuation_and_sentence_ends() {
        let n = names("We saw Lucerne, Bern and Zurich. Geneva lies west. I saw Geneva.");
        for want in ["Lucerne", "Bern", "Zurich", "Geneva"] {
            assert!(n.contains(&want.to_string()), "{want}: {n:?}");
        }
        assert!(!n.iter().any(|s| s.contains("Zurich Geneva")), "{n:?}");
    }
}
