//! cachefs: a local directory of whole files in front of the object store, with a byte budget
//! and least-recently-used eviction.
//!
//! A cached file is named `{id:016x}.sst`, like in [`crate::LocalDfs`]. A download is written to
//! `{id:016x}.tmp`, fsynced and only then renamed to its final name (the
//! [`crate::durable_file`] pattern), so a final name always holds a whole file: a process killed
//! half-way through a download leaves at most a temp file, which [`CacheFs::open`] deletes.
//!
//! Budget rules:
//! * after every `get` or `put` the files under final names add up to at most the budget;
//! * the file just fetched is never the one evicted to make room for itself;
//! * a file larger than the whole budget is served from the downloaded bytes and never written
//!   to the cache directory (so a budget of 0 turns the cache into a pass-through).
//!
//! Evicting a file that a reader still has memory-mapped is fine on Linux (and every Unix): the
//! directory entry goes away, the inode and the mapping stay valid until the last mapping is
//! dropped. We rely on that: tables hold their mapped bytes as long as they live. The disk space
//! of such a file is freed only then, so the disk can briefly hold more than the budget.
//!
//! One process per cache directory: a second process opening the same directory would delete
//! the first one's temp files. The directory must not be the object store's own directory.
//!
//! Concurrent `get`s of the same missing file download it once (single-flight): the first caller
//! downloads, the others wait and then read the cached file. `put` and `delete` of an id take the
//! same per-id turn, so they never interleave with a download of that id.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use prometheus::{IntCounter, IntGauge};
use types::FileId;

use crate::dfs::Dfs;
use crate::durable_file;
use crate::error::{Error, Result};
use crate::metrics::{counter, gauge};

const FINAL_SUFFIX: &str = ".sst";
const TEMP_SUFFIX: &str = ".tmp";

static HITS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_cachefs_hits_total",
        "Reads (get and get_range) served from the local file cache.",
    )
});
static MISSES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_cachefs_misses_total",
        "Reads that went to the object store (whole-file downloads and pass-through ranges).",
    )
});
static EVICTIONS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_cachefs_evictions_total",
        "Files evicted from the local file cache to stay within its budget.",
    )
});
static DOWNLOADED_BYTES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_cachefs_downloaded_bytes_total",
        "Bytes of whole files downloaded from the object store by the file cache.",
    )
});
static CACHED_BYTES: LazyLock<IntGauge> = LazyLock::new(|| {
    gauge(
        "stratus_kvengine_cachefs_bytes",
        "Bytes of files held in the local file cache.",
    )
});

/// Counters of one [`CacheFs`] (the prometheus metrics add up every instance of the process).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheFsStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub downloaded_bytes: u64,
    /// Bytes of the files currently under final names in the cache directory.
    pub cached_bytes: u64,
    pub cached_files: u64,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    downloaded_bytes: AtomicU64,
}

struct Entry {
    size: u64,
    /// Position in `State::lru`.
    tick: u64,
}

#[derive(Default)]
struct State {
    files: HashMap<FileId, Entry>,
    /// tick → file id, oldest use first.
    lru: BTreeMap<u64, FileId>,
    next_tick: u64,
    total: u64,
    /// Ids with a download, put or delete in progress (single-flight).
    busy: HashSet<FileId>,
}

/// A [`Dfs`] that keeps whole files in a local directory in front of another [`Dfs`].
pub struct CacheFs {
    inner: Arc<dyn Dfs>,
    dir: PathBuf,
    budget: u64,
    state: Mutex<State>,
    /// Signalled when an id leaves `State::busy`.
    turn_done: Condvar,
    counters: Counters,
}

/// A caller's exclusive turn on one file id; ends (and wakes waiters) when dropped, also on an
/// error or a panic.
struct Turn<'a> {
    cache: &'a CacheFs,
    file_id: FileId,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.cache.state.lock().busy.remove(&self.file_id);
        self.cache.turn_done.notify_all();
    }
}

impl CacheFs {
    /// Opens (creating if needed) the cache directory `dir` in front of `inner`, keeping at
    /// most `budget_bytes` of files. Deletes temp files left by a download that was killed
    /// half-way, indexes the complete files (least recently used = oldest mtime) and evicts
    /// down to the budget.
    pub fn open(
        inner: Arc<dyn Dfs>,
        dir: impl Into<PathBuf>,
        budget_bytes: u64,
    ) -> Result<CacheFs> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(Error::io("create dir", &dir))?;
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(Error::io("list", &dir))? {
            let entry = entry.map_err(Error::io("list", &dir))?;
            let path = entry.path();
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if name.ends_with(TEMP_SUFFIX) {
                std::fs::remove_file(&path).map_err(Error::io("remove temp file", &path))?;
                tracing::info!(path = %path.display(), "cachefs removed a partial download");
                continue;
            }
            let Some(id) = parse_final_name(&name) else {
                continue;
            };
            let meta = entry.metadata().map_err(Error::io("stat", &path))?;
            let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            found.push((mtime, id, meta.len()));
        }
        found.sort_unstable();
        let cache = CacheFs {
            inner,
            dir,
            budget: budget_bytes,
            state: Mutex::new(State::default()),
            turn_done: Condvar::new(),
            counters: Counters::default(),
        };
        {
            let mut st = cache.state.lock();
            for (_, id, size) in found {
                cache.admit(&mut st, id, size);
            }
            cache.evict_to_budget(&mut st, None);
        }
        Ok(cache)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Where a complete cached file lives (it exists only while the file is cached).
    pub fn path_of(&self, file_id: FileId) -> PathBuf {
        self.dir.join(format!("{file_id:016x}{FINAL_SUFFIX}"))
    }

