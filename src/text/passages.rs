//! Passages: the document's own paragraphs, the unit of retrieval and of answer context beside
//! the 600-token segments that extraction reads (issue 66).
//!
//! A passage is a LongBench `Passage i:\n{title}\n{text}` block (its header, its body and the
//! separator after it) where the document has such headers, else a paragraph ending at a blank
//! line. A passage over the cap is split at sentences into pieces within it (the first piece
//! keeps the header); a paragraph too short to stand alone (a heading) joins the next one; a
//! document without blank lines becomes sentence-packed units of at most the cap.
//!
//! Invariant: passages cover the document exactly, in order (`concat == document`, each
//! `text == document[start..end]`), like segments; every passage is within the cap unless a
//! single word exceeds it.

use super::count_tokens;
use super::segment::{segment, Segment};
use super::sentences::headers;

/// The default cap of a passage, in cl100k tokens: a LongBench passage is 100-150 tokens, and a
/// Wikipedia paragraph rarely exceeds this.
pub const DEFAULT_PASSAGE_TOKENS: usize = 300;

/// The cap a configured `passage_tokens` means: the value, or the default for 0.
pub fn cap(configured: usize) -> usize {
    if configured > 0 {
        configured
    } else {
        DEFAULT_PASSAGE_TOKENS
    }
}

/// A paragraph of fewer tokens than this (outside LongBench headers) joins the next one.
const MIN_PARAGRAPH_TOKENS: usize = 12;

/// The passages of `document`, each at most `max_tokens` tokens (see the module docs).
pub fn passages(document: &str, max_tokens: usize) -> Vec<Segment> {
    let max_tokens = max_tokens.max(1);
    let heads = headers(document);
    // Paragraph starts: each header; before the first header (or with none), blank lines.
    let first_header = heads.first().map_or(document.len(), |(h, _)| h.0);
    let mut starts: Vec<usize> = vec![0];
    starts.extend(blank_line_starts(&document[..first_header]));
    starts.extend(heads.iter().map(|(h, _)| h.0));
    starts.sort_unstable();
    starts.dedup();
    let mut ranges: Vec<(usize, usize)> = starts
        .iter()
        .enumerate()
        .map(|(i, &s)| (s, starts.get(i + 1).copied().unwrap_or(document.len())))
        .filter(|(s, e)| s < e)
        .collect();
    // Outside the headers, a paragraph too short to stand alone joins the next.
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    let mut carry: Option<usize> = None;
    for (s, e) in ranges.drain(..) {
        let start = carry.take().unwrap_or(s);
        let short = e <= first_header && count_tokens(document[s..e].trim()) < MIN_PARAGRAPH_TOKENS;
        if short && e < first_header {
            carry = Some(start);
        } else {
            merged.push((start, e));
        }
    }
    if let Some(start) = carry {
        match merged.last_mut() {
            Some(last) => last.1 = last.1.max(document.len()),
            None => merged.push((start, document.len())),
        }
    }
    let mut out: Vec<Segment> = Vec::new();
    for (s, e) in merged {
        let text = &document[s..e];
        let tokens = count_tokens(text);
        if tokens <= max_tokens {
            push(&mut out, s, e, text, tokens);
        } else {
            for piece in segment(text, max_tokens) {
                push(
                    &mut out,
                    s + piece.start,
                    s + piece.end,
                    &piece.text,
                    piece.tokens,
                );
            }
        }
    }
    out
}

/// The own passages the hop puts after the best unit, at most: a two-hop question needs one,
/// a comparison of two named entities two. Set before any measurement, not tuned.
pub const HOP_HOMES: usize = 2;

/// Names and passage titles shorter than this (in characters) are no one's own passage: two-
/// and three-letter names ("US", "The") match too much.
pub const MIN_NAME: usize = 4;

/// A passage title or a name as the hop compares them: lowercased and trimmed, without a
/// parenthesis at its end ("Manson (film)" is Manson's own passage).
pub fn title_key(t: &str) -> String {
    let t = t.trim();
    let t = match t.rfind(" (") {
        Some(i) if t.ends_with(')') => &t[..i],
        _ => t,
    };
    t.trim().to_lowercase()
}

