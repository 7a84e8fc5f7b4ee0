//! cachefs: the byte budget and LRU order, hits that never reach the object store, single-flight
//! downloads, write-through puts, and crash safety: a download killed half-way (a leftover temp
//! file, or a real SIGKILL of a process in the middle of one) is never served.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kvengine::{CacheFs, Dfs, FileId, LocalDfs, Result};
use rand::{Rng, RngCore, SeedableRng};

/// A [`LocalDfs`] that counts the requests reaching it and can delay whole-file gets.
struct CountingDfs {
    inner: LocalDfs,
    gets: AtomicU64,
    ranges: AtomicU64,
    puts: AtomicU64,
    get_delay: Duration,
}

impl CountingDfs {
    fn new(dir: &Path) -> Arc<CountingDfs> {
        Self::with_delay(dir, Duration::ZERO)
    }

    fn with_delay(dir: &Path, get_delay: Duration) -> Arc<CountingDfs> {
        Arc::new(CountingDfs {
            inner: LocalDfs::open(dir).unwrap(),
            gets: AtomicU64::new(0),
            ranges: AtomicU64::new(0),
            puts: AtomicU64::new(0),
            get_delay,
        })
    }

    fn gets(&self) -> u64 {
        self.gets.load(Ordering::SeqCst)
    }
}

impl Dfs for CountingDfs {
    fn put(&self, file_id: FileId, data: Bytes) -> Result<()> {
        self.puts.fetch_add(1, Ordering::SeqCst);
        self.inner.put(file_id, data)
    }
    fn get(&self, file_id: FileId) -> Result<Bytes> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.get_delay);
        self.inner.get(file_id)
    }
    fn get_range(&self, file_id: FileId, offset: u64, len: u64) -> Result<Bytes> {
        self.ranges.fetch_add(1, Ordering::SeqCst);
        self.inner.get_range(file_id, offset, len)
    }
    fn delete(&self, file_id: FileId) -> Result<()> {
        self.inner.delete(file_id)
    }
    fn list(&self) -> Result<Vec<FileId>> {
        self.inner.list()
    }
}

fn file_bytes(id: u64, len: usize) -> Bytes {
    let mut rng = rand::rngs::StdRng::seed_from_u64(id);
    let mut v = vec![0u8; len];
    rng.fill_bytes(&mut v);
    Bytes::from(v)
}

/// Sizes of the complete (final-name) files in the cache directory, by name.
fn cached_files(dir: &Path) -> HashMap<String, u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_str().unwrap().ends_with(".sst"))
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                e.metadata().unwrap().len(),
            )
        })
        .collect()
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

/// A remote store holding files `1..=n` of `len` bytes each, a cache directory and the cache.
struct Setup {
    _tmp: tempfile::TempDir,
    remote_dir: std::path::PathBuf,
    cache_dir: std::path::PathBuf,
    remote: Arc<CountingDfs>,
}

fn setup(files: &[(u64, usize)]) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let remote_dir = tmp.path().join("remote");
    let cache_dir = tmp.path().join("cache");
    let remote = CountingDfs::new(&remote_dir);
    for &(id, len) in files {
        remote.inner.put(FileId(id), file_bytes(id, len)).unwrap();
    }
    Setup {
        _tmp: tmp,
        remote_dir,
        cache_dir,
        remote,
    }
}

