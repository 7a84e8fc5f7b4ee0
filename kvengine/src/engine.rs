//! The engine: shards of the key space over one manifest and one object store, with their log
//! either in the engine (one WAL) or outside it ([`LogMode`]).
//!
//! This module holds the handle, its shared state and the small calls that only read it. The
//! jobs live in modules named after them, in the order data flows:
//!
//! * `write_path` (`LogMode::Internal`): a batch gets the shard's next sequence, goes to the
//!   WAL and the active memtable, and is acknowledged; a full memtable is frozen.
//! * `apply_at_index` (`LogMode::External`): the entries of a log kept outside the engine (a
//!   Raft group) arrive with their index: writes, no-ops, Freezes and ChangeSets; each sets
//!   the shard's write sequence to its index, so replicas at the same index hold the same
//!   data at the same SnapVersion. The leader asks the log for a Freeze when its memtable is
//!   full.
//! * `flush`: a frozen memtable becomes an L0 file and a Flush ChangeSet.
//! * `compaction_job`: files merge into the level below and a Compaction ChangeSet replaces
//!   them (`compaction` picks and merges).
//! * `change_set_sink` (`LogMode::External`): only a leader flushes and compacts, and its
//!   ChangeSets go to the log through the owner's [`ChangeSetSink`] instead of being applied
//!   at once.
//! * `split`: a flushed shard becomes two through a Split ChangeSet; with an external log, a
//!   split entry is decided when applied (rejected over non-empty memtables) and the left
//!   child keeps the shard's id.
//! * `apply`: **the one apply path**. Every ChangeSet above, whichever log the engine keeps,
//!   changes the live state only there: the manifest applies it with
//!   [`changeset::ShardFiles::apply`] and the live state is derived from the file list it
//!   returns (`shard_data`).
//! * `file_gc`: files no shard references any more are deleted once no snapshot reads them
//!   (with an external log, once no replica of the region needs them either).
//! * `recovery`: opening rebuilds every shard from the manifest through the same derivation,
//!   then replays the WAL into memtables (with an external log, its owner re-applies the
//!   entries above each shard's `data_sequence`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

use bytes::Bytes;
use changeset::ShardFiles;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::block_cache::MokaBlockCache;
use crate::change_set_sink::ChangeSetSink;
use crate::compaction_exec::CompactionOffload;
use crate::dfs::Dfs;
use crate::error::{Error, Result};
use crate::file_gc::{FileGc, Retirement};
use crate::manifest::{IdAllocator, Manifest, ManifestOptions};
use crate::metrics;
use crate::options::{EngineOptions, LogMode};
use crate::shard::Shard;
use crate::shard_data::{OpenTables, ShardData, TableSource};
use crate::snap_access::{Item, SnapAccess};
use crate::wal::Wal;
use crate::{compaction_job, flush, recovery};

/// What [`Engine::shard_info`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardInfo {
    pub id: u64,
    pub ver: u64,
    pub start: Bytes,
    pub end: Bytes,
    pub base_version: u64,
    pub write_sequence: u64,
    pub meta_seq: u64,
    pub data_sequence: u64,
    pub frozen_memtables: usize,
    pub l0_files: usize,
    /// Tables in level 1 and below, per column family, per level (index 0 = L1).
    pub level_files: Vec<Vec<usize>>,
    pub memtable_size: usize,
}

impl ShardInfo {
    /// `base_version + write_sequence`: the shard's data version.
    pub fn snap_version(&self) -> u64 {
        self.base_version + self.write_sequence
    }
}

#[derive(Clone)]
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
    /// Shared by every clone of this handle (not by the background threads): when the last
    /// clone is dropped, the engine shuts down and releases its directory.
    _shutdown: Arc<ShutdownOnDrop>,
}

struct ShutdownOnDrop(Arc<Inner>);

