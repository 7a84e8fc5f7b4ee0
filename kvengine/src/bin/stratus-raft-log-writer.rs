//! Test helper for `tests/crash.rs`: writes Raft log batches with fsync per batch forever,
//! printing `ack N` after batch N is durable. The test kills it with SIGKILL at random moments
//! and checks what survived. Not meant for anything else.
//!
//! Batch N is one ready round of regions 1..=3: entry `5 + N` (every 7th batch also rewrites
//! entry `4 + N` with a higher term, as a new leader overwriting a conflicting suffix), a hard
//! state committing `5 + N`, and every 10th batch a truncation to `2 + N` followed by a purge.
//! Region logs start truncated at (5, 5). [`expected_term`] and [`entry_data`] are what the
//! test checks the entries against.
//!
//! `stratus-raft-log-writer DIR`

use std::io::Write;

use bytes::Bytes;
use kvengine::raft_log::{
    ConfState, EntryKind, HardState, LogBatch, LogEntry, RaftLog, RaftLogOptions,
};
use kvengine::wal::SyncPolicy;

/// The regions every batch writes to.
pub const REGIONS: u64 = 3;
/// The index every region's log starts truncated at.
pub const FIRST: u64 = 5;
/// Segment roll threshold: small, so that the writer rolls and purges often.
pub const SEGMENT_SIZE: u64 = 4096;

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: stratus-raft-log-writer DIR");
        std::process::exit(2);
    };
    if let Err(e) = run(std::path::Path::new(&dir)) {
        eprintln!("raft log writer failed: {e}");
        std::process::exit(1);
    }
}

/// The term batch `n` writes with.
pub fn term_of(n: u64) -> u64 {
    1 + n / 7
}

/// The term of the entry of batch `m` once batch `last >= m` is written: batch `m + 1`
/// rewrites it when `m + 1` is a multiple of 7.
pub fn expected_term(m: u64, last: u64) -> u64 {
    if m < last && (m + 1).is_multiple_of(7) {
        term_of(m + 1)
    } else {
        term_of(m)
    }
}

/// The data of the entry of batch `m` in `region`, written with `term`.
pub fn entry_data(region: u64, m: u64, term: u64) -> Bytes {
    let mut data = format!("r{region}-m{m}-t{term}-").into_bytes();
    data.extend_from_slice(&[m as u8; 100]);
    Bytes::from(data)
}

fn entry(region: u64, m: u64, term: u64) -> LogEntry {
    LogEntry {
        index: FIRST + m,
        term,
        kind: EntryKind::Normal,
        data: entry_data(region, m, term),
        context: Bytes::new(),
    }
}

fn batch(log: &RaftLog, n: u64) -> LogBatch {
    let term = term_of(n);
    let mut batch = LogBatch::default();
    for region in 1..=REGIONS {
        if log.state(region).is_none() {
            batch.truncate(region, FIRST, FIRST);
            batch.set_conf_state(
                region,
                ConfState {
                    voters: vec![1, 2, 3],
                    ..Default::default()
                },
            );
        }
        let mut entries = Vec::new();
        if n.is_multiple_of(7) {
            entries.push(entry(region, n - 1, term));
        }
        entries.push(entry(region, n, term));
        batch.append(region, entries);
        batch.set_hard_state(
            region,
            HardState {
                term,
                vote: 1,
                commit: FIRST + n,
            },
        );
        if n.is_multiple_of(10) {
            batch.truncate(region, FIRST + n - 3, expected_term(n - 3, n));
        }
    }
    batch
}

fn run(dir: &std::path::Path) -> kvengine::Result<()> {
    let log = RaftLog::open(RaftLogOptions {
        dir: dir.join("raft"),
        segment_size: SEGMENT_SIZE,
        sync: SyncPolicy::EveryBatch,
    })?;
    log.purge()?;
    let mut next = log.state(1).map_or(1, |s| s.last_index - FIRST + 1);
    let stdout = std::io::stdout();
    loop {
        log.write(&batch(&log, next))?;
        if next.is_multiple_of(10) {
            log.purge()?;
        }
        let mut out = stdout.lock();
        let _ = writeln!(out, "ack {next}");
        let _ = out.flush();
        next += 1;
    }
}
