//! The worker's HTTP API:
//!
//! * `POST /coprocessor`: an offload body in, an encoded `wire::coprocessor::Response` out (200).
//!   413 when the body exceeds `worker.max-request-size` (read no further than the limit),
//!   400 when the body is malformed, 502 when the object store fails during the rebuild, 500
//!   if the handler panics, 503 when memory stayed above `cop-limiter.high-mem-ratio` until
//!   the request's deadline ([`crate::cop_limiter`]). Error answers carry a one-line reason.
//!   Between decoding and running, `cop-topn-max-pushdown-rows` may set the request's paging
//!   ([`crate::topn_paging`]) and the cop-limiter may make it wait.
//! * `POST /delegate/coprocessor`: the delegate path, a client's `wire::coprocessor::Request` in, a
//!   `wire::coprocessor::Response` out; the `x-stratus-region-server` header names the base URL of
//!   the server owning the region (see [`crate::delegate`] for the answers).
//! * `POST /compact`: a server's compaction job in, its outputs' metadata out
//!   ([`crate::compaction`]).
//! * `GET /config`: the effective config (TOML).
//! * `GET /status`: JSON `{"role":"worker","addr","labels","uptime_secs","requests",
//!   "in_flight","dfs","keyspace_throughput","cop_limiter","compaction"}`:
//!   `keyspace_throughput` maps each keyspace id (a string) with answers in the
//!   `cop-limiter.sample-ttl` window to its bytes per second; `cop_limiter` is the current memory reading (`memory_ratio`, `memory_used`,
//!   `memory_limit`, `limit_source`: cgroup, configured or physical; null when unreadable),
//!   `high_mem_ratio`, the requests waiting for memory now (`waiting`), and the admitted ones
//!   running now and at most at once since the start (`running`, `running_peak`);
//!   `compaction` holds the compaction jobs running now and `worker.max-compaction-jobs`
//!   (`running`, `max_jobs`).
//! * `GET /metrics`: Prometheus text.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ::node::http::HttpError;
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use prost::Message;
use tokio::net::TcpListener;
use wire::paths;

use crate::cop_limiter::{self, Admission, TokioClock};
use crate::coprocessor::{Offload, OffloadError};
use crate::metrics::{self, RequestResult};
use crate::state::WorkerState;
use crate::topn_paging;

/// The router over `state`, metered as this worker ([`::node::traffic::metered`]).
pub fn router(state: Arc<WorkerState>) -> Router {
    let meter = state.config().meter();
    let routes = Router::new()
        .route(paths::COPROCESSOR, post(coprocessor_handler))
        .route(
            paths::DELEGATE_COPROCESSOR,
            post(crate::delegate::delegate_handler),
        )
        .route(paths::COMPACT, post(crate::compaction::compact_handler))
        .route(paths::CONFIG, get(config_handler))
        .route(paths::STATUS, get(status_handler))
        .route(paths::METRICS, get(::node::http::metrics_handler))
        .with_state(state);
    // A worker serves no admin path: no token to accept.
    let routes = ::node::access::guarded(routes, wire::traffic::Role::Worker, None);
    ::node::traffic::metered(routes, meter)
}

/// Serves `state` on `listener` until `shutdown` resolves, then lets in-flight requests
/// finish within `worker.shutdown-grace`.
pub async fn serve(
    state: Arc<WorkerState>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let grace = state.config().worker.shutdown_grace.duration();
    state.set_bound_addr(listener.local_addr()?);
    let refresher = tokio::spawn(refresh_gauges(Arc::clone(&state)));
    let w = &state.config().worker;
    let heartbeat = (!w.pd_endpoints.is_empty()).then(|| {
        tokio::spawn(pd_heartbeat(
            if w.advertise_url.is_empty() {
                format!(
                    "{}://{}",
                    ::node::tls::scheme(state.tls().map(|t| t.as_ref())),
                    state.addr()
                )
            } else {
                w.advertise_url.trim_end_matches('/').to_string()
            },
            w.labels.clone(),
            state.config().meter(),
            state.tls().cloned(),
            w.pd_endpoints.clone(),
            w.pd_heartbeat_interval.duration(),
        ))
    });
    let limits = state.config().http.clone();
    let tls = state.tls().cloned();
    let served =
        ::node::http::serve_until(listener, router(state), shutdown, grace, &limits, tls).await;
    refresher.abort();
    if let Some(h) = heartbeat {
        h.abort();
    }
    served
}

