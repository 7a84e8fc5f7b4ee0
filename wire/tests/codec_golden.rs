//! Golden bytes: rows, keys and datums as committed under `wire/tests/data/`, so the formats
//! cannot drift silently.
//!
//! Two tests per file set: the encoders must reproduce the committed bytes exactly, and the
//! committed bytes must decode to the listed values with the decoders alone (they double as
//! fixtures of format version 128: a format change bumps the version and keeps these files).
//!
//! To (re)write the files after an intended change: `STRATUS_BLESS=1 cargo test -p wire --test
//! codec_golden`, then review the diff.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::path::PathBuf;

use wire::codec::datum::{decode_datums, encode_datum};
use wire::codec::row::{ColumnValue, RowView, decode_value, encode_row};
use wire::codec::table::{decode_index_key, decode_record_key, index_key, record_key};
use wire::datum::{Datum, FieldType};

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// A row as (column id, type, value).
type Row = Vec<(i64, FieldType, Datum)>;

fn small_row() -> Row {
    vec![
        (1, FieldType::Int64, Datum::Int(-1)),
        (2, FieldType::UInt64, Datum::UInt(300)),
        (3, FieldType::Float64, Datum::Real(1.5)),
        (4, FieldType::Bytes, Datum::Bytes(b"abc".to_vec())),
        (5, FieldType::Int64, Datum::Null),
        (7, FieldType::Int64, Datum::Int(i64::MIN)),
        (8, FieldType::DateTime, Datum::UInt(0x1234_5678_9abc)),
        (9, FieldType::Bytes, Datum::Bytes(Vec::new())),
    ]
}

fn large_row() -> Row {
    vec![
        (1, FieldType::Int64, Datum::Int(70_000)),
        (300, FieldType::Bytes, Datum::Bytes(b"x".to_vec())),
        (1000, FieldType::Float64, Datum::Real(-2.0)),
        (70_000, FieldType::UInt64, Datum::Null),
    ]
}

fn empty_row() -> Row {
    Vec::new()
}

fn datums() -> Vec<Datum> {
    vec![
        Datum::Null,
        Datum::Int(-1),
        Datum::Int(1 << 40),
        Datum::UInt(u64::MAX),
        Datum::Real(-0.25),
        Datum::Bytes(b"hello world!".to_vec()),
    ]
}

fn index_values() -> Vec<Datum> {
    vec![
        Datum::Int(-1),
        Datum::Bytes(b"ab".to_vec()),
        Datum::Null,
        Datum::UInt(5),
        Datum::Real(0.5),
    ]
}

fn encode_row_of(row: &Row) -> Vec<u8> {
    let cols: Vec<(i64, Datum)> = row.iter().map(|(id, _, d)| (*id, d.clone())).collect();
    encode_row(&cols).unwrap()
}

fn encode_datums(comparable: bool) -> Vec<u8> {
    let mut buf = Vec::new();
    for d in datums() {
        encode_datum(&mut buf, &d, comparable);
    }
    buf
}

/// Every golden file and the bytes today's encoders produce for it.
fn golden() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("row_small_v128.bin", encode_row_of(&small_row())),
        ("row_large_v128.bin", encode_row_of(&large_row())),
        ("row_empty_v128.bin", encode_row_of(&empty_row())),
        ("record_key.bin", record_key(42, -7)),
        (
            "index_key_non_unique.bin",
            index_key(42, 3, &index_values(), Some(9)),
        ),
        (
            "index_key_unique.bin",
            index_key(42, 3, &index_values(), None),
        ),
        ("datums_compact.bin", encode_datums(false)),
        ("datums_comparable.bin", encode_datums(true)),
    ]
}

fn read(name: &str) -> Vec<u8> {
    let path = data_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "golden file {} is missing ({e}); write it with STRATUS_BLESS=1",
            path.display()
        )
    })
}

/// Compares the encoders with the committed files, or rewrites the files when
/// `STRATUS_BLESS=1` is set.
#[test]
fn encoders_reproduce_the_golden_files_or_bless_rewrites_them() {
    let bless = std::env::var("STRATUS_BLESS").is_ok_and(|v| v == "1");
    for (name, bytes) in golden() {
        if bless {
            std::fs::create_dir_all(data_dir()).unwrap();
            std::fs::write(data_dir().join(name), &bytes).unwrap();
        } else {
            assert_eq!(
                read(name),
                bytes,
                "{name} differs from the encoder's output"
            );
        }
    }
}

fn check_row(name: &str, row: &Row) {
    let bytes = read(name);
    let view = RowView::parse(&bytes).unwrap();
    for (id, tp, want) in row {
        let got = match view.find(*id) {
            ColumnValue::Value(b) => decode_value(b, *tp).unwrap(),
            ColumnValue::Null => Datum::Null,
            ColumnValue::Absent => panic!("{name}: column {id} absent"),
        };
        assert_eq!(&got, want, "{name}: column {id}");
    }
    let listed = view.not_null_ids().count() + view.null_ids().count();
    assert_eq!(listed, row.len(), "{name}: column count");
}

#[test]
fn golden_rows_decode_to_their_values() {
    check_row("row_small_v128.bin", &small_row());
    check_row("row_large_v128.bin", &large_row());
    check_row("row_empty_v128.bin", &empty_row());
    assert!(
        !RowView::parse(&read("row_small_v128.bin"))
            .unwrap()
            .is_large()
    );
    assert!(
        RowView::parse(&read("row_large_v128.bin"))
            .unwrap()
            .is_large()
    );
}

#[test]
fn golden_keys_decode_to_their_parts() {
    assert_eq!(
        decode_record_key(&read("record_key.bin")).unwrap(),
        (42, -7)
    );
    let n = index_values().len();
    assert_eq!(
        decode_index_key(&read("index_key_non_unique.bin"), n).unwrap(),
        (42, 3, index_values(), Some(9))
    );
    assert_eq!(
        decode_index_key(&read("index_key_unique.bin"), n).unwrap(),
        (42, 3, index_values(), None)
    );
}

#[test]
fn golden_datums_decode_to_their_values() {
    for name in ["datums_compact.bin", "datums_comparable.bin"] {
        assert_eq!(
            decode_datums(&read(name), datums().len()).unwrap(),
            datums(),
            "{name}"
        );
    }
}

/// The small row spelled out byte by byte, so a reader of this test sees the layout.
#[test]
fn small_golden_row_has_the_documented_layout() {
    let bytes = read("row_small_v128.bin");
    #[rustfmt::skip]
    let expected: Vec<u8> = [
        &[128u8, 0][..],                          // version, flags (small)
        &[7, 0, 1, 0],                            // 7 not-null, 1 null
        &[1, 2, 3, 4, 7, 8, 9],                   // not-null ids
        &[5],                                     // null ids
        &[1, 0, 3, 0, 11, 0, 14, 0, 22, 0, 30, 0, 30, 0], // end offsets (u16 LE)
        &[0xff],                                  // 1: Int -1, one byte
        &[0x2c, 0x01],                            // 2: UInt 300, two bytes LE
        &[0xbf, 0xf8, 0, 0, 0, 0, 0, 0],          // 3: 1.5 memcomparable, BE
        b"abc",                                   // 4
        &[0, 0, 0, 0, 0, 0, 0, 0x80],             // 7: i64::MIN, eight bytes LE
        &[0xbc, 0x9a, 0x78, 0x56, 0x34, 0x12, 0, 0], // 8: 0x123456789abc, eight bytes LE
                                                  // 9: empty bytes
    ]
    .concat();
    assert_eq!(bytes, expected);
}
