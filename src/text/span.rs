//! Byte ranges of a document: what a method showed the LLM, and where the gold evidence lies.
//!
//! A [`Span`] is `(start, end)`, a half-open byte range `document[start..end]`, written as a
//! two-element JSON array. Span lists are kept merged ([`merge`]): sorted, with overlapping or
//! touching ranges joined, so two adjacent segments cover a sentence that their boundary cuts.

/// A half-open byte range `[start, end)` of a document.
pub type Span = (usize, usize);

/// Sorts `spans`, drops empty ones and joins those that overlap or touch.
pub fn merge(mut spans: Vec<Span>) -> Vec<Span> {
    spans.retain(|s| s.1 > s.0);
    spans.sort_unstable();
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s.0 <= last.1 => last.1 = last.1.max(s.1),
            _ => out.push(s),
        }
    }
    out
}

/// Whether `span` lies wholly inside one range of the merged list `shown`.
pub fn covered(span: Span, shown: &[Span]) -> bool {
    // `shown` is merged, so a covered span lies inside exactly one of its ranges.
    let i = shown.partition_point(|s| s.1 < span.1);
    shown.get(i).is_some_and(|s| s.0 <= span.0 && span.1 <= s.1)
}

/// Consecutive pieces of one text (segments, leaves, chunks): their byte ranges, each starting
/// where the previous one ended. Exact when the pieces concatenate to the document, as the
/// segmenter guarantees.
pub fn consecutive<'a>(pieces: impl IntoIterator<Item = &'a str>) -> Vec<Span> {
    let mut at = 0;
    pieces
        .into_iter()
        .map(|p| {
            let s = (at, at + p.len());
            at += p.len();
            s
        })
        .collect()
}

/// The ranges of the pieces at `indices` (out-of-range indices are skipped), merged.
pub fn of_indices(ranges: &[Span], indices: &[usize]) -> Vec<Span> {
    merge(
        indices
            .iter()
            .filter_map(|&i| ranges.get(i).copied())
            .collect(),
    )
}

/// `span` without leading and trailing whitespace of `text` (empty spans stay where they are).
pub fn trim(text: &str, span: Span) -> Span {
    let Some(piece) = text.get(span.0..span.1) else {
        return span;
    };
    let start = span.0 + (piece.len() - piece.trim_start().len());
    let end = span.1 - (piece.len() - piece.trim_end().len());
    if end < start {
        (span.0, span.0)
    } else {
        (start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_sorts_joins_touching_and_drops_empty() {
        assert_eq!(
            merge(vec![(10, 20), (0, 5), (5, 8), (30, 30), (15, 25)]),
            vec![(0, 8), (10, 25)]
        );
        assert_eq!(merge(vec![]), vec![]);
    }

    #[test]
    fn a_span_is_covered_only_inside_one_merged_range() {
        let shown = merge(vec![(0, 10), (10, 20), (30, 40)]);
        assert!(covered((5, 15), &shown), "adjacent pieces join");
        assert!(covered((30, 40), &shown));
        assert!(!covered((15, 35), &shown), "the gap 20..30 was not shown");
        assert!(!covered((38, 41), &shown));
        assert!(!covered((0, 1), &[]));
    }

    #[test]
    fn consecutive_pieces_and_indices() {
        let r = consecutive(["ab", "cde", "f"]);
        assert_eq!(r, vec![(0, 2), (2, 5), (5, 6)]);
        assert_eq!(of_indices(&r, &[2, 0, 9]), vec![(0, 2), (5, 6)]);
        assert_eq!(of_indices(&r, &[1, 2]), vec![(2, 6)]);
    }

    #[test]
    fn trim_drops_surrounding_whitespace() {
        let t = "a  He was.\n b";
        assert_eq!(trim(t, (1, 11)), (3, 10));
        assert_eq!(&t[3..10], "He was.");
        assert_eq!(trim(t, (1, 3)), (1, 1));
    }
}
