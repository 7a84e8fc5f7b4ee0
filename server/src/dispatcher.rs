//! `RemoteDagDispatcher`: runs one coprocessor request on a worker.
//!
//! The order matters for correctness:
//! 1. take what a worker needs from the origin snapshot ([`crate::remote_snapshot::ship`]: the
//!    LOCK CF scan, where a blocking lock answers `locked` here and nothing is sent, then the
//!    WRITE files and memtable rows a read at start_ts needs) and frame the body
//!    (`wire::offload`): the request keeps only `is_cache_enabled` of the cache fields;
//! 2. POST it, keeping the origin snapshot alive until the answer (its files must not be
//!    deleted by a compaction while the worker reads them). The workers are tried in the
//!    order of [`crate::worker_pool`] (alive ones of this server's zone first, least busy,
//!    in turn; other zones only when none of this zone is alive; dead ones last). A
//!    connection error, timeout or 503 marks the worker dead and moves on to the next one at
//!    once; once every worker was tried, the list is tried again from the start after a
//!    doubling backoff, at most `max_retries` more times, inside the request's deadline.
//!    Each worker gets the memtable rows in the newest format both it and this server read
//!    (workers advertise theirs on every answer; one never heard from gets format 1);
//! 3. on success, veto `can_be_cached` when newer memtable versions were left out of the
//!    shipment or locks were seen in step 1, and set `cache_last_version` to the origin
//!    snapshot's data version (whatever the worker said). Anything else is a fallback: the
//!    caller runs the request locally, so a worker can never make an answer partial or wrong.
//!
//! Every attempt a worker answered moved the body there and the answer back; when the worker
//! is in another zone those bytes are the request's cross-zone cost ([`Dispatch`]), which the
//! answer reports in `ExecDetails.cross_zone_bytes` whether it came from the worker or from
//! the local run after a fallback.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use changeset::MemtableDataFormat;
use kvengine::SnapAccess;
use node::{ClientError, HttpClient};
use prost::Message;
use wire::coprocessor::{Request, Response};
use wire::placement::{FallbackCause, Location, OffloadReason};

use crate::metrics::{self, OffloadSection};
use crate::remote_snapshot::{ShipError, ship};
use crate::worker_pool::WorkerPool;

#[derive(Debug, Clone)]
pub struct DispatchSettings {
    pub timeout: Duration,
    pub max_retries: u32,
    pub retry_backoff: Duration,
    /// The newest memtable-data format this server writes
    /// (`remote-coprocessor-memtable-data-format`).
    pub memtable_data_format: MemtableDataFormat,
}

/// What became of a dispatched request.
#[derive(Debug)]
pub enum Dispatched {
    /// The worker's answer, already adjusted (cacheability, data version, exec details).
    Remote(Box<Response>),
    /// Answered at the origin without asking the worker (a blocking lock).
    Answered(Box<Response>),
    /// Run it locally: the worker could not answer.
    Fallback {
        cause: FallbackCause,
        detail: String,
    },
}

/// What dispatching a request did.
#[derive(Debug)]
pub struct Dispatch {
    pub outcome: Dispatched,
    /// Body bytes of the attempts answered by a worker in another zone (the offload bodies
    /// and the answers); already added to a [`Dispatched::Remote`] answer's exec details.
    pub cross_zone_bytes: u64,
}

pub struct RemoteDagDispatcher {
    settings: DispatchSettings,
    /// Shared with remote compaction (`remote_compaction`): one view of the workers' health.
    workers: std::sync::Arc<WorkerPool>,
    client: HttpClient,
}

