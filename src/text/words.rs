//! Whole-word matching: a match counts only where it is bounded by a character that is not
//! alphanumeric, or by the end of the text. Case is the caller's: the functions compare bytes.

/// The words of `text`: its maximal runs of letters and digits, bounded as
/// [`at_word_boundaries`] bounds a match.
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// Whether the byte range `start..end` of `text` stands as whole words: no letter or digit
/// touches it on either side.
pub fn at_word_boundaries(text: &str, start: usize, end: usize) -> bool {
    let before_ok = text
        .get(..start)
        .and_then(|t| t.chars().next_back())
        .is_none_or(|c| !c.is_alphanumeric());
    let after_ok = text
        .get(end..)
        .and_then(|t| t.chars().next())
        .is_none_or(|c| !c.is_alphanumeric());
    before_ok && after_ok
}

/// Where `needle` first occurs in `haystack` as whole words (a byte offset), case as written.
pub fn find_whole_word(haystack: &str, needle: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(pos) = haystack.get(from..)?.find(needle) {
        let s = from + pos;
        if at_word_boundaries(haystack, s, s + needle.len()) {
            return Some(s);
        }
        from = s + needle.chars().next().map(char::len_utf8).unwrap_or(1);
    }
    None
}

/// Whether `needle` occurs in `haystack` as whole words, case as written.
pub fn whole_word(haystack: &str, needle: &str) -> bool {
    find_whole_word(haystack, needle).is_some()
}

/// Whether `needle`, trimmed and lowercased, occurs in `haystack_lower` (already lowercase) as
/// whole words: a case-blind [`whole_word`]. An empty needle occurs nowhere.
pub fn occurs_in(haystack_lower: &str, needle: &str) -> bool {
    let n = needle.trim().to_lowercase();
    !n.is_empty() && whole_word(haystack_lower, &n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_words_only() {
        assert!(occurs_in("the velden bridge opened", "Velden Bridge"));
        assert!(!occurs_in("the article", "art"));
        assert!(occurs_in("art, and more", "art"));
        assert!(!occurs_in("x", ""));
        assert!(!occurs_in("", "  "));
        assert!(whole_word("Beta, Delta", "Delta") && !whole_word("Deltas", "Delta"));
        assert!(!whole_word("beta", "Beta"), "case as written");
        // A later occurrence counts when the first is inside a word.
        assert!(whole_word("artful art", "art"));
        assert!(at_word_boundaries("é art", 3, 6) && !at_word_boundaries("éart", 2, 5));
    }
}
