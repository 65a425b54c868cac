//! The ceiling of the answer step: oracle rows that show the answerer only the gold evidence,
//! with the answer prompt every method uses. `gold-sentences` shows the item's supporting
//! sentences, each under its passage's header, in document order; `gold-passages` the passages
//! that hold them, whole. Their F1 is what the answer step reaches when retrieval is perfect
//! (LongBench and GraphReader call it "golden").
//!
//! The path rows read the question's gold path (`Ctx::chain`, issue 88): `gold-triples` shows
//! only its triples (2WikiMultihopQA's `evidences`, e.g. `Lothair II | mother | Ermengarde of
//! Tours`); `gold-chain` answers one hop at a time, each hop's sub-question (MuSiQue's
//! decomposition with `#k` replaced by the model's answer to hop k; for a triple, "What is the
//! {relation} of {subject}?", a subject that is an earlier hop's object replaced by the model's
//! answer to it) over that hop's own gold paragraph; the answer is the last sub-question's
//! (MuSiQue), or for triples the question answered from the hops' answers in one more call.
//! `gold-decompose` is the other half of that ceiling: the model's own sub-questions
//! (`chain-decompose-passagesN`'s decomposition and hops) each answered over all the gold
//! paragraphs, so that only the decomposition differs from `gold-chain` and only the retrieval
//! from `chain-decompose-passagesN`.
//!
//! Only the eval harness knows an item's gold evidence (`Ctx::gold`, `Ctx::chain`); elsewhere,
//! and for a dataset without such evidence, these methods fail with
//! [`MethodError::NoGoldEvidence`] before any LLM call.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::baseline::{one_prompt_answer, ShownText};
use super::chain::{Chain, Over};
use super::method::{wrong_memory, Family, Form, Method, MethodSpec};
use super::spec::{MemoryKind, MethodError, Prepared};
use super::Ctx;
use crate::answer::{answer_step, AnswerError, Step, StepKind, Trace};
use crate::config::NavigateConfig;
use crate::text::sentences::Sentences;
use crate::text::{excerpt, Span};

/// An oracle row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oracle {
    /// The gold supporting sentences, under their passages' headers.
    GoldSentences,
    /// The passages holding a gold sentence, whole.
    GoldPassages,
    /// The gold path's triples alone.
    GoldTriples,
    /// One hop at a time along the gold path, each over its own gold paragraph.
    GoldChain,
    /// The model's own sub-questions, each over all the gold paragraphs.
    GoldDecompose,
}

/// One hop of a question's gold path: a sub-question (MuSiQue) or a triple (2Wiki), its
/// answer, and its supporting paragraph in the document.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GoldHop {
    /// The sub-question, `#k` standing for hop k's answer; empty for a triple.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub question: String,
    /// The triple's subject and relation; empty for a sub-question.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub relation: String,
    /// The sub-question's answer, or the triple's object.
    pub answer: String,
    /// The byte range of the hop's supporting paragraph, where the document holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<Span>,
}

impl GoldHop {
    /// The hop's sub-question given the model's answers to the hops before it (`earlier`,
    /// beside their gold hops `path`): MuSiQue's with `#k` replaced, or "What is the relation
    /// of subject?" for a triple.
    pub fn sub_question(&self, path: &[GoldHop], earlier: &[String]) -> String {
        if !self.question.is_empty() {
            let mut q = self.question.clone();
            // #10 before #1, so a longer placeholder is never cut by a shorter one.
            for k in (1..=earlier.len()).rev() {
                q = q.replace(&format!("#{k}"), &earlier[k - 1]);
            }
            return q;
        }
        let subject = path
            .iter()
            .zip(earlier)
            .find(|(h, _)| h.answer == self.subject)
            .map_or(self.subject.as_str(), |(_, a)| a.as_str());
        format!("What is the {} of {subject}?", self.relation)
    }
}

/// Every oracle row's name.
pub const FORMS: &[Form<Oracle>] = &[
    Form {
        pattern: "gold-sentences",
        effect: "the gold supporting sentences under their passages' titles",
        make: |_| Oracle::GoldSentences,
    },
    Form {
        pattern: "gold-passages",
        effect: "the passages holding a gold sentence, whole",
        make: |_| Oracle::GoldPassages,
    },
    Form {
        pattern: "gold-triples",
        effect: "2Wiki: the gold path's triples alone",
        make: |_| Oracle::GoldTriples,
    },
    Form {
        pattern: "gold-chain",
        effect: "one hop at a time along the gold path, each over its own gold paragraph",
        make: |_| Oracle::GoldChain,
    },
    Form {
        pattern: "gold-decompose",
        effect:
            "the model's own sub-questions (chain-decompose's), each over all the gold paragraphs",
        make: |_| Oracle::GoldDecompose,
    },
];

