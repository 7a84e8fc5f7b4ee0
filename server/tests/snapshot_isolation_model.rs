//! Snapshot isolation against an oracle.
//!
//! Writer threads run random transactions (random keys over two shards, puts, deletes and
//! lock-only keys, every commit mode, some abandoned part-way as if their coordinator died);
//! the oracle records `(start_ts, commit_ts, writes)` of every transaction that committed.
//! Reader threads read at random TSO timestamps (fresh ones and earlier ones), resolving the
//! locks they meet. Shards are flushed while this runs and flushed and compacted between
//! phases. At the end:
//!
//! * every read at `ts` equals the oracle's state at `ts`: all committed transactions with
//!   `commit_ts <= ts` applied in commit_ts order (values and the commit_ts of each version);
//! * no two committed transactions that wrote the same key overlap (`A.start < B.commit` and
//!   `B.start < A.commit`): first-committer-wins.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use rand::seq::IndexedRandom;
use server::txn::{ClientOptions, CommitStage, KvEntry, Mode, TxnClient, TxnErrorKind};

const KEYS: usize = 16;
const WRITERS: usize = 4;
const READERS: usize = 2;
const PHASES: usize = 3;
const TXNS_PER_WRITER_PER_PHASE: usize = 40;

fn key(i: usize) -> Vec<u8> {
    format!("k{i:02}").into_bytes()
}

#[derive(Debug, Clone)]
enum Write {
    Put(Vec<u8>),
    Delete,
    Lock,
}

#[derive(Debug, Clone)]
struct CommittedTxn {
    start_ts: u64,
    commit_ts: u64,
    writes: Vec<(Vec<u8>, Write)>,
}

/// Keys and values as text, so a failure prints readably.
type State = BTreeMap<String, (String, u64)>;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A read and what it returned: key → (value, commit_ts).
#[derive(Debug)]
struct Observation {
    ts: u64,
    /// `None`: a scan of every key; `Some(k)`: a point get of `k`.
    key: Option<Vec<u8>>,
    got: State,
    who: String,
}

#[derive(Default)]
struct Oracle {
    committed: Mutex<Vec<CommittedTxn>>,
    observations: Mutex<Vec<Observation>>,
    /// Timestamps handed out so far, for readers that read in the past.
    issued: Mutex<Vec<u64>>,
    /// Outcome counts (committed per mode, abandoned, failed), printed with the result.
    outcomes: Mutex<BTreeMap<String, usize>>,
}

impl Oracle {
    fn state_at(txns: &[CommittedTxn], ts: u64) -> State {
        let mut state = BTreeMap::new();
        for t in txns.iter().filter(|t| t.commit_ts <= ts) {
            for (k, w) in &t.writes {
                match w {
                    Write::Put(v) => {
                        state.insert(text(k), (text(v), t.commit_ts));
                    }
                    Write::Delete => {
                        state.remove(&text(k));
                    }
                    Write::Lock => {}
                }
            }
        }
        state
    }
}

fn entries_to_map(entries: impl IntoIterator<Item = KvEntry>) -> State {
    entries
        .into_iter()
        .map(|e| (text(&e.key), (text(&e.value), e.commit_ts)))
        .collect()
}

fn run_writer(client: &TxnClient, oracle: &Oracle, id: usize, phase: usize) {
    let mut rng = rand::rng();
    for n in 0..TXNS_PER_WRITER_PER_PHASE {
        let mut txn = client.begin().unwrap();
        let start_ts = txn.start_ts();
        oracle.issued.lock().unwrap().push(start_ts);
        // Read a key first, as a transaction would: an observation at start_ts.
        let rk = key(rng.random_range(0..KEYS));
        let got = client.get_entry(&rk, start_ts).unwrap();
        oracle.observations.lock().unwrap().push(Observation {
            ts: start_ts,
            key: Some(rk.clone()),
            got: entries_to_map(got),
            who: format!("writer {id} get"),
        });

        let count = rng.random_range(1..=4);
        let mut idx: Vec<usize> = (0..KEYS).collect();
        let mut writes = Vec::new();
        for _ in 0..count {
            let i = idx.swap_remove(rng.random_range(0..idx.len()));
            let k = key(i);
            let w = match rng.random_range(0..10) {
                0..=6 => {
                    let v = format!("w{id}p{phase}n{n}").into_bytes();
                    txn.set(k.clone(), v.clone());
                    Write::Put(v)
                }
                7 | 8 => {
                    txn.delete(k.clone());
                    Write::Delete
                }
                _ => {
                    txn.lock_key(k.clone());
                    Write::Lock
                }
            };
            writes.push((k, w));
        }
        let mode = *[Mode::TwoPc, Mode::AsyncCommit, Mode::OnePc]
            .choose(&mut rng)
            .unwrap();
        let abandon = rng.random_bool(0.08).then(|| {
            *[CommitStage::Prewritten, CommitStage::PrimaryCommitted]
                .choose(&mut rng)
                .unwrap()
        });
        let outcome = |what: String| *oracle.outcomes.lock().unwrap().entry(what).or_default() += 1;
        let commit_ts = match abandon {
            None => match txn.commit(mode) {
                Ok(c) => {
                    outcome(format!("committed {:?}", c.mode));
                    Some(c.commit_ts)
                }
                Err(e) => {
                    assert!(
                        matches!(
                            e.kind(),
                            TxnErrorKind::Conflict | TxnErrorKind::TxnFinished | TxnErrorKind::Busy
                        ),
                        "writer {id}: unexpected commit error {e:?}"
                    );
                    outcome(format!("failed {:?}", e.kind()));
                    None
                }
            },
            Some(stage) => match txn.commit_stopping_after(mode, stage) {
                Ok(a) => {
                    outcome(format!("abandoned {:?} {stage:?}", a.mode));
                    a.committed_at
                }
                Err(e) => {
                    assert!(
                        matches!(
                            e.kind(),
                            TxnErrorKind::Conflict | TxnErrorKind::TxnFinished | TxnErrorKind::Busy
                        ),
                        "writer {id}: unexpected commit error {e:?}"
                    );
                    outcome(format!("failed {:?}", e.kind()));
                    None
                }
            },
        };
        if let Some(commit_ts) = commit_ts {
            oracle.committed.lock().unwrap().push(CommittedTxn {
                start_ts,
                commit_ts,
                writes,
            });
        }
    }
}

