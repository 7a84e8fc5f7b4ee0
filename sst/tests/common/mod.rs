//! Shared generators and the BTreeMap oracle for the sst integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use sst::{BuilderOptions, Compression, FormatVersion, Table, TableBuilder, Version};

/// (meta, value, tombstone) of one version.
pub type Cell = (Vec<u8>, Vec<u8>, bool);
/// key → version → cell; versions iterate ascending, so "newest first" is `.iter().rev()`.
pub type Oracle = BTreeMap<Vec<u8>, BTreeMap<u64, Cell>>;

pub fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
    // A small alphabet with 0x00 and 0xff so prefixes, collisions and edge bytes are common.
    prop::collection::vec(
        prop::sample::select(vec![0u8, b'a', b'b', b'c', 0xff]),
        1..7,
    )
}

pub fn cell_strategy() -> impl Strategy<Value = Cell> {
    (
        prop::collection::vec(any::<u8>(), 0..4),
        prop::collection::vec(any::<u8>(), 0..40),
        prop::bool::weighted(0.15),
    )
}

pub fn oracle_strategy(max_keys: usize) -> impl Strategy<Value = Oracle> {
    prop::collection::btree_map(
        key_strategy(),
        prop::collection::btree_map(1u64..60, cell_strategy(), 1..5),
        0..max_keys,
    )
}

pub fn options_strategy() -> impl Strategy<Value = BuilderOptions> {
    (
        64usize..2048,
        prop::option::of(1i32..6),
        prop::sample::select(FormatVersion::ALL.to_vec()),
    )
        .prop_map(|(block_size, z, format_version)| BuilderOptions {
            block_size,
            compression: z.map_or(Compression::None, Compression::Zstd),
            filter_bits_per_key: 10,
            format_version,
        })
}

pub fn build(oracle: &Oracle, opts: BuilderOptions) -> sst::BuiltTable {
    let mut b = TableBuilder::new(opts).expect("valid options");
    for (k, versions) in oracle {
        for (v, (meta, value, tomb)) in versions.iter().rev() {
            b.add(k, *v, meta, value, *tomb).expect("ordered input");
        }
    }
    b.finish()
}

pub fn open(oracle: &Oracle, opts: BuilderOptions) -> Table {
    let built = build(oracle, opts);
    Table::open(7, bytes::Bytes::from(built.data)).expect("fresh table opens")
}

/// The oracle's answer for a read of `key` at `ts`.
pub fn expected_at(oracle: &Oracle, key: &[u8], ts: u64) -> Option<(u64, Cell)> {
    oracle
        .get(key)?
        .range(..=ts)
        .next_back()
        .map(|(v, c)| (*v, c.clone()))
}

/// The iterator's current version, read through both the borrowed accessors and the owned
/// `version()`, which must agree.
pub fn iter_pair(it: &sst::TableIter) -> (u64, Cell) {
    let owned = as_pair(&it.version());
    let borrowed = (
        it.version_number(),
        (
            it.user_meta().to_vec(),
            it.value().to_vec(),
            it.is_tombstone(),
        ),
    );
    assert_eq!(
        owned, borrowed,
        "borrowed accessors disagree with version()"
    );
    owned
}

pub fn as_pair(v: &Version) -> (u64, Cell) {
    (
        v.version,
        (v.user_meta.to_vec(), v.value.to_vec(), v.tombstone),
    )
}

/// A deterministic table with at least 3 data blocks, old-version blocks and a filter.
pub fn multi_block_oracle(keys: u32) -> Oracle {
    let mut o = Oracle::new();
    for i in 0..keys {
        let key = format!("t1_r{i:05}").into_bytes();
        let mut versions = BTreeMap::new();
        let n = 1 + (i % 3) as u64;
        for v in 0..n {
            let ver = 10 + v * 10 + u64::from(i % 7);
            versions.insert(
                ver,
                (
                    vec![v as u8],
                    format!("value-{i}-{v}").into_bytes(),
                    i % 11 == 5 && v == n - 1,
                ),
            );
        }
        o.insert(key, versions);
    }
    o
}
