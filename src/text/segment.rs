//! Segmentation: the document split into segments of at most `max_tokens` cl100k tokens, on
//! sentence boundaries where possible. Segments are the static long-term memory: each keeps its
//! exact text and byte offsets, and concatenating them in order gives the document back exactly.

use serde::{Deserialize, Serialize};

use super::count_tokens;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub index: usize,
    /// Byte offsets into the original text: `text == &document[start..end]`.
    pub start: usize,
    pub end: usize,
    pub text: String,
    pub tokens: usize,
}

/// Byte ranges of sentences (each with its trailing whitespace), covering `text` exactly.
pub(crate) fn sentence_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let boundary = match c {
            '.' | '!' | '?' | '。' => chars
                .peek()
                .is_none_or(|(_, n)| n.is_whitespace() || *n == '"' || *n == '\''),
            '\n' => chars.peek().is_some_and(|(_, n)| *n == '\n'),
            _ => false,
        };
        if boundary {
            // Closing quotes and brackets stay with the sentence, then the whitespace after it.
            let mut end = i + c.len_utf8();
            while let Some(&(j, n)) = chars.peek() {
                if matches!(n, '"' | '\'' | ')' | ']' | '”' | '’') && !n.is_whitespace() && end == j
                {
                    end = j + n.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            while let Some(&(j, n)) = chars.peek() {
                if n.is_whitespace() {
                    end = j + n.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            spans.push((start, end));
            start = end;
        }
    }
    if start < text.len() {
        spans.push((start, text.len()));
    }
    spans
}

/// Splits a span that alone exceeds the budget at whitespace (or, for a single huge word, at
/// character boundaries), each piece within `max_tokens`.
fn split_long(
    text: &str,
    (s, e): (usize, usize),
    max_tokens: usize,
    out: &mut Vec<(usize, usize)>,
) {
    // Cut points: after each run of whitespace, and the end.
    let mut cuts: Vec<usize> = Vec::new();
    let mut prev_ws = false;
    for (off, c) in text[s..e].char_indices() {
        let ws = c.is_whitespace();
        if prev_ws && !ws {
            cuts.push(s + off);
        }
        prev_ws = ws;
    }
    cuts.push(e);
    let mut piece_start = s;
    let mut last_fit: Option<usize> = None;
    let mut k = 0;
    while k < cuts.len() {
        let cut = cuts[k];
        if count_tokens(&text[piece_start..cut]) <= max_tokens {
            last_fit = Some(cut);
            k += 1;
            continue;
        }
        match last_fit.take() {
            Some(fit) => {
                out.push((piece_start, fit));
                piece_start = fit;
            }
            None => {
                // One word longer than the budget: cut it by characters.
                let mut end = piece_start;
                for (off, c) in text[piece_start..cut].char_indices() {
                    let next = piece_start + off + c.len_utf8();
                    if count_tokens(&text[piece_start..next]) > max_tokens {
                        break;
                    }
                    end = next;
                }
                if end == piece_start {
                    end = piece_start
                        + text[piece_start..]
                            .chars()
                            .next()
                            .map(char::len_utf8)
                            .unwrap_or(1);
                }
                out.push((piece_start, end));
                piece_start = end;
            }
        }
    }
    if piece_start < e {
        out.push((piece_start, e));
    }
}

/// Segments `text` greedily: whole sentences are packed while the segment stays within
/// `max_tokens`; a sentence longer than that is split at whitespace.
pub fn segment(text: &str, max_tokens: usize) -> Vec<Segment> {
    let max_tokens = max_tokens.max(1);
    let mut units = Vec::new();
    for span in sentence_spans(text) {
        if count_tokens(&text[span.0..span.1]) > max_tokens {
            split_long(text, span, max_tokens, &mut units);
        } else {
            units.push(span);
        }
    }
    let mut segments: Vec<Segment> = Vec::new();
    let mut cur: Option<(usize, usize, usize)> = None; // start, end, tokens
    for (s, e) in units {
        let unit_tokens = count_tokens(&text[s..e]);
        cur = match cur {
            None => Some((s, e, unit_tokens)),
            Some((cs, ce, ct)) => {
                // Token counts are not exactly additive across a boundary; recount the join.
                let joined = if ct + unit_tokens <= max_tokens + 2 {
                    count_tokens(&text[cs..e])
                } else {
                    usize::MAX
                };
                if joined <= max_tokens {
                    Some((cs, e, joined))
                } else {
                    push(&mut segments, text, cs, ce, ct);
                    Some((s, e, unit_tokens))
                }
            }
        };
    }
    if let Some((cs, ce, ct)) = cur {
        push(&mut segments, text, cs, ce, ct);
    }
    segments
}

fn push(segments: &mut Vec<Segment>, text: &str, start: usize, end: usize, tokens: usize) {
    segments.push(Segment {
        index: segments.len(),
        start,
        end,
        text: text[start..end].to_string(),
        tokens,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reassemble(segs: &[Segment]) -> String {
        segs.iter().map(|s| s.text.as_str()).collect()
    }

    #[test]
    fn reassembles_exactly_with_offsets() {
        let text = "First sentence here. Second one!  Third?\n\nA new paragraph starts. \"Quoted end.\" Tail without stop";
        for budget in [3, 5, 8, 20, 1000] {
            let segs = segment(text, budget);
            assert_eq!(reassemble(&segs), text, "budget {budget}");
            for (i, s) in segs.iter().enumerate() {
                assert_eq!(s.index, i);
                assert_eq!(&text[s.start..s.end], s.text);
                assert!(
                    s.tokens <= budget,
                    "budget {budget}: segment {i} has {} tokens",
                    s.tokens
                );
                assert_eq!(s.tokens, count_tokens(&s.text));
            }
            for w in segs.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
        }
    }

    #[test]
    fn cuts_on_sentence_boundaries_when_possible() {
        let text = "Alpha beta gamma delta. Epsilon zeta eta theta. Iota kappa lambda mu.";
        let segs = segment(text, 12);
        assert!(segs.len() >= 2);
        for s in &segs[..segs.len() - 1] {
            assert!(s.text.trim_end().ends_with('.'), "{:?}", s.text);
        }
    }

    #[test]
    fn long_sentences_and_words_are_split_within_budget() {
        let long = "word ".repeat(500);
        let segs = segment(&long, 50);
        assert_eq!(reassemble(&segs), long);
        assert!(segs.iter().all(|s| s.tokens <= 50));
        let huge_word = "x".repeat(3000);
        let segs = segment(&huge_word, 40);
        assert_eq!(reassemble(&segs), huge_word);
        assert!(segs.iter().all(|s| s.tokens <= 40));
    }

    #[test]
    fn unicode_and_empty() {
        assert!(segment("", 600).is_empty());
        let text = "Marie Skłodowska Curie était physicienne. Elle naquit à Varsovie.";
        let segs = segment(text, 8);
        assert_eq!(reassemble(&segs), text);
    }
}
