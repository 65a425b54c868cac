//! The dual-structure memory (QRMeM section 2.1): types, construction, disambiguation, the
//! schema-based extractor, persistence and export.

mod build;
pub mod diagnostics;
pub mod export;
mod inspect;
pub mod merge;
mod passages;
pub mod schema;
pub mod store;
mod types;

pub use build::{build_cooccurrence, is_generic, BuildError, Builder};
pub use diagnostics::{diagnose, GraphDiagnostics};
pub use inspect::describe;
pub use store::{load, save, StoreError};
pub use types::*;
