//! `POST /delegate/coprocessor`: the worker's half of the delegate path ("first way"). A
//! client sends a plain coprocessor request here instead of to the server owning its region;
//! the worker asks that server for what a read needs and executes the request itself.
//!
//! The request: a `wire::coprocessor::Request` (protobuf body, routed like one sent to a server:
//! `context.region_id` and `region_ver` set), and the header `x-stratus-region-server`
//! ([`wire::delegate::REGION_SERVER_HEADER`]) with the base URL of the owning server,
//! e.g. `http://10.0.0.7:20160`.
//!
//! 1. the body is read (at most `worker.max-request-size`) and decoded; its
//!    `cache_if_match_version` is dropped: a worker never answers a cache hit; the worker's
//!    TopN paging policy (`cop-topn-max-pushdown-rows`) applies as on `POST /coprocessor`;
//! 2. the cop-limiter admits it (as on `POST /coprocessor`: wait or 503 while memory is high);
//! 3. `POST {server}/delegate` with a `DelegateRequest` (the request and this worker's zone),
//!    within `worker.delegate-timeout` and the request's deadline. The answer's bytes are
//!    counted in `stratus_worker_delegate_bytes_total{zone_relation}`; when the server is in
//!    another zone, both bodies' bytes go to the answer's `exec_details.cross_zone_bytes`
//!    (the client adds its own hop's);
//! 4. a region error, `locked` or an error in the answer is returned as the cop response's
//!    field of the same name (200), so the client refreshes its regions or resolves the lock
//!    exactly as if the server had answered;
//! 5. otherwise the snapshot is rebuilt from the shipped memtable rows and ChangeSet and the
//!    request runs on it ([`crate::coprocessor::Offload`], as for an offload body). The cache
//!    fields come from the origin's evidence: `cache_last_version` is the origin's data
//!    version, and `can_be_cached` is false whenever the origin saw newer versions or locks
//!    (or the handler itself says no). `exec_details.location` is `delegate`
//!    ([`Location::Delegate`]), `remote_addr` the owning server.
//!
//! The header's URL must be one of the servers the placement driver lists when the worker has
//! one (`crate::known_servers`): else 403, and nothing is called.
//!
//! HTTP answers other than 200: 400 (no or bad header, a body that is no cop request), 403
//! (a server the placement driver does not list), 413
//! (body too large), 502 (the server could not be asked or its answer is unusable, or the
//! object store failed), 503 (cop-limiter), 500 (a bug). Each is counted in
//! `stratus_worker_delegate_requests_total{result}`.

use std::sync::Arc;
use std::time::Instant;

use ::node::http::HttpError;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use prost::Message;
use types::ZoneRelation;
use wire::coprocessor::{ExecDetails, Request};
use wire::delegate::{DelegateRequest, DelegateResponse, REGION_SERVER_HEADER};
use wire::placement::Location;

use crate::coprocessor::{Offload, OffloadError};
use crate::metrics::{self, RequestResult};
use crate::service::{apply_topn_paging, encoded, execute, read_body};
use crate::state::WorkerState;

pub async fn delegate_handler(
    State(state): State<Arc<WorkerState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let _in_flight = state.begin_request();
    let (result, answer) = delegate_answer(&state, &headers, body).await;
    metrics::DELEGATE_REQUESTS
        .with_label_values(&[result.as_str()])
        .inc();
    answer
}

fn fail(result: RequestResult, status: StatusCode, message: String) -> (RequestResult, Response) {
    (result, HttpError { status, message }.into_response())
}

/// The owning server's base URL from the header, without a trailing `/`.
fn region_server(headers: &HeaderMap) -> Result<String, String> {
    let value = headers
        .get(REGION_SERVER_HEADER)
        .ok_or_else(|| format!("expected the header {REGION_SERVER_HEADER}, found none"))?;
    let url = value
        .to_str()
        .map_err(|_| format!("expected an ASCII URL in {REGION_SERVER_HEADER}, found bytes"))?
        .trim()
        .trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "expected an http:// or https:// base URL in {REGION_SERVER_HEADER}, found {url:?}"
        ));
    }
    Ok(url.to_string())
}