pub const FAMILY: Family = Family {
    names: || Form::help(FORMS),
    parse: |name| Form::parse(FORMS, name).map(MethodSpec::new),
};

#[async_trait]
impl Method for Oracle {
    fn name(&self) -> String {
        Form::name(FORMS, self, 0).unwrap_or_default()
    }

    fn memory_kind(&self) -> MemoryKind {
        MemoryKind::Segments
    }

    async fn answer(
        &self,
        ctx: &Ctx<'_>,
        nav: &NavigateConfig,
        prepared: &Prepared,
        question: &str,
        options: &[String],
    ) -> Result<Trace, MethodError> {
        let Prepared::Graph(memory) = prepared else {
            return Err(wrong_memory(self, prepared));
        };
        if question.trim().is_empty() {
            return Err(AnswerError::EmptyQuestion.into());
        }
        if matches!(self, Oracle::GoldTriples | Oracle::GoldChain) {
            return self.along_path(ctx, memory, question, options).await;
        }
        let gold = match ctx.gold {
            Some(g) if !g.is_empty() => g,
            _ => {
                return Err(MethodError::NoGoldEvidence {
                    method: self.name(),
                })
            }
        };
        let before = ctx.llm.ledger().snapshot().total();
        let document: String = memory.segments.iter().map(|s| s.text.as_str()).collect();
        let shown = shown(*self, &document, gold);
        let note = format!(
            "{}: {} gold sentence(s), {} tokens",
            self.name(),
            gold.len(),
            shown.tokens
        );
        let text = ShownText {
            text: shown.text,
            segments: Vec::new(),
            spans: shown.spans,
            note,
        };
        if *self == Oracle::GoldDecompose {
            // The passage budget is unused: every hop reads the gold paragraphs whole.
            let chain = Chain {
                decompose: true,
                ..Chain::default()
            };
            let q = crate::answer::with_options(question, options);
            let asked = (question, options, q.as_str());
            return chain
                .decomposed(ctx, nav, memory, asked, Over::Fixed(&text), before)
                .await;
        }
        Ok(one_prompt_answer(ctx, &self.name(), question, options, before, text).await?)
    }
}