/// The prepared offload: the body and what the origin learned while building it.
struct Prepared {
    /// The body, its memtable rows in `format`.
    body: Bytes,
    format: MemtableDataFormat,
    /// The sections, to frame the body again in an older format for a worker that reads only
    /// that one ([`Prepared::body_for`]).
    request: Bytes,
    memtable_data: Bytes,
    changeset: Bytes,
    /// Bodies already framed in older formats.
    older: Vec<(MemtableDataFormat, Bytes)>,
    /// Newer memtable versions were filtered out, or locks sit in range.
    uncacheable: bool,
    /// The origin snapshot's data version (what the result is valid for).
    data_version: u64,
}

impl Prepared {
    /// The body for a worker reading memtable data up to `format`, and the format it holds:
    /// the prepared body unless it is newer than `format`, else the rows transcoded (once per
    /// format; only while a cluster runs mixed versions).
    fn body_for(
        &mut self,
        format: MemtableDataFormat,
    ) -> Result<(Bytes, MemtableDataFormat), String> {
        if format >= self.format {
            return Ok((self.body.clone(), self.format));
        }
        if let Some((_, body)) = self.older.iter().find(|(f, _)| *f == format) {
            return Ok((body.clone(), format));
        }
        let rows = changeset::memtable_data::transcode(&self.memtable_data, format)
            .map_err(|e| format!("memtable data does not transcode to {format}: {e}"))?;
        let body = Bytes::from(wire::offload::encode(&self.request, &rows, &self.changeset));
        self.older.push((format, body.clone()));
        Ok((body, format))
    }
}

impl RemoteDagDispatcher {
    /// Offloads to `workers` (with a placement driver, possibly none yet: they come from the
    /// registrations).
    pub fn new(
        settings: DispatchSettings,
        workers: std::sync::Arc<WorkerPool>,
        client: HttpClient,
    ) -> RemoteDagDispatcher {
        RemoteDagDispatcher {
            settings,
            workers,
            client,
        }
    }

    pub fn workers(&self) -> &WorkerPool {
        &self.workers
    }

    /// The pool itself, to share with remote compaction.
    pub fn worker_pool(&self) -> &std::sync::Arc<WorkerPool> {
        &self.workers
    }

    /// Runs `req` on the worker (see the module docs). `reason` is the offload decision's
    /// reason, recorded in the exec details; `paging_size` replaces the request's own in what
    /// the worker receives (TopN paging, `node::topn_paging`).
    pub async fn dispatch(
        &self,
        req: &Request,
        snap: &SnapAccess,
        reason: OffloadReason,
        paging_size: Option<u64>,
    ) -> Dispatch {
        let mut crossed = 0;
        let mut outcome = self
            .run_remote(req, snap, reason, paging_size, &mut crossed)
            .await;
        if let Dispatched::Remote(resp) = &mut outcome {
            resp.exec_details
                .get_or_insert_with(Default::default)
                .cross_zone_bytes += crossed;
        }
        Dispatch {
            outcome,
            cross_zone_bytes: crossed,
        }
    }