#[test]
fn eviction_keeps_cached_bytes_within_budget_after_every_get() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let files: Vec<(u64, usize)> = (1..=30)
        .map(|id| (id, rng.random_range(500..4000)))
        .collect();
    let s = setup(&files);
    let budget = 10_000;
    let cache = CacheFs::open(s.remote.clone(), &s.cache_dir, budget).unwrap();
    for step in 0..300 {
        let (id, len) = files[rng.random_range(0..files.len())];
        let got = cache.get(FileId(id)).unwrap();
        assert_eq!(
            got,
            file_bytes(id, len),
            "step {step}: wrong bytes for file {id}"
        );
        let on_disk = cached_files(&s.cache_dir);
        let total: u64 = on_disk.values().sum();
        assert!(
            total <= budget,
            "step {step}: {total} bytes cached, budget {budget}"
        );
        assert!(
            on_disk.contains_key(&format!("{id:016x}.sst")),
            "step {step}: the file just read was evicted"
        );
        let stats = cache.stats();
        assert_eq!(
            stats.cached_bytes, total,
            "step {step}: index disagrees with disk"
        );
        assert_eq!(stats.cached_files, on_disk.len() as u64);
    }
    let stats = cache.stats();
    assert!(stats.evictions > 0 && stats.hits > 0, "{stats:?}");
    assert_eq!(stats.hits + stats.misses, 300);
    assert_eq!(stats.misses, s.remote.gets());
}

/// Files 1, 2 and 3 of 1,000 bytes each cached in a cache of 3,000 bytes, then `use_1` makes
/// file 1 the most recently used and file 4 is read: file 2, the least recently used, must be
/// evicted and the others kept.
fn file_1_used_before_file_4_is_read(use_1: impl Fn(&CacheFs)) -> (Setup, CacheFs) {
    let s = setup(&[(1, 1000), (2, 1000), (3, 1000), (4, 1000)]);
    let cache = CacheFs::open(s.remote.clone(), &s.cache_dir, 3000).unwrap();
    for id in [1, 2, 3] {
        cache.get(FileId(id)).unwrap();
    }
    use_1(&cache);
    cache.get(FileId(4)).unwrap();
    assert!(cache.contains(FileId(1)) && cache.contains(FileId(3)) && cache.contains(FileId(4)));
    assert!(!cache.contains(FileId(2)));
    assert!(!s.cache_dir.join(format!("{:016x}.sst", 2)).exists());
    assert_eq!(s.remote.gets(), 4);
    (s, cache)
}

#[test]
fn touching_a_file_keeps_it_over_less_recently_used_ones() {
    let (s, cache) = file_1_used_before_file_4_is_read(|cache| {
        cache.get(FileId(1)).unwrap();
    });
    cache.get(FileId(1)).unwrap();
    assert_eq!(s.remote.gets(), 4, "file 1 was kept");
    cache.get(FileId(2)).unwrap();
    assert_eq!(s.remote.gets(), 5, "file 2 was evicted");
}

/// A file a worker keeps open is used without a read of the cache: the use it notes must
/// count as one, or the hottest file would be evicted first.
#[test]
fn a_noted_use_keeps_a_file_over_less_recently_used_ones() {
    let (s, cache) = file_1_used_before_file_4_is_read(|cache| {
        cache.note_use(FileId(1));
        cache.note_use(FileId(9)); // not cached: nothing to do
    });
    assert_eq!(cache.stats().hits, 0, "a noted use is not a read");
    assert_eq!(s.remote.gets(), 4);
}

#[test]
fn second_get_is_a_hit_and_does_not_reach_the_object_store() {
    let s = setup(&[(9, 5000)]);
    let cache = CacheFs::open(s.remote.clone(), &s.cache_dir, 1 << 20).unwrap();
    assert_eq!(cache.get(FileId(9)).unwrap(), file_bytes(9, 5000));
    assert_eq!(s.remote.gets(), 1);
    assert_eq!(cache.get(FileId(9)).unwrap(), file_bytes(9, 5000));
    assert_eq!(s.remote.gets(), 1, "the hit reached the object store");
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses), (1, 1), "{stats:?}");
    assert_eq!(stats.downloaded_bytes, 5000);
    assert_eq!(stats.cached_bytes, 5000);
}

#[test]
fn concurrent_gets_of_a_missing_file_download_it_once() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = CountingDfs::with_delay(&tmp.path().join("remote"), Duration::from_millis(200));
    remote.inner.put(FileId(5), file_bytes(5, 100_000)).unwrap();
    let cache = Arc::new(CacheFs::open(remote.clone(), tmp.path().join("cache"), 1 << 20).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let cache = cache.clone();
            std::thread::spawn(move || cache.get(FileId(5)).unwrap())
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), file_bytes(5, 100_000));
    }
    assert_eq!(remote.gets(), 1, "the file was downloaded more than once");
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses), (7, 1), "{stats:?}");
}

