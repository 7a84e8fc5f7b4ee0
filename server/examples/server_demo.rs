//! The main job until the cluster lands: one storage server's worth of Stratus in one process.
//!
//! It loads a table through transactions (1PC inside a shard, 2PC across shards), flushes and
//! compacts it into the object store (a local directory), then answers pushed-down queries
//! with the coprocessor: locally, on a snapshot rebuilt the way a worker rebuilds it
//! (`to_remote` → bytes → `from_remote`), and from the cache-version fast path. Every result
//! is checked against a plain computation over the rows it loaded; a mismatch exits non-zero.
//!
//! `cargo run --release -p server --example server_demo -- [ROWS]` (default 200000).

use std::sync::Arc;
use std::time::Instant;

use cop::handler::{HandlerOptions, handle};
use kvengine::{Engine, EngineOptions, LocalDfs, SnapAccess, SyncPolicy};
use prost::Message;
use server::Tso;
use server::txn::{Mode, Storage, TxnClient};
use wire::codec::datum::decode_datums;
use wire::codec::row::encode_row;
use wire::codec::table::{record_key, record_range};
use wire::coprocessor::{
    Aggregation, ColumnInfo, DagRequest, ExecType, Executor, Expr, ExprType, KeyRange, Request,
    Response, ScalarFuncSig, SelectResponse, Selection, TableScan,
};
use wire::datum::{Datum, FieldType};

