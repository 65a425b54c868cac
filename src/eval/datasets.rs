//! Dataset loaders: HotpotQA (distractor JSON), LongBench (jsonl), L-Eval (jsonl: QuALITY
//! multiple choice, Qasper open answers) and QuALITY's own flattened jsonl. Every loader returns
//! plain [`QaItem`]s; a malformed file is an error naming the file, the line and the problem.

use std::path::Path;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

pub use crate::methods::oracle::GoldHop;
use crate::text::span::{self, Span};

#[derive(Debug, Error)]
#[error("dataset {path}{}: {message}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
pub struct DatasetError {
    pub path: String,
    pub line: Option<usize>,
    pub message: String,
}

/// One question over one document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QaItem {
    pub id: String,
    /// hotpotqa, longbench-hotpotqa, 2wikimqa, musique, quality, qasper, ...
    pub dataset: String,
    pub context: String,
    pub question: String,
    /// Multiple-choice options (empty for open questions).
    pub options: Vec<String>,
    /// Gold answers (open questions), or the gold option's text.
    pub answers: Vec<String>,
    /// The gold option letter (multiple choice).
    pub gold_letter: Option<String>,
    /// Titles of the supporting paragraphs, where the dataset gives them.
    pub supporting: Vec<String>,
    /// The byte ranges of the gold supporting sentences in `context`; None where the dataset
    /// gives no sentence-level evidence (QuALITY, Qasper, LongBench's own files).
    #[serde(default)]
    pub gold_spans: Option<Vec<Span>>,
    /// The question's kind where the dataset gives one: HotpotQA's and 2WikiMultihopQA's type
    /// (bridge, comparison, ...), MuSiQue's hop count (2hop, 3hop, 4hop); the report splits
    /// the rows by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The question's gold path, hop by hop, where the dataset gives one: MuSiQue's
    /// decomposition (sub-questions), 2WikiMultihopQA's `evidences` (triples); read only by the
    /// oracle rows `gold-triples` and `gold-chain`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<GoldHop>,
}

/// A dataset's kind field as an item's kind: none where it is empty.
pub(crate) fn kind_of(kind: &str) -> Option<String> {
    (!kind.is_empty()).then(|| kind.to_string())
}

pub(crate) fn err(path: &Path, line: Option<usize>, message: impl Into<String>) -> DatasetError {
    DatasetError {
        path: path.display().to_string(),
        line,
        message: message.into(),
    }
}

/// The text of a dataset file, gunzipped when it is gzip (`*.json.gz`).
fn read(path: &Path) -> Result<String, DatasetError> {
    let bytes = crate::fsutil::read_maybe_gz(path)
        .map_err(|e| err(path, None, format!("cannot read: {e}")))?;
    String::from_utf8(bytes).map_err(|e| err(path, None, format!("not UTF-8: {e}")))
}

/// The JSON values of a jsonl file, with their line numbers (blank lines skipped).
fn jsonl(path: &Path) -> Result<Vec<(usize, Value)>, DatasetError> {
    let text = read(path)?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .map_err(|e| err(path, Some(i + 1), format!("not JSON: {e}")))?;
        out.push((i + 1, v));
    }
    Ok(out)
}

fn str_field(
    v: &Value,
    key: &str,
    path: &Path,
    line: Option<usize>,
) -> Result<String, DatasetError> {
    match v.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(_) => Err(err(path, line, format!("field \"{key}\" is not a string"))),
        None => Err(err(path, line, format!("missing field \"{key}\""))),
    }
}

