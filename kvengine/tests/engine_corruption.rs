//! A flipped byte in a flushed SST file is a corruption error on open or on read, never wrong
//! data.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::sync::Arc;

use kvengine::{ColumnFamily, Engine, EngineOptions, ErrorKind, LocalDfs, SyncPolicy, WriteBatch};

fn open(dir: &std::path::Path) -> kvengine::Result<Engine> {
    let mut opts = EngineOptions::new(dir.join("engine"));
    opts.wal_sync = SyncPolicy::Off;
    opts.block_size = 512;
    Engine::open(opts, Arc::new(LocalDfs::open(dir.join("dfs"))?))
}

#[test]
fn flipped_byte_in_an_sst_is_corruption_on_open_or_read() {
    let dir = tempfile::tempdir().unwrap();
    {
        let engine = open(dir.path()).unwrap();
        engine.create_shard(1, b"", b"").unwrap();
        for i in 0..200u64 {
            let mut b = WriteBatch::new();
            b.put(
                ColumnFamily::Write,
                format!("k{i:04}").as_bytes(),
                i + 1,
                b"",
                &[7u8; 40],
            );
            engine.write(1, &b).unwrap();
        }
        engine.close(true).unwrap();
    }
    let sst = std::fs::read_dir(dir.path().join("dfs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .expect("one flushed file");
    let original = std::fs::read(&sst).unwrap();
    // About 150 evenly spread flips hit blocks, index, filter, properties and both footers
    // while keeping the test fast (every engine open replays the manifest).
    let step = (original.len() / 150).max(1);
    for i in (0..original.len())
        .step_by(step)
        .chain([original.len() - 1])
    {
        let mut bad = original.clone();
        bad[i] ^= 0x40;
        std::fs::write(&sst, &bad).unwrap();
        let engine = match open(dir.path()) {
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Corruption, "flip at {i}: {e}");
                continue;
            }
            Ok(e) => e,
        };
        let snap = engine.snapshot(1).unwrap();
        let mut it = match snap.iter(ColumnFamily::Write, b"", b"", u64::MAX, false) {
            Ok(it) => it,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Corruption, "flip at {i}: {e}");
                continue;
            }
        };
        let mut n = 0u64;
        loop {
            if !it.valid() {
                assert_eq!(n, 200, "flip at {i}: rows silently missing");
                break;
            }
            assert_eq!(
                it.key(),
                format!("k{n:04}").as_bytes(),
                "flip at {i}: wrong key"
            );
            assert_eq!(it.value(), &[7u8; 40][..], "flip at {i}: wrong value");
            n += 1;
            if let Err(e) = it.next() {
                assert_eq!(e.kind(), ErrorKind::Corruption, "flip at {i}: {e}");
                break;
            }
        }
        drop(it);
        drop(snap);
        engine.close(false).unwrap();
    }
    std::fs::write(&sst, &original).unwrap();
}
