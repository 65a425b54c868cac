//! `DiskCache`: vectors kept on disk by content, beside the LLM reply cache, so a re-run of an
//! eval or batch job (or `ask --doc` over the same document) embeds nothing it has embedded
//! before, just as it sends no LLM request it has sent before.
//!
//! One entry per text: `DIR/ab/<sha256 of model id, 0, text>.json` holding the format, key,
//! model id and vector. Entries are written to a temporary file, fsynced and renamed, so a crash
//! never leaves a torn entry; an unreadable entry, or one of another format, key, model or
//! dimension, is a miss (logged) and is replaced by the next write. A failed write is logged and
//! the vector is still returned: the cache saves time, it never decides a result.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{EmbedError, Embedder};

const FORMAT: &str = "qrmem-embedding-v1";

#[derive(Serialize, Deserialize)]
struct Entry {
    format: String,
    key: String,
    model: String,
    vector: Vec<f32>,
}

/// An embedder whose vectors are read from and written to a directory when one is given
/// (`None`: a pass-through, as with `--no-cache`).
pub struct DiskCache<E: Embedder> {
    inner: E,
    dir: Option<PathBuf>,
}

impl<E: Embedder> DiskCache<E> {
    pub fn new(inner: E, dir: Option<PathBuf>) -> Self {
        DiskCache { inner, dir }
    }

    pub fn inner(&self) -> &E {
        &self.inner
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn key(&self, text: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.inner.model_id().as_bytes());
        h.update([0u8]);
        h.update(text.as_bytes());
        hex::encode(h.finalize())
    }

    fn path(dir: &Path, key: &str) -> PathBuf {
        dir.join(&key[..2]).join(format!("{key}.json"))
    }

    fn get(&self, dir: &Path, key: &str) -> Option<Vec<f32>> {
        let path = Self::path(dir, key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(path = %path.display(), "unreadable embedding cache entry: {e}");
                return None;
            }
        };
        match serde_json::from_slice::<Entry>(&bytes) {
            Ok(e)
                if e.format == FORMAT
                    && e.key == key
                    && e.model == self.inner.model_id()
                    && e.vector.len() == self.inner.dim() =>
            {
                Some(e.vector)
            }
            Ok(_) => {
                tracing::warn!(path = %path.display(), "embedding cache entry of another format, key, model or size; ignored");
                None
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), "corrupt embedding cache entry ignored: {e}");
                None
            }
        }
    }

    fn put(&self, dir: &Path, key: &str, vector: &[f32]) -> Result<(), String> {
        let entry = Entry {
            format: FORMAT.into(),
            key: key.into(),
            model: self.inner.model_id().into(),
            vector: vector.to_vec(),
        };
        let bytes = serde_json::to_vec(&entry).map_err(|e| e.to_string())?;
        crate::fsutil::write_atomic(&Self::path(dir, key), &bytes)
    }
}

