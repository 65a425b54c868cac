//! Progress bars for long runs whose steps finish in bursts (`qrmem eval`, `qrmem batch`).
//!
//! Boundary: formatting only; no I/O of its own. Invariant: the ETA shown is elapsed x steps left
//! / steps done since the bar started ("?" before the first step), never indicatif's own
//! estimate, which follows the last few steps. Questions and (item, method) pairs finish in
//! bursts after each wave of memory builds, and that estimate swung from 2 hours to 27 hours
//! between two consecutive lines of the same eval run; the mean rate counts the builds' time in
//! every step.

use std::time::Duration;

/// Time left at the mean rate since the start: elapsed x left / done; `None` before the first
/// step.
pub(crate) fn mean_rate_eta(done: u64, total: u64, elapsed: Duration) -> Option<Duration> {
    if done == 0 {
        return None;
    }
    let left = total.saturating_sub(done);
    let per_step = elapsed.as_secs_f64() / done as f64;
    Some(Duration::from_secs_f64(per_step * left as f64))
}

/// [`mean_rate_eta`] for a person: "?" until the first step finishes.
pub fn eta_text(done: u64, total: u64, elapsed: Duration) -> String {
    match mean_rate_eta(done, total, elapsed) {
        Some(d) => indicatif::HumanDuration(d).to_string(),
        None => "?".to_string(),
    }
}

/// UTC wall-clock time of day, `hh:mm:ss`, for the plain progress lines printed where stderr is
/// not a terminal (a bar is not drawn there).
pub fn clock() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

/// A bar style from `template`, in which the key `{mean_eta}` is [`eta_text`] of the bar. A
/// template indicatif rejects falls back to its default bar rather than failing the run.
pub(crate) fn style(template: &str) -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template(template)
        .map(|s| {
            s.with_key(
                "mean_eta",
                |st: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(
                        w,
                        "{}",
                        eta_text(st.pos(), st.len().unwrap_or(0), st.elapsed())
                    );
                },
            )
        })
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
}

/// The bar of `qrmem build` and `qrmem ask --doc`: steps of one build (a phase of one segment,
/// a few LLM calls of like cost), so indicatif's recent-rate `{eta}` is a fair guide here.
pub fn step_bar() -> indicatif::ProgressBar {
    indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} steps, ETA {eta}  {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    )
}

/// A bar over `len` like steps (documents added, questions ranked), with the mean-rate ETA and
/// a message.
pub fn count_bar(len: u64, message: &str) -> indicatif::ProgressBar {
    indicatif::ProgressBar::new(len)
        .with_style(style(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len}, ETA {mean_eta}  {msg}",
        ))
        .with_message(message.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_is_the_mean_rate_since_the_start_over_the_steps_left() {
        // 2 of 26 pairs after 72 minutes: 36 minutes a pair, 24 left.
        assert_eq!(
            mean_rate_eta(2, 26, Duration::from_secs(72 * 60)),
            Some(Duration::from_secs(24 * 36 * 60))
        );
        assert_eq!(mean_rate_eta(0, 26, Duration::from_secs(600)), None);
        assert_eq!(eta_text(0, 26, Duration::from_secs(600)), "?");
        assert_eq!(
            mean_rate_eta(26, 26, Duration::from_secs(600)),
            Some(Duration::ZERO)
        );
        // More finished than planned (a bar never overshoots, but the ETA must not underflow).
        assert_eq!(
            mean_rate_eta(27, 26, Duration::from_secs(600)),
            Some(Duration::ZERO)
        );
        assert_eq!(eta_text(1, 3, Duration::from_secs(3600)), "2 hours");
    }

    /// A terminal that keeps what is drawn on it.
    #[derive(Debug, Default, Clone)]
    struct Capture(std::sync::Arc<std::sync::Mutex<String>>);

    impl indicatif::TermLike for Capture {
        fn width(&self) -> u16 {
            100
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(&format!("{s}\n"))
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_style_key_draws_the_mean_rate_eta_of_the_bar() {
        let term = Capture::default();
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(4),
            indicatif::ProgressDrawTarget::term_like(Box::new(term.clone())),
        )
        .with_style(style("{pos}/{len} ETA {mean_eta}|"));
        bar.tick();
        assert!(term.0.lock().unwrap().contains("0/4 ETA ?|"), "{term:?}");
        term.0.lock().unwrap().clear();
        bar.inc(1);
        bar.tick();
        let drawn = term.0.lock().unwrap().clone();
        assert!(drawn.contains("1/4 ETA "), "{drawn}");
        assert!(
            !drawn.contains("ETA ?") && !drawn.contains("ETA |"),
            "{drawn}"
        );
    }
}
