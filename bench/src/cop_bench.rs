//! Coprocessor scan + aggregate throughput: `SELECT SUM(c1) WHERE c2 > k` and
//! `SELECT SUM(c1), COUNT(*) GROUP BY c3` over one shard flushed and compacted into levels,
//! through the handler exactly as a server runs it (DAG decode, MVCC scan, row decode,
//! selection, aggregation, response encode), with a cold and a warm block cache. Both are the
//! best of three runs; a cold run opens the engine anew, so its block cache starts empty. Cold
//! runs are measured with the block cache's read-ahead (the default: one loader thread
//! decompresses the blocks ahead of the scan) and without it, each also as rows per CPU-second
//! of the whole process.
//!
//! Baseline, in the same run: the same encoded row values held in a `Vec`, decoded with the
//! same row codec and summed in a tight loop (GROUP BY into an array indexed by the group
//! value). It reads no keys, no versions, no blocks: the upper bound of what the executors
//! could reach. Rates are rows per second of wall-clock time; the handler is single-threaded,
//! and only a cold run with read-ahead uses a second core.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cop::handler::{HandlerOptions, handle};
use kvengine::mvcc::{WriteKind, WriteMeta};
use kvengine::{ColumnFamily, Engine, EngineOptions, LocalDfs, ReadAhead, SyncPolicy, WriteBatch};
use prost::Message;
use rand::Rng;
use wire::codec::row::{ColumnValue, RowView, decode_int, encode_row};
use wire::codec::table::{record_key, record_range};
use wire::coprocessor::{
    self as proto, ColumnInfo, DagRequest, ExecType, Executor, Expr, ExprType, KeyRange, Request,
    ScalarFuncSig, SelectResponse,
};
use wire::datum::{Datum, FieldType};

use crate::report::{dir_size, rate, row, table_header};
use crate::workload::rng;

const TABLE: i64 = 1;
/// `c2 > K` keeps about half the rows (c2 is uniform in 0..100).
const K: i64 = 50;
/// Distinct values of the GROUP BY column.
const GROUPS: i64 = 64;
/// The block cache of the cold runs that measure a cache smaller than the table.
const SMALL_CACHE: u64 = 16 << 20;

/// Timed repetitions of a run (warm, or cold on a reopened engine); the best counts.
const REPEATS: usize = 3;

/// Column ids: c1 (summed), c2 (filtered), c3 (grouped), c4 (a 24-byte string nobody reads,
/// so rows are realistically wider than what a query decodes).
const C1: i64 = 1;
const C2: i64 = 2;
const C3: i64 = 3;
const C4: i64 = 4;

fn row_value(r: &mut impl Rng) -> Vec<u8> {
    let mut pad = [0u8; 24];
    r.fill(&mut pad);
    encode_row(&[
        (C1, Datum::Int(r.random_range(-1000..1000))),
        (C2, Datum::Int(r.random_range(0..100))),
        (C3, Datum::Int(r.random_range(0..GROUPS))),
        (C4, Datum::Bytes(pad.to_vec())),
    ])
    .expect("row")
}

fn open(dir: &std::path::Path, block_cache: u64) -> Engine {
    open_with(dir, block_cache, ReadAhead::DEFAULT)
}

fn open_with(dir: &std::path::Path, block_cache: u64, read_ahead: ReadAhead) -> Engine {
    let mut o = EngineOptions::new(dir.join("engine"));
    o.read_ahead = read_ahead;
    o.wal_sync = SyncPolicy::Off;
    o.compaction_threads = 0;
    o.block_cache_size = block_cache;
    let dfs = Arc::new(LocalDfs::open(dir.join("dfs")).expect("dfs"));
    Engine::open(o, dfs).expect("open")
}

/// Writes `n` rows at commit_ts 10, 1000 per batch, then flushes and compacts them into the
/// levels (zstd-compressed tables, the engine default). Returns the row values in key order.
fn fill(e: &Engine, n: usize) -> Vec<Vec<u8>> {
    e.create_shard(1, b"", b"").expect("shard");
    let meta = WriteMeta {
        kind: WriteKind::Put,
        start_ts: 9,
        commit_ts: 10,
    }
    .encode();
    let mut r = rng(5);
    let mut values = Vec::with_capacity(n);
    for chunk_start in (0..n).step_by(1000) {
        let mut b = WriteBatch::new();
        for h in chunk_start..(chunk_start + 1000).min(n) {
            let v = row_value(&mut r);
            b.put(
                ColumnFamily::Write,
                &record_key(TABLE, h as i64),
                10,
                &meta,
                &v,
            );
            values.push(v);
        }
        e.write(1, &b).expect("write");
    }
    e.flush_shard(1).expect("flush");
    e.compact_shard(1, true).expect("compact");
    values
}