async fn delegate_answer(
    state: &Arc<WorkerState>,
    headers: &HeaderMap,
    body: Body,
) -> (RequestResult, Response) {
    // 1. The request.
    let server = match region_server(headers) {
        Ok(url) => url,
        Err(reason) => return fail(RequestResult::BadRequest, StatusCode::BAD_REQUEST, reason),
    };
    // Before anything is read or admitted: a URL the placement driver does not list is never
    // called with this worker's identity.
    if let Err(reason) = state.known_servers().check(&server).await {
        return fail(RequestResult::UnknownServer, StatusCode::FORBIDDEN, reason);
    }
    let limit = state.config().max_request_bytes();
    let body = match read_body(headers, body, limit, "delegate request body").await {
        Ok(body) => body,
        Err(e) => return (e.result, e.error.into_response()),
    };
    metrics::REQUEST_BYTES.inc_by(body.len() as u64);
    let mut request = match Request::decode(body.as_ref()) {
        Ok(r) => r,
        Err(e) => {
            return fail(
                RequestResult::BadRequest,
                StatusCode::BAD_REQUEST,
                format!(
                    "cop request does not decode: expected a protobuf Request, found {} bytes: {e}",
                    body.len()
                ),
            );
        }
    };
    request.cache_if_match_version = 0;
    apply_topn_paging(state, &mut request);
    let (keyspace, deadline_ms) = request
        .context
        .as_ref()
        .map_or((0, 0), |c| (c.keyspace_id, c.deadline_ms));

    // 2. Memory back-pressure.
    let config = state.config();
    let (deadline, _running) = match crate::service::admit(state, deadline_ms).await {
        Ok(admitted) => admitted,
        Err(rejected) => return rejected,
    };

    // 3. Ask the owning server.
    let worker_zone = config.zone();
    let ask = DelegateRequest {
        request: Some(request.clone()),
        worker_zone: types::zone::label(worker_zone.as_ref()).to_string(),
        memtable_data_format: u32::from(config.memtable_data_format().as_u8()),
    };
    let mut timeout = config.worker.delegate_timeout.duration();
    if deadline_ms > 0 {
        timeout = timeout.min(deadline.saturating_duration_since(Instant::now()));
    }
    let url = format!("{server}{}", wire::paths::DELEGATE);
    let origin_error = |message: String| {
        tracing::warn!("delegate request failed at the origin: {message}");
        fail(RequestResult::OriginError, StatusCode::BAD_GATEWAY, message)
    };
    let reply = match state
        .client()
        .post(&url, ask.encode_to_vec().into(), timeout)
        .await
    {
        Ok(reply) => reply,
        Err(e) => return origin_error(format!("cannot ask the owning server: {e}")),
    };
    if !reply.status.is_success() {
        return origin_error(format!(
            "the owning server answered {}: {}: server={server}",
            reply.status,
            String::from_utf8_lossy(&reply.body).trim()
        ));
    }
    let origin = match DelegateResponse::decode(reply.body.clone()) {
        Ok(r) => r,
        Err(e) => {
            return origin_error(format!(
                "delegate response ({} bytes) does not decode: {e}: server={server}",
                reply.body.len()
            ));
        }
    };
    // What the fetch moved across zones (by the server's zone header), reported to the client.
    let crossed = reply.exchange.cross_zone_bytes();
    let relation = ZoneRelation::of(worker_zone.as_ref(), origin.server_zone().as_ref());
    metrics::DELEGATE_BYTES
        .with_label_values(&[relation.as_str()])
        .inc_by(reply.body.len() as u64);

    // 4. The origin's refusal is the answer.
    if origin.is_error() {
        let mut details = ExecDetails {
            remote_addr: server.clone(),
            cross_zone_bytes: crossed,
            ..ExecDetails::default()
        };
        details.set_location(Location::Delegate, "refused by the owning server");
        let resp = wire::coprocessor::Response {
            region_error: origin.region_error,
            locked: origin.locked,
            other_error: origin.other_error,
            exec_details: Some(details),
            ..wire::coprocessor::Response::default()
        };
        return (RequestResult::Ok, encoded(state, keyspace, &resp));
    }

    // 5. Rebuild and run.
    let changeset = match changeset::decode_changeset(origin.changeset.clone()) {
        Ok(c) => c,
        Err(e) => {
            return origin_error(format!(
                "the owning server's changeset does not decode: {}: server={server}",
                crate::error_chain(&e)
            ));
        }
    };
    let offload = Offload {
        request,
        changeset,
        memtable_data: origin.memtable_data.clone(),
    };
    match execute(state, offload).await {
        Ok(Ok(mut resp)) => {
            node::remote_answer::stamp_remote_answer(
                &mut resp,
                origin.data_version,
                origin.uncacheable(),
                Location::Delegate,
                &server,
                "delegated by the client",
            );
            resp.exec_details
                .get_or_insert_with(ExecDetails::default)
                .cross_zone_bytes += crossed;
            (RequestResult::Ok, encoded(state, keyspace, &resp))
        }
        Ok(Err(e @ OffloadError::Store(_))) => {
            let reason = e.reason();
            tracing::warn!("delegated request failed: {reason}");
            fail(RequestResult::StoreError, StatusCode::BAD_GATEWAY, reason)
        }
        Ok(Err(e)) => origin_error(format!(
            "the owning server's snapshot was rejected: {}: server={server}",
            e.reason()
        )),
        Err(failed) => failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(REGION_SERVER_HEADER, value.parse().unwrap());
        h
    }

    #[test]
    fn the_region_server_header_is_a_base_url() {
        assert_eq!(
            region_server(&headers("http://127.0.0.1:20160/")).unwrap(),
            "http://127.0.0.1:20160"
        );
        assert!(
            region_server(&HeaderMap::new())
                .unwrap_err()
                .contains(REGION_SERVER_HEADER)
        );
        assert!(
            region_server(&headers("127.0.0.1:20160"))
                .unwrap_err()
                .contains("http://")
        );
    }
}
