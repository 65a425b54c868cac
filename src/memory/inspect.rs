//! The human-readable account of a memory that `qrmem inspect` prints.

use std::fmt::Write;

use super::types::Memory;

/// Counts, build parameters, failures and the top entities by degree.
pub fn describe(memory: &Memory, top: usize) -> String {
    let mut s = String::new();
    let st = &memory.stats;
    let _ = writeln!(
        s,
        "memory: {} chars, sha256 {}",
        memory.document_chars,
        &memory.document_sha256[..memory.document_sha256.len().min(16)]
    );
    let _ = writeln!(
        s,
        "model: {}   built in {:.1} s",
        memory.model, memory.build_secs
    );
    if let Some(q) = &memory.question {
        let _ = writeln!(s, "question: {q}");
    }
    let p = &memory.params;
    let _ = writeln!(
        s,
        "params: segment_tokens={} rouge<{} entity_similarity={} graph_update={} open_entity={}{}{}",
        p.segment_tokens,
        p.question_rouge_threshold,
        p.entity_similarity,
        p.graph_update,
        p.open_entity,
        if *p == p.with_former_extraction() {
            String::new()
        } else {
            format!(
                " extraction_format={} extraction_cut_repeats={} extraction_max_entities={}",
                p.extraction_format, p.extraction_cut_repeats, p.extraction_max_entities
            )
        },
        if p.cooccurrence {
            " (the co-occurrence memory: no LLM call; edges are sentences naming two entities)"
        } else {
            ""
        }
    );
    let _ = writeln!(s, "segments:   {}", memory.segments.len());
    let _ = writeln!(
        s,
        "entities:   {} (from {} extracted occurrences; {} merges by disambiguation; {} dropped as not in their segment)",
        memory.entity_count(),
        st.raw_entities,
        st.merges,
        st.dropped_entities
    );
    let _ = writeln!(
        s,
        "relations:  {} (from {} extracted; {} dropped; {} Relation Update calls)",
        memory.relation_count(),
        st.raw_relations,
        st.dropped_relations,
        st.relation_updates
    );
    let _ = writeln!(
        s,
        "questions:  {} in the pool ({} rejected by ROUGE-L)",
        memory.questions.len(),
        st.rejected_questions
    );
    s.push_str(&super::diagnostics::diagnose(memory).describe());
    let _ = writeln!(s, "failures:   {}", memory.failures.len());
    for f in &memory.failures {
        let seg = f
            .segment
            .map(|i| format!("segment {i}"))
            .unwrap_or_else(|| "document".into());
        let _ = writeln!(s, "  - {seg}, step {}: {}", f.step, f.error);
    }
    let _ = writeln!(s, "summary: {}", memory.summary);
    let _ = writeln!(s, "top entities by degree:");
    for (n, degree) in memory.top_entities(top) {
        let e = &memory.graph[n];
        let segs: Vec<String> = e.segments.iter().map(|i| i.to_string()).collect();
        let _ = writeln!(
            s,
            "  {:>3}  {} ({}) segments [{}]",
            degree,
            e.name,
            e.kind,
            segs.join(", ")
        );
    }
    s
}
