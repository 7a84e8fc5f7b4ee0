//! The offload decision: whether a coprocessor request runs on a worker, and why.
//!
//! Not decided (and not counted in `tikv_coprocessor_remote_decision_total`): a server without
//! `remote-coprocessor-addr`, and a request the cache fast path answered already.
//!
//! **Candidate reason**, checked in this order, the first that holds wins:
//! 1. `num_ranges`: at least `remote-coprocessor-num-ranges` ranges (the block estimate is
//!    skipped here: with that many ranges it costs more than it tells; load-aware routing
//!    still makes it when its force threshold needs it, below);
//! 2. `blocks_size`: `range_blocks_size(ranges)` reaches `remote-coprocessor-min-blocks-size`;
//! 3. `long_query_blocks_size`: the query is old (now minus the physical time of its start_ts)
//!    and the estimate reaches the threshold lowered for its age: halved once it is older than
//!    the first of `remote-coprocessor-long-query-after` ("15s"), quartered after the second
//!    ("30s"), an eighth after the third ("60s"). A query that has run long already (paging
//!    through a big table) is worth moving off the storage server sooner;
//! 4. `lazy_pattern_blocks_size`: the request's DAG pattern (see `pattern_history`) has at
//!    least two recent local runs whose average blocks estimate reaches the min blocks size;
//! 5. `lazy_pattern_duration`: ... whose average duration reaches
//!    `remote-coprocessor-lazy-pattern-duration` (30 ms). Size wins when both hold.
//!
//! No candidate reason: local, not counted (exec details say `below_min_blocks_size`).
//!
//! **Load-aware routing** (`remote-coprocessor-load-aware`, on by default): a candidate goes
//! remote with `load_aware_force_blocks_size` (estimate at least the force blocks size, 4× the
//! min by default; made now if the candidate reason skipped it, so that a huge multi-range scan
//! is forced remote like a huge single-range one), `load_aware_force_num_ranges` (4× num-ranges by default), `no_cpu_signal`
//! (no fresh CPU sample: fail open), `cpu_busy` (a busy sample within the hold time), or stays
//! local with `cpu_idle`. Without load-aware routing a candidate goes remote with its candidate
//! reason. Exactly one reason is counted per decision, when it is made; a later lock or
//! fallback adds nothing here.
//!
//! The reasons are [`OffloadReason`] (`wire::placement`), whose labels are the metric's and
//! the exec details'; each implies its result (remote, or local for `cpu_idle` and the two
//! uncounted ones), so a [`Decision`] is its reason and nothing can contradict it.
//!
//! The function is pure: the clock, the estimate, the history and the CPU state are inputs, so
//! tests set them exactly.

use std::time::Duration;

use types::Ts;
use wire::placement::{DecisionResult, OffloadReason};

use crate::cpu_load::CpuState;
use crate::pattern_history::PatternStats;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffloadPolicy {
    pub min_blocks_size: u64,
    /// 0 disables the range-count reason.
    pub num_ranges: usize,
    /// Ascending ages; past the i-th, the blocks-size threshold is divided by 2^(i+1).
    pub long_query_after: Vec<Duration>,
    /// Average local duration that makes a pattern a candidate (zero disables).
    pub lazy_pattern_duration: Duration,
    /// `None`: load-aware routing off.
    pub load_aware: Option<LoadAware>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadAware {
    /// A candidate with at least this blocks estimate goes remote whatever the CPU says.
    pub force_blocks_size: u64,
    /// A candidate with at least this many ranges goes remote whatever the CPU says (0 = no).
    pub force_num_ranges: usize,
}

/// What the policy decided: the reason says where the request goes
/// ([`OffloadReason::result`]) and whether the decision is counted
/// ([`OffloadReason::is_counted`]), so the three can never disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub reason: OffloadReason,
    /// The blocks estimate, if it was made (the pattern history records it for local runs).
    pub blocks_size: Option<u64>,
}

/// The inputs a decision may look at, each computed only if needed.
pub struct Inputs<E, H, C>
where
    E: FnOnce() -> u64,
    H: FnOnce() -> Option<PatternStats>,
    C: FnOnce() -> CpuState,
{
    pub num_ranges: usize,
    pub age: Duration,
    /// The blocks estimate (skipped for a `num_ranges` candidate).
    pub estimate: E,
    /// The request pattern's recent local runs.
    pub history: H,
    /// The CPU state (asked only under load-aware routing, for a candidate).
    pub cpu: C,
}

