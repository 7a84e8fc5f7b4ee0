//! The one retry policy of the client: every call site that sends a request again after a
//! region error or a refused connection (paging, the txn commands, the TSO) waits through a
//! [`Backoff`], so a logical request has one deadline however many times it is re-sent.
//!
//! * Sleeps start at 10 ms and double up to 500 ms, with "equal jitter" (half the step fixed,
//!   half random): clients that failed together do not come back together.
//! * A fresh hint (a `NotLeader` naming the leader) is worth an immediate retry, but at most
//!   [`MAX_IMMEDIATE`] in a row: hints that keep pointing around (an election, a stale
//!   follower) then cost sleeps like any other retry.
//! * No sleep goes past the deadline (`request-timeout` from the start of the logical
//!   request). Once it passed, [`Backoff::wait`] fails with [`Error::RetryDeadline`] naming
//!   why the last attempt failed.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;
use wire::coprocessor::{RegionError, RegionErrorKind};

use crate::error::{Error, Result};

/// The first sleep.
const FIRST_SLEEP: Duration = Duration::from_millis(10);
/// The longest sleep.
const MAX_SLEEP: Duration = Duration::from_millis(500);
/// The shortest timeout of one attempt.
pub const MIN_ATTEMPT: Duration = Duration::from_millis(200);
/// Immediate retries allowed in a row (each on a fresh hint).
pub const MAX_IMMEDIATE: u32 = 3;

/// Why a request is sent again (a metric label: `stratus_client_retries_total{reason}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryReason {
    NotLeader,
    EpochNotMatch,
    StaleCommand,
    ServerBusy,
    RegionNotFound,
    /// The server could not be reached (refused, reset, timed out).
    Connection,
}

impl RetryReason {
    pub const ALL: [RetryReason; 6] = [
        RetryReason::NotLeader,
        RetryReason::EpochNotMatch,
        RetryReason::StaleCommand,
        RetryReason::ServerBusy,
        RetryReason::RegionNotFound,
        RetryReason::Connection,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RetryReason::NotLeader => "not_leader",
            RetryReason::EpochNotMatch => "epoch_not_match",
            RetryReason::StaleCommand => "stale_command",
            RetryReason::ServerBusy => "server_busy",
            RetryReason::RegionNotFound => "region_not_found",
            RetryReason::Connection => "connection",
        }
    }

    /// The reason a region error gives. `KeyNotInRegion` is an epoch change seen by key; a kind
    /// this build does not know (a newer server's) is retried as a busy server.
    pub fn from_region_error(e: &RegionError) -> RetryReason {
        match e.kind() {
            Some(RegionErrorKind::NotLeader) => RetryReason::NotLeader,
            Some(RegionErrorKind::EpochNotMatch | RegionErrorKind::KeyNotInRegion) => {
                RetryReason::EpochNotMatch
            }
            Some(RegionErrorKind::StaleCommand) => RetryReason::StaleCommand,
            Some(RegionErrorKind::RegionNotFound) => RetryReason::RegionNotFound,
            Some(RegionErrorKind::ServerBusy) | None => RetryReason::ServerBusy,
        }
    }
}

impl std::fmt::Display for RetryReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The retry state of one logical request (see the module docs).
#[derive(Debug)]
pub struct Backoff {
    started: Instant,
    deadline: Instant,
    /// The next sleep before jitter.
    next: Duration,
    /// Retries so far (immediate ones included).
    attempts: u32,
    /// Immediate retries since the last sleep.
    immediate: u32,
    /// Per-`Backoff` jitter source (no `rand` dependency in the client).
    jitter: RandomState,
}

impl Backoff {
    /// A backoff whose deadline is `budget` from now.
    pub fn new(budget: Duration) -> Backoff {
        Backoff::until(Instant::now() + budget)
    }

