//! Golden files: tables written by format version 1 must keep decoding, and the builder must
//! keep producing the same bytes for the same input (so the format cannot drift silently).
//! To create a missing golden file (only when adding a new format version), run with
//! `STRATUS_WRITE_GOLDEN=1`.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use std::path::PathBuf;

use bytes::Bytes;
use common::*;
use sst::{BuilderOptions, Compression, FormatVersion, L0Table, Table};
use types::ColumnFamily;

fn golden(name: &str, fresh: &[u8]) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    if !path.exists() && std::env::var_os("STRATUS_WRITE_GOLDEN").is_some() {
        std::fs::write(&path, fresh).unwrap();
    }
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "golden file {} missing ({e}); run with STRATUS_WRITE_GOLDEN=1 once",
            path.display()
        )
    })
}

fn golden_oracle() -> Oracle {
    multi_block_oracle(60)
}

fn opts(compression: Compression, format_version: FormatVersion) -> BuilderOptions {
    BuilderOptions {
        block_size: 512,
        compression,
        filter_bits_per_key: 10,
        format_version,
    }
}

fn assert_reads_like_oracle(t: &Table, oracle: &Oracle) {
    for k in oracle.keys() {
        let got: Vec<_> = t.versions(k).unwrap().iter().map(as_pair).collect();
        let want: Vec<_> = oracle[k]
            .iter()
            .rev()
            .map(|(v, c)| (*v, c.clone()))
            .collect();
        assert_eq!(got, want, "key {k:?}");
    }
}

#[test]
fn golden_v1_table_decodes_and_the_builder_still_writes_it() {
    let oracle = golden_oracle();
    let fresh = build(&oracle, opts(Compression::None, FormatVersion::V1)).data;
    let stored = golden("table_v1.sst", &fresh);
    let t = Table::open(1, Bytes::from(stored.clone())).unwrap();
    assert_reads_like_oracle(&t, &oracle);
    assert_eq!(t.properties().entries, 60);
    assert!(
        fresh == stored,
        "builder output drifted from the v1 golden table"
    );
}

#[test]
fn golden_v1_zstd_table_decodes() {
    let oracle = golden_oracle();
    let fresh = build(&oracle, opts(Compression::Zstd(3), FormatVersion::V1)).data;
    // zstd's output may change between library versions; only decoding is pinned.
    let stored = golden("table_v1_zstd.sst", &fresh);
    let t = Table::open(1, Bytes::from(stored)).unwrap();
    assert_eq!(t.properties().compression, 1);
    assert_reads_like_oracle(&t, &oracle);
}

#[test]
fn golden_v1_l0_file_decodes_and_the_builder_still_writes_it() {
    let oracle = golden_oracle();
    let lock = multi_block_oracle(3);
    let fresh = sst::build_l0([
        Some(build(&oracle, opts(Compression::None, FormatVersion::V1))),
        Some(build(&lock, opts(Compression::None, FormatVersion::V1))),
        None,
    ]);
    let stored = golden("l0_v1.sst", &fresh);
    let f = L0Table::open(2, Bytes::from(stored.clone())).unwrap();
    assert_reads_like_oracle(f.cf(ColumnFamily::Write).unwrap(), &oracle);
    assert_reads_like_oracle(f.cf(ColumnFamily::Lock).unwrap(), &lock);
    assert!(f.cf(ColumnFamily::Extra).is_none());
    assert!(
        fresh == stored,
        "builder output drifted from the v1 golden L0 file"
    );
}

#[test]
fn golden_v2_table_decodes_the_builder_still_writes_it_and_it_is_smaller() {
    let oracle = golden_oracle();
    let fresh = build(&oracle, opts(Compression::None, FormatVersion::V2)).data;
    let stored = golden("table_v2.sst", &fresh);
    let t = Table::open(1, Bytes::from(stored.clone())).unwrap();
    assert_eq!(t.format_version(), FormatVersion::V2);
    assert_reads_like_oracle(&t, &oracle);
    assert_eq!(t.properties().entries, 60);
    assert!(
        fresh == stored,
        "builder output drifted from the v2 golden table"
    );
    let v1 = build(&oracle, opts(Compression::None, FormatVersion::V1)).data;
    assert!(
        stored.len() < v1.len(),
        "v2 table {} bytes, v1 {}",
        stored.len(),
        v1.len()
    );
}

#[test]
fn golden_v2_zstd_table_decodes() {
    let oracle = golden_oracle();
    let fresh = build(&oracle, opts(Compression::Zstd(3), FormatVersion::V2)).data;
    let stored = golden("table_v2_zstd.sst", &fresh);
    let t = Table::open(1, Bytes::from(stored)).unwrap();
    assert_eq!(t.properties().compression, 1);
    assert_eq!(t.format_version(), FormatVersion::V2);
    assert_reads_like_oracle(&t, &oracle);
}

#[test]
fn golden_v2_l0_file_decodes_and_the_builder_still_writes_it() {
    let oracle = golden_oracle();
    let lock = multi_block_oracle(3);
    let v2 = || opts(Compression::None, FormatVersion::V2);
    let fresh = sst::build_l0([Some(build(&oracle, v2())), Some(build(&lock, v2())), None]);
    let stored = golden("l0_v2.sst", &fresh);
    let f = L0Table::open(2, Bytes::from(stored.clone())).unwrap();
    assert_reads_like_oracle(f.cf(ColumnFamily::Write).unwrap(), &oracle);
    assert_reads_like_oracle(f.cf(ColumnFamily::Lock).unwrap(), &lock);
    assert!(
        fresh == stored,
        "builder output drifted from the v2 golden L0 file"
    );
}
