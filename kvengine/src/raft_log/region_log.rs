//! The in-memory Raft log of every region, and **the one rule** that applies a [`LogOp`] to it.
//! [`RegionLogs::check_batch`] runs the rule on the bounds alone before a batch is written,
//! [`RegionLogs::apply`] runs it again while applying, for a live write and at replay alike, so
//! what a write made visible is what a reopen rebuilds.
//!
//! Per region: `truncated (index, term)`, the entries `(truncated, last]`, the hard state and
//! the conf state. The rule:
//!
//! * an append whose first index `i` is in `(truncated, last + 1]` replaces the entries from
//!   `i` on (Raft's conflict overwrite) and sets `last` to its last index; `i <= truncated` or
//!   `i > last + 1` (a gap) does not fit;
//! * a truncation to `index > truncated` drops the entries up to `index` (all of them when
//!   `index >= last`, and `last` becomes `index`); `index <= truncated` changes nothing;
//! * a removal drops the region; any other operation on a region the log does not hold
//!   creates it at `truncated = last = 0`.
//!
//! During replay, after segments were purged, a region may lack entries it once had (see the
//! module docs of [`crate::raft_log`]): the entries held are always the newest ones, a run
//! ending at `last`. A log that is still missing entries when replay ends is corruption.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::raft_log::log_batch::{LogBatch, LogOp, RegionOp};
use crate::raft_log::log_entry::{ConfState, HardState, LogEntry, RegionLogState};
use crate::raft_log::log_error::{BatchError, LogReadError};
use crate::raft_log::record_codec::RegionCheckpoint;

/// What the rule looks at: a region's truncated and last index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bounds {
    pub(crate) truncated_index: u64,
    pub(crate) last_index: u64,
}

/// Why an operation does not fit a region's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OpFault {
    /// The append starts after `last + 1`: the entries in between are missing.
    #[error("append leaves a gap expected={expected} found={found}")]
    Gap { expected: u64, found: u64 },
    /// The append starts at or below the truncated index.
    #[error(
        "append at or below the truncated index first_index={first_index} truncated_index={truncated_index}"
    )]
    BelowTruncated {
        first_index: u64,
        truncated_index: u64,
    },
}

/// The rule: the bounds of a region after `op`, or `None` when `op` removes it. `before` is
/// `None` for a region the log does not hold.
pub(crate) fn bounds_after(before: Option<Bounds>, op: &LogOp) -> Result<Option<Bounds>, OpFault> {
    let b = before.unwrap_or_default();
    match op {
        LogOp::Append(entries) => {
            let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
                return Ok(Some(b));
            };
            if first.index <= b.truncated_index {
                return Err(OpFault::BelowTruncated {
                    first_index: first.index,
                    truncated_index: b.truncated_index,
                });
            }
            if first.index > b.last_index.saturating_add(1) {
                return Err(OpFault::Gap {
                    expected: b.last_index.saturating_add(1),
                    found: first.index,
                });
            }
            Ok(Some(Bounds {
                truncated_index: b.truncated_index,
                last_index: last.index,
            }))
        }
        LogOp::HardState(_) | LogOp::ConfState(_) => Ok(Some(b)),
        LogOp::Truncate { index, .. } if *index <= b.truncated_index => Ok(Some(b)),
        LogOp::Truncate { index, .. } => Ok(Some(Bounds {
            truncated_index: *index,
            last_index: b.last_index.max(*index),
        })),
        LogOp::RemoveRegion => Ok(None),
    }
}

/// One region's log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RegionLog {
    truncated_index: u64,
    truncated_term: u64,
    last_index: u64,
    /// The newest `entries.len()` entries of `(truncated_index, last_index]`: all of them,
    /// except during a replay after a purge.
    entries: VecDeque<LogEntry>,
    hard_state: HardState,
    conf_state: ConfState,
}

impl RegionLog {
    fn bounds(&self) -> Bounds {
        Bounds {
            truncated_index: self.truncated_index,
            last_index: self.last_index,
        }
    }

    /// Index of `entries[0]` (`last_index + 1` when there is none, saturating: only
    /// differences to indexes at or below `last_index` are taken from it).
    fn first_held(&self) -> u64 {
        (self.last_index - self.entries.len() as u64).saturating_add(1)
    }

