//! Memtable inserts and gets against a `BTreeMap` behind a `RwLock`, including gets from two
//! reader threads while a writer inserts.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use memtable::{ColumnFamily, Memtable};
use rand::Rng;

use crate::report::{rate, row, table_header};
use crate::workload::{key, rng, shuffled, value};

type Locked = RwLock<BTreeMap<Vec<u8>, Vec<u8>>>;

pub fn run(n: usize) {
    let mut r = rng(2);
    let order = shuffled(n, 5);
    let keys: Vec<Vec<u8>> = order.iter().map(|&i| key(i)).collect();
    let values: Vec<Vec<u8>> = (0..n).map(|_| value(&mut r)).collect();

    table_header("memtable");
    // Inserts in random key order, one thread.
    let mem = Memtable::new();
    let t0 = Instant::now();
    for (k, v) in keys.iter().zip(&values) {
        mem.put(ColumnFamily::Write, k, 1, b"", v);
    }
    let ours = rate(n as f64, t0.elapsed());
    let map: Locked = RwLock::new(BTreeMap::new());
    let t0 = Instant::now();
    for (k, v) in keys.iter().zip(&values) {
        map.write().expect("lock").insert(k.clone(), v.clone());
    }
    let base = rate(n as f64, t0.elapsed());
    row(
        "insert (random order)",
        "ops/s",
        ours,
        "RwLock<BTreeMap>",
        base,
    );

    // Gets, one thread.
    let probe = shuffled(n, 9);
    let t0 = Instant::now();
    for &i in &probe {
        black_box(
            mem.cf(ColumnFamily::Write)
                .get(&keys[i], u64::MAX)
                .expect("present"),
        );
    }
    let ours = rate(n as f64, t0.elapsed());
    let t0 = Instant::now();
    for &i in &probe {
        black_box(
            map.read()
                .expect("lock")
                .get(&keys[i])
                .expect("present")
                .len(),
        );
    }
    let base = rate(n as f64, t0.elapsed());
    row("get, 1 thread", "ops/s", ours, "RwLock<BTreeMap>", base);

    // Gets from 2 readers while a writer inserts new versions.
    let mem = Arc::new(mem);
    let map = Arc::new(map);
    let keys = Arc::new(keys);
    let window = Duration::from_secs(3);
    let ours = concurrent_gets(
        &keys,
        window,
        {
            let mem = mem.clone();
            move |k| mem.cf(ColumnFamily::Write).get(k, u64::MAX).is_some()
        },
        {
            let mem = mem.clone();
            move |k, v, ver| {
                mem.put(ColumnFamily::Write, k, ver, b"", v);
            }
        },
    );
    let base = concurrent_gets(
        &keys,
        window,
        {
            let map = map.clone();
            move |k| map.read().expect("lock").get(k).is_some()
        },
        {
            let map = map.clone();
            move |k, v, _| {
                map.write().expect("lock").insert(k.to_vec(), v.to_vec());
            }
        },
    );
    row(
        "get, 2 readers + 1 writer",
        "gets/s",
        ours,
        "RwLock<BTreeMap>",
        base,
    );
}

/// Runs 2 reader threads doing random gets and 1 writer overwriting random keys for `window`;
/// returns the readers' combined gets per second.
fn concurrent_gets(
    keys: &Arc<Vec<Vec<u8>>>,
    window: Duration,
    get: impl Fn(&[u8]) -> bool + Send + Sync + Clone + 'static,
    put: impl Fn(&[u8], &[u8], u64) + Send + 'static,
) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (keys, stop) = (keys.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut r = rng(11);
            let v = value(&mut r);
            let mut ver = 2;
            while !stop.load(Ordering::Relaxed) {
                let k = &keys[r.random_range(0..keys.len())];
                put(k, &v, ver);
                ver += 1;
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (keys, stop, get) = (keys.clone(), stop.clone(), get.clone());
            std::thread::spawn(move || {
                let mut r = rng(20 + t);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..256 {
                        let k = &keys[r.random_range(0..keys.len())];
                        assert!(get(k));
                    }
                    n += 256;
                }
                n
            })
        })
        .collect();
    let t0 = Instant::now();
    std::thread::sleep(window);
    stop.store(true, Ordering::Relaxed);
    let total: u64 = readers.into_iter().map(|h| h.join().expect("reader")).sum();
    let elapsed = t0.elapsed();
    writer.join().expect("writer");
    rate(total as f64, elapsed)
}
