//! ROUGE-L (the LCS F-measure) and the question pool it guards.

/// Lower-cased word tokens (alphanumeric runs).
fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(|t| t.to_lowercase())
        .collect()
}

fn lcs(a: &[String], b: &[String]) -> usize {
    if a.is_empty() || b.is_empty() {
        return 0;
    }
    let mut prev = vec![0usize; b.len() + 1];
    let mut cur = vec![0usize; b.len() + 1];
    for x in a {
        for (j, y) in b.iter().enumerate() {
            cur[j + 1] = if x == y {
                prev[j] + 1
            } else {
                cur[j].max(prev[j + 1])
            };
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// ROUGE-L F1 between two texts: P = LCS/|candidate|, R = LCS/|reference|, F = 2PR/(P+R).
/// Symmetric; 0 when either side has no tokens.
pub fn rouge_l(candidate: &str, reference: &str) -> f64 {
    let (c, r) = (tokens(candidate), tokens(reference));
    let l = lcs(&c, &r) as f64;
    if l == 0.0 {
        return 0.0;
    }
    let p = l / c.len() as f64;
    let rec = l / r.len() as f64;
    2.0 * p * rec / (p + rec)
}

/// The share of `candidate`'s words that `reference` holds in the same order: LCS/|candidate|
/// (ROUGE-L's precision). Near 1 when the candidate copies the reference; 0 when either side
/// has no words.
pub fn lcs_precision(candidate: &str, reference: &str) -> f64 {
    let (c, r) = (tokens(candidate), tokens(reference));
    if c.is_empty() {
        return 0.0;
    }
    lcs(&c, &r) as f64 / c.len() as f64
}

/// The pool of generated questions: a question joins only if its ROUGE-L with every question
/// already in the pool is below the threshold (the paper: 0.6).
///
/// Scaling: the LCS of two token lists is at most their multiset overlap `o`, so ROUGE-L is at
/// most `2o / (|a| + |b|)`. An inverted index (token -> pool questions with its count) gives every
/// pool question's overlap with a new one; only those whose bound reaches the threshold get the
/// exact LCS. The result is the same as comparing with every pool question.
#[derive(Clone, Debug, Default)]
pub struct QuestionPool {
    threshold: f64,
    questions: Vec<String>,
    token_lists: Vec<Vec<String>>,
    /// token -> (pool index, count of the token in that question)
    postings: std::collections::HashMap<String, Vec<(u32, u32)>>,
    /// Scratch: overlap per pool index, and the indices touched.
    overlap: Vec<u32>,
    touched: Vec<u32>,
}

impl QuestionPool {
    pub fn new(threshold: f64) -> Self {
        QuestionPool {
            threshold,
            ..QuestionPool::default()
        }
    }

    /// Adds `question` if it is novel enough; returns whether it was added.
    pub fn offer(&mut self, question: &str) -> bool {
        let q = question.trim();
        let t = tokens(q);
        if t.is_empty() {
            return false;
        }
        let mut counts: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        for tok in &t {
            *counts.entry(tok.as_str()).or_default() += 1;
        }
        for (tok, &c) in &counts {
            if let Some(list) = self.postings.get(*tok) {
                for &(idx, c2) in list {
                    let slot = &mut self.overlap[idx as usize];
                    if *slot == 0 {
                        self.touched.push(idx);
                    }
                    *slot += c.min(c2);
                }
            }
        }
        let mut novel = true;
        for &idx in &self.touched {
            let i = idx as usize;
            let o = f64::from(self.overlap[i]);
            let other = &self.token_lists[i];
            let bound = 2.0 * o / (t.len() + other.len()) as f64;
            if novel && bound >= self.threshold {
                let l = lcs(&t, other) as f64;
                let (p, r) = (l / t.len() as f64, l / other.len() as f64);
                if l > 0.0 && 2.0 * p * r / (p + r) >= self.threshold {
                    novel = false;
                }
            }
            self.overlap[i] = 0;
        }
        self.touched.clear();
        if !novel {
            return false;
        }
        let idx = self.questions.len() as u32;
        for (tok, c) in counts {
            self.postings
                .entry(tok.to_string())
                .or_default()
                .push((idx, c));
        }
        self.overlap.push(0);
        self.questions.push(q.to_string());
        self.token_lists.push(t);
        true
    }

    pub fn questions(&self) -> &[String] {
        &self.questions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(rouge_l("the cat sat", "the cat sat"), 1.0);
        assert_eq!(rouge_l("a b c", "x y z"), 0.0);
        assert_eq!(rouge_l("", "x"), 0.0);
        // LCS("police killed the gunman", "police kill the gunman") = police the gunman = 3;
        // P = 3/4, R = 3/4, F = 0.75.
        assert!(
            (rouge_l("police killed the gunman", "police kill the gunman") - 0.75).abs() < 1e-12
        );
        // LCS("the gunman was shot dead by police", "police killed the gunman") = "the gunman" = 2;
        // P = 2/7, R = 2/4, F = 2*(2/7)*(1/2)/((2/7)+(1/2)) = 4/11.
        let f = rouge_l(
            "the gunman was shot dead by police",
            "police killed the gunman",
        );
        assert!((f - 4.0 / 11.0).abs() < 1e-12, "{f}");
        assert_eq!(rouge_l("Who designed it?", "who DESIGNED it"), 1.0);
    }

    #[test]
    fn lcs_precision_is_the_copied_share_of_the_candidate() {
        // A candidate that is a prefix of the reference copies all its words.
        assert_eq!(lcs_precision("the cat sat", "The cat sat on the mat"), 1.0);
        // LCS("the dog sat down", "the cat sat on the mat") = "the sat" = 2 of 4 words.
        assert_eq!(
            lcs_precision("the dog sat down", "the cat sat on the mat"),
            0.5
        );
        assert_eq!(lcs_precision("", "x"), 0.0);
        assert_eq!(lcs_precision("x", ""), 0.0);
    }

    #[test]
    fn pool_applies_the_threshold() {
        let mut pool = QuestionPool::new(0.6);
        assert!(pool.offer("Who designed the Velden Bridge?"));
        // ROUGE-L with the first: LCS 4 of 5 and 5 tokens -> 0.8 >= 0.6: rejected.
        assert!(!pool.offer("Who designed the Velden Arch?"));
        // LCS "the velden bridge" = 3; P = 3/6, R = 3/5 -> 0.545 < 0.6: accepted.
        assert!(pool.offer("When did the Velden Bridge open?"));
        assert!(!pool.offer("  "));
        assert_eq!(pool.questions().len(), 2);
    }

    #[test]
    fn the_index_decides_like_comparing_with_every_question() {
        let words = [
            "who", "what", "the", "bridge", "designed", "born", "city", "river", "when", "a", "of",
            "built",
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        let mut pool = QuestionPool::new(0.6);
        let mut brute: Vec<String> = Vec::new();
        for _ in 0..600 {
            let n = rng.usize(2..8);
            let q: Vec<&str> = (0..n).map(|_| words[rng.usize(..words.len())]).collect();
            let q = q.join(" ");
            let novel = !q.trim().is_empty() && brute.iter().all(|b| rouge_l(&q, b) < 0.6);
            assert_eq!(pool.offer(&q), novel, "{q}");
            if novel {
                brute.push(q);
            }
        }
        assert!(brute.len() > 20);
    }
}
