//! Readers racing writers.
//!
//! The writer follows a fixed schedule (version `v` goes to key `key_of(v)`, with data derived
//! from `v`), so a reader can check everything it sees against the schedule: a version it reads
//! must be one the schedule wrote, with exactly that data, and at a ts the writer has published
//! it must see precisely the versions the schedule wrote up to that ts.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use memtable::size_estimate::{key_charge, version_charge};
use memtable::{CfTable, ColumnFamily, Memtable, VersionRef};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const KEYS: u64 = 128;
const VERSIONS: u64 = 30_000;
const READERS: usize = 4;

/// 37 is coprime with 128: consecutive versions spread over all keys, 234 or so per key.
fn key_of(v: u64) -> u64 {
    (v * 37) % KEYS
}

/// Zero-padded so that key order is index order.
fn key_name(k: u64) -> Vec<u8> {
    format!("key{k:03}").into_bytes()
}

fn is_tombstone(v: u64) -> bool {
    v.is_multiple_of(5)
}

/// Varying lengths, and unique per version.
fn value_of(v: u64) -> Vec<u8> {
    if is_tombstone(v) {
        Vec::new()
    } else {
        format!("value-{v}-")
            .repeat((v % 4) as usize + 1)
            .into_bytes()
    }
}

/// The schedule, inverted: every key's versions, ascending.
struct Schedule {
    by_key: Vec<Vec<u64>>,
}

impl Schedule {
    fn new() -> Self {
        let mut by_key = vec![Vec::new(); KEYS as usize];
        for v in 1..=VERSIONS {
            by_key[key_of(v) as usize].push(v);
        }
        Schedule { by_key }
    }

    /// The version a read of key `k` at `ts` must see.
    fn visible(&self, k: u64, ts: u64) -> Option<u64> {
        let versions = &self.by_key[k as usize];
        versions
            .partition_point(|&v| v <= ts)
            .checked_sub(1)
            .map(|i| versions[i])
    }

    /// The (key, version) pairs a read at `ts` must see, in key order.
    fn visible_all(&self, ts: u64) -> Vec<(u64, u64)> {
        (0..KEYS)
            .filter_map(|k| Some((k, self.visible(k, ts)?)))
            .collect()
    }
}

/// `v` is a version the writer produced for key `k`, with exactly the writer's data.
fn assert_written(k: u64, v: &VersionRef) {
    let version = v.version();
    assert!(
        (1..=VERSIONS).contains(&version),
        "unknown version {version}"
    );
    assert_eq!(
        key_of(version),
        k,
        "version {version} read under the wrong key"
    );
    assert_eq!(v.user_meta(), version.to_be_bytes(), "meta of {version}");
    assert_eq!(
        v.is_tombstone(),
        is_tombstone(version),
        "tombstone flag of {version}"
    );
    assert_eq!(v.value(), value_of(version), "value of {version}");
}

fn key_index(key: &[u8]) -> u64 {
    std::str::from_utf8(&key[3..])
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("the writer only writes keyNNN keys")
}

/// Every check a reader makes at one published ts.
fn check_at(table: &CfTable, schedule: &Schedule, ts: u64, rng: &mut StdRng, newest: &mut [u64]) {
    let expected = schedule.visible_all(ts);

    // Forward: keys strictly ascending, each on the schedule's visible version.
    let mut it = table.iter(ts);
    it.seek_to_first();
    let mut forward = Vec::new();
    while it.valid() {
        let k = key_index(it.key());
        assert_written(k, it.version());
        if let Some(&(prev, _)) = forward.last() {
            assert!(k > prev, "forward keys not ascending: {prev} then {k}");
        }
        forward.push((k, it.version().version()));
        it.next();
    }
    assert_eq!(forward, expected, "forward scan at ts={ts}");

    // Backward: the same, reversed.
    it.seek_to_last();
    let mut backward = Vec::new();
    while it.valid() {
        let k = key_index(it.key());
        assert_written(k, it.version());
        backward.push((k, it.version().version()));
        it.prev();
    }
    backward.reverse();
    assert_eq!(backward, expected, "backward scan at ts={ts}");

    // A seek into the middle, then a few mixed steps, against the expected order.
    let from = rng.random_range(0..KEYS);
    it.seek(&key_name(from));
    let mut at = expected.partition_point(|&(k, _)| k < from);
    for _ in 0..6 {
        let here = it
            .valid()
            .then(|| (key_index(it.key()), it.version().version()));
        assert_eq!(
            here,
            expected.get(at).copied(),
            "cursor at ts={ts} after seek to {from}"
        );
        if here.is_none() {
            break;
        }
        if rng.random_bool(0.5) {
            it.next();
            at += 1;
        } else if at == 0 {
            break;
        } else {
            it.prev();
            at -= 1;
        }
    }

    // Point reads at ts and at an older ts.
    for _ in 0..8 {
        let k = rng.random_range(0..KEYS);
        let read_ts = if rng.random_bool(0.5) {
            ts
        } else {
            rng.random_range(0..=ts)
        };
        let got = table.get(&key_name(k), read_ts);
        if let Some(v) = &got {
            assert_written(k, v);
        }
        assert_eq!(
            got.map(|v| v.version()),
            schedule.visible(k, read_ts),
            "get key={k} ts={read_ts}"
        );
    }

    // The version chain: strictly newest first, every version real, nothing <= ts missing.
    let k = rng.random_range(0..KEYS);
    let chain: Vec<VersionRef> = table.versions(&key_name(k)).collect();
    for pair in chain.windows(2) {
        assert!(
            pair[0].version() > pair[1].version(),
            "chain of key={k} not newest first"
        );
    }
    chain.iter().for_each(|v| assert_written(k, v));
    let old: Vec<u64> = chain
        .iter()
        .map(|v| v.version())
        .filter(|&v| v <= ts)
        .collect();
    let expected_old: Vec<u64> = schedule.by_key[k as usize]
        .iter()
        .copied()
        .filter(|&v| v <= ts)
        .rev()
        .collect();
    assert_eq!(old, expected_old, "versions of key={k} up to ts={ts}");

    // Once visible, a version stays visible: the newest version never goes backwards.
    let k = rng.random_range(0..KEYS);
    let now = table.get_newest(&key_name(k)).map_or(0, |v| v.version());
    assert!(now >= newest[k as usize], "newest of key={k} went back");
    newest[k as usize] = now;
}

