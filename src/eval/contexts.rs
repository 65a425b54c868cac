//! `qrmem eval --contexts-only`: what the one-call baselines would show the answerer, measured
//! without the LLM (issue 66: "measure without the LLM where that answers the question"). For
//! every item and every baseline method of the plan: the context's fact recall, its gold share
//! (precision) and its tokens, from the same selection code the method answers with
//! (`Baseline::context_of`), in seconds over every item. Methods that need the LLM to choose
//! their context (the navigators, the seed systems) are refused by name. Each question's spans
//! are kept too (`ContextRecord`, written as `contexts.jsonl`), so a context measured without
//! the LLM pairs question by question with a run's rows (`qrmem pair RUN,DIR A B`).

use std::fmt::Write as _;

use super::evidence::ContextSpans;
use super::experiment::Plan;
use super::runner::EvalError;
use crate::answer::Window;
use crate::memory::Memory;
use crate::methods::{Baseline, MemoryKind, Runtime};
use crate::prompts::Prompts;

/// One question's context under one method: the run rows' span fields, without an answer.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ContextRecord {
    pub item: String,
    pub method: String,
    #[serde(flatten)]
    pub spans: ContextSpans,
}

/// What `measure` finds: one row per method (the plan's order) and one record per item and
/// method (item order, then the plan's method order).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measured {
    pub rows: Vec<ContextRow>,
    pub records: Vec<ContextRecord>,
}

/// One method's contexts over the items: mean fact recall, all-facts count, mean gold share
/// and mean tokens.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContextRow {
    pub method: String,
    pub items: usize,
    /// Items with gold evidence (recall and gold share are over these).
    pub measured: usize,
    pub fact_recall: f64,
    pub all_facts: usize,
    pub gold_share: f64,
    pub tokens: f64,
}

/// Measures the plan's methods (baselines only) over its items.
pub fn measure(rt: &Runtime<'_>, plan: &Plan) -> Result<Measured, EvalError> {
    let fail = |message: String| EvalError::Input(message);
    let baselines: Vec<Baseline> = plan
        .methods
        .iter()
        .map(|m| {
            m.to_string().parse::<Baseline>().map_err(|_| {
                fail(format!(
                    "--contexts-only measures the baselines that choose their context without the LLM (bm25-*, contriever-*, vanilla-*, full); {m} is not one of them (a navigator's context is chosen by the LLM's steps, a gold row's is the gold evidence itself)"
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    let (items, _) = plan.load_items()?;
    let prompts: &Prompts = rt.prompts;
    let window = Window::of(&rt.config.navigate);
    let params = MemoryKind::Segments.params(rt.config);
    let mut rows: Vec<ContextRow> = baselines
        .iter()
        .map(|b| ContextRow {
            method: b.to_string(),
            ..ContextRow::default()
        })
        .collect();
    let mut recall_sum = vec![0.0; rows.len()];
    let mut share_sum = vec![0.0; rows.len()];
    let mut token_sum = vec![0.0; rows.len()];
    let mut records = Vec::with_capacity(items.len() * baselines.len());
    for item in &items {
        let memory = Memory::segments_only(&item.context, params.clone(), "none");
        let q = crate::answer::with_options(&item.question, &item.options);
        for (k, b) in baselines.iter().enumerate() {
            let shown = b
                .context_of(
                    prompts,
                    rt.embedder,
                    window,
                    &rt.config.navigate,
                    &memory,
                    &q,
                )
                .map_err(|e| fail(format!("{b} on item {}: {e}", item.id)))?;
            let spans = ContextSpans::of(
                &item.context,
                shown.spans.clone(),
                shown.spans,
                item.gold_spans.clone(),
            );
            records.push(ContextRecord {
                item: item.id.clone(),
                method: b.to_string(),
                spans: spans.clone(),
            });
            let row = &mut rows[k];
            row.items += 1;
            token_sum[k] += spans.answer_context_tokens.unwrap_or(0) as f64;
            if let (Some((hits, facts)), Some(share)) =
                (spans.answer_recall(), spans.answer_gold_share())
            {
                row.measured += 1;
                recall_sum[k] += hits as f64 / facts as f64;
                row.all_facts += usize::from(hits == facts);
                share_sum[k] += share;
            }
        }
    }
    for (k, row) in rows.iter_mut().enumerate() {
        let n = row.measured.max(1) as f64;
        row.fact_recall = recall_sum[k] / n;
        row.gold_share = share_sum[k] / n;
        row.tokens = token_sum[k] / row.items.max(1) as f64;
    }
    Ok(Measured { rows, records })
}

/// The rows as a markdown table under a heading naming the dataset and the items.
pub fn to_markdown(plan: &Plan, rows: &[ContextRow]) -> String {
    let mut s = String::new();
    let items = rows.first().map_or(0, |r| r.items);
    let _ = writeln!(
        s,
        "# Contexts without the LLM: {} ({} items)\n\nWhat each baseline would show the answerer, from the selection code it answers with: fact recall (the share of an item's gold supporting sentences wholly inside the context), the items with every one, the gold share of the context's document text (its precision) and its tokens.\n",
        plan.dataset, items
    );
    let _ = writeln!(
        s,
        "| method | fact recall % | all facts | gold share % | context tok/q |\n|---|---:|---:|---:|---:|"
    );
    for r in rows {
        if r.measured == 0 {
            let _ = writeln!(s, "| {} | n/a | n/a | n/a | {:.0} |", r.method, r.tokens);
        } else {
            let _ = writeln!(
                s,
                "| {} | {:.1} | {}/{} | {:.1} | {:.0} |",
                r.method,
                100.0 * r.fact_recall,
                r.all_facts,
                r.measured,
                100.0 * r.gold_share,
                r.tokens
            );
        }
    }
    s
}

/// `qrmem eval --contexts-only`: the plan's baselines' contexts measured without the LLM
/// (`eval::contexts`), written to `out/contexts.md` (the table, which it returns) and
/// `out/contexts.jsonl` (each question's spans under each method, the run rows' span fields).
pub fn contexts_only(
    rt: &Runtime<'_>,
    plan: &Plan,
    out: &std::path::Path,
) -> Result<String, EvalError> {
    let measured = measure(rt, plan)?;
    let text = to_markdown(plan, &measured.rows);
    let mut lines = String::new();
    for r in &measured.records {
        let line = serde_json::to_string(r)
            .map_err(|e| EvalError::Input(format!("cannot encode {}'s context: {e}", r.item)))?;
        lines.push_str(&line);
        lines.push('\n');
    }
    // Whole or not at all: a crash mid-write leaves the earlier files, not a torn table.
    crate::fsutil::write_atomic(&out.join("contexts.jsonl"), lines.as_bytes())
        .map_err(EvalError::Input)?;
    crate::fsutil::write_atomic(&out.join("contexts.md"), text.as_bytes())
        .map_err(EvalError::Input)?;
    Ok(text)
}
