//! Memtable-data v4: rows cut into blocks behind a checked index. Where blocks end, each block
//! read on its own, and the index and block errors a writer never produces.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use bytes::Bytes;
use changeset::memtable_data::{self, BLOCK_TARGET, Format, MAGIC};
use changeset::{ColumnFamily, MemRow, MemtableDataError};
use proptest::prelude::*;

fn write_meta(kind: u8, ts: u64, version: u64) -> Bytes {
    let mut meta = vec![kind];
    meta.extend_from_slice(&ts.to_le_bytes());
    meta.extend_from_slice(&version.to_le_bytes());
    Bytes::from(meta)
}

/// `keys` keys of `versions` versions each, with values of `value_len` bytes.
fn rows(keys: u64, versions: u64, value_len: usize) -> Vec<MemRow> {
    let mut rows = Vec::new();
    for k in 0..keys {
        for v in 0..versions {
            let version = 100 + k * versions + v;
            rows.push(MemRow {
                cf: ColumnFamily::Write,
                key: Bytes::from(format!("t_100_r{k:06}")),
                version,
                user_meta: write_meta(b'P', version - 1, version),
                value: Bytes::from(vec![(k + v) as u8; value_len]),
                tombstone: false,
            });
        }
    }
    rows
}

/// The rows of every block of `blob`, each block read on its own.
fn rows_by_block(blob: &Bytes) -> Vec<Vec<MemRow>> {
    let index = memtable_data::blocks(blob).unwrap();
    (0..index.len())
        .map(|b| {
            let mut cursor = index.rows(blob, b).unwrap();
            let mut rows = Vec::new();
            while let Some(row) = cursor.next_row() {
                rows.push(row.unwrap().to_row());
            }
            rows
        })
        .collect()
}

#[test]
fn blocks_end_before_a_new_key_once_they_reach_the_target() {
    let rows = rows(400, 3, 100);
    let blob = Bytes::from(memtable_data::encode_as(Format::V4, &rows).unwrap());
    let index = memtable_data::blocks(&blob).unwrap();
    assert!(index.len() >= 5, "{} blocks", index.len());
    assert_eq!(index.row_count(), rows.len() as u64);
    assert_eq!(index.max_version(), rows.last().unwrap().version);
    let blocks = rows_by_block(&blob);
    assert_eq!(blocks.concat(), rows);
    let mut base = 0;
    for (b, block) in blocks.iter().enumerate() {
        assert_eq!(index.row_base(b), base, "block {b}");
        assert_eq!(index.first_key(&blob, b), &block[0].key[..], "block {b}");
        base += block.len() as u64;
        if let Some(next) = blocks.get(b + 1) {
            assert_ne!(
                block.last().unwrap().key,
                next[0].key,
                "block {b} splits a key"
            );
            // A block's bytes: its rows, then its 8-byte checksum.
            let rows_len = index.block_start(b + 1) - index.block_start(b) - 8;
            assert!(rows_len >= BLOCK_TARGET, "block {b}: {rows_len} bytes");
            // It ended at the first new key past the target: without its last key's rows it
            // was still short of it.
            let last_key_rows = block.iter().filter(|r| r.key == block.last().unwrap().key);
            let last_key_len: usize = last_key_rows.map(|r| r.value.len() + 16).sum();
            assert!(
                rows_len < BLOCK_TARGET + last_key_len + 64,
                "block {b}: {rows_len} bytes"
            );
        }
    }
}

#[test]
fn every_version_of_a_key_stays_in_one_block() {
    // One key whose versions alone are several times the target, then two small keys.
    let mut rows = rows(1, 600, 100);
    rows.extend(rows_after(&rows, 2));
    let blob = Bytes::from(memtable_data::encode_as(Format::V4, &rows).unwrap());
    let blocks = rows_by_block(&blob);
    // The block passed the target on the key's first versions, yet ends only at the next key.
    assert_eq!(blocks[0].len(), 600);
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks.concat(), rows);
}

/// `n` single-version rows of keys after every key of `rows`.
fn rows_after(rows: &[MemRow], n: u64) -> Vec<MemRow> {
    let version = rows.iter().map(|r| r.version).max().unwrap_or(0);
    (1..=n)
        .map(|i| MemRow {
            cf: ColumnFamily::Write,
            key: Bytes::from(format!("t_100_z{i}")),
            version: version + i,
            user_meta: write_meta(b'P', version, version + i),
            value: Bytes::from_static(b"v"),
            tombstone: false,
        })
        .collect()
}

