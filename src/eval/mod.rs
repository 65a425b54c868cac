//! Evaluation: the official metrics and the dataset loaders. (The runner, the methods and the
//! reports of issue 6 build on these.)

pub mod datasets;
pub mod longbench_style;
pub mod metrics;
