//! The ledger: requests, tokens, cache hits, retries, failures and wall time per pipeline stage.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Usage;

/// Counters of one stage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageStats {
    /// Calls answered by the server (cache hits not included).
    pub requests: u64,
    /// Calls answered by the reply cache: no network traffic.
    pub cache_hits: u64,
    /// HTTP attempts beyond the first, over all requests.
    pub retries: u64,
    /// Calls that ended in a transport error after the retry budget.
    pub errors: u64,
    /// Structured replies that did not parse (each one is retried by the policy).
    pub unparsable: u64,
    /// Structured steps that never parsed: recorded as failures of that step.
    pub failed_steps: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Of `prompt_tokens`, those the server reused from its prompt cache.
    #[serde(default)]
    pub cached_prompt_tokens: u64,
    /// Prompt tokens of the replies served by the reply cache, as the server counted them when
    /// they were first sent: with `prompt_tokens`, what the calls cost whatever was cached.
    #[serde(default)]
    pub replayed_prompt_tokens: u64,
    /// Completion tokens of the replies served by the reply cache.
    #[serde(default)]
    pub replayed_completion_tokens: u64,
    /// Summed wall time of the calls, seconds (calls in parallel each count in full).
    pub wall_secs: f64,
}

impl StageStats {
    fn add(&mut self, other: &StageStats) {
        self.requests += other.requests;
        self.cache_hits += other.cache_hits;
        self.retries += other.retries;
        self.errors += other.errors;
        self.unparsable += other.unparsable;
        self.failed_steps += other.failed_steps;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_prompt_tokens += other.cached_prompt_tokens;
        self.replayed_prompt_tokens += other.replayed_prompt_tokens;
        self.replayed_completion_tokens += other.replayed_completion_tokens;
        self.wall_secs += other.wall_secs;
    }
}

/// A point-in-time copy of the ledger; what is printed and saved with results.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerSnapshot {
    pub model: String,
    pub stages: BTreeMap<String, StageStats>,
    /// Requests at the server over time: each HTTP attempt while it holds one of the client's
    /// concurrency permits (not cache hits, not requests queued for a permit).
    #[serde(default)]
    pub in_flight: InFlight,
}

/// Requests in flight: the integral over time and the span it was measured over, so
/// `mean = busy_request_secs / span_secs` is the achieved concurrency.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InFlight {
    /// Sum over requests of their time in flight (the integral of in-flight count over time).
    pub busy_request_secs: f64,
    /// From the first request's start to the last one's end.
    pub span_secs: f64,
    pub max: u64,
}

impl InFlight {
    /// Mean requests in flight over the span (0 before any request).
    pub fn mean(&self) -> f64 {
        if self.span_secs > 0.0 {
            self.busy_request_secs / self.span_secs
        } else {
            0.0
        }
    }
}

impl LedgerSnapshot {
    /// Adds `other`'s counts, stage by stage.
    pub fn add(&mut self, other: &LedgerSnapshot) {
        if self.model.is_empty() {
            self.model = other.model.clone();
        }
        for (name, s) in &other.stages {
            self.stages.entry(name.clone()).or_default().add(s);
        }
    }

    pub fn total(&self) -> StageStats {
        let mut total = StageStats::default();
        for s in self.stages.values() {
            total.add(s);
        }
        total
    }
}