#[test]
fn a_v4_blob_is_smaller_than_v1_and_close_to_v3() {
    let rows = rows(2000, 1, 100);
    let v1 = memtable_data::encode_as(Format::V1, &rows).unwrap().len();
    let v3 = memtable_data::encode_as(Format::V3, &rows).unwrap().len();
    let v4 = memtable_data::encode_as(Format::V4, &rows).unwrap().len();
    // Per block: its first key stored whole, its checksum, its index entry.
    assert!(v4 < v1, "v4={v4} v1={v1}");
    assert!(v4 * 1000 <= v3 * 1003, "v4={v4} v3={v3}");
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 0xff]), 0..6)
}

proptest! {
    /// Random keys (some repeated), values large enough that blobs hold several blocks: the
    /// blocks read on their own are the blob's rows, and the whole-blob cursor agrees.
    #[test]
    fn blocks_read_alone_are_the_rows_of_the_blob(
        keys in prop::collection::vec((key(), 1..4u64, 0..3000usize, any::<bool>()), 0..40),
    ) {
        let mut rows = Vec::new();
        let mut version = 1;
        for (key, versions, value_len, tombstone) in keys {
            for _ in 0..versions {
                version += 1;
                rows.push(MemRow {
                    cf: ColumnFamily::Write,
                    key: Bytes::from(key.clone()),
                    version,
                    user_meta: write_meta(b'P', version - 1, version),
                    value: if tombstone { Bytes::new() } else { Bytes::from(vec![7; value_len]) },
                    tombstone,
                });
            }
        }
        let blob = Bytes::from(memtable_data::encode_as(Format::V4, &rows).unwrap());
        prop_assert_eq!(memtable_data::decode(&blob).unwrap(), rows.clone());
        let blocks = rows_by_block(&blob);
        prop_assert!(blocks.iter().all(|b| !b.is_empty()));
        prop_assert_eq!(blocks.concat(), rows);
    }

    /// A byte flipped anywhere in a multi-block blob: `blocks` or the block's own read fails,
    /// and a flip in a block's rows or checksum is the checksum mismatch.
    #[test]
    fn a_flipped_byte_of_a_v4_blob_is_an_error(
        position in any::<prop::sample::Index>(),
        mask in 1..=255u8,
    ) {
        let rows = rows(200, 2, 100);
        let blob = memtable_data::encode_as(Format::V4, &rows).unwrap();
        let mut corrupt = blob.clone();
        let i = position.index(corrupt.len());
        corrupt[i] ^= mask;
        let corrupt = Bytes::from(corrupt);
        prop_assert!(memtable_data::decode(&corrupt).is_err(), "index={}", i);
        let index = memtable_data::blocks(&blob).unwrap();
        let body = index.block_start(0)..blob.len() - 8 - 8 * index.len();
        let read_alone = memtable_data::blocks(&corrupt).and_then(|index| {
            (0..index.len()).try_for_each(|b| {
                let mut cursor = index.rows(&corrupt, b)?;
                while let Some(row) = cursor.next_row() {
                    row?;
                }
                Ok(())
            })
        });
        if body.contains(&i) {
            let mismatch = matches!(read_alone, Err(MemtableDataError::ChecksumMismatch { format: 4, .. }));
            prop_assert!(mismatch, "index={}: {:?}", i, read_alone);
        } else {
            prop_assert!(read_alone.is_err(), "index={}", i);
        }
    }
}

fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A v4 blob of hand-written blocks `(rows, row count, first key)` with every checksum valid,
/// cut at block target 1.
fn seal_v4(blocks: &[(Vec<u8>, u32, &[u8])], max_version: u64) -> Vec<u8> {
    seal_v4_at(blocks, max_version, 1)
}

