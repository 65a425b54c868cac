//! report.md: the report's tables in markdown, one function per table.

use std::fmt::Write as _;

use super::comparisons::Paired;
use super::kinds::ByKind;
use super::rows::{EvidenceCols, EVIDENCE_COLUMNS};
use super::{Report, BUDGET_PNG, COST_QUALITY_PNG};
use crate::eval::paired::{self, Interval};

/// The "max trials" cell of a row (the reports' tables and the question pages' index): "-" for
/// the one-shot baselines.
pub(crate) fn trials_cell(max_trials: Option<usize>) -> String {
    max_trials.map_or("-".to_string(), |t| t.to_string())
}

/// The "max trials" and score cells of a row: accuracy alone for multiple choice, else EM | F1.
fn trials_and_score(max_trials: Option<usize>, em: f64, f1: f64, mc: bool) -> (String, String) {
    let trials = trials_cell(max_trials);
    let score = if mc {
        format!("{f1:.1}")
    } else {
        format!("{em:.1} | {f1:.1}")
    };
    (trials, score)
}

/// The columns `cost_cells` fills.
const COST_COLUMNS: [&str; 4] = [
    "requests/q",
    "LLM calls/q",
    "prompt tok/q",
    "completion tok/q",
];

/// A markdown table's header and alignment rows: the first column left-aligned, numbers right.
fn table_header(s: &mut String, cols: &[&str]) {
    let _ = writeln!(s, "| {} |", cols.join(" | "));
    let align: Vec<&str> = (0..cols.len())
        .map(|i| if i == 0 { "---" } else { "---:" })
        .collect();
    let _ = writeln!(s, "|{}|", align.join("|"));
}

/// The "requests/q | LLM calls/q | prompt tok/q | completion tok/q" cells, the same in every
/// table that shows them.
fn cost_cells(requests: f64, calls: f64, prompt: f64, completion: f64) -> String {
    format!("{requests:.2} | {calls:.2} | {prompt:.0} | {completion:.0}")
}

/// As a table cell: a percentage, or "-" where the server did not say.
fn share_cell(share: f64) -> String {
    if share > 0.0 {
        format!("{:.0}", 100.0 * share)
    } else {
        "-".to_string()
    }
}

