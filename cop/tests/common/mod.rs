//! Shared by the coprocessor's integration tests: an engine to write tables into, builders of
//! requests and DAGs, and response decoding. Nothing here calls the cop crate's executors or
//! expressions; only wire types, codecs and the handler entry point.

#![allow(dead_code)]

use std::sync::Arc;

use kvengine::mvcc::{Lock, LockType, WriteKind, WriteMeta};
use kvengine::{ColumnFamily, Engine, EngineOptions, LocalDfs, SyncPolicy, WriteBatch};
use prost::Message;
use wire::codec::datum::decode_datums;
use wire::codec::row::encode_row;
use wire::codec::table::{record_key, record_range};
use wire::coprocessor::{
    self as proto, ColumnInfo, DagRequest, ExecType, Executor, KeyRange, Request, Response,
    SelectResponse,
};
use wire::datum::{Datum, FieldType};

pub const SHARD: u64 = 1;

/// An engine with one shard over the whole key space, small memtables and blocks so that a few
/// rows already span several blocks, and no background jobs (tests flush and compact
/// explicitly).
pub struct TestEngine {
    pub engine: Engine,
    _dir: tempfile::TempDir,
}

impl TestEngine {
    pub fn new() -> TestEngine {
        Self::with_range(b"", b"")
    }

    pub fn with_range(start: &[u8], end: &[u8]) -> TestEngine {
        let dir = tempfile::tempdir().unwrap();
        let mut o = EngineOptions::new(dir.path().join("engine"));
        o.wal_sync = SyncPolicy::Off;
        o.memtable_size = 1 << 20;
        o.block_size = 256;
        o.l0_compaction_files = 100;
        o.compaction_threads = 0;
        let dfs = Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap());
        let engine = Engine::open(o, dfs).unwrap();
        engine.create_shard(SHARD, start, end).unwrap();
        TestEngine { engine, _dir: dir }
    }

    pub fn snap(&self) -> kvengine::SnapAccess {
        self.engine.snapshot(SHARD).unwrap()
    }

    /// The snapshot a worker rebuilds for a read of `ranges` at `start_ts` (it has no data
    /// version of its own).
    pub fn worker_snap(&self, ranges: &[KeyRange], start_ts: u64) -> kvengine::SnapAccess {
        let pairs: Vec<(&[u8], &[u8])> = ranges
            .iter()
            .map(|r| (r.start.as_slice(), r.end.as_slice()))
            .collect();
        let remote = self.snap().to_remote(&pairs, start_ts).unwrap();
        let dfs = Arc::new(LocalDfs::open(self._dir.path().join("dfs")).unwrap());
        kvengine::SnapAccess::from_remote(&remote.changeset, &remote.memtable_data, dfs, None)
            .unwrap()
    }

    pub fn put(&self, key: &[u8], commit_ts: u64, value: &[u8]) {
        let mut b = WriteBatch::new();
        b.put(
            ColumnFamily::Write,
            key,
            commit_ts,
            &meta(WriteKind::Put, commit_ts - 1, commit_ts),
            value,
        );
        self.engine.write(SHARD, &b).unwrap();
    }

    pub fn delete(&self, key: &[u8], commit_ts: u64) {
        let mut b = WriteBatch::new();
        b.delete(
            ColumnFamily::Write,
            key,
            commit_ts,
            &meta(WriteKind::Delete, commit_ts - 1, commit_ts),
        );
        self.engine.write(SHARD, &b).unwrap();
    }

    /// A Rollback record (readers skip it).
    pub fn rollback(&self, key: &[u8], ts: u64) {
        let mut b = WriteBatch::new();
        b.put(
            ColumnFamily::Write,
            key,
            ts,
            &meta(WriteKind::Rollback, ts, ts),
            b"",
        );
        self.engine.write(SHARD, &b).unwrap();
    }

    pub fn put_row(&self, table_id: i64, handle: i64, commit_ts: u64, row: &[(i64, Datum)]) {
        self.put(
            &record_key(table_id, handle),
            commit_ts,
            &encode_row(row).unwrap(),
        );
    }

    pub fn delete_row(&self, table_id: i64, handle: i64, commit_ts: u64) {
        self.delete(&record_key(table_id, handle), commit_ts);
    }

    /// A Put lock of a transaction that started at `start_ts`.
    pub fn lock(&self, key: &[u8], start_ts: u64) {
        let l = Lock {
            lock_type: LockType::Put,
            primary: b"primary".to_vec(),
            start_ts,
            ttl_ms: 3000,
            min_commit_ts: start_ts + 1,
            txn_size: 1,
            value: Some(b"v".to_vec()),
            secondaries: None,
        };
        let mut b = WriteBatch::new();
        b.put_lock(key, &l.encode());
        self.engine.write(SHARD, &b).unwrap();
    }

    pub fn flush(&self) {
        self.engine.flush_shard(SHARD).unwrap();
    }

    /// Flushes, then compacts every L0 file into the levels.
    pub fn compact(&self) {
        self.engine.flush_shard(SHARD).unwrap();
        self.engine.compact_shard(SHARD, true).unwrap();
    }
}

pub fn meta(kind: WriteKind, start_ts: u64, commit_ts: u64) -> [u8; 17] {
    WriteMeta {
        kind,
        start_ts,
        commit_ts,
    }
    .encode()
}