/// Renders paragraphs as LongBench does: `Passage i:\n{title}\n{text}`, blank-line separated.
pub fn render_passages(paragraphs: &[(String, String)]) -> String {
    paragraphs
        .iter()
        .enumerate()
        .map(|(i, (title, text))| format!("Passage {}:\n{}\n{}", i + 1, title, text))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Renders paragraphs given as (title, sentences) exactly as [`render_passages`] renders
/// (title, concatenated sentences), and returns with the text the byte range of every sentence:
/// `sentences[p][k]` is the range of paragraph `p`'s sentence `k`, without its surrounding
/// whitespace.
pub fn render_sentences(paragraphs: &[(String, Vec<String>)]) -> (String, Vec<Vec<Span>>) {
    let mut text = String::new();
    let mut ranges = Vec::with_capacity(paragraphs.len());
    for (i, (title, sentences)) in paragraphs.iter().enumerate() {
        if i > 0 {
            text.push_str("\n\n");
        }
        text.push_str(&format!("Passage {}:\n{}\n", i + 1, title));
        let mut own = Vec::with_capacity(sentences.len());
        for s in sentences {
            let start = text.len();
            text.push_str(s);
            own.push(span::trim(&text, (start, text.len())));
        }
        ranges.push(own);
    }
    (text, ranges)
}

/// The gold evidence of a HotpotQA item in its rendered document: the byte ranges of its
/// supporting facts (title, sentence index), looked up in `ranges` (from [`render_sentences`]
/// over the paragraphs titled `titles`), sorted and without duplicates. A fact whose title is
/// not in the document, whose index is out of range (HotpotQA has a few), or whose sentence is
/// blank is skipped, and counted in the second value.
pub fn supporting_spans(
    titles: &[&str],
    ranges: &[Vec<Span>],
    facts: &[(String, i64)],
) -> (Vec<Span>, usize) {
    let mut spans = Vec::new();
    let mut skipped = 0;
    for (title, k) in facts {
        let found = titles
            .iter()
            .position(|t| t == title)
            .and_then(|p| usize::try_from(*k).ok().and_then(|k| ranges[p].get(k)))
            .filter(|s| s.1 > s.0);
        match found {
            Some(&s) => spans.push(s),
            None => skipped += 1,
        }
    }
    spans.sort_unstable();
    spans.dedup();
    (spans, skipped)
}

/// One HotpotQA paragraph: its title and sentences.
#[derive(Clone, Debug, Deserialize)]
pub struct HotpotParagraph(pub String, pub Vec<String>);

#[derive(Clone, Debug, Deserialize)]
pub struct HotpotRaw {
    #[serde(rename = "_id")]
    pub id: String,
    pub question: String,
    pub answer: String,
    pub context: Vec<HotpotParagraph>,
    #[serde(default)]
    pub supporting_facts: Vec<(String, i64)>,
    #[serde(default, rename = "type")]
    pub kind: String,
    /// 2WikiMultihopQA's gold path: (subject, relation, object) triples; HotpotQA has none.
    #[serde(default)]
    pub evidences: Vec<Vec<String>>,
}

/// The raw HotpotQA items (for the LongBench-style generator).
pub fn load_hotpot_raw(path: &Path) -> Result<Vec<HotpotRaw>, DatasetError> {
    serde_json::from_str(&read(path)?).map_err(|e| {
        err(
            path,
            Some(e.line()),
            format!("not HotpotQA distractor JSON: {e}"),
        )
    })
}

/// A multi-hop QA item as every LongBench-style generator and distractor loader reads it:
/// HotpotQA, 2WikiMultihopQA (HotpotQA's format) and MuSiQue.
#[derive(Clone, Debug, PartialEq)]
pub struct MultiHopRaw {
    pub id: String,
    pub question: String,
    /// The answer and its aliases (MuSiQue), scored as LongBench scores a list of answers.
    pub answers: Vec<String>,
    /// (title, sentences); a MuSiQue paragraph is one sentence, its whole text.
    pub paragraphs: Vec<(String, Vec<String>)>,
    /// The gold evidence: (paragraph, Some(sentence)) for a supporting sentence, (paragraph,
    /// None) for a whole supporting paragraph (MuSiQue, whose titles repeat within a question,
    /// so a title does not identify a paragraph).
    pub gold: Vec<(usize, Option<usize>)>,
    /// The titles of the supporting paragraphs, in the order the dataset lists them.
    pub supporting_titles: Vec<String>,
    /// The question type (HotpotQA, 2Wiki) or hop count (MuSiQue: "2hop", "3hop", "4hop").
    pub kind: String,
    /// The gold path hop by hop (MuSiQue's decomposition, 2Wiki's evidences; empty for
    /// HotpotQA), each hop's paragraph an index into `paragraphs`.
    pub chain: Vec<RawHop>,
}

/// One hop of a gold path as the dataset gives it: [`GoldHop`] with its supporting paragraph
/// as an index into the item's paragraphs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawHop {
    pub question: String,
    pub subject: String,
    pub relation: String,
    pub answer: String,
    pub paragraph: Option<usize>,
}