fn run_reader(client: &TxnClient, oracle: &Oracle, id: usize, stop: &AtomicBool) {
    let mut rng = rand::rng();
    while !stop.load(Ordering::Relaxed) {
        let ts = {
            let past = oracle.issued.lock().unwrap().choose(&mut rng).copied();
            match past {
                Some(ts) if rng.random_bool(0.3) => ts,
                _ => {
                    let ts = client.current_ts().unwrap();
                    oracle.issued.lock().unwrap().push(ts);
                    ts
                }
            }
        };
        let obs = if rng.random_bool(0.5) {
            Observation {
                ts,
                key: None,
                got: entries_to_map(client.scan(b"", b"", 0, ts).unwrap()),
                who: format!("reader {id} scan"),
            }
        } else {
            let k = key(rng.random_range(0..KEYS));
            let got = client.get_entry(&k, ts).unwrap();
            Observation {
                ts,
                key: Some(k),
                got: entries_to_map(got),
                who: format!("reader {id} get"),
            }
        };
        oracle.observations.lock().unwrap().push(obs);
        std::thread::sleep(Duration::from_micros(rng.random_range(0..500)));
    }
}

#[test]
fn every_read_at_ts_sees_exactly_the_transactions_committed_at_or_before_ts() {
    let opts = ClientOptions {
        // Abandoned transactions get resolved quickly; slow live ones may be rolled back, which
        // the oracle sees as a failed commit.
        lock_ttl_ms: 150,
        lock_wait_timeout: Duration::from_secs(20),
        max_backoff: Duration::from_millis(5),
    };
    let c = common::cluster_with(&[(1, b"", b"k08"), (2, b"k08", b"")], false, opts);
    let oracle = Arc::new(Oracle::default());

    for phase in 0..PHASES {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let writers: Vec<_> = (0..WRITERS)
                .map(|id| {
                    let (client, oracle) = (&c.client, &oracle);
                    s.spawn(move || run_writer(client, oracle, id, phase))
                })
                .collect();
            for id in 0..READERS {
                let (client, oracle, stop) = (&c.client, &oracle, &stop);
                s.spawn(move || run_reader(client, oracle, id, stop));
            }
            // Flushes while transactions run.
            {
                let (engine, stop) = (c.engine(), &stop);
                s.spawn(move || {
                    let mut rng = rand::rng();
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(rng.random_range(5..40)));
                        engine.flush_shard(rng.random_range(1..=2)).unwrap();
                    }
                });
            }
            for w in writers {
                w.join().unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        });
        for shard in [1, 2] {
            c.engine().flush_shard(shard).unwrap();
            c.engine().compact_shard(shard, true).unwrap();
        }
    }

    // Leave no lock behind, then one last read of everything.
    c.client
        .resolve_locks_in_range(b"", b"", Duration::from_secs(10))
        .unwrap();
    let final_ts = c.ts();
    oracle.observations.lock().unwrap().push(Observation {
        ts: final_ts,
        key: None,
        got: entries_to_map(c.client.scan(b"", b"", 0, final_ts).unwrap()),
        who: "final scan".into(),
    });

    let mut txns = oracle.committed.lock().unwrap().clone();
    txns.sort_by_key(|t| t.commit_ts);
    assert!(
        txns.len() > 50,
        "too few commits to mean anything: {}",
        txns.len()
    );

    // First-committer-wins: no two overlapping transactions wrote the same key.
    let mut by_key: BTreeMap<&[u8], Vec<&CommittedTxn>> = BTreeMap::new();
    for t in &txns {
        for (k, _) in &t.writes {
            by_key.entry(k.as_slice()).or_default().push(t);
        }
    }
    for (k, ts) in &by_key {
        for (i, a) in ts.iter().enumerate() {
            for b in &ts[i + 1..] {
                assert!(
                    !(a.start_ts < b.commit_ts && b.start_ts < a.commit_ts),
                    "overlapping writers of {:?}: {a:?} and {b:?}",
                    String::from_utf8_lossy(k)
                );
            }
        }
    }

    let observations = std::mem::take(&mut *oracle.observations.lock().unwrap());
    eprintln!(
        "{} reads, outcomes: {:?}",
        observations.len(),
        oracle.outcomes.lock().unwrap()
    );
    assert!(
        observations.len() > 100,
        "too few reads: {}",
        observations.len()
    );
    for obs in &observations {
        let mut want = Oracle::state_at(&txns, obs.ts);
        if let Some(k) = &obs.key {
            want.retain(|wk, _| wk.as_bytes() == k.as_slice());
        }
        assert_eq!(
            obs.got,
            want,
            "{} at ts {} (key {:?}) differs from the oracle",
            obs.who,
            obs.ts,
            obs.key.as_ref().map(|k| String::from_utf8_lossy(k))
        );
    }
}
