//! Exact cases for the handler and the executors: what a scan reads (versions, ranges, points,
//! defaults, handles, index entries), where each kind of failure goes in the response, and the
//! executor behaviours the differential test cannot pin down by comparison alone (no partial
//! row over no rows, batch growth, summaries).

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use common::*;
use cop::handler::{HandlerOptions, handle, handle_bytes};
use prost::Message;
use wire::codec::datum::encode_datum;
use wire::codec::row::encode_row;
use wire::codec::table::{index_key, index_range, record_key, unique_index_value};
use wire::coprocessor::{
    self as proto, ColumnInfo, Context, ExecType, Executor, Expr, ExprType, KeyRange,
    RegionErrorKind, Response, ScalarFuncSig,
};
use wire::datum::{Datum, FieldType};

const T: i64 = 7;

fn opts() -> HandlerOptions {
    HandlerOptions::worker()
}

fn ints(v: &[i64]) -> Vec<Vec<Datum>> {
    v.iter().map(|x| vec![Datum::Int(*x)]).collect()
}

/// Rows 1..=n with column 1 = handle * 10 and column 2 = "r{handle}", committed at ts 10.
fn simple_table(e: &TestEngine, n: i64) {
    for h in 1..=n {
        e.put_row(
            T,
            h,
            10,
            &[
                (1, Datum::Int(h * 10)),
                (2, Datum::Bytes(format!("r{h}").into_bytes())),
            ],
        );
    }
}

fn scan_c1(desc: bool) -> Executor {
    table_scan(T, vec![column(1, FieldType::Int64)], desc)
}

#[test]
fn table_scan_returns_the_versions_visible_at_start_ts() {
    let e = TestEngine::new();
    e.put_row(T, 1, 10, &[(1, Datum::Int(1))]);
    e.put_row(T, 2, 10, &[(1, Datum::Int(2))]);
    e.compact();
    e.put_row(T, 1, 20, &[(1, Datum::Int(11))]);
    e.delete_row(T, 2, 20);
    e.flush();
    e.put_row(T, 3, 30, &[(1, Datum::Int(3))]);
    e.rollback(&record_key(T, 1), 35);
    let snap = e.snap();
    let d = dag(vec![scan_c1(false)]);
    let at = |ts| {
        rows(&handle(
            &request(&d, vec![table_range(T)], ts),
            &snap,
            &opts(),
        ))
        .unwrap()
    };
    assert_eq!(at(5), ints(&[]));
    assert_eq!(at(15), ints(&[1, 2]));
    assert_eq!(at(25), ints(&[11]));
    assert_eq!(at(40), ints(&[11, 3]));
    let d = dag(vec![scan_c1(true)]);
    let resp = handle(&request(&d, vec![table_range(T)], 40), &snap, &opts());
    assert_eq!(rows(&resp).unwrap(), ints(&[3, 11]));
}

#[test]
fn ranges_are_scanned_in_request_order_and_in_reverse_when_descending() {
    let e = TestEngine::new();
    simple_table(&e, 10);
    let snap = e.snap();
    let ranges = vec![
        handle_range(T, 1, 3),
        point(T, 5),
        point(T, 6),
        handle_range(T, 8, 100),
    ];
    let resp = handle(
        &request(&dag(vec![scan_c1(false)]), ranges.clone(), 20),
        &snap,
        &opts(),
    );
    assert_eq!(rows(&resp).unwrap(), ints(&[10, 20, 50, 60, 80, 90, 100]));
    let resp = handle(
        &request(&dag(vec![scan_c1(true)]), ranges, 20),
        &snap,
        &opts(),
    );
    assert_eq!(rows(&resp).unwrap(), ints(&[100, 90, 80, 60, 50, 20, 10]));
}

#[test]
fn point_ranges_read_one_row_each_and_skip_missing_and_deleted_rows() {
    let e = TestEngine::new();
    simple_table(&e, 3);
    e.delete_row(T, 2, 15);
    let snap = e.snap();
    let ranges = vec![point(T, 1), point(T, 2), point(T, 3), point(T, 4)];
    let resp = handle(
        &request(&dag(vec![scan_c1(false)]), ranges, 20),
        &snap,
        &opts(),
    );
    assert_eq!(rows(&resp).unwrap(), ints(&[10, 30]));
    assert_eq!(resp.exec_details.unwrap().scanned_keys, 4);
}