const TABLE: i64 = 1;
type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    let rows: i64 = match std::env::args().nth(1) {
        Some(s) => s
            .parse()
            .map_err(|e| format!("ROWS must be a positive integer, found {s:?}: {e}"))?,
        None => 200_000,
    };
    if rows < 2 {
        return Err(format!("ROWS must be at least 2, found {rows}").into());
    }
    let dir = tempfile::tempdir()?;
    println!("data dir: {}", dir.path().display());
    let mut opts = EngineOptions::new(dir.path().join("engine"));
    opts.log_mode = kvengine::LogMode::External;
    let dfs = Arc::new(LocalDfs::open(dir.path().join("dfs"))?);
    let engine = Engine::open(opts, dfs.clone())?;
    // Two shards (one-voter Raft groups): the table's first and second half.
    let split = record_key(TABLE, rows / 2);
    let raft = raftstore::start_standalone(
        engine.clone(),
        kvengine::raft_log::RaftLogOptions {
            sync: SyncPolicy::GroupCommit,
            ..kvengine::raft_log::RaftLogOptions::new(dir.path().join("raft"))
        },
        &[(1, Vec::new(), split.clone()), (2, split, Vec::new())],
        raftstore::RaftConfig::default(),
    )?;
    let tso = Arc::new(Tso::open(dir.path().join("tso"))?);
    let storage = Arc::new(Storage::new(engine.clone(), tso, raft)?);
    let client = TxnClient::new(storage);

    // Load: c1 = i, c2 = i % 1000, c3 = i % 7; 700 rows per transaction (some span both
    // shards). The first 90% go to SSTs in the object store, the rest stays in memtables.
    let flushed = rows * 9 / 10;
    let t = Instant::now();
    let (one_pc, two_pc) = load(&client, 0, flushed, rows)?;
    let t_flush = Instant::now();
    for shard in [1, 2] {
        engine.flush_shard(shard)?;
        engine.compact_shard(shard, true)?;
    }
    let flush_secs = t_flush.elapsed().as_secs_f64();
    let (one_pc2, two_pc2) = load(&client, flushed, rows, rows)?;
    let secs = t.elapsed().as_secs_f64() - flush_secs;
    println!(
        "load: {rows} rows in {secs:.2}s ({:.0} rows/s): {} transactions 1PC, {} 2PC (spanning both shards)",
        rows as f64 / secs,
        one_pc + one_pc2,
        two_pc + two_pc2
    );
    println!(
        "flush + compaction of the first {flushed} rows into the object store: {flush_secs:.2}s"
    );

    let k = 500;
    let want_sum: i64 = (0..rows).filter(|h| h % 1000 > k).sum();
    let want_count = (0..rows).filter(|h| h % 1000 > k).count() as i64;
    let query = sum_where_dag(k);
    let start_ts = client.current_ts()?;
    let local = HandlerOptions::origin();

    // Local execution on each shard's snapshot, partial results merged here.
    let t = Instant::now();
    let mut versions = Vec::new();
    let (mut sum, mut count) = (0, 0);
    for shard in [1, 2] {
        let snap = engine.snapshot(shard)?;
        let resp = run(&snap, &query, start_ts, 0, &local)?;
        versions.push(resp.cache_last_version);
        let (c, s) = partial_count_sum(&resp)?;
        count += c;
        sum += s;
    }
    check("local", (count, sum), (want_count, want_sum))?;
    println!(
        "SELECT COUNT(*), SUM(c1) WHERE c2 > {k}: count={count} sum={sum}  local {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );

    // The offload path in process: ship shard 2 (its newest rows are still in the memtable)
    // as a worker would receive it, rebuild it, run the same request.
    let snap = engine.snapshot(2)?;
    let ranges = [shard_range(&snap)];
    let t = Instant::now();
    let shipped = snap.to_remote(&ranges, start_ts)?;
    let body = shipped.memtable_data.len() + shipped.changeset.encoded_len();
    let rebuilt = SnapAccess::from_remote(
        &shipped.changeset,
        &shipped.memtable_data,
        dfs.clone(),
        None,
    )?;
    let remote = run(&rebuilt, &query, start_ts, 0, &HandlerOptions::worker())?;
    let origin = run(&snap, &query, start_ts, 0, &local)?;
    check(
        "rebuilt snapshot",
        partial_count_sum(&remote)?,
        partial_count_sum(&origin)?,
    )?;
    println!(
        "shard 2 rebuilt from a {body}-byte snapshot description ({} memtable rows) and queried: {:.1} ms, same result",
        shipped.rows,
        t.elapsed().as_secs_f64() * 1e3
    );

    // The cache fast path: the same request with the version it was computed at.
    let t = Instant::now();
    let snap = engine.snapshot(1)?;
    let hit = run(&snap, &query, start_ts, versions[0], &local)?;
    if !hit.is_cache_hit {
        return Err("expected a cache hit for an unchanged shard".into());
    }
    println!(
        "repeat on shard 1 with cache_if_match_version={}: cache hit in {:.3} ms",
        versions[0],
        t.elapsed().as_secs_f64() * 1e3
    );
    let mut txn = client.begin()?;
    txn.set(
        record_key(TABLE, 0),
        encode_row(&[(1, Datum::Int(0)), (2, Datum::Int(999)), (3, Datum::Int(0))])?,
    );
    txn.commit(Mode::OnePc)?;
    let after = run(
        &engine.snapshot(1)?,
        &query,
        client.current_ts()?,
        versions[0],
        &local,
    )?;
    if after.is_cache_hit {
        return Err("a write must invalidate the cached version".into());
    }
    println!(
        "after a write to shard 1: miss, new data version {} (was {})",
        after.cache_last_version, versions[0]
    );
    engine.close(true)?;
    println!("ok");
    Ok(())
}

/// Loads rows `[from, to)` in transactions of 700 rows; returns (1PC, 2PC) commit counts.
fn load(client: &TxnClient, from: i64, to: i64, total: i64) -> Result<(u32, u32), BoxError> {
    let (mut one_pc, mut two_pc) = (0, 0);
    let mut i = from;
    while i < to {
        let mut txn = client.begin()?;
        let end = (i + 700).min(to);
        for h in i..end {
            let value = encode_row(&[
                (1, Datum::Int(h)),
                (2, Datum::Int(h % 1000)),
                (3, Datum::Int(h % 7)),
            ])?;
            txn.set(record_key(TABLE, h), value);
        }
        match txn.commit(Mode::OnePc)?.mode {
            Mode::OnePc => one_pc += 1,
            _ => two_pc += 1,
        }
        if i / 50_000 != end / 50_000 || end == total {
            println!("  loaded {end}/{total} rows");
        }
        i = end;
    }
    Ok((one_pc, two_pc))
}