impl Drop for ShutdownOnDrop {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

/// The state every clone of an [`Engine`] and every background thread shares.
pub(crate) struct Inner {
    pub(crate) opts: EngineOptions,
    pub(crate) dfs: Arc<dyn Dfs>,
    /// The engine's own log; `None` in `External` log mode, where the log lives outside.
    pub(crate) wal: Option<Wal>,
    pub(crate) manifest: Manifest,
    pub(crate) ids: IdAllocator,
    pub(crate) shards: RwLock<HashMap<u64, Arc<Shard>>>,
    /// Shards with a frozen memtable to flush.
    pub(crate) queue: Mutex<VecDeque<u64>>,
    pub(crate) queue_cv: Condvar,
    /// Signalled whenever a flush finishes (stalled writers and `flush_shard` wait on it).
    pub(crate) flushed: Mutex<()>,
    pub(crate) flushed_cv: Condvar,
    pub(crate) closed: AtomicBool,
    /// Set when a background job failed in a way that makes further writes unsafe.
    pub(crate) failure: Mutex<Option<String>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Files no shard references any more, deleted from the object store once no snapshot
    /// (and, with an external log, no replica) needs them, and what the replicas reported
    /// (`file_gc`).
    pub(crate) file_gc: Mutex<FileGc>,
    /// Decompressed blocks of compressed tables, shared by every table of the engine.
    block_cache: Option<Arc<dyn sst::BlockCache>>,
    /// Versions at or below this timestamp keep only their newest (see `compaction`).
    pub(crate) gc_safe_point: AtomicU64,
    /// `External` log mode: the shards this engine leads (`Engine::set_leader`). Kept by id, so
    /// the left child of a split, which keeps the parent's id and log, stays led.
    pub(crate) leaders: RwLock<HashSet<u64>>,
    /// `External` log mode: where the leader's jobs send their ChangeSets.
    sink: RwLock<Option<Arc<dyn ChangeSetSink>>>,
    /// Where the leader's compactions may run elsewhere (`compaction_exec`).
    offload: RwLock<Option<Arc<dyn CompactionOffload>>>,
    /// An exclusive lock on `dir/LOCK`, held while the engine is open: two engines on one
    /// directory would interleave their WAL and manifest writes.
    _dir_lock: std::fs::File,
}

impl Inner {
    /// Where tables that are not open yet are read from.
    pub(crate) fn table_source(&self) -> TableSource<'_> {
        TableSource::new(&self.dfs, self.block_cache.as_ref())
    }

    pub(crate) fn shard(&self, id: u64) -> Result<Arc<Shard>> {
        self.shards
            .read()
            .get(&id)
            .cloned()
            .ok_or(Error::ShardNotFound { shard_id: id })
    }

    pub(crate) fn log_mode(&self) -> LogMode {
        self.opts.log_mode
    }

    /// Fails unless the engine runs in `expected` log mode.
    pub(crate) fn expect_log_mode(&self, op: &'static str, expected: LogMode) -> Result<()> {
        let found = self.log_mode();
        if found == expected {
            Ok(())
        } else {
            Err(Error::WrongLogMode {
                op,
                expected,
                found,
            })
        }
    }

    /// The engine's own WAL, for `op`; [`Error::WrongLogMode`] in `External` log mode.
    pub(crate) fn own_wal(&self, op: &'static str) -> Result<&Wal> {
        match &self.wal {
            Some(wal) => Ok(wal),
            None => Err(Error::WrongLogMode {
                op,
                expected: LogMode::Internal,
                found: self.log_mode(),
            }),
        }
    }

    /// Whether this engine leads the shard (`External` log mode; see `Engine::set_leader`).
    pub(crate) fn is_leader(&self, shard_id: u64) -> bool {
        self.leaders.read().contains(&shard_id)
    }

    /// Whether the background jobs (flush, compaction) work on the shard: always with the
    /// engine's own log; with an external one only on a leader that has a sink to propose to.
    /// Followers apply the leader's results instead.
    pub(crate) fn runs_jobs(&self, shard_id: u64) -> bool {
        match self.log_mode() {
            LogMode::Internal => true,
            LogMode::External => self.is_leader(shard_id) && self.sink.read().is_some(),
        }
    }

    /// How file GC records the files an apply of the shard's ChangeSet `sequence` retires.
    /// With the engine's own log, none: a retired file is deleted once no shard here names it
    /// and no snapshot here holds it. With an external (Raft) log, the sequence is the entry's
    /// log index, the same on every replica, and a retired file also waits until no replica
    /// of the region needs it (the region's group index reached that index, `file_gc`): a
    /// follower that has not applied the entry still names the file, and one serving a read
    /// may hold a snapshot of it.
    ///
    /// `files` is the shard's file list the retired files come from: the retirement records
    /// its range and the key range of each file it names (`file_gc`, "Replicas that moved").
    pub(crate) fn retirement(
        &self,
        files: &changeset::ShardFiles,
        sequence: u64,
    ) -> Option<Retirement> {
        match self.log_mode() {
            LogMode::Internal => None,
            LogMode::External => Some(Retirement {
                shard_id: files.id(),
                index: sequence,
                start: files.start().clone(),
                end: files.end().clone(),
            }),
        }
    }