fn col(id: i64) -> ColumnInfo {
    ColumnInfo {
        column_id: id,
        tp: FieldType::Int64 as i32,
        pk_handle: false,
        default_val: Vec::new(),
    }
}

fn scan(columns: Vec<ColumnInfo>) -> Executor {
    Executor {
        tp: ExecType::TableScan as i32,
        tbl_scan: Some(proto::TableScan {
            table_id: TABLE,
            columns,
            desc: false,
        }),
        ..Executor::default()
    }
}

/// `SELECT SUM(c1) WHERE c2 > K`.
fn filtered_sum() -> DagRequest {
    DagRequest {
        executors: vec![
            scan(vec![col(C1), col(C2)]),
            Executor {
                tp: ExecType::Selection as i32,
                selection: Some(proto::Selection {
                    conditions: vec![Expr::func(
                        ScalarFuncSig::Gt,
                        vec![Expr::column(1), Expr::int(K)],
                    )],
                }),
                ..Executor::default()
            },
            Executor {
                tp: ExecType::SimpleAgg as i32,
                aggregation: Some(proto::Aggregation {
                    group_by: Vec::new(),
                    agg_func: vec![Expr::agg(ExprType::Sum, Expr::column(0))],
                }),
                ..Executor::default()
            },
        ],
        ..DagRequest::default()
    }
}

/// `SELECT SUM(c1), COUNT(*) GROUP BY c3`.
fn grouped_sum() -> DagRequest {
    DagRequest {
        executors: vec![
            scan(vec![col(C1), col(C3)]),
            Executor {
                tp: ExecType::HashAgg as i32,
                aggregation: Some(proto::Aggregation {
                    group_by: vec![Expr::column(1)],
                    agg_func: vec![
                        Expr::agg(ExprType::Sum, Expr::column(0)),
                        Expr::agg(ExprType::Count, Expr::int(1)),
                    ],
                }),
                ..Executor::default()
            },
        ],
        ..DagRequest::default()
    }
}

fn request(dag: &DagRequest) -> Request {
    let (start, end) = record_range(TABLE);
    Request {
        tp: proto::REQ_TYPE_DAG,
        data: dag.encode_to_vec(),
        start_ts: 20,
        ranges: vec![KeyRange::new(start, end)],
        ..Request::default()
    }
}

/// Runs the request once; returns the elapsed time and the result rows.
fn run_once(e: &Engine, req: &Request) -> (Duration, Vec<Datum>) {
    let snap = e.snapshot(1).expect("snapshot");
    let t0 = Instant::now();
    let resp = handle(req, &snap, &HandlerOptions::worker());
    let d = t0.elapsed();
    assert!(
        resp.other_error.is_empty() && resp.locked.is_none() && resp.region_error.is_none(),
        "{resp:?}"
    );
    let sel = SelectResponse::decode(resp.data.as_slice()).expect("select response");
    assert!(sel.error.is_none(), "{:?}", sel.error);
    let n = (sel.row_count * u64::from(sel.column_count)) as usize;
    let datums = wire::codec::datum::decode_datums(&sel.rows_data, n).expect("rows");
    (d, datums)
}

/// Runs the request once on a freshly opened engine: an empty block cache, every block read
/// from its file (the files themselves sit in the page cache, as a server's recent tables do)
/// and decompressed. Each call is its own engine, so a cold run can be repeated like a warm one.
/// Also returns the CPU time of the whole process during the query (the handler's thread and
/// the block cache's loader threads).
fn cold_once(
    dir: &std::path::Path,
    req: &Request,
    read_ahead: ReadAhead,
    cache_bytes: u64,
) -> (Duration, (Duration, Vec<Datum>)) {
    let e = open_with(dir, cache_bytes, read_ahead);
    let cpu0 = process_cpu();
    let (d, rows) = run_once(&e, req);
    let cpu = process_cpu().saturating_sub(cpu0);
    (d, (cpu, rows))
}

