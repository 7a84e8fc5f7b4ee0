//! Crash tests, for the engine and for the Raft log store: a child process writes with fsync
//! per batch and prints each acknowledged sequence; once it has acknowledged new writes in
//! this round, we SIGKILL it at a random moment, reopen, and check that every acknowledged batch is there, whole, and that no batch
//! is half-applied or out of order. Every round must end by SIGKILL (not by the writer dying on
//! its own) after acknowledging at least one new batch, so no round can pass vacuously.
//! `STRATUS_CRASH_ITERATIONS` raises the number of kill points (default 20).

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use kvengine::raft_log::{HardState, RaftLog, RaftLogOptions};
use kvengine::{ColumnFamily, Engine, EngineOptions, LocalDfs, SyncPolicy};
use rand::Rng;

#[allow(dead_code)] // its `main` runs in the child; the test uses its expectations
#[path = "../src/bin/stratus-raft-log-writer.rs"]
mod raft_log_writer;

const KEYS_PER_BATCH: usize = 3;
/// Signal number of SIGKILL on Linux.
const SIGKILL: i32 = 9;
/// How long a writer may take to open the engine and acknowledge its first batch.
const ACK_TIMEOUT: Duration = Duration::from_secs(60);

fn iterations() -> usize {
    std::env::var("STRATUS_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// One round: starts the writer `bin` on `dir`, waits for its first acknowledgement (which must
/// be new), SIGKILLs it at a random later moment, and returns the last batch it acknowledged,
/// which must be above `max_acked`.
fn kill_round(bin: &str, dir: &Path, round: usize, max_acked: u64, rng: &mut impl Rng) -> u64 {
    let mut child = Command::new(bin)
        .arg(dir)
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
    last
}

#[test]
fn sigkill_never_loses_an_acknowledged_write_or_half_applies_one() {
    let iterations = iterations();
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rng();
    let mut max_acked = 0u64;
    for round in 0..iterations {
        max_acked = kill_round(
            env!("CARGO_BIN_EXE_stratus-crash-writer"),
            dir.path(),
            round,
            max_acked,
            &mut rng,
        );

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

/// The same for the Raft log store: a child writes one batch per ready round for three regions
/// (entries with an occasional conflicting overwrite, hard states, truncations and purges; see
/// `src/bin/stratus-raft-log-writer.rs`) with an fdatasync each, and is SIGKILLed. On reopen
/// every acknowledged batch is there, every region ends at the same batch (none half
/// written), and every entry is the one its last writer wrote.
#[test]
fn sigkill_never_loses_an_acknowledged_raft_log_batch_or_half_writes_one() {
    use raft_log_writer::{FIRST, REGIONS, entry_data, expected_term, term_of};
    let iterations = iterations();
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rng();
    let mut max_acked = 0u64;
    let mut max_segments = 0;
    for round in 0..iterations {
        max_acked = kill_round(
            env!("CARGO_BIN_EXE_stratus-raft-log-writer"),
            dir.path(),
            round,
            max_acked,
            &mut rng,
        );
        let log = RaftLog::open(RaftLogOptions {
            dir: dir.path().join("raft"),
            segment_size: raft_log_writer::SEGMENT_SIZE,
            sync: SyncPolicy::EveryBatch,
        })
        .unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
        assert_eq!(log.regions(), [1, 2, 3], "round {round}: regions");
        let last = log.state(1).unwrap().last_index - FIRST;
        assert!(
            last >= max_acked,
            "round {round}: last batch {last} below acknowledged {max_acked}"
        );
        // Truncated by the newest batch that truncates: batch 10k truncates to 10k - 3.
        let truncated_batch = if last >= 10 { last / 10 * 10 - 3 } else { 0 };
        for region in 1..=REGIONS {
            let s = log.state(region).unwrap();
            let context = format!("round {round} region {region}");
            assert_eq!(s.last_index, FIRST + last, "{context}: half-written batch");
            assert_eq!(
                s.hard_state,
                HardState {
                    term: term_of(last),
                    vote: 1,
                    commit: FIRST + last
                },
                "{context}"
            );
            assert_eq!(s.conf_state.voters, [1, 2, 3], "{context}");
            assert_eq!(s.truncated_index, FIRST + truncated_batch, "{context}");
            let truncated_term = if truncated_batch == 0 {
                FIRST
            } else {
                expected_term(truncated_batch, last)
            };
            assert_eq!(s.truncated_term, truncated_term, "{context}");
            let entries = log
                .entries(region, s.truncated_index + 1, s.last_index + 1, None)
                .unwrap();
            assert_eq!(entries.len() as u64, last - truncated_batch, "{context}");
            for (entry, m) in entries.iter().zip(truncated_batch + 1..) {
                let term = expected_term(m, last);
                assert_eq!(
                    (entry.index, entry.term, &entry.data),
                    (FIRST + m, term, &entry_data(region, m, term)),
                    "{context}: entry of batch {m}"
                );
            }
        }
        // Truncation and purge keep the log small whatever the number of rounds (about one
        // segment per 10 batches, purged every 10 batches and when the writer starts).
        max_segments = max_segments.max(log.segment_count());
        assert!(
            log.segment_count() <= 12,
            "round {round}: {} segments",
            log.segment_count()
        );
    }
    eprintln!(
        "{iterations} kill points, {max_acked} acknowledged raft log batches survived, at most {max_segments} segments"
    );
}
