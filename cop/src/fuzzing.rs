//! Entry points of the codec fuzz targets (`fuzz/fuzz_targets/cop_row.rs`,
//! `cop_request.rs`), kept in the library so that the committed corpora replay as ordinary
//! tests (`cop/tests/fuzz_corpus_replay.rs`) through the very same code. (`cop_dag` is
//! [`crate::expr::fuzzing`].)
//!
//! The decoders they exercise are the `wire` crate's, but the targets also check what
//! execution does with their output (a row read into columns, a request's DAG built into
//! expressions), so they live here, above both.
//!
//! Each function must never panic, whatever the input; errors are expected and ignored.
//! Where a decode succeeds they also check what must then hold (a re-encoding decodes to the
//! same value), so the fuzzer finds wrong answers as well as crashes.

use prost::Message;
use wire::codec::datum::{decode_datum, decode_datums, decode_default, encode_datum};
use wire::codec::row::{ColumnValue, RowView, decode_value, encode_row};
use wire::codec::table::{decode_index_key, decode_record_key};
use wire::coprocessor::{DagRequest, Request};
use wire::datum::{Datum, FieldType};

use crate::batch::Column;

const FIELD_TYPES: [FieldType; 5] = [
    FieldType::Int64,
    FieldType::UInt64,
    FieldType::Float64,
    FieldType::Bytes,
    FieldType::DateTime,
];

/// The `cop_row` target: the input as a row (parse, then find and decode every listed id with
/// every type, plus ids it lacks), as a datum sequence, and as record and index keys.
pub fn row(data: &[u8]) {
    if let Ok(view) = RowView::parse(data) {
        let ids: Vec<i64> = view.not_null_ids().chain(view.null_ids()).collect();
        let mut as_bytes = Vec::with_capacity(ids.len());
        for &id in &ids {
            let value = view.find(id);
            for tp in FIELD_TYPES {
                let mut out = Column::with_capacity(tp.eval_type(), 1);
                let r = out.push_from_row(&view, id, tp, &Datum::Null);
                assert_eq!(r.is_ok(), out.len() == 1, "id {id} {tp:?}");
                if let ColumnValue::Value(b) = value {
                    assert_eq!(r.is_ok(), decode_value(b, tp).is_ok(), "id {id} {tp:?}");
                }
            }
            as_bytes.push(match value {
                ColumnValue::Value(b) => (id, Datum::Bytes(b.to_vec())),
                ColumnValue::Null => (id, Datum::Null),
                ColumnValue::Absent => panic!("listed id {id} not found"),
            });
        }
        for id in [
            -1,
            0,
            255,
            256,
            i64::from(u32::MAX),
            i64::from(u32::MAX) + 1,
        ] {
            assert_eq!(
                view.find(id) != ColumnValue::Absent,
                ids.contains(&id),
                "id {id}"
            );
        }
        // Writing every value back as bytes gives a row with the same contents (the writer may
        // pick the other layout, so compare lookups, not bytes).
        let rewritten = encode_row(&as_bytes).expect("a parsed row re-encodes");
        let again = RowView::parse(&rewritten).expect("a re-encoded row parses");
        for &id in &ids {
            assert_eq!(again.find(id), view.find(id), "id {id}");
        }
    }

    let mut cursor = data;
    let mut datums = Vec::new();
    while !cursor.is_empty() {
        // A failed decode leaves its cursor anywhere: advance only on success.
        let mut attempt = cursor;
        match decode_datum(&mut attempt) {
            Ok(d) => datums.push(d),
            Err(_) => break,
        }
        cursor = attempt;
    }
    if cursor.is_empty() {
        let all = decode_datums(data, datums.len()).expect("datums decoded one by one decode");
        assert!(same_datums(&all, &datums));
        // Decoding is not canonical (varints may be padded), so compare values after one
        // round of re-encoding.
        for comparable in [false, true] {
            let mut buf = Vec::new();
            for d in &datums {
                encode_datum(&mut buf, d, comparable);
            }
            let again = decode_datums(&buf, datums.len()).expect("re-encoded datums decode");
            assert!(same_datums(&again, &datums));
        }
    }
    for n in [0, 1, 2, 3, 8] {
        let _ = decode_datums(data, n);
    }
    for tp in FIELD_TYPES {
        let _ = decode_default(data, tp);
    }
    let _ = decode_record_key(data);
    for n in [0, 1, 2, 4] {
        let _ = decode_index_key(data, n);
    }
}

/// Datums equal, NaN equal to NaN (a decoded float may be any bit pattern).
fn same_datums(a: &[Datum], b: &[Datum]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Datum::Real(x), Datum::Real(y)) => x == y || (x.is_nan() && y.is_nan()),
            _ => x == y,
        })
}

/// The `cop_request` target: the input as a coprocessor [`Request`], its data as a
/// [`DagRequest`] (through the `cop_dag` checks as well), and every column default in it.
pub fn request(data: &[u8]) {
    let Ok(req) = Request::decode(data) else {
        return;
    };
    crate::expr::fuzzing::dag(&req.data);
    let Ok(dag) = DagRequest::decode(req.data.as_slice()) else {
        return;
    };
    for exec in &dag.executors {
        let columns = exec
            .tbl_scan
            .iter()
            .flat_map(|s| &s.columns)
            .chain(exec.idx_scan.iter().flat_map(|s| &s.columns));
        for c in columns {
            if let Some(tp) = FieldType::from_i32(c.tp) {
                let _ = decode_default(&c.default_val, tp);
            }
        }
    }
}
