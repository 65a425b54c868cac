//! A document's sentences with their byte ranges, and the passage each lies in: the units of a
//! sentence-grain answer context (`crate::excerpt`).
//!
//! A passage is LongBench's rendering of a Wikipedia paragraph, `Passage i:\n{title}\n{text}`,
//! passages separated by a blank line (the LongBench-style and HotpotQA documents are rendered
//! so). Text outside any passage (a document without such headers) is split into sentences with
//! no passage and no title.
//!
//! Invariant: the sentences of a passage cover its body exactly (each keeps its trailing
//! whitespace), so two neighbouring sentences shown together touch, and a gold sentence that
//! the splitter cut in two (at an abbreviation) is covered when both pieces are shown.

use super::segment::sentence_spans;
use super::span::Span;

/// One passage: its header (`Passage i:\n{title}\n`), its title and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passage {
    /// The header line and the title line, newlines included.
    pub header: Span,
    pub title: String,
    /// The passage's text after the header, up to the next passage's separator.
    pub body: Span,
}

/// One sentence: its byte range (trailing whitespace included) and its passage, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sentence {
    pub span: Span,
    pub passage: Option<usize>,
}

/// The sentences and passages of one document, in document order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sentences {
    pub sentences: Vec<Sentence>,
    pub passages: Vec<Passage>,
}

/// The passage headers of `document`: (header range, title), each `Passage i:\n{title}\n` at
/// the start of the document or of a line.
pub(crate) fn headers(document: &str) -> Vec<(Span, &str)> {
    let mut out = Vec::new();
    let mut line_start = 0;
    while line_start < document.len() {
        let rest = &document[line_start..];
        let line_end = rest.find('\n').map_or(document.len(), |i| line_start + i);
        let line = &document[line_start..line_end];
        let numbered = line
            .strip_prefix("Passage ")
            .and_then(|r| r.strip_suffix(':'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if numbered && line_end < document.len() {
            let title_start = line_end + 1;
            if let Some(t) = document[title_start..].find('\n') {
                let title_end = title_start + t;
                out.push((
                    (line_start, title_end + 1),
                    &document[title_start..title_end],
                ));
                line_start = title_end + 1;
                continue;
            }
        }
        line_start = line_end + 1;
    }
    out
}

impl Sentences {
    /// Splits `document` into passages (by their headers) and sentences.
    pub fn of(document: &str) -> Self {
        let mut passages: Vec<Passage> = Vec::new();
        for (header, title) in headers(document) {
            if let Some(prev) = passages.last_mut() {
                // The previous body ends at this header's separator.
                let end = trim_end_at(document, header.0);
                prev.body.1 = end.max(prev.body.0);
            }
            passages.push(Passage {
                header,
                title: title.trim().to_string(),
                body: (header.1, document.len()),
            });
        }
        let mut sentences = Vec::new();
        let mut split = |range: Span, passage: Option<usize>| {
            let Some(text) = document.get(range.0..range.1) else {
                return;
            };
            for (s, e) in sentence_spans(text)
                .into_iter()
                .flat_map(|p| lines(text, p))
            {
                if text[s..e].trim().is_empty() {
                    continue;
                }
                sentences.push(Sentence {
                    span: (range.0 + s, range.0 + e),
                    passage,
                });
            }
        };
        let first = passages.first().map_or(document.len(), |p| p.header.0);
        split((0, first), None);
        for (i, p) in passages.iter().enumerate() {
            split(p.body, Some(i));
        }
        Sentences {
            sentences,
            passages,
        }
    }

    /// The sentences that begin inside `range` (a segment's byte range), in order.
    pub fn within(&self, range: Span) -> impl Iterator<Item = usize> + '_ {
        let from = self.sentences.partition_point(|s| s.span.0 < range.0);
        (from..self.sentences.len()).take_while(move |&i| self.sentences[i].span.0 < range.1)
    }

    /// The passage holding the byte `offset`, if any.
    pub fn passage_at(&self, offset: usize) -> Option<usize> {
        let i = self.passages.partition_point(|p| p.header.0 <= offset);
        let p = i.checked_sub(1)?;
        (offset < self.passages[p].body.1).then_some(p)
    }

    /// The neighbours shown beside sentence `i`, first the one that comes first: the sentence
    /// before it in its passage (else the one after it), then the other side's.
    pub fn neighbours(&self, i: usize) -> [Option<usize>; 2] {
        let Some(passage) = self.sentences.get(i).map(|s| s.passage) else {
            return [None, None];
        };
        let same = |j: usize| {
            self.sentences
                .get(j)
                .filter(|s| s.passage == passage)
                .map(|_| j)
        };
        let before = i.checked_sub(1).and_then(same);
        let after = same(i + 1);
        match before {
            Some(b) => [Some(b), after],
            None => [after, None],
        }
    }
}

/// `piece` of `text` cut after each line break inside it (a line without a full stop, such as a
/// heading or a list item, is a unit of its own), each part keeping its trailing whitespace.
fn lines(text: &str, piece: Span) -> Vec<Span> {
    let mut out = Vec::new();
    let mut start = piece.0;
    let body = &text[piece.0..piece.1];
    let mut chars = body.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '\n' {
            continue;
        }
        // The cut goes after the whitespace that follows the line break.
        let mut end = piece.0 + i + 1;
        while let Some(&(j, n)) = chars.peek() {
            if n.is_whitespace() {
                end = piece.0 + j + n.len_utf8();
                chars.next();
            } else {
                break;
            }
        }
        if end < piece.1 {
            out.push((start, end));
            start = end;
        }
    }
    out.push((start, piece.1));
    out
}

