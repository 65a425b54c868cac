//! Okapi BM25 over segments, on lower-cased Snowball-stemmed tokens.

use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};

/// BM25 parameters (the usual Okapi defaults).
pub const K1: f64 = 1.2;
pub const B: f64 = 0.75;

fn tokens(text: &str, stemmer: &Stemmer) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(|t| stemmer.stem(&t.to_lowercase()).into_owned())
        .collect()
}

/// An index over documents (segments).
pub struct Bm25 {
    stemmer: Stemmer,
    /// Per document: term -> frequency.
    docs: Vec<HashMap<String, u32>>,
    lengths: Vec<usize>,
    avg_len: f64,
    /// term -> number of documents containing it.
    df: HashMap<String, u32>,
}

impl Bm25 {
    pub fn new<S: AsRef<str>>(documents: &[S]) -> Self {
        let stemmer = Stemmer::create(Algorithm::English);
        let mut docs = Vec::with_capacity(documents.len());
        let mut lengths = Vec::with_capacity(documents.len());
        let mut df: HashMap<String, u32> = HashMap::new();
        for d in documents {
            let toks = tokens(d.as_ref(), &stemmer);
            lengths.push(toks.len());
            let mut tf: HashMap<String, u32> = HashMap::new();
            for t in toks {
                *tf.entry(t).or_default() += 1;
            }
            for t in tf.keys() {
                *df.entry(t.clone()).or_default() += 1;
            }
            docs.push(tf);
        }
        let avg_len = if lengths.is_empty() {
            0.0
        } else {
            lengths.iter().sum::<usize>() as f64 / lengths.len() as f64
        };
        Bm25 {
            stemmer,
            docs,
            lengths,
            avg_len,
            df,
        }
    }

    /// An index over `units` (a memory's segments or passages), a document each.
    pub fn over(units: &[super::Segment]) -> Self {
        let texts: Vec<&str> = units.iter().map(|u| u.text.as_str()).collect();
        Bm25::new(&texts)
    }

    /// Scores every document against `query`: (document index, score), best first, ties by index.
    pub fn rank(&self, query: &str) -> Vec<(usize, f64)> {
        let n = self.docs.len() as f64;
        let mut q = tokens(query, &self.stemmer);
        q.sort();
        q.dedup();
        let mut scores: Vec<(usize, f64)> = self
            .docs
            .iter()
            .enumerate()
            .map(|(i, tf)| {
                let len_norm = if self.avg_len > 0.0 {
                    self.lengths[i] as f64 / self.avg_len
                } else {
                    0.0
                };
                let s = q
                    .iter()
                    .filter_map(|t| {
                        let f = f64::from(*tf.get(t)?);
                        let df = f64::from(*self.df.get(t).unwrap_or(&0));
                        // The Lucene/BM25+ idf, always positive.
                        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                        Some(idf * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * len_norm)))
                    })
                    .sum();
                (i, s)
            })
            .collect();
        scores.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scores
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_by_term_overlap_with_stemming() {
        let docs = [
            "The bridge was designed by an engineer.",
            "She was born in Lucerne.",
            "Bananas are yellow.",
        ];
        let idx = Bm25::new(&docs);
        let r = idx.rank("Who designed bridges?");
        assert_eq!(r[0].0, 0, "stems: designed~design, bridges~bridge");
        assert!(r[0].1 > 0.0 && r[2].1 == 0.0);
        assert_eq!(idx.rank("Where was she born")[0].0, 1);
    }

    #[test]
    fn hand_computed_score() {
        // Two docs, query "cat": df = 1, n = 2 -> idf = ln(1 + 1.5/1.5) = ln 2.
        // doc 0 = "cat cat dog" (len 3), avg len (3 + 1) / 2 = 2 -> norm 1.5.
        // tf part = 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 1.5)) = 4.4 / 3.65.
        let idx = Bm25::new(&["cat cat dog", "dog"]);
        let r = idx.rank("cat");
        let expected = 2f64.ln() * 4.4 / 3.65;
        assert_eq!(r[0].0, 0);
        assert!(
            (r[0].1 - expected).abs() < 1e-12,
            "{} vs {expected}",
            r[0].1
        );
        assert!(Bm25::new::<&str>(&[]).rank("x").is_empty());
    }
}
