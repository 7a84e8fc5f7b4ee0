//! The worker over real HTTP, in process: an origin engine writes a table into a local object
//! store (some rows compacted into the levels, some in L0, some still in the memtable), ships a
//! snapshot the way a server does, and a worker serving on 127.0.0.1 reading the same store
//! must answer exactly what the handler answers on the origin. Malformed bodies get 400 with a
//! reason naming what failed, a store that lacks a file 502, an oversized body 413, and a
//! request that finds memory high until its deadline 503 (the cop-limiter, with an injected
//! memory reading).

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use changeset::{Change, ChangeSet, encode_changeset};
use cop::handler::HandlerOptions;
use kvengine::mvcc::{WriteKind, WriteMeta};
use kvengine::{ColumnFamily, Engine, EngineOptions, LocalDfs, SnapAccess, SyncPolicy, WriteBatch};
use node::{HttpClient, HttpReply};
use prost::Message;
use tokio::sync::oneshot;
use types::ReadableSize;
use wire::codec::row::encode_row;
use wire::codec::table::{record_key, record_range};
use wire::coprocessor::{
    self as proto, ColumnInfo, DagRequest, ExecType, Executor, Expr, ExprType, KeyRange, Request,
    Response, ScalarFuncSig,
};
use wire::datum::{Datum, FieldType};
use worker::cop_limiter::{LimitSource, MemorySource, MemoryUse};
use worker::{WorkerConfig, WorkerState};

const SHARD: u64 = 1;
const TABLE: i64 = 7;
const TIMEOUT: Duration = Duration::from_secs(30);

/// A storage engine whose SST files live in `dir/dfs`, the store the workers read.
struct Origin {
    engine: Engine,
    dir: tempfile::TempDir,
}

impl Origin {
    fn new() -> Origin {
        let dir = tempfile::tempdir().unwrap();
        let mut o = EngineOptions::new(dir.path().join("engine"));
        o.wal_sync = SyncPolicy::Off;
        o.memtable_size = 1 << 20;
        o.block_size = 256;
        o.l0_compaction_files = 100;
        o.compaction_threads = 0;
        let dfs = Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap());
        let engine = Engine::open(o, dfs).unwrap();
        engine.create_shard(SHARD, b"", b"").unwrap();
        Origin { engine, dir }
    }

    fn put_row(&self, handle: i64, commit_ts: u64, c1: i64) {
        let row = encode_row(&[
            (1, Datum::Int(c1)),
            (2, Datum::Bytes(format!("row {handle}").into_bytes())),
        ])
        .unwrap();
        let meta = WriteMeta {
            kind: WriteKind::Put,
            start_ts: commit_ts - 1,
            commit_ts,
        }
        .encode();
        let mut b = WriteBatch::new();
        b.put(
            ColumnFamily::Write,
            &record_key(TABLE, handle),
            commit_ts,
            &meta,
            &row,
        );
        self.engine.write(SHARD, &b).unwrap();
    }

    fn delete_row(&self, handle: i64, commit_ts: u64) {
        let meta = WriteMeta {
            kind: WriteKind::Delete,
            start_ts: commit_ts - 1,
            commit_ts,
        }
        .encode();
        let mut b = WriteBatch::new();
        b.delete(
            ColumnFamily::Write,
            &record_key(TABLE, handle),
            commit_ts,
            &meta,
        );
        self.engine.write(SHARD, &b).unwrap();
    }

    /// Rows 1..=300: 1..=100 compacted into the levels, 101..=200 in an L0 file, 201..=300 in
    /// the memtable, plus updates and deletes over older rows in the memtable and versions
    /// newer than the reads' start_ts in L0 and in the memtable (which must not be seen).
    fn with_table() -> Origin {
        let o = Origin::new();
        for h in 1..=100 {
            o.put_row(h, 10, h);
        }
        o.engine.flush_shard(SHARD).unwrap();
        o.engine.compact_shard(SHARD, true).unwrap();
        for h in 101..=200 {
            o.put_row(h, 20, h);
        }
        // Newer than the reads' start_ts, in a file: the worker must skip it on its own.
        o.put_row(120, 500, 1_000_000);
        o.engine.flush_shard(SHARD).unwrap();
        for h in 201..=300 {
            o.put_row(h, 30, h);
        }
        for h in (5..300).step_by(37) {
            o.put_row(h, 40, -h);
        }
        for h in [3, 150, 250] {
            o.delete_row(h, 45);
        }
        o.put_row(2, 1000, 1_000_000);
        o
    }

    fn snap(&self) -> SnapAccess {
        self.engine.snapshot(SHARD).unwrap()
    }

    fn dfs_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("dfs")
    }

    /// What the server ships for `req`: (encoded request, memtable data, encoded ChangeSet).
    fn ship(&self, req: &Request) -> (Vec<u8>, Bytes, ChangeSet) {
        let ranges: Vec<(&[u8], &[u8])> = req
            .ranges
            .iter()
            .map(|r| (r.start.as_slice(), r.end.as_slice()))
            .collect();
        let remote = self.snap().to_remote(&ranges, req.start_ts).unwrap();
        (req.encode_to_vec(), remote.memtable_data, remote.changeset)
    }

    fn body(&self, req: &Request) -> Vec<u8> {
        let (request, rows, cs) = self.ship(req);
        wire::offload::encode(&request, &rows, &encode_changeset(&cs))
    }
}