    /// A backoff ending at `deadline` (the deadline of the request it is part of).
    pub fn until(deadline: Instant) -> Backoff {
        Backoff {
            started: Instant::now(),
            deadline,
            next: FIRST_SLEEP,
            attempts: 0,
            immediate: 0,
            jitter: RandomState::new(),
        }
    }

    /// Retries so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Time since the backoff started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Time left before the deadline (zero once it passed).
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// The timeout of one attempt: what is left of the deadline, but at least
    /// [`MIN_ATTEMPT`] (the attempt after a sleep that ended at the deadline still gets a
    /// chance to answer).
    pub fn attempt_timeout(&self) -> Duration {
        self.remaining().max(MIN_ATTEMPT)
    }

    /// Runs one attempt, `call` to `server`, for at most [`Backoff::attempt_timeout`]: a
    /// server that accepted the connection but does not answer (stopped, overloaded) costs
    /// the request's deadline, not a transport timeout on top of it. Running out is a
    /// connection error (`Error::is_connection`), as a transport timeout is.
    pub async fn attempt<T>(
        &self,
        server: &str,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let limit = self.attempt_timeout();
        match tokio::time::timeout(limit, call).await {
            Ok(r) => r,
            Err(_) => Err(Error::Transport {
                url: server.to_string(),
                source: node::ClientError::Timeout {
                    url: server.to_string(),
                    after: limit,
                },
            }),
        }
    }