    pub(crate) fn compaction_offload(&self) -> Option<Arc<dyn CompactionOffload>> {
        self.offload.read().clone()
    }

    pub(crate) fn set_change_set_sink(&self, sink: Arc<dyn ChangeSetSink>) {
        *self.sink.write() = Some(sink);
    }

    /// The installed sink; a leader without one cannot propose (a configuration error).
    pub(crate) fn change_set_sink(&self, shard_id: u64) -> Result<Arc<dyn ChangeSetSink>> {
        self.sink.read().clone().ok_or_else(|| Error::Config {
            what: format!(
                "external log mode needs a change set sink before a leader can propose: shard_id={shard_id}"
            ),
        })
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if let Some(reason) = self.failure.lock().clone() {
            return Err(Error::Closed { reason });
        }
        if self.is_closed() {
            return Err(Error::Closed {
                reason: "engine closed".into(),
            });
        }
        Ok(())
    }

    /// Wakes everyone waiting for a flush to finish.
    pub(crate) fn notify_flushed(&self) {
        let _g = self.flushed.lock();
        self.flushed_cv.notify_all();
    }

    /// Stops the background threads and waits for them.
    fn shutdown(&self) {
        self.closed.store(true, Ordering::Release);
        self.queue_cv.notify_all();
        let threads = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
    }

    fn spawn(self: &Arc<Self>, name: String, job: fn(&Arc<Inner>)) -> Result<()> {
        let inner = self.clone();
        let handle = std::thread::Builder::new()
            .name(name)
            .spawn(move || job(&inner))
            .map_err(Error::io("spawn background thread", "-"))?;
        self.threads.lock().push(handle);
        Ok(())
    }
}

impl Engine {
    /// Opens (or creates) the engine in `opts.dir`, with SST files in `dfs`: every shard is
    /// rebuilt from the manifest and the WAL (see `recovery`; no WAL in `External` log mode),
    /// then the flush and compaction threads start.
    pub fn open(opts: EngineOptions, dfs: Arc<dyn Dfs>) -> Result<Engine> {
        opts.validate()?;
        std::fs::create_dir_all(&opts.dir).map_err(Error::io("create dir", &opts.dir))?;
        let dir_lock = lock_dir(&opts.dir)?;
        let manifest = Manifest::open(ManifestOptions {
            dir: opts.dir.join("manifest"),
            rewrite_after: opts.manifest_rewrite_after,
        })?;
        let ids = IdAllocator::open(&opts.dir.join("manifest"), opts.node_id)?;
        let block_cache: Option<Arc<dyn sst::BlockCache>> = match opts.block_cache_size {
            0 => None,
            size => Some(Arc::new(
                MokaBlockCache::with_read_ahead(size, opts.read_ahead).map_err(|e| {
                    Error::Config {
                        what: e.to_string(),
                    }
                })?,
            )),
        };
        let source = TableSource {
            dfs: dfs.as_ref(),
            block_cache: block_cache.as_ref(),
        };
        let recovered = recovery::recover(&opts, &manifest, source)?;
        crate::metrics::register_compaction();
        let mut file_gc = FileGc::opened(
            opts.log_mode == LogMode::External,
            recovered
                .shards
                .iter()
                .map(|(id, shard)| (*id, shard.data.load().meta_seq())),
        );
        file_gc.doomed = crate::compaction_exec::recover_intents(&opts.dir);
        let inner = Arc::new(Inner {
            opts,
            dfs,
            wal: recovered.wal,
            manifest,
            ids,
            shards: RwLock::new(recovered.shards),
            queue: Mutex::new(recovered.to_flush.into()),
            queue_cv: Condvar::new(),
            flushed: Mutex::new(()),
            flushed_cv: Condvar::new(),
            closed: AtomicBool::new(false),
            failure: Mutex::new(None),
            threads: Mutex::new(Vec::new()),
            file_gc: Mutex::new(file_gc),
            block_cache,
            gc_safe_point: AtomicU64::new(0),
            leaders: RwLock::new(HashSet::new()),
            sink: RwLock::new(None),
            offload: RwLock::new(None),
            _dir_lock: dir_lock,
        });
        let engine = Engine {
            _shutdown: Arc::new(ShutdownOnDrop(inner.clone())),
            inner,
        };
        for i in 0..engine.inner.opts.flush_threads {
            engine
                .inner
                .spawn(format!("stratus-flush-{i}"), flush::flush_loop)?;
        }
        for i in 0..engine.inner.opts.compaction_threads {
            engine.inner.spawn(
                format!("stratus-compact-{i}"),
                compaction_job::compaction_loop,
            )?;
        }
        Ok(engine)
    }