impl RawHop {
    /// The hop in a rendering whose sentence ranges are `ranges` (paragraph `p`'s in
    /// `ranges[at[p]]`): its paragraph as a byte range.
    pub fn placed(&self, at: &[usize], ranges: &[Vec<Span>]) -> GoldHop {
        let span = self
            .paragraph
            .and_then(|p| gold_ranges(&[(p, None)], at, ranges).first().copied());
        GoldHop {
            question: self.question.clone(),
            subject: self.subject.clone(),
            relation: self.relation.clone(),
            answer: self.answer.clone(),
            span,
        }
    }
}

/// The gold path of every hop of `chain` in a rendering (see [`RawHop::placed`]).
pub fn placed_chain(chain: &[RawHop], at: &[usize], ranges: &[Vec<Span>]) -> Vec<GoldHop> {
    chain.iter().map(|h| h.placed(at, ranges)).collect()
}

impl From<HotpotRaw> for MultiHopRaw {
    fn from(r: HotpotRaw) -> Self {
        let titles: Vec<&str> = r.context.iter().map(|p| p.0.as_str()).collect();
        let gold = r
            .supporting_facts
            .iter()
            .filter_map(|(t, k)| {
                let p = titles.iter().position(|x| x == t)?;
                Some((p, Some(usize::try_from(*k).ok()?)))
            })
            .collect();
        let mut supporting_titles: Vec<String> =
            r.supporting_facts.iter().map(|(t, _)| t.clone()).collect();
        supporting_titles.dedup();
        // A 2Wiki triple's paragraph is the one titled with its subject.
        let chain = r
            .evidences
            .iter()
            .filter(|t| t.len() == 3)
            .map(|t| RawHop {
                question: String::new(),
                subject: t[0].clone(),
                relation: t[1].clone(),
                answer: t[2].clone(),
                paragraph: titles.iter().position(|x| *x == t[0]),
            })
            .collect();
        MultiHopRaw {
            id: r.id,
            question: r.question,
            answers: vec![r.answer],
            paragraphs: r.context.into_iter().map(|p| (p.0, p.1)).collect(),
            gold,
            supporting_titles,
            kind: r.kind,
            chain,
        }
    }
}

/// The raw items of a multi-hop dev file holding `dataset` (hotpotqa, 2wiki or musique).
pub fn load_multihop_raw(dataset: &str, path: &Path) -> Result<Vec<MultiHopRaw>, DatasetError> {
    match dataset {
        "hotpotqa" => Ok(load_hotpot_raw(path)?
            .into_iter()
            .map(MultiHopRaw::from)
            .collect()),
        "2wiki" => load_2wiki_raw(path),
        "musique" => load_musique_raw(path),
        other => Err(DatasetError {
            path: path.display().to_string(),
            line: None,
            message: format!("unknown dataset '{other}' (hotpotqa, 2wiki or musique)"),
        }),
    }
}

/// The byte ranges of `gold` in a rendering whose sentence ranges are `ranges` (paragraph
/// `p`'s in `ranges[at[p]]`), sorted and without duplicates; a sentence out of range or
/// blank is skipped. A whole paragraph is one range from its first sentence to its last.
pub fn gold_ranges(
    gold: &[(usize, Option<usize>)],
    at: &[usize],
    ranges: &[Vec<Span>],
) -> Vec<Span> {
    let mut spans: Vec<Span> = gold
        .iter()
        .filter_map(|&(p, k)| {
            let own = ranges.get(*at.get(p)?)?;
            match k {
                Some(k) => own.get(k).copied(),
                None => Some((own.first()?.0, own.last()?.1)),
            }
        })
        .filter(|s| s.1 > s.0)
        .collect();
    spans.sort_unstable();
    spans.dedup();
    spans
}

/// 2WikiMultihopQA dev JSON (HotpotQA's format: `_id, type, question, context,
/// supporting_facts, answer`, plus `evidences` and ids this loader does not read). A malformed
/// item is refused naming the file, its index and the field.
pub fn load_2wiki_raw(path: &Path) -> Result<Vec<MultiHopRaw>, DatasetError> {
    let values: Vec<Value> = serde_json::from_str(&read(path)?).map_err(|e| {
        err(
            path,
            Some(e.line()),
            format!("not 2WikiMultihopQA JSON (an array of items): {e}"),
        )
    })?;
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let raw: HotpotRaw =
                serde_json::from_value(v).map_err(|e| err(path, None, format!("item {i}: {e}")))?;
            if raw.context.is_empty() {
                return Err(err(
                    path,
                    None,
                    format!("item {i} ({}): field \"context\" has no paragraph", raw.id),
                ));
            }
            if raw.supporting_facts.is_empty() {
                return Err(err(
                    path,
                    None,
                    format!("item {i} ({}): field \"supporting_facts\" is empty", raw.id),
                ));
            }
            Ok(MultiHopRaw::from(raw))
        })
        .collect()
}