pub fn column(column_id: i64, tp: FieldType) -> ColumnInfo {
    ColumnInfo {
        column_id,
        tp: tp as i32,
        pk_handle: false,
        default_val: Vec::new(),
    }
}

pub fn handle_column(column_id: i64) -> ColumnInfo {
    ColumnInfo {
        column_id,
        tp: FieldType::Int64 as i32,
        pk_handle: true,
        default_val: Vec::new(),
    }
}

pub fn table_scan(table_id: i64, columns: Vec<ColumnInfo>, desc: bool) -> Executor {
    Executor {
        tp: ExecType::TableScan as i32,
        tbl_scan: Some(proto::TableScan {
            table_id,
            columns,
            desc,
        }),
        ..Executor::default()
    }
}

pub fn selection(conditions: Vec<proto::Expr>) -> Executor {
    Executor {
        tp: ExecType::Selection as i32,
        selection: Some(proto::Selection { conditions }),
        ..Executor::default()
    }
}

pub fn simple_agg(agg_func: Vec<proto::Expr>) -> Executor {
    Executor {
        tp: ExecType::SimpleAgg as i32,
        aggregation: Some(proto::Aggregation {
            group_by: Vec::new(),
            agg_func,
        }),
        ..Executor::default()
    }
}

pub fn hash_agg(group_by: Vec<proto::Expr>, agg_func: Vec<proto::Expr>) -> Executor {
    Executor {
        tp: ExecType::HashAgg as i32,
        aggregation: Some(proto::Aggregation { group_by, agg_func }),
        ..Executor::default()
    }
}

pub fn top_n(order_by: Vec<(proto::Expr, bool)>, limit: u64) -> Executor {
    Executor {
        tp: ExecType::TopN as i32,
        top_n: Some(proto::TopN {
            order_by: order_by
                .into_iter()
                .map(|(expr, desc)| proto::ByItem {
                    expr: Some(expr),
                    desc,
                })
                .collect(),
            limit,
        }),
        ..Executor::default()
    }
}

pub fn limit(limit: u64) -> Executor {
    Executor {
        tp: ExecType::Limit as i32,
        limit: Some(proto::Limit { limit }),
        ..Executor::default()
    }
}

pub fn projection(exprs: Vec<proto::Expr>) -> Executor {
    Executor {
        tp: ExecType::Projection as i32,
        projection: Some(proto::Projection { exprs }),
        ..Executor::default()
    }
}

pub fn dag(executors: Vec<Executor>) -> DagRequest {
    DagRequest {
        executors,
        ..DagRequest::default()
    }
}

pub fn request(dag: &DagRequest, ranges: Vec<KeyRange>, start_ts: u64) -> Request {
    Request {
        tp: proto::REQ_TYPE_DAG,
        data: dag.encode_to_vec(),
        start_ts,
        ranges,
        ..Request::default()
    }
}

pub fn table_range(table_id: i64) -> KeyRange {
    let (s, e) = record_range(table_id);
    KeyRange::new(s, e)
}

/// `[record_key(lo), record_key(hi))`.
pub fn handle_range(table_id: i64, lo: i64, hi: i64) -> KeyRange {
    KeyRange::new(record_key(table_id, lo), record_key(table_id, hi))
}

/// The point range of one row.
pub fn point(table_id: i64, handle: i64) -> KeyRange {
    let k = record_key(table_id, handle);
    let mut end = k.clone();
    end.push(0);
    KeyRange::new(k, end)
}

pub fn select_response(resp: &Response) -> SelectResponse {
    assert!(
        resp.region_error.is_none() && resp.locked.is_none() && resp.other_error.is_empty(),
        "request failed: {resp:?}"
    );
    SelectResponse::decode(resp.data.as_slice()).unwrap()
}

/// The rows of a response, or its evaluation error.
pub fn rows(resp: &Response) -> Result<Vec<Vec<Datum>>, proto::EvalError> {
    let sel = select_response(resp);
    if let Some(e) = sel.error {
        return Err(e);
    }
    let width = sel.column_count as usize;
    let n = sel.row_count as usize * width;
    let datums = decode_datums(&sel.rows_data, n).unwrap();
    if width == 0 {
        return Ok(vec![Vec::new(); sel.row_count as usize]);
    }
    Ok(datums.chunks(width).map(|c| c.to_vec()).collect())
}

/// Rows sorted by SQL order, for comparing partial results as multisets.
pub fn sorted(mut rows: Vec<Vec<Datum>>) -> Vec<Vec<Datum>> {
    rows.sort_by(|a, b| {
        a.iter()
            .zip(b)
            .map(|(x, y)| x.sql_cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    rows
}

/// Sends `req` page after page (following each response's scanned range with
/// `wire::paging::remaining_ranges`) until the region is done; returns the responses.
pub fn run_pages(
    snap: &kvengine::SnapAccess,
    req: &Request,
    desc: bool,
    opts: &cop::handler::HandlerOptions,
) -> Vec<Response> {
    let mut out = Vec::new();
    let mut req = req.clone();
    loop {
        let resp = cop::handler::handle(&req, snap, opts);
        let next = resp.range.clone();
        out.push(resp);
        match next {
            Some(scanned) => {
                req.ranges = wire::paging::remaining_ranges(&req.ranges, &scanned, desc);
                assert!(
                    out.len() < 100_000,
                    "paging does not terminate: last scanned range {scanned:?}"
                );
                if req.ranges.is_empty() {
                    break;
                }
            }
            None => break,
        }
    }
    out
}
