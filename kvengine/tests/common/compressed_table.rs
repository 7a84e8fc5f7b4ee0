//! A zstd-compressed table of many small blocks, for the block cache's tests.
#![allow(dead_code)]
#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use sst::{BuilderOptions, Compression, TableBuilder};

/// `rows` keys `key000000`.. with ~50-byte values at version 10, in 1 KiB blocks compressed at
/// zstd `level`: the keys, and the table's bytes.
pub fn build(rows: u32, level: i32) -> (Vec<Vec<u8>>, Vec<u8>) {
    let mut builder = TableBuilder::new(BuilderOptions {
        block_size: 1024,
        compression: Compression::Zstd(level),
        ..BuilderOptions::default()
    })
    .unwrap();
    let keys: Vec<Vec<u8>> = (0..rows)
        .map(|i| format!("key{i:06}").into_bytes())
        .collect();
    for (i, k) in keys.iter().enumerate() {
        let value = format!("value-{i}-{}", "x".repeat(40));
        builder.add(k, 10, b"", value.as_bytes(), false).unwrap();
    }
    (keys, builder.finish().data)
}
