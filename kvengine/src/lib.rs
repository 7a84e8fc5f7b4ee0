//! The Stratus engine: shards of the key space, each an LSM tree whose memtables and WAL are
//! local and whose SST files live in an object store.
//!
//! Data flows: [`write_batch`] → [`wal`] → memtable ([`shard`]) → [`flush`] → object store
//! ([`dfs`]) + [`manifest`]; reads go through [`snap_access`], which merges the sources of
//! [`source_iter`]. [`engine`] ties it together and recovers it after a crash. [`mvcc`] reads
//! transaction records at a start_ts; [`remote`] ships a snapshot to another process, which
//! reads the shipped memtable rows in place (`remote_rows`).

mod apply;
pub mod block_cache;
pub mod cachefs;
pub mod compaction;
mod compaction_job;
pub mod dfs;
pub mod dfs_config;
pub mod dfs_section;
pub mod durable_file;
pub mod engine;
pub mod error;
pub mod fault_dfs;
mod file_gc;
pub mod flush;
pub mod manifest;
pub mod metrics;
pub mod mvcc;
pub mod options;
mod recovery;
pub mod remote;
mod remote_rows;
pub mod s3_dfs;
pub mod shard;
pub mod shard_data;
pub mod snap_access;
mod source_iter;
mod split;
pub mod wal;
pub mod write_batch;
mod write_path;

pub use apply::ApplyOutcome;
pub use block_cache::{BlockCacheStats, MokaBlockCache};
pub use cachefs::{CacheFs, CacheFsStats};
pub use dfs::{Dfs, LocalDfs};
pub use dfs_config::{CacheConfig, DfsConfig};
pub use dfs_section::{DfsSection, InvalidDfsSection};
pub use engine::{Engine, ShardInfo};
pub use error::{Error, ErrorKind, Result};
pub use fault_dfs::{DfsOp, FaultDfs};
pub use memtable::ColumnFamily;
pub use options::EngineOptions;
pub use remote::RemoteSnapshot;
pub use s3_dfs::{S3Credentials, S3Dfs, S3Options};
pub use snap_access::{Item, SnapAccess, SnapIter};
pub use wal::SyncPolicy;
pub use write_batch::WriteBatch;
