//! Entity disambiguation: which extracted names denote the same entity.
//!
//! Names are normalised (case, punctuation, articles, Snowball stems). Two names merge when
//! their normalised forms are equal; or both have two or more tokens, the same first and last
//! token, and one's tokens contain the other's ("Marie Curie" / "Marie Skłodowska Curie"); or
//! their Jaro-Winkler similarity reaches the threshold (typos: "Hoffman" / "Hoffmann"). Guards:
//! names of several tokens whose first tokens differ never merge (different people who share a
//! surname: "Pierre Curie" / "Marie Curie"), and names with digits merge only when their digits
//! are equal ("1887" / "1888").
//!
//! Only candidates are compared: names are blocked by stemmed token and by 4-character token
//! prefix, so the work grows with the block sizes, not with the square of the names.

use std::collections::{BTreeMap, HashMap};

use rust_stemmers::{Algorithm, Stemmer};

/// A name's normalised tokens.
pub fn normalize(name: &str, stemmer: &Stemmer) -> Vec<String> {
    name.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(|t| t.to_lowercase())
        .filter(|t| !matches!(t.as_str(), "a" | "an" | "the"))
        .map(|t| stemmer.stem(&t).into_owned())
        .collect()
}

pub fn english_stemmer() -> Stemmer {
    Stemmer::create(Algorithm::English)
}

fn digits(tokens: &[String]) -> Vec<&str> {
    tokens
        .iter()
        .filter(|t| t.chars().any(|c| c.is_ascii_digit()))
        .map(String::as_str)
        .collect()
}

/// Whether two normalised names denote the same entity.
pub fn same_entity(a: &[String], b: &[String], threshold: f64) -> bool {
    if a.is_empty() || b.is_empty() {
        return false;
    }
    if a == b {
        return true;
    }
    if digits(a) != digits(b) {
        return false;
    }
    let multi = a.len() >= 2 && b.len() >= 2;
    if multi && a[0] != b[0] {
        return false;
    }
    if multi && a.last() == b.last() {
        let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
        if short.iter().all(|t| long.contains(t)) {
            return true;
        }
    }
    if a.len() != b.len() {
        // Jaro-Winkler only between names of the same shape: a typo changes letters, not words.
        return false;
    }
    strsim::jaro_winkler(&a.join(" "), &b.join(" ")) >= threshold
}

/// Union-find over indices.
struct Dsu(Vec<usize>);

impl Dsu {
    fn find(&mut self, x: usize) -> usize {
        let mut r = x;
        while self.0[r] != r {
            r = self.0[r];
        }
        let mut c = x;
        while self.0[c] != r {
            let n = self.0[c];
            self.0[c] = r;
            c = n;
        }
        r
    }
    fn union(&mut self, a: usize, b: usize) -> bool {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        // The smaller index stays the root, so clusters are stable under input order.
        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.0[hi] = lo;
        true
    }
}

/// Blocks larger than this are compared by exact key only (a token shared by thousands of names,
/// such as "river", says nothing about identity).
const MAX_BLOCK: usize = 2_000;