impl OffloadPolicy {
    /// Decides one request (see the module docs for the order).
    pub fn decide<E, H, C>(&self, inputs: Inputs<E, H, C>) -> Decision
    where
        E: FnOnce() -> u64,
        H: FnOnce() -> Option<PatternStats>,
        C: FnOnce() -> CpuState,
    {
        let mut estimate = LazyEstimate::new(inputs.estimate);
        let candidate =
            self.candidate(inputs.num_ranges, inputs.age, &mut estimate, inputs.history);
        let Some(candidate) = candidate else {
            return Decision::new(OffloadReason::BelowMinBlocksSize, estimate.made());
        };
        let Some(la) = &self.load_aware else {
            return Decision::new(candidate, estimate.made());
        };
        if estimate.get() >= la.force_blocks_size {
            return Decision::new(OffloadReason::LoadAwareForceBlocksSize, estimate.made());
        }
        let blocks = estimate.made();
        if la.force_num_ranges > 0 && inputs.num_ranges >= la.force_num_ranges {
            return Decision::new(OffloadReason::LoadAwareForceNumRanges, blocks);
        }
        let reason = match (inputs.cpu)() {
            CpuState::NoSignal => OffloadReason::NoCpuSignal,
            CpuState::Busy => OffloadReason::CpuBusy,
            CpuState::Idle => OffloadReason::CpuIdle,
        };
        Decision::new(reason, blocks)
    }

    /// The candidate reason, if any.
    fn candidate<E: FnOnce() -> u64>(
        &self,
        num_ranges: usize,
        age: Duration,
        estimate: &mut LazyEstimate<E>,
        history: impl FnOnce() -> Option<PatternStats>,
    ) -> Option<OffloadReason> {
        if self.num_ranges > 0 && num_ranges >= self.num_ranges {
            return Some(OffloadReason::NumRanges);
        }
        let blocks = estimate.get();
        if blocks >= self.min_blocks_size {
            Some(OffloadReason::BlocksSize)
        } else if blocks >= self.long_query_threshold(age) {
            Some(OffloadReason::LongQueryBlocksSize)
        } else {
            history().and_then(|h| {
                if h.avg_blocks_size.is_some_and(|b| b >= self.min_blocks_size) {
                    Some(OffloadReason::LazyPatternBlocksSize)
                } else if !self.lazy_pattern_duration.is_zero()
                    && h.avg_duration >= self.lazy_pattern_duration
                {
                    Some(OffloadReason::LazyPatternDuration)
                } else {
                    None
                }
            })
        }
    }

    /// The blocks-size threshold for a query `age` old.
    pub fn long_query_threshold(&self, age: Duration) -> u64 {
        let steps = self.long_query_after.iter().filter(|&&a| age > a).count() as u32;
        self.min_blocks_size >> steps.min(63)
    }
}

impl Decision {
    fn new(reason: OffloadReason, blocks_size: Option<u64>) -> Decision {
        Decision {
            reason,
            blocks_size,
        }
    }

    /// Whether the request goes to a worker.
    pub fn remote(&self) -> bool {
        self.reason.result() == DecisionResult::Remote
    }

    /// Whether the decision is counted (false: not a candidate).
    pub fn counted(&self) -> bool {
        self.reason.is_counted()
    }
}

/// The blocks estimate, made at most once and only when a rule asks for it.
struct LazyEstimate<E> {
    make: Option<E>,
    value: Option<u64>,
}

impl<E: FnOnce() -> u64> LazyEstimate<E> {
    fn new(make: E) -> Self {
        LazyEstimate {
            make: Some(make),
            value: None,
        }
    }

    fn get(&mut self) -> u64 {
        if let Some(v) = self.value {
            return v;
        }
        let v = self.make.take().map_or(0, |make| make());
        self.value = Some(v);
        v
    }

    /// The estimate, if a rule made it.
    fn made(&self) -> Option<u64> {
        self.value
    }
}