fn column(id: i64) -> ColumnInfo {
    ColumnInfo {
        column_id: id,
        tp: FieldType::Int64 as i32,
        pk_handle: false,
        default_val: Vec::new(),
    }
}

/// `SELECT COUNT(*), SUM(c1) FROM t WHERE c2 > k` as a partial aggregation.
fn sum_where_dag(k: i64) -> DagRequest {
    DagRequest {
        executors: vec![
            Executor {
                tp: ExecType::TableScan as i32,
                tbl_scan: Some(TableScan {
                    table_id: TABLE,
                    columns: vec![column(1), column(2)],
                    desc: false,
                }),
                ..Executor::default()
            },
            Executor {
                tp: ExecType::Selection as i32,
                selection: Some(Selection {
                    conditions: vec![Expr::func(
                        ScalarFuncSig::Gt,
                        vec![Expr::column(1), Expr::int(k)],
                    )],
                }),
                ..Executor::default()
            },
            Executor {
                tp: ExecType::SimpleAgg as i32,
                aggregation: Some(Aggregation {
                    group_by: Vec::new(),
                    agg_func: vec![
                        Expr::agg(ExprType::Count, Expr::int(1)),
                        Expr::agg(ExprType::Sum, Expr::column(0)),
                    ],
                }),
                ..Executor::default()
            },
        ],
        ..DagRequest::default()
    }
}

fn run(
    snap: &SnapAccess,
    dag: &DagRequest,
    start_ts: u64,
    cache_version: u64,
    opts: &HandlerOptions,
) -> Result<Response, BoxError> {
    let (start, end) = shard_range(snap);
    let req = Request {
        tp: wire::coprocessor::REQ_TYPE_DAG,
        data: dag.encode_to_vec(),
        start_ts,
        ranges: vec![KeyRange::new(start, end)],
        is_cache_enabled: true,
        cache_if_match_version: cache_version,
        ..Request::default()
    };
    let resp = handle(&req, snap, opts);
    if !resp.other_error.is_empty() || resp.region_error.is_some() || resp.locked.is_some() {
        return Err(format!("coprocessor request failed: {resp:?}").into());
    }
    Ok(resp)
}

/// The table's record range clipped to the shard's range, as a client routes it.
fn shard_range(snap: &SnapAccess) -> (Vec<u8>, Vec<u8>) {
    let (start, end) = record_range(TABLE);
    let start = start.as_slice().max(snap.start()).to_vec();
    let end = match snap.end() {
        [] => end,
        shard_end => end.as_slice().min(shard_end).to_vec(),
    };
    (start, end)
}

/// (count, sum) of one shard's partial aggregate; a shard without matching rows has none.
fn partial_count_sum(resp: &Response) -> Result<(i64, i64), BoxError> {
    let sel = SelectResponse::decode(resp.data.as_slice())?;
    if let Some(e) = sel.error {
        return Err(format!("evaluation error: {}", e.msg).into());
    }
    if sel.row_count == 0 {
        return Ok((0, 0));
    }
    match decode_datums(&sel.rows_data, 2)?.as_slice() {
        [Datum::Int(c), Datum::Int(s)] => Ok((*c, *s)),
        other => Err(format!("expected (count, sum) ints, found {other:?}").into()),
    }
}

fn check(what: &str, got: (i64, i64), want: (i64, i64)) -> Result<(), BoxError> {
    if got != want {
        return Err(format!("{what}: expected (count, sum) = {want:?}, found {got:?}").into());
    }
    Ok(())
}
