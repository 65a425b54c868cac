//! The registry of method names: every method family, and the parse of a name into the method
//! it stands for. Adding a method: a module implementing [`Method`](super::Method) with a
//! [`Family`], and a line here.

use std::str::FromStr;

use super::method::{Family, MethodSpec};

/// Every method family, in the order of `--help` and error messages.
pub const FAMILIES: &[&Family] = &[
    &super::navigators::FAMILY,
    &super::baseline::FAMILY,
    &super::chain::FAMILY,
    &super::vanilla_middle::FAMILY,
    &super::oracle::FAMILY,
    &super::summary_tree::FAMILY,
    &super::knowledge_tree::FAMILY,
    &super::garlic::FAMILY,
];

/// Each family's names, in the registry's order (`qrmem methods`).
pub fn method_families() -> Vec<String> {
    FAMILIES.iter().map(|f| (f.names)()).collect()
}

/// The names of every method, comma-separated.
pub fn method_names() -> String {
    FAMILIES
        .iter()
        .map(|f| (f.names)())
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for MethodSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        FAMILIES
            .iter()
            .find_map(|f| (f.parse)(s))
            .ok_or_else(|| format!("unknown method '{s}' (one of: {})", method_names()))
    }
}