/// A worker serving in this process until dropped.
struct RunningWorker {
    url: String,
    client: HttpClient,
    stop: Option<oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl RunningWorker {
    async fn start(config: WorkerConfig) -> RunningWorker {
        RunningWorker::serve(WorkerState::open(config).unwrap()).await
    }

    async fn serve(state: WorkerState) -> RunningWorker {
        RunningWorker::serve_shared(Arc::new(state)).await
    }

    /// Serves `state`, which the caller may keep to look into.
    async fn serve_shared(state: Arc<WorkerState>) -> RunningWorker {
        let (listener, addr) = node::http::bind("stratus-worker", "127.0.0.1:0", None)
            .await
            .unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(worker::service::serve(state, listener, async move {
            let _ = stopped.await;
        }));
        RunningWorker {
            url: format!("http://{addr}"),
            client: HttpClient::new(256 << 20),
            stop: Some(stop),
            served: Some(served),
        }
    }

    async fn for_origin(origin: &Origin) -> RunningWorker {
        RunningWorker::start(config_for(origin)).await
    }

    async fn post(&self, body: impl Into<Bytes>) -> HttpReply {
        self.client
            .post(
                &format!("{}{}", self.url, wire::paths::COPROCESSOR),
                body.into(),
                TIMEOUT,
            )
            .await
            .unwrap()
    }

    async fn get(&self, path: &str) -> HttpReply {
        self.client
            .get(&format!("{}{path}", self.url), TIMEOUT)
            .await
            .unwrap()
    }

    /// Posts `body` and decodes the 200 answer.
    async fn run(&self, body: Vec<u8>) -> Response {
        let reply = self.post(body).await;
        assert_eq!(
            reply.status,
            200,
            "expected 200, found {}: {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
        Response::decode(reply.body).unwrap()
    }

    /// Stops serving and waits for the server to finish.
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            served.await.unwrap().unwrap();
        }
    }
}

impl Drop for RunningWorker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn config_for(origin: &Origin) -> WorkerConfig {
    let mut c = WorkerConfig::default();
    c.worker.addr = "127.0.0.1:0".into();
    c.worker.block_cache_size = ReadableSize::mib(8);
    c.worker.shutdown_grace = types::ReadableDuration::secs(5);
    c.dfs.local_dir = origin.dfs_dir();
    c
}

fn column(id: i64) -> ColumnInfo {
    ColumnInfo {
        column_id: id,
        tp: FieldType::Int64 as i32,
        pk_handle: false,
        default_val: Vec::new(),
    }
}

