//! Golden files pin the encodings: a committed blob must decode to known values and re-encode to
//! the same bytes, so neither format can drift silently.
//!
//! The files are committed and only read: a missing one fails the test. When a deliberate format
//! change adds a new `_v2` file (and keeps the `_v1` one decoding), run once with
//! `STRATUS_WRITE_GOLDEN=1` to write the files that are missing, and commit them.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;
use std::path::PathBuf;

use bytes::Bytes;
use changeset::memtable_data::{self, Format};
use changeset::{
    Change, ChangeSet, ColumnFamily, L0Create, MemRow, Snapshot, TableCreate, decode_changeset,
    encode_changeset,
};

/// id, level, cf, smallest, biggest, size.
type TableFields<'a> = (u64, u32, u32, &'a [u8], &'a [u8], u64);
/// cf, key, version, user_meta, value, tombstone.
type RowFields<'a> = (ColumnFamily, &'a [u8], u64, &'a [u8], &'a [u8], bool);

fn golden(name: &str, generate: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    if !path.exists() && std::env::var_os("STRATUS_WRITE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, generate()).unwrap();
    }
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "golden file {} missing ({e}); it is committed with the format it pins (see the module docs)",
            path.display()
        )
    })
}

fn changeset_v1() -> ChangeSet {
    let bytes = |s: &'static str| Bytes::from_static(s.as_bytes());
    ChangeSet {
        shard_id: 42,
        shard_ver: 7,
        sequence: 1_234,
        properties: BTreeMap::from([("owner".to_owned(), b"store-1".to_vec())]),
        change: Some(Change::Snapshot(Snapshot {
            start: bytes("t_100_"),
            end: bytes("t_200_"),
            base_version: 9_000,
            data_sequence: 777,
            l0_creates: vec![
                L0Create {
                    id: 1_003,
                    smallest: bytes("t_120_a"),
                    biggest: bytes("t_180_z"),
                    size: 4_096,
                },
                L0Create {
                    id: 1_002,
                    smallest: bytes("t_100_a"),
                    biggest: bytes("t_150_z"),
                    size: 8_192,
                },
            ],
            table_creates: vec![
                TableCreate {
                    id: 900,
                    level: 1,
                    cf: 0,
                    smallest: bytes("t_100_a"),
                    biggest: bytes("t_149_z"),
                    size: 65_536,
                },
                TableCreate {
                    id: 901,
                    level: 1,
                    cf: 1,
                    smallest: bytes("t_150_a"),
                    biggest: bytes("t_150_b"),
                    size: 1_024,
                },
                TableCreate {
                    id: 800,
                    level: 2,
                    cf: 0,
                    smallest: bytes("t_100_a"),
                    biggest: bytes("t_199_z"),
                    size: 1_048_576,
                },
            ],
        })),
    }
}

#[test]
fn changeset_v1_golden_file_decodes_to_known_fields_and_re_encodes_identically() {
    let stored = golden("changeset_v1.bin", || encode_changeset(&changeset_v1()));
    let decoded = decode_changeset(&stored[..]).unwrap();

    assert_eq!(decoded.shard_id, 42);
    assert_eq!(decoded.shard_ver, 7);
    assert_eq!(decoded.sequence, 1_234);
    assert_eq!(decoded.properties.len(), 1);
    assert_eq!(decoded.properties["owner"], b"store-1");
    let Some(Change::Snapshot(snapshot)) = &decoded.change else {
        panic!("expected a snapshot, got {:?}", decoded.change);
    };
    assert_eq!(snapshot.start, "t_100_");
    assert_eq!(snapshot.end, "t_200_");
    assert_eq!(snapshot.base_version, 9_000);
    assert_eq!(snapshot.data_sequence, 777);

    let l0s: Vec<(u64, &[u8], &[u8], u64)> = snapshot
        .l0_creates
        .iter()
        .map(|f| (f.id, &f.smallest[..], &f.biggest[..], f.size))
        .collect();
    assert_eq!(
        l0s,
        [
            (1_003, &b"t_120_a"[..], &b"t_180_z"[..], 4_096),
            (1_002, &b"t_100_a"[..], &b"t_150_z"[..], 8_192),
        ]
    );
    let tables: Vec<TableFields<'_>> = snapshot
        .table_creates
        .iter()
        .map(|t| (t.id, t.level, t.cf, &t.smallest[..], &t.biggest[..], t.size))
        .collect();
    assert_eq!(
        tables,
        [
            (900, 1, 0, &b"t_100_a"[..], &b"t_149_z"[..], 65_536),
            (901, 1, 1, &b"t_150_a"[..], &b"t_150_b"[..], 1_024),
            (800, 2, 0, &b"t_100_a"[..], &b"t_199_z"[..], 1_048_576),
        ]
    );

    assert_eq!(encode_changeset(&decoded), stored);
    assert_eq!(encode_changeset(&changeset_v1()), stored);
}

