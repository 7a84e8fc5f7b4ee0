//! `RemoteDagDispatcher`: runs one coprocessor request on a worker.
//!
//! The order matters for correctness:
//! 1. scan the LOCK CF over the request's ranges on the origin snapshot: a lock that blocks the
//!    read answers `locked` here and nothing is sent (the worker's rebuilt snapshot has no
//!    locks, so it could not see it); non-blocking locks only make the result uncacheable;
//! 2. describe the snapshot for the worker (`SnapAccess::to_remote`: the WRITE files that
//!    overlap the ranges plus the memtable rows a read at start_ts needs) and frame the body
//!    (`kvproto::offload`): the request keeps only `is_cache_enabled` of the cache fields;
//! 3. POST it, keeping the origin snapshot alive until the answer (its files must not be
//!    deleted by a compaction while the worker reads them); connection errors, timeouts and
//!    503 are retried with doubling backoff inside the request's deadline;
//! 4. on success, veto `can_be_cached` when newer memtable versions were left out of the
//!    shipment or locks were seen in step 1, and set `cache_last_version` to the origin
//!    snapshot's data version (whatever the worker said). Anything else is a fallback: the
//!    caller runs the request locally, so a worker can never make an answer partial or wrong.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use cop::proto::{ExecDetails, Request, Response};
use kvengine::SnapAccess;
use prost::Message;
use service::{ClientError, HttpClient};

use crate::metrics;

#[derive(Debug, Clone)]
pub struct DispatchSettings {
    /// The worker's full URL.
    pub addr: String,
    pub timeout: Duration,
    pub max_retries: u32,
    pub retry_backoff: Duration,
}

/// What became of a dispatched request.
#[derive(Debug)]
pub enum Dispatched {
    /// The worker's answer, already adjusted (cacheability, data version, exec details).
    Remote(Box<Response>),
    /// Answered at the origin without asking the worker (a blocking lock).
    Answered(Box<Response>),
    /// Run it locally: the worker could not answer. `cause` is a metric label.
    Fallback { cause: &'static str, detail: String },
}

pub struct RemoteDagDispatcher {
    settings: DispatchSettings,
    client: HttpClient,
}

/// The prepared offload: the body and what the origin learned while building it.
struct Prepared {
    body: Bytes,
    /// Newer memtable versions were filtered out, or locks sit in range.
    uncacheable: bool,
}

impl RemoteDagDispatcher {
    pub fn new(settings: DispatchSettings, client: HttpClient) -> RemoteDagDispatcher {
        RemoteDagDispatcher { settings, client }
    }

    pub fn addr(&self) -> &str {
        &self.settings.addr
    }

    /// Runs `req` on the worker (see the module docs). `reason` is the offload decision's
    /// reason, recorded in the exec details; `paging_size` replaces the request's own in what
    /// the worker receives (TopN paging, `crate::topn_paging`).
    pub async fn dispatch(
        &self,
        req: &Request,
        snap: &SnapAccess,
        reason: &str,
        paging_size: Option<u64>,
    ) -> Dispatched {
        let prepared = {
            let (req, snap) = (req.clone(), snap.clone());
            match tokio::task::spawn_blocking(move || prepare(&req, &snap, paging_size)).await {
                Ok(Ok(p)) => p,
                Ok(Err(d)) => return d,
                Err(e) => {
                    return Dispatched::Fallback {
                        cause: "encode",
                        detail: format!("offload preparation panicked: {e}"),
                    };
                }
            }
        };
        metrics::OFFLOAD_BODY_BYTES.inc_by(prepared.body.len() as u64);
        let deadline = deadline_of(req);
        let mut resp = match self.post_with_retries(prepared.body, deadline).await {
            Ok(resp) => resp,
            Err(d) => return d,
        };
        if !resp.other_error.is_empty() {
            return Dispatched::Fallback {
                cause: "worker_error",
                detail: resp.other_error,
            };
        }
        if resp.region_error.is_some() || resp.locked.is_some() {
            // The origin checked both; a worker reporting them is not answering this request.
            return Dispatched::Fallback {
                cause: "worker_error",
                detail: format!(
                    "unexpected region error or lock from the worker: region_error={:?} locked={:?}",
                    resp.region_error, resp.locked
                ),
            };
        }
        if prepared.uncacheable && resp.can_be_cached {
            metrics::OFFLOAD_LOCKS_SEEN.inc();
            resp.can_be_cached = false;
        }
        resp.cache_last_version = cop::cache::response_data_version(snap);
        resp.is_cache_hit = false;
        let details = resp.exec_details.get_or_insert_with(ExecDetails::default);
        details.location = "remote".into();
        details.remote_addr = self.settings.addr.clone();
        details.reason = reason.to_string();
        Dispatched::Remote(Box::new(resp))
    }

