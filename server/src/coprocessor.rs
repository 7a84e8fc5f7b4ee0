//! The coprocessor endpoint: one request from arrival to answer.
//!
//! 1. Region, epoch and read point: the request's `context` must name a region of this server
//!    at its current version (else a region error: the client refreshes its region cache),
//!    and pass a read index: on the leader ([`crate::txn::Storage::read_barrier`]), or, for a
//!    replica read (`context.replica_read`), on any replica
//!    ([`crate::txn::Storage::replica_read_barrier`]: the leader checks its memory locks for
//!    the request's start_ts and ranges, and this replica applies up to the read point; a lock
//!    found there is answered as `locked`).
//! 2. `check_memory_locks` over the ranges (raising max_ts to start_ts) *before* the snapshot,
//!    so a transaction between its conflict check and its engine write is either seen here or
//!    commits above start_ts.
//! 3. The snapshot, the request's own checks (type, ranges in region), then the cache fast
//!    path: a cache-enabled request whose `cache_if_match_version` equals the snapshot's data
//!    version is a hit answered here, so a cache-valid request never reaches a worker.
//! 4. Local or remote: remote when a worker is configured and [`crate::offload_policy`] says so
//!    (many ranges, enough SST blocks for the query's age, a pattern that was heavy in its
//!    recent local runs; under load-aware routing only while the CPU is busy or unknown, or
//!    when the request is big enough to force it). A failed offload runs locally. Every local
//!    execution on a server with a worker (decided local, or a fallback) is recorded in the
//!    pattern history: it is what this pattern costs here.
//!
//! The response's exec details say where it ran (a `wire::placement::Location`: `local`,
//! `remote`, `fallback`, `cache_hit`) and why (the decision's `OffloadReason`, or a sentence for
//! a fallback or a cache hit), and the offload bytes that crossed zones (`cross_zone_bytes`:
//! the bodies and answers of attempts with a worker in another zone, fallback or not).

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use cop::handler::HandlerOptions;
use kvengine::SnapAccess;
use raftstore::RaftStoreError;
use types::Ts;
use wire::coprocessor::{ExecDetails, RegionError, RegionErrorKind, Request, Response};
use wire::placement::{Location, OffloadReason};

use crate::cpu_load::{CpuMonitor, CpuState};
use crate::dispatcher::{Dispatched, RemoteDagDispatcher};
use crate::metrics::{self, Answered};
use crate::offload_policy::{Inputs, OffloadPolicy, query_age};
use crate::pattern_history::{self, PatternHistory, Run};
use crate::txn::Storage;
use node::topn_paging;

pub struct Coprocessor {
    storage: Arc<Storage>,
    dispatcher: Option<RemoteDagDispatcher>,
    policy: OffloadPolicy,
    topn_max_pushdown_rows: u64,
    /// The CPU signal of load-aware routing (`None` when it is off).
    cpu: Option<Arc<CpuMonitor>>,
    history: PatternHistory,
    /// The replicas' addresses, for the leader hint of a `NotLeader` answer.
    raft: raftstore::RaftConfig,
}

/// Patterns whose local runs a server remembers.
const PATTERN_CAPACITY: usize = 4096;

/// Where step 3 left a request.
enum Route {
    /// Answered already (region error, lock, bad request, cache hit).
    Answer(Box<Response>, Answered),
    Local(SnapAccess, OffloadReason, Option<Pattern>),
    Remote(SnapAccess, OffloadReason, Option<Pattern>),
}

/// What a local run of a request records in the pattern history.
#[derive(Clone, Copy)]
struct Pattern {
    digest: u64,
    blocks_size: Option<u64>,
}

fn answer(resp: Response, answered: Answered) -> Route {
    Route::Answer(Box::new(resp), answered)
}

impl Coprocessor {
    pub fn new(
        storage: Arc<Storage>,
        dispatcher: Option<RemoteDagDispatcher>,
        policy: OffloadPolicy,
        topn_max_pushdown_rows: u64,
        cpu: Option<Arc<CpuMonitor>>,
        raft: raftstore::RaftConfig,
    ) -> Coprocessor {
        Coprocessor {
            storage,
            dispatcher,
            policy,
            topn_max_pushdown_rows,
            cpu,
            history: PatternHistory::new(PATTERN_CAPACITY),
            raft,
        }
    }

    /// The offload dispatcher, when this server has workers.
    pub fn dispatcher(&self) -> Option<&RemoteDagDispatcher> {
        self.dispatcher.as_ref()
    }

    /// Patterns with recorded local runs.
    pub fn patterns_remembered(&self) -> usize {
        self.history.len()
    }