    fn is_complete(&self) -> bool {
        self.entries.len() as u64 == self.last_index - self.truncated_index
    }

    fn state(&self) -> RegionLogState {
        RegionLogState {
            hard_state: self.hard_state,
            conf_state: self.conf_state.clone(),
            truncated_index: self.truncated_index,
            truncated_term: self.truncated_term,
            last_index: self.last_index,
        }
    }

    /// `entries` fit (checked by [`bounds_after`]): drop what they replace, then add them.
    fn append(&mut self, entries: &[LogEntry]) {
        let Some(first) = entries.first() else { return };
        let keep = first.index.saturating_sub(self.first_held()) as usize;
        self.entries.truncate(keep);
        self.entries.extend(entries.iter().cloned());
        self.last_index = entries.last().map_or(self.last_index, |e| e.index);
    }

    fn truncate(&mut self, index: u64, term: u64) {
        if index <= self.truncated_index {
            return;
        }
        if index >= self.last_index {
            self.entries.clear();
            self.last_index = index;
        } else {
            let drop = (index + 1).saturating_sub(self.first_held()) as usize;
            self.entries.drain(..drop.min(self.entries.len()));
        }
        self.truncated_index = index;
        self.truncated_term = term;
    }

    /// Replay only: takes the bounds and states a checkpoint recorded. Entries held above the
    /// checkpoint's last index were replaced before it; held entries that do not reach its last
    /// index lie below entries of a purged segment, so below the final truncation point, and
    /// are dropped to keep the held entries a run ending at `last_index`.
    fn reconcile(&mut self, cp: &RegionCheckpoint) {
        if self.last_index >= cp.last_index {
            let above = (self.last_index - cp.last_index) as usize;
            self.entries
                .truncate(self.entries.len().saturating_sub(above));
        } else {
            self.entries.clear();
        }
        self.last_index = cp.last_index;
        let drop = cp
            .truncated_index
            .saturating_add(1)
            .saturating_sub(self.first_held()) as usize;
        self.entries.drain(..drop.min(self.entries.len()));
        self.truncated_index = cp.truncated_index;
        self.truncated_term = cp.truncated_term;
        self.hard_state = cp.hard_state;
        self.conf_state = cp.conf_state.clone();
    }
}

/// The logs of every region a Raft log holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RegionLogs {
    regions: BTreeMap<u64, RegionLog>,
}

impl RegionLogs {
    /// Checks every operation of `batch` against the rule, in order, on the bounds the
    /// earlier ones leave. Changes nothing.
    pub(crate) fn check_batch(&self, batch: &LogBatch) -> Result<(), BatchError> {
        let mut shadow: BTreeMap<u64, Option<Bounds>> = BTreeMap::new();
        for RegionOp { region_id, op } in batch.ops() {
            let before = match shadow.get(region_id) {
                Some(bounds) => *bounds,
                None => self.regions.get(region_id).map(RegionLog::bounds),
            };
            let after = bounds_after(before, op).map_err(|fault| {
                let b = before.unwrap_or_default();
                let first_index = match fault {
                    OpFault::Gap { found, .. } => found,
                    OpFault::BelowTruncated { first_index, .. } => first_index,
                };
                BatchError::OutOfRange {
                    region_id: *region_id,
                    first_index,
                    truncated_index: b.truncated_index,
                    last_index: b.last_index,
                }
            })?;
            shadow.insert(*region_id, after);
        }
        Ok(())
    }

    /// Applies one operation; on a fault nothing changes.
    pub(crate) fn apply(&mut self, region_id: u64, op: &LogOp) -> Result<(), OpFault> {
        let before = self.regions.get(&region_id).map(RegionLog::bounds);
        let after = bounds_after(before, op)?;
        if let LogOp::RemoveRegion = op {
            self.regions.remove(&region_id);
            return Ok(());
        }
        let log = self.regions.entry(region_id).or_default();
        match op {
            LogOp::Append(entries) => log.append(entries),
            LogOp::HardState(hs) => log.hard_state = *hs,
            LogOp::ConfState(cs) => log.conf_state = cs.clone(),
            LogOp::Truncate { index, term } => log.truncate(*index, *term),
            LogOp::RemoveRegion => {}
        }
        debug_assert_eq!(Some(log.bounds()), after, "apply follows bounds_after");
        Ok(())
    }