#[derive(Deserialize)]
struct MusiqueParagraph {
    idx: usize,
    title: String,
    paragraph_text: String,
    is_supporting: bool,
}

#[derive(Deserialize)]
struct MusiqueLine {
    id: String,
    question: String,
    answer: String,
    #[serde(default)]
    answer_aliases: Vec<String>,
    paragraphs: Vec<MusiqueParagraph>,
    #[serde(default)]
    question_decomposition: Vec<MusiqueHop>,
}

/// One sub-question of MuSiQue's decomposition (`#k` in it stands for hop k's answer).
#[derive(Deserialize)]
struct MusiqueHop {
    question: String,
    answer: String,
    paragraph_support_idx: Option<usize>,
}

/// MuSiQue-Ans jsonl (`id, paragraphs: [{idx, title, paragraph_text, is_supporting}],
/// question, answer, answer_aliases`): each paragraph one unit of gold evidence, the answers
/// the answer and its aliases, the kind the hop count from the id ("3hop1__..." is "3hop"). A malformed
/// line is refused naming the file, the line and the field.
pub fn load_musique_raw(path: &Path) -> Result<Vec<MultiHopRaw>, DatasetError> {
    jsonl(path)?
        .into_iter()
        .map(|(line, v)| {
            let m: MusiqueLine = serde_json::from_value(v)
                .map_err(|e| err(path, Some(line), format!("not a MuSiQue item: {e}")))?;
            if m.paragraphs.is_empty() {
                return Err(err(
                    path,
                    Some(line),
                    format!("item {}: field \"paragraphs\" is empty", m.id),
                ));
            }
            let gold: Vec<(usize, Option<usize>)> = m
                .paragraphs
                .iter()
                .enumerate()
                .filter(|(_, p)| p.is_supporting)
                .map(|(i, _)| (i, None))
                .collect();
            if gold.is_empty() {
                return Err(err(
                    path,
                    Some(line),
                    format!("item {}: no paragraph has \"is_supporting\" true", m.id),
                ));
            }
            if m.answer.trim().is_empty() {
                return Err(err(
                    path,
                    Some(line),
                    format!("item {}: field \"answer\" is empty", m.id),
                ));
            }
            let supporting_titles = gold
                .iter()
                .map(|&(i, _)| m.paragraphs[i].title.clone())
                .collect();
            // "3hop1__..." is a 3-hop question (of MuSiQue's first 3-hop shape).
            let prefix = m.id.split("__").next().unwrap_or("");
            let kind = match prefix.find("hop") {
                Some(at) => prefix[..at + 3].to_string(),
                None => prefix.to_string(),
            };
            let mut answers = vec![m.answer];
            answers.extend(m.answer_aliases);
            // A hop's paragraph is named by its `idx`, not its position.
            let chain = m
                .question_decomposition
                .iter()
                .map(|h| RawHop {
                    question: h.question.clone(),
                    answer: h.answer.clone(),
                    paragraph: h
                        .paragraph_support_idx
                        .and_then(|i| m.paragraphs.iter().position(|p| p.idx == i)),
                    ..RawHop::default()
                })
                .collect();
            Ok(MultiHopRaw {
                id: m.id,
                question: m.question,
                answers,
                paragraphs: m
                    .paragraphs
                    .into_iter()
                    .map(|p| (p.title, vec![p.paragraph_text]))
                    .collect(),
                gold,
                supporting_titles,
                kind,
                chain,
            })
        })
        .collect()
}

/// Multi-hop items in their own (distractor) setting: their paragraphs rendered as passages,
/// labelled `dataset`, with their gold evidence as byte ranges.
pub fn multihop_items(raw: Vec<MultiHopRaw>, dataset: &str) -> Vec<QaItem> {
    raw.into_iter()
        .map(|r| {
            let (context, ranges) = render_sentences(&r.paragraphs);
            let at: Vec<usize> = (0..r.paragraphs.len()).collect();
            let gold = gold_ranges(&r.gold, &at, &ranges);
            let chain = placed_chain(&r.chain, &at, &ranges);
            QaItem {
                id: r.id,
                dataset: dataset.to_string(),
                context,
                question: r.question,
                options: vec![],
                answers: r.answers,
                gold_letter: None,
                supporting: r.supporting_titles,
                gold_spans: Some(gold),
                kind: kind_of(&r.kind),
                chain,
            }
        })
        .collect()
}