/// Clusters the names: returns, for each input name, the index of its cluster's representative
/// (an index into `names`), and the number of merges made.
pub fn cluster(names: &[String], threshold: f64) -> (Vec<usize>, usize) {
    let stemmer = english_stemmer();
    // Distinct normalised keys; names sharing a key are merged outright.
    let mut key_of: Vec<usize> = Vec::with_capacity(names.len());
    let mut keys: Vec<Vec<String>> = Vec::new();
    let mut key_index: HashMap<Vec<String>, usize> = HashMap::new();
    // Whether some name of a key is written capitalised (a proper name, not a common noun).
    let mut capitalised: Vec<bool> = Vec::new();
    for name in names {
        let k = normalize(name, &stemmer);
        let id = *key_index.entry(k.clone()).or_insert_with(|| {
            keys.push(k);
            capitalised.push(false);
            keys.len() - 1
        });
        capitalised[id] |= name.trim().chars().next().is_some_and(char::is_uppercase);
        key_of.push(id);
    }
    let mut blocks: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (id, k) in keys.iter().enumerate() {
        let mut seen = Vec::new();
        for t in k {
            let prefix: String = t.chars().take(4).collect();
            for b in [format!("t:{t}"), format!("p:{prefix}")] {
                if !seen.contains(&b) {
                    blocks.entry(b.clone()).or_default().push(id);
                    seen.push(b);
                }
            }
        }
    }
    let mut dsu = Dsu((0..keys.len()).collect());
    let mut merges = 0;
    for members in blocks.values() {
        if members.len() < 2 || members.len() > MAX_BLOCK {
            continue;
        }
        for (i, &a) in members.iter().enumerate() {
            for &b in &members[i + 1..] {
                if dsu.find(a) != dsu.find(b)
                    && same_entity(&keys[a], &keys[b], threshold)
                    && dsu.union(a, b)
                {
                    merges += 1;
                }
            }
        }
    }
    // A bare name (one token, written capitalised) joins the multi-token entity it ends, when
    // exactly one cluster has such an entity: "Hoffmann" -> "Clara Hoffmann"; "Curie" beside
    // "Marie Curie" and "Pierre Curie" is ambiguous and stays apart; the common noun "engineer"
    // does not join "Swiss society of engineers".
    for (block, members) in &blocks {
        let Some(token) = block.strip_prefix("t:") else {
            continue;
        };
        if members.len() > MAX_BLOCK {
            continue;
        }
        let Some(&single) = members
            .iter()
            .find(|&&m| keys[m].len() == 1 && keys[m][0] == token && capitalised[m])
        else {
            continue;
        };
        let mut roots: Vec<usize> = members
            .iter()
            .filter(|&&m| keys[m].len() >= 2 && keys[m].last().is_some_and(|t| t == token))
            .map(|&m| dsu.find(m))
            .collect();
        roots.sort_unstable();
        roots.dedup();
        if roots.len() == 1 && dsu.union(single, roots[0]) {
            merges += 1;
        }
    }
    // Map each cluster of keys back to the first name that has a key in it.
    let mut first_name_of_root: HashMap<usize, usize> = HashMap::new();
    let mut out = Vec::with_capacity(names.len());
    for (i, &k) in key_of.iter().enumerate() {
        let root = dsu.find(k);
        let rep = *first_name_of_root.entry(root).or_insert(i);
        out.push(rep);
    }
    (out, merges)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Vec<String> {
        normalize(s, &english_stemmer())
    }

    #[test]
    fn normalisation() {
        assert_eq!(n("The Velden Bridges"), n("velden bridge"));
        assert_eq!(n("Curie, Marie."), vec!["curi", "mari"]);
        assert!(n("the").is_empty());
    }

    #[test]
    fn merges_variants_and_keeps_people_apart() {
        let t = 0.92;
        assert!(same_entity(
            &n("Marie Curie"),
            &n("Marie Skłodowska Curie"),
            t
        ));
        assert!(same_entity(&n("Marie Curie"), &n("marie curie"), t));
        assert!(same_entity(&n("Clara Hoffmann"), &n("Clara Hoffman"), t));
        assert!(!same_entity(&n("Pierre Curie"), &n("Marie Curie"), t));
        assert!(!same_entity(&n("John Smith"), &n("Jane Smith"), t));
        assert!(!same_entity(&n("1887"), &n("1888"), t));
        assert!(!same_entity(&n("Lucerne"), &n("Bern"), t));
        assert!(
            !same_entity(&n("Curie"), &n("Marie Curie"), t),
            "a bare surname stays apart"
        );
    }

    #[test]
    fn clusters_names() {
        let names: Vec<String> = [
            "Marie Curie",
            "Pierre Curie",
            "Marie Skłodowska Curie",
            "marie curie",
            "Warsaw",
            "the Warsaw",
            "Curie",
            "Hoffmann",
            "Clara Hoffmann",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (rep, merges) = cluster(&names, 0.92);
        // "Curie" is ambiguous (two Curies) and stays apart; "Hoffmann" joins the one Hoffmann.
        assert_eq!(rep, vec![0, 1, 0, 0, 4, 4, 6, 7, 7]);
        assert_eq!(merges, 2);
    }

    #[test]
    fn disambiguation_compares_only_names_in_one_block() {
        // Alike by Jaro-Winkler, but sharing no stemmed token and no 4-letter prefix: never
        // compared, so never merged.
        let (a, b) = (n("Xavierson"), n("Javierson"));
        assert!(
            same_entity(&a, &b, 0.92),
            "the metric alone would merge them"
        );
        let (rep, merges) = cluster(&["Xavierson".into(), "Javierson".into()], 0.92);
        assert_eq!((rep, merges), (vec![0, 1], 0));
        // The same likeness inside one block (the prefix "javi") merges.
        let (rep, merges) = cluster(&["Javiersen".into(), "Javierson".into()], 0.92);
        assert_eq!((rep, merges), (vec![0, 0], 1));
    }
}
