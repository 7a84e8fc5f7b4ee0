//! The engine: shards, the write path, background flush, and recovery.
//!
//! Write path: a batch gets the next sequence of its shard, is appended to the WAL (durable per
//! the sync policy), applied to the active memtable, and only then acknowledged. The shard's
//! write lock covers exactly that; writers of different shards share only the WAL append (and,
//! with group commit, an fsync).
//!
//! Flush: a memtable over the size threshold is frozen (its version = the SnapVersion at that
//! moment) and queued; a flush thread builds an L0 file, puts it to the object store, records a
//! Flush ChangeSet in the manifest, swaps the shard's state, and purges WAL segments that every
//! shard has flushed past. If frozen memtables pile up past the limit, writers stall.
//!
//! Recovery: the manifest gives every shard's files and data_sequence; the WAL replays every
//! record after it. A gap in a shard's sequences is corruption: an acknowledged write is missing.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use changeset::{
    Change, ChangeSet, ColumnFamily, Compaction, Flush, L0Create, ShardFiles, TableCreate,
};
use memtable::Memtable;
use parking_lot::{Condvar, Mutex, RwLock};
use sst::{BuilderOptions, L0Table, Table};

use crate::block_cache::MokaBlockCache;
use crate::compaction::{self, CompactionConfig};
use crate::dfs::Dfs;
use crate::error::{Error, Result};
use crate::flush;
use crate::manifest::{IdAllocator, Manifest, ManifestOptions};
use crate::metrics;
use crate::options::EngineOptions;
use crate::shard::{FrozenMem, Shard, ShardData};
use crate::snap_access::SnapAccess;
use crate::wal::{Wal, WalOptions};
use crate::write_batch::WriteBatch;

impl ShardInfo {
    /// `base_version + write_sequence`: the shard's data version.
    pub fn snap_version(&self) -> u64 {
        self.base_version + self.write_sequence
    }
}

/// What `Engine::shard_info` reports.
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

#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
    /// Shared by every clone of this handle (not by the flush threads): when the last clone is
    /// dropped, the engine shuts down and releases its directory.
    _shutdown: Arc<ShutdownOnDrop>,
}

struct ShutdownOnDrop(Arc<Inner>);

impl Drop for ShutdownOnDrop {
    fn drop(&mut self) {
        shutdown(&self.0);
    }
}

/// Stops the flush threads and waits for them.
fn shutdown(inner: &Inner) {
    inner.closed.store(true, Ordering::Release);
    inner.queue_cv.notify_all();
    let threads = std::mem::take(&mut *inner.threads.lock());
    for t in threads {
        let _ = t.join();
    }
}

struct Inner {
    opts: EngineOptions,
    dfs: Arc<dyn Dfs>,
    wal: Wal,
    manifest: Manifest,
    ids: IdAllocator,
    shards: RwLock<HashMap<u64, Arc<Shard>>>,
    /// Shards with a frozen memtable to flush.
    queue: Mutex<VecDeque<u64>>,
    queue_cv: Condvar,
    /// Signalled whenever a flush finishes (stalled writers and `flush_shard` wait on it).
    flushed: Mutex<()>,
    flushed_cv: Condvar,
    closed: AtomicBool,
    /// Set when a background job failed in a way that makes further writes unsafe.
    failure: Mutex<Option<String>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Files replaced by a compaction, deleted from the object store once no snapshot holds
    /// them and no shard references them.
    pending_deletes: Mutex<Vec<PendingFile>>,
    /// Decompressed blocks of compressed tables, shared by every table of the engine.
    block_cache: Option<Arc<dyn sst::BlockCache>>,
    /// Versions at or below this timestamp keep only their newest (see `compaction`).
    gc_safe_point: AtomicU64,
    /// An exclusive lock on `dir/LOCK`, held while the engine is open: two engines on one
    /// directory would interleave their WAL and manifest writes.
    _dir_lock: std::fs::File,
}

