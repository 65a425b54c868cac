//! Per-question navigation diagnostics, read from a trace's typed steps: |E_s|, |S_imp|, each
//! answerability check's segments and verdict, and the expansions that changed what the next
//! prompt showed.

use serde::{Deserialize, Serialize};

use crate::answer::{StepKind, Trace};

/// One answerability check as the diagnostics record it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckRecord {
    /// The segments the check's prompt showed.
    pub segments: Vec<usize>,
    /// -2 answered, -1 cannot answer (a failed check counts as -1).
    pub action: Option<i32>,
    /// The reply never parsed (counted as -1).
    #[serde(default)]
    pub failed: bool,
    /// P(answerable) read from the action token's log probabilities (None: not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_answerable: Option<f64>,
}

/// Per-question navigation diagnostics (a `results.jsonl` row's `nav`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NavDiagnostics {
    /// |E_s|: the entities linked from the question.
    pub start_entities: usize,
    /// |S_imp| before the window was applied.
    pub s_imp: Option<usize>,
    /// |S_imp| after ranking and the start share: the start set the first check showed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s_imp_kept: Option<usize>,
    /// Every answerability check, in order.
    pub checks: Vec<CheckRecord>,
    /// Expansion steps taken (KN's trials, GES's iterations, TE's entity updates).
    pub expansions: usize,
    /// Of those, the ones after which the next prompt showed another set of segments.
    pub expansions_changed: usize,
    /// Neighbours taken that changed nothing shown, so no trial was spent on them (KN).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_picks: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Trace {
    /// The navigation diagnostics of this trace: |E_s|, |S_imp|, the segments shown at each
    /// check and its verdict, and how many expansions changed what the next prompt showed.
    pub fn diagnostics(&self) -> NavDiagnostics {
        let mut checks = Vec::new();
        let mut expansions = 0;
        let mut changed = 0;
        let mut idle = 0;
        let mut shown: Option<&Vec<usize>> = None;
        let mut pending = false;
        for st in &self.steps {
            match st.kind {
                StepKind::Answerability | StepKind::Answer => {
                    if pending && shown != Some(&st.segments) {
                        changed += 1;
                    }
                    pending = false;
                    shown = Some(&st.segments);
                    if st.kind == StepKind::Answerability {
                        checks.push(CheckRecord {
                            segments: st.segments.clone(),
                            action: st.action,
                            failed: st.failed,
                            p_answerable: st.p_answerable,
                        });
                    }
                }
                StepKind::Expand | StepKind::GesExpand | StepKind::TeUpdate if !st.ended => {
                    // An expansion whose set no check showed (KN skips the check of an
                    // unchanged S_mix) changed nothing.
                    expansions += 1;
                    pending = true;
                }
                StepKind::ExpandIdle => idle += 1,
                _ => {}
            }
        }
        NavDiagnostics {
            start_entities: self.start_entities.len(),
            s_imp: self.s_imp,
            s_imp_kept: self.s_imp_kept,
            checks,
            expansions,
            expansions_changed: changed,
            idle_picks: idle,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::Step;

    fn step(kind: StepKind, segments: &[usize], action: Option<i32>, note: &str) -> Step {
        Step {
            kind,
            segments: segments.to_vec(),
            action,
            note: note.into(),
            ..Step::default()
        }
    }

    #[test]
    fn diagnostics_count_checks_and_the_expansions_that_changed_the_shown_set() {
        // KN: a check, an expansion that changed nothing (KN skipped the check of the same
        // S_mix), one that added segment 7, a failed check, an expansion with nothing left to
        // expand, then the answer from a set different from the last check's.
        let steps = vec![
            step(StepKind::Start, &[], None, ""),
            step(StepKind::Answerability, &[0, 1], Some(-1), ""),
            step(StepKind::Expand, &[], None, "trial 1"),
            step(StepKind::Expand, &[], None, "trial 2"),
            Step {
                failed: true,
                ..step(StepKind::Answerability, &[0, 1, 7], Some(-1), "")
            },
            step(StepKind::Expand, &[], None, "trial 3"),
            Step {
                ended: true,
                ..step(StepKind::Expand, &[], None, "")
            },
            step(StepKind::Answer, &[0, 1, 9], None, ""),
        ];
        let trace = Trace {
            method: "kn".into(),
            question: "q".into(),
            answer: "a".into(),
            answered: false,
            reasoning: String::new(),
            start_entities: vec!["A".into(), "B".into()],
            steps,
            segments_used: vec![0, 1, 7, 9],
            final_segments: vec![0, 1, 9],
            requests: 0,
            cache_hits: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            failures: vec![],
            answer_spans: vec![],
            read_spans: vec![],
            s_imp: Some(12),
            s_imp_kept: None,
        };
        let d = trace.diagnostics();
        assert_eq!((d.start_entities, d.s_imp), (2, Some(12)));
        assert_eq!(
            d.checks,
            vec![
                CheckRecord {
                    segments: vec![0, 1],
                    action: Some(-1),
                    failed: false,
                    p_answerable: None,
                },
                CheckRecord {
                    segments: vec![0, 1, 7],
                    action: Some(-1),
                    failed: true,
                    p_answerable: None,
                },
            ]
        );
        // Trials 1-3 (not the "no adjacent" step); trial 2 changed the next check's set and
        // trial 3 the answer's; trial 1 changed nothing.
        assert_eq!((d.expansions, d.expansions_changed), (3, 2));
        // Spans from the units: segments 0 and 1 touch, 9 stands alone.
        let mut t = trace;
        t.set_spans(&[
            (0, 10),
            (10, 20),
            (20, 30),
            (30, 40),
            (40, 50),
            (50, 60),
            (60, 70),
            (70, 80),
            (80, 90),
            (90, 95),
        ]);
        assert_eq!(t.answer_spans, vec![(0, 20), (90, 95)]);
        assert_eq!(t.read_spans, vec![(0, 20), (70, 80), (90, 95)]);
    }
}
