//! Memtable-data codec: round trips, corruption detection, and each decode error.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use bytes::Bytes;
use changeset::memtable_data::{self, FORMAT_VERSION, MAGIC};
use changeset::{ColumnFamily, MemRow, MemtableDataError, MemtableDataWriter};
use proptest::prelude::*;

fn row() -> impl Strategy<Value = MemRow> {
    (
        0..3usize,
        prop::collection::vec(any::<u8>(), 0..6),
        any::<u64>(),
        prop::collection::vec(any::<u8>(), 0..16),
        prop::collection::vec(any::<u8>(), 0..40),
        any::<bool>(),
    )
        .prop_map(|(cf, key, version, user_meta, value, tombstone)| MemRow {
            cf: ColumnFamily::ALL[cf],
            key: Bytes::from(key),
            version,
            user_meta: Bytes::from(user_meta),
            value: Bytes::from(value),
            tombstone,
        })
}

/// Rows as the producer emits them: grouped by key, each key's versions oldest first.
fn rows() -> impl Strategy<Value = Vec<MemRow>> {
    prop::collection::vec(row(), 0..40).prop_map(|mut rows| {
        rows.sort_by(|a, b| (a.cf, &a.key, a.version).cmp(&(b.cf, &b.key, b.version)));
        rows.dedup_by(|a, b| (a.cf, &a.key, a.version) == (b.cf, &b.key, b.version));
        rows
    })
}

fn blob() -> impl Strategy<Value = Vec<u8>> {
    rows().prop_map(|rows| memtable_data::encode(&rows).unwrap())
}

proptest! {
    #[test]
    fn memtable_data_encode_decode_round_trips(rows in rows()) {
        let blob = Bytes::from(memtable_data::encode(&rows).unwrap());
        prop_assert_eq!(&memtable_data::decode(&blob).unwrap(), &rows);
        let borrowed = memtable_data::decode_ref(&blob).unwrap();
        prop_assert!(borrowed.iter().copied().eq(rows.iter().map(MemRow::as_ref)));
    }

    #[test]
    fn every_truncation_of_memtable_data_is_an_error(blob in blob()) {
        for len in 0..blob.len() {
            prop_assert!(memtable_data::decode_ref(&blob[..len]).is_err(), "len={}", len);
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
        prop_assert!(memtable_data::decode_ref(&corrupt).is_err(), "index={} mask={:#x}", index, mask);
    }
}

fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A blob with a hand-written body and a valid header and CRC, to reach the body checks.
fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_le_bytes().to_vec();
    out.push(FORMAT_VERSION);
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
    memtable_data::encode(&rows).unwrap()
}

#[test]
fn bad_magic_is_reported_with_the_bytes_found() {
    let mut blob = two_rows();
    blob[..4].copy_from_slice(b"ABCD");
    assert_eq!(
        memtable_data::decode_ref(&blob),
        Err(MemtableDataError::BadMagic {
            found: u32::from_le_bytes(*b"ABCD")
        })
    );
}

#[test]
fn unsupported_version_is_reported_with_the_version_found() {
    let mut blob = two_rows();
    blob[4] = 2;
    let err = memtable_data::decode_ref(&blob).unwrap_err();
    assert_eq!(
        err,
        MemtableDataError::UnsupportedVersion {
            found: 2,
            supported: 1
        }
    );
    assert_eq!(
        err.to_string(),
        "unsupported memtable data format version found=2 supported=1"
    );
}

#[test]
fn checksum_mismatch_reports_stored_and_computed_values() {
    let mut blob = two_rows();
    let body_byte = blob.len() - 6;
    blob[body_byte] ^= 0x01;
    let end = blob.len() - 4;
    let expected = u32::from_le_bytes(blob[end..].try_into().unwrap());
    let found = crc32fast::hash(&blob[..end]);
    assert_eq!(
        memtable_data::decode_ref(&blob),
        Err(MemtableDataError::ChecksumMismatch { expected, found })
    );
}

#[test]
fn truncation_reports_needed_and_available_bytes() {
    let blob = two_rows();
    let short = &blob[..blob.len() - 1];
    assert_eq!(
        memtable_data::decode_ref(short),
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
        memtable_data::decode_ref(&blob),
        Err(MemtableDataError::TrailingBytes { count: 2 })
    );
}

#[test]
fn a_huge_row_count_is_rejected_before_allocating() {
    let mut body = Vec::new();
    varint(u64::MAX / 2, &mut body);
    body.extend_from_slice(&raw_row(0, 0, b"k", 1));
    assert_eq!(
        memtable_data::decode_ref(&seal(&body)),
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
        memtable_data::decode_ref(&seal(&body)),
        Err(MemtableDataError::Truncated { .. })
    ));
}

#[test]
fn unknown_column_family_and_flags_are_rejected() {
    let mut body = vec![1];
    body.extend_from_slice(&raw_row(3, 0, b"k", 1));
    assert_eq!(
        memtable_data::decode_ref(&seal(&body)),
        Err(MemtableDataError::UnknownColumnFamily { cf: 3, row: 0 })
    );
    let mut body = vec![1];
    body.extend_from_slice(&raw_row(0, 0b10, b"k", 1));
    assert_eq!(
        memtable_data::decode_ref(&seal(&body)),
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
        memtable_data::decode_ref(&seal(&body)),
        Err(MemtableDataError::VersionOrder {
            row: 1,
            previous: 9,
            version: 5
        })
    );

    let mut writer = MemtableDataWriter::new();
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
    assert_eq!(memtable_data::decode_ref(&seal(&body)).unwrap().len(), 2);
}

#[test]
fn bytes_left_in_the_body_after_the_rows_are_rejected() {
    let mut body = vec![1];
    body.extend_from_slice(&raw_row(0, 0, b"k", 1));
    body.push(0);
    assert_eq!(
        memtable_data::decode_ref(&seal(&body)),
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
