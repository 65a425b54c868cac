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
}