impl Report {
    /// The whole report.md.
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let builds_only = self.methods.is_empty() && !self.builds.is_empty();
        self.heading(&mut s, builds_only);
        if !builds_only {
            self.figure(&mut s);
            self.results_table(&mut s, self.metric == "accuracy");
        }
        self.evidence_table(&mut s);
        if let Some(k) = &self.by_kind {
            self.kinds_table(&mut s, k);
        }
        self.navigation_table(&mut s);
        self.common_table(&mut s);
        if let Some(p) = &self.paired {
            self.paired_table(&mut s, p);
        }
        self.builds_table(&mut s);
        self.graphs_table(&mut s);
        self.sweep_section(&mut s);
        let _ = writeln!(
            s,
            "\nLLM calls/q counts requests plus reply-cache hits (the calls the method needs), and \
             the token columns count all of those calls (a cached reply at what it cost when it was \
             first sent), so they are the method's cost whatever was cached; requests and wall time \
             count only what was sent and spent in the runs that filled results.jsonl. Build costs \
             are per document and shared by every method and question that reads the memory."
        );
        s
    }

    /// The title, what was answered, rows by other models, and the notes.
    fn heading(&self, s: &mut String, builds_only: bool) {
        let _ = writeln!(s, "# {}\n", self.title);
        if builds_only {
            // A --build-only run: no row says which dataset or items it answered.
            let _ = writeln!(
                s,
                "Memory builds only: no question was answered. Model: {}.\n",
                self.model
            );
        } else {
            let _ = writeln!(
                s,
                "Dataset: {}. Items: {}. Model: {}.\n",
                self.dataset, self.items, self.model
            );
        }
        if !self.other_models.is_empty() {
            let others: Vec<String> = self
                .other_models
                .iter()
                .map(|(m, n)| format!("{m} ({n} rows)"))
                .collect();
            let _ = writeln!(
                s,
                "**Rows answered by another model than {}:** {}.\n",
                self.model,
                others.join(", ")
            );
        }
        for n in &self.notes {
            let _ = writeln!(s, "- {n}");
        }
        if !self.notes.is_empty() {
            s.push('\n');
        }
    }

    /// The cost-quality figure's link and caption, when a row answered a question.
    fn figure(&self, s: &mut String) {
        if !self.cost_points().is_empty() {
            let _ = writeln!(
                s,
                "![{metric} and fact recall against LLM tokens per question, one point per method]({COST_QUALITY_PNG})\n\n\
                 [{COST_QUALITY_PNG}]({COST_QUALITY_PNG}): each method's {metric} (left) and \
                 answer-context fact recall (right, where the dataset has gold evidence) \
                 against the prompt and completion tokens of its LLM calls per question, on a \
                 log axis; memory builds are not included (their cost per document is in the \
                 build table).\n",
                metric = self.metric
            );
        }
    }

    /// The main table: one row per (method, max trials).
    fn results_table(&self, s: &mut String, mc: bool) {
        let _ = writeln!(s, "## Results (Table 1 layout)\n");
        let score_cols: &[&str] = if mc { &["accuracy"] } else { &["EM", "F1"] };
        let cols: Vec<&str> = ["method", "max trials", "questions"]
            .iter()
            .chain(score_cols)
            .chain(&["failures"])
            .chain(&COST_COLUMNS)
            .chain(&["server-cached prompt %", "wall s/q"])
            .copied()
            .collect();
        table_header(s, &cols);
        for r in &self.methods {
            let (trials, score) = trials_and_score(r.max_trials, r.em, r.f1, mc);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {:.1} |",
                r.method,
                trials,
                r.questions,
                score,
                r.failures,
                cost_cells(
                    r.requests_per_question,
                    r.calls_per_question,
                    r.prompt_tokens_per_question,
                    r.completion_tokens_per_question
                ),
                share_cell(r.server_cached_share),
                r.wall_secs_per_question
            );
        }
    }

    /// The paired table: each row minus the reference, with its interval.
    fn paired_table(&self, s: &mut String, p: &Paired) {
        let _ = writeln!(s, "\n## Paired against {}\n", p.reference);
        let _ = writeln!(
            s,
            "Each row minus {} on the questions both answered, in points: the mean difference and \
             its 95% paired bootstrap interval ({} resamples of the questions, seed {}), and the \
             questions the row scored higher, the same, lower. An interval that holds 0 is no \
             difference at this sample size. Fact recall: of the answer context, on the questions \
             both rows have spans for.\n",
            p.reference,
            paired::RESAMPLES,
            paired::SEED
        );
        let metric = self.metric.as_str();
        let score_col = format!("{metric} difference [95% interval]");
        let wins_col = format!("{metric} higher / same / lower");
        table_header(
            s,
            &[
                "method",
                "max trials",
                "questions",
                &score_col,
                &wins_col,
                "fact recall difference [95% interval]",
                "fact recall higher / same / lower",
            ],
        );
        let iv = |i: &Interval| format!("{:+.1} [{:+.1}, {:+.1}]", i.mean, i.low, i.high);
        let wins = |i: &Interval| format!("{} / {} / {}", i.wins, i.ties, i.losses);
        for r in &p.rows {
            let trials = trials_cell(r.max_trials);
            let (facts, fact_wins) = r
                .fact_recall
                .as_ref()
                .map_or(("n/a".to_string(), "n/a".to_string()), |f| (iv(f), wins(f)));
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.method,
                trials,
                r.score.n,
                iv(&r.score),
                wins(&r.score),
                facts,
                fact_wins
            );
        }
    }

    /// Every row per question kind: score and fact recall.
    fn kinds_table(&self, s: &mut String, k: &ByKind) {
        let _ = writeln!(s, "\n## By question kind\n");
        let _ = writeln!(
            s,
            "Each row's {} / answer-context fact recall (%) on the questions of each kind \
             (HotpotQA's and 2WikiMultihopQA's question type, MuSiQue's hop count; the run's \
             questions of the kind in the header), with the row's count in parentheses where it \
             answered fewer. n/a: no gold evidence or spans. A few questions a kind separate \
             nothing: these are for reading the main table, not for ranking rows.\n",
            self.metric
        );
        let heads: Vec<String> = k.kinds.iter().map(|(n, q)| format!("{n} ({q})")).collect();
        let cols: Vec<&str> = ["method", "max trials"]
            .into_iter()
            .chain(heads.iter().map(String::as_str))
            .collect();
        table_header(s, &cols);
        for r in &k.rows {
            let trials = trials_cell(r.max_trials);
            let cells: Vec<String> = r
                .cells
                .iter()
                .zip(&k.kinds)
                .map(|(c, (_, all))| match c {
                    None => String::new(),
                    Some(c) => {
                        let recall = c
                            .fact_recall
                            .map_or("n/a".to_string(), |x| format!("{:.0}", 100.0 * x));
                        let count = if c.questions == *all {
                            String::new()
                        } else {
                            format!(" ({})", c.questions)
                        };
                        format!("{:.1} / {recall}{count}", c.f1)
                    }
                })
                .collect();
            let _ = writeln!(s, "| {} | {} | {} |", r.method, trials, cells.join(" | "));
        }
    }

    /// The evidence in front of the answerer: fact recall per row.
    fn evidence_table(&self, s: &mut String) {
        if self
            .methods
            .iter()
            .any(|r| r.evidence != EvidenceCols::default())
        {
            let _ = writeln!(s, "\n## Evidence in front of the answerer\n");
            let _ = writeln!(
                s,
                "Fact recall: the share of an item's gold supporting sentences lying wholly inside \
                 the document text the final answer prompt showed (mean over questions); all \
                 facts: the questions whose every supporting sentence was shown; \"read\" counts \
                 every prompt of the question; gold share of context: the share of the answer \
                 context's document text (bytes) inside the gold supporting sentences, its \
                 precision (mean over questions). Summaries are not document text and count for \
                 nothing. n/a: the dataset has no gold evidence, or the rows did not record what \
                 their answer prompt showed.\n"
            );
            let cols: Vec<&str> = ["method", "max trials"]
                .iter()
                .chain(&EVIDENCE_COLUMNS)
                .copied()
                .collect();
            table_header(s, &cols);
            for r in &self.methods {
                let trials = trials_cell(r.max_trials);
                let _ = writeln!(s, "| {} | {} | {} |", r.method, trials, r.evidence.cells());
            }
            if !self.budget_points().is_empty() {
                let metric = &self.metric;
                let _ = writeln!(
                    s,
                    "\n![{metric} and fact recall against the answer context's tokens, one line per method family]({BUDGET_PNG})\n\n\
                     [{BUDGET_PNG}]({BUDGET_PNG}): each method family with two or more context \
                     budgets in its name (bm25-passagesN, bm25-topK, ...): {metric} (left) and fact \
                     recall (right) against the answer context's mean tokens per question."
                );
            }
        }
    }

    /// The navigation diagnostics per row, for the rows that recorded them.
    fn navigation_table(&self, s: &mut String) {
        if self.methods.iter().any(|r| r.navigation.is_some()) {
            // The ranked start (issue 39) adds |S_imp| kept and the idle picks; reports of
            // rows before it keep their columns.
            let ranked = self.methods.iter().any(|r| {
                r.navigation
                    .as_ref()
                    .is_some_and(|n| n.s_imp_kept.is_some())
            });
            let _ = writeln!(s, "\n## Navigation\n");
            let _ = writeln!(
                s,
                "Per question, over the rows that recorded navigation diagnostics: |E_s| (entities \
                 linked from the question), |S_imp| before the window, answerability checks (and \
                 how many answered, or never parsed), expansions, and the expansions after which \
                 the next prompt showed another set of segments.{}\n",
                if ranked {
                    " |S_imp| kept: the start set after ranking and the start share of the window; \
                     idle picks: neighbours taken that changed nothing shown, so no trial was spent."
                } else {
                    ""
                }
            );
            // Escaped: an unescaped `|` splits a cell where tables render.
            let mut cols = vec![
                "method",
                "max trials",
                "questions",
                "\\|E_s\\|",
                "\\|S_imp\\|",
            ];
            if ranked {
                cols.push("\\|S_imp\\| kept");
            }
            cols.extend([
                "checks/q",
                "answered checks",
                "failed checks",
                "expansions/q",
                "changing expansions/q",
                "questions changed",
            ]);
            if ranked {
                cols.push("idle picks/q");
            }
            table_header(s, &cols);
            let opt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.1}"));
            for r in &self.methods {
                let Some(n) = &r.navigation else { continue };
                let trials = trials_cell(r.max_trials);
                let kept = if ranked {
                    format!(" {} |", opt(n.s_imp_kept))
                } else {
                    String::new()
                };
                let idle = if ranked {
                    format!(" {} |", opt(n.idle_picks))
                } else {
                    String::new()
                };
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {:.1} | {:.1} |{kept} {:.2} | {}/{} | {} | {:.2} | {:.2} | {}/{} |{idle}",
                    r.method,
                    trials,
                    n.questions,
                    n.start_entities,
                    n.s_imp,
                    n.checks,
                    n.answered_checks,
                    n.all_checks,
                    n.failed_checks,
                    n.expansions,
                    n.changed_expansions,
                    n.questions_changed,
                    n.questions
                );
            }
        }
    }

    /// Every row on the questions all rows answered, when they answered different sets.
    fn common_table(&self, s: &mut String) {
        let mc = self.metric == "accuracy";
        if let Some(c) = &self.common {
            let _ = writeln!(
                s,
                "\n## On the {} questions every row has a result for\n",
                c.questions
            );
            let _ = writeln!(
                s,
                "The rows above answered different sets of questions (a run part-way, or methods \
                 added later); here each is scored on the same ones.\n"
            );
            let score_cols: &[&str] = if mc { &["accuracy"] } else { &["EM", "F1"] };
            let cols: Vec<&str> = ["method", "max trials"]
                .iter()
                .chain(score_cols)
                .chain(&COST_COLUMNS)
                .chain(&EVIDENCE_COLUMNS)
                .copied()
                .collect();
            table_header(s, &cols);
            for r in &c.rows {
                let (trials, score) = trials_and_score(r.max_trials, r.em, r.f1, mc);
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} |",
                    r.method,
                    trials,
                    score,
                    cost_cells(
                        r.requests_per_question,
                        r.calls_per_question,
                        r.prompt_tokens_per_question,
                        r.completion_tokens_per_question
                    ),
                    r.evidence.cells()
                );
            }
        }
    }

    /// The memory builds: cost per document per memory kind.
    fn builds_table(&self, s: &mut String) {
        if !self.builds.is_empty() {
            let _ = writeln!(s, "\n## Memory builds (per document)\n");
            table_header(
                s,
                &[
                    "memory",
                    "documents",
                    "failures",
                    "document tokens",
                    "segments",
                    "requests",
                    "LLM calls",
                    "prompt tok",
                    "completion tok",
                    "tokens / document token",
                    "server-cached prompt %",
                    "wall s",
                ],
            );
            for b in &self.builds {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {:.2} | {} | {:.0} |",
                    b.kind,
                    b.documents,
                    b.failures,
                    b.document_tokens_per_doc,
                    b.segments_per_doc,
                    b.requests_per_doc,
                    b.calls_per_doc,
                    b.prompt_tokens_per_doc,
                    b.completion_tokens_per_doc,
                    b.tokens_per_document_token,
                    // "-": the server did not say (or the builds predate the field).
                    share_cell(b.server_cached_share),
                    b.wall_secs_per_doc
                );
            }
        }
    }

    /// The QRMeM graphs: mean diagnostics per graph kind.
    fn graphs_table(&self, s: &mut String) {
        if !self.graphs.is_empty() {
            let _ = writeln!(s, "\n## QRMeM graphs (per document)\n");
            let _ = writeln!(
                s,
                "Means over the builds that recorded diagnostics (builds made before they were \
                 recorded are not counted). Entities per segment by source (an entity with several \
                 sources counts under each); relations kept: both ends resolved, over those \
                 extracted; edges: kept relations merged by entity pair; over-linked: entities \
                 linked to more than 20% of the segments.\n"
            );
            // Tables of builds that counted unsupported relations show them in the drops.
            let unsupported = self
                .graphs
                .iter()
                .any(|g| g.dropped_unsupported_per_doc.is_some());
            let mut cols = vec![
                "memory",
                "builds with diagnostics",
                "entities/segment (schema, LLM, relation end)",
                "relations extracted",
                "kept %",
                if unsupported {
                    "dropped: unresolved, self-loop, empty, unsupported"
                } else {
                    "dropped: unresolved, self-loop, empty"
                },
                "edges/segment",
                "entities with an edge % (LLM-extracted)",
                "median segments/entity",
                "over-linked entities",
            ];
            if unsupported {
                cols.extend(["LLM calls/segment", "prompt tok/document token"]);
            }
            table_header(s, &cols);
            let opt = |x: Option<f64>| x.map_or("n/a".to_string(), |x| format!("{x:.1}"));
            for g in &self.graphs {
                let _ = writeln!(
                    s,
                    "| {} | {} of {} | {:.1} ({:.1}, {:.1}, {:.1}) | {:.1} | {:.0} | {}, {}, {} | {:.2} | {:.1} ({}) | {:.1} | {:.1} |{}",
                    g.kind,
                    g.documents,
                    g.builds,
                    g.entities_per_segment,
                    g.schema_entities_per_segment,
                    g.llm_entities_per_segment,
                    g.relation_entities_per_segment,
                    g.raw_relations_per_doc,
                    100.0 * g.kept_share,
                    opt(g.dropped_unresolved_per_doc),
                    opt(g.dropped_self_loop_per_doc),
                    if unsupported {
                        format!(
                            "{}, {}",
                            opt(g.dropped_empty_per_doc),
                            opt(g.dropped_unsupported_per_doc)
                        )
                    } else {
                        opt(g.dropped_empty_per_doc)
                    },
                    g.edges_per_segment,
                    100.0 * g.entities_with_edge,
                    g.llm_entities_with_edge
                        .map_or("n/a".to_string(), |x| format!("{:.1}", 100.0 * x)),
                    g.median_segments_per_entity,
                    g.over_linked_entities_per_doc,
                    if unsupported {
                        let two = |x: Option<f64>| x.map_or("n/a".to_string(), |x| format!("{x:.2}"));
                        format!(
                            " {} | {} |",
                            two(g.calls_per_segment),
                            two(g.prompt_tokens_per_document_token)
                        )
                    } else {
                        String::new()
                    }
                );
            }
        }
    }

    /// The score against max trials (Figure 4), when a navigator has rows for several.
    fn sweep_section(&self, s: &mut String) {
        let sweep = self.sweep();
        if !sweep.is_empty() {
            let _ = writeln!(s, "\n## {} against max trials (Figure 4)\n", self.metric);
            for (m, pts) in &sweep {
                let line: Vec<String> = pts.iter().map(|(t, f)| format!("{t}: {f:.1}")).collect();
                let _ = writeln!(s, "- {m}: {}", line.join(", "));
            }
            let _ = writeln!(s, "\n![{} against max trials](trials.png)", self.metric);
        }
    }
}