fn memtable_rows_v1() -> Vec<MemRow> {
    let row = |cf,
               key: &'static [u8],
               version,
               user_meta: &'static [u8],
               value: &'static [u8],
               tombstone| MemRow {
        cf,
        key: Bytes::from_static(key),
        version,
        user_meta: Bytes::from_static(user_meta),
        value: Bytes::from_static(value),
        tombstone,
    };
    vec![
        row(
            ColumnFamily::Write,
            b"t_100_r1",
            105,
            b"\x64\x69",
            b"alice",
            false,
        ),
        row(
            ColumnFamily::Write,
            b"t_100_r1",
            120,
            b"\x6e\x78",
            b"",
            true,
        ),
        row(
            ColumnFamily::Write,
            b"t_100_r2",
            106,
            b"\x65\x6a",
            b"bob",
            false,
        ),
        row(
            ColumnFamily::Lock,
            b"t_100_r3",
            130,
            b"",
            b"lock-record",
            false,
        ),
        row(
            ColumnFamily::Extra,
            b"txn_130",
            131,
            b"",
            b"committed",
            false,
        ),
    ]
}

#[test]
fn memtable_data_v1_golden_file_decodes_to_known_rows_and_re_encodes_identically() {
    let stored = golden("memtable_data_v1.bin", || {
        memtable_data::encode_as(Format::V1, &memtable_rows_v1()).unwrap()
    });
    assert_eq!(&stored[..5], b"SMTD\x01");
    let rows = memtable_data::decode(&Bytes::from(stored.clone())).unwrap();

    let fields: Vec<RowFields<'_>> = rows
        .iter()
        .map(|r| {
            (
                r.cf,
                &r.key[..],
                r.version,
                &r.user_meta[..],
                &r.value[..],
                r.tombstone,
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            (
                ColumnFamily::Write,
                &b"t_100_r1"[..],
                105,
                &b"\x64\x69"[..],
                &b"alice"[..],
                false
            ),
            (
                ColumnFamily::Write,
                &b"t_100_r1"[..],
                120,
                &b"\x6e\x78"[..],
                &b""[..],
                true
            ),
            (
                ColumnFamily::Write,
                &b"t_100_r2"[..],
                106,
                &b"\x65\x6a"[..],
                &b"bob"[..],
                false
            ),
            (
                ColumnFamily::Lock,
                &b"t_100_r3"[..],
                130,
                &b""[..],
                &b"lock-record"[..],
                false
            ),
            (
                ColumnFamily::Extra,
                &b"txn_130"[..],
                131,
                &b""[..],
                &b"committed"[..],
                false
            ),
        ]
    );

    assert_eq!(memtable_data::encode_as(Format::V1, &rows).unwrap(), stored);
    assert_eq!(
        memtable_data::encode_as(Format::V1, &memtable_rows_v1()).unwrap(),
        stored
    );
}

/// Rows that take every v2 path: WRITE metas (stored as kind + delta) and opaque ones, a key
/// repeated (same-key flag), shared prefixes, a tombstone, every column family, and more than
/// one restart interval (row 16 restarts its key).
fn memtable_rows_v2() -> Vec<MemRow> {
    let mut rows = vec![
        MemRow {
            cf: ColumnFamily::Write,
            key: Bytes::from_static(b"t_100_r1"),
            version: 105,
            user_meta: write_meta(b'P', 100, 105),
            value: Bytes::from_static(b"alice"),
            tombstone: false,
        },
        MemRow {
            cf: ColumnFamily::Write,
            key: Bytes::from_static(b"t_100_r1"),
            version: 120,
            user_meta: write_meta(b'D', 118, 120),
            value: Bytes::new(),
            tombstone: true,
        },
    ];
    for i in 2..18u64 {
        rows.push(MemRow {
            cf: ColumnFamily::Write,
            key: Bytes::from(format!("t_100_r{i:02}")),
            version: 200 + i,
            user_meta: write_meta(b'P', 190 + i, 200 + i),
            value: Bytes::from(format!("value-{i}")),
            tombstone: false,
        });
    }
    rows.push(MemRow {
        cf: ColumnFamily::Lock,
        key: Bytes::from_static(b"t_100_r3"),
        version: 130,
        user_meta: Bytes::new(),
        value: Bytes::from_static(b"lock-record"),
        tombstone: false,
    });
    rows.push(MemRow {
        cf: ColumnFamily::Extra,
        key: Bytes::from_static(b"txn_130"),
        version: 131,
        // Shaped like a WRITE meta but its last 8 bytes are not the version: stored whole.
        user_meta: write_meta(b'P', 100, 999),
        value: Bytes::from_static(b"committed"),
        tombstone: false,
    });
    rows
}

#[test]
fn memtable_data_v2_golden_file_decodes_to_known_rows_and_re_encodes_identically() {
    let (stored, rows) = memtable_golden(Format::V2, &memtable_rows_v2());
    // The same rows in v1 are much longer: the savings are what v2 is for.
    let v1 = memtable_data::encode_as(Format::V1, &rows).unwrap();
    assert!(
        stored.len() * 10 < v1.len() * 7,
        "v2={} v1={}",
        stored.len(),
        v1.len()
    );
}

#[test]
fn memtable_data_v3_golden_file_decodes_to_known_rows_and_re_encodes_identically() {
    let (stored, rows) = memtable_golden(Format::V3, &memtable_rows_v2());
    // Most of these rows repeat the key length (t_100_rNN) and many the value length: each
    // such row stores one length byte less than in v2.
    let v2 = memtable_data::encode_as(Format::V2, &rows).unwrap();
    assert!(
        stored.len() + 20 <= v2.len(),
        "v3={} v2={}",
        stored.len(),
        v2.len()
    );
}

/// The golden blob of `rows` in `format` (`memtable_data_v<N>.bin`), checked to start with
/// the magic and version, to decode to `rows` and to re-encode to the same bytes; and the rows.
fn memtable_golden(format: Format, rows: &[MemRow]) -> (Vec<u8>, Vec<MemRow>) {
    let name = format!("memtable_data_{format}.bin");
    let stored = golden(&name, || memtable_data::encode_as(format, rows).unwrap());
    assert_eq!(&stored[..5], [&b"SMTD"[..], &[format.as_u8()]].concat());
    let decoded = memtable_data::decode(&Bytes::from(stored.clone())).unwrap();
    assert_eq!(decoded, rows);
    assert_eq!(memtable_data::encode_as(format, &decoded).unwrap(), stored);
    (stored, decoded)
}

/// A WRITE meta: kind, start_ts, commit_ts.
fn write_meta(kind: u8, start_ts: u64, commit_ts: u64) -> Bytes {
    Bytes::from(
        [
            &[kind][..],
            &start_ts.to_le_bytes(),
            &commit_ts.to_le_bytes(),
        ]
        .concat(),
    )
}

/// The v2 rows, then rows of 3,000-byte values: three blocks in v4.
fn memtable_rows_v4() -> Vec<MemRow> {
    let mut rows = memtable_rows_v2();
    for i in 0..16u64 {
        rows.push(MemRow {
            cf: ColumnFamily::Write,
            key: Bytes::from(format!("t_100_s{i:02}")),
            version: 300 + i,
            user_meta: write_meta(b'P', 290 + i, 300 + i),
            value: Bytes::from(vec![b'a' + i as u8; 3_000]),
            tombstone: false,
        });
    }
    rows
}

#[test]
fn memtable_data_v4_golden_file_decodes_to_known_rows_and_re_encodes_identically() {
    let (stored, _) = memtable_golden(Format::V4, &memtable_rows_v4());
    let index = memtable_data::blocks(&stored).unwrap();
    assert_eq!(index.len(), 3);
    assert_eq!(index.max_version(), 315);
    assert_eq!(index.first_key(&stored, 1), b"t_100_s06");
}
