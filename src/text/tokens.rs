//! Token counting with cl100k_base (the tokenizer of GPT-3.5, which the QRMeM paper used).

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

fn bpe() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| match tiktoken_rs::cl100k_base() {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::error!(
                "cannot load the cl100k tokenizer ({e}); estimating tokens from characters"
            );
            None
        }
    })
    .as_ref()
}

/// Tokens of `text` in cl100k_base. (Falls back to chars/4 only if the embedded vocabulary could
/// not be loaded, which is logged.)
pub fn count_tokens(text: &str) -> usize {
    match bpe() {
        Some(b) => b.encode_ordinary(text).len(),
        None => text.chars().count().div_ceil(4),
    }
}

/// The first (`from_end` false) or last `max_tokens` cl100k tokens of `text`.
pub fn truncate_tokens(text: &str, max_tokens: usize, from_end: bool) -> String {
    let Some(b) = bpe() else {
        let chars: Vec<char> = text.chars().collect();
        let n = (max_tokens * 4).min(chars.len());
        let slice = if from_end {
            &chars[chars.len() - n..]
        } else {
            &chars[..n]
        };
        return slice.iter().collect();
    };
    let toks = b.encode_ordinary(text);
    if toks.len() <= max_tokens {
        return text.to_string();
    }
    let slice = if from_end {
        &toks[toks.len() - max_tokens..]
    } else {
        &toks[..max_tokens]
    };
    // A cut inside a multi-byte character decodes lossily; move the cut by a token until clean.
    for trim in 0..4.min(slice.len()) {
        let s = if from_end {
            &slice[trim..]
        } else {
            &slice[..slice.len() - trim]
        };
        if let Ok(t) = b.decode(s) {
            return t;
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_like_cl100k() {
        assert_eq!(count_tokens(""), 0);
        // "hello world" is two tokens in cl100k_base.
        assert_eq!(count_tokens("hello world"), 2);
        assert!(count_tokens("The Velden Bridge is a stone arch bridge.") >= 8);
    }

    #[test]
    fn truncation_keeps_the_requested_end() {
        let text = "one two three four five six seven eight";
        let left = truncate_tokens(text, 3, false);
        let right = truncate_tokens(text, 3, true);
        assert_eq!(left, "one two three");
        assert_eq!(right, " six seven eight");
        assert_eq!(truncate_tokens(text, 100, false), text);
        assert!(count_tokens(&truncate_tokens(&"word ".repeat(1000), 50, true)) <= 50);
    }
}