fn scan() -> Executor {
    Executor {
        tp: ExecType::TableScan as i32,
        tbl_scan: Some(proto::TableScan {
            table_id: TABLE,
            columns: vec![column(1)],
            desc: false,
        }),
        ..Executor::default()
    }
}

fn request(executors: Vec<Executor>, ranges: Vec<KeyRange>, paging_size: u64) -> Request {
    let dag = DagRequest {
        executors,
        ..DagRequest::default()
    };
    Request {
        tp: proto::REQ_TYPE_DAG,
        data: dag.encode_to_vec(),
        start_ts: 100,
        ranges,
        paging_size,
        ..Request::default()
    }
}

fn whole_table() -> Vec<KeyRange> {
    let (s, e) = record_range(TABLE);
    vec![KeyRange::new(s, e)]
}

/// SELECT COUNT(1), SUM(c1) over the table.
fn count_and_sum() -> Request {
    let agg = Executor {
        tp: ExecType::SimpleAgg as i32,
        aggregation: Some(proto::Aggregation {
            group_by: Vec::new(),
            agg_func: vec![
                Expr::agg(ExprType::Count, Expr::int(1)),
                Expr::agg(ExprType::Sum, Expr::column(0)),
            ],
        }),
        ..Executor::default()
    };
    request(vec![scan(), agg], whole_table(), 0)
}

/// SELECT c1 WHERE c1 > 50 LIMIT 70, in pages of 16 rows.
fn selection_limit_paged() -> Request {
    let selection = Executor {
        tp: ExecType::Selection as i32,
        selection: Some(proto::Selection {
            conditions: vec![Expr::func(
                ScalarFuncSig::Gt,
                vec![Expr::column(0), Expr::int(50)],
            )],
        }),
        ..Executor::default()
    };
    let limit = Executor {
        tp: ExecType::Limit as i32,
        limit: Some(proto::Limit { limit: 70 }),
        ..Executor::default()
    };
    request(vec![scan(), selection, limit], whole_table(), 16)
}

/// The origin's own answer to `req`.
fn local(origin: &Origin, req: &Request) -> Response {
    cop::handler::handle(req, &origin.snap(), &HandlerOptions::worker())
}

fn assert_same_result(remote: &Response, local: &Response) {
    assert!(
        remote.other_error.is_empty() && remote.region_error.is_none() && remote.locked.is_none(),
        "remote request failed: {remote:?}"
    );
    assert!(
        local.other_error.is_empty(),
        "local request failed: {local:?}"
    );
    assert!(!local.data.is_empty());
    assert_eq!(remote.data, local.data, "response data differs");
    assert_eq!(remote.range, local.range, "scanned range differs");
    assert!(!remote.is_cache_hit);
    assert_eq!(
        remote.cache_last_version, 0,
        "a worker never vouches for a version"
    );
}