/// Each unit's passage titles (LongBench `Passage i:` headers in its text), as [`title_key`]
/// writes them; a unit without headers has none.
pub fn unit_titles(units: &[Segment]) -> Vec<Vec<String>> {
    units
        .iter()
        .map(|u| {
            headers(&u.text)
                .into_iter()
                .map(|(_, t)| title_key(t))
                .filter(|t| t.chars().count() >= MIN_NAME)
                .collect()
        })
        .collect()
}

/// The own passages of the question's names the own start puts first, at most: a two-hop
/// question names one entity, a comparison two. Set before any measurement, not tuned.
pub const OWN_STARTS: usize = 2;

/// The own start (issue 66): the units, in `by_question` order (the question's BM25 over
/// every unit), that hold a passage titled with a name `named` accepts (the question's names,
/// or E_s's), at most [`OWN_STARTS`]. Empty where no title is such a name.
pub fn own_units(
    by_question: &[usize],
    titles: &[Vec<String>],
    named: impl Fn(&str) -> bool,
) -> Vec<usize> {
    by_question
        .iter()
        .copied()
        .filter(|&u| titles.get(u).is_some_and(|ts| ts.iter().any(|t| named(t))))
        .take(OWN_STARTS)
        .collect()
}

/// The hop from the start units to the own passages of the names the first holds (issue 66):
/// `start` (the best unit; with the own start, the question's own passages), then at most
/// [`HOP_HOMES`] other units, taken in `by_question` order (the question's BM25 over every
/// unit), that hold a passage titled with a name `named` accepts, then `rest` in its order.
/// Returns the order (each unit once) and the titles that brought units.
pub fn hop(
    start: &[usize],
    by_question: &[usize],
    titles: &[Vec<String>],
    named: impl Fn(&str) -> bool,
    rest: &[usize],
) -> (Vec<usize>, Vec<String>) {
    let mut order: Vec<usize> = Vec::new();
    for &u in start {
        if !order.contains(&u) {
            order.push(u);
        }
    }
    let mut via = Vec::new();
    for &u in by_question {
        if via.len() >= HOP_HOMES {
            break;
        }
        if order.contains(&u) {
            continue;
        }
        if let Some(t) = titles.get(u).and_then(|ts| ts.iter().find(|t| named(t))) {
            order.push(u);
            via.push(t.clone());
        }
    }
    for &u in rest {
        if !order.contains(&u) {
            order.push(u);
        }
    }
    (order, via)
}

fn push(out: &mut Vec<Segment>, start: usize, end: usize, text: &str, tokens: usize) {
    out.push(Segment {
        index: out.len(),
        start,
        end,
        text: text.to_string(),
        tokens,
    });
}