    async fn post_with_retries(
        &self,
        body: Bytes,
        deadline: Option<SystemTime>,
    ) -> Result<Response, Dispatched> {
        let mut backoff = self.settings.retry_backoff;
        let mut attempt = 0u32;
        loop {
            let timeout = match remaining(deadline) {
                Some(left) => left.min(self.settings.timeout),
                None => self.settings.timeout,
            };
            let (cause, detail) = if timeout.is_zero() {
                ("timeout", "the request's deadline passed".to_string())
            } else {
                match self
                    .client
                    .post(&self.settings.addr, body.clone(), timeout)
                    .await
                {
                    Ok(reply) if reply.status.is_success() => {
                        return Response::decode(reply.body.as_ref()).map_err(|e| {
                            Dispatched::Fallback {
                                cause: "bad_response",
                                detail: format!(
                                    "worker response ({} bytes) does not decode: {e}",
                                    reply.body.len()
                                ),
                            }
                        });
                    }
                    Ok(reply) if reply.status == hyper::StatusCode::SERVICE_UNAVAILABLE => (
                        "unavailable",
                        format!("503: {}", String::from_utf8_lossy(&reply.body).trim()),
                    ),
                    Ok(reply) => {
                        return Err(Dispatched::Fallback {
                            cause: "bad_status",
                            detail: format!(
                                "worker answered {}: {}",
                                reply.status,
                                String::from_utf8_lossy(&reply.body).trim()
                            ),
                        });
                    }
                    Err(e @ ClientError::Timeout { .. }) => ("timeout", e.to_string()),
                    Err(e) if e.is_retryable() => ("connect", e.to_string()),
                    Err(e) => {
                        return Err(Dispatched::Fallback {
                            cause: "bad_response",
                            detail: e.to_string(),
                        });
                    }
                }
            };
            let fits = remaining(deadline).is_none_or(|left| left > backoff);
            if attempt >= self.settings.max_retries || !fits {
                return Err(Dispatched::Fallback {
                    cause,
                    detail: format!("after {} attempt(s): {detail}", attempt + 1),
                });
            }
            attempt += 1;
            metrics::OFFLOAD_RETRIES.inc();
            tracing::debug!(attempt, cause, %detail, "retrying offload");
            tokio::time::sleep(backoff).await;
            backoff = backoff.saturating_mul(2);
        }
    }
}

/// Steps 1 and 2 of the module docs, on a blocking thread.
fn prepare(
    req: &Request,
    snap: &SnapAccess,
    paging_size: Option<u64>,
) -> Result<Prepared, Dispatched> {
    let fallback = |detail: String| Dispatched::Fallback {
        cause: "encode",
        detail,
    };
    let mut saw_locks = false;
    for r in &req.ranges {
        match snap.check_locks_in_range(&r.start, &r.end, req.start_ts, &[]) {
            Ok(any) => saw_locks |= any,
            Err(kvengine::Error::KeyIsLocked { lock }) => {
                return Err(Dispatched::Answered(Box::new(
                    cop::handler::locked_response(&lock),
                )));
            }
            Err(e) => return Err(fallback(format!("lock scan failed: {e}"))),
        }
    }
    let ranges: Vec<(&[u8], &[u8])> = req
        .ranges
        .iter()
        .map(|r| (r.start.as_slice(), r.end.as_slice()))
        .collect();
    let remote = snap
        .to_remote(&ranges, req.start_ts)
        .map_err(|e| fallback(format!("snapshot description failed: {e}")))?;
    let worker_req = Request {
        cache_if_match_version: 0,
        paging_size: paging_size.unwrap_or(req.paging_size),
        ..req.clone()
    };
    let (request, changeset) = (
        worker_req.encode_to_vec(),
        changeset::encode_changeset(&remote.changeset),
    );
    let body = kvproto::offload::encode(&request, &remote.memtable_data, &changeset);
    for (section, len) in [
        ("request", request.len()),
        ("memtable", remote.memtable_data.len()),
        ("changeset", changeset.len()),
    ] {
        metrics::OFFLOAD_SECTION_BYTES
            .with_label_values(&[section])
            .inc_by(len as u64);
    }
    Ok(Prepared {
        body: Bytes::from(body),
        uncacheable: remote.filtered_newer || saw_locks,
    })
}

fn deadline_of(req: &Request) -> Option<SystemTime> {
    match req.context.as_ref().map(|c| c.deadline_ms) {
        Some(ms) if ms > 0 => Some(UNIX_EPOCH + Duration::from_millis(ms)),
        _ => None,
    }
}

fn remaining(deadline: Option<SystemTime>) -> Option<Duration> {
    deadline.map(|d| {
        d.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO)
    })
}