#[test]
fn absent_columns_read_as_their_default_or_null() {
    let e = TestEngine::new();
    // Written before columns 2 and 3 existed.
    e.put_row(T, 1, 10, &[(1, Datum::Int(1))]);
    e.put_row(
        T,
        2,
        10,
        &[
            (1, Datum::Int(2)),
            (2, Datum::Null),
            (3, Datum::Bytes(b"x".to_vec())),
        ],
    );
    let mut default = Vec::new();
    encode_datum(&mut default, &Datum::Int(42), false);
    let with_default = ColumnInfo {
        default_val: default,
        ..column(2, FieldType::Int64)
    };
    let d = dag(vec![table_scan(
        T,
        vec![with_default, column(3, FieldType::Bytes)],
        false,
    )]);
    let resp = handle(&request(&d, vec![table_range(T)], 20), &e.snap(), &opts());
    assert_eq!(
        rows(&resp).unwrap(),
        vec![
            vec![Datum::Int(42), Datum::Null],
            vec![Datum::Null, Datum::Bytes(b"x".to_vec())],
        ]
    );
}

#[test]
fn pk_handle_columns_come_from_the_record_key() {
    let e = TestEngine::new();
    simple_table(&e, 3);
    e.put_row(T, -5, 10, &[(1, Datum::Int(-50))]);
    let d = dag(vec![table_scan(
        T,
        vec![column(1, FieldType::Int64), handle_column(99)],
        false,
    )]);
    let resp = handle(&request(&d, vec![table_range(T)], 20), &e.snap(), &opts());
    let got: Vec<(Datum, Datum)> = rows(&resp)
        .unwrap()
        .into_iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (Datum::Int(-50), Datum::Int(-5)),
            (Datum::Int(10), Datum::Int(1)),
            (Datum::Int(20), Datum::Int(2)),
            (Datum::Int(30), Datum::Int(3)),
        ]
    );
}

#[test]
fn a_key_that_is_not_a_record_key_of_the_table_is_a_corrupt_data_error() {
    let e = TestEngine::new();
    simple_table(&e, 2);
    // Inside the table's record range, but not 19 bytes.
    let mut bad = record_key(T, 1);
    bad.push(1);
    e.put(&bad, 10, &encode_row(&[(1, Datum::Int(0))]).unwrap());
    let resp = handle(
        &request(&dag(vec![scan_c1(false)]), vec![table_range(T)], 20),
        &e.snap(),
        &opts(),
    );
    let err = rows(&resp).unwrap_err();
    assert_eq!(
        err.code,
        wire::coprocessor::eval_error_code::CORRUPT_DATA,
        "{err:?}"
    );
}

#[test]
fn index_scans_decode_values_from_the_key_and_the_handle_from_key_or_unique_value() {
    let e = TestEngine::new();
    // Non-unique index 1 on (bytes, int): the handle is in the key.
    for (h, name, n) in [(3, "b", 1), (1, "a", 2), (2, "a", 1)] {
        let k = index_key(T, 1, &[Datum::Bytes(name.into()), Datum::Int(n)], Some(h));
        e.put(&k, 10, b"0");
    }
    // Unique index 2 on (int): the handle is in the value, except for a NULL entry.
    e.put(
        &index_key(T, 2, &[Datum::Int(5)], None),
        10,
        &unique_index_value(50),
    );
    e.put(
        &index_key(T, 2, &[Datum::Int(4)], None),
        10,
        &unique_index_value(40),
    );
    e.put(&index_key(T, 2, &[Datum::Null], Some(60)), 10, b"0");
    let snap = e.snap();
    let scan = |index_id, columns: Vec<ColumnInfo>, unique, desc| {
        let ex = Executor {
            tp: ExecType::IndexScan as i32,
            idx_scan: Some(proto::IndexScan {
                table_id: T,
                index_id,
                columns,
                desc,
                unique,
            }),
            ..Executor::default()
        };
        let (s, end) = index_range(T, index_id);
        let resp = handle(
            &request(&dag(vec![ex]), vec![KeyRange::new(s, end)], 20),
            &snap,
            &opts(),
        );
        rows(&resp).unwrap()
    };
    let b = |s: &str| Datum::Bytes(s.into());
    assert_eq!(
        scan(
            1,
            vec![
                column(10, FieldType::Bytes),
                column(11, FieldType::Int64),
                handle_column(12)
            ],
            false,
            false
        ),
        vec![
            vec![b("a"), Datum::Int(1), Datum::Int(2)],
            vec![b("a"), Datum::Int(2), Datum::Int(1)],
            vec![b("b"), Datum::Int(1), Datum::Int(3)],
        ]
    );
    assert_eq!(
        scan(
            2,
            vec![column(10, FieldType::Int64), handle_column(12)],
            true,
            true
        ),
        vec![
            vec![Datum::Int(5), Datum::Int(50)],
            vec![Datum::Int(4), Datum::Int(40)],
            vec![Datum::Null, Datum::Int(60)],
        ]
    );
    // Without a handle column, only the values.
    assert_eq!(
        scan(2, vec![column(10, FieldType::Int64)], true, false),
        vec![vec![Datum::Null], vec![Datum::Int(4)], vec![Datum::Int(5)]]
    );
}