/// Sets the flag when dropped, including during a panic's unwinding.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

#[test]
fn readers_see_a_consistent_prefix_while_one_writer_inserts() {
    let mt = Arc::new(Memtable::new());
    let schedule = Arc::new(Schedule::new());
    // Every version <= published is fully inserted.
    let published = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(READERS + 1));

    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (mt, schedule, published, done, start) = (
                Arc::clone(&mt),
                Arc::clone(&schedule),
                Arc::clone(&published),
                Arc::clone(&done),
                Arc::clone(&start),
            );
            thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(r as u64);
                let mut newest = vec![0; KEYS as usize];
                let mut passes_while_writing = 0u64;
                start.wait();
                loop {
                    // Read `done` first: a pass that starts after it saw the final ts.
                    let finished = done.load(Ordering::Acquire);
                    let ts = published.load(Ordering::Acquire);
                    check_at(
                        mt.cf(ColumnFamily::Write),
                        &schedule,
                        ts,
                        &mut rng,
                        &mut newest,
                    );
                    if finished {
                        return passes_while_writing;
                    }
                    passes_while_writing += 1;
                }
            })
        })
        .collect();

    start.wait();
    // Readers stop once `done` is set, also if an assertion below fails: no hang on failure.
    let _stop_readers = SetOnDrop(&done);
    let table = mt.cf(ColumnFamily::Write);
    let mut last_of_key = vec![None; KEYS as usize];
    for v in 1..=VERSIONS {
        let k = key_of(v);
        let key = key_name(k);
        let meta = v.to_be_bytes();
        let accepted = if is_tombstone(v) {
            table.delete(&key, v, &meta)
        } else {
            table.put(&key, v, &meta, &value_of(v))
        };
        assert!(accepted, "put of a newer version {v} was refused");
        // Stale puts with garbage data: readers would notice if one got in.
        assert!(
            !table.put(&key, v, b"stale", b"same version"),
            "equal version accepted"
        );
        if let Some(prev) = last_of_key[k as usize] {
            assert!(
                !table.put(&key, prev, b"stale", b"older version"),
                "older version accepted"
            );
        }
        last_of_key[k as usize] = Some(v);
        published.store(v, Ordering::Release);
        if v.is_multiple_of(32) {
            thread::yield_now();
        }
    }
    drop(_stop_readers);

    let passes: Vec<u64> = readers
        .into_iter()
        .map(|r| r.join().expect("reader found an inconsistency"))
        .collect();
    assert_eq!(table.len(), KEYS as usize);
    eprintln!("reader passes while writing: {passes:?}");
}

#[test]
fn racing_writers_lose_no_accepted_version_and_charge_each_key_once() {
    const WRITERS: u64 = 4;
    const ROUNDS: u64 = 4_000;
    let mt = Arc::new(Memtable::new());
    let start = Arc::new(Barrier::new(WRITERS as usize));

    // In round i every writer puts a distinct version of the same key, and every other round
    // starts a new key: both the first-version race and the newest-version race happen often.
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (mt, start) = (Arc::clone(&mt), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                let mut accepted = Vec::new();
                for i in 0..ROUNDS {
                    let key = format!("k{:05}", i / 2).into_bytes();
                    let version = i * WRITERS + w + 1;
                    let value = format!("w{w}v{version}").into_bytes();
                    if mt.put(ColumnFamily::Lock, &key, version, b"m", &value) {
                        accepted.push((key, version, value.len()));
                    }
                }
                accepted
            })
        })
        .collect();

    let mut accepted: Vec<(Vec<u8>, u64, usize)> = writers
        .into_iter()
        .flat_map(|w| w.join().expect("writer panicked"))
        .collect();
    accepted.sort();

    let table = mt.cf(ColumnFamily::Lock);
    let mut expected_size = 0;
    for group in accepted.chunk_by(|a, b| a.0 == b.0) {
        let key = &group[0].0;
        let mut expected: Vec<u64> = group.iter().map(|a| a.1).collect();
        expected.reverse();
        let chain: Vec<u64> = table.versions(key).map(|v| v.version()).collect();
        assert_eq!(
            chain,
            expected,
            "chain of {:?} vs accepted puts",
            String::from_utf8_lossy(key)
        );
        expected_size += key_charge(key.len());
        expected_size += group.iter().map(|a| version_charge(1, a.2)).sum::<usize>();
    }
    assert_eq!(table.len(), (ROUNDS / 2) as usize);
    assert_eq!(mt.size(), expected_size);
}