impl fmt::Display for LedgerSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "LLM ledger (model {})", self.model)?;
        writeln!(
            f,
            "{:<16} {:>8} {:>10} {:>8} {:>7} {:>8} {:>13} {:>13} {:>9}",
            "stage",
            "requests",
            "cache hits",
            "retries",
            "errors",
            "failed",
            "prompt tok",
            "completion tok",
            "wall s"
        )?;
        let mut row = |name: &str, s: &StageStats| {
            writeln!(
                f,
                "{:<16} {:>8} {:>10} {:>8} {:>7} {:>8} {:>13} {:>13} {:>9.2}",
                name,
                s.requests,
                s.cache_hits,
                s.retries,
                s.errors,
                s.failed_steps,
                s.prompt_tokens,
                s.completion_tokens,
                s.wall_secs
            )
        };
        for (name, s) in &self.stages {
            row(name, s)?;
        }
        if self.stages.len() != 1 {
            row("total", &self.total())?;
        }
        let t = self.total();
        if t.cached_prompt_tokens > 0 {
            writeln!(
                f,
                "prompt tokens from the server's prompt cache: {} of {} ({:.0}%)",
                t.cached_prompt_tokens,
                t.prompt_tokens,
                100.0 * t.cached_prompt_tokens as f64 / t.prompt_tokens.max(1) as f64
            )?;
        }
        if self.in_flight.span_secs > 0.0 {
            writeln!(
                f,
                "requests at the server: mean {:.2}, max {} in flight (over {:.1} s of requests)",
                self.in_flight.mean(),
                self.in_flight.max,
                self.in_flight.span_secs
            )?;
        }
        Ok(())
    }
}

/// Thread-safe ledger shared by every caller of one [`super::Service`]. A scoped ledger
/// ([`Ledger::child`]) also records everything into its parent, so one question's cost is exact
/// while the run's total stays complete.
#[derive(Debug, Default)]
pub struct Ledger {
    model: String,
    stages: Mutex<BTreeMap<String, StageStats>>,
    parent: Option<std::sync::Arc<Ledger>>,
    gauge: Mutex<Gauge>,
}

/// In-flight bookkeeping: current count, first start, last end, running integral.
#[derive(Debug, Default)]
struct Gauge {
    current: u64,
    max: u64,
    first: Option<std::time::Instant>,
    last_end: Option<std::time::Instant>,
    busy: f64,
}

impl Ledger {
    pub fn new(model: impl Into<String>) -> Self {
        Ledger {
            model: model.into(),
            stages: Mutex::new(BTreeMap::new()),
            parent: None,
            gauge: Mutex::new(Gauge::default()),
        }
    }

    /// An empty ledger whose records also go to `parent`.
    pub fn child(parent: std::sync::Arc<Ledger>) -> Self {
        Ledger {
            model: parent.model.clone(),
            stages: Mutex::new(BTreeMap::new()),
            parent: Some(parent),
            gauge: Mutex::new(Gauge::default()),
        }
    }

    fn update(&self, stage: &str, f: impl Fn(&mut StageStats)) {
        {
            // A poisoned lock only means another thread panicked mid-update of plain counters.
            let mut stages = self.stages.lock().unwrap_or_else(|p| p.into_inner());
            f(stages.entry(stage.to_string()).or_default());
        }
        if let Some(parent) = &self.parent {
            parent.update(stage, f);
        }
    }

    /// A request to the server starts (pair with [`Ledger::request_ended`]).
    pub fn request_started(&self) -> std::time::Instant {
        let now = std::time::Instant::now();
        {
            let mut g = self.gauge.lock().unwrap_or_else(|p| p.into_inner());
            g.current += 1;
            g.max = g.max.max(g.current);
            g.first.get_or_insert(now);
        }
        if let Some(p) = &self.parent {
            p.request_started();
        }
        now
    }

    /// The request begun at `started` has ended.
    pub fn request_ended(&self, started: std::time::Instant) {
        let now = std::time::Instant::now();
        {
            let mut g = self.gauge.lock().unwrap_or_else(|p| p.into_inner());
            g.current = g.current.saturating_sub(1);
            g.busy += now.duration_since(started).as_secs_f64();
            g.last_end = Some(g.last_end.map_or(now, |l| l.max(now)));
        }
        if let Some(p) = &self.parent {
            p.request_ended(started);
        }
    }

    pub fn record_request(&self, stage: &str, usage: Usage, attempts: u32, wall: Duration) {
        self.update(stage, |s| {
            s.requests += 1;
            s.retries += u64::from(attempts.saturating_sub(1));
            s.prompt_tokens += usage.prompt_tokens;
            s.completion_tokens += usage.completion_tokens;
            s.cached_prompt_tokens += usage.cached_prompt_tokens;
            s.wall_secs += wall.as_secs_f64();
        });
    }