/// HotpotQA distractor JSON: the 10 paragraphs rendered as passages.
pub fn load_hotpot(path: &Path) -> Result<Vec<QaItem>, DatasetError> {
    Ok(load_hotpot_raw(path)?
        .into_iter()
        .map(|r| {
            let paragraphs: Vec<(String, Vec<String>)> = r
                .context
                .iter()
                .map(|p| (p.0.clone(), p.1.clone()))
                .collect();
            let (context, ranges) = render_sentences(&paragraphs);
            let titles: Vec<&str> = paragraphs.iter().map(|p| p.0.as_str()).collect();
            let (gold, _) = supporting_spans(&titles, &ranges, &r.supporting_facts);
            let mut supporting: Vec<String> =
                r.supporting_facts.iter().map(|(t, _)| t.clone()).collect();
            supporting.dedup();
            QaItem {
                id: r.id,
                dataset: "hotpotqa".into(),
                context,
                question: r.question,
                options: vec![],
                answers: vec![r.answer],
                gold_letter: None,
                supporting,
                gold_spans: Some(gold),
                kind: kind_of(&r.kind),
                chain: Vec::new(),
            }
        })
        .collect())
}

/// LongBench jsonl (`input, context, answers, _id, length, dataset`).
pub fn load_longbench(path: &Path) -> Result<Vec<QaItem>, DatasetError> {
    jsonl(path)?
        .into_iter()
        .map(|(line, v)| {
            let l = Some(line);
            let answers = v
                .get("answers")
                .and_then(|a| a.as_array())
                .ok_or_else(|| err(path, l, "missing list field \"answers\""))?
                .iter()
                .map(|a| {
                    a.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| err(path, l, "an answer is not a string"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(QaItem {
                id: str_field(&v, "_id", path, l)?,
                dataset: v
                    .get("dataset")
                    .and_then(|d| d.as_str())
                    .unwrap_or("longbench")
                    .to_string(),
                context: str_field(&v, "context", path, l)?,
                question: str_field(&v, "input", path, l)?,
                options: vec![],
                answers,
                gold_letter: None,
                supporting: vec![],
                // Written by `qrmem data longbench-style`; LongBench's own files have none.
                gold_spans: match v.get("supporting_spans") {
                    None | Some(Value::Null) => None,
                    Some(x) => Some(serde_json::from_value(x.clone()).map_err(|e| {
                        err(
                            path,
                            l,
                            format!(
                                "field \"supporting_spans\" is not a list of [start, end]: {e}"
                            ),
                        )
                    })?),
                },
                // Written by `qrmem data longbench-style` (the source's question type or hops).
                kind: v.get("type").and_then(|t| t.as_str()).and_then(kind_of),
                chain: Vec::new(),
            })
        })
        .collect()
}

fn option_line() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"^\s*\(([A-Z])\)\s*(.*)$").ok())
        .as_ref()
}

/// Splits an L-Eval multiple-choice instruction into the question and its options.
fn split_options(instruction: &str) -> (String, Vec<String>) {
    let mut question = Vec::new();
    let mut options = Vec::new();
    for line in instruction.lines() {
        match option_line().and_then(|r| r.captures(line)) {
            Some(c) => options.push(
                c.get(2)
                    .map(|m| m.as_str().trim().to_string())
                    .unwrap_or_default(),
            ),
            None if options.is_empty() => question.push(line),
            None => {}
        }
    }
    (question.join("\n").trim().to_string(), options)
}

