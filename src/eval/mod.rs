//! Evaluation: the official metrics, the dataset loaders, the runner (results.jsonl with
//! resume) and the reports.

pub mod backfill;
pub mod compare;
pub mod contexts;
pub mod corpus_qa;
pub mod corpus_recall;
pub mod datasets;
pub mod evidence;
pub mod experiment;
pub mod items;
pub mod longbench_style;
pub mod metrics;
pub mod pair;
pub mod paired;
pub mod plot;
pub mod report;
pub mod rows;
pub mod runner;
pub mod table1;

pub use crate::methods::Runtime;
pub use report::Report;
pub use rows::{BuildRecord, ResultRecord, RowCost};
pub use runner::{run, EvalError, EvalOptions, RunSummary};
