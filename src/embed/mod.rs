//! Text embeddings: the [`Embedder`] trait, its libtorch BERT implementation (Contriever,
//! sentence-transformers models), an in-memory cache, and the scoring the navigators use.

mod bert;
mod disk;
mod index;

pub use bert::{missing_model_files, BertEmbedder};
pub use disk::DiskCache;
pub use index::{index_memory, index_segments, score_edges, score_segments, Vectors};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use sha2::{Digest, Sha256};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum EmbedError {
    #[error("embedder model directory {dir}: {message}")]
    Model { dir: PathBuf, message: String },
    #[error("embedder: {0}")]
    Run(String),
}

/// Batch of texts in, vectors out.
pub trait Embedder: Send + Sync {
    /// Identifies the model (and its pooling/normalisation) in caches and stored vectors.
    fn model_id(&self) -> &str;
    fn dim(&self) -> usize;
    /// Whether vectors are L2-normalised (then a dot product is the cosine).
    fn normalized(&self) -> bool;
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// `embedder.embed(texts)`, checked: exactly one vector per text, or an error naming the
/// embedder and both counts. Callers zip the vectors with their inputs, where a short batch
/// would otherwise silently drop the tail.
pub fn embed_exact(embedder: &dyn Embedder, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
    let out = embedder.embed(texts)?;
    if out.len() != texts.len() {
        return Err(EmbedError::Run(format!(
            "{} returned {} vectors for {} texts",
            embedder.model_id(),
            out.len(),
            texts.len()
        )));
    }
    Ok(out)
}

/// The vector of one text (a query), or an error if the embedder returned none.
pub fn embed_one(embedder: &dyn Embedder, text: &str) -> Result<Vec<f32>, EmbedError> {
    embed_exact(embedder, &[text])?
        .pop()
        .ok_or_else(|| EmbedError::Run(format!("{} returned no vector", embedder.model_id())))
}

/// Dot product (the Contriever score; the cosine for normalised vectors).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Cosine similarity.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (na, nb) = (dot(a, a).sqrt(), dot(b, b).sqrt());
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot(a, b) / (na * nb)
    }
}

/// An embedder that adds up the time spent embedding (for the overhead report).
pub struct TimedEmbedder<'a> {
    inner: &'a dyn Embedder,
    nanos: std::sync::atomic::AtomicU64,
    texts: std::sync::atomic::AtomicU64,
}

