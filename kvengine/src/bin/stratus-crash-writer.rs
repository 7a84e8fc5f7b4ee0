//! Test helper for `tests/crash.rs`: opens an engine with fsync per batch and writes batches
//! forever, printing `ack N` after write N is acknowledged. The test kills it with SIGKILL at
//! random moments and checks what survived. Not meant for anything else.
//!
//! `stratus-crash-writer DIR`

use std::io::Write;
use std::sync::Arc;

use kvengine::{ColumnFamily, Engine, EngineOptions, LocalDfs, SyncPolicy, WriteBatch};

/// Keys written per batch: a batch survives whole or not at all.
pub const KEYS_PER_BATCH: usize = 3;

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: stratus-crash-writer DIR");
        std::process::exit(2);
    };
    if let Err(e) = run(std::path::Path::new(&dir)) {
        eprintln!("crash writer failed: {e}");
        std::process::exit(1);
    }
}

fn run(dir: &std::path::Path) -> kvengine::Result<()> {
    let mut opts = EngineOptions::new(dir.join("engine"));
    opts.wal_sync = SyncPolicy::EveryBatch;
    opts.memtable_size = 32 * 1024;
    opts.wal_segment_size = 16 * 1024;
    let engine = Engine::open(opts, Arc::new(LocalDfs::open(dir.join("dfs"))?))?;
    if engine.shard_ids().is_empty() {
        engine.create_shard(1, b"", b"")?;
    }
    let mut next = engine.shard_info(1)?.write_sequence + 1;
    let stdout = std::io::stdout();
    loop {
        let mut b = WriteBatch::new();
        for j in 0..KEYS_PER_BATCH {
            b.put(
                ColumnFamily::Write,
                format!("r{next:08}_{j}").as_bytes(),
                next,
                b"",
                &[j as u8; 100],
            );
        }
        let seq = engine.write(1, &b)?;
        assert_eq!(seq, next, "sequence follows the recovered write_sequence");
        let mut out = stdout.lock();
        let _ = writeln!(out, "ack {seq}");
        let _ = out.flush();
        next += 1;
    }
}
