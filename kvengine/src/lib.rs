//! The Stratus engine: shards of the key space, each an LSM tree whose memtables and WAL are
//! local and whose SST files live in an object store.
//!
//! Modules, in the order data flows (all private; the crate's surface is the re-exports below,
//! plus four public modules with formats and records of their own: [`wal`], [`raft_log`],
//! [`manifest`] and [`mvcc`], and the list of [`metrics`]):
//!
//! * writing: `write_batch` → `write_path` → [`wal`] → the memtables of a shard (`shard`,
//!   `shard_data`); or, with the log outside the engine ([`LogMode::External`]), the entries
//!   of that log → `apply_at_index` → the memtables;
//! * changing files: `flush`, `compaction` (pick and merge) with `compaction_job`, `split`
//!   (with an external log, a leader hands their ChangeSets to the log: `change_set_sink`),
//!   all ending in `apply`, **the one apply path**: a ChangeSet is staged in the [`manifest`]
//!   through `changeset::ShardFiles::apply`, the live state is derived from the resulting
//!   file lists (`shard_data`), then committed and swapped in; `file_gc` deletes what no file
//!   list names; `recovery` rebuilds every shard the same way when the engine opens;
//! * storing files: the object stores (`dfs`: local directory; `s3_dfs`; `cachefs`: a file
//!   cache in front; `fault_dfs`: fault injection for tests), chosen by `dfs_config` from the
//!   `[dfs]` section (`dfs_section`); `block_cache` for decompressed blocks;
//! * reading: `snap_access` merges the sources of `source_iter`; [`mvcc`] reads transaction
//!   records at a start_ts; `remote` ships a snapshot to another process, which reads the
//!   shipped memtable rows in place (`remote_rows`).
//!
//! `engine` holds the handle and what the jobs share. [`raft_log`] is the Raft log store of a
//! replicated server, built on the WAL's segments; the engine itself does not use it.

mod apply;
mod apply_at_index;
mod block_cache;
mod cachefs;
mod change_set_sink;
mod compaction;
mod compaction_exec;
mod compaction_job;
mod dfs;
mod dfs_config;
mod dfs_section;
mod dfs_traffic;
mod durable_file;
mod engine;
mod error;
mod fault_dfs;
mod file_gc;
mod flush;
pub mod manifest;
pub mod metrics;
pub mod mvcc;
mod options;
pub mod raft_log;
mod raft_snapshot;
pub use raft_snapshot::GC_SAFE_POINT_PROPERTY;
mod recovery;
mod remote;
mod remote_rows;
mod s3_dfs;
mod shard;
mod shard_data;
mod snap_access;
mod sorted_runs;
mod source_iter;
mod split;
mod table_cache;
pub mod wal;
mod write_batch;
mod write_path;

pub use apply::ApplyOutcome;
pub use block_cache::{
    BLOCK_OVERHEAD, BlockCacheStats, MokaBlockCache, ReadAhead, ReadAheadSetting,
};
pub use cachefs::{CacheFs, CacheFsStats};
pub use change_set_sink::{ChangeSetSink, SinkError};
pub use compaction_exec::{
    CompactionOffload, INTENT_DIR, Intent, OffloadOutcome, run_compaction_job,
};
pub use dfs::{Dfs, LocalDfs};
pub use dfs_config::{CacheConfig, DfsConfig};
pub use dfs_section::{DfsSection, InvalidDfsSection};
pub use dfs_traffic::{DfsTraffic, MeteredDfs};
pub use durable_file::write_atomically;
pub use engine::{Engine, ShardInfo};
pub use error::{Error, ErrorKind, Result};
pub use fault_dfs::{DfsOp, FaultDfs};
pub use options::{EngineOptions, LogMode};
pub use remote::RemoteSnapshot;
pub use s3_dfs::{S3Credentials, S3Dfs, S3Options};
pub use snap_access::{Item, RawVersion, SnapAccess, SnapIter};
pub use sst::FormatVersion as TableFormatVersion;
pub use table_cache::{IDLE_EXPIRY, MIN_TABLE_WEIGHT, TableCache, TableCacheStats};
pub use types::{ColumnFamily, FileId};
pub use wal::{Durability, SyncPolicy};
pub use write_batch::{Op as WriteOp, Ops as WriteOps, WriteBatch};