impl<'a> TimedEmbedder<'a> {
    pub fn new(inner: &'a dyn Embedder) -> Self {
        TimedEmbedder {
            inner,
            nanos: std::sync::atomic::AtomicU64::new(0),
            texts: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Seconds spent in `embed` so far.
    pub fn secs(&self) -> f64 {
        self.nanos.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e9
    }

    /// Texts embedded so far.
    pub fn texts(&self) -> u64 {
        self.texts.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Embedder for TimedEmbedder<'_> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn normalized(&self) -> bool {
        self.inner.normalized()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let t = std::time::Instant::now();
        let out = self.inner.embed(texts);
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos
            .fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
        self.texts
            .fetch_add(texts.len() as u64, std::sync::atomic::Ordering::Relaxed);
        out
    }
}

/// The embedder a configuration describes, its vectors kept by content in
/// `<cache dir>/embeddings` unless the cache is off (like the LLM's replies).
pub fn from_config(config: &crate::config::Config) -> Result<DiskCache<BertEmbedder>, EmbedError> {
    let e = &config.embed;
    let bert = BertEmbedder::load(
        &e.model_dir,
        e.normalize.as_option(),
        e.batch_size,
        e.threads,
    )?;
    let dir = config
        .cache
        .enabled
        .then(|| config.cache.dir.join("embeddings"));
    Ok(DiskCache::new(bert, dir))
}

/// The embedder of a command that was told not to load one (`qrmem build --no-vectors`): any
/// use is an error saying why there is none.
pub struct Unavailable {
    pub reason: String,
}

impl Embedder for Unavailable {
    fn model_id(&self) -> &str {
        "none"
    }
    fn dim(&self) -> usize {
        0
    }
    fn normalized(&self) -> bool {
        false
    }
    fn embed(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError::Run(format!(
            "no embedder is loaded: {}",
            self.reason
        )))
    }
}

/// An embedder with an in-memory cache keyed by (model, text): each distinct text is embedded
/// once per process.
pub struct CachedEmbedder<E: Embedder> {
    inner: E,
    cache: Mutex<HashMap<[u8; 32], Vec<f32>>>,
}

impl<E: Embedder> CachedEmbedder<E> {
    pub fn new(inner: E) -> Self {
        CachedEmbedder {
            inner,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn key(&self, text: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.inner.model_id().as_bytes());
        h.update([0u8]);
        h.update(text.as_bytes());
        h.finalize().into()
    }

    /// Distinct texts embedded so far.
    pub fn cached(&self) -> usize {
        self.cache.lock().map(|c| c.len()).unwrap_or(0)
    }
}

impl<E: Embedder> Embedder for CachedEmbedder<E> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn normalized(&self) -> bool {
        self.inner.normalized()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let keys: Vec<[u8; 32]> = texts.iter().map(|t| self.key(t)).collect();
        let missing: Vec<usize> = {
            let cache = self
                .cache
                .lock()
                .map_err(|_| EmbedError::Run("cache lock poisoned".into()))?;
            let mut seen = std::collections::HashSet::new();
            (0..texts.len())
                .filter(|&i| !cache.contains_key(&keys[i]) && seen.insert(keys[i]))
                .collect()
        };
        if !missing.is_empty() {
            let batch: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
            let vectors = self.inner.embed(&batch)?;
            let mut cache = self
                .cache
                .lock()
                .map_err(|_| EmbedError::Run("cache lock poisoned".into()))?;
            for (&i, v) in missing.iter().zip(vectors) {
                cache.insert(keys[i], v);
            }
        }
        let cache = self
            .cache
            .lock()
            .map_err(|_| EmbedError::Run("cache lock poisoned".into()))?;
        keys.iter()
            .map(|k| {
                cache
                    .get(k)
                    .cloned()
                    .ok_or_else(|| EmbedError::Run("a vector went missing from the cache".into()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A toy embedder: letter counts. Only for testing the cache.
    struct Letters(AtomicUsize);
    impl Embedder for Letters {
        fn model_id(&self) -> &str {
            "letters"
        }
        fn dim(&self) -> usize {
            26
        }
        fn normalized(&self) -> bool {
            false
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0.0; 26];
                    for c in t.bytes().filter(u8::is_ascii_lowercase) {
                        v[(c - b'a') as usize] += 1.0;
                    }
                    v
                })
                .collect())
        }
    }

    #[test]
    fn cache_embeds_each_text_once() {
        let e = CachedEmbedder::new(Letters(AtomicUsize::new(0)));
        let a = e.embed(&["abc", "abd", "abc"]).unwrap();
        assert_eq!(a[0], a[2]);
        assert_eq!(e.inner.0.load(Ordering::SeqCst), 2);
        e.embed(&["abd", "zzz"]).unwrap();
        assert_eq!(e.inner.0.load(Ordering::SeqCst), 3);
        assert_eq!(e.cached(), 3);
    }

    #[test]
    fn similarity_functions() {
        assert_eq!(dot(&[1.0, 2.0], &[3.0, 4.0]), 11.0);
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }

    /// Drops the last text of every batch: a broken embedder the checked calls must catch.
    struct Short;
    impl Embedder for Short {
        fn model_id(&self) -> &str {
            "short"
        }
        fn dim(&self) -> usize {
            1
        }
        fn normalized(&self) -> bool {
            false
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts.iter().skip(1).map(|_| vec![1.0]).collect())
        }
    }

    #[test]
    fn checked_calls_reject_a_short_batch() {
        let e = Short;
        let err = embed_exact(&e, &["a", "b", "c"]).unwrap_err().to_string();
        assert!(
            err.contains("short returned 2 vectors for 3 texts"),
            "{err}"
        );
        let err = embed_one(&e, "q").unwrap_err().to_string();
        assert!(
            err.contains("short returned 0 vectors for 1 texts"),
            "{err}"
        );
        assert_eq!(embed_exact(&e, &[]).unwrap(), Vec::<Vec<f32>>::new());
        let letters = Letters(AtomicUsize::new(0));
        assert_eq!(embed_one(&letters, "ab").unwrap().len(), 26);
    }
}
