//! Tables opened from a local file with positioned reads (`Table::open_local`, compressed
//! tables with a block cache) answer exactly as the same bytes read in place, fill the cache
//! with every block they read, and report a corrupt block on disk as corruption.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::*;
use proptest::prelude::*;
use sst::{Block, BlockCache, BuilderOptions, Compression, Table};

#[derive(Default)]
struct MapCache(Mutex<HashMap<(u64, u64), Block>>);

impl BlockCache for MapCache {
    fn get(&self, file_id: u64, offset: u64) -> Option<Block> {
        self.0.lock().unwrap().get(&(file_id, offset)).cloned()
    }
    fn insert(&self, file_id: u64, offset: u64, block: Block) {
        self.0.lock().unwrap().insert((file_id, offset), block);
    }
    fn contains(&self, file_id: u64, offset: u64) -> bool {
        self.0.lock().unwrap().contains_key(&(file_id, offset))
    }
}

fn write_file(dir: &std::path::Path, data: &[u8]) -> std::fs::File {
    let path = dir.join("1.sst");
    std::fs::write(&path, data).unwrap();
    std::fs::File::open(&path).unwrap()
}

fn scan(t: &Table, ts: u64) -> Vec<(Vec<u8>, (u64, Cell))> {
    let mut it = t.iter(ts);
    it.seek_to_first().unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), iter_pair(&it)));
        it.next().unwrap();
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn positioned_tables_read_like_tables_in_memory(
        oracle in oracle_strategy(60),
        opts in options_strategy(),
        ts in 0u64..70,
    ) {
        let compressed = opts.compression != Compression::None;
        let built = build(&oracle, opts);
        let dir = tempfile::tempdir().unwrap();
        let cache = Arc::new(MapCache::default());
        let t = Table::open_local(1, write_file(dir.path(), &built.data), Some(cache.clone())).unwrap();
        let mem = Table::open(1, bytes::Bytes::from(built.data)).unwrap();
        // Compressed tables read positioned; uncompressed ones stay mapped.
        prop_assert_eq!(t.reads_positioned(), compressed);
        prop_assert_eq!(t.size(), mem.size());
        prop_assert_eq!(scan(&t, ts), scan(&mem, ts));
        for k in oracle.keys() {
            let got = t.get(k, ts).unwrap().map(|v| as_pair(&v));
            prop_assert_eq!(got, expected_at(&oracle, k, ts));
        }
        if t.reads_positioned() && !oracle.is_empty() {
            prop_assert!(!cache.0.lock().unwrap().is_empty(), "blocks read went to the cache");
        }
    }
}

#[test]
fn without_a_cache_a_compressed_table_is_mapped() {
    let oracle = multi_block_oracle(300);
    let opts = BuilderOptions {
        block_size: 512,
        compression: Compression::Zstd(1),
        ..Default::default()
    };
    let built = build(&oracle, opts.clone());
    let dir = tempfile::tempdir().unwrap();
    let t = Table::open_local(1, write_file(dir.path(), &built.data), None).unwrap();
    assert!(!t.reads_positioned());
    assert_eq!(
        scan(&t, u64::MAX).len(),
        scan(&open(&oracle, opts), u64::MAX).len()
    );
}

#[test]
fn a_corrupt_block_read_positioned_is_reported_as_corruption() {
    let oracle = multi_block_oracle(300);
    let opts = BuilderOptions {
        block_size: 512,
        compression: Compression::Zstd(1),
        ..Default::default()
    };
    let mut data = build(&oracle, opts).data;
    // The first block starts at offset 0; its payload's second byte is inside the zstd frame.
    data[1] ^= 0xff;
    let dir = tempfile::tempdir().unwrap();
    let t = Table::open_local(
        1,
        write_file(dir.path(), &data),
        Some(Arc::new(MapCache::default())),
    )
    .unwrap();
    assert!(t.reads_positioned());
    let mut it = t.iter(u64::MAX);
    let err = it.seek_to_first().unwrap_err();
    assert!(
        matches!(err, sst::Error::Corruption { file_id: 1, .. }),
        "expected corruption of file 1, found {err:?}"
    );
}

/// A cache of open tables weighs each by `memory_size`: a download counts whole (its metadata
/// once, as a part of it), a map or a positioned file only its metadata, never nothing.
#[test]
fn a_downloaded_table_weighs_its_bytes_and_a_local_one_its_metadata() {
    let oracle = multi_block_oracle(300);
    for compression in [Compression::None, Compression::Zstd(1)] {
        let opts = BuilderOptions {
            block_size: 512,
            compression,
            ..Default::default()
        };
        let data = build(&oracle, opts).data;
        let dir = tempfile::tempdir().unwrap();
        let cache: Arc<dyn BlockCache> = Arc::new(MapCache::default());
        let local = Table::open_local(1, write_file(dir.path(), &data), Some(cache)).unwrap();
        let downloaded = Table::open(1, bytes::Bytes::from(data.clone())).unwrap();
        let size = data.len() as u64;
        let meta = local.memory_size();
        assert!(meta > 0, "{compression:?}: metadata weighs something");
        assert!(
            meta < size / 2,
            "{compression:?}: a local table holds its metadata, not its {size} bytes: {meta}"
        );
        let whole = downloaded.memory_size();
        assert!(
            whole >= size && whole < size + meta,
            "{compression:?}: a download holds every byte, its metadata among them: {whole} \
             for {size} bytes and {meta} of metadata"
        );
    }
}