#[test]
fn file_larger_than_the_budget_is_served_but_not_kept() {
    let s = setup(&[(1, 1000), (2, 5000)]);
    let cache = CacheFs::open(s.remote.clone(), &s.cache_dir, 4000).unwrap();
    cache.get(FileId(1)).unwrap();
    assert_eq!(cache.get(FileId(2)).unwrap(), file_bytes(2, 5000));
    assert!(!cache.contains(FileId(2)));
    assert!(
        cache.contains(FileId(1)),
        "a file that is not kept evicts nothing"
    );
    assert_eq!(cached_files(&s.cache_dir).len(), 1);
    assert!(temp_files(&s.cache_dir).is_empty());
    cache.get(FileId(2)).unwrap();
    assert_eq!(s.remote.gets(), 3);
}

#[test]
fn put_writes_through_and_the_next_get_is_a_hit() {
    let s = setup(&[]);
    let cache = CacheFs::open(s.remote.clone(), &s.cache_dir, 1 << 20).unwrap();
    let data = file_bytes(3, 7000);
    cache.put(FileId(3), data.clone()).unwrap();
    assert_eq!(s.remote.puts.load(Ordering::SeqCst), 1);
    assert_eq!(
        s.remote.inner.get(FileId(3)).unwrap(),
        data,
        "put reached the object store"
    );
    assert_eq!(cache.get(FileId(3)).unwrap(), data);
    assert_eq!(
        s.remote.gets(),
        0,
        "a freshly put file is read from the cache"
    );
    assert_eq!(cache.list().unwrap(), vec![FileId(3)]);
}

#[test]
fn get_range_reads_cached_files_locally_and_passes_others_through_uncached() {
    let s = setup(&[(1, 4000), (2, 4000)]);
    let cache = CacheFs::open(s.remote.clone(), &s.cache_dir, 1 << 20).unwrap();
    cache.get(FileId(1)).unwrap();
    assert_eq!(
        cache.get_range(FileId(1), 100, 50).unwrap(),
        file_bytes(1, 4000).slice(100..150)
    );
    assert_eq!(s.remote.ranges.load(Ordering::SeqCst), 0);
    assert!(
        cache.get_range(FileId(1), 3990, 11).is_err(),
        "range past the end"
    );

    assert_eq!(
        cache.get_range(FileId(2), 10, 20).unwrap(),
        file_bytes(2, 4000).slice(10..30)
    );
    assert_eq!(s.remote.ranges.load(Ordering::SeqCst), 1);
    assert!(!cache.contains(FileId(2)), "ranges are not cached");
}

#[test]
fn delete_removes_the_file_from_the_store_and_the_cache() {
    let s = setup(&[(1, 1000)]);
    let cache = CacheFs::open(s.remote.clone(), &s.cache_dir, 1 << 20).unwrap();
    let mapped = cache.get(FileId(1)).unwrap();
    cache.delete(FileId(1)).unwrap();
    assert!(!cache.contains(FileId(1)));
    assert!(cached_files(&s.cache_dir).is_empty());
    assert!(s.remote.inner.list().unwrap().is_empty());
    assert!(cache.get(FileId(1)).is_err());
    assert_eq!(cache.stats().cached_bytes, 0);
    // A reader that mapped the file before the delete still reads it (Linux keeps the inode).
    assert_eq!(mapped, file_bytes(1, 1000));
}