    /// Applies a batch [`RegionLogs::check_batch`] accepted.
    pub(crate) fn apply_batch(&mut self, batch: &LogBatch) -> Result<(), OpFault> {
        for RegionOp { region_id, op } in batch.ops() {
            self.apply(*region_id, op)?;
        }
        Ok(())
    }

    /// Replay only: the regions and states a checkpoint recorded replace what replay has
    /// built so far (a region it does not list had been removed).
    pub(crate) fn apply_checkpoint(&mut self, checkpoint: &[RegionCheckpoint]) {
        let listed: BTreeSet<u64> = checkpoint.iter().map(|cp| cp.region_id).collect();
        self.regions.retain(|id, _| listed.contains(id));
        for cp in checkpoint {
            self.regions.entry(cp.region_id).or_default().reconcile(cp);
        }
    }

    /// Every region's state, for the checkpoint that starts a new segment.
    pub(crate) fn checkpoint(&self) -> Vec<RegionCheckpoint> {
        self.regions
            .iter()
            .map(|(&region_id, log)| RegionCheckpoint {
                region_id,
                truncated_index: log.truncated_index,
                truncated_term: log.truncated_term,
                last_index: log.last_index,
                hard_state: log.hard_state,
                conf_state: log.conf_state.clone(),
            })
            .collect()
    }

    /// A region lacking some of its entries, with the first index it holds.
    pub(crate) fn first_incomplete(&self) -> Option<(u64, RegionLogState, u64)> {
        self.regions
            .iter()
            .find(|(_, log)| !log.is_complete())
            .map(|(&id, log)| (id, log.state(), log.first_held()))
    }

    /// The truncated index of every region.
    pub(crate) fn truncated_indexes(&self) -> BTreeMap<u64, u64> {
        self.regions
            .iter()
            .map(|(&id, log)| (id, log.truncated_index))
            .collect()
    }

    pub(crate) fn regions(&self) -> Vec<u64> {
        self.regions.keys().copied().collect()
    }

    pub(crate) fn state(&self, region_id: u64) -> Option<RegionLogState> {
        self.regions.get(&region_id).map(RegionLog::state)
    }

    /// A region's truncated and last index, without copying its state.
    pub(crate) fn bounds(&self, region_id: u64) -> Option<Bounds> {
        self.regions.get(&region_id).map(RegionLog::bounds)
    }

    fn region(&self, region_id: u64) -> Result<&RegionLog, LogReadError> {
        self.regions
            .get(&region_id)
            .ok_or(LogReadError::UnknownRegion { region_id })
    }

    /// Entries `[low, high)`, at most `max_size` bytes ([`LogEntry::size`]) but always at
    /// least one.
    pub(crate) fn entries(
        &self,
        region_id: u64,
        low: u64,
        high: u64,
        max_size: Option<u64>,
    ) -> Result<Vec<LogEntry>, LogReadError> {
        let log = self.region(region_id)?;
        if low <= log.truncated_index {
            return Err(LogReadError::Compacted {
                region_id,
                index: low,
                truncated_index: log.truncated_index,
            });
        }
        if high > log.last_index.saturating_add(1) {
            return Err(LogReadError::Unavailable {
                region_id,
                index: high - 1,
                last_index: log.last_index,
            });
        }
        if low >= high {
            return Ok(Vec::new());
        }
        let first_held = log.first_held();
        if low < first_held {
            // Only while replay is still missing entries; never after open.
            return Err(LogReadError::Compacted {
                region_id,
                index: low,
                truncated_index: first_held - 1,
            });
        }
        let range = (low - first_held) as usize..(high - first_held) as usize;
        let mut out = Vec::new();
        let mut size = 0u64;
        for entry in log.entries.range(range) {
            size = size.saturating_add(entry.size());
            if !out.is_empty() && max_size.is_some_and(|max| size > max) {
                break;
            }
            out.push(entry.clone());
        }
        Ok(out)
    }

