//! Memtable-data codec: round trips, corruption detection, and each decode error.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use bytes::Bytes;
use changeset::memtable_data::{self, Format, MAGIC, RESTART_INTERVAL};
use changeset::{ColumnFamily, MemRow, MemtableDataError, MemtableDataWriter};
use proptest::prelude::*;

/// Keys from a small alphabet, so that neighbours share prefixes and repeat.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 0xff]), 0..6)
}

fn row() -> impl Strategy<Value = MemRow> {
    (
        0..3usize,
        key(),
        any::<u64>(),
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..20).prop_map(Some),
            // A WRITE meta: kind, start_ts, then the version (filled in below).
            (any::<u8>(), any::<u64>()).prop_map(|(kind, ts)| {
                let mut meta = vec![kind];
                meta.extend_from_slice(&ts.to_le_bytes());
                Some(meta)
            }),
            Just(None),
        ],
        prop::collection::vec(any::<u8>(), 0..40),
        any::<bool>(),
    )
        .prop_map(|(cf, key, version, meta, value, tombstone)| MemRow {
            cf: ColumnFamily::ALL[cf],
            key: Bytes::from(key),
            version,
            user_meta: match meta {
                Some(meta) if meta.len() == 9 => {
                    Bytes::from([&meta[..], &version.to_le_bytes()].concat())
                }
                Some(meta) => Bytes::from(meta),
                None => Bytes::new(),
            },
            value: Bytes::from(value),
            tombstone,
        })
}

/// Rows as the producer emits them: grouped by key, each key's versions oldest first.
fn rows() -> impl Strategy<Value = Vec<MemRow>> {
    prop::collection::vec(row(), 0..48).prop_map(|mut rows| {
        rows.sort_by(|a, b| (&a.key, a.cf, a.version).cmp(&(&b.key, b.cf, b.version)));
        rows.dedup_by(|a, b| (a.cf, &a.key, a.version) == (b.cf, &b.key, b.version));
        rows
    })
}

fn format() -> impl Strategy<Value = Format> {
    prop::sample::select(Format::ALL.to_vec())
}

fn blob() -> impl Strategy<Value = Vec<u8>> {
    (format(), rows()).prop_map(|(format, rows)| memtable_data::encode_as(format, &rows).unwrap())
}