fn reason(reply: &HttpReply) -> String {
    String::from_utf8_lossy(&reply.body).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_table_aggregation_matches_the_origin() {
    let origin = Origin::with_table();
    let worker = RunningWorker::for_origin(&origin).await;
    let req = count_and_sum();
    let remote = worker.run(origin.body(&req)).await;
    assert_same_result(&remote, &local(&origin, &req));
    assert!(
        remote.exec_details.is_some(),
        "exec details come from the handler"
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_request_over_the_same_files_opens_none_of_them() {
    let origin = Origin::with_table();
    let state = Arc::new(WorkerState::open(config_for(&origin)).unwrap());
    let worker = RunningWorker::serve_shared(Arc::clone(&state)).await;
    let req = count_and_sum();
    let body = origin.body(&req);
    assert_same_result(&worker.run(body.clone()).await, &local(&origin, &req));
    let opened = state.tables().stats().misses;
    assert!(opened > 0, "the first rebuild opened the region's files");
    assert_eq!(state.tables().stats().hits, 0);

    assert_same_result(&worker.run(body).await, &local(&origin, &req));
    let stats = state.tables().stats();
    assert_eq!(stats.misses, opened, "nothing opened again: {stats:?}");
    assert_eq!(stats.hits, opened, "every file found open: {stats:?}");
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_selection_with_limit_matches_the_origin_page_by_page() {
    let origin = Origin::with_table();
    let worker = RunningWorker::for_origin(&origin).await;
    let mut req = selection_limit_paged();
    let mut pages = 0;
    loop {
        let local = local(&origin, &req);
        let remote = worker.run(origin.body(&req)).await;
        assert_same_result(&remote, &local);
        pages += 1;
        let Some(scanned) = remote.range else { break };
        req.ranges = wire::paging::remaining_ranges(&req.ranges, &scanned, false);
        if req.ranges.is_empty() {
            break;
        }
        assert!(pages < 100, "paging does not terminate");
    }
    assert!(pages > 1, "expected several pages, found {pages}");
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_point_range_read_from_the_memtable_only_matches_the_origin() {
    let origin = Origin::with_table();
    let worker = RunningWorker::for_origin(&origin).await;
    let mut req = request(
        vec![scan()],
        vec![KeyRange::new(
            record_key(TABLE, 240),
            record_key(TABLE, 260),
        )],
        0,
    );
    let remote = worker.run(origin.body(&req)).await;
    assert_same_result(&remote, &local(&origin, &req));
    // The version at ts 1000 of row 2 stays invisible at start_ts 100 and visible above it.
    req.ranges = vec![KeyRange::new(record_key(TABLE, 1), record_key(TABLE, 4))];
    req.start_ts = 2000;
    let remote = worker.run(origin.body(&req)).await;
    assert_same_result(&remote, &local(&origin, &req));
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_bytes_are_a_bad_request_naming_the_format() {
    let origin = Origin::new();
    let worker = RunningWorker::for_origin(&origin).await;
    let reply = worker
        .post(&b"this is not an offload body at all"[..])
        .await;
    assert_eq!(reply.status, 400, "{}", reason(&reply));
    assert!(reason(&reply).contains("format"), "{}", reason(&reply));
    let reply = worker.post(Bytes::new()).await;
    assert_eq!(reply.status, 400, "{}", reason(&reply));
    assert!(
        reason(&reply).contains("format version"),
        "{}",
        reason(&reply)
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_body_is_a_bad_request_naming_the_cut_section() {
    let origin = Origin::with_table();
    let worker = RunningWorker::for_origin(&origin).await;
    let body = origin.body(&count_and_sum());
    let reply = worker.post(body[..body.len() - 3].to_vec()).await;
    assert_eq!(reply.status, 400, "{}", reason(&reply));
    assert!(
        reason(&reply).contains("truncated in changeset"),
        "{}",
        reason(&reply)
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_section_length_beyond_the_body_is_a_bad_request_naming_the_section() {
    let origin = Origin::with_table();
    let worker = RunningWorker::for_origin(&origin).await;
    let mut body = origin.body(&count_and_sum());
    let request_len = u32::from_le_bytes(body[4..8].try_into().unwrap()) as usize;
    let at = 8 + request_len;
    body[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let reply = worker.post(body).await;
    assert_eq!(reply.status, 400, "{}", reason(&reply));
    let text = reason(&reply);
    assert!(text.contains("memtable data"), "{text}");
    assert!(text.contains(&u32::MAX.to_string()), "{text}");
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_sections_are_bad_requests_naming_the_section() {
    let origin = Origin::with_table();
    let worker = RunningWorker::for_origin(&origin).await;
    let req = count_and_sum();
    let (request, rows, cs) = origin.ship(&req);
    let cs = encode_changeset(&cs);

    let reply = worker
        .post(wire::offload::encode(b"\xff\xff\xff", &rows, &cs))
        .await;
    assert_eq!(reply.status, 400, "{}", reason(&reply));
    assert!(reason(&reply).contains("cop request"), "{}", reason(&reply));

    let reply = worker
        .post(wire::offload::encode(&request, &rows, b"\xff\xff\xff"))
        .await;
    assert_eq!(reply.status, 400, "{}", reason(&reply));
    assert!(reason(&reply).contains("changeset"), "{}", reason(&reply));

    let mut corrupt = rows.to_vec();
    assert!(corrupt.len() > 8, "the memtable holds rows");
    let mid = corrupt.len() / 2;
    corrupt[mid] ^= 0x5a;
    let reply = worker
        .post(wire::offload::encode(&request, &corrupt, &cs))
        .await;
    assert_eq!(reply.status, 400, "{}", reason(&reply));
    assert!(
        reason(&reply).contains("memtable data"),
        "{}",
        reason(&reply)
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changeset_that_is_not_a_snapshot_is_a_bad_request() {
    let origin = Origin::with_table();
    let worker = RunningWorker::for_origin(&origin).await;
    let req = count_and_sum();
    let (request, rows, mut cs) = origin.ship(&req);
    cs.change = Some(Change::Flush(Default::default()));
    let reply = worker
        .post(wire::offload::encode(
            &request,
            &rows,
            &encode_changeset(&cs),
        ))
        .await;
    assert_eq!(reply.status, 400, "{}", reason(&reply));
    assert!(reason(&reply).contains("snapshot"), "{}", reason(&reply));
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changeset_naming_a_missing_file_is_a_store_error() {
    let origin = Origin::with_table();
    let worker = RunningWorker::for_origin(&origin).await;
    let req = count_and_sum();
    let (request, rows, mut cs) = origin.ship(&req);
    let Some(Change::Snapshot(snapshot)) = &mut cs.change else {
        panic!("expected a snapshot, found {:?}", cs.change);
    };
    let missing = 0x0dea_dbee_f000_0001;
    match snapshot.l0_creates.first_mut() {
        Some(l0) => l0.id = missing,
        None => panic!("expected an L0 file in {snapshot:?}"),
    }
    let reply = worker
        .post(wire::offload::encode(
            &request,
            &rows,
            &encode_changeset(&cs),
        ))
        .await;
    assert_eq!(reply.status, 502, "{}", reason(&reply));
    assert!(
        reason(&reply).contains(&format!("file_id={missing}")),
        "{}",
        reason(&reply)
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_above_the_limit_is_refused_with_413() {
    let origin = Origin::with_table();
    let mut config = config_for(&origin);
    config.worker.max_request_size = ReadableSize::kib(1);
    let worker = RunningWorker::start(config).await;
    let reply = worker.post(vec![0u8; 4096]).await;
    assert_eq!(reply.status, 413, "{}", reason(&reply));
    assert!(
        reason(&reply).contains("max-request-size"),
        "{}",
        reason(&reply)
    );
    // A body within the limit is still served.
    let req = request(
        vec![scan()],
        vec![KeyRange::new(record_key(TABLE, 10), record_key(TABLE, 12))],
        0,
    );
    let body = origin.body(&req);
    assert!(body.len() <= 1024, "body of {} bytes", body.len());
    let remote = worker.run(body).await;
    assert_same_result(&remote, &local(&origin, &req));
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_config_and_metrics_describe_the_worker() {
    let origin = Origin::with_table();
    let mut config = config_for(&origin);
    config.worker.labels.insert("zone".into(), "b".into());
    let worker = RunningWorker::start(config.clone()).await;
    worker.run(origin.body(&count_and_sum())).await;
    let reply = worker.post(&b"junk"[..]).await;
    assert_eq!(reply.status, 400);

    let status = worker.get(wire::paths::STATUS).await;
    assert_eq!(status.status, 200);
    let status: serde_json::Value = serde_json::from_slice(&status.body).unwrap();
    assert_eq!(status["role"], "worker");
    assert_eq!(status["labels"]["zone"], "b");
    assert_eq!(status["dfs"], "local");
    assert_eq!(status["requests"], 2);
    assert_eq!(status["in_flight"], 0);
    assert_eq!(
        status["addr"].as_str().unwrap(),
        worker.url.trim_start_matches("http://")
    );

    let text = worker.get(wire::paths::CONFIG).await;
    assert_eq!(text.status, 200);
    let served = WorkerConfig::parse(std::str::from_utf8(&text.body).unwrap(), "GET /config");
    assert_eq!(served.unwrap(), config);

    let metrics = worker.get(wire::paths::METRICS).await;
    let metrics = String::from_utf8(metrics.body.to_vec()).unwrap();
    for needle in [
        "stratus_worker_coprocessor_requests_total{result=\"ok\"}",
        "stratus_worker_coprocessor_requests_total{result=\"bad_request\"}",
        "stratus_worker_request_bytes_total",
        "stratus_worker_response_bytes_total",
        "stratus_worker_snapshot_rebuild_seconds_count",
        "stratus_worker_in_flight_requests",
        "stratus_kvengine_table_cache_misses_total",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from\n{metrics}");
    }
    worker.stop().await;
}

/// Memory at `high_permille` of the limit until `high_until`, then at 10%. (Time rather than a
/// count of readings: the worker also reads memory for its gauges and `/status`.)
struct ScriptedMemory {
    high_until: std::time::Instant,
    high_permille: u64,
}

impl ScriptedMemory {
    fn boxed(high_for: Duration, high_permille: u64) -> Box<dyn MemorySource> {
        Box::new(ScriptedMemory {
            high_until: std::time::Instant::now() + high_for,
            high_permille,
        })
    }
}

impl MemorySource for ScriptedMemory {
    fn read(&self) -> Option<MemoryUse> {
        let high = std::time::Instant::now() < self.high_until;
        Some(MemoryUse {
            used: if high { self.high_permille } else { 100 },
            limit: 1000,
            source: LimitSource::Configured,
        })
    }
}

fn limiter_config(origin: &Origin) -> WorkerConfig {
    let mut config = config_for(origin);
    config.cop_limiter.high_mem_ratio = 0.8;
    config.cop_limiter.wait_min_duration = types::ReadableDuration::millis(20);
    config.cop_limiter.wait_max_duration = types::ReadableDuration::millis(60);
    config
}

fn worker_with_memory(
    origin: &Origin,
    config: WorkerConfig,
    memory: Box<dyn MemorySource>,
) -> WorkerState {
    let dfs = Arc::new(LocalDfs::open(origin.dfs_dir()).unwrap());
    WorkerState::with_parts(config, dfs, memory)
}

fn unix_ms_in(d: Duration) -> u64 {
    (std::time::SystemTime::now() + d)
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn with_context(mut req: Request, keyspace_id: u32, deadline_ms: u64) -> Request {
    req.context = Some(proto::Context {
        keyspace_id,
        deadline_ms,
        ..proto::Context::default()
    });
    req
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_high_until_the_deadline_is_answered_503_with_the_ratio() {
    let origin = Origin::with_table();
    let state = worker_with_memory(
        &origin,
        limiter_config(&origin),
        ScriptedMemory::boxed(Duration::from_secs(3600), 950),
    );
    let worker = RunningWorker::serve(state).await;
    // The deadline is at least `created + 399 ms` (whole milliseconds, rounded down) and at
    // most `sent + 400 ms`. Both checks below hold however late the worker runs: it only
    // sleeps when the sleep fits before the deadline, and only gives up when the next sleep
    // (at most wait-max, 60 ms) would not.
    let created = std::time::Instant::now();
    let req = with_context(count_and_sum(), 1, unix_ms_in(Duration::from_millis(400)));
    let body = origin.body(&req);
    let sent = std::time::Instant::now();
    let reply = worker.post(body).await;
    let answered = std::time::Instant::now();
    assert_eq!(reply.status, 503, "{}", reason(&reply));
    let text = reason(&reply);
    assert!(text.contains("high-mem-ratio"), "{text}");
    assert!(text.contains("ratio=0.950"), "{text}");
    assert_eq!(text.trim_end().lines().count(), 1, "one line: {text}");
    let waited_ms: u128 = text
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("waited_ms=")?.parse().ok())
        .unwrap_or_else(|| panic!("no waited_ms in {text}"));
    let left_when_sent = (created + Duration::from_millis(400)).saturating_duration_since(sent);
    assert!(
        waited_ms <= left_when_sent.as_millis(),
        "no sleep past the deadline: slept {waited_ms} ms of the {left_when_sent:?} left"
    );
    assert!(
        answered >= created + Duration::from_millis(399 - 60),
        "gave up only when the next sleep could not fit: answered {:?} after creating the \
         request with a 400 ms deadline",
        answered - created
    );

    let metrics = String::from_utf8(worker.get(wire::paths::METRICS).await.body.to_vec()).unwrap();
    for needle in [
        "stratus_worker_coprocessor_requests_total{result=\"throttled\"}",
        "stratus_worker_cop_limiter_rejections_total",
        "stratus_worker_cop_limiter_throttled_rounds_total",
        "stratus_worker_cop_limiter_wait_seconds_count",
        "stratus_worker_cop_limiter_memory_ratio",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from\n{metrics}");
    }
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_waiting_for_memory_runs_once_it_drops() {
    let origin = Origin::with_table();
    let memory = ScriptedMemory::boxed(Duration::from_millis(300), 950);
    let started = std::time::Instant::now();
    let state = worker_with_memory(&origin, limiter_config(&origin), memory);
    let worker = RunningWorker::serve(state).await;
    let req = count_and_sum();
    let remote = worker.run(origin.body(&req)).await;
    let took = started.elapsed();
    assert_same_result(&remote, &local(&origin, &req));
    assert!(
        took >= Duration::from_millis(300),
        "ran only once memory dropped: {took:?}"
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_response_bytes_per_keyspace_over_the_sample_window() {
    let origin = Origin::with_table();
    let mut config = config_for(&origin);
    config.cop_limiter.sample_ttl = types::ReadableDuration::secs(100);
    let worker = RunningWorker::start(config).await;
    let mut sent = std::collections::BTreeMap::<u32, u64>::new();
    for (keyspace, req) in [
        (7, count_and_sum()),
        (7, selection_limit_paged()),
        (9, count_and_sum()),
        (0, count_and_sum()),
    ] {
        let req = if keyspace == 0 {
            req
        } else {
            with_context(req, keyspace, 0)
        };
        let reply = worker.post(origin.body(&req)).await;
        assert_eq!(reply.status, 200, "{}", reason(&reply));
        *sent.entry(keyspace).or_default() += reply.body.len() as u64;
    }
    let status = worker.get(wire::paths::STATUS).await;
    let status: serde_json::Value = serde_json::from_slice(&status.body).unwrap();
    let throughput = status["keyspace_throughput"].as_object().unwrap();
    assert_eq!(throughput.len(), sent.len(), "{throughput:?}");
    for (keyspace, bytes) in &sent {
        let rate = throughput[&keyspace.to_string()].as_f64().unwrap();
        assert!(
            (rate - *bytes as f64 / 100.0).abs() < 1e-9,
            "keyspace {keyspace}: {rate} vs {bytes} bytes"
        );
    }
    // memory-limit = 0: the physical memory, unless a cgroup limits the test.
    let source = status["cop_limiter"]["limit_source"].as_str().unwrap();
    assert!(["physical", "cgroup"].contains(&source), "{source}");
    assert!(status["cop_limiter"]["memory_ratio"].as_f64().unwrap() > 0.0);

    let metrics = String::from_utf8(worker.get(wire::paths::METRICS).await.body.to_vec()).unwrap();
    assert!(
        metrics.contains("stratus_worker_keyspace_throughput_bytes_per_second{keyspace=\"9\"}"),
        "{metrics}"
    );
    worker.stop().await;
}