impl Engine {
    /// Opens (or creates) the engine in `opts.dir`, with SST files in `dfs`.
    pub fn open(opts: EngineOptions, dfs: Arc<dyn Dfs>) -> Result<Engine> {
        opts.validate()?;
        std::fs::create_dir_all(&opts.dir).map_err(Error::io("create dir", &opts.dir))?;
        let dir_lock = lock_dir(&opts.dir)?;
        let manifest = Manifest::open(ManifestOptions {
            dir: opts.dir.join("manifest"),
            rewrite_after: opts.manifest_rewrite_after,
        })?;
        let ids = IdAllocator::open(&opts.dir.join("manifest"), opts.node_id)?;
        let block_cache: Option<Arc<dyn sst::BlockCache>> =
            (opts.block_cache_size > 0).then(|| {
                Arc::new(MokaBlockCache::new(opts.block_cache_size)) as Arc<dyn sst::BlockCache>
            });
        let mut shards = HashMap::new();
        for files in manifest.shards() {
            let data = open_shard_files(&files, dfs.as_ref(), block_cache.as_ref())?;
            shards.insert(
                files.id(),
                Arc::new(Shard::new(files.id(), files.data_sequence(), data)),
            );
        }
        let wal = Wal::open(
            WalOptions {
                dir: opts.dir.join("wal"),
                segment_size: opts.wal_segment_size,
                sync: opts.wal_sync,
            },
            |rec| replay_record(&shards, &opts, rec.shard_id, rec.sequence, &rec.payload),
        )?;
        let inner = Arc::new(Inner {
            opts,
            dfs,
            wal,
            manifest,
            ids,
            shards: RwLock::new(shards),
            queue: Mutex::new(VecDeque::new()),
            queue_cv: Condvar::new(),
            flushed: Mutex::new(()),
            flushed_cv: Condvar::new(),
            closed: AtomicBool::new(false),
            failure: Mutex::new(None),
            threads: Mutex::new(Vec::new()),
            pending_deletes: Mutex::new(Vec::new()),
            block_cache,
            gc_safe_point: AtomicU64::new(0),
            _dir_lock: dir_lock,
        });
        let engine = Engine {
            _shutdown: Arc::new(ShutdownOnDrop(inner.clone())),
            inner,
        };
        // Memtables frozen during replay wait for the flush threads.
        for (id, shard) in engine.inner.shards.read().iter() {
            if !shard.data.load().frozen.is_empty() {
                engine.inner.queue.lock().push_back(*id);
            }
        }
        for i in 0..engine.inner.opts.flush_threads {
            let inner = engine.inner.clone();
            let h = std::thread::Builder::new()
                .name(format!("stratus-flush-{i}"))
                .spawn(move || flush_loop(&inner))
                .map_err(Error::io("spawn flush thread", "-"))?;
            engine.inner.threads.lock().push(h);
        }
        for i in 0..engine.inner.opts.compaction_threads {
            let inner = engine.inner.clone();
            let h = std::thread::Builder::new()
                .name(format!("stratus-compact-{i}"))
                .spawn(move || compaction_loop(&inner))
                .map_err(Error::io("spawn compaction thread", "-"))?;
            engine.inner.threads.lock().push(h);
        }
        Ok(engine)
    }

    /// Creates an empty shard owning `[start, end)` (empty `end` = unbounded).
    pub fn create_shard(&self, id: u64, start: &[u8], end: &[u8]) -> Result<()> {
        let mut shards = self.inner.shards.write();
        if shards.contains_key(&id) {
            return Err(Error::Config {
                what: format!("shard already exists: shard_id={id}"),
            });
        }
        let files = ShardFiles::new(
            id,
            1,
            Bytes::copy_from_slice(start),
            Bytes::copy_from_slice(end),
            0,
        );
        self.inner.manifest.create_shard(&files)?;
        let data = open_shard_files(
            &files,
            self.inner.dfs.as_ref(),
            self.inner.block_cache.as_ref(),
        )?;
        shards.insert(id, Arc::new(Shard::new(id, 0, data)));
        Ok(())
    }

    pub fn shard_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.inner.shards.read().keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    fn shard(&self, id: u64) -> Result<Arc<Shard>> {
        self.inner
            .shards
            .read()
            .get(&id)
            .cloned()
            .ok_or(Error::ShardNotFound { shard_id: id })
    }