/// How old a query with `start_ts` is at `now_ms` (Unix milliseconds): zero for a start_ts from
/// the future or one that carries no physical time.
pub fn query_age(start_ts: Ts, now_ms: u64) -> Duration {
    Duration::from_millis(now_ms.saturating_sub(start_ts.physical_millis()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;

    fn policy() -> OffloadPolicy {
        OffloadPolicy {
            min_blocks_size: 32 * MIB,
            num_ranges: 2048,
            long_query_after: vec![
                Duration::from_secs(15),
                Duration::from_secs(30),
                Duration::from_secs(60),
            ],
            lazy_pattern_duration: Duration::from_millis(30),
            load_aware: None,
        }
    }

    fn load_aware() -> OffloadPolicy {
        OffloadPolicy {
            load_aware: Some(LoadAware {
                force_blocks_size: 128 * MIB,
                force_num_ranges: 8192,
            }),
            ..policy()
        }
    }

    fn stats(blocks: Option<u64>, ms: u64) -> Option<PatternStats> {
        Some(PatternStats {
            runs: 2,
            avg_blocks_size: blocks,
            avg_duration: Duration::from_millis(ms),
        })
    }

    /// A decision with the given inputs; `cpu` panics if asked when `None`.
    fn decide(
        p: &OffloadPolicy,
        ranges: usize,
        age_s: u64,
        blocks: u64,
        history: Option<PatternStats>,
        cpu: Option<CpuState>,
    ) -> Decision {
        p.decide(Inputs {
            num_ranges: ranges,
            age: Duration::from_secs(age_s),
            estimate: || blocks,
            history: || history,
            cpu: || cpu.expect("the CPU state is asked only under load-aware routing"),
        })
    }

    fn reason_of(d: Decision) -> (bool, OffloadReason, bool) {
        (d.remote(), d.reason, d.counted())
    }

    #[test]
    fn each_candidate_reason_holds_exactly_under_its_condition() {
        let p = policy();
        let d = p.decide(Inputs {
            num_ranges: 2048,
            age: Duration::ZERO,
            estimate: || panic!("the estimate is skipped for many ranges"),
            history: || panic!("and so is the history"),
            cpu: || panic!("no load-aware routing"),
        });
        assert_eq!(reason_of(d), (true, OffloadReason::NumRanges, true));
        assert_eq!(d.blocks_size, None);
        let d = decide(&p, 1, 0, 32 * MIB, None, None);
        assert_eq!(reason_of(d), (true, OffloadReason::BlocksSize, true));
        assert_eq!(d.blocks_size, Some(32 * MIB));
        let below = decide(&p, 1, 0, 32 * MIB - 1, None, None);
        assert_eq!(
            reason_of(below),
            (false, OffloadReason::BelowMinBlocksSize, false)
        );
        for (age, blocks) in [(16, 16 * MIB), (31, 8 * MIB), (61, 4 * MIB)] {
            let d = decide(&p, 1, age, blocks, None, None);
            assert_eq!(
                reason_of(d),
                (true, OffloadReason::LongQueryBlocksSize, true)
            );
            assert!(!decide(&p, 1, age, blocks - 1, None, None).remote());
        }
        let d = decide(&p, 1, 0, 0, stats(Some(32 * MIB), 0), None);
        assert_eq!(
            reason_of(d),
            (true, OffloadReason::LazyPatternBlocksSize, true)
        );
        let d = decide(&p, 1, 0, 0, stats(Some(32 * MIB - 1), 30), None);
        assert_eq!(
            reason_of(d),
            (true, OffloadReason::LazyPatternDuration, true)
        );
        let d = decide(&p, 1, 0, 0, stats(None, 30), None);
        assert_eq!(
            reason_of(d),
            (true, OffloadReason::LazyPatternDuration, true)
        );
        assert!(!decide(&p, 1, 0, 0, stats(Some(32 * MIB - 1), 29), None).counted());
        let off = OffloadPolicy {
            num_ranges: 0,
            lazy_pattern_duration: Duration::ZERO,
            ..policy()
        };
        assert!(!decide(&off, 1 << 20, 0, 0, stats(None, 1000), None).counted());
    }

    #[test]
    fn size_wins_over_duration_and_the_estimate_over_the_history() {
        let p = policy();
        let d = decide(&p, 1, 0, 0, stats(Some(32 * MIB), 1000), None);
        assert_eq!(d.reason, OffloadReason::LazyPatternBlocksSize);
        let d = decide(&p, 1, 0, 32 * MIB, stats(Some(32 * MIB), 1000), None);
        assert_eq!(d.reason, OffloadReason::BlocksSize);
    }

    #[test]
    fn load_aware_reasons_follow_their_order() {
        let p = load_aware();
        let busy = Some(CpuState::Busy);
        let d = decide(&p, 1, 0, 128 * MIB, None, busy);
        assert_eq!(
            reason_of(d),
            (true, OffloadReason::LoadAwareForceBlocksSize, true)
        );
        let d = p.decide(Inputs {
            num_ranges: 8192,
            age: Duration::ZERO,
            estimate: || 0,
            history: || unreachable!(),
            cpu: || panic!("forced: the CPU is not asked"),
        });
        assert_eq!(
            reason_of(d),
            (true, OffloadReason::LoadAwareForceNumRanges, true)
        );
        for (cpu, want) in [
            (CpuState::NoSignal, (true, OffloadReason::NoCpuSignal, true)),
            (CpuState::Busy, (true, OffloadReason::CpuBusy, true)),
            (CpuState::Idle, (false, OffloadReason::CpuIdle, true)),
        ] {
            assert_eq!(reason_of(decide(&p, 1, 0, 32 * MIB, None, Some(cpu))), want);
            assert_eq!(reason_of(decide(&p, 2048, 0, 0, None, Some(cpu))), want);
            let lazy = decide(&p, 1, 0, 0, stats(None, 100), Some(cpu));
            assert_eq!(reason_of(lazy), want);
        }
        // No candidate: the CPU is not asked and nothing is counted.
        let d = decide(&p, 1, 0, 0, None, None);
        assert_eq!(
            reason_of(d),
            (false, OffloadReason::BelowMinBlocksSize, false)
        );
    }

    #[test]
    fn a_many_range_candidate_is_forced_remote_by_its_blocks_estimate() {
        // 2048 ranges: a `num_ranges` candidate, below the force range count (8192). Its
        // estimate reaches the force blocks size, so it goes remote on an idle server too.
        let p = load_aware();
        let d = p.decide(Inputs {
            num_ranges: 2048,
            age: Duration::ZERO,
            estimate: || 128 * MIB,
            history: || panic!("the history is not asked for a num_ranges candidate"),
            cpu: || panic!("forced: the CPU is not asked"),
        });
        assert_eq!(
            reason_of(d),
            (true, OffloadReason::LoadAwareForceBlocksSize, true)
        );
        assert_eq!(d.blocks_size, Some(128 * MIB));
        // Below the force size it is up to the CPU, and the estimate is reported.
        let d = decide(&p, 2048, 0, 128 * MIB - 1, None, Some(CpuState::Idle));
        assert_eq!(reason_of(d), (false, OffloadReason::CpuIdle, true));
        assert_eq!(d.blocks_size, Some(128 * MIB - 1));
        // Without load-aware routing nothing needs the estimate: it is not made.
        let d = policy().decide(Inputs {
            num_ranges: 2048,
            age: Duration::ZERO,
            estimate: || panic!("no force threshold: the estimate is skipped"),
            history: || unreachable!(),
            cpu: || unreachable!(),
        });
        assert_eq!(reason_of(d), (true, OffloadReason::NumRanges, true));
    }

    #[test]
    fn ages_come_from_the_physical_part_of_start_ts() {
        let ts = Ts::compose(1_000_000, 7);
        assert_eq!(query_age(ts, 1_020_000), Duration::from_secs(20));
        assert_eq!(query_age(ts, 999_000), Duration::ZERO);
    }

    proptest! {
        /// An older query never needs more blocks to go remote, and a bigger estimate never
        /// turns a remote decision local.
        #[test]
        fn decisions_are_monotone_in_age_and_size(
            a in 0u64..200, b in 0u64..200, x in 0u64..(64 * MIB), y in 0u64..(64 * MIB),
        ) {
            let p = policy();
            let (young, old) = (a.min(b), a.max(b));
            let (small, big) = (x.min(y), x.max(y));
            prop_assert!(p.long_query_threshold(Duration::from_secs(old)) <= p.long_query_threshold(Duration::from_secs(young)));
            if decide(&p, 1, young, small, None, None).remote() {
                prop_assert!(decide(&p, 1, old, small, None, None).remote());
                prop_assert!(decide(&p, 1, young, big, None, None).remote());
            }
        }

        /// Exactly the candidates are counted; load-aware routing changes only where they run.
        #[test]
        fn load_aware_routing_counts_the_same_requests(
            ranges in 1usize..10_000, blocks in 0u64..(256 * MIB), age in 0u64..100,
            lazy_blocks in proptest::option::of(0u64..(64 * MIB)), lazy_ms in 0u64..60,
            cpu in prop_oneof![Just(CpuState::NoSignal), Just(CpuState::Busy), Just(CpuState::Idle)],
        ) {
            let h = stats(lazy_blocks, lazy_ms);
            let plain = decide(&policy(), ranges, age, blocks, h, None);
            let la = decide(&load_aware(), ranges, age, blocks, h, Some(cpu));
            prop_assert_eq!(plain.counted(), la.counted());
            prop_assert_eq!(plain.counted(), plain.remote());
            if la.counted() {
                prop_assert_eq!(la.remote(), la.reason != OffloadReason::CpuIdle);
            }
        }
    }
}
