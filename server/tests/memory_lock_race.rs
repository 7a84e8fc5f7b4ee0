//! The memory-lock race: a read that starts while an async-commit (or 1PC) prewrite is between
//! its conflict check / `lock_keys` and its engine write must either meet the lock or have a
//! start_ts below the eventual commit_ts. Either way the read is repeatable: reading again at
//! the same ts after the commit returns the same thing.
//!
//! A prewrite hook pauses the prewrite inside that window. Each iteration picks an
//! interleaving: the read runs entirely inside the window (it must meet the memory lock), or
//! entirely before the prewrite (its start_ts must be below the commit_ts), or concurrently
//! with random delays on both sides.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use server::txn::{KvEntry, Mode, Storage, TxnError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Interleaving {
    /// The read happens while the prewrite is paused in the window.
    InsideWindow,
    /// The read finishes before the prewrite starts.
    BeforePrewrite,
    /// Both run freely with random delays.
    Racing,
}

/// What the hook does in the current iteration.
struct HookControl {
    interleaving: Mutex<Interleaving>,
    entered: Mutex<Option<mpsc::Sender<()>>>,
    release: Mutex<Option<mpsc::Receiver<()>>>,
    max_delay_us: u64,
}

enum ReadKind {
    Get,
    Scan,
}

fn read(
    storage: &Storage,
    kind: &ReadKind,
    key: &[u8],
    ts: u64,
) -> Result<Option<Vec<u8>>, TxnError> {
    match kind {
        ReadKind::Get => Ok(storage.get(key, ts, &[])?.map(|e| e.value)),
        ReadKind::Scan => {
            let mut end = key.to_vec();
            end.push(0);
            let got: Vec<KvEntry> = storage.scan(key, &end, 0, ts, false)?;
            Ok(got.into_iter().next().map(|e| e.value))
        }
    }
}

#[test]
fn a_read_racing_a_server_timestamped_prewrite_meets_the_lock_or_starts_below_the_commit_ts() {
    let c = common::two_shards(false);
    let storage = c.storage.clone();
    let ctl = Arc::new(HookControl {
        interleaving: Mutex::new(Interleaving::Racing),
        entered: Mutex::new(None),
        release: Mutex::new(None),
        max_delay_us: 300,
    });
    {
        let ctl = ctl.clone();
        storage.set_prewrite_hook(Some(Box::new(move |_point| {
            let mode = *ctl.interleaving.lock().unwrap();
            match mode {
                Interleaving::InsideWindow => {
                    if let Some(tx) = ctl.entered.lock().unwrap().take() {
                        tx.send(()).unwrap();
                    }
                    if let Some(rx) = ctl.release.lock().unwrap().take() {
                        rx.recv_timeout(Duration::from_secs(10))
                            .expect("reader never released the prewrite");
                    }
                }
                Interleaving::Racing => {
                    let us = rand::rng().random_range(0..ctl.max_delay_us);
                    std::thread::sleep(Duration::from_micros(us));
                }
                Interleaving::BeforePrewrite => {}
            }
        })));
    }

    let mut rng = rand::rng();
    let mut seen = [0usize; 3]; // locked, read below commit_ts, read the commit
    for i in 0..600 {
        let interleaving = match i % 3 {
            0 => Interleaving::InsideWindow,
            1 => Interleaving::BeforePrewrite,
            _ => Interleaving::Racing,
        };
        *ctl.interleaving.lock().unwrap() = interleaving;
        let one_pc = rng.random_bool(0.3);
        let (mode, keys) = if one_pc {
            (Mode::OnePc, vec![format!("a{i:04}"), format!("b{i:04}")])
        } else {
            (
                Mode::AsyncCommit,
                vec![format!("a{i:04}"), format!("z{i:04}")],
            )
        };
        let read_key = keys[rng.random_range(0..2)].clone().into_bytes();
        let kind = if rng.random_bool(0.5) {
            ReadKind::Get
        } else {
            ReadKind::Scan
        };

        let mut txn = c.client.begin().unwrap();
        let start_ts = txn.start_ts();
        for k in &keys {
            txn.set(k.clone(), format!("v{i}"));
        }
        let (entered_tx, entered_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel();
        *ctl.entered.lock().unwrap() = Some(entered_tx);
        *ctl.release.lock().unwrap() = Some(release_rx);

        let (read_ts, first_read, committed) = std::thread::scope(|scope| {
            let (kind, read_key, storage, c, ctl) = (&kind, &read_key, &storage, &c, &ctl);
            let reader = scope.spawn(move || {
                match interleaving {
                    Interleaving::InsideWindow => {
                        entered_rx
                            .recv_timeout(Duration::from_secs(10))
                            .expect("prewrite never reached the window");
                    }
                    Interleaving::Racing => {
                        let us = rand::rng().random_range(0..ctl.max_delay_us);
                        std::thread::sleep(Duration::from_micros(us));
                    }
                    Interleaving::BeforePrewrite => {}
                }
                let ts = c.ts();
                let got = read(storage, kind, read_key, ts);
                let _ = release_tx.send(());
                (ts, got)
            });
            if interleaving == Interleaving::BeforePrewrite {
                // The read is over before the prewrite begins.
                let (ts, got) = reader.join().unwrap();
                let committed = txn.commit(mode).unwrap();
                (ts, got, committed)
            } else {
                let committed = txn.commit(mode).unwrap();
                let (ts, got) = reader.join().unwrap();
                (ts, got, committed)
            }
        });
        // Left-over senders of an iteration whose hook did not wait must not leak into the next.
        ctl.entered.lock().unwrap().take();
        ctl.release.lock().unwrap().take();

        let ctx = format!(
            "iteration {i} {interleaving:?} {mode:?} start_ts={start_ts} read_ts={read_ts} commit_ts={}",
            committed.commit_ts
        );
        match &first_read {
            Err(TxnError::KeyIsLocked(lock)) => {
                assert_eq!(lock.start_ts, start_ts, "{ctx}: locked by someone else");
                seen[0] += 1;
            }
            Ok(None) => {
                assert!(
                    read_ts < committed.commit_ts,
                    "{ctx}: read missed a transaction committed at or below its start_ts"
                );
                seen[1] += 1;
            }
            Ok(Some(v)) => {
                assert!(
                    read_ts >= committed.commit_ts,
                    "{ctx}: read a commit above its ts"
                );
                assert_eq!(v, format!("v{i}").as_bytes(), "{ctx}");
                seen[2] += 1;
            }
            Err(e) => panic!("{ctx}: unexpected error {e:?}"),
        }
        match interleaving {
            Interleaving::InsideWindow => assert!(
                matches!(first_read, Err(TxnError::KeyIsLocked(_))),
                "{ctx}: a read inside the window must meet the memory lock, got {first_read:?}"
            ),
            Interleaving::BeforePrewrite => assert!(
                committed.commit_ts > read_ts,
                "{ctx}: commit_ts not above an earlier read"
            ),
            Interleaving::Racing => {}
        }
        // Repeatable: the same ts reads the same thing now that the transaction is done.
        if let Ok(first) = first_read {
            let again = c.client.get(&read_key, read_ts).unwrap();
            assert_eq!(again, first, "{ctx}: read at the same ts changed");
        }
    }
    storage.set_prewrite_hook(None);
    assert!(
        seen[0] > 0 && seen[1] > 0,
        "interleavings not exercised: {seen:?}"
    );
}