#[test]
fn reopen_keeps_most_recently_used_files_within_a_smaller_budget() {
    let s = setup(&[(1, 1000), (2, 1000), (3, 1000)]);
    {
        let cache = CacheFs::open(s.remote.clone(), &s.cache_dir, 3000).unwrap();
        // File timestamps can be coarse (a kernel tick): space the uses apart.
        for id in [1, 2, 3, 1] {
            cache.get(FileId(id)).unwrap();
            std::thread::sleep(Duration::from_millis(30));
        }
        assert_eq!(s.remote.gets(), 3);
    }
    // Least recently used first: 2, 3, 1.
    let cache = CacheFs::open(s.remote.clone(), &s.cache_dir, 2000).unwrap();
    assert!(!cache.contains(FileId(2)));
    assert!(cache.contains(FileId(1)) && cache.contains(FileId(3)));
    assert_eq!(cached_files(&s.cache_dir).values().sum::<u64>(), 2000);
    assert_eq!(cache.get(FileId(1)).unwrap(), file_bytes(1, 1000));
    assert_eq!(cache.get(FileId(3)).unwrap(), file_bytes(3, 1000));
    assert_eq!(s.remote.gets(), 3, "files indexed on open are hits");
}

#[test]
fn leftover_temp_file_is_deleted_on_open_and_the_file_downloaded_again() {
    let s = setup(&[(6, 20_000)]);
    let full = file_bytes(6, 20_000);
    std::fs::create_dir_all(&s.cache_dir).unwrap();
    // What a download killed half-way leaves: the first half under the temp name.
    let tmp = s.cache_dir.join(format!("{:016x}.tmp", 6));
    std::fs::write(&tmp, &full[..10_000]).unwrap();
    let cache = CacheFs::open(s.remote.clone(), &s.cache_dir, 1 << 20).unwrap();
    assert!(!tmp.exists(), "open must delete partial downloads");
    assert!(!cache.contains(FileId(6)));
    assert_eq!(cache.get(FileId(6)).unwrap(), full);
    assert_eq!(s.remote.gets(), 1, "the file is downloaded again");
}

#[test]
fn download_killed_half_way_is_never_served() {
    const ID: u64 = 77;
    const LEN: usize = 32 << 20;
    let s = setup(&[(ID, LEN)]);
    let full = file_bytes(ID, LEN);
    let name = format!("{ID:016x}");
    let mut partial_rounds = 0;
    for round in 0..5 {
        let cache_dir = s.cache_dir.join(format!("round{round}"));
        let tmp = cache_dir.join(format!("{name}.tmp"));
        let fin = cache_dir.join(format!("{name}.sst"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_stratus-cachefs-downloader"))
            .arg(&s.remote_dir)
            .arg(&cache_dir)
            .arg(ID.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn downloader");
        let start = Instant::now();
        // Kill once part of the download is written (or, if we missed that, once it is done).
        loop {
            let written = std::fs::metadata(&tmp).map(|m| m.len()).unwrap_or(0);
            if written > 0 || fin.exists() {
                break;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("round {round}: downloader exited on its own: {status}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "round {round}: download never started"
            );
        }
        child.kill().expect("SIGKILL the downloader");
        child.wait().unwrap();
        let killed_mid_write = tmp.exists() && !fin.exists();
        if killed_mid_write {
            partial_rounds += 1;
            let len = std::fs::metadata(&tmp).unwrap().len();
            eprintln!("round {round}: killed with {len} of {LEN} bytes written");
        }

        let remote = CountingDfs::new(&s.remote_dir);
        let cache = CacheFs::open(remote.clone(), &cache_dir, u64::MAX).unwrap();
        assert!(
            temp_files(&cache_dir).is_empty(),
            "round {round}: temp file survived open"
        );
        let got = cache.get(FileId(ID)).unwrap();
        assert!(
            got == full,
            "round {round}: served bytes differ from the object store's"
        );
        if killed_mid_write {
            assert_eq!(
                remote.gets(),
                1,
                "round {round}: the partial file was not re-downloaded"
            );
        }
        if partial_rounds > 0 {
            break;
        }
    }
    assert!(
        partial_rounds > 0,
        "never managed to kill the downloader mid-write; the test checked nothing"
    );
}
