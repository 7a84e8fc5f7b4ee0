//! A flipped byte anywhere in a table or an L0 file gives either the right data or a corruption
//! error naming the file: never wrong data, never a panic. A truncated file is an error.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use bytes::Bytes;
use common::*;
use sst::{BuilderOptions, Compression, L0Table, Table};
use types::ColumnFamily;

/// Every read the table supports; Err if any read failed, Ok(results) otherwise.
fn read_everything(t: &Table, oracle: &Oracle) -> sst::Result<Vec<String>> {
    let mut out = Vec::new();
    for ts in [u64::MAX, 25] {
        let mut it = t.iter(ts);
        it.seek_to_first()?;
        while it.valid() {
            out.push(format!("f{ts} {:?} {:?}", it.key(), iter_pair(&it)));
            it.next()?;
        }
        it.seek_to_last()?;
        while it.valid() {
            out.push(format!("r{ts} {:?} {:?}", it.key(), iter_pair(&it)));
            it.prev()?;
        }
    }
    for k in oracle.keys().step_by(3) {
        out.push(format!(
            "g {:?} {:?}",
            k,
            t.get(k, 25)?.map(|v| as_pair(&v))
        ));
        out.push(format!(
            "v {:?} {:?}",
            k,
            t.versions(k)?.iter().map(as_pair).collect::<Vec<_>>()
        ));
    }
    out.push(format!("missing {:?}", t.get(b"t1_r99999", u64::MAX)?));
    Ok(out)
}

fn check_every_flip(data: &[u8], open: impl Fn(Bytes) -> sst::Result<Vec<String>>, file_id: u64) {
    let want = open(Bytes::copy_from_slice(data)).expect("intact file reads");
    let mut detected = 0;
    for i in 0..data.len() {
        let mut bad = data.to_vec();
        bad[i] ^= 0xff;
        match open(Bytes::from(bad)) {
            Ok(got) => assert_eq!(got, want, "flip at byte {i} returned wrong data"),
            Err(e) => {
                assert!(
                    e.is_corruption(),
                    "flip at byte {i}: not a corruption error: {e}"
                );
                assert!(e.to_string().contains(&format!("file_id={file_id}")), "{e}");
                detected += 1;
            }
        }
    }
    // Every byte is covered by a checksum or the footer magic.
    assert_eq!(detected, data.len(), "some flips went unnoticed");
}

fn small_table(compression: Compression) -> (Oracle, Vec<u8>) {
    let oracle = multi_block_oracle(40);
    let built = build(
        &oracle,
        BuilderOptions {
            block_size: 256,
            compression,
            filter_bits_per_key: 10,
            ..Default::default()
        },
    );
    let t = Table::open(1, Bytes::from(built.data.clone())).unwrap();
    assert!(
        t.properties().block_count >= 3,
        "need at least 3 data blocks"
    );
    assert!(
        t.properties().old_block_count >= 1,
        "need old-version blocks"
    );
    (oracle, built.data)
}

#[test]
fn every_flipped_byte_of_a_table_is_caught() {
    for compression in [Compression::None, Compression::Zstd(3)] {
        let (oracle, data) = small_table(compression);
        check_every_flip(&data, |b| read_everything(&Table::open(9, b)?, &oracle), 9);
    }
}

#[test]
fn every_flipped_byte_of_an_l0_file_is_caught() {
    let oracle = multi_block_oracle(40);
    let write = build(
        &oracle,
        BuilderOptions {
            block_size: 256,
            ..Default::default()
        },
    );
    let lock = build(&multi_block_oracle(5), BuilderOptions::default());
    let l0 = sst::build_l0([Some(write), None, Some(lock)]);
    check_every_flip(
        &l0,
        |b| {
            let f = L0Table::open(11, b)?;
            assert!(f.cf(ColumnFamily::Lock).is_none());
            let mut out = read_everything(f.cf(ColumnFamily::Write).expect("write cf"), &oracle)?;
            out.extend(read_everything(
                f.cf(ColumnFamily::Extra).expect("extra cf"),
                &multi_block_oracle(5),
            )?);
            Ok(out)
        },
        11,
    );
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let (_, data) = small_table(Compression::Zstd(1));
    for len in 0..data.len() {
        let r = Table::open(3, Bytes::copy_from_slice(&data[..len]));
        assert!(
            r.as_ref().is_err_and(|e| e.is_corruption()),
            "truncation to {len} opened"
        );
        assert!(L0Table::open(3, Bytes::copy_from_slice(&data[..len])).is_err());
    }
}
