//! WAL settings: where segments live, when they roll, and when an append is durable.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::error::Error;

/// When an appended record is made durable, i.e. what an acknowledged write survives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SyncPolicy {
    /// Every append issues its own fdatasync before returning. An acknowledged write survives
    /// power loss. Costs one device flush per write batch (hundreds of microseconds on an SSD,
    /// milliseconds on a disk); concurrent writers flush in parallel.
    #[default]
    EveryBatch,
    /// Same guarantee as `EveryBatch`, but concurrent appenders share flushes: one fdatasync
    /// covers every record appended before it started, and appenders arriving meanwhile wait
    /// for the next one. Fewer flushes under concurrency, at the cost of a little latency for
    /// a lone writer (it may wait for a flush already in progress).
    GroupCommit,
    /// Records are handed to the OS and never flushed by an append. An acknowledged write
    /// survives a crash of the process but not of the machine. For benchmarks. A segment is
    /// still flushed when it is sealed, so only the active segment can lose data.
    Off,
}

/// How durable one write must be before it is acknowledged, chosen per write over the
/// engine's [`SyncPolicy`] (RocksDB's `WriteOptions::sync`, fjall's `PersistMode`): a caller
/// can fsync one batch and not the next on the same engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Durability {
    /// As the engine's policy says.
    #[default]
    Policy,
    /// Flushed to the device before the write returns (an fdatasync of its segment, which
    /// also covers every record appended before it), whatever the policy; shared with
    /// concurrent appenders under [`SyncPolicy::GroupCommit`].
    Sync,
    /// Handed to the OS only: the write survives a crash of the process, not of the machine,
    /// until a later synced write or the segment's seal flushes it.
    Buffered,
}

impl Durability {
    /// The policy one append with this durability follows on a WAL whose policy is `policy`.
    pub fn policy(self, policy: SyncPolicy) -> SyncPolicy {
        match (self, policy) {
            (Durability::Policy, p) => p,
            (Durability::Sync, SyncPolicy::GroupCommit) => SyncPolicy::GroupCommit,
            (Durability::Sync, _) => SyncPolicy::EveryBatch,
            (Durability::Buffered, _) => SyncPolicy::Off,
        }
    }
}

impl SyncPolicy {
    /// Every policy, by its configuration name.
    pub const ALL: [SyncPolicy; 3] = [
        SyncPolicy::EveryBatch,
        SyncPolicy::GroupCommit,
        SyncPolicy::Off,
    ];

    /// The configuration name: `every-batch`, `group-commit` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncPolicy::EveryBatch => "every-batch",
            SyncPolicy::GroupCommit => "group-commit",
            SyncPolicy::Off => "off",
        }
    }
}

impl fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SyncPolicy {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        SyncPolicy::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| Error::Config {
                what: format!(
                    "unknown wal sync policy value={s:?} allowed=every-batch,group-commit,off"
                ),
            })
    }
}

/// Default segment roll threshold: 64 MiB.
pub const DEFAULT_SEGMENT_SIZE: u64 = 64 << 20;

/// Settings of a [`crate::wal::Wal`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalOptions {
    /// Directory holding the segment files; created if missing. Nothing else should write
    /// `*.wal` files there.
    pub dir: PathBuf,
    /// A segment is sealed and a new one started when an append would grow it past this many
    /// bytes (a single record larger than this still gets a segment of its own). Segments are
    /// the unit of deletion: smaller ones let the WAL shrink sooner after a flush, but each
    /// roll costs an fdatasync, a file create and a directory fsync. Default 64 MiB.
    pub segment_size: u64,
    /// When an append is durable; see [`SyncPolicy`]. Default `every-batch`.
    pub sync: SyncPolicy,
}

impl WalOptions {
    /// Options with the defaults for everything but the directory.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            segment_size: DEFAULT_SEGMENT_SIZE,
            sync: SyncPolicy::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_policy_parses_its_own_names() {
        for policy in SyncPolicy::ALL {
            assert_eq!(policy.to_string().parse::<SyncPolicy>().unwrap(), policy);
        }
    }

    #[test]
    fn unknown_sync_policy_error_names_allowed_values() {
        let err = "always".parse::<SyncPolicy>().unwrap_err().to_string();
        assert!(err.contains("every-batch,group-commit,off"), "{err}");
        assert!(err.contains("always"), "{err}");
    }
}