#[test]
fn a_lock_that_blocks_the_read_is_returned_in_locked() {
    let e = TestEngine::new();
    simple_table(&e, 3);
    e.lock(&record_key(T, 2), 15);
    let snap = e.snap();
    let d = dag(vec![scan_c1(false)]);
    let resp = handle(&request(&d, vec![table_range(T)], 20), &snap, &opts());
    let lock = resp.locked.expect("locked");
    assert_eq!(lock.key, record_key(T, 2));
    assert_eq!(lock.primary_lock, b"primary");
    assert_eq!(lock.lock_version, 15);
    assert_eq!(lock.lock_ttl, 3000);
    assert_eq!(lock.min_commit_ts, 16);
    assert!(resp.data.is_empty() && resp.other_error.is_empty());
    // A point get meets it too; a read below the lock's start_ts does not.
    let resp = handle(&request(&d, vec![point(T, 2)], 20), &snap, &opts());
    assert!(resp.locked.is_some());
    let resp = handle(&request(&d, vec![table_range(T)], 12), &snap, &opts());
    assert_eq!(rows(&resp).unwrap(), ints(&[10, 20, 30]));
}

#[test]
fn a_range_outside_the_region_is_a_key_not_in_region_error() {
    let e = TestEngine::with_range(&record_key(T, 0), &record_key(T, 100));
    e.put_row(T, 1, 10, &[(1, Datum::Int(1))]);
    let snap = e.snap();
    let d = dag(vec![scan_c1(false)]);
    for r in [
        table_range(T),
        handle_range(T, -1, 5),
        handle_range(T, 50, 101),
        KeyRange::new(record_key(T, 1), Vec::new()),
    ] {
        let resp = handle(&request(&d, vec![r.clone()], 20), &snap, &opts());
        let re = resp
            .region_error
            .unwrap_or_else(|| panic!("no region error for {r:?}"));
        assert_eq!(re.kind, RegionErrorKind::KeyNotInRegion as i32);
        assert_eq!(re.region_id, SHARD);
    }
    let resp = handle(
        &request(&d, vec![handle_range(T, 0, 100)], 20),
        &snap,
        &opts(),
    );
    assert_eq!(rows(&resp).unwrap(), ints(&[1]));
}

