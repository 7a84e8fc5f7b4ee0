//! When to restart a node that died: a pure function of when it was restarted before.
//!
//! A node that died once (a SIGKILL, an OOM kill) should be back quickly; a node that dies at
//! every start (a corrupt data dir, a port someone else holds) must not be restarted forever,
//! hiding the failure behind an endless loop and a growing log. So each restart within the
//! window waits twice as long as the one before (500 ms, 1 s, 2 s, 4 s, 8 s), and after five
//! restarts within a minute the supervisor gives up and says so. A node that stayed up for a
//! minute starts over at 500 ms: only restarts inside the window count.
//!
//! The history and the clock are inputs, so the policy is tested without waiting.

use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartPolicy {
    /// The wait before the first restart in a window.
    pub first_delay: Duration,
    /// The longest wait (the doubling stops there).
    pub max_delay: Duration,
    /// Restarts allowed within `window`; one more death is given up on.
    pub max_restarts: usize,
    pub window: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            first_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_restarts: 5,
            window: Duration::from_secs(60),
        }
    }
}

/// What to do about a node that died.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartDecision {
    /// Restart it once this long has passed since its death was seen.
    After(Duration),
    /// It was restarted `restarts` times within the window: stop trying.
    GiveUp { restarts: usize, window: Duration },
}

impl RestartPolicy {
    /// The decision for a node found dead at `now`, restarted before at `history` (any order;
    /// attempts that failed count too: a node that cannot start is dying at every start).
    pub fn next_delay(&self, history: &[Instant], now: Instant) -> RestartDecision {
        let recent = history
            .iter()
            .filter(|&&t| now.saturating_duration_since(t) < self.window)
            .count();
        if recent >= self.max_restarts {
            return RestartDecision::GiveUp {
                restarts: recent,
                window: self.window,
            };
        }
        let factor = 1u32.checked_shl(recent as u32).unwrap_or(u32::MAX);
        RestartDecision::After(self.first_delay.saturating_mul(factor).min(self.max_delay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn the_delay_doubles_from_half_a_second_up_to_eight_seconds() {
        let policy = RestartPolicy::default();
        let start = Instant::now();
        let mut history = Vec::new();
        let mut delays = Vec::new();
        let mut now = start;
        for _ in 0..5 {
            match policy.next_delay(&history, now) {
                RestartDecision::After(d) => delays.push(d),
                d => panic!("gave up early: {d:?} after {history:?}"),
            }
            history.push(now);
            now += secs(1.0);
        }
        assert_eq!(
            delays,
            [secs(0.5), secs(1.0), secs(2.0), secs(4.0), secs(8.0)]
        );
        let capped = RestartPolicy {
            max_restarts: 10,
            ..policy
        };
        assert_eq!(
            capped.next_delay(&history, now),
            RestartDecision::After(secs(8.0)),
            "the sixth restart waits no more than the cap"
        );
    }

    #[test]
    fn the_policy_gives_up_after_five_restarts_in_a_minute() {
        let policy = RestartPolicy::default();
        let start = Instant::now();
        let history: Vec<Instant> = (0..5).map(|i| start + secs(10.0 * i as f64)).collect();
        assert_eq!(
            policy.next_delay(&history, start + secs(45.0)),
            RestartDecision::GiveUp {
                restarts: 5,
                window: secs(60.0)
            }
        );
    }

    #[test]
    fn restarts_older_than_the_window_are_forgotten() {
        let policy = RestartPolicy::default();
        let start = Instant::now();
        let history: Vec<Instant> = (0..5).map(|i| start + secs(10.0 * i as f64)).collect();
        // At 61 s the first restart (at 0 s) is out of the window: four remain.
        assert_eq!(
            policy.next_delay(&history, start + secs(61.0)),
            RestartDecision::After(secs(8.0))
        );
        // Long after the last one, a death is a first death again.
        assert_eq!(
            policy.next_delay(&history, start + secs(200.0)),
            RestartDecision::After(secs(0.5))
        );
    }
}