    /// A reply served by the cache; `usage` is what it cost when it was first sent.
    pub fn record_cache_hit(&self, stage: &str, usage: &Usage, wall: Duration) {
        self.update(stage, |s| {
            s.cache_hits += 1;
            s.replayed_prompt_tokens += usage.prompt_tokens;
            s.replayed_completion_tokens += usage.completion_tokens;
            s.wall_secs += wall.as_secs_f64();
        });
    }

    pub fn record_error(&self, stage: &str, attempts: u32, wall: Duration) {
        self.update(stage, |s| {
            s.errors += 1;
            s.retries += u64::from(attempts.saturating_sub(1));
            s.wall_secs += wall.as_secs_f64();
        });
    }

    pub fn record_unparsable(&self, stage: &str) {
        self.update(stage, |s| s.unparsable += 1);
    }

    pub fn record_failed_step(&self, stage: &str) {
        self.update(stage, |s| s.failed_steps += 1);
    }

    pub fn snapshot(&self) -> LedgerSnapshot {
        let stages = self.stages.lock().unwrap_or_else(|p| p.into_inner());
        let g = self.gauge.lock().unwrap_or_else(|p| p.into_inner());
        let span = match (g.first, g.last_end) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        LedgerSnapshot {
            model: self.model.clone(),
            stages: stages.clone(),
            in_flight: InFlight {
                busy_request_secs: g.busy,
                span_secs: span,
                max: g.max,
            },
        }
    }
}

impl super::SlotGauge for Ledger {
    fn started(&self) -> std::time::Instant {
        self.request_started()
    }
    fn ended(&self, started: std::time::Instant) {
        self.request_ended(started)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_stage_and_total() {
        let l = Ledger::new("m");
        let u = Usage {
            prompt_tokens: 10,
            completion_tokens: 3,
            ..Usage::default()
        };
        l.record_request("entities", u, 3, Duration::from_millis(500));
        l.record_request("entities", u, 1, Duration::from_millis(500));
        l.record_cache_hit(
            "summary",
            &Usage {
                prompt_tokens: 7,
                completion_tokens: 2,
                ..Usage::default()
            },
            Duration::from_millis(1),
        );
        l.record_unparsable("entities");
        l.record_failed_step("entities");
        let s = l.snapshot();
        let e = &s.stages["entities"];
        assert_eq!(
            (e.requests, e.retries, e.prompt_tokens, e.completion_tokens),
            (2, 2, 20, 6)
        );
        assert_eq!((e.unparsable, e.failed_steps), (1, 1));
        assert_eq!(s.stages["summary"].cache_hits, 1);
        let t = s.total();
        assert_eq!((t.requests, t.cache_hits), (2, 1));
        // A cache hit sends nothing but keeps what the reply cost when it was sent.
        assert_eq!((t.prompt_tokens, t.replayed_prompt_tokens), (20, 7));
        assert_eq!(t.replayed_completion_tokens, 2);
        // Two overlapping requests: max 2 in flight, mean between 1 and 2.
        let a = l.request_started();
        let b = l.request_started();
        std::thread::sleep(Duration::from_millis(20));
        l.request_ended(a);
        std::thread::sleep(Duration::from_millis(10));
        l.request_ended(b);
        let f = l.snapshot().in_flight;
        assert_eq!(f.max, 2);
        assert!(f.mean() > 1.0 && f.mean() <= 2.0, "{f:?}");
        let child = Ledger::child(std::sync::Arc::new(Ledger::new("m")));
        child.record_request("answer", u, 1, Duration::from_millis(5));
        assert_eq!(child.snapshot().total().requests, 1);
        assert_eq!(
            child.parent.as_ref().map(|p| p.snapshot().total().requests),
            Some(1)
        );
        let text = s.to_string();
        assert!(
            text.contains("entities") && text.contains("total"),
            "{text}"
        );
    }
}