#[test]
fn malformed_requests_and_dags_are_other_errors() {
    let e = TestEngine::new();
    simple_table(&e, 2);
    let snap = e.snap();
    let check = |resp: Response, what: &str| {
        assert!(!resp.other_error.is_empty(), "{what}: {resp:?}");
        assert!(resp.data.is_empty(), "{what}");
    };
    let ok = dag(vec![scan_c1(false)]);
    let mut req = request(&ok, vec![table_range(T)], 20);
    req.tp = 1;
    check(handle(&req, &snap, &opts()), "request type");
    let mut req = request(&ok, vec![table_range(T)], 20);
    req.data = vec![0xff, 0xff, 0xff];
    check(handle(&req, &snap, &opts()), "dag bytes");
    let unknown = Executor {
        tp: 99,
        ..Executor::default()
    };
    check(
        handle(
            &request(&dag(vec![unknown]), vec![table_range(T)], 20),
            &snap,
            &opts(),
        ),
        "unknown executor",
    );
    check(
        handle(
            &request(&dag(vec![limit(1)]), vec![table_range(T)], 20),
            &snap,
            &opts(),
        ),
        "first executor not a scan",
    );
    check(
        handle(
            &request(&dag(vec![]), vec![table_range(T)], 20),
            &snap,
            &opts(),
        ),
        "no executor",
    );
    let mut bad_offsets = ok.clone();
    bad_offsets.output_offsets = vec![1];
    check(
        handle(
            &request(&bad_offsets, vec![table_range(T)], 20),
            &snap,
            &opts(),
        ),
        "output offset",
    );
    let mut bad_type = column(1, FieldType::Int64);
    bad_type.tp = 77;
    check(
        handle(
            &request(
                &dag(vec![table_scan(T, vec![bad_type], false)]),
                vec![table_range(T)],
                20,
            ),
            &snap,
            &opts(),
        ),
        "column type",
    );
    check(
        handle(
            &request(&ok, vec![handle_range(T, 5, 9), handle_range(T, 1, 6)], 20),
            &snap,
            &opts(),
        ),
        "unordered ranges",
    );
    let resp = Response::decode(handle_bytes(&[0xff, 0x01], &snap, &opts()).as_slice()).unwrap();
    check(resp, "request bytes");
}

#[test]
fn evaluation_errors_travel_inside_the_response_data() {
    let e = TestEngine::new();
    e.put_row(T, 1, 10, &[(1, Datum::Int(i64::MAX))]);
    let plus_one = Expr::func(ScalarFuncSig::Plus, vec![Expr::column(0), Expr::int(1)]);
    let d = dag(vec![scan_c1(false), projection(vec![plus_one])]);
    let resp = handle(&request(&d, vec![table_range(T)], 20), &e.snap(), &opts());
    assert!(resp.other_error.is_empty() && resp.region_error.is_none());
    assert!(!resp.can_be_cached);
    let err = rows(&resp).unwrap_err();
    assert_eq!(err.code, wire::coprocessor::eval_error_code::OVERFLOW);
    // An expression the input types do not fit goes the same way.
    let bad = Expr::func(ScalarFuncSig::Plus, vec![Expr::column(0), Expr::bytes("x")]);
    let d = dag(vec![scan_c1(false), projection(vec![bad])]);
    let resp = handle(&request(&d, vec![table_range(T)], 20), &e.snap(), &opts());
    assert!(rows(&resp).is_err());
}

#[test]
fn output_offsets_select_and_reorder_columns() {
    let e = TestEngine::new();
    simple_table(&e, 2);
    let mut d = dag(vec![table_scan(
        T,
        vec![
            column(1, FieldType::Int64),
            column(2, FieldType::Bytes),
            handle_column(3),
        ],
        false,
    )]);
    d.output_offsets = vec![2, 1, 2];
    let resp = handle(&request(&d, vec![table_range(T)], 20), &e.snap(), &opts());
    assert_eq!(
        rows(&resp).unwrap(),
        vec![
            vec![Datum::Int(1), Datum::Bytes(b"r1".to_vec()), Datum::Int(1)],
            vec![Datum::Int(2), Datum::Bytes(b"r2".to_vec()), Datum::Int(2)],
        ]
    );
}

#[test]
fn a_passed_deadline_is_an_error_unless_deadline_checks_are_off() {
    let e = TestEngine::new();
    simple_table(&e, 2);
    let mut req = request(&dag(vec![scan_c1(false)]), vec![table_range(T)], 20);
    req.context = Some(Context {
        deadline_ms: 1,
        ..Context::default()
    });
    let resp = handle(&req, &e.snap(), &opts());
    assert!(resp.other_error.contains("deadline"), "{resp:?}");
    let lenient = HandlerOptions {
        check_deadline: false,
        ..opts()
    };
    assert_eq!(rows(&handle(&req, &e.snap(), &lenient)).unwrap().len(), 2);
}

