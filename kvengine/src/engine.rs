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
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use changeset::{Change, ChangeSet, ColumnFamily, Flush, L0Create, ShardFiles};
use memtable::{CF_COUNT, Cf, Memtable};
use parking_lot::{Condvar, Mutex, RwLock};
use sst::{BuilderOptions, L0Table, Table};

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
        let mut shards = HashMap::new();
        for files in manifest.shards() {
            let data = open_shard_files(&files, dfs.as_ref())?;
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
        let data = open_shard_files(&files, self.inner.dfs.as_ref())?;
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
        cur.mem.set_version(cur.base_version + seq);
        let mut next = (*cur).clone();
        next.frozen.insert(
            0,
            FrozenMem {
                mem: cur.mem.clone(),
                last_sequence: seq,
            },
        );
        next.mem = Arc::new(Memtable::new());
        shard.data.store(Arc::new(next));
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
            memtable_size: d.mem.size(),
        })
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

/// Applies a batch to a memtable. LOCK-CF ops get `snap_version`; if a batch writes one lock
/// key twice, the last op wins.
fn apply_batch(mem: &Memtable, batch: &WriteBatch, snap_version: u64) {
    let ops = batch.ops();
    for (i, op) in ops.iter().enumerate() {
        let version = if op.cf == Cf::Lock {
            if ops[i + 1..]
                .iter()
                .any(|o| o.cf == Cf::Lock && o.key == op.key)
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
        return Err(corrupt(format!(
            "record for an unknown shard: shard_id={shard_id} sequence={sequence}"
        )));
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
        data.mem.set_version(data.base_version + sequence);
        let mut next = (*data).clone();
        next.frozen.insert(
            0,
            FrozenMem {
                mem: data.mem.clone(),
                last_sequence: sequence,
            },
        );
        next.mem = Arc::new(Memtable::new());
        shard.data.store(Arc::new(next));
    }
    Ok(())
}

/// Opens every file of a shard's file list from the object store.
fn open_shard_files(files: &ShardFiles, dfs: &dyn Dfs) -> Result<ShardData> {
    let mut l0s = Vec::with_capacity(files.l0s().len());
    for f in files.l0s() {
        l0s.push(L0Table::open(f.id, dfs.get(f.id)?)?);
    }
    let mut levels: [Vec<Vec<Table>>; CF_COUNT] = Default::default();
    for cf in [ColumnFamily::Write, ColumnFamily::Lock, ColumnFamily::Extra] {
        for level in 1..=changeset::MAX_LEVEL {
            let metas = files.level(cf, level);
            let mut tables = Vec::with_capacity(metas.len());
            for f in metas {
                tables.push(Table::open(f.id, dfs.get(f.id)?)?);
            }
            if !tables.is_empty() {
                levels[cf.index()].resize_with(level as usize, Vec::new);
                levels[cf.index()][level as usize - 1] = tables;
            }
        }
    }
    Ok(ShardData {
        ver: files.ver(),
        start: files.start().clone(),
        end: files.end().clone(),
        base_version: files.base_version(),
        meta_seq: files.meta_seq(),
        data_sequence: files.data_sequence(),
        mem: Arc::new(Memtable::new()),
        frozen: Vec::new(),
        l0s,
        levels,
    })
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
                Ok(()) => break,
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
            let table = L0Table::open(id, inner.dfs.get(id)?)?;
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
    let cs = ChangeSet {
        shard_id,
        shard_ver: data.ver,
        sequence: data.meta_seq + 1,
        properties: Default::default(),
        change: Some(Change::Flush(Flush {
            l0_create,
            data_sequence: frozen.last_sequence,
            version: frozen.mem.version(),
        })),
    };
    inner.manifest.record(&cs)?;
    {
        let _w = shard.write.lock();
        let cur = shard.data.load_full();
        let mut next = (*cur).clone();
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
        next.meta_seq = cs.sequence;
        shard.data.store(Arc::new(next));
    }
    metrics::FLUSHES.inc();
    let shards = inner.shards.read();
    let covered = |sid: u64| shards.get(&sid).map_or(0, |s| s.data.load().data_sequence);
    if let Err(e) = inner.wal.purge(&covered) {
        tracing::warn!(error = %e, "wal purge failed");
    }
    Ok(())
}