/// Registers this worker with the placement driver every `every` (`[worker] pd-endpoints`):
/// servers and clients learn live workers from the registrations. A failed heartbeat is
/// logged once and retried on the next tick.
async fn pd_heartbeat(
    url: String,
    labels: std::collections::BTreeMap<String, String>,
    meter: ::node::Meter,
    tls: Option<Arc<::node::tls::Tls>>,
    endpoints: Vec<String>,
    every: Duration,
) {
    let client = ::node::PdClient::metered(
        &endpoints,
        every.max(Duration::from_millis(500)),
        meter,
        tls.as_deref(),
    );
    let hb = wire::pd::WorkerHeartbeat {
        url,
        labels: wire::region::labels(&labels),
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tick.tick().await;
        // A refusal comes back as an error (the client retries it until its deadline).
        match client.worker_heartbeat(&hb).await.map(|r| r.worker_id) {
            Ok(id) if failing => {
                tracing::info!(worker_id = id, "registered with the placement driver again");
                failing = false;
            }
            Ok(_) => {}
            Err(e) if !failing => {
                tracing::warn!("cannot register with the placement driver: {e}");
                failing = true;
            }
            Err(_) => {}
        }
    }
}

/// Every second: the memory-ratio gauge and the keyspace throughput gauges, so that they
/// move (and a keyspace that stopped sending leaves) without requests.
async fn refresh_gauges(state: Arc<WorkerState>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        state.limiter().read_memory();
        state.limiter().throughput(Instant::now());
    }
}

async fn coprocessor_handler(
    State(state): State<Arc<WorkerState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let _in_flight = state.begin_request();
    let (result, mut answer) = coprocessor_answer(&state, &headers, body).await;
    metrics::request_finished(result);
    // Every answer, errors too, tells the server which memtable-data format to send next.
    answer.headers_mut().insert(
        wire::offload::MEMTABLE_DATA_FORMAT_HEADER,
        HeaderValue::from(u16::from(state.config().memtable_data_format().as_u8())),
    );
    answer
}

async fn coprocessor_answer(
    state: &Arc<WorkerState>,
    headers: &HeaderMap,
    body: Body,
) -> (RequestResult, Response) {
    let limit = state.config().max_request_bytes();
    let body = match read_body(headers, body, limit, "offload body").await {
        Ok(body) => body,
        Err(e) => return (e.result, e.error.into_response()),
    };
    metrics::REQUEST_BYTES.inc_by(body.len() as u64);
    let mut offload = match Offload::decode(&body) {
        Ok(offload) => offload,
        Err(e) => return offload_error_answer(e),
    };
    if let Err(e) = offload.check_memtable_data_format(state.config().memtable_data_format()) {
        return offload_error_answer(e);
    }
    apply_topn_paging(state, &mut offload.request);
    let (keyspace, deadline_ms) = offload
        .request
        .context
        .as_ref()
        .map_or((0, 0), |c| (c.keyspace_id, c.deadline_ms));
    let _running = match admit(state, deadline_ms).await {
        Ok((_, running)) => running,
        Err(rejected) => return rejected,
    };
    match execute(state, offload).await {
        Ok(Ok(resp)) => (RequestResult::Ok, encoded(state, keyspace, &resp)),
        Ok(Err(e)) => offload_error_answer(e),
        Err(failed) => failed,
    }
}

/// The worker's TopN paging policy (`cop-topn-max-pushdown-rows`, [`topn_paging`]) applied
/// to `request`, counted by what it did. Both endpoints run it before executing.
pub(crate) fn apply_topn_paging(state: &WorkerState, request: &mut wire::coprocessor::Request) {
    let max_rows = state.config().cop_topn_max_pushdown_rows;
    if let Some(action) = topn_paging::apply(request, max_rows) {
        metrics::TOPN_PAGING
            .with_label_values(&[action.as_str()])
            .inc();
    }
}

/// Runs `offload` on the blocking pool: its response or its error; `Err` is the 500 answer
/// when the task itself failed.
pub(crate) async fn execute(
    state: &Arc<WorkerState>,
    offload: Offload,
) -> Result<Result<wire::coprocessor::Response, OffloadError>, (RequestResult, Response)> {
    if let Ok(format) = changeset::memtable_data::peek_format(&offload.memtable_data) {
        metrics::MEMTABLE_DATA_FORMATS
            .with_label_values(&[format.as_str()])
            .inc();
    }
    let worker = Arc::clone(state);
    match tokio::task::spawn_blocking(move || offload.execute(worker.tables())).await {
        Ok(done) => Ok(done.map(|d| d.response)),
        Err(join) => {
            tracing::error!("coprocessor handler failed: {join}");
            let answer =
                HttpError::internal(format!("coprocessor handler failed: {join}")).into_response();
            Err((RequestResult::Internal, answer))
        }
    }
}

/// The 200 answer carrying `resp`, counted in the response bytes and the keyspace's
/// throughput.
pub(crate) fn encoded(
    state: &WorkerState,
    keyspace: u32,
    resp: &wire::coprocessor::Response,
) -> Response {
    let encoded = resp.encode_to_vec();
    metrics::RESPONSE_BYTES.inc_by(encoded.len() as u64);
    state
        .limiter()
        .record_response(keyspace, encoded.len() as u64, Instant::now());
    (
        [(header::CONTENT_TYPE, wire::PROTOBUF_CONTENT_TYPE)],
        encoded,
    )
        .into_response()
}

