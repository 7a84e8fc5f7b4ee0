//! The entry point: one function that parses a request, runs it on a snapshot and returns a
//! response, used unchanged by the server (local path, on the shard's own snapshot) and the
//! worker (remote path, on a rebuilt one).
//!
//! Order of work: check the request (type, ranges inside the snapshot's region), answer a cache
//! hit if allowed ([`crate::cache`]), build the executor chain ([`crate::executors::build`]),
//! pull batches (growing 32 → 1024 rows) until the chain is drained or the page is full
//! ([`wire::paging`]), and encode the rows.
//!
//! Where failures go:
//! * an evaluation error (overflow, corrupt row, a type an expression cannot take) →
//!   `SelectResponse.error` inside `data`: a property of the query on this data;
//! * a range outside the snapshot's region → `region_error` (KeyNotInRegion): the client's
//!   region cache is stale;
//! * a lock that blocks the read → `locked`: the client resolves it and retries;
//! * anything else (malformed request, storage failure, deadline) → `other_error`.
//!
//! Region id and version checks against the live shard are the server's job, before it takes
//! the snapshot.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use kvengine::SnapAccess;
use prost::Message;

use crate::batch::{Batch, Column};
use crate::cache;
use crate::error::{Error, Result};
use crate::executors::{self, BatchExecutor, BatchSize, BuildContext};
use wire::codec::datum::encode_datum;
use wire::coprocessor::{
    self as proto, DagRequest, ExecDetails, KeyRange, RegionError, RegionErrorKind, Request,
    Response, SelectResponse,
};
use wire::datum::Datum;

/// How the handler runs a request.
#[derive(Debug, Clone)]
pub struct HandlerOptions {
    /// Answer cache hits. Only the origin of the data (the server's local path) may: a worker
    /// turns this off, since its rebuilt snapshot cannot vouch for a data version.
    pub allow_cache_hit: bool,
    /// Give up with an error once the request's `context.deadline_ms` (Unix milliseconds) has
    /// passed, checked between batches: the client no longer waits for the answer.
    pub check_deadline: bool,
    /// A page also ends, with a resume range, once its encoded rows reach this many bytes
    /// (0 = no limit). This bounds the memory of a response even when the client did not ask
    /// for paging, so a client must follow `range` whenever it is present. Results that only
    /// exist complete (a TopN heap, unpaged aggregates) are not cut.
    pub max_response_bytes: usize,
}

impl HandlerOptions {
    /// The server's local path: cache hits allowed.
    pub fn origin() -> HandlerOptions {
        HandlerOptions {
            allow_cache_hit: true,
            ..HandlerOptions::default()
        }
    }

    /// A worker's remote path: never a cache hit.
    pub fn worker() -> HandlerOptions {
        HandlerOptions::default()
    }
}