    /// [`RemoteDagDispatcher::dispatch`] but the cross-zone bytes, which go to `crossed`.
    async fn run_remote(
        &self,
        req: &Request,
        snap: &SnapAccess,
        reason: OffloadReason,
        paging_size: Option<u64>,
        crossed: &mut u64,
    ) -> Dispatched {
        let order = self.workers.order(Instant::now());
        let Some(&first) = order.first() else {
            return Dispatched::Fallback {
                cause: FallbackCause::Unavailable,
                detail: "no worker is configured or registered".into(),
            };
        };
        let format = self.format_for(first);
        let prepared = {
            let (req, snap) = (req.clone(), snap.clone());
            match tokio::task::spawn_blocking(move || prepare(&req, &snap, paging_size, format))
                .await
            {
                Ok(Ok(p)) => p,
                Ok(Err(d)) => return d,
                Err(e) => {
                    return Dispatched::Fallback {
                        cause: FallbackCause::Encode,
                        detail: format!("offload preparation panicked: {e}"),
                    };
                }
            }
        };
        metrics::OFFLOAD_BODY_BYTES.inc_by(prepared.body.len() as u64);
        let deadline = deadline_of(req);
        let (uncacheable, data_version) = (prepared.uncacheable, prepared.data_version);
        let (mut resp, addr) = match self
            .post_with_retries(prepared, &order, deadline, crossed)
            .await
        {
            Ok(answered) => answered,
            Err(d) => return d,
        };
        if !resp.other_error.is_empty() {
            return Dispatched::Fallback {
                cause: FallbackCause::WorkerError,
                detail: resp.other_error,
            };
        }
        if resp.region_error.is_some() || resp.locked.is_some() {
            // The origin checked both; a worker reporting them is not answering this request.
            return Dispatched::Fallback {
                cause: FallbackCause::WorkerError,
                detail: format!(
                    "unexpected region error or lock from the worker: region_error={:?} locked={:?}",
                    resp.region_error, resp.locked
                ),
            };
        }
        let vetoed = node::remote_answer::stamp_remote_answer(
            &mut resp,
            data_version,
            uncacheable,
            Location::Remote,
            &addr,
            reason.as_str(),
        );
        if vetoed {
            metrics::OFFLOAD_LOCKS_SEEN.inc();
        }
        Dispatched::Remote(Box::new(resp))
    }

    /// The memtable-data format to send worker `w`: the newest both it and this server read.
    fn format_for(&self, w: usize) -> MemtableDataFormat {
        self.workers
            .memtable_data_format(w)
            .min(self.settings.memtable_data_format)
    }

    /// Step 2 of the module docs: the decoded answer and the worker that gave it, trying the
    /// workers in `order` (not empty). The bytes of every answered attempt with a worker in
    /// another zone are added to `crossed`.
    ///
    /// Each worker gets the body in the newest memtable-data format it reads. A worker that
    /// refuses the body (400) while advertising an older format than the body's was rolled
    /// back since its last answer: it is asked again at once in its format (once per attempt).
    async fn post_with_retries(
        &self,
        mut prepared: Prepared,
        order: &[usize],
        deadline: Option<SystemTime>,
        crossed: &mut u64,
    ) -> Result<(Response, String), Dispatched> {
        let mut backoff = self.settings.retry_backoff;
        let mut attempt = 0usize;
        let max_attempts = order.len() * (1 + self.settings.max_retries as usize);
        let mut downgraded = false;
        loop {
            let w = order[attempt % order.len()];
            let addr = self.workers.addr(w);
            let timeout = match remaining(deadline) {
                Some(left) => left.min(self.settings.timeout),
                None => self.settings.timeout,
            };
            if timeout.is_zero() {
                return Err(Dispatched::Fallback {
                    cause: FallbackCause::Timeout,
                    detail: format!(
                        "the request's deadline passed after {attempt} attempt(s): worker={addr}"
                    ),
                });
            }
            let (body, sent_format) =
                prepared
                    .body_for(self.format_for(w))
                    .map_err(|detail| Dispatched::Fallback {
                        cause: FallbackCause::Encode,
                        detail,
                    })?;
            let (cause, detail) = {
                metrics::OFFLOAD_DISPATCHES
                    .with_label_values(&[self.workers.relation(w).as_str()])
                    .inc();
                let _in_flight = self.workers.begin(w);
                let posted = self.client.post(&addr, body, timeout).await;
                if let Ok(reply) = &posted {
                    *crossed += reply.exchange.cross_zone_bytes();
                    self.workers.learn_memtable_data_format(
                        w,
                        wire::offload::advertised_memtable_data_format(
                            reply
                                .headers
                                .get(wire::offload::MEMTABLE_DATA_FORMAT_HEADER)
                                .map(|v| v.as_bytes()),
                        ),
                    );
                }
                match posted {
                    Ok(reply) if reply.status.is_success() => {
                        self.workers.mark_alive(w);
                        return match Response::decode(reply.body.as_ref()) {
                            Ok(resp) => Ok((resp, addr)),
                            Err(e) => Err(Dispatched::Fallback {
                                cause: FallbackCause::BadResponse,
                                detail: format!(
                                    "worker response ({} bytes) does not decode: {e}: worker={addr}",
                                    reply.body.len()
                                ),
                            }),
                        };
                    }
                    Ok(reply) if reply.status == hyper::StatusCode::SERVICE_UNAVAILABLE => (
                        FallbackCause::Unavailable,
                        format!(
                            "503: {}: worker={addr}",
                            String::from_utf8_lossy(&reply.body).trim()
                        ),
                    ),
                    Ok(reply)
                        if reply.status == hyper::StatusCode::BAD_REQUEST
                            && self.format_for(w) < sent_format
                            && !downgraded =>
                    {
                        downgraded = true;
                        metrics::OFFLOAD_RETRIES.inc();
                        continue;
                    }
                    Ok(reply) => {
                        return Err(Dispatched::Fallback {
                            cause: FallbackCause::BadStatus,
                            detail: format!(
                                "worker answered {}: {}: worker={addr}",
                                reply.status,
                                String::from_utf8_lossy(&reply.body).trim()
                            ),
                        });
                    }
                    Err(e @ ClientError::Timeout { .. }) => (FallbackCause::Timeout, e.to_string()),
                    Err(e) if e.is_retryable() => (FallbackCause::Connect, e.to_string()),
                    Err(e) => {
                        return Err(Dispatched::Fallback {
                            cause: FallbackCause::BadResponse,
                            detail: e.to_string(),
                        });
                    }
                }
            };
            self.workers.mark_dead(w, Instant::now());
            attempt += 1;
            // Another worker is tried at once; the same one again only after a backoff.
            let wraps = attempt.is_multiple_of(order.len());
            let fits = !wraps || remaining(deadline).is_none_or(|left| left > backoff);
            if attempt >= max_attempts || !fits {
                return Err(Dispatched::Fallback {
                    cause,
                    detail: format!("after {attempt} attempt(s): {detail}"),
                });
            }
            metrics::OFFLOAD_RETRIES.inc();
            tracing::debug!(attempt, %cause, %detail, "retrying offload");
            if wraps {
                tokio::time::sleep(backoff).await;
                backoff = backoff.saturating_mul(2);
            }
        }
    }
}

