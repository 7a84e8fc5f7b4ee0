//! The offload decision: whether a coprocessor request runs on a worker, and why.
//!
//! Reasons, checked in this order (the first that holds wins):
//! * `num_ranges`: the request has at least `remote-coprocessor-num-ranges` ranges (the block
//!   estimate is skipped: with that many ranges it costs more than it tells);
//! * `blocks_size`: `range_blocks_size(ranges)` reaches `remote-coprocessor-min-blocks-size`;
//! * `long_query_blocks_size`: the query is old (now minus the physical time of its start_ts)
//!   and the estimate reaches the threshold lowered for its age: halved once it is older than
//!   the first of `remote-coprocessor-long-query-after` ("15s"), quartered after the second
//!   ("30s"), an eighth after the third ("60s"). A query that has run long already (paging
//!   through a big table) is worth moving off the storage server sooner;
//! * otherwise local, `below_min_blocks_size`.
//!
//! The function is pure: the clock and the estimate are inputs, so tests set them exactly.

use std::time::Duration;

/// Decision reasons (metric label values and exec-details reasons).
pub mod reason {
    pub const NUM_RANGES: &str = "num_ranges";
    pub const BLOCKS_SIZE: &str = "blocks_size";
    pub const LONG_QUERY_BLOCKS_SIZE: &str = "long_query_blocks_size";
    pub const BELOW_MIN_BLOCKS_SIZE: &str = "below_min_blocks_size";
    pub const NO_REMOTE_ADDR: &str = "no_remote_addr";
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffloadPolicy {
    pub min_blocks_size: u64,
    /// 0 disables the range-count reason.
    pub num_ranges: usize,
    /// Ascending ages; past the i-th, the blocks-size threshold is divided by 2^(i+1).
    pub long_query_after: Vec<Duration>,
}

/// What the policy decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub remote: bool,
    pub reason: &'static str,
}

impl OffloadPolicy {
    /// Decides for a request with `num_ranges` ranges, `age` old, whose blocks-size estimate
    /// `estimate` computes (called at most once, and not at all for a `num_ranges` decision).
    pub fn decide(
        &self,
        num_ranges: usize,
        age: Duration,
        estimate: impl FnOnce() -> u64,
    ) -> Decision {
        if self.num_ranges > 0 && num_ranges >= self.num_ranges {
            return Decision {
                remote: true,
                reason: reason::NUM_RANGES,
            };
        }
        let blocks = estimate();
        if blocks >= self.min_blocks_size {
            return Decision {
                remote: true,
                reason: reason::BLOCKS_SIZE,
            };
        }
        if blocks >= self.long_query_threshold(age) {
            return Decision {
                remote: true,
                reason: reason::LONG_QUERY_BLOCKS_SIZE,
            };
        }
        Decision {
            remote: false,
            reason: reason::BELOW_MIN_BLOCKS_SIZE,
        }
    }

    /// The blocks-size threshold for a query `age` old.
    pub fn long_query_threshold(&self, age: Duration) -> u64 {
        let steps = self.long_query_after.iter().filter(|&&a| age > a).count() as u32;
        self.min_blocks_size >> steps.min(63)
    }
}

/// How old a query with `start_ts` is at `now_ms` (Unix milliseconds): zero for a start_ts from
/// the future or one that carries no physical time.
pub fn query_age(start_ts: u64, now_ms: u64) -> Duration {
    Duration::from_millis(now_ms.saturating_sub(crate::tso::physical_ms(start_ts)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn policy() -> OffloadPolicy {
        OffloadPolicy {
            min_blocks_size: 32 << 20,
            num_ranges: 2048,
            long_query_after: vec![
                Duration::from_secs(15),
                Duration::from_secs(30),
                Duration::from_secs(60),
            ],
        }
    }

    #[test]
    fn each_reason_holds_exactly_under_its_condition() {
        let p = policy();
        let young = Duration::ZERO;
        let d = p.decide(2048, young, || {
            panic!("the estimate is skipped for many ranges")
        });
        assert_eq!(
            d,
            Decision {
                remote: true,
                reason: reason::NUM_RANGES
            }
        );
        assert_eq!(p.decide(1, young, || 32 << 20).reason, reason::BLOCKS_SIZE);
        assert_eq!(
            p.decide(1, young, || (32 << 20) - 1).reason,
            reason::BELOW_MIN_BLOCKS_SIZE
        );
        let d = p.decide(1, Duration::from_secs(16), || 16 << 20);
        assert_eq!(
            d,
            Decision {
                remote: true,
                reason: reason::LONG_QUERY_BLOCKS_SIZE
            }
        );
        assert!(
            !p.decide(1, Duration::from_secs(16), || (16 << 20) - 1)
                .remote
        );
        assert!(p.decide(1, Duration::from_secs(31), || 8 << 20).remote);
        assert!(p.decide(1, Duration::from_secs(61), || 4 << 20).remote);
        assert!(
            !p.decide(1, Duration::from_secs(61), || (4 << 20) - 1)
                .remote
        );
        let off = OffloadPolicy {
            num_ranges: 0,
            ..policy()
        };
        assert_eq!(
            off.decide(1 << 20, young, || 0).reason,
            reason::BELOW_MIN_BLOCKS_SIZE
        );
    }

    #[test]
    fn ages_come_from_the_physical_part_of_start_ts() {
        let ts = crate::tso::compose_ts(1_000_000, 7);
        assert_eq!(query_age(ts, 1_020_000), Duration::from_secs(20));
        assert_eq!(query_age(ts, 999_000), Duration::ZERO);
    }

    proptest! {
        /// An older query never needs more blocks to go remote, and a bigger estimate never
        /// turns a remote decision local.
        #[test]
        fn decisions_are_monotone_in_age_and_size(
            a in 0u64..200_000, b in 0u64..200_000, x in 0u64..(64 << 20), y in 0u64..(64 << 20),
        ) {
            let p = policy();
            let (young, old) = (Duration::from_millis(a.min(b)), Duration::from_millis(a.max(b)));
            let (small, big) = (x.min(y), x.max(y));
            prop_assert!(p.long_query_threshold(old) <= p.long_query_threshold(young));
            if p.decide(1, young, || small).remote {
                prop_assert!(p.decide(1, old, || small).remote);
                prop_assert!(p.decide(1, young, || big).remote);
            }
        }
    }
}