    /// True if the file is in the cache (a `get` would not reach the object store).
    pub fn contains(&self, file_id: FileId) -> bool {
        self.state.lock().files.contains_key(&file_id)
    }

    pub fn stats(&self) -> CacheFsStats {
        let st = self.state.lock();
        CacheFsStats {
            hits: self.counters.hits.load(Ordering::Relaxed),
            misses: self.counters.misses.load(Ordering::Relaxed),
            evictions: self.counters.evictions.load(Ordering::Relaxed),
            downloaded_bytes: self.counters.downloaded_bytes.load(Ordering::Relaxed),
            cached_bytes: st.total,
            cached_files: st.files.len() as u64,
        }
    }

    fn hit(&self) {
        self.counters.hits.fetch_add(1, Ordering::Relaxed);
        HITS.inc();
    }

    fn miss(&self) {
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        MISSES.inc();
    }

    /// Waits until no one else works on `file_id`, then takes the turn.
    fn turn(&self, file_id: FileId) -> Turn<'_> {
        let mut st = self.state.lock();
        while st.busy.contains(&file_id) {
            self.turn_done.wait(&mut st);
        }
        st.busy.insert(file_id);
        Turn {
            cache: self,
            file_id,
        }
    }

    /// Maps a cached file and marks it most recently used, or returns None if it is not cached.
    fn read_cached(&self, file_id: FileId) -> Option<Bytes> {
        self.touch_cached(file_id, |path| sst::table::map_file(file_id.get(), path))
    }

    /// Opens a cached file for positioned reads and marks it most recently used, or returns
    /// None if it is not cached.
    fn open_cached(&self, file_id: FileId) -> Option<std::fs::File> {
        self.touch_cached(file_id, |path| {
            std::fs::File::open(path).map_err(|source| sst::Error::Io {
                file_id: file_id.get(),
                source,
            })
        })
    }

    /// Runs `open` on a cached file's path and marks the file most recently used, or returns
    /// None if it is not cached. `open` runs under the state lock so that eviction cannot
    /// delete the file in between (once open or mapped, a deleted file stays readable).
    fn touch_cached<T>(
        &self,
        file_id: FileId,
        open: impl FnOnce(&std::path::Path) -> sst::Result<T>,
    ) -> Option<T> {
        let path = self.path_of(file_id);
        let data = {
            let mut st = self.state.lock();
            if !st.files.contains_key(&file_id) {
                return None;
            }
            let data = match open(&path) {
                Ok(data) => data,
                Err(e) => {
                    // Someone removed the file behind our back: forget it and read through.
                    tracing::warn!(file_id = file_id.get(), error = %e, "cachefs lost a cached file");
                    self.forget(&mut st, file_id);
                    return None;
                }
            };
            Self::mark_used(&mut st, file_id);
            data
        };
        // Persist the recency for the next open (best effort: a failure, or an eviction in
        // between, only makes the LRU order after a restart less accurate).
        if let Ok(f) = std::fs::File::open(&path) {
            let _ = f.set_modified(SystemTime::now());
        }
        Some(data)
    }

    /// Makes a cached file the most recently used; nothing when it is not cached.
    fn mark_used(st: &mut State, file_id: FileId) {
        let Some(entry) = st.files.get_mut(&file_id) else {
            return;
        };
        st.lru.remove(&entry.tick);
        entry.tick = st.next_tick;
        st.lru.insert(st.next_tick, file_id);
        st.next_tick += 1;
    }

    /// Records a complete file under its final name as most recently used.
    fn admit(&self, st: &mut State, file_id: FileId, size: u64) {
        self.forget(st, file_id);
        st.files.insert(
            file_id,
            Entry {
                size,
                tick: st.next_tick,
            },
        );
        st.lru.insert(st.next_tick, file_id);
        st.next_tick += 1;
        st.total += size;
        CACHED_BYTES.add(size as i64);
    }

    /// Drops a file from the index (not from disk).
    fn forget(&self, st: &mut State, file_id: FileId) -> bool {
        match st.files.remove(&file_id) {
            Some(e) => {
                st.lru.remove(&e.tick);
                st.total -= e.size;
                CACHED_BYTES.sub(e.size as i64);
                true
            }
            None => false,
        }
    }

    fn remove_file(&self, file_id: FileId) {
        let path = self.path_of(file_id);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cachefs cannot remove a file")
            }
        }
    }

    /// Evicts least recently used files, never `keep`, until the total is within the budget.
    fn evict_to_budget(&self, st: &mut State, keep: Option<FileId>) {
        while st.total > self.budget {
            let victim = st.lru.values().copied().find(|id| Some(*id) != keep);
            let Some(victim) = victim else { break };
            self.forget(st, victim);
            self.remove_file(victim);
            self.counters.evictions.fetch_add(1, Ordering::Relaxed);
            EVICTIONS.inc();
        }
    }

    /// Writes `data` under `file_id`'s final name (temp + fsync + rename) and indexes it.
    /// The caller holds the id's turn. Returns false if the file is too large to keep.
    fn store(&self, file_id: FileId, data: &[u8]) -> Result<bool> {
        let size = data.len() as u64;
        if size > self.budget {
            return Ok(false);
        }
        let path = self.path_of(file_id);
        // `write_atomically` writes `{id:016x}.tmp`; only this id's turn holder writes it.
        if let Err(e) = durable_file::write_atomically(&path, data) {
            // Leave nothing the index does not know about (e.g. a rename that happened before
            // a failed directory fsync, or a temp file from a full disk).
            let mut st = self.state.lock();
            self.forget(&mut st, file_id);
            self.remove_file(file_id);
            let _ = std::fs::remove_file(path.with_extension("tmp"));
            return Err(e);
        }
        let mut st = self.state.lock();
        self.admit(&mut st, file_id, size);
        self.evict_to_budget(&mut st, Some(file_id));
        Ok(true)
    }
}