/// Step 1 of the module docs, on a blocking thread.
fn prepare(
    req: &Request,
    snap: &SnapAccess,
    paging_size: Option<u64>,
    format: MemtableDataFormat,
) -> Result<Prepared, Dispatched> {
    let shipment = ship(req, snap, format).map_err(|e| match e {
        ShipError::Locked(lock) => {
            Dispatched::Answered(Box::new(cop::handler::locked_response(&lock)))
        }
        ShipError::Failed(detail) => Dispatched::Fallback {
            cause: FallbackCause::Encode,
            detail,
        },
    })?;
    let worker_req = Request {
        cache_if_match_version: 0,
        paging_size: paging_size.unwrap_or(req.paging_size),
        ..req.clone()
    };
    let request = worker_req.encode_to_vec();
    let body = wire::offload::encode(&request, &shipment.memtable_data, &shipment.changeset);
    for (section, len) in [
        (OffloadSection::Request, request.len()),
        (OffloadSection::Memtable, shipment.memtable_data.len()),
        (OffloadSection::Changeset, shipment.changeset.len()),
    ] {
        metrics::OFFLOAD_SECTION_BYTES
            .with_label_values(&[section.as_str()])
            .inc_by(len as u64);
    }
    Ok(Prepared {
        body: Bytes::from(body),
        format: shipment.format,
        request: Bytes::from(request),
        uncacheable: shipment.uncacheable(),
        data_version: shipment.data_version,
        memtable_data: shipment.memtable_data,
        changeset: Bytes::from(shipment.changeset),
        older: Vec::new(),
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