/// [`seal_v4`] with the header's block target `target`.
fn seal_v4_at(blocks: &[(Vec<u8>, u32, &[u8])], max_version: u64, target: u64) -> Vec<u8> {
    let mut header = MAGIC.to_le_bytes().to_vec();
    header.push(4);
    let body_len: usize = blocks.iter().map(|(rows, ..)| rows.len() + 8).sum();
    varint(body_len as u64, &mut header);
    varint(blocks.iter().map(|b| u64::from(b.1)).sum(), &mut header);
    varint(blocks.len() as u64, &mut header);
    varint(target, &mut header);
    header.extend_from_slice(&max_version.to_le_bytes());
    let (mut body, mut index, mut keys) = (Vec::new(), Vec::new(), Vec::new());
    for (rows, count, first_key) in blocks {
        body.extend_from_slice(rows);
        body.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(rows).to_le_bytes());
        index.extend_from_slice(&(body.len() as u32).to_le_bytes());
        index.extend_from_slice(&count.to_le_bytes());
        keys.extend_from_slice(&(first_key.len() as u32).to_le_bytes());
        keys.extend_from_slice(first_key);
    }
    let trailer = xxhash_rust::xxh3::xxh3_64(&[&keys[..], &index, &header].concat());
    [header, body, index, trailer.to_le_bytes().to_vec()].concat()
}

/// One v3 row with its key whole (shared prefix 0), empty meta and value.
fn first_row(key: &[u8], version_delta: u64) -> Vec<u8> {
    let mut row = vec![0u8];
    varint(0, &mut row);
    varint(key.len() as u64, &mut row);
    row.extend_from_slice(key);
    varint(version_delta * 2, &mut row);
    row.extend_from_slice(&[0, 0]);
    row
}

/// The row, what was expected and what was found of a malformed row.
fn malformed_row<T: std::fmt::Debug>(
    result: Result<T, MemtableDataError>,
) -> (u64, &'static str, String) {
    match result {
        Err(MemtableDataError::MalformedRow {
            row,
            expected,
            found,
        }) => (row, expected, found),
        other => panic!("expected a malformed row, found {other:?}"),
    }
}

/// The block, what was expected and what was found of a refused block.
fn bad_block<T: std::fmt::Debug>(
    result: Result<T, MemtableDataError>,
) -> (u64, &'static str, String) {
    match result {
        Err(MemtableDataError::BadBlock {
            block,
            expected,
            found,
        }) => (block, expected, found),
        other => panic!("expected a bad block, found {other:?}"),
    }
}

#[test]
fn a_hand_sealed_blob_decodes() {
    // The helper below is what the refusals are built with: it must make a valid blob.
    let blob = seal_v4(
        &[(first_row(b"a", 5), 1, b"a"), (first_row(b"b", 6), 1, b"b")],
        6,
    );
    let rows = memtable_data::decode_slice(&blob).unwrap();
    assert_eq!(rows.iter().map(|r| r.version).collect::<Vec<_>>(), [5, 6]);
    // The same bytes as the writer's, at the blob's block target.
    changeset::fuzzing::memtable_data_decode(&blob);
}

#[test]
fn a_block_starting_with_the_previous_blocks_key_is_refused() {
    let blob = seal_v4(
        &[(first_row(b"a", 5), 1, b"a"), (first_row(b"a", 6), 1, b"a")],
        6,
    );
    let (row, expected, _) = malformed_row(memtable_data::decode_slice(&blob));
    assert_eq!((row, expected), (1, "a block starting with a new key"));
}

#[test]
fn a_row_above_the_headers_max_version_is_refused() {
    let blob = seal_v4(
        &[(first_row(b"a", 5), 1, b"a"), (first_row(b"b", 9), 1, b"b")],
        6,
    );
    let (row, expected, found) = malformed_row(memtable_data::decode_slice(&blob));
    assert_eq!(
        (row, expected),
        (1, "versions at most the header's max_version")
    );
    assert!(found.contains("version=9 max_version=6"), "{found}");
}

#[test]
fn index_entries_the_writer_never_writes_are_refused() {
    let bad_block = |blob: &[u8]| bad_block(memtable_data::blocks(blob));
    // A block of no rows.
    let blob = seal_v4(
        &[(first_row(b"a", 5), 1, b"a"), (first_row(b"b", 6), 0, b"b")],
        6,
    );
    let (block, _, found) = bad_block(&blob);
    assert_eq!(block, 1);
    assert!(found.contains("rows=0"), "{found}");
    // More rows than a block's bytes could hold.
    let blob = seal_v4(&[(first_row(b"a", 5), 9, b"a")], 6);
    let (block, _, found) = bad_block(&blob);
    assert_eq!(block, 0);
    assert!(found.contains("rows=9"), "{found}");
    // A first row that reuses the key before it: no key to search by.
    let mut row = first_row(b"a", 5);
    row[0] = 0b0000_1000;
    let blob = seal_v4(&[(row, 1, b"")], 6);
    let (_, expected, found) = bad_block(&blob);
    assert_eq!(expected, "a first row storing its key whole");
    assert!(found.contains("tag=0x08"), "{found}");
    // An index over another blob.
    let blob = seal_v4(&[(first_row(b"a", 5), 1, b"a")], 6);
    let index = memtable_data::blocks(&blob).unwrap();
    let longer = [&blob[..], &[0]].concat();
    assert!(matches!(
        index.rows(&longer, 0),
        Err(MemtableDataError::BadBlock { .. })
    ));
    // An older format has no index.
    let v3 = memtable_data::encode_as(Format::V3, &[]).unwrap();
    assert_eq!(
        memtable_data::blocks(&v3).unwrap_err(),
        MemtableDataError::NotBlocked { format: 3 }
    );
}