    /// Runs `req` locally and records the run in the pattern history.
    async fn run_local_recorded(
        &self,
        req: Arc<Request>,
        snap: SnapAccess,
        location: Location,
        why: String,
        pattern: Option<Pattern>,
    ) -> Response {
        let t0 = Instant::now();
        let resp = run_local(req, snap, location, why).await;
        if let Some(p) = pattern {
            self.history.record(
                p.digest,
                Run {
                    blocks_size: p.blocks_size,
                    duration: t0.elapsed(),
                },
            );
        }
        resp
    }

    /// Answers one request (never fails: errors are response fields).
    pub async fn handle(self: &Arc<Self>, req: Request) -> Response {
        let t0 = Instant::now();
        let req = Arc::new(req);
        let routed = {
            let (this, req) = (self.clone(), req.clone());
            tokio::task::spawn_blocking(move || this.route(&req)).await
        };
        let resp = match routed {
            Err(e) => {
                metrics::count_answered(Answered::Error);
                Response {
                    other_error: format!("coprocessor task failed: {e}"),
                    ..Response::default()
                }
            }
            Ok(Route::Answer(resp, answered)) => {
                metrics::count_answered(answered);
                *resp
            }
            Ok(Route::Local(snap, why, pattern)) => {
                self.run_local_recorded(req, snap, Location::Local, why.to_string(), pattern)
                    .await
            }
            Ok(Route::Remote(snap, why, pattern)) => {
                let dispatcher = self.dispatcher.as_ref().expect("remote only with a worker");
                let paging = topn_paging::worker_paging_size(&req, self.topn_max_pushdown_rows);
                if paging.is_some() {
                    metrics::TOPN_PAGING.inc();
                }
                let dispatch = dispatcher.dispatch(&req, &snap, why, paging).await;
                match dispatch.outcome {
                    Dispatched::Remote(resp) => {
                        metrics::count_answered(Answered::Ran(Location::Remote));
                        *resp
                    }
                    Dispatched::Answered(resp) => {
                        metrics::count_answered(Answered::Error);
                        *resp
                    }
                    Dispatched::Fallback { cause, detail } => {
                        metrics::OFFLOAD_FALLBACKS
                            .with_label_values(&[cause.as_str()])
                            .inc();
                        tracing::warn!(%cause, %detail, "offload failed; running locally");
                        let why = format!("{why}; worker failed ({cause}): {detail}");
                        let mut resp = self
                            .run_local_recorded(req, snap, Location::Fallback, why, pattern)
                            .await;
                        // The attempts' bytes moved all the same.
                        resp.exec_details
                            .get_or_insert_with(ExecDetails::default)
                            .cross_zone_bytes += dispatch.cross_zone_bytes;
                        resp
                    }
                }
            }
        };
        metrics::COP_DURATION.observe(t0.elapsed().as_secs_f64());
        resp
    }

    /// Steps 1–3 of the module docs but the cache fast path: region and epoch, memory locks,
    /// the snapshot, the request's own checks. `Err` is the answer to give instead (a region
    /// error, `locked` or an error). Shared with the delegate path ([`crate::delegate`]).
    /// Blocking.
    pub fn checked_snapshot(&self, req: &Request) -> Result<SnapAccess, Box<Response>> {
        let engine = self.storage.engine();
        let ctx = req.context.clone().unwrap_or_default();
        let info = match engine.shard_info(ctx.region_id) {
            Ok(info) => info,
            Err(kvengine::Error::ShardNotFound { .. }) => {
                return Err(Box::new(region_error(
                    RegionErrorKind::RegionNotFound,
                    ctx.region_id,
                    0,
                    format!("region not found: region_id={}", ctx.region_id),
                )));
            }
            Err(e) => return Err(Box::new(other_error(format!("region lookup: {e}")))),
        };
        // A follower may not have applied the split the client routed by yet: a replica read
        // checks the epoch once it applied up to its read point (on the snapshot, below).
        if info.ver != ctx.region_ver && !ctx.replica_read {
            return Err(Box::new(epoch_not_match(
                ctx.region_id,
                ctx.region_ver,
                info.ver,
            )));
        }
        // Only after a read index: a follower serves only a replica read, whose locks the
        // leader checked; a new leader that has not applied its own term's first entry, or an
        // old leader cut off from the others, may miss acknowledged writes and answers
        // `NotLeader`.
        let barrier = if ctx.replica_read {
            self.storage
                .replica_read_barrier(ctx.region_id, req.start_ts, &req.ranges)
        } else {
            self.storage.read_barrier(ctx.region_id)
        };
        match barrier {
            Ok(()) => {}
            Err(RaftStoreError::ReadLocked { lock, .. }) => {
                return Err(Box::new(Response {
                    locked: Some(*lock),
                    ..Response::default()
                }));
            }
            Err(e) => {
                let Some(mut error) = crate::region_error::from_raft(&e, &self.raft) else {
                    return Err(Box::new(other_error(e.to_string())));
                };
                error.current_ver = info.ver;
                return Err(Box::new(Response {
                    region_error: Some(error),
                    ..Response::default()
                }));
            }
        }
        let ranges: Vec<(&[u8], &[u8])> = req
            .ranges
            .iter()
            .map(|r| (r.start.as_slice(), r.end.as_slice()))
            .collect();
        let cm = self.storage.concurrency_manager();
        if let Err(lock) = cm.check_memory_locks(&ranges, req.start_ts, &[]) {
            return Err(Box::new(cop::handler::locked_response(&lock)));
        }
        let snap = match engine.snapshot(ctx.region_id) {
            Ok(s) => s,
            Err(kvengine::Error::ShardNotFound { .. }) => {
                // Split between the two looks.
                return Err(Box::new(epoch_not_match(ctx.region_id, ctx.region_ver, 0)));
            }
            Err(e) => return Err(Box::new(other_error(format!("snapshot: {e}")))),
        };
        if let Err(e) = self.storage.check_gc_safe_point(req.start_ts) {
            return Err(Box::new(other_error(e.to_string())));
        }
        if snap.ver() != ctx.region_ver {
            return Err(Box::new(epoch_not_match(
                ctx.region_id,
                ctx.region_ver,
                snap.ver(),
            )));
        }
        if let Some(resp) = cop::handler::precheck(req, &snap) {
            return Err(Box::new(resp));
        }
        Ok(snap)
    }

