//! The worker's HTTP API:
//!
//! * `POST /coprocessor`: an offload body in, an encoded `cop::proto::Response` out (200).
//!   413 when the body exceeds `worker.max-request-size` (read no further than the limit),
//!   400 when the body is malformed, 502 when the object store fails during the rebuild, 500
//!   if the handler panics. Error answers carry a one-line reason.
//! * `GET /config`: the effective config (TOML).
//! * `GET /status`: JSON `{"role":"worker","addr","labels","uptime_secs","requests",
//!   "in_flight","dfs"}`.
//! * `GET /metrics`: Prometheus text.

use std::future::Future;
use std::sync::Arc;

use ::service::http::HttpError;
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use kvproto::paths;
use prost::Message;
use tokio::net::TcpListener;

use crate::coprocessor;
use crate::metrics::{self, RequestResult};
use crate::state::WorkerState;

/// The router over `state`.
pub fn router(state: Arc<WorkerState>) -> Router {
    Router::new()
        .route(paths::COPROCESSOR, post(coprocessor_handler))
        .route(paths::CONFIG, get(config_handler))
        .route(paths::STATUS, get(status_handler))
        .route(paths::METRICS, get(::service::http::metrics_handler))
        .with_state(state)
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
    ::service::http::serve_until(listener, router(state), shutdown, grace).await
}

async fn coprocessor_handler(
    State(state): State<Arc<WorkerState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let _in_flight = state.begin_request();
    let (result, answer) = coprocessor_answer(&state, &headers, body).await;
    metrics::request_finished(result);
    answer
}

async fn coprocessor_answer(
    state: &Arc<WorkerState>,
    headers: &HeaderMap,
    body: Body,
) -> (RequestResult, Response) {
    let limit = state.config().max_request_bytes();
    let body = match read_body(headers, body, limit).await {
        Ok(body) => body,
        Err(e) => return (e.result, e.error.into_response()),
    };
    metrics::REQUEST_BYTES.inc_by(body.len() as u64);
    let worker = Arc::clone(state);
    let executed = tokio::task::spawn_blocking(move || {
        coprocessor::execute(&body, worker.dfs(), worker.block_cache())
    })
    .await;
    match executed {
        Ok(Ok(done)) => {
            let encoded = done.response.encode_to_vec();
            metrics::RESPONSE_BYTES.inc_by(encoded.len() as u64);
            let answer = (
                [(header::CONTENT_TYPE, kvproto::PROTOBUF_CONTENT_TYPE)],
                encoded,
            )
                .into_response();
            (RequestResult::Ok, answer)
        }
        Ok(Err(e)) if e.is_bad_request() => {
            let reason = e.reason();
            tracing::debug!("rejected an offload body: {reason}");
            (
                RequestResult::BadRequest,
                HttpError::bad_request(reason).into_response(),
            )
        }
        Ok(Err(e)) => {
            let reason = e.reason();
            tracing::warn!("offloaded request failed: {reason}");
            let answer = HttpError {
                status: StatusCode::BAD_GATEWAY,
                message: reason,
            };
            (RequestResult::StoreError, answer.into_response())
        }
        Err(join) => {
            tracing::error!("coprocessor handler failed: {join}");
            let answer =
                HttpError::internal(format!("coprocessor handler failed: {join}")).into_response();
            (RequestResult::Internal, answer)
        }
    }
}

/// A body that could not be read, and how to count it.
struct BodyError {
    result: RequestResult,
    error: HttpError,
}

/// Reads the whole body, never more than `limit` bytes: a declared length above it is refused
/// before reading, and a body that streams past it is cut off at the limit.
async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, BodyError> {
    let too_large = |found: String| BodyError {
        result: RequestResult::TooLarge,
        error: HttpError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!(
                "offload body too large: expected at most {limit} bytes \
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
                "cannot read the offload body: {}",
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
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        status.to_string(),
    )
        .into_response()
}
