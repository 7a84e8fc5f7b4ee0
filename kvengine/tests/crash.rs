//! Crash test: a child process writes with fsync per batch and prints each acknowledged
//! sequence; once it has acknowledged new writes in this round, we SIGKILL it at a random
//! moment, reopen, and check that every acknowledged batch is there, whole, and that no batch
//! is half-applied or out of order. Every round must end by SIGKILL (not by the writer dying on
//! its own) after acknowledging at least one new batch, so no round can pass vacuously.
//! `STRATUS_CRASH_ITERATIONS` raises the number of kill points (default 20).

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use kvengine::{ColumnFamily, Engine, EngineOptions, LocalDfs, SyncPolicy};
use rand::Rng;

const KEYS_PER_BATCH: usize = 3;
/// Signal number of SIGKILL on Linux.
const SIGKILL: i32 = 9;
/// How long a writer may take to open the engine and acknowledge its first batch.
const ACK_TIMEOUT: Duration = Duration::from_secs(60);

#[test]
fn sigkill_never_loses_an_acknowledged_write_or_half_applies_one() {
    let iterations: usize = std::env::var("STRATUS_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rng();
    let mut max_acked = 0u64;
    for round in 0..iterations {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stratus-crash-writer"))
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn crash writer");
        let stdout = child.stdout.take().unwrap();
        let (ack_tx, ack_rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut acked = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = line.strip_prefix("ack ") {
                    let n = n.parse::<u64>().expect("ack number");
                    acked.push(n);
                    let _ = ack_tx.send(n);
                }
            }
            acked
        });
        // Kill only once this round has acknowledged something, at a random later moment.
        let first = ack_rx.recv_timeout(ACK_TIMEOUT).unwrap_or_else(|e| {
            panic!("round {round}: no acknowledged write within {ACK_TIMEOUT:?}: {e}")
        });
        assert!(
            first > max_acked,
            "round {round}: ack {first} repeats an earlier sequence"
        );
        std::thread::sleep(Duration::from_millis(rng.random_range(0..150)));
        child.kill().expect("SIGKILL the writer");
        let status = child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(SIGKILL),
            "round {round}: writer was not killed by SIGKILL: {status}"
        );
        let acked = reader.join().unwrap();
        let last = *acked.last().expect("the first ack was received");
        assert!(
            last > max_acked,
            "round {round}: acknowledged nothing new (last={last} before={max_acked})"
        );
        max_acked = last;

        let mut opts = EngineOptions::new(dir.path().join("engine"));
        opts.wal_sync = SyncPolicy::EveryBatch;
        opts.memtable_size = 32 * 1024;
        opts.wal_segment_size = 16 * 1024;
        let engine = Engine::open(
            opts,
            Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap()),
        )
        .unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
        assert_eq!(engine.shard_ids(), vec![1], "round {round}: shard lost");
        let seq = engine.shard_info(1).unwrap().write_sequence;
        assert!(
            seq >= max_acked,
            "round {round}: write_sequence {seq} below acknowledged {max_acked}"
        );
        let snap = engine.snapshot(1).unwrap();
        // Batches 1..=seq are whole; nothing after seq exists.
        let mut it = snap
            .iter(ColumnFamily::Write, b"", b"", u64::MAX, false)
            .unwrap();
        let mut count = 0u64;
        while it.valid() {
            let k = String::from_utf8(it.key().to_vec()).unwrap();
            let (n, j) = k[1..].split_once('_').unwrap();
            let (n, j): (u64, usize) = (n.parse().unwrap(), j.parse().unwrap());
            assert_eq!(
                n,
                count / KEYS_PER_BATCH as u64 + 1,
                "round {round}: missing or extra batch at key {k}"
            );
            assert_eq!(
                j,
                (count % KEYS_PER_BATCH as u64) as usize,
                "round {round}: partial batch at key {k}"
            );
            assert_eq!(it.value(), &[j as u8; 100][..]);
            count += 1;
            it.next().unwrap();
        }
        assert_eq!(
            count,
            seq * KEYS_PER_BATCH as u64,
            "round {round}: rows do not match write_sequence"
        );
        drop(it);
        drop(snap);
        engine.close(false).unwrap();
    }
    eprintln!("{iterations} kill points, {max_acked} acknowledged batches survived");
}