#[test]
fn batches_grow_from_32_rows_doubling_up_to_1024() {
    let e = TestEngine::new();
    for h in 0..3000 {
        e.put_row(T, h, 10, &[(1, Datum::Int(h))]);
    }
    let mut d = dag(vec![scan_c1(false)]);
    d.collect_execution_summaries = true;
    let resp = handle(&request(&d, vec![table_range(T)], 20), &e.snap(), &opts());
    let sel = select_response(&resp);
    assert_eq!(sel.row_count, 3000);
    let s = &sel.execution_summaries;
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].num_produced_rows, 3000);
    // 32 + 64 + 128 + 256 + 512 + 1024 = 2016 rows in six batches, the rest in a seventh.
    assert_eq!(s[0].num_iterations, 7);
}

#[test]
fn execution_summaries_come_one_per_executor_in_dag_order() {
    let e = TestEngine::new();
    simple_table(&e, 10);
    let gt = Expr::func(ScalarFuncSig::Gt, vec![Expr::column(0), Expr::int(30)]);
    let mut d = dag(vec![scan_c1(false), selection(vec![gt]), limit(4)]);
    d.collect_execution_summaries = true;
    let resp = handle(&request(&d, vec![table_range(T)], 20), &e.snap(), &opts());
    let s = select_response(&resp).execution_summaries;
    let produced: Vec<u64> = s.iter().map(|s| s.num_produced_rows).collect();
    assert_eq!(produced, vec![10, 7, 4]);
    // Without the flag, none.
    d.collect_execution_summaries = false;
    let resp = handle(&request(&d, vec![table_range(T)], 20), &e.snap(), &opts());
    assert!(select_response(&resp).execution_summaries.is_empty());
}

#[test]
fn a_simple_aggregation_over_no_rows_emits_no_partial_row() {
    let e = TestEngine::new();
    simple_table(&e, 5);
    let count = Expr::agg(ExprType::Count, Expr::int(1));
    let never = Expr::func(ScalarFuncSig::Lt, vec![Expr::column(0), Expr::int(0)]);
    let d = dag(vec![
        scan_c1(false),
        selection(vec![never]),
        simple_agg(vec![count.clone()]),
    ]);
    let resp = handle(&request(&d, vec![table_range(T)], 20), &e.snap(), &opts());
    assert_eq!(rows(&resp).unwrap(), Vec::<Vec<Datum>>::new());
    assert_eq!(select_response(&resp).column_count, 1);
    let d = dag(vec![scan_c1(false), simple_agg(vec![count])]);
    let resp = handle(&request(&d, vec![table_range(T)], 20), &e.snap(), &opts());
    assert_eq!(rows(&resp).unwrap(), ints(&[5]));
}

#[test]
fn hash_aggregation_emits_aggregates_then_group_keys_with_avg_as_count_and_sum() {
    let e = TestEngine::new();
    for (h, g, v) in [
        (1, "a", Some(1)),
        (2, "b", Some(10)),
        (3, "a", None),
        (4, "a", Some(5)),
    ] {
        let v = v.map_or(Datum::Null, Datum::Int);
        e.put_row(T, h, 10, &[(1, v), (2, Datum::Bytes(g.into()))]);
    }
    let d = dag(vec![
        table_scan(
            T,
            vec![column(1, FieldType::Int64), column(2, FieldType::Bytes)],
            false,
        ),
        hash_agg(
            vec![Expr::column(1)],
            vec![
                Expr::agg(ExprType::Count, Expr::column(0)),
                Expr::agg(ExprType::Avg, Expr::column(0)),
                Expr::agg(ExprType::Max, Expr::column(0)),
                Expr::agg(ExprType::Min, Expr::column(0)),
                Expr::agg(ExprType::Sum, Expr::column(0)),
            ],
        ),
    ]);
    let resp = handle(&request(&d, vec![table_range(T)], 20), &e.snap(), &opts());
    let i = Datum::Int;
    assert_eq!(
        sorted(rows(&resp).unwrap()),
        sorted(vec![
            vec![
                i(2),
                i(2),
                i(6),
                i(5),
                i(1),
                i(6),
                Datum::Bytes(b"a".to_vec())
            ],
            vec![
                i(1),
                i(1),
                i(10),
                i(10),
                i(10),
                i(10),
                Datum::Bytes(b"b".to_vec())
            ],
        ])
    );
}

