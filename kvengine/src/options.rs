//! Engine settings. Each knob documents its trade-off; defaults suit a storage server with a
//! few GiB of memory for memtables.

use std::path::PathBuf;
use std::time::Duration;

use sst::Compression;

use crate::ReadAhead;
use crate::error::{Error, Result};
use crate::wal::SyncPolicy;

/// Where a shard's log lives: in the engine (its own WAL) or outside it (a replicated log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogMode {
    /// Today's engine: `Engine::write` appends to the engine's own WAL; the engine freezes,
    /// flushes, compacts and splits on its own. Every existing caller and test.
    #[default]
    Internal,
    /// The shard's log lives outside the engine (a Raft group). The engine opens no WAL.
    /// Writes arrive only through `apply_*` with the log index; every applied entry of any kind
    /// sets `write_sequence = index`. Recovery restores `write_sequence = data_sequence` and
    /// the owner re-applies the entries above it. Background flush/compaction run only on
    /// shards marked leader, and hand their ChangeSets to the `ChangeSetSink` instead of
    /// applying them.
    ///
    /// A directory last opened in `Internal` mode must have been closed with a flush: its WAL
    /// is not read here.
    External,
}

impl LogMode {
    pub fn as_str(self) -> &'static str {
        match self {
            LogMode::Internal => "internal",
            LogMode::External => "external",
        }
    }
}

impl std::fmt::Display for LogMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Local directory for the WAL and the manifest (SST files go to the object store).
    pub dir: PathBuf,
    /// A memtable is frozen once it holds this many bytes. Bigger memtables mean fewer, larger
    /// L0 files and fewer object-store PUTs, but longer recovery (WAL replay) and more memory.
    pub memtable_size: usize,
    /// Frozen memtables waiting for flush, per shard. When the queue is full, writes stall until
    /// a flush finishes: this bounds memory when the object store is slower than the writers.
    pub max_frozen_memtables: usize,
    /// When a write is acknowledged relative to fsync of the WAL.
    pub wal_sync: SyncPolicy,
    /// WAL segments roll at this size; a segment is deleted once every record in it is flushed.
    pub wal_segment_size: u64,
    /// Background flush threads shared by all shards.
    pub flush_threads: usize,
    /// Target block size of SST files.
    pub block_size: usize,
    /// Compression of L0 files: short-lived, so cheap or none.
    pub l0_compression: Compression,
    /// The SST format version flushes and compactions write (the newest by default). Every
    /// build reads the versions it knows; during a rolling upgrade from a build that does not
    /// read the newest, pin the older one until every server and worker is upgraded.
    pub table_format_version: sst::FormatVersion,
    /// Bytes of decompressed blocks kept in memory (compressed tables only; 0 disables). Reads
    /// of uncompressed tables go straight to the memory-mapped file and need no cache.
    pub block_cache_size: u64,
    /// How the block cache loads blocks ahead of sequential scans on threads of its own
    /// (see [`crate::MokaBlockCache`]); needs a block cache. A scan of a compressed table
    /// then finds most of its blocks decompressed when it reaches them: the decompression
    /// runs on another core. [`ReadAhead::OFF`] keeps every load on the scan's thread.
    pub read_ahead: ReadAhead,
    /// Compression of level 1 and below, where most bytes live for long.
    pub level_compression: Compression,
    /// Background compaction threads shared by all shards (0 disables background compaction;
    /// `Engine::compact_shard` still works).
    pub compaction_threads: usize,
    /// L0 → L1 starts at this many L0 files...
    pub l0_compaction_files: usize,
    /// ...or this many bytes of L0 files, whichever comes first.
    pub l0_compaction_bytes: u64,
    /// Target size of level 1; level n targets `base_level_size × 10^(n-1)`. Smaller levels
    /// compact more often (write amplification) but keep fewer files per read.
    pub base_level_size: u64,
    /// Compaction output files are cut at about this size (one object-store PUT each).
    pub target_file_size: u64,
    /// Deepest level (at most 7).
    pub max_level: u32,
    /// Manifest records between two full rewrites of the manifest.
    pub manifest_rewrite_after: usize,
    /// Prefix of every file id this engine allocates (distinct per node sharing a bucket).
    pub node_id: u16,
    /// Whether the engine keeps its own WAL or applies entries of a log kept outside it
    /// (see [`LogMode`]).
    pub log_mode: LogMode,
    /// `External` mode only: how long `Engine::flush_shard` waits for the log to carry the
    /// Freeze it proposes and the flush ChangeSets that follow. Longer rides out a slow
    /// election; shorter tells a caller sooner that the log is not making progress.
    pub external_flush_timeout: Duration,
}

impl EngineOptions {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        EngineOptions {
            dir: dir.into(),
            memtable_size: 64 * 1024 * 1024,
            max_frozen_memtables: 4,
            wal_sync: SyncPolicy::EveryBatch,
            wal_segment_size: 64 * 1024 * 1024,
            flush_threads: 1,
            block_size: sst::DEFAULT_BLOCK_SIZE,
            l0_compression: Compression::None,
            table_format_version: sst::FormatVersion::NEWEST,
            level_compression: Compression::Zstd(1),
            block_cache_size: 256 * 1024 * 1024,
            read_ahead: ReadAhead::DEFAULT,
            compaction_threads: 1,
            l0_compaction_files: 4,
            l0_compaction_bytes: 256 * 1024 * 1024,
            base_level_size: 256 * 1024 * 1024,
            target_file_size: 32 * 1024 * 1024,
            max_level: 6,
            manifest_rewrite_after: 1000,
            node_id: 0,
            log_mode: LogMode::Internal,
            external_flush_timeout: Duration::from_secs(30),
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::Config { what });
        if self.memtable_size < 1024 {
            return bad(format!(
                "memtable_size must be at least 1024 bytes, found={}",
                self.memtable_size
            ));
        }
        if self.max_frozen_memtables == 0 {
            return bad("max_frozen_memtables must be at least 1, found=0".into());
        }
        if self.flush_threads == 0 {
            return bad("flush_threads must be at least 1, found=0".into());
        }
        if !(2..=changeset::MAX_LEVEL).contains(&self.max_level) {
            return bad(format!(
                "max_level must be in 2..={}, found={}",
                changeset::MAX_LEVEL,
                self.max_level
            ));
        }
        if self.l0_compaction_files == 0
            || self.target_file_size < 1024
            || self.base_level_size < 1024
        {
            return bad(format!(
                "l0_compaction_files must be >= 1 and target_file_size, base_level_size >= 1024; found={}, {}, {}",
                self.l0_compaction_files, self.target_file_size, self.base_level_size
            ));
        }
        if let Err((_, what)) = self.read_ahead.check() {
            return bad(what);
        }
        if self.wal_segment_size < 4096 {
            return bad(format!(
                "wal_segment_size must be at least 4096, found={}",
                self.wal_segment_size
            ));
        }
        Ok(())
    }
}