    /// Steps 1–4 of the module docs, on a blocking thread.
    fn route(&self, req: &Request) -> Route {
        let snap = match self.checked_snapshot(req) {
            Ok(snap) => snap,
            Err(resp) => return Route::Answer(resp, Answered::Error),
        };
        let ranges: Vec<(&[u8], &[u8])> = req
            .ranges
            .iter()
            .map(|r| (r.start.as_slice(), r.end.as_slice()))
            .collect();
        if let Some(hit) = cop::cache::cache_hit(req, &snap, true) {
            let mut hit = hit;
            let mut details = ExecDetails::default();
            details.set_location(Location::CacheHit, "data version unchanged");
            hit.exec_details = Some(details);
            return answer(hit, Answered::Ran(Location::CacheHit));
        }
        if self
            .dispatcher
            .as_ref()
            .is_none_or(|d| d.workers().is_empty())
        {
            return Route::Local(snap, OffloadReason::NoRemoteAddr, None);
        }
        let digest = pattern_history::digest(&req.data);
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let d = self.policy.decide(Inputs {
            num_ranges: ranges.len(),
            age: query_age(Ts(req.start_ts), now_ms),
            estimate: || snap.range_blocks_size(&ranges),
            history: || digest.and_then(|d| self.history.stats(d)),
            cpu: || {
                self.cpu
                    .as_ref()
                    .map_or(CpuState::NoSignal, |m| m.state(Instant::now()))
            },
        });
        metrics::count_decision(d.reason);
        let pattern = digest.map(|digest| Pattern {
            digest,
            blocks_size: d.blocks_size,
        });
        if d.remote() {
            Route::Remote(snap, d.reason, pattern)
        } else {
            Route::Local(snap, d.reason, pattern)
        }
    }
}

async fn run_local(
    req: Arc<Request>,
    snap: SnapAccess,
    location: Location,
    why: String,
) -> Response {
    let ran = tokio::task::spawn_blocking(move || {
        cop::handler::handle(&req, &snap, &HandlerOptions::origin())
    })
    .await;
    let mut resp = match ran {
        Ok(resp) => resp,
        Err(e) => other_error(format!("coprocessor task failed: {e}")),
    };
    let details = resp.exec_details.get_or_insert_with(ExecDetails::default);
    details.set_location(location, why);
    metrics::count_answered(Answered::Ran(location));
    resp
}

fn region_error(
    kind: RegionErrorKind,
    region_id: u64,
    current_ver: u64,
    message: String,
) -> Response {
    Response {
        region_error: Some(RegionError {
            message,
            kind: kind as i32,
            region_id,
            current_ver,
            ..RegionError::default()
        }),
        ..Response::default()
    }
}

fn epoch_not_match(region_id: u64, asked: u64, current: u64) -> Response {
    region_error(
        RegionErrorKind::EpochNotMatch,
        region_id,
        current,
        format!("epoch not match: region_id={region_id} expected ver={current}, found ver={asked}"),
    )
}

fn other_error(message: String) -> Response {
    Response {
        other_error: message,
        ..Response::default()
    }
}