impl Oracle {
    /// `gold-triples` and `gold-chain` over the question's gold path.
    async fn along_path(
        &self,
        ctx: &Ctx<'_>,
        memory: &crate::memory::Memory,
        question: &str,
        options: &[String],
    ) -> Result<Trace, MethodError> {
        let path = ctx.chain;
        let triples = path.iter().all(|h| !h.subject.is_empty());
        if path.is_empty() || (*self == Oracle::GoldTriples && !triples) {
            return Err(MethodError::NoGoldEvidence {
                method: self.name(),
            });
        }
        let before = ctx.llm.ledger().snapshot().total();
        if *self == Oracle::GoldTriples {
            let text = path
                .iter()
                .map(|h| format!("{} | {} | {}", h.subject, h.relation, h.answer))
                .collect::<Vec<_>>()
                .join("\n");
            let shown = ShownText {
                text,
                segments: Vec::new(),
                spans: Vec::new(),
                note: format!("gold-triples: {} triple(s)", path.len()),
            };
            return Ok(
                one_prompt_answer(ctx, &self.name(), question, options, before, shown).await?,
            );
        }
        let document: String = memory.segments.iter().map(|s| s.text.as_str()).collect();
        let all_gold: Vec<Span> = path.iter().filter_map(|h| h.span).collect();
        let mut answers: Vec<String> = Vec::new();
        let mut steps: Vec<Step> = Vec::new();
        let mut read: Vec<Span> = Vec::new();
        for (k, hop) in path.iter().enumerate() {
            let sub = hop.sub_question(&path[..k], &answers);
            // The hop's own paragraph; every hop's where the document does not hold its own.
            let spans = hop.span.map_or_else(|| all_gold.clone(), |s| vec![s]);
            let shown = shown(Oracle::GoldPassages, &document, &spans);
            let a = answer_step(
                ctx.llm,
                ctx.prompts,
                &sub,
                &shown.text,
                Vec::new(),
                String::new(),
            )
            .await?;
            read.extend(shown.spans.iter().copied());
            steps.push(Step {
                kind: StepKind::Hop,
                reason: format!("{sub} -> {}", a.answer.trim()),
                note: format!(
                    "hop {}: {} token(s) of its gold paragraph",
                    k + 1,
                    shown.tokens
                ),
                ..Step::default()
            });
            answers.push(a.answer.trim().to_string());
        }
        // MuSiQue's last sub-question asks what the question asks: its answer is the answer,
        // as in the probe that measured this ceiling. A path of triples (2Wiki, whose
        // comparisons need both ends) is answered from the hops' answers in one more call.
        if path.iter().all(|h| !h.question.is_empty()) {
            let after = ctx.llm.ledger().snapshot().total();
            let last = answers.last().cloned().unwrap_or_default();
            let answer = if options.is_empty() {
                last
            } else {
                crate::answer::option_letter(&last, options)
            };
            if let Some(s) = steps.last_mut() {
                s.kind = StepKind::Answer;
            }
            let mut trace = Trace {
                method: self.name(),
                question: question.to_string(),
                answer,
                steps,
                read_spans: crate::text::span::merge(read.clone()),
                answer_spans: crate::text::span::merge(read),
                ..Trace::default()
            };
            trace.set_cost(&before, &after);
            return Ok(trace);
        }
        let text = path
            .iter()
            .enumerate()
            .map(|(k, h)| {
                format!(
                    "Sub-question {}: {}\nAnswer: {}",
                    k + 1,
                    h.sub_question(&path[..k], &answers[..k]),
                    answers[k]
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        let shown = ShownText {
            text,
            segments: Vec::new(),
            spans: Vec::new(),
            note: format!("gold-chain: the answers of {} hop(s)", path.len()),
        };
        let mut trace =
            one_prompt_answer(ctx, &self.name(), question, options, before, shown).await?;
        steps.append(&mut trace.steps);
        trace.steps = steps;
        trace.read_spans = crate::text::span::merge(read);
        Ok(trace)
    }
}

/// What `oracle` shows of `document` for the gold sentence ranges `gold` (`gold-sentences`
/// and `gold-passages`; the path rows show passages as `gold-passages` does).
pub fn shown(oracle: Oracle, document: &str, gold: &[Span]) -> excerpt::Excerpt {
    let index = Sentences::of(document);
    match oracle {
        Oracle::GoldSentences => excerpt::of_spans(document, &index, gold),
        Oracle::GoldPassages | Oracle::GoldTriples | Oracle::GoldChain | Oracle::GoldDecompose => {
            // Each passage holding a gold sentence, from its header to its body's end; a gold
            // sentence outside any passage is shown alone.
            let mut ranges: Vec<Span> = gold
                .iter()
                .map(|&g| match index.passage_at(g.0) {
                    Some(k) => (index.passages[k].body.0, index.passages[k].body.1),
                    None => g,
                })
                .collect();
            ranges.sort_unstable();
            ranges.dedup();
            excerpt::of_spans(document, &index, &ranges)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::span::covered;

    const DOC: &str = "Passage 1:\nAlpha\nAlpha is a town. It lies in Texas.\n\nPassage 2:\nNoise\nNothing here.\n\nPassage 3:\nBeta (film)\nBeta is a film. It stars Ann. It won.";

    fn span_of(needle: &str) -> Span {
        let s = DOC.find(needle).unwrap();
        (s, s + needle.len())
    }

    #[test]
    fn gold_sentences_show_only_the_gold_sentences_under_their_headers() {
        let gold = [span_of("It stars Ann."), span_of("It lies in Texas.")];
        let e = shown(Oracle::GoldSentences, DOC, &gold);
        assert_eq!(
            e.text,
            "Passage 1:\nAlpha\nIt lies in Texas.\n\nPassage 3:\nBeta (film)\nIt stars Ann."
        );
        assert!(gold.iter().all(|&g| covered(g, &e.spans)));
        assert!(!e.text.contains("Noise") && !e.text.contains("Beta is a film"));
    }

    #[test]
    fn gold_passages_show_the_gold_passages_whole() {
        let gold = [span_of("It stars Ann.")];
        let e = shown(Oracle::GoldPassages, DOC, &gold);
        assert_eq!(
            e.text,
            "Passage 3:\nBeta (film)\nBeta is a film. It stars Ann. It won."
        );
        assert!(covered(gold[0], &e.spans));
        assert!(!e.text.contains("Alpha"));
    }
}