/// `at`, moved back over the whitespace before it.
fn trim_end_at(document: &str, at: usize) -> usize {
    document[..at].trim_end().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "Passage 1:\nAlpha\nAlpha is a town. It lies in Texas.\n\nPassage 2:\nBeta (film)\nBeta is a film. It stars Ann. It won.";

    #[test]
    fn passages_and_sentences_cover_the_bodies() {
        let s = Sentences::of(DOC);
        assert_eq!(s.passages.len(), 2);
        assert_eq!(s.passages[0].title, "Alpha");
        assert_eq!(s.passages[1].title, "Beta (film)");
        assert_eq!(
            &DOC[s.passages[0].header.0..s.passages[0].header.1],
            "Passage 1:\nAlpha\n"
        );
        assert_eq!(
            &DOC[s.passages[0].body.0..s.passages[0].body.1],
            "Alpha is a town. It lies in Texas."
        );
        let texts: Vec<&str> = s
            .sentences
            .iter()
            .map(|x| DOC[x.span.0..x.span.1].trim())
            .collect();
        assert_eq!(
            texts,
            [
                "Alpha is a town.",
                "It lies in Texas.",
                "Beta is a film.",
                "It stars Ann.",
                "It won."
            ]
        );
        assert_eq!(s.sentences[1].passage, Some(0));
        assert_eq!(s.sentences[4].passage, Some(1));
        // Sentences of one passage touch: together they cover the body.
        assert_eq!(s.sentences[0].span.1, s.sentences[1].span.0);
        assert_eq!(s.passage_at(s.sentences[3].span.0), Some(1));
        assert_eq!(s.passage_at(0), Some(0));
    }

    #[test]
    fn neighbours_stay_in_their_passage() {
        let s = Sentences::of(DOC);
        assert_eq!(s.neighbours(0), [Some(1), None]);
        assert_eq!(s.neighbours(1), [Some(0), None]);
        assert_eq!(s.neighbours(3), [Some(2), Some(4)]);
        assert_eq!(s.neighbours(2), [Some(3), None]);
        assert_eq!(s.neighbours(4), [Some(3), None]);
        assert_eq!(s.within((0, DOC.len())).count(), 5);
        let second = s.passages[1].body;
        assert_eq!(s.within(second).collect::<Vec<_>>(), [2, 3, 4]);
    }

    #[test]
    fn a_document_without_headers_is_sentences_without_passages() {
        let doc = "One thing. Another thing.\n\nA new paragraph.\nA heading\nA line after it.";
        let s = Sentences::of(doc);
        assert!(s.passages.is_empty());
        let texts: Vec<&str> = s
            .sentences
            .iter()
            .map(|x| doc[x.span.0..x.span.1].trim())
            .collect();
        assert_eq!(
            texts,
            [
                "One thing.",
                "Another thing.",
                "A new paragraph.",
                "A heading",
                "A line after it."
            ]
        );
        // Together they cover the document.
        assert_eq!(s.sentences[0].span.0, 0);
        assert!(s.sentences.windows(2).all(|w| w[0].span.1 == w[1].span.0));
        assert_eq!(s.sentences.last().unwrap().span.1, doc.len());
        assert!(s.sentences.iter().all(|x| x.passage.is_none()));
        assert_eq!(s.passage_at(3), None);
    }
}
