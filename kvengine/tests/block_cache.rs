//! The moka block cache: byte-weighted capacity, hits after inserts, and a compressed table
//! that decompresses each block only once when opened with the cache.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

#[path = "common/compressed_table.rs"]
mod compressed_table;

use std::sync::Arc;

use bytes::Bytes;
use kvengine::BLOCK_OVERHEAD;
use kvengine::MokaBlockCache;
use sst::{Block, BlockCache, Table};

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A block of one entry whose data is about `value_len` bytes long (format in sst/src/block.rs).
fn block(value_len: usize) -> Block {
    let key = b"k";
    let mut d = Vec::new();
    put_varint(&mut d, 0); // shared
    put_varint(&mut d, key.len() as u32);
    d.extend_from_slice(key);
    d.extend_from_slice(&1u64.to_le_bytes()); // version
    d.push(0); // flags
    put_varint(&mut d, 0); // user meta
    put_varint(&mut d, value_len as u32);
    d.extend(std::iter::repeat_n(b'v', value_len));
    d.extend_from_slice(&0u32.to_le_bytes()); // offset of entry 0
    d.extend_from_slice(&1u32.to_le_bytes()); // entry count
    Block::decode(Bytes::from(d), sst::FormatVersion::V1).expect("hand-made v1 block decodes")
}

#[test]
fn weighted_size_stays_within_byte_capacity() {
    let capacity = 64 * 1024;
    let cache = MokaBlockCache::new(capacity);
    let b = block(4000);
    let w = b.data().len() as u64 + u64::from(BLOCK_OVERHEAD);
    for i in 0..100u64 {
        cache.insert(1, i * 4096, b.clone());
        // Touch each block a few times so that admission is not what keeps the size down.
        cache.get(1, i * 4096);
    }
    cache.run_pending_tasks();
    let stats = cache.stats();
    assert!(
        stats.weighted_size <= capacity,
        "weighted size {} over capacity {capacity}",
        stats.weighted_size
    );
    assert_eq!(
        stats.weighted_size,
        stats.entry_count * w,
        "weight is bytes + overhead"
    );
    assert!(
        stats.entry_count >= capacity / w - 1,
        "cache kept too little: {stats:?}"
    );
    assert!(
        stats.evictions >= 100 - stats.entry_count,
        "every block that left was counted as evicted: {stats:?}"
    );
}

#[test]
fn get_after_insert_hits_and_unknown_blocks_miss() {
    let cache = MokaBlockCache::new(1 << 20);
    assert!(cache.get(7, 0).is_none());
    let b = block(100);
    cache.insert(7, 0, b.clone());
    let got = cache.get(7, 0).expect("inserted block is found");
    assert_eq!(got.data(), b.data());
    // Same offset in another file, another offset in the same file: different keys.
    assert!(cache.get(8, 0).is_none());
    assert!(cache.get(7, 4096).is_none());
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses), (1, 3), "{stats:?}");
}

#[test]
fn compressed_table_decompresses_each_block_once_with_the_cache() {
    let (keys, data) = compressed_table::build(2000, 3);
    let cache = Arc::new(MokaBlockCache::new(64 << 20));
    let table = Table::open_with_cache(42, Bytes::from(data), cache.clone()).unwrap();
    let blocks = table.block_sizes().len() as u64;
    assert!(blocks > 10, "the test needs many blocks, found {blocks}");

    // Two full scans and a point read of every key.
    for _ in 0..2 {
        let mut it = table.iter(u64::MAX);
        it.seek_to_first().unwrap();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next().unwrap();
        }
        assert_eq!(n, keys.len());
    }
    for k in &keys {
        assert!(table.get(k, u64::MAX).unwrap().is_some());
    }
    let stats = cache.stats();
    assert_eq!(
        stats.misses, blocks,
        "each compressed block is decompressed exactly once: {stats:?}"
    );
    assert!(stats.hits >= blocks + keys.len() as u64, "{stats:?}");
    cache.run_pending_tasks();
    assert_eq!(cache.stats().entry_count, blocks);
}