proptest! {
    #[test]
    fn memtable_data_encode_decode_round_trips(format in format(), rows in rows()) {
        let blob = Bytes::from(memtable_data::encode_as(format, &rows).unwrap());
        prop_assert_eq!(&memtable_data::decode(&blob).unwrap(), &rows);
        let mut cursor = memtable_data::rows(&blob).unwrap();
        prop_assert_eq!(cursor.format(), format);
        let mut walked = Vec::new();
        while let Some(row) = cursor.next_row() {
            walked.push(row.unwrap().to_row());
        }
        prop_assert_eq!(walked, rows);
    }

    /// Keys in any order (versions ascend throughout, so the writer takes them): the order the
    /// cursor reports for each row is its key compared to the row before's, restart rows and
    /// prefix-sharing keys included.
    #[test]
    fn the_cursor_orders_each_key_against_the_one_before(
        format in format(),
        keys in prop::collection::vec(key(), 0..3 * RESTART_INTERVAL as usize),
    ) {
        let rows: Vec<MemRow> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| MemRow {
                cf: ColumnFamily::Write,
                key: Bytes::from(k.clone()),
                version: i as u64 + 1,
                user_meta: Bytes::new(),
                value: Bytes::new(),
                tombstone: false,
            })
            .collect();
        let blob = Bytes::from(memtable_data::encode_as(format, &rows).unwrap());
        let mut cursor = memtable_data::rows(&blob).unwrap();
        let mut i = 0;
        while let Some(row) = cursor.next_row_ordered() {
            let (row, order) = row.unwrap();
            prop_assert_eq!(row.key, &keys[i][..]);
            let expected = match i {
                0 => std::cmp::Ordering::Greater,
                _ => keys[i].cmp(&keys[i - 1]),
            };
            prop_assert_eq!(order, expected, "row {}", i);
            i += 1;
        }
        prop_assert_eq!(i, keys.len());
    }

    #[test]
    fn transcoding_between_formats_keeps_the_rows(rows in rows()) {
        for from in Format::ALL {
            let blob = Bytes::from(memtable_data::encode_as(from, &rows).unwrap());
            for to in Format::ALL {
                let there = memtable_data::transcode(&blob, to).unwrap();
                prop_assert_eq!(&there[..], &memtable_data::encode_as(to, &rows).unwrap()[..]);
                let back = memtable_data::transcode(&there, from).unwrap();
                prop_assert_eq!(&back, &blob);
            }
        }
    }

    #[test]
    fn every_truncation_of_memtable_data_is_an_error(blob in blob()) {
        for len in 0..blob.len() {
            prop_assert!(memtable_data::decode_slice(&blob[..len]).is_err(), "len={}", len);
        }
    }

    #[test]
    fn a_flipped_byte_in_memtable_data_is_an_error(
        blob in blob(),
        position in any::<prop::sample::Index>(),
        mask in 1..=255u8,
    ) {
        let mut corrupt = blob.clone();
        let index = position.index(corrupt.len());
        corrupt[index] ^= mask;
        let decoded = memtable_data::decode_slice(&corrupt);
        prop_assert!(decoded.is_err(), "index={} mask={:#x}", index, mask);
        // The checksum is compared after the rows, yet a flip anywhere it covers is reported
        // as the mismatch, never as whatever malformed row the flip made.
        if checksummed_rows(&blob).contains(&index) {
            let is_mismatch = matches!(decoded, Err(MemtableDataError::ChecksumMismatch { .. }));
            prop_assert!(is_mismatch, "index={} mask={:#x}: {:?}", index, mask, decoded);
        }
    }
}