    /// Term of `index`; `index == truncated_index` answers `truncated_term`.
    pub(crate) fn term(&self, region_id: u64, index: u64) -> Result<u64, LogReadError> {
        let log = self.region(region_id)?;
        if index == log.truncated_index {
            return Ok(log.truncated_term);
        }
        if index < log.truncated_index {
            return Err(LogReadError::Compacted {
                region_id,
                index,
                truncated_index: log.truncated_index,
            });
        }
        if index > log.last_index {
            return Err(LogReadError::Unavailable {
                region_id,
                index,
                last_index: log.last_index,
            });
        }
        let first_held = log.first_held();
        index
            .checked_sub(first_held)
            .and_then(|at| log.entries.get(at as usize))
            .map(|e| e.term)
            .ok_or(LogReadError::Compacted {
                region_id,
                index,
                truncated_index: first_held - 1,
            })
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn append(logs: &mut RegionLogs, region: u64, first: u64, count: u64, term: u64) {
        let entries = (first..first + count)
            .map(|index| LogEntry {
                index,
                term,
                data: Bytes::from(format!("{index}@{term}").into_bytes()),
                ..Default::default()
            })
            .collect();
        logs.apply(region, &LogOp::Append(entries)).unwrap();
    }

    fn checkpoint(region_id: u64, truncated_index: u64, last_index: u64) -> RegionCheckpoint {
        RegionCheckpoint {
            region_id,
            truncated_index,
            truncated_term: 1,
            last_index,
            ..Default::default()
        }
    }

    fn held(logs: &RegionLogs, region: u64) -> Vec<(u64, u64)> {
        logs.regions[&region]
            .entries
            .iter()
            .map(|e| (e.index, e.term))
            .collect()
    }

    #[test]
    fn a_checkpoint_drops_entries_above_its_last_index_and_regions_it_does_not_list() {
        let mut logs = RegionLogs::default();
        append(&mut logs, 1, 1, 10, 1);
        append(&mut logs, 2, 1, 1, 1);
        // An older segment's stale suffix 8..=10 was replaced in a purged segment; the next
        // checkpoint says the log ended at 7, truncated at 3. Region 2 had been removed.
        logs.apply_checkpoint(&[checkpoint(1, 3, 7)]);
        assert_eq!(logs.regions(), [1]);
        assert_eq!(held(&logs, 1), [(4, 1), (5, 1), (6, 1), (7, 1)]);
        assert_eq!(logs.first_incomplete(), None);
    }

    #[test]
    fn held_entries_below_a_purged_run_are_dropped_and_the_log_is_incomplete_until_truncated() {
        let mut logs = RegionLogs::default();
        append(&mut logs, 1, 1, 4, 1);
        // Entries 5..=9 were in a purged segment: the checkpoint's last index is out of reach.
        logs.apply_checkpoint(&[checkpoint(1, 0, 9)]);
        assert_eq!(held(&logs, 1), []);
        assert!(matches!(logs.first_incomplete(), Some((1, _, 10))));
        // What follows the checkpoint fits its bounds, not what replay held before.
        append(&mut logs, 1, 10, 1, 2);
        assert!(logs.first_incomplete().is_some());
        logs.apply(1, &LogOp::Truncate { index: 9, term: 1 })
            .unwrap();
        assert_eq!(logs.first_incomplete(), None);
        assert_eq!(logs.entries(1, 10, 11, None).unwrap().len(), 1);
    }

    #[test]
    fn a_region_only_a_checkpoint_names_starts_with_its_bounds_and_no_entries() {
        let mut logs = RegionLogs::default();
        logs.apply_checkpoint(&[checkpoint(4, 5, 5)]);
        let state = logs.state(4).unwrap();
        assert_eq!((state.truncated_index, state.last_index), (5, 5));
        assert_eq!(logs.first_incomplete(), None);
        assert_eq!(
            logs.apply(
                4,
                &LogOp::Append(vec![LogEntry {
                    index: 7,
                    ..Default::default()
                }])
            ),
            Err(OpFault::Gap {
                expected: 6,
                found: 7
            })
        );
    }
}
