//! The ceiling of the answer step: oracle rows that show the answerer only the gold evidence,
//! with the answer prompt every method uses. `gold-sentences` shows the item's supporting
//! sentences, each under its passage's header, in document order; `gold-passages` the passages
//! that hold them, whole. Their F1 is what the answer step reaches when retrieval is perfect
//! (LongBench and GraphReader call it "golden").
//!
//! Only the eval harness knows an item's gold evidence (`Ctx::gold`); elsewhere, and for a
//! dataset without sentence-level evidence, these methods fail with
//! [`MethodError::NoGoldEvidence`] before any LLM call.

use async_trait::async_trait;

use super::baseline::{one_prompt_answer, ShownText};
use super::method::{wrong_memory, Family, Method, MethodSpec};
use super::spec::{MemoryKind, MethodError, Prepared};
use super::Ctx;
use crate::answer::{AnswerError, Trace};
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
}

pub const FAMILY: Family = Family {
    names: "gold-sentences, gold-passages",
    parse: |name| match name {
        "gold-sentences" => Some(MethodSpec::new(Oracle::GoldSentences)),
        "gold-passages" => Some(MethodSpec::new(Oracle::GoldPassages)),
        _ => None,
    },
};

#[async_trait]
impl Method for Oracle {
    fn name(&self) -> String {
        match self {
            Oracle::GoldSentences => "gold-sentences".into(),
            Oracle::GoldPassages => "gold-passages".into(),
        }
    }

    fn memory_kind(&self) -> MemoryKind {
        MemoryKind::Segments
    }

    async fn answer(
        &self,
        ctx: &Ctx<'_>,
        _nav: &NavigateConfig,
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
        Ok(one_prompt_answer(ctx, &self.name(), question, options, before, text).await?)
    }
}

/// What `oracle` shows of `document` for the gold sentence ranges `gold`.
pub fn shown(oracle: Oracle, document: &str, gold: &[Span]) -> excerpt::Excerpt {
    let index = Sentences::of(document);
    match oracle {
        Oracle::GoldSentences => excerpt::of_spans(document, &index, gold),
        Oracle::GoldPassages => {
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