#[test]
fn the_index_checksum_covers_the_first_keys_and_the_header() {
    let blob = seal_v4(
        &[(first_row(b"a", 5), 1, b"a"), (first_row(b"b", 6), 1, b"b")],
        6,
    );
    let index = memtable_data::blocks(&blob).unwrap();
    // The second block's first key, changed in place (its block checksum is not read yet).
    let mut corrupt = blob.clone();
    let at = index.block_start(1) + 3;
    assert_eq!(corrupt[at], b'b');
    corrupt[at] = b'c';
    assert!(matches!(
        memtable_data::blocks(&corrupt),
        Err(MemtableDataError::ChecksumMismatch { format: 4, .. })
    ));
    // max_version, in the header (after magic, version and four one-byte varints).
    let mut corrupt = blob.clone();
    corrupt[9] ^= 1;
    assert!(matches!(
        memtable_data::blocks(&corrupt),
        Err(MemtableDataError::ChecksumMismatch { format: 4, .. })
    ));
}

#[test]
fn a_max_version_above_the_rows_highest_is_refused_by_a_walk() {
    // Each block read alone takes it (no row is above it); the whole walk does not.
    let blob = seal_v4(
        &[(first_row(b"a", 5), 1, b"a"), (first_row(b"b", 6), 1, b"b")],
        7,
    );
    let index = memtable_data::blocks(&blob).unwrap();
    assert!(index.rows(&blob, 1).unwrap().next_row().unwrap().is_ok());
    let (_, expected, found) = bad_block(memtable_data::decode_slice(&blob));
    assert_eq!(expected, "a max_version that is the rows' highest version");
    assert_eq!(found, "max_version=7 highest=6");
}

#[test]
fn blocks_cut_elsewhere_than_the_writer_would_are_refused() {
    let rows = rows(100, 1, 100);
    let blob = memtable_data::encode_as(Format::V4, &rows).unwrap();
    // The same rows re-encoded at a larger target are another blob; each is canonical at its own.
    let bigger = {
        let mut w = changeset::MemtableDataWriter::with_format(Format::V4, 0)
            .with_block_target(2 * BLOCK_TARGET);
        for row in &rows {
            w.push(row.as_ref()).unwrap();
        }
        w.finish()
    };
    assert_ne!(&bigger[..], &blob[..]);
    changeset::fuzzing::memtable_data_decode(&bigger);
    // A block short of the target that is not the last.
    let short = seal_v4_at(
        &[(first_row(b"a", 5), 1, b"a"), (first_row(b"b", 6), 1, b"b")],
        6,
        8,
    );
    let (block, expected, _) = bad_block(memtable_data::blocks(&short));
    assert_eq!(
        (block, expected),
        (0, "a block that is not the last to reach the block target")
    );
    // A block that runs past a new key it should have been cut before.
    let two_keys = [first_row(b"a", 5), row_of_new_key(b"b", 1)].concat();
    let long = seal_v4_at(&[(two_keys, 2, b"a")], 6, 7);
    let (row, expected, _) = malformed_row(memtable_data::decode_slice(&long));
    assert_eq!(
        (row, expected),
        (
            1,
            "a block ending before the first new key past the block target"
        )
    );
}

/// A v3 row after a `first_row` of a key as long as `key` sharing no byte with it: empty meta
/// and value, whose lengths (the key's and the value's) repeat the row before's, so the tag
/// flags them instead of storing them.
fn row_of_new_key(key: &[u8], version_delta: u64) -> Vec<u8> {
    let mut row = vec![0b1100_0000];
    varint(0, &mut row);
    row.extend_from_slice(key);
    varint(version_delta * 2, &mut row);
    row.push(0);
    row
}
