//! Excerpts: chosen sentences of a document shown under their passages' headers, in document
//! order, within a token budget. The sentence-grain answer context: the navigators' final
//! context in sentence mode, the sentence baseline's and the gold-sentences oracle's.
//!
//! Invariants: an excerpt holds only text of the document (headers and sentences verbatim,
//! joined by a space, "..." where sentences between them were left out, and a blank line
//! between passages); its `spans` are exactly the document ranges it shows; [`fit`] never
//! exceeds its budget.

use std::collections::BTreeSet;

use super::count_tokens;
use super::sentences::Sentences;
use super::span::{self, Span};

impl Excerpt {
    /// The units (segments: consecutive byte ranges of the document) that the chosen sentences
    /// begin in, each once, in document order.
    pub fn units(&self, index: &Sentences, units: &[Span]) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .sentences
            .iter()
            .filter_map(|&i| {
                let start = index.sentences.get(i)?.span.0;
                let u = units.partition_point(|r| r.1 <= start);
                units.get(u).filter(|r| r.0 <= start).map(|_| u)
            })
            .collect();
        out.dedup();
        out
    }
}

/// Below this many tokens of room no sentence fits: filling stops.
const MIN_SENTENCE_TOKENS: usize = 4;

/// What an excerpt shows: its text, the document ranges it holds (merged) and the sentences
/// chosen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Excerpt {
    pub text: String,
    pub spans: Vec<Span>,
    /// Indices into the document's [`Sentences`] (empty for an excerpt of given spans).
    pub sentences: Vec<usize>,
    /// cl100k tokens of `text`.
    pub tokens: usize,
}

/// Fills `budget` tokens with the sentences of `priority` (best first; one that does not fit is
/// skipped and the next tried), each, with `neighbours`, followed by its window: the sentences
/// before and after it in its passage ([`Sentences::neighbours`]), as far as they fit (sentence
/// windows). Shown in document order under the passages' headers.
pub fn fit(
    document: &str,
    index: &Sentences,
    priority: &[usize],
    budget: usize,
    neighbours: bool,
) -> Excerpt {
    let mut chosen: BTreeSet<usize> = BTreeSet::new();
    let mut tokens = 0usize;
    let try_add = |i: usize, chosen: &mut BTreeSet<usize>, tokens: &mut usize| -> bool {
        if i >= index.sentences.len() || chosen.contains(&i) {
            return false;
        }
        chosen.insert(i);
        let n = count_tokens(&render(document, index, &spans_of(index, chosen)));
        if n <= budget {
            *tokens = n;
            true
        } else {
            chosen.remove(&i);
            false
        }
    };
    for &i in priority {
        if budget.saturating_sub(tokens) < MIN_SENTENCE_TOKENS {
            break;
        }
        if try_add(i, &mut chosen, &mut tokens) && neighbours {
            // Its window: the sentence before it in its passage, then the one after it.
            for j in index.neighbours(i).into_iter().flatten() {
                try_add(j, &mut chosen, &mut tokens);
            }
        }
    }
    let pieces = spans_of(index, &chosen);
    let text = render(document, index, &pieces);
    Excerpt {
        spans: shown_spans(index, &pieces),
        tokens: count_tokens(&text),
        text,
        sentences: chosen.into_iter().collect(),
    }
}

/// The excerpt of the given document ranges (the gold sentences), with no budget.
pub fn of_spans(document: &str, index: &Sentences, spans: &[Span]) -> Excerpt {
    let mut pieces: Vec<Span> = spans
        .iter()
        .copied()
        .filter(|s| s.0 < s.1 && s.1 <= document.len())
        .collect();
    pieces.sort_unstable();
    pieces.dedup();
    let text = render(document, index, &pieces);
    Excerpt {
        spans: shown_spans(index, &pieces),
        tokens: count_tokens(&text),
        text,
        sentences: Vec::new(),
    }
}

fn spans_of(index: &Sentences, chosen: &BTreeSet<usize>) -> Vec<Span> {
    chosen.iter().map(|&i| index.sentences[i].span).collect()
}

/// The ranges shown: each piece and the header of each passage a piece lies in.
fn shown_spans(index: &Sentences, pieces: &[Span]) -> Vec<Span> {
    let mut out: Vec<Span> = pieces.to_vec();
    for p in pieces {
        if let Some(k) = index.passage_at(p.0) {
            out.push(index.passages[k].header);
        }
    }
    span::merge(out)
}