impl Default for HandlerOptions {
    fn default() -> Self {
        HandlerOptions {
            allow_cache_hit: false,
            check_deadline: true,
            max_response_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Decodes a [`Request`], handles it, and encodes the [`Response`]: the HTTP layers' entry.
/// Bytes that do not decode get a response with `other_error`.
pub fn handle_bytes(req: &[u8], snap: &SnapAccess, opts: &HandlerOptions) -> Vec<u8> {
    let resp = match Request::decode(req) {
        Ok(req) => handle(&req, snap, opts),
        Err(source) => error_response(
            Error::Decode {
                what: "coprocessor request",
                source,
            },
            snap,
        ),
    };
    resp.encode_to_vec()
}

/// Runs one coprocessor request on `snap` and returns its response (never fails: errors are
/// response fields, see the module docs).
pub fn handle(req: &Request, snap: &SnapAccess, opts: &HandlerOptions) -> Response {
    let t0 = Instant::now();
    let resp = match run(req, snap, opts) {
        Ok(resp) => resp,
        Err(e) => error_response(e, snap),
    };
    with_processed_time(resp, t0)
}

/// [`handle`] on a snapshot rebuilt from shipped rows (a worker's): an error in those rows
/// (`kvengine::Error::RemoteMemtableData` or `RemoteSnapshot`) is returned rather than
/// answered. A v4 blob's blocks are checked when a read reaches them, so such an error can come
/// from the execution as well as from the rebuild, and either way the body is at fault.
pub fn handle_shipped(
    req: &Request,
    snap: &SnapAccess,
    opts: &HandlerOptions,
) -> std::result::Result<Response, kvengine::Error> {
    use kvengine::Error as E;
    let t0 = Instant::now();
    let resp = match run(req, snap, opts) {
        Ok(resp) => resp,
        Err(Error::Storage(e @ (E::RemoteMemtableData { .. } | E::RemoteSnapshot { .. }))) => {
            return Err(e);
        }
        Err(e) => error_response(e, snap),
    };
    Ok(with_processed_time(resp, t0))
}

fn with_processed_time(mut resp: Response, t0: Instant) -> Response {
    let details = resp.exec_details.get_or_insert_with(ExecDetails::default);
    details.processed_ns = t0.elapsed().as_nanos() as u64;
    resp
}

/// What one execution produced before it is encoded into a response.
struct Outcome {
    select: SelectResponse,
    /// The scanned span when the page stopped early.
    range: Option<KeyRange>,
    scanned_keys: u64,
    newer_ts_free: bool,
}

/// The checks a request passes before it runs anywhere (the server calls this before it
/// decides between local and remote execution): a DAG request whose ranges lie inside the
/// snapshot's region and ascend. `Some(response)` is the answer to give instead (a region
/// error or `other_error`).
pub fn precheck(req: &Request, snap: &SnapAccess) -> Option<Response> {
    match check_request(req, snap) {
        Ok(resp) => resp,
        Err(e) => Some(error_response(e, snap)),
    }
}

/// A response reporting that `lock` blocks the read.
pub fn locked_response(lock: &kvengine::mvcc::LockInfo) -> Response {
    Response {
        locked: Some(lock_info(lock)),
        ..Response::default()
    }
}

fn check_request(req: &Request, snap: &SnapAccess) -> Result<Option<Response>> {
    if req.tp != proto::REQ_TYPE_DAG {
        return Err(Error::InvalidRequest(format!(
            "unsupported request type: tp={}",
            req.tp
        )));
    }
    check_ranges(&req.ranges, snap)
}

fn run(req: &Request, snap: &SnapAccess, opts: &HandlerOptions) -> Result<Response> {
    if let Some(resp) = check_request(req, snap)? {
        return Ok(resp);
    }
    if let Some(hit) = cache::cache_hit(req, snap, opts.allow_cache_hit) {
        return Ok(hit);
    }
    let dag = DagRequest::decode(req.data.as_slice()).map_err(|source| Error::Decode {
        what: "dag request",
        source,
    })?;
    if dag.encode_type != 0 {
        return Err(Error::InvalidRequest(format!(
            "unsupported encode type: encode_type={}",
            dag.encode_type
        )));
    }
    let deadline_ms = match &req.context {
        Some(c) if opts.check_deadline => c.deadline_ms,
        _ => 0,
    };
    let ctx = BuildContext {
        snap,
        start_ts: req.start_ts,
        ranges: req.ranges.clone(),
        paging_size: req.paging_size,
        track_newer_ts: req.is_cache_enabled,
        collect_summaries: dag.collect_execution_summaries,
    };
    let outcome = match executors::build(&dag, ctx) {
        Ok(mut root) => execute(
            &mut *root,
            &dag.output_offsets,
            req.paging_size,
            opts.max_response_bytes,
            deadline_ms,
            dag.collect_execution_summaries,
        )?,
        // An expression the input types do not fit: reported like any evaluation error.
        Err(Error::Eval(e)) => Outcome {
            select: eval_error_select(e),
            range: None,
            scanned_keys: 0,
            newer_ts_free: false,
        },
        Err(e) => return Err(e),
    };
    let ok = outcome.select.error.is_none();
    Ok(Response {
        data: outcome.select.encode_to_vec(),
        range: outcome.range,
        cache_last_version: cache::response_data_version(snap),
        can_be_cached: req.is_cache_enabled && ok && outcome.newer_ts_free,
        exec_details: Some(ExecDetails {
            scanned_keys: outcome.scanned_keys,
            ..ExecDetails::default()
        }),
        ..Response::default()
    })
}

/// Every range must lie inside the snapshot's region (and the ranges must ascend without
/// overlapping, which paging relies on). A range outside is a region error: the client routed
/// by a stale region map.
fn check_ranges(ranges: &[KeyRange], snap: &SnapAccess) -> Result<Option<Response>> {
    let (start, end) = (snap.start(), snap.end());
    for r in ranges {
        let inside = r.start.as_slice() >= start
            && (end.is_empty() || (!r.end.is_empty() && r.end.as_slice() <= end));
        if !inside {
            return Ok(Some(Response {
                region_error: Some(RegionError {
                    message: format!(
                        "key range not in region: start={:?} end={:?} region_start={start:?} region_end={end:?}",
                        r.start, r.end
                    ),
                    kind: RegionErrorKind::KeyNotInRegion as i32,
                    region_id: snap.shard_id(),
                    current_ver: snap.ver(),
                    ..RegionError::default()
                }),
                ..Response::default()
            }));
        }
    }
    for w in ranges.windows(2) {
        if w[0].end.is_empty() || w[0].end > w[1].start {
            return Err(Error::InvalidRequest(format!(
                "ranges must ascend without overlapping: end={:?} next_start={:?}",
                w[0].end, w[1].start
            )));
        }
    }
    Ok(None)
}

/// Pulls batches until the chain is drained, the page is full, or an error; encodes the rows.
fn execute(
    root: &mut dyn BatchExecutor,
    output_offsets: &[u32],
    paging_size: u64,
    max_response_bytes: usize,
    deadline_ms: u64,
    collect_summaries: bool,
) -> Result<Outcome> {
    let width = root.schema().len();
    let offsets: Vec<usize> = if output_offsets.is_empty() {
        (0..width).collect()
    } else {
        output_offsets
            .iter()
            .map(|&o| {
                let o = o as usize;
                if o < width {
                    Ok(o)
                } else {
                    Err(Error::InvalidRequest(format!(
                        "output offset out of range: offset={o} columns={width}"
                    )))
                }
            })
            .collect::<Result<_>>()?
    };
    let mut select = SelectResponse {
        column_count: offsets.len() as u32,
        ..SelectResponse::default()
    };
    let mut batch_size = BatchSize::default();
    let mut range = None;
    let mut failed = false;
    loop {
        if deadline_ms > 0 && now_ms() > deadline_ms {
            return Err(Error::DeadlineExceeded { deadline_ms });
        }
        let mut scan_rows = batch_size.next_size();
        if paging_size > 0 {
            // A streaming chain returns at most what it scans: never overshoot the page.
            let left = paging_size.saturating_sub(select.row_count).max(1);
            scan_rows = scan_rows.min(usize::try_from(left).unwrap_or(usize::MAX));
        }
        let r = match root.next_batch(scan_rows) {
            Ok(r) => r,
            Err(Error::Eval(e)) => {
                select = eval_error_select(e);
                failed = true;
                break;
            }
            Err(e) => return Err(e),
        };
        encode_rows(&r.batch, &offsets, &mut select)?;
        if r.is_drained {
            break;
        }
        let page_full = (paging_size > 0 && select.row_count >= paging_size)
            || (max_response_bytes > 0 && select.rows_data.len() >= max_response_bytes);
        if page_full && root.is_resumable() {
            // Nothing scanned yet means no progress to report: keep going instead.
            if let Some(scanned) = root.scan_progress().and_then(|s| s.scanned_range()) {
                range = Some(scanned);
                break;
            }
        }
    }
    let progress = root.scan_progress();
    if collect_summaries && !failed {
        root.collect_summaries(&mut select.execution_summaries);
    }
    Ok(Outcome {
        select,
        range,
        scanned_keys: progress.map_or(0, |p| p.scanned_keys()),
        newer_ts_free: !failed && progress.is_some_and(|p| p.newer_ts_free()),
    })
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn eval_error_select(e: crate::error::EvalError) -> SelectResponse {
    SelectResponse {
        error: Some(proto::EvalError {
            code: e.code,
            msg: e.msg,
        }),
        ..SelectResponse::default()
    }
}

/// Appends the batch's live rows, each the output columns as datums ([`encode_datum`],
/// non-comparable form), to `rows_data`.
fn encode_rows(batch: &Batch, offsets: &[usize], out: &mut SelectResponse) -> Result<()> {
    for &p in &batch.logical_rows {
        for &o in offsets {
            let col = batch.columns.get(o).ok_or_else(|| {
                Error::InvalidRequest(format!("output offset out of range: offset={o}"))
            })?;
            let d = match col {
                Column::Int(v) => v[p].map_or(Datum::Null, Datum::Int),
                Column::UInt(v) => v[p].map_or(Datum::Null, Datum::UInt),
                Column::Real(v) => v[p].map_or(Datum::Null, Datum::Real),
                Column::Bytes(v) => match &v[p] {
                    Some(b) => Datum::Bytes(b.clone()),
                    None => Datum::Null,
                },
            };
            encode_datum(&mut out.rows_data, &d, false);
        }
        out.row_count += 1;
    }
    Ok(())
}

/// A response for a request that could not be served.
fn error_response(e: Error, snap: &SnapAccess) -> Response {
    let mut resp = Response::default();
    match &e {
        Error::Storage(kvengine::Error::KeyIsLocked { lock }) => {
            resp.locked = Some(lock_info(lock));
        }
        Error::Storage(kvengine::Error::KeyNotInShard { key, .. }) => {
            resp.region_error = Some(RegionError {
                message: format!("key not in region: key={key:?}"),
                kind: RegionErrorKind::KeyNotInRegion as i32,
                region_id: snap.shard_id(),
                current_ver: snap.ver(),
                ..RegionError::default()
            });
        }
        Error::Storage(kvengine::Error::ShardBusy { .. }) => {
            resp.region_error = Some(RegionError {
                message: error_chain(&e),
                kind: RegionErrorKind::ServerBusy as i32,
                region_id: snap.shard_id(),
                current_ver: snap.ver(),
                ..RegionError::default()
            });
        }
        _ => resp.other_error = error_chain(&e),
    }
    resp
}

/// The error and its sources, joined: the message a client logs.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

/// The wire form of an engine lock.
pub fn lock_info(l: &kvengine::mvcc::LockInfo) -> proto::LockInfo {
    use kvengine::mvcc::LockType;
    proto::LockInfo {
        key: l.key.clone(),
        primary_lock: l.primary.clone(),
        lock_version: l.start_ts,
        lock_ttl: l.ttl_ms,
        txn_size: l.txn_size,
        lock_type: match l.lock_type {
            LockType::Put => 0,
            LockType::Delete => 1,
            LockType::Lock => 2,
            LockType::Pessimistic => 3,
        },
        use_async_commit: l.use_async_commit,
        min_commit_ts: l.min_commit_ts,
    }
}