/// CPU time of every live thread of this process so far: the first field of each task's
/// `schedstat` (nanoseconds on a CPU). Threads that have exited are not counted, so callers
/// measure a span in which the threads they care about stay alive.
fn process_cpu() -> Duration {
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let path = task.expect("task").path().join("schedstat");
        if let Ok(text) = std::fs::read_to_string(&path) {
            ns += text
                .split_whitespace()
                .next()
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Duration::from_nanos(ns)
}

/// Two cold queries at once on a freshly opened engine, each over one half of the table, on
/// two threads (both cores busy scanning): the whole table's rows over the wall-clock time of
/// the pair. With read-ahead, the loader competes with the two scans for the cores.
fn cold_halves(
    dir: &std::path::Path,
    req: &Request,
    entries: usize,
    read_ahead: ReadAhead,
) -> (Duration, ()) {
    let e = open_with(dir, 1 << 30, read_ahead);
    let (start, end) = record_range(TABLE);
    let mid = record_key(TABLE, (entries / 2) as i64);
    let halves = [KeyRange::new(start, mid.clone()), KeyRange::new(mid, end)];
    let barrier = std::sync::Barrier::new(2);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for range in halves {
            let (e, barrier) = (&e, &barrier);
            let mut req = req.clone();
            req.ranges = vec![range];
            s.spawn(move || {
                barrier.wait();
                run_once(e, &req)
            });
        }
    });
    (t0.elapsed(), ())
}

/// The cold rows of one query: with the engine's default read-ahead (wall-clock rows/s, the
/// figure the target is about), without it, and the CPU cost of each (rows per CPU-second of
/// all threads: read-ahead moves work to another core, it does not remove it).
fn cold_rows(
    dir: &std::path::Path,
    req: &Request,
    n: f64,
    (what, base_name, base): (&str, &str, f64),
    check: impl Fn(Vec<Datum>),
) {
    let (on, (on_cpu, got)) = best(|| cold_once(dir, req, ReadAhead::DEFAULT, 1 << 30));
    check(got);
    let (off, (off_cpu, got)) = best(|| cold_once(dir, req, ReadAhead::OFF, 1 << 30));
    check(got);
    // A cache far smaller than the table: blocks loaded ahead compete with the ones the
    // scan reads for admission, and a block the cache refused would be read twice.
    let (small_on, (_, got)) = best(|| cold_once(dir, req, ReadAhead::DEFAULT, SMALL_CACHE));
    check(got);
    let (small_off, (_, got)) = best(|| cold_once(dir, req, ReadAhead::OFF, SMALL_CACHE));
    check(got);
    row(
        &format!("{what}, cold block cache"),
        "rows/s",
        rate(n, on),
        base_name,
        base,
    );
    row(
        &format!("{what}, cold, no read-ahead"),
        "rows/s",
        rate(n, off),
        base_name,
        base,
    );
    row(
        &format!("{what}, cold: rows per CPU-second, read-ahead on / off"),
        "rows/s",
        rate(n, on_cpu),
        "off",
        rate(n, off_cpu),
    );
    row(
        &format!("{what}, cold, 16 MiB block cache: read-ahead on / off"),
        "rows/s",
        rate(n, small_on),
        "off",
        rate(n, small_off),
    );
    let (on, _) = best(|| cold_halves(dir, req, n as usize, ReadAhead::DEFAULT));
    let (off, _) = best(|| cold_halves(dir, req, n as usize, ReadAhead::OFF));
    row(
        &format!("{what}, cold, two halves at once on two threads: read-ahead on / off"),
        "rows/s",
        rate(n, on),
        "off",
        rate(n, off),
    );
}

/// Walks the table with the MVCC scanner the table scan uses, touching every key and value.
fn raw_scan(e: &Engine) -> (Duration, usize) {
    let snap = e.snapshot(1).expect("snapshot");
    let (start, end) = record_range(TABLE);
    let t0 = Instant::now();
    let mut s = snap.mvcc_scan(&start, &end, 20, false, &[]).expect("scan");
    let mut bytes = 0usize;
    while s.valid() {
        bytes += black_box(s.key()).len() + black_box(s.value()).len();
        s.next().expect("next");
    }
    (t0.elapsed(), black_box(bytes))
}

fn int_of(v: &[u8]) -> i64 {
    decode_int(v).expect("int")
}

fn find(row: &RowView<'_>, id: i64) -> i64 {
    match row.find(id) {
        ColumnValue::Value(v) => int_of(v),
        _ => panic!("column {id} missing"),
    }
}