    fn check_open(&self) -> Result<()> {
        if let Some(reason) = self.inner.failure.lock().clone() {
            return Err(Error::Closed { reason });
        }
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed {
                reason: "engine closed".into(),
            });
        }
        Ok(())
    }

    /// Applies `batch` to shard `shard_id` durably; returns its sequence.
    pub fn write(&self, shard_id: u64, batch: &WriteBatch) -> Result<u64> {
        self.check_open()?;
        let shard = self.shard(shard_id)?;
        {
            let data = shard.data.load();
            if let Some(op) = batch.ops().iter().find(|op| !data.contains_key(&op.key)) {
                return Err(Error::KeyNotInShard {
                    shard_id,
                    key: op.key.clone(),
                });
            }
        }
        self.wait_for_flush_room(&shard)?;
        let payload = batch.encode();
        let _w = shard.write.lock();
        if shard.splitting.load(Ordering::Acquire) {
            return Err(Error::ShardBusy {
                shard_id,
                reason: "splitting",
            });
        }
        let seq = shard.write_sequence.load(Ordering::Relaxed) + 1;
        if let Err(e) = self.inner.wal.append(shard_id, seq, &payload) {
            // The WAL's state is unknown: refuse every later write rather than risk a gap.
            *self.inner.failure.lock() = Some(format!("wal append failed: {e}"));
            return Err(e);
        }
        let data = shard.data.load_full();
        apply_batch(&data.mem, batch, data.base_version + seq);
        shard.write_sequence.store(seq, Ordering::Release);
        metrics::WRITES.inc();
        metrics::WRITE_BYTES.inc_by(payload.len() as u64);
        if data.mem.size() >= self.inner.opts.memtable_size {
            self.freeze_locked(&shard, seq);
        }
        Ok(seq)
    }

    /// Waits while the shard's frozen-memtable queue is full.
    fn wait_for_flush_room(&self, shard: &Shard) -> Result<()> {
        let limit = self.inner.opts.max_frozen_memtables;
        if shard.data.load().frozen.len() < limit {
            return Ok(());
        }
        metrics::STALLS.inc();
        let mut g = self.inner.flushed.lock();
        while shard.data.load().frozen.len() >= limit {
            self.check_open()?;
            self.inner
                .flushed_cv
                .wait_for(&mut g, Duration::from_millis(100));
        }
        Ok(())
    }

    /// Freezes the active memtable. Caller holds the shard's write lock.
    fn freeze_locked(&self, shard: &Shard, seq: u64) {
        let cur = shard.data.load_full();
        if cur.mem.is_empty() {
            return;
        }
        shard.data.store(Arc::new(frozen_state(&cur, seq)));
        // Later records go to a new segment, so this memtable's segment can be purged after
        // its flush. A failed roll only delays the purge.
        if let Err(e) = self.inner.wal.roll() {
            tracing::warn!(error = %e, "wal roll failed");
        }
        self.inner.queue.lock().push_back(shard.id);
        self.inner.queue_cv.notify_one();
    }

    /// Freezes the shard's active memtable (if not empty) and waits until every frozen memtable
    /// of the shard is flushed.
    pub fn flush_shard(&self, shard_id: u64) -> Result<()> {
        self.check_open()?;
        let shard = self.shard(shard_id)?;
        {
            let _w = shard.write.lock();
            let seq = shard.write_sequence.load(Ordering::Relaxed);
            self.freeze_locked(&shard, seq);
        }
        let mut g = self.inner.flushed.lock();
        while !shard.data.load().frozen.is_empty() {
            self.check_open()?;
            self.inner
                .flushed_cv
                .wait_for(&mut g, Duration::from_millis(50));
        }
        Ok(())
    }

    /// An O(1) consistent snapshot of the shard.
    pub fn snapshot(&self, shard_id: u64) -> Result<SnapAccess> {
        let shard = self.shard(shard_id)?;
        // Sequence first: the data loaded after it holds every write up to it.
        let seq = shard.write_sequence.load(Ordering::Acquire);
        Ok(SnapAccess::new(shard_id, shard.data.load_full(), seq))
    }

    pub fn shard_info(&self, shard_id: u64) -> Result<ShardInfo> {
        let shard = self.shard(shard_id)?;
        let seq = shard.write_sequence.load(Ordering::Acquire);
        let d = shard.data.load();
        Ok(ShardInfo {
            id: shard_id,
            ver: d.ver,
            start: d.start.clone(),
            end: d.end.clone(),
            base_version: d.base_version,
            write_sequence: seq,
            meta_seq: d.meta_seq,
            data_sequence: d.data_sequence,
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

    /// Splits shard `shard_id` at `key` into `left_id` = `[start, key)` and `right_id` =
    /// `[key, end)`. The shard is flushed first (writes are refused meanwhile with
    /// `ShardBusy`), so the children start with every row in files they share with the parent;
    /// reads clip to each child's range and compaction rewrites the shared files per child.
    /// Both children get `ver + 1` and a base_version above the parent's SnapVersion, so their
    /// data versions never repeat one the parent handed out.
    pub fn split(&self, shard_id: u64, key: &[u8], left_id: u64, right_id: u64) -> Result<()> {
        self.check_open()?;
        let shard = self.shard(shard_id)?;
        {
            let d = shard.data.load();
            if key <= d.start.as_ref() || (!d.end.is_empty() && key >= d.end.as_ref()) {
                return Err(Error::InvalidArgument {
                    what: format!(
                        "split key must be strictly inside the shard range: shard_id={shard_id} key={key:?}"
                    ),
                });
            }
        }
        if left_id == right_id {
            return Err(Error::InvalidArgument {
                what: format!("split children need two ids, found={left_id} twice"),
            });
        }
        {
            let shards = self.inner.shards.read();
            for id in [left_id, right_id] {
                if id != shard_id && shards.contains_key(&id) {
                    return Err(Error::ShardExists { shard_id: id });
                }
            }
        }
        if shard.splitting.swap(true, Ordering::AcqRel) {
            return Err(Error::ShardBusy {
                shard_id,
                reason: "already splitting",
            });
        }
        let r = self.split_flushed(&shard, key, left_id, right_id);
        if r.is_err() {
            shard.splitting.store(false, Ordering::Release);
        }
        r
    }

    fn split_flushed(&self, shard: &Shard, key: &[u8], left_id: u64, right_id: u64) -> Result<()> {
        let _c = shard.compacting.lock();
        loop {
            self.flush_shard(shard.id)?;
            let _m = shard.meta.lock();
            let _w = shard.write.lock();
            let cur = shard.data.load_full();
            let ws = shard.write_sequence.load(Ordering::Acquire);
            // A write that passed the splitting check before the flag was set may have landed
            // after the flush: flush again.
            if !cur.frozen.is_empty() || !cur.mem.is_empty() || cur.data_sequence != ws {
                continue;
            }
            let base_version = cur.base_version + ws + 1;
            let child = |id, start: &Bytes, end: &Bytes| changeset::ShardSplitInfo {
                id,
                start: start.clone(),
                end: end.clone(),
                base_version,
            };
            let key = Bytes::copy_from_slice(key);
            let cs = ChangeSet {
                shard_id: shard.id,
                shard_ver: cur.ver,
                sequence: cur.meta_seq + 1,
                properties: Default::default(),
                change: Some(Change::Split(changeset::Split {
                    new_shards: vec![
                        child(left_id, &cur.start, &key),
                        child(right_id, &key, &cur.end),
                    ],
                })),
            };
            let changeset::Applied::Split(children) = self.inner.manifest.record(&cs)? else {
                return Err(Error::Corruption {
                    what: "manifest",
                    detail: format!("split was not applied as a split: shard_id={}", shard.id),
                    path: self.inner.manifest.path().to_path_buf(),
                    offset: 0,
                });
            };
            let mut shards = self.inner.shards.write();
            shards.remove(&shard.id);
            for files in children {
                let l0s = cur
                    .l0s
                    .iter()
                    .filter(|t| files.l0s().iter().any(|f| f.id == t.file_id()))
                    .cloned()
                    .collect();
                let mut levels: [Vec<Vec<Table>>; ColumnFamily::COUNT] = Default::default();
                for (c, cf) in [ColumnFamily::Write, ColumnFamily::Lock, ColumnFamily::Extra]
                    .into_iter()
                    .enumerate()
                {
                    for (i, lvl) in cur.levels[c].iter().enumerate() {
                        let keep = files.level(cf, i as u32 + 1);
                        levels[c].push(
                            lvl.iter()
                                .filter(|t| keep.iter().any(|f| f.id == t.file_id()))
                                .cloned()
                                .collect(),
                        );
                    }
                }
                let data = ShardData::from_files(&files, l0s, levels);
                shards.insert(
                    files.id(),
                    Arc::new(Shard::new(files.id(), files.data_sequence(), data)),
                );
            }
            return Ok(());
        }
    }

    /// Raises the GC safe point: compactions may then drop versions that no read at or above
    /// `ts` can see. It never moves back.
    pub fn set_gc_safe_point(&self, ts: u64) {
        self.inner.gc_safe_point.fetch_max(ts, Ordering::AcqRel);
    }

    pub fn gc_safe_point(&self) -> u64 {
        self.inner.gc_safe_point.load(Ordering::Acquire)
    }

    /// Compacts the shard on the calling thread until no level needs it; with `force_l0`, the
    /// first round merges L0 into L1 even below its trigger. Returns the number of compactions.
    pub fn compact_shard(&self, shard_id: u64, force_l0: bool) -> Result<usize> {
        self.check_open()?;
        let shard = self.shard(shard_id)?;
        let mut n = 0;
        while compact_once(&self.inner, &shard, force_l0 && n == 0)? {
            n += 1;
        }
        gc_files(&self.inner);
        Ok(n)
    }

    /// Every file id the manifest references.
    pub fn live_file_ids(&self) -> std::collections::BTreeSet<u64> {
        self.inner.manifest.live_file_ids()
    }

    /// Replaced files still waiting for their last reader.
    pub fn pending_deletes(&self) -> usize {
        self.inner.pending_deletes.lock().len()
    }

    /// Deletes replaced files that no snapshot holds any more. Runs after every compaction and
    /// periodically in the background; exposed for tests and tools.
    pub fn collect_garbage(&self) {
        gc_files(&self.inner);
    }

    /// WAL segments currently on disk.
    pub fn wal_segments(&self) -> usize {
        self.inner.wal.segment_count()
    }

    /// Refreshes gauges that mirror counters kept elsewhere (WAL stats). Call before scraping.
    pub fn update_metrics(&self) {
        let s = self.inner.wal.stats();
        metrics::WAL_BYTES.set(s.bytes_written as i64);
        metrics::WAL_FSYNCS.set(s.fsyncs as i64);
    }

    /// Stops the flush threads. With `flush`, first flushes every memtable so a restart has no
    /// WAL to replay. Writes after close fail.
    pub fn close(&self, flush: bool) -> Result<()> {
        if flush {
            for id in self.shard_ids() {
                self.flush_shard(id)?;
            }
        }
        shutdown(&self.inner);
        Ok(())
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

/// The state after freezing `cur`'s active memtable, whose last write has sequence `seq`: the
/// memtable's version becomes the SnapVersion at that moment (the version of the L0 file it
/// will become) and a new empty memtable takes writes.
fn frozen_state(cur: &ShardData, seq: u64) -> ShardData {
    cur.mem.set_version(cur.base_version + seq);
    let mut next = cur.clone();
    next.frozen.insert(
        0,
        FrozenMem {
            mem: cur.mem.clone(),
            last_sequence: seq,
        },
    );
    next.mem = Arc::new(Memtable::new());
    next
}

/// Applies a batch to a memtable. LOCK-CF ops get `snap_version`; if a batch writes one lock
/// key twice, the last op wins.
fn apply_batch(mem: &Memtable, batch: &WriteBatch, snap_version: u64) {
    let ops = batch.ops();
    for (i, op) in ops.iter().enumerate() {
        let version = if op.cf == ColumnFamily::Lock {
            if ops[i + 1..]
                .iter()
                .any(|o| o.cf == ColumnFamily::Lock && o.key == op.key)
            {
                continue;
            }
            snap_version
        } else {
            op.version
        };
        match &op.value {
            Some(v) => mem.put(op.cf, &op.key, version, &op.user_meta, v),
            None => mem.delete(op.cf, &op.key, version, &op.user_meta),
        };
    }
}

fn replay_record(
    shards: &HashMap<u64, Arc<Shard>>,
    opts: &EngineOptions,
    shard_id: u64,
    sequence: u64,
    payload: &[u8],
) -> Result<()> {
    let corrupt = |detail: String| Error::Corruption {
        what: "wal replay",
        detail,
        path: opts.dir.join("wal"),
        offset: 0,
    };
    let Some(shard) = shards.get(&shard_id) else {
        // Shards are created in the manifest before their first write, so a shard the
        // manifest no longer has was retired by a split, after its data was flushed (a split
        // flushes first). Its records are covered; the CRC already vouched for the record.
        tracing::debug!(shard_id, sequence, "skipping wal record of a retired shard");
        return Ok(());
    };
    let data = shard.data.load_full();
    if sequence <= data.data_sequence {
        return Ok(());
    }
    let last = shard.write_sequence.load(Ordering::Relaxed);
    if sequence != last + 1 {
        return Err(corrupt(format!(
            "sequence gap: shard_id={shard_id} expected={} found={sequence}",
            last + 1
        )));
    }
    let batch = WriteBatch::decode(payload).map_err(|e| {
        corrupt(format!(
            "undecodable batch: shard_id={shard_id} sequence={sequence}: {e}"
        ))
    })?;
    apply_batch(&data.mem, &batch, data.base_version + sequence);
    shard.write_sequence.store(sequence, Ordering::Release);
    if data.mem.size() >= opts.memtable_size {
        shard.data.store(Arc::new(frozen_state(&data, sequence)));
    }
    Ok(())
}

fn open_table(id: u64, data: Bytes, cache: Option<&Arc<dyn sst::BlockCache>>) -> Result<Table> {
    Ok(match cache {
        Some(c) => Table::open_with_cache(id, data, c.clone())?,
        None => Table::open(id, data)?,
    })
}

/// Opens every file of a shard's file list from the object store (engine open, shard creation,
/// and a snapshot rebuilt on another process by [`SnapAccess::from_remote`]).
pub(crate) fn open_shard_files(
    files: &ShardFiles,
    dfs: &dyn Dfs,
    cache: Option<&Arc<dyn sst::BlockCache>>,
) -> Result<ShardData> {
    let mut l0s = Vec::with_capacity(files.l0s().len());
    for f in files.l0s() {
        l0s.push(L0Table::open_with(f.id, dfs.get(f.id)?, cache.cloned())?);
    }
    let mut levels: [Vec<Vec<Table>>; ColumnFamily::COUNT] = Default::default();
    for cf in [ColumnFamily::Write, ColumnFamily::Lock, ColumnFamily::Extra] {
        for level in 1..=changeset::MAX_LEVEL {
            let metas = files.level(cf, level);
            let mut tables = Vec::with_capacity(metas.len());
            for f in metas {
                tables.push(open_table(f.id, dfs.get(f.id)?, cache)?);
            }
            if !tables.is_empty() {
                levels[cf.index()].resize_with(level as usize, Vec::new);
                levels[cf.index()][level as usize - 1] = tables;
            }
        }
    }
    Ok(ShardData::from_files(files, l0s, levels))
}

/// A replaced file waiting for deletion; holds a handle so its reader count can be checked.
pub(crate) enum PendingFile {
    L0(L0Table),
    Table(Table),
}

impl PendingFile {
    fn id(&self) -> u64 {
        match self {
            PendingFile::L0(t) => t.file_id(),
            PendingFile::Table(t) => t.file_id(),
        }
    }

    /// True when only this pending entry still holds the file.
    fn unused(&self) -> bool {
        match self {
            PendingFile::L0(t) => t.handle_count() == 1,
            PendingFile::Table(t) => t.handle_count() == 1,
        }
    }
}

fn gc_files(inner: &Inner) {
    let mut pending = inner.pending_deletes.lock();
    if pending.is_empty() {
        return;
    }
    let live = inner.manifest.live_file_ids();
    pending.retain(|f| {
        if !f.unused() || live.contains(&f.id()) {
            return true;
        }
        match inner.dfs.delete(f.id()) {
            Ok(()) => false,
            Err(e) => {
                tracing::warn!(file_id = f.id(), error = %e, "delete of a replaced file failed; will retry");
                true
            }
        }
    });
}

fn compaction_config(o: &EngineOptions) -> CompactionConfig {
    CompactionConfig {
        l0_compaction_files: o.l0_compaction_files,
        l0_compaction_bytes: o.l0_compaction_bytes,
        base_level_size: o.base_level_size,
        target_file_size: o.target_file_size,
        max_level: o.max_level,
    }
}

/// Runs one compaction of the shard if one is due. Returns whether it compacted.
fn compact_once(inner: &Inner, shard: &Shard, force_l0: bool) -> Result<bool> {
    let _c = shard.compacting.lock();
    let data = shard.data.load_full();
    let Some(plan) = compaction::pick(&data, &compaction_config(&inner.opts), force_l0) else {
        return Ok(false);
    };
    let safe_point = inner.gc_safe_point.load(Ordering::Acquire);
    let out_level = plan.level + 1;
    let opts = BuilderOptions {
        block_size: inner.opts.block_size,
        compression: inner.opts.level_compression,
        filter_bits_per_key: 10,
    };
    let mut creates = Vec::new();
    let mut outputs: [Vec<Table>; ColumnFamily::COUNT] = Default::default();
    for cf in ColumnFamily::ALL {
        let c = cf.index();
        if plan.inputs[c].is_empty() {
            continue;
        }
        let built = compaction::merge(
            &plan.inputs[c],
            (&plan.start, &plan.end),
            cf,
            safe_point,
            plan.bottommost[c],
            &opts,
            inner.opts.target_file_size,
        )?;
        for b in built {
            let id = inner.ids.next()?;
            let size = b.data.len() as u64;
            let (smallest, biggest) = (b.properties.smallest.clone(), b.properties.biggest.clone());
            inner.dfs.put(id, Bytes::from(b.data))?;
            outputs[c].push(open_table(
                id,
                inner.dfs.get(id)?,
                inner.block_cache.as_ref(),
            )?);
            creates.push(TableCreate {
                id,
                level: out_level,
                cf: c as u32,
                smallest: Bytes::from(smallest),
                biggest: Bytes::from(biggest),
                size,
            });
        }
    }
    let created: Vec<u64> = creates.iter().map(|c| c.id).collect();
    let change = Change::Compaction(Compaction {
        cf: plan.cf.map_or(0, |c| c.index() as u32),
        level: plan.level,
        top_deletes: plan.top.clone(),
        bottom_deletes: plan.bottom.clone(),
        table_creates: creates,
        conflicted: false,
    });
    let applied = commit_change(inner, shard, change, |next| {
        let mut removed = Vec::new();
        if plan.level == 0 {
            next.l0s.retain(|f| {
                let gone = plan.top.contains(&f.file_id());
                if gone {
                    removed.push(PendingFile::L0(f.clone()));
                }
                !gone
            });
        }
        for (c, out) in outputs.into_iter().enumerate() {
            let levels = &mut next.levels[c];
            if levels.len() < out_level as usize {
                levels.resize_with(out_level as usize, Vec::new);
            }
            for lvl in [plan.level, out_level] {
                if lvl == 0 {
                    continue;
                }
                levels[lvl as usize - 1].retain(|t| {
                    let gone =
                        plan.top.contains(&t.file_id()) || plan.bottom.contains(&t.file_id());
                    if gone {
                        removed.push(PendingFile::Table(t.clone()));
                    }
                    !gone
                });
            }
            let target = &mut levels[out_level as usize - 1];
            target.extend(out);
            target.sort_by(|a, b| a.properties().smallest.cmp(&b.properties().smallest));
        }
        removed
    })?;
    if !applied {
        // Another change replaced the inputs first: the outputs are garbage.
        for id in created {
            let _ = inner.dfs.delete(id);
        }
    } else {
        metrics::COMPACTIONS.inc();
    }
    Ok(applied)
}

fn compaction_loop(inner: &Arc<Inner>) {
    while !inner.closed.load(Ordering::Acquire) {
        let shards: Vec<Arc<Shard>> = inner.shards.read().values().cloned().collect();
        let mut worked = false;
        for shard in shards {
            if inner.closed.load(Ordering::Acquire) {
                return;
            }
            match compact_once(inner, &shard, false) {
                Ok(did) => worked |= did,
                Err(e) => tracing::warn!(shard_id = shard.id, error = %e, "compaction failed"),
            }
        }
        gc_files(inner);
        if !worked {
            // A finished flush is what usually makes a compaction due.
            let mut g = inner.flushed.lock();
            inner
                .flushed_cv
                .wait_for(&mut g, Duration::from_millis(200));
        }
    }
}

fn flush_loop(inner: &Arc<Inner>) {
    loop {
        let shard_id = {
            let mut q = inner.queue.lock();
            loop {
                if inner.closed.load(Ordering::Acquire) {
                    return;
                }
                if let Some(id) = q.pop_front() {
                    break id;
                }
                inner.queue_cv.wait_for(&mut q, Duration::from_millis(200));
            }
        };
        let mut attempt = 0u32;
        loop {
            match flush_one(inner, shard_id) {
                Ok(()) => {
                    // One queue entry flushes one memtable; WAL replay can freeze several
                    // without queueing each, so requeue while any is left.
                    let more = inner
                        .shards
                        .read()
                        .get(&shard_id)
                        .is_some_and(|s| !s.data.load().frozen.is_empty());
                    if more {
                        inner.queue.lock().push_back(shard_id);
                    }
                    break;
                }
                Err(e) => {
                    // The frozen memtable and its WAL records stay; retry with backoff.
                    attempt += 1;
                    tracing::warn!(shard_id, attempt, error = %e, "flush failed, retrying");
                    if inner.closed.load(Ordering::Acquire) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50 * u64::from(attempt.min(20))));
                }
            }
        }
        let _g = inner.flushed.lock();
        inner.flushed_cv.notify_all();
    }
}

/// Records `change` in the manifest as the shard's next ChangeSet and, if it applied, swaps in
/// the state `apply` derives from the current one. `apply` returns the files it removed, which
/// wait in the pending-delete list until no snapshot holds them. Returns false if the manifest
/// found the change conflicted (nothing was applied).
fn commit_change(
    inner: &Inner,
    shard: &Shard,
    change: Change,
    apply: impl FnOnce(&mut ShardData) -> Vec<PendingFile>,
) -> Result<bool> {
    let _m = shard.meta.lock();
    let cur = shard.data.load_full();
    let cs = ChangeSet {
        shard_id: shard.id,
        shard_ver: cur.ver,
        sequence: cur.meta_seq + 1,
        properties: Default::default(),
        change: Some(change),
    };
    let applied = inner.manifest.record(&cs)?;
    if matches!(applied, changeset::Applied::Conflicted(_)) {
        return Ok(false);
    }
    let removed = {
        let _w = shard.write.lock();
        let mut next = (*shard.data.load_full()).clone();
        let removed = apply(&mut next);
        next.meta_seq = cs.sequence;
        shard.data.store(Arc::new(next));
        removed
    };
    inner.pending_deletes.lock().extend(removed);
    Ok(true)
}

/// Flushes the oldest frozen memtable of a shard (if any).
fn flush_one(inner: &Inner, shard_id: u64) -> Result<()> {
    let Some(shard) = inner.shards.read().get(&shard_id).cloned() else {
        return Ok(());
    };
    let _f = shard.flushing.lock();
    let data = shard.data.load_full();
    let Some(frozen) = data.frozen.last().cloned() else {
        return Ok(());
    };
    let opts = BuilderOptions {
        block_size: inner.opts.block_size,
        compression: inner.opts.l0_compression,
        filter_bits_per_key: 10,
    };
    let built = flush::build_l0(&frozen.mem, &opts)?;
    let (l0_create, l0_table) = match built {
        Some(b) => {
            let id = inner.ids.next()?;
            let size = b.data.len() as u64;
            inner.dfs.put(id, Bytes::from(b.data))?;
            metrics::FLUSH_BYTES.inc_by(size);
            let table = L0Table::open_with(id, inner.dfs.get(id)?, inner.block_cache.clone())?;
            let create = L0Create {
                id,
                smallest: Bytes::from(b.smallest),
                biggest: Bytes::from(b.biggest),
                size,
            };
            (Some(create), Some(table))
        }
        None => (None, None),
    };
    let change = Change::Flush(Flush {
        l0_create,
        data_sequence: frozen.last_sequence,
        version: frozen.mem.version(),
    });
    commit_change(inner, &shard, change, |next| {
        let pos = next
            .frozen
            .iter()
            .rposition(|f| Arc::ptr_eq(&f.mem, &frozen.mem))
            .expect("only this flush removes frozen memtables");
        next.frozen.remove(pos);
        if let Some(t) = l0_table {
            next.l0s.insert(0, t);
        }
        next.data_sequence = frozen.last_sequence;
        Vec::new()
    })?;
    metrics::FLUSHES.inc();
    let shards = inner.shards.read();
    // A shard that no longer exists was retired by a split after a full flush: covered.
    let covered = |sid: u64| {
        shards
            .get(&sid)
            .map_or(u64::MAX, |s| s.data.load().data_sequence)
    };
    if let Err(e) = inner.wal.purge(&covered) {
        tracing::warn!(error = %e, "wal purge failed");
    }
    Ok(())
}
