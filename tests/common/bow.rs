//! A deterministic embedder for tests.

use qrmem::embed::{EmbedError, Embedder};

/// Hashed bag of words, L2-normalised: texts sharing words score higher.
pub struct Bow;
impl Embedder for Bow {
    fn model_id(&self) -> &str {
        "bow"
    }
    fn dim(&self) -> usize {
        256
    }
    fn normalized(&self) -> bool {
        true
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 256];
                for w in t
                    .to_lowercase()
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| w.len() > 2)
                {
                    let h = w
                        .bytes()
                        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
                    v[(h % 256) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-9);
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}