/// The baseline of the filtered sum: parse each row, decode c2 and c1, filter, sum.
fn baseline_filtered(values: &[Vec<u8>]) -> (Duration, i64) {
    let t0 = Instant::now();
    let mut sum = 0i64;
    for v in values {
        let row = RowView::parse(black_box(v)).expect("row");
        if find(&row, C2) > K {
            sum += find(&row, C1);
        }
    }
    (t0.elapsed(), black_box(sum))
}

/// The baseline of the grouped sum: parse, decode c3 and c1, add into an array slot.
fn baseline_grouped(values: &[Vec<u8>]) -> (Duration, Vec<(i64, i64)>) {
    let t0 = Instant::now();
    let mut groups = vec![(0i64, 0i64); GROUPS as usize];
    for v in values {
        let row = RowView::parse(black_box(v)).expect("row");
        let g = &mut groups[find(&row, C3) as usize];
        g.0 += find(&row, C1);
        g.1 += 1;
    }
    (t0.elapsed(), black_box(groups))
}

fn best<T>(mut f: impl FnMut() -> (Duration, T)) -> (Duration, T) {
    let mut out = f();
    for _ in 1..REPEATS {
        let r = f();
        if r.0 < out.0 {
            out = r;
        }
    }
    out
}

pub fn run(entries: usize) {
    let dir = tempfile::tempdir().expect("tmp");
    let values = {
        let e = open(dir.path(), 1 << 30);
        let values = fill(&e, entries);
        e.close(false).expect("close");
        values
    };
    let n = entries as f64;
    let tables_mib = dir_size(&dir.path().join("dfs")) as f64 / (1 << 20) as f64;
    table_header(&format!(
        "coprocessor scan + aggregate ({entries} rows of 4 columns, one shard in levels, {tables_mib:.0} MiB of zstd tables; wall-clock rows/s)"
    ));

    // SUM(c1) WHERE c2 > K.
    let (base_d, base_sum) = best(|| baseline_filtered(&values));
    let req = request(&filtered_sum());
    let e = open(dir.path(), 1 << 30);
    run_once(&e, &req);
    let (warm, got) = best(|| run_once(&e, &req));
    assert_eq!(got, vec![Datum::Int(base_sum)]);
    drop(e);
    let base = rate(n, base_d);
    let name = "decode + sum the same rows from a Vec";
    cold_rows(
        dir.path(),
        &req,
        n,
        ("SUM(c1) WHERE c2 > k", name, base),
        |got| assert_eq!(got, vec![Datum::Int(base_sum)], "cop and baseline disagree"),
    );
    row(
        "SUM(c1) WHERE c2 > k, warm block cache",
        "rows/s",
        rate(n, warm),
        name,
        base,
    );

    // Where the time goes: the MVCC scan alone, reading every key and value and decoding
    // nothing, on the same warm snapshot.
    let e = open(dir.path(), 1 << 30);
    run_once(&e, &req);
    let (scan, _) = best(|| raw_scan(&e));
    drop(e);
    row(
        "(for comparison) MVCC scan alone, warm: keys + values, no decode",
        "rows/s",
        rate(n, scan),
        name,
        base,
    );

    // SUM(c1), COUNT(*) GROUP BY c3.
    let (base_d, base_groups) = best(|| baseline_grouped(&values));
    let mut want: Vec<(i64, i64, i64)> = base_groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.1 > 0)
        .map(|(k, g)| (g.0, g.1, k as i64))
        .collect();
    want.sort();
    let check = |got: Vec<Datum>| {
        let mut rows: Vec<(i64, i64, i64)> = got
            .chunks(3)
            .map(|c| match c {
                [Datum::Int(s), Datum::Int(n), Datum::Int(k)] => (*s, *n, *k),
                other => panic!("unexpected row {other:?}"),
            })
            .collect();
        rows.sort();
        assert_eq!(rows, want, "cop and baseline disagree");
    };
    let req = request(&grouped_sum());
    let e = open(dir.path(), 1 << 30);
    run_once(&e, &req);
    let (warm, got) = best(|| run_once(&e, &req));
    check(got);
    drop(e);
    let base = rate(n, base_d);
    let name = "decode + array-indexed sum of the same rows from a Vec";
    cold_rows(
        dir.path(),
        &req,
        n,
        ("SUM(c1), COUNT(*) GROUP BY c3", name, base),
        check,
    );
    row(
        "SUM(c1), COUNT(*) GROUP BY c3, warm block cache",
        "rows/s",
        rate(n, warm),
        name,
        base,
    );
}