    /// Creates an empty shard owning `[start, end)` (empty `end` = unbounded).
    pub fn create_shard(&self, id: u64, start: &[u8], end: &[u8]) -> Result<()> {
        let files = ShardFiles::new(
            id,
            1,
            Bytes::copy_from_slice(start),
            Bytes::copy_from_slice(end),
            0,
        );
        self.insert_new_shard(files)
    }

    /// Creates an empty shard owning `[start, end)` whose log starts after `index`: its
    /// `data_sequence`, `write_sequence` and `meta_seq` are `index`, so the first entry it
    /// applies is `index + 1`. For a log kept outside the engine that does not start at 1 (a
    /// Raft group bootstraps at a fixed initial index on every replica).
    pub fn create_shard_at(&self, id: u64, start: &[u8], end: &[u8], index: u64) -> Result<()> {
        let snapshot = changeset::Snapshot {
            start: Bytes::copy_from_slice(start),
            end: Bytes::copy_from_slice(end),
            base_version: 0,
            data_sequence: index,
            l0_creates: Vec::new(),
            table_creates: Vec::new(),
        };
        self.insert_new_shard(ShardFiles::from_snapshot(id, 1, index, &snapshot)?)
    }

    /// Removes shard `id` from this engine: its Raft replica left this server. The manifest
    /// records the removal first (a crash after it replays without the shard); the shard's
    /// files stay in the object store, where the region's other replicas read them (file GC
    /// deletes only what regions here retired, `file_gc`). Waits for a flush or compaction
    /// of the shard in progress (they hold its `meta` lock); their results find no shard.
    pub fn destroy_shard(&self, id: u64) -> Result<()> {
        let shard = self.shard(id)?;
        let _meta = shard.meta.lock();
        self.inner.manifest.destroy_shard(id)?;
        self.inner.shards.write().remove(&id);
        self.inner.leaders.write().remove(&id);
        Ok(())
    }

    pub(crate) fn insert_new_shard(&self, files: ShardFiles) -> Result<()> {
        let id = files.id();
        let mut shards = self.inner.shards.write();
        if shards.contains_key(&id) {
            return Err(Error::ShardExists { shard_id: id });
        }
        self.inner.manifest.create_shard(&files)?;
        let data = ShardData::derive(files, &OpenTables::default(), self.inner.table_source())?;
        let write_sequence = data.data_sequence();
        shards.insert(id, Arc::new(Shard::new(id, write_sequence, data)));
        Ok(())
    }

    pub fn shard_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.inner.shards.read().keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    pub(crate) fn shard(&self, id: u64) -> Result<Arc<Shard>> {
        self.inner.shard(id)
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        self.inner.check_open()
    }

    /// An O(1) consistent snapshot of the shard.
    pub fn snapshot(&self, shard_id: u64) -> Result<SnapAccess> {
        let shard = self.shard(shard_id)?;
        // Sequence first: the data loaded after it holds every write up to it.
        let seq = shard.write_sequence.load(Ordering::Acquire);
        Ok(SnapAccess::new(shard_id, shard.data.load_full(), seq))
    }

    /// The version of `key` visible at `ts` in the shard's current state, or `None` if absent
    /// or deleted: [`SnapAccess::get`] without taking a snapshot, for a point read that needs
    /// no second read at the same state. A snapshot costs two reference counts and a shard
    /// lookup that outlive the read; here the shard map's read lock and the state's guard are
    /// held for the read alone (a third of a missing key's read in `vs-fjall`). A key outside
    /// the shard's range is an error.
    pub fn get(
        &self,
        shard_id: u64,
        cf: memtable::ColumnFamily,
        key: &[u8],
        ts: u64,
    ) -> Result<Option<Item>> {
        let shards = self.inner.shards.read();
        let shard = shards
            .get(&shard_id)
            .ok_or(Error::ShardNotFound { shard_id })?;
        let data = shard.data.load();
        crate::snap_access::get_in(&data, shard_id, cf, key, ts)
    }