fn parse_final_name(name: &str) -> Option<FileId> {
    let hex = name.strip_suffix(FINAL_SUFFIX)?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok().map(FileId)
}

impl Dfs for CacheFs {
    /// Writes through to the object store, then keeps a copy: a freshly flushed or compacted
    /// file is about to be read. Failing to keep the copy is logged, not returned.
    fn put(&self, file_id: FileId, data: Bytes) -> Result<()> {
        let _turn = self.turn(file_id);
        self.inner.put(file_id, data.clone())?;
        if let Err(e) = self.store(file_id, &data) {
            tracing::warn!(file_id = file_id.get(), error = %e, "cachefs cannot keep a put file");
        }
        Ok(())
    }

    fn get(&self, file_id: FileId) -> Result<Bytes> {
        if let Some(data) = self.read_cached(file_id) {
            self.hit();
            return Ok(data);
        }
        let _turn = self.turn(file_id);
        // Someone else may have downloaded it while we waited for the turn.
        if let Some(data) = self.read_cached(file_id) {
            self.hit();
            return Ok(data);
        }
        self.miss();
        let data = self.inner.get(file_id)?;
        self.counters
            .downloaded_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        DOWNLOADED_BYTES.inc_by(data.len() as u64);
        match self.store(file_id, &data) {
            Ok(true) => {}
            // Larger than the whole budget: served, not kept.
            Ok(false) => return Ok(data),
            Err(e) => {
                tracing::warn!(file_id = file_id.get(), error = %e, "cachefs cannot keep a downloaded file");
                return Ok(data);
            }
        }
        // Serve the page-cache-backed map rather than the downloaded buffer, which is freed
        // here. The file was just indexed as most recently used and we still hold the turn.
        Ok(self.read_cached(file_id).unwrap_or(data))
    }

    /// Only in memory: the order on disk (each file's mtime, for the next start) is refreshed
    /// by the next open, which a use noted here never costs.
    fn note_use(&self, file_id: FileId) {
        Self::mark_used(&mut self.state.lock(), file_id);
    }

    fn open_local(&self, file_id: FileId) -> Result<Option<std::fs::File>> {
        if let Some(file) = self.open_cached(file_id) {
            self.hit();
            return Ok(Some(file));
        }
        // Download through `get` (one download per file however many readers ask), then open
        // what it kept. A file larger than the whole budget is not kept: the caller then reads
        // it with `get`, which downloads it a second time (rare: one table above the budget).
        self.get(file_id)?;
        Ok(self.open_cached(file_id))
    }

    /// Served from the cached file if present; otherwise passed through without caching.
    fn get_range(&self, file_id: FileId, offset: u64, len: u64) -> Result<Bytes> {
        let Some(all) = self.read_cached(file_id) else {
            self.miss();
            return self.inner.get_range(file_id, offset, len);
        };
        self.hit();
        crate::dfs::slice_range(file_id, all, offset, len)
    }

    /// Drops the cached copy and deletes the file from the object store.
    fn delete(&self, file_id: FileId) -> Result<()> {
        let _turn = self.turn(file_id);
        {
            let mut st = self.state.lock();
            if self.forget(&mut st, file_id) {
                self.remove_file(file_id);
            }
        }
        self.inner.delete(file_id)
    }

    fn list(&self) -> Result<Vec<FileId>> {
        self.inner.list()
    }
}

impl Drop for CacheFs {
    fn drop(&mut self) {
        // The gauge adds up every instance; take this one's share out.
        CACHED_BYTES.sub(self.state.get_mut().total as i64);
    }
}