/// Where the rows of a blob sit: past the header's length fields (whose corruption is caught
/// as a length error first), up to the stored checksum. v1's row count is among the rows; v4's
/// rows are its blocks (each ending in its checksum), before the block index.
fn checksummed_rows(blob: &[u8]) -> std::ops::Range<usize> {
    let mut pos = 5;
    let varint = |pos: &mut usize| {
        let (mut value, mut shift) = (0u64, 0);
        while blob[*pos] & 0x80 != 0 {
            value |= u64::from(blob[*pos] & 0x7f) << shift;
            shift += 7;
            *pos += 1;
        }
        value |= u64::from(blob[*pos]) << shift;
        *pos += 1;
        value
    };
    varint(&mut pos);
    match blob[4] {
        1 => pos..blob.len() - 4,
        4 => {
            varint(&mut pos);
            let blocks = varint(&mut pos) as usize;
            varint(&mut pos);
            pos += 8;
            pos..blob.len() - 8 - 8 * blocks
        }
        _ => {
            varint(&mut pos);
            pos..blob.len() - 8
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

/// A v1 blob with a hand-written body and a valid header and CRC, to reach the body checks.
fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_le_bytes().to_vec();
    out.push(Format::V1.as_u8());
    varint(body.len() as u64, &mut out);
    out.extend_from_slice(body);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// One row body: cf, flags, key, version, empty meta, empty value.
fn raw_row(cf: u8, flags: u8, key: &[u8], version: u64) -> Vec<u8> {
    let mut row = vec![cf, flags];
    varint(key.len() as u64, &mut row);
    row.extend_from_slice(key);
    row.extend_from_slice(&version.to_le_bytes());
    row.extend_from_slice(&[0, 0]);
    row
}

fn two_rows() -> Vec<u8> {
    let rows = [
        MemRow {
            cf: ColumnFamily::Write,
            key: Bytes::from_static(b"k"),
            version: 5,
            user_meta: Bytes::from_static(b"m"),
            value: Bytes::from_static(b"old"),
            tombstone: false,
        },
        MemRow {
            cf: ColumnFamily::Write,
            key: Bytes::from_static(b"k"),
            version: 9,
            user_meta: Bytes::from_static(b"m"),
            value: Bytes::new(),
            tombstone: true,
        },
    ];
    memtable_data::encode_as(Format::V1, &rows).unwrap()
}

#[test]
fn bad_magic_is_reported_with_the_bytes_found() {
    let mut blob = two_rows();
    blob[..4].copy_from_slice(b"ABCD");
    assert_eq!(
        memtable_data::decode_slice(&blob),
        Err(MemtableDataError::BadMagic {
            found: u32::from_le_bytes(*b"ABCD")
        })
    );
}

#[test]
fn unsupported_version_is_reported_with_the_version_found() {
    let mut blob = two_rows();
    let newest = Format::NEWEST.as_u8();
    blob[4] = newest + 1;
    let err = memtable_data::decode_slice(&blob).unwrap_err();
    assert_eq!(
        err,
        MemtableDataError::UnsupportedVersion {
            found: newest + 1,
            supported: newest
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "unsupported memtable data format version found={} supported={newest}",
            newest + 1
        )
    );
}

#[test]
fn checksum_mismatch_reports_stored_and_computed_values() {
    let mut blob = two_rows();
    let body_byte = blob.len() - 6;
    blob[body_byte] ^= 0x01;
    let end = blob.len() - 4;
    let expected = u64::from(u32::from_le_bytes(blob[end..].try_into().unwrap()));
    let found = u64::from(crc32fast::hash(&blob[..end]));
    assert_eq!(
        memtable_data::decode_slice(&blob),
        Err(MemtableDataError::ChecksumMismatch {
            format: 1,
            expected,
            found
        })
    );
}

#[test]
fn truncation_reports_needed_and_available_bytes() {
    let blob = two_rows();
    let short = &blob[..blob.len() - 1];
    assert_eq!(
        memtable_data::decode_slice(short),
        Err(MemtableDataError::Truncated {
            needed: blob.len() as u64,
            available: short.len() as u64
        })
    );
}

#[test]
fn trailing_bytes_after_the_checksum_are_rejected() {
    let mut blob = two_rows();
    blob.extend_from_slice(&[0, 0]);
    assert_eq!(
        memtable_data::decode_slice(&blob),
        Err(MemtableDataError::TrailingBytes { count: 2 })
    );
}

#[test]
fn a_huge_row_count_is_rejected_before_allocating() {
    let mut body = Vec::new();
    varint(u64::MAX / 2, &mut body);
    body.extend_from_slice(&raw_row(0, 0, b"k", 1));
    assert_eq!(
        memtable_data::decode_slice(&seal(&body)),
        Err(MemtableDataError::RowCountTooLarge {
            count: u64::MAX / 2,
            max: 1
        })
    );
}

#[test]
fn a_key_longer_than_the_body_is_truncation() {
    let mut body = vec![1, 0, 0];
    varint(1 << 40, &mut body);
    body.extend_from_slice(&[0; 20]);
    assert!(matches!(
        memtable_data::decode_slice(&seal(&body)),
        Err(MemtableDataError::Truncated { .. })
    ));
}

#[test]
fn unknown_column_family_and_flags_are_rejected() {
    let mut body = vec![1];
    body.extend_from_slice(&raw_row(3, 0, b"k", 1));
    assert_eq!(
        memtable_data::decode_slice(&seal(&body)),
        Err(MemtableDataError::UnknownColumnFamily { cf: 3, row: 0 })
    );
    let mut body = vec![1];
    body.extend_from_slice(&raw_row(0, 0b10, b"k", 1));
    assert_eq!(
        memtable_data::decode_slice(&seal(&body)),
        Err(MemtableDataError::UnknownFlags {
            flags: 0b10,
            row: 0
        })
    );
}

#[test]
fn rows_of_a_key_newest_first_are_rejected_by_decoder_and_writer() {
    let mut body = vec![2];
    body.extend_from_slice(&raw_row(0, 0, b"k", 9));
    body.extend_from_slice(&raw_row(0, 0, b"k", 5));
    assert_eq!(
        memtable_data::decode_slice(&seal(&body)),
        Err(MemtableDataError::VersionOrder {
            row: 1,
            previous: 9,
            version: 5
        })
    );

    let mut writer = MemtableDataWriter::with_format(Format::V1, 0);
    let rows = memtable_data::decode(&Bytes::from(two_rows())).unwrap();
    writer.push(rows[1].as_ref()).unwrap();
    assert_eq!(
        writer.push(rows[0].as_ref()),
        Err(MemtableDataError::VersionOrder {
            row: 1,
            previous: 9,
            version: 5
        })
    );
    assert_eq!(writer.rows(), 1);
}

#[test]
fn same_version_in_another_column_family_is_allowed() {
    let mut body = vec![2];
    body.extend_from_slice(&raw_row(0, 0, b"k", 9));
    body.extend_from_slice(&raw_row(1, 0, b"k", 9));
    assert_eq!(memtable_data::decode_slice(&seal(&body)).unwrap().len(), 2);
}

#[test]
fn bytes_left_in_the_body_after_the_rows_are_rejected() {
    let mut body = vec![1];
    body.extend_from_slice(&raw_row(0, 0, b"k", 1));
    body.push(0);
    assert_eq!(
        memtable_data::decode_slice(&seal(&body)),
        Err(MemtableDataError::TrailingBytes { count: 1 })
    );
}

#[test]
fn decoded_rows_slice_the_input_instead_of_copying() {
    let blob = Bytes::from(two_rows());
    let rows = memtable_data::decode(&blob).unwrap();
    let input = blob.as_ptr_range();
    for row in &rows {
        assert!(input.contains(&row.key.as_ptr()));
        assert!(input.contains(&row.user_meta.as_ptr()));
    }
    assert!(input.contains(&rows[0].value.as_ptr()));
}

/// WRITE rows as a memtable ships them: record keys of one table, the engine's WRITE meta.
fn write_rows(count: u64) -> Vec<MemRow> {
    (0..count)
        .map(|i| {
            let version = 1_000_000 + i * 3;
            let mut meta = vec![b'P'];
            meta.extend_from_slice(&(version - 1).to_le_bytes());
            meta.extend_from_slice(&version.to_le_bytes());
            MemRow {
                cf: ColumnFamily::Write,
                key: Bytes::from(format!("t\x7f\x00\x00\x00\x00\x00\x00\x07_r{i:08}")),
                version,
                user_meta: Bytes::from(meta),
                value: Bytes::from(vec![b'v'; 8]),
                tombstone: false,
            }
        })
        .collect()
}

/// Rows of several checksum chunks (the cursor feeds the checksum 64 KiB at a time).
fn long_rows() -> Vec<MemRow> {
    write_rows(3000)
        .into_iter()
        .enumerate()
        .map(|(i, mut row)| {
            row.value = Bytes::from(vec![i as u8; 100]);
            row
        })
        .collect()
}

#[test]
fn a_corrupt_value_is_reported_after_the_rows_as_a_checksum_mismatch() {
    let rows = long_rows();
    for format in Format::ALL {
        let blob = memtable_data::encode_as(format, &rows).unwrap();
        assert!(blob.len() > 4 * 64 * 1024, "{format}: {} bytes", blob.len());
        let region = checksummed_rows(&blob);
        // A value byte in the first chunk, one in the middle, the last byte of the rows.
        for index in [
            region.start + 200,
            region.start + region.len() / 2,
            region.end - 1,
        ] {
            let mut corrupt = blob.clone();
            corrupt[index] ^= 0x40;
            let mut cursor = memtable_data::rows(&corrupt).unwrap();
            let mut yielded = 0;
            let end = loop {
                match cursor.next_row() {
                    Some(Ok(_)) => yielded += 1,
                    Some(Err(e)) => break e,
                    None => panic!("{format} index={index}: the cursor ended without an error"),
                }
            };
            assert!(
                matches!(end, MemtableDataError::ChecksumMismatch { format: f, .. } if f == format.as_u8()),
                "{format} index={index}: {end:?}"
            );
            // A v4 block's checksum is compared after the block's last row: the rows up to
            // there are yielded.
            let through = match format {
                Format::V4 => {
                    let blocks = memtable_data::blocks(&blob).unwrap();
                    let first_after = (0..blocks.len())
                        .find(|&b| blocks.block_start(b) > index)
                        .unwrap_or(blocks.len());
                    match first_after {
                        b if b == blocks.len() => rows.len(),
                        b => blocks.row_base(b) as usize,
                    }
                }
                _ => rows.len(),
            };
            assert_eq!(
                yielded, through,
                "{format} index={index}: a value flip decodes"
            );
            assert!(
                cursor.next_row().is_none(),
                "the cursor ends after its error"
            );
            assert!(matches!(
                memtable_data::decode_slice(&corrupt),
                Err(MemtableDataError::ChecksumMismatch { .. })
            ));
            // Passing a blob on in its own format checks the checksum without walking it.
            assert!(matches!(
                memtable_data::transcode(&Bytes::from(corrupt), format),
                Err(MemtableDataError::ChecksumMismatch { .. })
            ));
        }
        let intact = Bytes::from(blob);
        assert_eq!(memtable_data::transcode(&intact, format).unwrap(), intact);
        assert_eq!(memtable_data::decode(&intact).unwrap(), rows);
    }
}

#[test]
fn a_malformed_row_of_a_corrupt_blob_is_reported_as_the_checksum_mismatch() {
    let rows = long_rows();
    for format in [Format::V2, Format::V3] {
        let blob = memtable_data::encode_as(format, &rows).unwrap();
        // The first row's tag, set to bits no format knows: malformed, and caught as such
        // only when the checksum agrees.
        let first_tag = checksummed_rows(&blob).start;
        let mut corrupt = blob.clone();
        corrupt[first_tag] = 0xff;
        let err = memtable_data::decode_slice(&corrupt).unwrap_err();
        assert!(
            matches!(err, MemtableDataError::ChecksumMismatch { .. }),
            "{format}: {err:?}"
        );
    }
}

#[test]
fn v2_drops_shared_key_prefixes_and_the_repeated_commit_ts() {
    let rows = write_rows(256);
    let v1 = memtable_data::encode_as(Format::V1, &rows).unwrap();
    let v2 = memtable_data::encode_as(Format::V2, &rows).unwrap();
    // Per row, v2 saves at least the 8-byte commit_ts, 7 bytes of start_ts and most of the
    // 20-byte key outside restart rows.
    let saved = v1.len() - v2.len();
    assert!(
        saved >= 256 * 25,
        "v1={} v2={} saved={saved}",
        v1.len(),
        v2.len()
    );
    assert_eq!(memtable_data::decode(&Bytes::from(v2)).unwrap(), rows);
}

#[test]
fn v2_values_slice_the_input_and_keys_are_rebuilt() {
    let rows = write_rows(40);
    let blob = Bytes::from(memtable_data::encode_as(Format::V2, &rows).unwrap());
    let decoded = memtable_data::decode(&blob).unwrap();
    let input = blob.as_ptr_range();
    for row in &decoded {
        assert!(input.contains(&row.value.as_ptr()));
    }
    assert_eq!(decoded, rows);
}

/// A v2 blob with hand-written rows and a valid header and checksum.
fn seal_v2(count: u64, rows: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_le_bytes().to_vec();
    out.push(Format::V2.as_u8());
    varint(rows.len() as u64, &mut out);
    varint(count, &mut out);
    out.extend_from_slice(rows);
    out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(rows).to_le_bytes());
    out
}

/// One v2 row: tag, key fields (unless `key` is None), version delta, empty meta and value.
fn raw_row_v2(tag: u8, key: Option<(u64, &[u8])>, delta: u64) -> Vec<u8> {
    let mut row = vec![tag];
    if let Some((shared, suffix)) = key {
        varint(shared, &mut row);
        varint(suffix.len() as u64, &mut row);
        row.extend_from_slice(suffix);
    }
    varint(delta, &mut row);
    row.extend_from_slice(&[0, 0]);
    row
}

fn malformed_row(blob: &[u8]) -> (u64, &'static str) {
    match memtable_data::decode_slice(blob) {
        Err(MemtableDataError::MalformedRow { row, expected, .. }) => (row, expected),
        other => panic!("expected a malformed row, found {other:?}"),
    }
}

#[test]
fn v2_rows_the_writer_never_writes_are_rejected() {
    // A restart row (row 0) sharing a prefix.
    let blob = seal_v2(1, &raw_row_v2(0, Some((1, b"k")), 2));
    assert_eq!(
        malformed_row(&blob),
        (0, "shared prefix 0 on a restart row")
    );
    // The same-key flag on a restart row.
    let blob = seal_v2(1, &raw_row_v2(0b1000, None, 2));
    assert_eq!(malformed_row(&blob), (0, "a full key on a restart row"));
    // A repeated key written as an empty suffix instead of the flag.
    let rows = [
        raw_row_v2(0, Some((0, b"k")), 2),
        raw_row_v2(0, Some((1, b"")), 2),
    ]
    .concat();
    assert_eq!(
        malformed_row(&seal_v2(2, &rows)),
        (1, "the same-key flag for a repeated key")
    );
    // "ka" after "kb" sharing 0 bytes where they share 1.
    let rows = [
        raw_row_v2(0, Some((0, b"ka")), 2),
        raw_row_v2(0, Some((0, b"kb")), 2),
    ]
    .concat();
    assert_eq!(
        malformed_row(&seal_v2(2, &rows)),
        (1, "the longest shared prefix")
    );
    // A shared prefix longer than the previous key.
    let rows = [
        raw_row_v2(0, Some((0, b"k")), 2),
        raw_row_v2(0, Some((5, b"x")), 2),
    ]
    .concat();
    assert_eq!(
        malformed_row(&seal_v2(2, &rows)),
        (1, "a shared prefix at most the previous key's length")
    );
}

#[test]
fn v2_write_meta_must_be_stored_compactly_and_not_exceed_the_version() {
    // A WRITE meta stored whole.
    let version = 10u64;
    let mut row = vec![0];
    varint(0, &mut row);
    varint(1, &mut row);
    row.push(b'k');
    varint(version * 2, &mut row); // zigzag(10)
    let meta = [&[b'P'][..], &9u64.to_le_bytes(), &version.to_le_bytes()].concat();
    varint(meta.len() as u64, &mut row);
    row.extend_from_slice(&meta);
    row.push(0);
    assert_eq!(
        malformed_row(&seal_v2(1, &row)),
        (0, "the WRITE-meta flag for a WRITE meta")
    );
    // A WRITE meta whose timestamp is above the version.
    let mut row = vec![0b1_0000];
    varint(0, &mut row);
    varint(1, &mut row);
    row.push(b'k');
    varint(version * 2, &mut row);
    row.push(b'P');
    varint(version + 1, &mut row);
    row.push(0);
    assert_eq!(
        malformed_row(&seal_v2(1, &row)),
        (0, "a WRITE meta timestamp at most the version")
    );
}

#[test]
fn v2_keys_restart_every_interval_so_decoded_keys_stay_bounded() {
    // Rows sharing all but one byte of a long key: every restart row repeats it in full.
    let rows: Vec<MemRow> = (0..RESTART_INTERVAL * 3)
        .map(|i| MemRow {
            cf: ColumnFamily::Lock,
            key: Bytes::from([vec![b'x'; 500], vec![i as u8]].concat()),
            version: 1,
            user_meta: Bytes::new(),
            value: Bytes::new(),
            tombstone: false,
        })
        .collect();
    let blob = memtable_data::encode_as(Format::V2, &rows).unwrap();
    // Three full keys, the other rows a one-byte suffix each.
    assert!(
        blob.len() > 3 * 500 && blob.len() < 4 * 500,
        "len={}",
        blob.len()
    );
    assert_eq!(memtable_data::decode_slice(&blob).unwrap(), rows);
}

#[test]
fn v2_rows_of_one_transaction_share_their_write_meta_and_must_say_so() {
    let rows = write_rows(2);
    // write_rows gives every row start_ts = version - 1: the second row's meta is the first's.
    let blob = memtable_data::encode_as(Format::V2, &rows).unwrap();
    assert_eq!(memtable_data::decode_slice(&blob).unwrap(), rows);

    // The same-WRITE-meta flag on the first row: nothing to repeat.
    let mut row = vec![0b11_0000];
    varint(0, &mut row);
    varint(1, &mut row);
    row.push(b'k');
    varint(20, &mut row); // zigzag(10)
    row.push(0);
    assert_eq!(
        malformed_row(&seal_v2(1, &row)),
        (
            0,
            "the same-WRITE-meta flag only after a row with a WRITE meta"
        )
    );

    // A second row storing the same kind and version - ts again instead of the flag.
    let write_row = |key: u8, shared: u64| {
        let mut row = vec![0b1_0000];
        varint(shared, &mut row);
        varint(1, &mut row);
        row.push(key);
        varint(2, &mut row); // zigzag(+1)
        row.push(b'P');
        varint(1, &mut row);
        row.push(0);
        row
    };
    let rows = [write_row(b'a', 0), write_row(b'b', 0)].concat();
    assert_eq!(
        malformed_row(&seal_v2(2, &rows)),
        (1, "the same-WRITE-meta flag for a repeated WRITE meta")
    );
}

/// Rows of one key, one transaction's WRITE meta shape each (`version - ts` = 1) and empty
/// values: from the second row on, the smallest rows a format writes.
fn tiny_rows(count: u64) -> Vec<MemRow> {
    (0..count)
        .map(|i| {
            let version = 10 + i;
            let mut meta = vec![b'P'];
            meta.extend_from_slice(&(version - 1).to_le_bytes());
            meta.extend_from_slice(&version.to_le_bytes());
            MemRow {
                cf: ColumnFamily::Write,
                key: Bytes::from_static(b"k"),
                version,
                user_meta: Bytes::from(meta),
                value: Bytes::new(),
                tombstone: true,
            }
        })
        .collect()
}

#[test]
fn blobs_of_the_smallest_rows_each_format_writes_decode() {
    // v2 writes such rows in 3 bytes (tag, version delta, value length) and v3 in 2: the
    // decoder's bound on the row count must allow them.
    let rows = tiny_rows(256);
    for format in Format::ALL {
        let blob = memtable_data::encode_as(format, &rows).unwrap();
        assert_eq!(
            memtable_data::decode_slice(&blob).unwrap(),
            rows,
            "{format}"
        );
    }
    let v2 = memtable_data::encode_as(Format::V2, &rows).unwrap();
    let v3 = memtable_data::encode_as(Format::V3, &rows).unwrap();
    assert!(v3.len() < v2.len() - 200, "v2={} v3={}", v2.len(), v3.len());
}

#[test]
fn v3_stores_no_key_or_value_length_that_repeats_the_row_before() {
    let rows = write_rows(256);
    let v2 = memtable_data::encode_as(Format::V2, &rows).unwrap();
    let v3 = memtable_data::encode_as(Format::V3, &rows).unwrap();
    // Every key is 21 bytes and every value 8: each row after the first drops its suffix
    // length and its value length, one byte each.
    assert_eq!(v2.len() - v3.len(), 2 * 255);
    assert_eq!(memtable_data::decode(&Bytes::from(v3)).unwrap(), rows);
}

/// A blob of `format` (v2 or v3) with hand-written rows and a valid header and checksum.
fn seal_as(format: Format, count: u64, rows: &[u8]) -> Vec<u8> {
    let mut out = seal_v2(count, rows);
    out[4] = format.as_u8();
    out
}

/// One v3 row without a WRITE meta: tag, then shared and the suffix (its length unless
/// `key_len` is false), the version delta, an empty meta, and a one-byte value `v` (its length
/// unless `value_len` is false).
fn raw_row_v3(tag: u8, shared: u64, suffix: &[u8], key_len: bool, value_len: bool) -> Vec<u8> {
    let mut row = vec![tag];
    varint(shared, &mut row);
    if key_len {
        varint(suffix.len() as u64, &mut row);
    }
    row.extend_from_slice(suffix);
    varint(2, &mut row); // zigzag(+1)
    row.push(0); // meta length
    if value_len {
        row.push(1);
    }
    row.push(b'v');
    row
}

#[test]
fn v3_length_flags_must_be_used_exactly_where_they_apply() {
    const SAME_KEY_LEN: u8 = 0b0100_0000;
    const SAME_VALUE_LEN: u8 = 0b1000_0000;
    let first = raw_row_v3(0, 0, b"ka", true, true);
    // What the writer writes: "kb" after "ka", both lengths repeated.
    let good = [
        first.clone(),
        raw_row_v3(SAME_KEY_LEN | SAME_VALUE_LEN, 1, b"b", false, false),
    ]
    .concat();
    let rows = memtable_data::decode_slice(&seal_as(Format::V3, 2, &good)).unwrap();
    assert_eq!(&rows[1].key[..], b"kb");
    assert_eq!(&rows[1].value[..], b"v");
    // The same bytes are not a v2 blob: v2 has no such tag bits.
    assert!(matches!(
        memtable_data::decode_slice(&seal_as(Format::V2, 2, &good)),
        Err(MemtableDataError::UnknownFlags { row: 1, .. })
    ));

    // A length flag on the first row.
    let blob = seal_as(
        Format::V3,
        1,
        &raw_row_v3(SAME_VALUE_LEN, 0, b"ka", true, false),
    );
    assert_eq!(malformed_row(&blob), (0, "no length flag on the first row"));
    // A repeated key length stored.
    let rows = [
        first.clone(),
        raw_row_v3(SAME_VALUE_LEN, 1, b"b", true, false),
    ]
    .concat();
    assert_eq!(
        malformed_row(&seal_as(Format::V3, 2, &rows)),
        (
            1,
            "the same-key-length flag for a key as long as the previous one"
        )
    );
    // A repeated value length stored.
    let rows = [
        first.clone(),
        raw_row_v3(SAME_KEY_LEN, 1, b"b", false, true),
    ]
    .concat();
    assert_eq!(
        malformed_row(&seal_as(Format::V3, 2, &rows)),
        (
            1,
            "the same-value-length flag for a value as long as the previous one"
        )
    );
    // The same-key flag with the same-key-length flag.
    let mut both = vec![0b1000 | SAME_KEY_LEN | SAME_VALUE_LEN];
    varint(2, &mut both);
    both.push(0);
    both.push(b'v');
    let rows = [first, both].concat();
    assert_eq!(
        malformed_row(&seal_as(Format::V3, 2, &rows)),
        (1, "the same-key flag or the same-key-length flag")
    );
}