#[test]
fn an_integer_sum_beyond_64_bits_is_an_overflow_error() {
    let e = TestEngine::new();
    e.put_row(T, 1, 10, &[(1, Datum::Int(i64::MAX))]);
    e.put_row(T, 2, 10, &[(1, Datum::Int(i64::MAX))]);
    e.put_row(T, 3, 10, &[(1, Datum::Int(-10))]);
    let sum = |r| {
        let d = dag(vec![
            scan_c1(false),
            simple_agg(vec![Expr::agg(ExprType::Sum, Expr::column(0))]),
        ]);
        rows(&handle(&request(&d, vec![r], 20), &e.snap(), &opts()))
    };
    assert_eq!(
        sum(table_range(T)).unwrap_err().code,
        wire::coprocessor::eval_error_code::OVERFLOW
    );
    // The accumulator is wider than the result: MAX + (-10) fits.
    assert_eq!(
        sum(KeyRange::new(record_key(T, 2), record_key(T, 4))).unwrap(),
        ints(&[i64::MAX - 10])
    );
}

#[test]
fn top_n_puts_nulls_first_and_keeps_input_order_among_equal_keys() {
    let e = TestEngine::new();
    for (h, v) in [
        (1, Some(3)),
        (2, None),
        (3, Some(1)),
        (4, Some(3)),
        (5, None),
        (6, Some(2)),
    ] {
        e.put_row(T, h, 10, &[(1, v.map_or(Datum::Null, Datum::Int))]);
    }
    let scan = table_scan(
        T,
        vec![column(1, FieldType::Int64), handle_column(2)],
        false,
    );
    let run = |desc, n| {
        let d = dag(vec![scan.clone(), top_n(vec![(Expr::column(0), desc)], n)]);
        let resp = handle(&request(&d, vec![table_range(T)], 20), &e.snap(), &opts());
        rows(&resp)
            .unwrap()
            .into_iter()
            .map(|r| r[1].clone())
            .collect::<Vec<_>>()
    };
    let i = Datum::Int;
    assert_eq!(run(false, 4), vec![i(2), i(5), i(3), i(6)]);
    assert_eq!(run(true, 3), vec![i(1), i(4), i(6)]);
    assert_eq!(run(false, 100).len(), 6);
    assert!(run(false, 0).is_empty());
}

#[test]
fn cache_last_version_is_the_snapshots_data_version() {
    let e = TestEngine::new();
    simple_table(&e, 2);
    let snap = e.snap();
    let resp = handle(
        &request(&dag(vec![scan_c1(false)]), vec![table_range(T)], 20),
        &snap,
        &opts(),
    );
    assert_eq!(resp.cache_last_version, snap.data_version().unwrap());
    assert!(resp.cache_last_version > 0);
}

#[test]
fn grouping_by_one_int_column_makes_one_group_per_value_on_either_side_of_the_small_value_path() {
    // Small non-negative values find their group by index, every other value through the
    // hash map: over several batches each value still has exactly one group.
    let e = TestEngine::new();
    let keys = [
        Some(0),
        Some(1),
        Some(4095),
        Some(4096),
        Some(-1),
        None,
        Some(7),
    ];
    let mut want: std::collections::BTreeMap<Option<i64>, (i64, i64)> = Default::default();
    for h in 1..=3000i64 {
        let g = keys[h as usize % keys.len()];
        e.put_row(
            T,
            h,
            10,
            &[(1, g.map_or(Datum::Null, Datum::Int)), (2, Datum::Int(h))],
        );
        let w = want.entry(g).or_default();
        w.0 += 1;
        w.1 += h;
    }
    let d = dag(vec![
        table_scan(
            T,
            vec![column(1, FieldType::Int64), column(2, FieldType::Int64)],
            false,
        ),
        hash_agg(
            vec![Expr::column(0)],
            vec![
                Expr::agg(ExprType::Count, Expr::column(1)),
                Expr::agg(ExprType::Sum, Expr::column(1)),
            ],
        ),
    ]);
    let resp = handle(&request(&d, vec![table_range(T)], 20), &e.snap(), &opts());
    let want: Vec<Vec<Datum>> = want
        .into_iter()
        .map(|(g, (count, sum))| {
            vec![
                Datum::Int(count),
                Datum::Int(sum),
                g.map_or(Datum::Null, Datum::Int),
            ]
        })
        .collect();
    assert_eq!(sorted(rows(&resp).unwrap()), sorted(want));
}