/// `pieces` (sorted document ranges) as text: grouped by passage, each group under its header,
/// pieces joined by a space when only whitespace lies between them in the document and by
/// " ... " otherwise; groups (and, outside passages, pieces far apart) separated by a blank line.
fn render(document: &str, index: &Sentences, pieces: &[Span]) -> String {
    let mut out = String::new();
    let mut prev: Option<(Option<usize>, Span)> = None;
    for &piece in pieces {
        let Some(text) = document.get(piece.0..piece.1) else {
            continue;
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let passage = index.passage_at(piece.0);
        let adjacent = |before: Span| {
            document
                .get(before.1.min(piece.0)..piece.0)
                .is_some_and(|gap| gap.trim().is_empty())
        };
        match prev {
            Some((p, before)) if p == passage && (passage.is_some() || adjacent(before)) => {
                out.push_str(if adjacent(before) { " " } else { " ... " });
            }
            _ => {
                if prev.is_some() {
                    out.push_str("\n\n");
                }
                if let Some(k) = passage {
                    let h = index.passages[k].header;
                    out.push_str(&document[h.0..h.1]);
                }
            }
        }
        out.push_str(text);
        prev = Some((passage, piece));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::span::covered;

    const DOC: &str = "Passage 1:\nAlpha\nAlpha is a town. It lies in Texas. It has a mill.\n\nPassage 2:\nBeta (film)\nBeta is a film. It stars Ann. It won.";

    #[test]
    fn sentences_under_their_headers_in_document_order() {
        let index = Sentences::of(DOC);
        // Priority: "It won." first, then "Alpha is a town.", then "It has a mill."
        let e = fit(DOC, &index, &[5, 0, 2], 1000, false);
        assert_eq!(
            e.text,
            "Passage 1:\nAlpha\nAlpha is a town. ... It has a mill.\n\nPassage 2:\nBeta (film)\nIt won."
        );
        assert_eq!(e.sentences, [0, 2, 5]);
        assert_eq!(e.tokens, count_tokens(&e.text));
        for &i in &e.sentences {
            assert!(covered(index.sentences[i].span, &e.spans));
        }
        assert!(!covered(index.sentences[1].span, &e.spans));
    }

    #[test]
    fn the_budget_holds_and_each_chosen_sentence_brings_its_window() {
        let index = Sentences::of(DOC);
        for budget in [0, 5, 12, 20, 30, 1000] {
            let e = fit(DOC, &index, &[4, 0], budget, true);
            assert!(e.tokens <= budget, "budget {budget}: {} tokens", e.tokens);
        }
        let e = fit(DOC, &index, &[4, 0], 1000, true);
        // 4 ("It stars Ann.") brings the sentences before and after it, 3 and 5; 0, the first
        // of its passage, the one after it, 1.
        assert_eq!(e.sentences, [0, 1, 3, 4, 5]);
        // Room for 4's window only: 0 does not fit after it.
        let window = count_tokens("Passage 2:\nBeta (film)\nBeta is a film. It stars Ann. It won.");
        let e = fit(DOC, &index, &[4, 0], window, true);
        assert_eq!(e.sentences, [3, 4, 5]);
        // Without windows the same room takes 4, then 0.
        let alone = count_tokens("Passage 2:\nBeta (film)\nIt stars Ann.");
        let e = fit(DOC, &index, &[4, 0], alone, false);
        assert_eq!(e.sentences, [4]);
    }

    #[test]
    fn an_excerpt_of_spans_shows_only_those_spans_and_their_headers() {
        let index = Sentences::of(DOC);
        let gold = [index.sentences[4].span, index.sentences[1].span];
        let gold_trimmed: Vec<Span> = gold.iter().map(|&s| span::trim(DOC, s)).collect();
        let e = of_spans(DOC, &index, &gold_trimmed);
        assert_eq!(
            e.text,
            "Passage 1:\nAlpha\nIt lies in Texas.\n\nPassage 2:\nBeta (film)\nIt stars Ann."
        );
        for g in gold_trimmed {
            assert!(covered(g, &e.spans));
        }
        assert!(!e.text.contains("Alpha is a town"));
    }
}