/// L-Eval jsonl: one article per line with its `instructions` and `outputs`. With options in the
/// instructions (QuALITY) the gold is the option letter of the output "(C) ..."; otherwise
/// (Qasper) the output is the gold answer.
pub fn load_leval(path: &Path, dataset: &str) -> Result<Vec<QaItem>, DatasetError> {
    let mut items = Vec::new();
    for (line, v) in jsonl(path)? {
        let l = Some(line);
        let context = str_field(&v, "input", path, l)?;
        let list = |key: &str| -> Result<Vec<String>, DatasetError> {
            v.get(key)
                .and_then(|a| a.as_array())
                .ok_or_else(|| err(path, l, format!("missing list field \"{key}\"")))?
                .iter()
                .map(|x| {
                    x.as_str().map(str::to_string).ok_or_else(|| {
                        err(path, l, format!("an entry of \"{key}\" is not a string"))
                    })
                })
                .collect()
        };
        let (instructions, outputs) = (list("instructions")?, list("outputs")?);
        if instructions.len() != outputs.len() {
            return Err(err(
                path,
                l,
                format!(
                    "{} instructions but {} outputs",
                    instructions.len(),
                    outputs.len()
                ),
            ));
        }
        for (q, (instruction, output)) in instructions.iter().zip(&outputs).enumerate() {
            let (question, options) = split_options(instruction);
            let gold_letter = if options.is_empty() {
                None
            } else {
                let letter = option_line()
                    .and_then(|r| r.captures(output.trim()))
                    .and_then(|c| c.get(1))
                    .map(|m| m.as_str().to_string());
                Some(letter.ok_or_else(|| {
                    err(
                        path,
                        l,
                        format!("output {} has no option letter: {output:?}", q + 1),
                    )
                })?)
            };
            items.push(QaItem {
                id: format!("{dataset}-{line}-{q}"),
                dataset: dataset.to_string(),
                context: context.clone(),
                question,
                options,
                answers: vec![output.clone()],
                gold_letter,
                supporting: vec![],
                gold_spans: None,
                kind: None,
                chain: Vec::new(),
            });
        }
    }
    Ok(items)
}

fn tags() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"<[^>]*>").ok()).as_ref()
}

/// QuALITY's own flattened jsonl (`article` as HTML lines, `question{k}`,
/// `question{k}option{1..4}`, `question{k}_gold_label` 1-based).
pub fn load_quality_flat(path: &Path) -> Result<Vec<QaItem>, DatasetError> {
    let mut items = Vec::new();
    for (line, v) in jsonl(path)? {
        let l = Some(line);
        let html: String = match v.get("article") {
            Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.as_str()).collect(),
            Some(Value::String(s)) => s.clone(),
            _ => return Err(err(path, l, "missing field \"article\"")),
        };
        let text = match tags() {
            Some(r) => r.replace_all(&html, "").into_owned(),
            None => html,
        };
        let context = text
            .lines()
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        let uid = str_field(&v, "unique_id", path, l)
            .or_else(|_| str_field(&v, "article_id", path, l))?;
        for k in 1.. {
            let Some(q) = v.get(format!("question{k}")).and_then(|q| q.as_str()) else {
                break;
            };
            let options: Vec<String> = (1..=4)
                .map_while(|o| {
                    v.get(format!("question{k}option{o}"))
                        .and_then(|x| x.as_str())
                        .map(str::to_string)
                })
                .collect();
            let gold = v
                .get(format!("question{k}_gold_label"))
                .and_then(|g| g.as_u64());
            let gold_letter = match gold {
                Some(g) if g >= 1 && (g as usize) <= options.len() => {
                    Some(((b'A' + (g - 1) as u8) as char).to_string())
                }
                Some(g) => {
                    return Err(err(
                        path,
                        l,
                        format!("question{k}_gold_label {g} is not an option"),
                    ))
                }
                None => None,
            };
            items.push(QaItem {
                id: format!("{uid}-q{k}"),
                dataset: "quality".into(),
                context: context.clone(),
                question: q.to_string(),
                answers: gold
                    .and_then(|g| options.get(g as usize - 1).cloned())
                    .into_iter()
                    .collect(),
                options,
                gold_letter,
                supporting: vec![],
                gold_spans: None,
                kind: None,
                chain: Vec::new(),
            });
        }
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_split_from_instructions() {
        let (q, o) = split_options("How did Ninon fare?\n\n (A) He died\n (B) He became youthful\n (C) Particles\n (D) Landed");
        assert_eq!(q, "How did Ninon fare?");
        assert_eq!(
            o,
            vec!["He died", "He became youthful", "Particles", "Landed"]
        );
        assert_eq!(
            split_options("What is the main finding?"),
            ("What is the main finding?".to_string(), vec![])
        );
    }

    #[test]
    fn passages_render_like_longbench() {
        let p = render_passages(&[("A".into(), "x.".into()), ("B".into(), "y.".into())]);
        assert_eq!(p, "Passage 1:\nA\nx.\n\nPassage 2:\nB\ny.");
    }
}