/// The offsets where a paragraph begins after a blank line (a line break, optional spaces, a
/// line break, and any whitespace after) in `text`.
fn blank_line_starts(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\n' {
            let mut j = i + 1;
            while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'\t' || bytes[j] == b'\r') {
                j += 1;
            }
            if j < bytes.len() && bytes[j] == b'\n' {
                // A blank line: the paragraph starts after all the whitespace that follows.
                while j < bytes.len() && (bytes[j] as char).is_ascii_whitespace() {
                    j += 1;
                }
                if j < bytes.len() {
                    out.push(j);
                }
                i = j;
                continue;
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hop_brings_the_own_passages_of_the_names_the_best_unit_holds() {
        let doc = "Passage 1:\nRon Joyce\nRon Joyce co-founded Tim Hortons.\n\nPassage 2:\nOttawa\nOttawa has restaurants.\n\nPassage 3:\nTim Hortons (chain)\nTim Hortons has 4,800 restaurants.\n\nPassage 4:\nUS\nShort title.\n";
        let units = passages(doc, 300);
        let titles = unit_titles(&units);
        assert_eq!(titles[2], ["tim hortons"]);
        assert!(titles[3].is_empty(), "a title under MIN_NAME names no one");
        let body = units[0].text.to_lowercase();
        let named = |t: &str| crate::text::occurs_in(&body, t);
        // By the question's order, passage 1 (Ottawa) comes before 2, but only 2 is the own
        // passage of a name passage 0 holds; passage 0 is its own title's and comes first.
        let (order, via) = hop(&[0], &[1, 2, 0, 3], &titles, named, &[3, 1]);
        assert_eq!(order, [0, 2, 3, 1]);
        assert_eq!(via, ["tim hortons"]);
        // At most HOP_HOMES own passages.
        let (order, via) = hop(&[1], &[0, 2, 3], &titles, |_| true, &[]);
        assert_eq!(order.len(), 1 + HOP_HOMES);
        assert_eq!(via.len(), HOP_HOMES);
        // The own start: the question names Ron Joyce and Ottawa; their passages come first,
        // in the question's order, then the hop from the first (Tim Hortons), then the rest.
        let question = "which restaurant chain that ron joyce founded has a store in ottawa?";
        let own = own_units(&[1, 2, 0, 3], &titles, |t| {
            crate::text::occurs_in(question, t)
        });
        assert_eq!(own, [1, 0]);
        let (order, _) = hop(&own, &[1, 2, 0, 3], &titles, |t| t == "tim hortons", &[3]);
        assert_eq!(order, [1, 0, 2, 3]);
        assert!(own_units(&[0, 1, 2, 3], &titles, |_| false).is_empty());
        assert_eq!(
            own_units(&[0, 1, 2, 3], &titles, |_| true).len(),
            OWN_STARTS
        );
        assert_eq!(title_key(" Manson (film) "), "manson");
        assert_eq!(title_key("(1999)"), "(1999)");
    }

    fn covers(doc: &str, ps: &[Segment]) {
        assert_eq!(ps.iter().map(|p| p.text.as_str()).collect::<String>(), doc);
        for (i, p) in ps.iter().enumerate() {
            assert_eq!(p.index, i);
            assert_eq!(&doc[p.start..p.end], p.text);
            assert_eq!(p.tokens, count_tokens(&p.text));
        }
    }

    #[test]
    fn longbench_passages_are_units_with_their_headers() {
        let doc = "Passage 1:\nAlpha\nAlpha is a town. It lies in Texas.\n\nPassage 2:\nBeta (film)\nBeta is a film. It stars Ann.\n\nPassage 3:\nGamma\nGamma won.";
        let ps = passages(doc, 300);
        covers(doc, &ps);
        assert_eq!(ps.len(), 3);
        assert!(ps[1].text.starts_with("Passage 2:\nBeta (film)\n"));
        assert!(ps[1].text.trim_end().ends_with("It stars Ann."));
    }

    #[test]
    fn a_passage_over_the_cap_is_split_at_sentences() {
        let body: String = (0..40)
            .map(|i| format!("Sentence number {i} is here. "))
            .collect();
        let doc = format!("Passage 1:\nLong\n{body}\n\nPassage 2:\nShort\nA short one.");
        let ps = passages(&doc, 60);
        covers(&doc, &ps);
        assert!(ps.len() > 3, "{}", ps.len());
        assert!(ps.iter().all(|p| p.tokens <= 60));
        assert!(ps[0].text.starts_with("Passage 1:\nLong\n"));
        // Pieces end at sentence boundaries.
        assert!(ps[0].text.trim_end().ends_with('.'));
        assert!(ps.last().unwrap().text.starts_with("Passage 2:"));
    }

    #[test]
    fn paragraphs_by_blank_lines_and_headings_join_the_next() {
        let doc = "Chapter 1\n\nThe first paragraph has a few sentences in it, long enough to stand alone here.\n\n  \nThe second paragraph is also long enough to be a passage of its own, surely.";
        let ps = passages(doc, 300);
        covers(doc, &ps);
        assert_eq!(ps.len(), 2, "{ps:?}");
        assert!(ps[0].text.starts_with("Chapter 1\n\nThe first"));
        assert!(ps[1].text.starts_with("The second"));
    }

    #[test]
    fn a_document_without_paragraphs_is_sentence_packed() {
        let doc: String = (0..50)
            .map(|i| format!("Fact {i} holds in this text. "))
            .collect();
        let ps = passages(&doc, 40);
        covers(&doc, &ps);
        assert!(ps.len() > 5);
        assert!(ps.iter().all(|p| p.tokens <= 40));
        assert!(passages("", 40).is_empty());
        covers("short", &passages("short", 40));
    }
}