    /// The deadline as Unix milliseconds (`Context.deadline_ms`: a server stops waiting for a
    /// client that gave up).
    pub fn deadline_unix_ms(&self) -> u64 {
        let at = SystemTime::now() + self.remaining();
        at.duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    /// Whether a retry may go out at once (a fresh hint): true at most [`MAX_IMMEDIATE`]
    /// times in a row, and never once the deadline passed. A true counts as a retry.
    pub fn now_ok(&mut self, reason: RetryReason) -> bool {
        if self.immediate >= MAX_IMMEDIATE || self.remaining().is_zero() {
            return false;
        }
        self.immediate += 1;
        self.attempts += 1;
        crate::metrics::RETRIES
            .with_label_values(&[reason.as_str()])
            .inc();
        true
    }

    /// Sleeps before the next retry, which failed for `reason` (`last`: its error text). Fails
    /// with [`Error::RetryDeadline`] once the deadline passed; a sleep ends at the deadline at
    /// the latest, so the attempt after it is the last.
    pub async fn wait(&mut self, reason: RetryReason, last: impl Into<String>) -> Result<()> {
        let remaining = self.remaining();
        if remaining.is_zero() {
            return Err(Error::RetryDeadline {
                reason,
                attempts: self.attempts,
                waited_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                last: last.into(),
            });
        }
        let sleep = self.jittered().min(remaining);
        self.next = (self.next * 2).min(MAX_SLEEP);
        self.immediate = 0;
        self.attempts += 1;
        crate::metrics::RETRIES
            .with_label_values(&[reason.as_str()])
            .inc();
        tokio::time::sleep(sleep).await;
        Ok(())
    }

    /// Sleeps like [`Backoff::wait`] without counting a retry (waiting for something else to
    /// finish, such as a lock's transaction): false, without sleeping, once the deadline
    /// passed.
    pub async fn pause(&mut self) -> bool {
        let remaining = self.remaining();
        if remaining.is_zero() {
            return false;
        }
        let sleep = self.jittered().min(remaining);
        self.next = (self.next * 2).min(MAX_SLEEP);
        self.immediate = 0;
        tokio::time::sleep(sleep).await;
        true
    }

    /// `next / 2` plus a random part in `[0, next / 2]`.
    fn jittered(&self) -> Duration {
        let half = self.next / 2;
        let span = u64::try_from(half.as_micros()).unwrap_or(u64::MAX);
        let r = self.jitter.hash_one((self.attempts, self.next));
        half + Duration::from_micros(r % (span + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn sleeps_double_with_jitter_up_to_the_cap() {
        let mut b = Backoff::new(Duration::from_secs(60));
        let mut steps = Vec::new();
        for _ in 0..10 {
            let t0 = Instant::now();
            b.wait(RetryReason::ServerBusy, "busy").await.unwrap();
            steps.push(t0.elapsed());
        }
        let mut step = FIRST_SLEEP;
        for (i, slept) in steps.iter().enumerate() {
            assert!(
                *slept >= step / 2 && *slept <= step,
                "sleep {i} = {slept:?} outside [{:?}, {step:?}]",
                step / 2
            );
            step = (step * 2).min(MAX_SLEEP);
        }
        assert!(steps[9] >= MAX_SLEEP / 2, "{steps:?}");
        assert_eq!(b.attempts(), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn no_sleep_passes_the_deadline_then_it_fails_naming_the_last_error() {
        let budget = Duration::from_millis(700);
        let t0 = Instant::now();
        let mut b = Backoff::new(budget);
        let mut waits = 0;
        let err = loop {
            match b.wait(RetryReason::Connection, "refused: url=x").await {
                Ok(()) => {
                    waits += 1;
                    assert!(t0.elapsed() <= budget, "slept past the deadline");
                }
                Err(e) => break e,
            }
        };
        assert_eq!(t0.elapsed(), budget, "the last sleep ends at the deadline");
        assert!(waits >= 3, "{waits}");
        assert_eq!(err.kind(), crate::ErrorKind::Transport);
        match err {
            Error::RetryDeadline {
                reason,
                attempts,
                waited_ms,
                last,
            } => {
                assert_eq!(reason, RetryReason::Connection);
                assert_eq!(attempts, waits);
                assert_eq!(waited_ms, 700);
                assert_eq!(last, "refused: url=x");
            }
            e => panic!("unexpected error {e}"),
        }
        assert_eq!(
            b.attempt_timeout(),
            MIN_ATTEMPT,
            "the last attempt still gets a chance"
        );
        let mut region = Backoff::new(Duration::ZERO);
        let e = region.wait(RetryReason::NotLeader, "x").await.unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Region);
    }

    #[tokio::test(start_paused = true)]
    async fn three_fresh_hints_then_a_sleep() {
        let mut b = Backoff::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert!(b.now_ok(RetryReason::NotLeader));
        assert!(b.now_ok(RetryReason::NotLeader));
        assert!(b.now_ok(RetryReason::NotLeader));
        assert!(!b.now_ok(RetryReason::NotLeader));
        assert_eq!(t0.elapsed(), Duration::ZERO);
        b.wait(RetryReason::NotLeader, "x").await.unwrap();
        assert!(t0.elapsed() >= FIRST_SLEEP / 2);
        assert!(b.now_ok(RetryReason::NotLeader), "a sleep resets the count");
        assert_eq!(b.attempts(), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_outlives_the_deadline_is_a_connection_error() {
        let b = Backoff::new(Duration::from_secs(2));
        let hung = b
            .attempt("http://s1", async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(())
            })
            .await
            .unwrap_err();
        assert!(hung.is_connection(), "{hung}");
        assert_eq!(b.remaining(), Duration::ZERO, "it ran until the deadline");
        let answered = b.attempt("http://s1", async { Ok(7) }).await.unwrap();
        assert_eq!(answered, 7);
    }

    #[test]
    fn region_errors_map_to_reasons() {
        let e = |kind: RegionErrorKind| RegionError {
            kind: kind as i32,
            ..RegionError::default()
        };
        assert_eq!(
            RetryReason::from_region_error(&e(RegionErrorKind::KeyNotInRegion)),
            RetryReason::EpochNotMatch
        );
        assert_eq!(
            RetryReason::from_region_error(&e(RegionErrorKind::StaleCommand)),
            RetryReason::StaleCommand
        );
        let unknown = RegionError {
            kind: 99,
            ..RegionError::default()
        };
        assert_eq!(
            RetryReason::from_region_error(&unknown),
            RetryReason::ServerBusy
        );
    }
}