impl<E: Embedder> Embedder for DiskCache<E> {
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
        let Some(dir) = &self.dir else {
            return self.inner.embed(texts);
        };
        let keys: Vec<String> = texts.iter().map(|t| self.key(t)).collect();
        let mut out: Vec<Option<Vec<f32>>> = keys.iter().map(|k| self.get(dir, k)).collect();
        // Each missing text once, in input order.
        let mut first: std::collections::HashMap<&str, usize> = Default::default();
        let mut missing: Vec<usize> = vec![];
        for (i, v) in out.iter().enumerate() {
            if v.is_none() && !first.contains_key(keys[i].as_str()) {
                first.insert(keys[i].as_str(), missing.len());
                missing.push(i);
            }
        }
        if !missing.is_empty() {
            let batch: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
            let vectors = self.inner.embed(&batch)?;
            if vectors.len() != batch.len() {
                return Err(EmbedError::Run(format!(
                    "{} vectors for {} texts",
                    vectors.len(),
                    batch.len()
                )));
            }
            for (&i, v) in missing.iter().zip(&vectors) {
                if let Err(e) = self.put(dir, &keys[i], v) {
                    tracing::warn!("cannot write an embedding cache entry: {e}");
                }
            }
            for (i, slot) in out.iter_mut().enumerate() {
                if slot.is_none() {
                    if let Some(&m) = first.get(keys[i].as_str()) {
                        *slot = Some(vectors[m].clone());
                    }
                }
            }
        }
        out.into_iter()
            .map(|v| v.ok_or_else(|| EmbedError::Run("a vector went missing".into())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize, &'static str);
    impl Embedder for Counting {
        fn model_id(&self) -> &str {
            self.1
        }
        fn dim(&self) -> usize {
            2
        }
        fn normalized(&self) -> bool {
            false
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts
                .iter()
                .map(|t| vec![t.len() as f32, t.bytes().map(f32::from).sum()])
                .collect())
        }
    }

    fn entries(dir: &Path) -> Vec<PathBuf> {
        let mut v = vec![];
        for sub in std::fs::read_dir(dir).unwrap() {
            for f in std::fs::read_dir(sub.unwrap().path()).unwrap() {
                v.push(f.unwrap().path());
            }
        }
        v
    }

    #[test]
    fn a_second_process_embeds_nothing_again() {
        let dir = tempfile::tempdir().unwrap();
        let a = DiskCache::new(Counting(AtomicUsize::new(0), "m"), Some(dir.path().into()));
        let first = a.embed(&["abc", "de", "abc"]).unwrap();
        assert_eq!(a.inner().0.load(Ordering::SeqCst), 2, "each text once");
        assert_eq!(first[0], first[2]);
        assert_eq!(entries(dir.path()).len(), 2);
        // A new embedder over the same directory (a re-run) reads every vector back.
        let b = DiskCache::new(Counting(AtomicUsize::new(0), "m"), Some(dir.path().into()));
        let again = b.embed(&["de", "abc", "new"]).unwrap();
        assert_eq!(b.inner().0.load(Ordering::SeqCst), 1, "only the new text");
        assert_eq!(again[0], first[1]);
        assert_eq!(again[1], first[0]);
        assert_eq!(again[2], vec![3.0, 330.0]);
        // Another model never reads these vectors.
        let c = DiskCache::new(
            Counting(AtomicUsize::new(0), "other"),
            Some(dir.path().into()),
        );
        c.embed(&["abc"]).unwrap();
        assert_eq!(c.inner().0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn corrupt_or_foreign_entries_are_misses_and_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let a = DiskCache::new(Counting(AtomicUsize::new(0), "m"), Some(dir.path().into()));
        let v = a.embed(&["abc", "de"]).unwrap();
        let files = entries(dir.path());
        std::fs::write(&files[0], b"{\"format\": \"qrmem-embed").unwrap();
        std::fs::write(&files[1], br#"{"format":"something-else","vector":[1]}"#).unwrap();
        let b = DiskCache::new(Counting(AtomicUsize::new(0), "m"), Some(dir.path().into()));
        assert_eq!(b.embed(&["abc", "de"]).unwrap(), v);
        assert_eq!(b.inner().0.load(Ordering::SeqCst), 2, "both re-embedded");
        let c = DiskCache::new(Counting(AtomicUsize::new(0), "m"), Some(dir.path().into()));
        c.embed(&["abc", "de"]).unwrap();
        assert_eq!(c.inner().0.load(Ordering::SeqCst), 0, "and rewritten whole");
    }

    #[test]
    fn without_a_directory_it_passes_through() {
        let a = DiskCache::new(Counting(AtomicUsize::new(0), "m"), None);
        a.embed(&["abc"]).unwrap();
        a.embed(&["abc"]).unwrap();
        assert_eq!(a.inner().0.load(Ordering::SeqCst), 2);
    }
}