/// 400 when the body is at fault, 502 when the object store is.
fn offload_error_answer(e: OffloadError) -> (RequestResult, Response) {
    let reason = e.reason();
    if e.is_bad_request() {
        tracing::debug!("rejected an offload body: {reason}");
        return (
            RequestResult::BadRequest,
            HttpError::bad_request(reason).into_response(),
        );
    }
    tracing::warn!("offloaded request failed: {reason}");
    let answer = HttpError {
        status: StatusCode::BAD_GATEWAY,
        message: reason,
    };
    (RequestResult::StoreError, answer.into_response())
}

/// A body that could not be read, and how to count it.
pub(crate) struct BodyError {
    pub(crate) result: RequestResult,
    pub(crate) error: HttpError,
}

/// Reads the whole body, never more than `limit` bytes: a declared length above it is refused
/// before reading, and a body that streams past it is cut off at the limit.
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    what: &str,
) -> Result<Bytes, BodyError> {
    let too_large = |found: String| BodyError {
        result: RequestResult::TooLarge,
        error: HttpError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!(
                "{what} too large: expected at most {limit} bytes \
                 (worker.max-request-size), found {found}"
            ),
        },
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = declared
        && len > limit as u64
    {
        return Err(too_large(format!("content-length {len}")));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(too_large("a longer body".into())),
        Err(e) => Err(BodyError {
            result: RequestResult::BadRequest,
            error: HttpError::bad_request(format!(
                "cannot read the {what}: {}",
                crate::error_chain(e.as_ref())
            )),
        }),
    }
}

async fn config_handler(State(state): State<Arc<WorkerState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        state.config_text().to_string(),
    )
        .into_response()
}

async fn status_handler(State(state): State<Arc<WorkerState>>) -> Response {
    let w = &state.config().worker;
    let status = serde_json::json!({
        "role": "worker",
        "addr": state.addr(),
        "labels": w.labels,
        "uptime_secs": state.uptime_secs(),
        "requests": state.requests(),
        "in_flight": state.in_flight(),
        "dfs": state.dfs_kind(),
        "keyspace_throughput": state
            .limiter()
            .throughput(Instant::now())
            .into_iter()
            .map(|(k, rate)| (k.to_string(), serde_json::Value::from(rate)))
            .collect::<serde_json::Map<String, serde_json::Value>>(),
        "cop_limiter": cop_limiter_status(&state),
        "compaction": {
            "running": state.compaction_slots().running(),
            "max_jobs": w.max_compaction_jobs,
        },
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        status.to_string(),
    )
        .into_response()
}

fn cop_limiter_status(state: &WorkerState) -> serde_json::Value {
    let high = state.config().cop_limiter.high_mem_ratio;
    let (running, running_peak) = state.limiter().running();
    let waiting = state.limiter().waiting();
    match state.limiter().read_memory() {
        Some(m) => serde_json::json!({
            "memory_ratio": m.ratio(),
            "memory_used": m.used,
            "memory_limit": m.limit,
            "limit_source": m.source.as_str(),
            "high_mem_ratio": high,
            "waiting": waiting,
            "running": running,
            "running_peak": running_peak,
        }),
        None => serde_json::json!({
            "memory_ratio": null,
            "memory_used": null,
            "memory_limit": null,
            "limit_source": null,
            "high_mem_ratio": high,
            "waiting": waiting,
            "running": running,
            "running_peak": running_peak,
        }),
    }
}

/// Waits for the cop-limiter to admit a request with `deadline_ms` (0 = the default deadline);
/// the 503 answer when memory stayed high until the deadline. Shared by `/coprocessor` and
/// `/delegate/coprocessor`. Returns the deadline on admission, and the request's place among
/// the running ones: hold it until the answer is built.
pub(crate) async fn admit(
    state: &WorkerState,
    deadline_ms: u64,
) -> Result<(Instant, cop_limiter::Running<'_>), (RequestResult, Response)> {
    let deadline = cop_limiter::deadline_of(deadline_ms, Instant::now(), SystemTime::now());
    match state.limiter().admit(&TokioClock, deadline).await {
        Admission::Rejected {
            rounds,
            waited,
            ratio,
        } => {
            let reason = format!(
                "waited for worker memory (cop-limiter.high-mem-ratio) until the request's \
                 deadline: ratio={ratio:.3} high_mem_ratio={} rounds={rounds} waited_ms={}",
                state.config().cop_limiter.high_mem_ratio,
                waited.as_millis()
            );
            tracing::debug!("{reason}");
            Err((
                RequestResult::Throttled,
                HttpError::unavailable(reason).into_response(),
            ))
        }
        Admission::Admitted { .. } => Ok((deadline, state.limiter().start_running())),
    }
}
