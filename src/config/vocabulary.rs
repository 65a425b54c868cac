//! The words the configuration chooses from, typed: the navigator, the order of an answer
//! prompt's segments and what KN's final answer shows (`[navigate]`), and the reply format of
//! the joint extraction (`[memory]`). Each reads from and writes to the
//! configuration as the string it has always been.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The three navigators of the paper.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum NavMethod {
    /// QRMeM-KN: reflection-based knowledge navigation (Algorithm 1).
    #[default]
    Kn,
    /// QRMeM-GES: Graph Expansion Search.
    Ges,
    /// QRMeM-TE: Entity Trial on the bipartite entity-segment graph.
    Te,
}

impl NavMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            NavMethod::Kn => "kn",
            NavMethod::Ges => "ges",
            NavMethod::Te => "te",
        }
    }
}

impl FromStr for NavMethod {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "kn" => Ok(NavMethod::Kn),
            "ges" => Ok(NavMethod::Ges),
            "te" => Ok(NavMethod::Te),
            other => Err(format!("unknown method '{other}' (kn, ges or te)")),
        }
    }
}

/// The order of the segments in a prompt's text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Order {
    /// As in the document (the paper).
    #[default]
    Document,
    /// Most relevant first: the start set in its rank order, then the added segments by score.
    Relevance,
}

impl Order {
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Document => "document",
            Order::Relevance => "relevance",
        }
    }
}

impl FromStr for Order {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "document" => Ok(Order::Document),
            "relevance" => Ok(Order::Relevance),
            other => Err(format!(
                "unknown segment order '{other}' (document or relevance)"
            )),
        }
    }
}

/// What KN's final answer prompt shows when its trials are spent without an answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum FinalContext {
    /// The best, for the question, of every segment the navigation met: all of S_imp (before
    /// the start share's cut) and every segment an expansion brought, shown or dropped by the
    /// window, ranked like the start set with the final entity set E.
    #[default]
    Ranked,
    /// The last S_mix, as the last check saw it (the paper's loop has no trial limit, so it
    /// never reaches this point).
    SMix,
    /// The last S_mix first, then the rest of the start's order (the hop's, with `-hop`), then
    /// the document's units by the question's BM25, while they fit the answer's budget: the
    /// path's passages, and the best of the rest in the room the last S_mix leaves.
    SMixFilled,
}

impl FinalContext {
    pub fn as_str(self) -> &'static str {
        match self {
            FinalContext::Ranked => "ranked",
            FinalContext::SMix => "s-mix",
            FinalContext::SMixFilled => "s-mix-filled",
        }
    }
}

impl FromStr for FinalContext {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "ranked" => Ok(FinalContext::Ranked),
            "s-mix" | "s_mix" => Ok(FinalContext::SMix),
            "s-mix-filled" | "s_mix_filled" => Ok(FinalContext::SMixFilled),
            other => Err(format!(
                "unknown final context '{other}' (ranked, s-mix or s-mix-filled)"
            )),
        }
    }
}

/// How the joint extraction call writes its reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ExtractionFormat {
    /// Entities as {"name", "type"} objects, then the triples, then up to three questions
    /// each with the triples that help answer it (`prompts/extract.txt`).
    #[default]
    Paper,
    /// The same content, shorter to write (`prompts/extract_compact.txt`): entities as
    /// [name, type] pairs, then the questions as plain strings, then the triples. The questions
    /// come before the triples, so a reply cut at a looping triple list keeps them.
    Compact,
}

impl ExtractionFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            ExtractionFormat::Paper => "paper",
            ExtractionFormat::Compact => "compact",
        }
    }

    pub fn is_paper(&self) -> bool {
        *self == ExtractionFormat::Paper
    }
}

impl FromStr for ExtractionFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "paper" => Ok(ExtractionFormat::Paper),
            "compact" => Ok(ExtractionFormat::Compact),
            other => Err(format!(
                "unknown extraction format '{other}' (paper or compact)"
            )),
        }
    }
}

macro_rules! as_string {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.as_str().to_string()
            }
        }
        impl TryFrom<String> for $t {
            type Error = String;
            fn try_from(s: String) -> Result<Self, String> {
                s.parse()
            }
        }
    )*};
}
as_string!(NavMethod, Order, FinalContext, ExtractionFormat);

/// The keys of the configuration whose values are these words, with their parsers: the loader
/// checks them before it reads the file into types, so that an unknown word is an error naming
/// its key ([`crate::ConfigError::Invalid`]).
/// Parses one word of a key's vocabulary, saying why it is not one.
type Check = fn(&str) -> Result<(), String>;

pub(super) const TYPED_KEYS: [(&str, &str, Check); 4] = [
    ("navigate", "method", |s| s.parse::<NavMethod>().map(drop)),
    ("answer", "order", |s| s.parse::<Order>().map(drop)),
    ("answer", "final_context", |s| {
        s.parse::<FinalContext>().map(drop)
    }),
    ("memory", "extraction_format", |s| {
        s.parse::<ExtractionFormat>().map(drop)
    }),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_read_and_write_as_they_always_have() {
        for (s, m) in [
            ("kn", NavMethod::Kn),
            ("ges", NavMethod::Ges),
            ("te", NavMethod::Te),
        ] {
            assert_eq!(s.parse::<NavMethod>().unwrap(), m);
            assert_eq!(m.to_string(), s);
        }
        assert_eq!("KN".parse::<NavMethod>().unwrap(), NavMethod::Kn);
        assert!("bfs".parse::<NavMethod>().is_err());
        assert_eq!("s_mix".parse::<FinalContext>().unwrap(), FinalContext::SMix);
        assert_eq!(FinalContext::SMix.to_string(), "s-mix");
        assert_eq!(Order::Relevance.to_string(), "relevance");
        assert_eq!(
            serde_json::to_string(&FinalContext::SMix).unwrap(),
            "\"s-mix\""
        );
        assert_eq!(
            serde_json::from_str::<Order>("\"relevance\"").unwrap(),
            Order::Relevance
        );
        assert!(serde_json::from_str::<Order>("\"random\"").is_err());
    }
}