    pub fn shard_info(&self, shard_id: u64) -> Result<ShardInfo> {
        let shard = self.shard(shard_id)?;
        let seq = shard.write_sequence.load(Ordering::Acquire);
        let d = shard.data.load();
        Ok(ShardInfo {
            id: shard_id,
            ver: d.ver(),
            start: d.start().clone(),
            end: d.end().clone(),
            base_version: d.base_version(),
            write_sequence: seq,
            meta_seq: d.meta_seq(),
            data_sequence: d.data_sequence(),
            frozen_memtables: d.frozen.len(),
            l0_files: d.l0s.len(),
            level_files: d
                .levels
                .iter()
                .map(|cf| cf.iter().map(Vec::len).collect())
                .collect(),
            memtable_size: d.mem.size(),
        })
    }

    /// The file list the shard's live state was derived from. Equal to what the manifest
    /// holds for the shard, and to what replaying the manifest from disk rebuilds.
    pub fn shard_files(&self, shard_id: u64) -> Result<ShardFiles> {
        let shard = self.shard(shard_id)?;
        let d = shard.data.load();
        Ok(d.files().clone())
    }

    /// Every file id the shard's live state has open, L0 and level tables.
    pub fn shard_table_ids(&self, shard_id: u64) -> Result<std::collections::BTreeSet<u64>> {
        let shard = self.shard(shard_id)?;
        let d = shard.data.load();
        Ok(d.table_ids())
    }

    /// Raises the GC safe point: compactions may then drop versions that no read at or above
    /// `ts` can see. It never moves back.
    /// Installs where the compactions this engine runs may go instead of running here
    /// (`compaction_exec`; the server's workers). Replaces an earlier one.
    pub fn set_compaction_offload(&self, offload: Arc<dyn CompactionOffload>) {
        *self.inner.offload.write() = Some(offload);
    }

    pub fn set_gc_safe_point(&self, ts: u64) {
        self.inner.gc_safe_point.fetch_max(ts, Ordering::AcqRel);
    }

    pub fn gc_safe_point(&self) -> u64 {
        self.inner.gc_safe_point.load(Ordering::Acquire)
    }

    /// WAL segments currently on disk (none in `External` log mode).
    pub fn wal_segments(&self) -> usize {
        self.inner.wal.as_ref().map_or(0, Wal::segment_count)
    }

    /// The WAL's counters since open (none in `External` log mode).
    pub fn wal_stats(&self) -> Option<crate::wal::WalStats> {
        self.inner.wal.as_ref().map(Wal::stats)
    }

    /// Refreshes gauges that mirror counters kept elsewhere (WAL stats). Call before scraping.
    pub fn update_metrics(&self) {
        if let Some(wal) = &self.inner.wal {
            let s = wal.stats();
            metrics::WAL_BYTES.set(s.bytes_written as i64);
            metrics::WAL_FSYNCS.set(s.fsyncs as i64);
        }
    }

    /// Stops the flush threads. With `flush`, first flushes every memtable so a restart has no
    /// WAL to replay. In `External` log mode only the shards this engine leads are flushed
    /// (through their log, which must still be applying); the others are their leaders' job.
    /// Writes after close fail.
    pub fn close(&self, flush: bool) -> Result<()> {
        let mut flushed = Ok(());
        if flush {
            for id in self.shard_ids() {
                if self.inner.log_mode() == LogMode::Internal || self.inner.is_leader(id) {
                    flushed = self.flush_shard(id);
                    if flushed.is_err() {
                        break;
                    }
                }
            }
        }
        // Stop the threads even when a flush failed: nothing is lost (the log still holds the
        // writes), and the directory lock must be released.
        self.inner.shutdown();
        flushed
    }
}

fn lock_dir(dir: &std::path::Path) -> Result<std::fs::File> {
    let path = dir.join("LOCK");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(Error::io("open lock file", &path))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked { path }),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io("lock", &path)(e)),
    }
}
