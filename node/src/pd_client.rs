//! The client of the placement driver that servers, workers and entry nodes share: configured
//! with every instance's URL, it finds the leader (an instance that does not lead names the
//! one that does), follows it across failovers, and retries under one deadline per call.
//!
//! **Timestamps are batched**, as TiKV's client does: concurrent `get_ts` calls queue, one
//! dispatcher sends a single request for all of them (`count = n`) and hands each caller one
//! timestamp of the answer. A caller's timestamp is fresh: the request carrying it was sent
//! after the caller asked, so it is above every timestamp handed out before the call began.
//! Nothing is cached across calls (a cached timestamp used later would be stale).

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use prost::Message;
use tokio::sync::{mpsc, oneshot};
use wire::paths;
use wire::pd::{
    AllocIdRequest, AllocIdResponse, ClusterView, HeartbeatResponse, MembersResponse,
    OperatorsRequest, OperatorsResponse, PlacementRule, RulesRequest, RulesResponse,
    StoreHeartbeat, StoreState, StoreStateRequest, WatchRequest, WatchResponse, WorkerHeartbeat,
};
use wire::region::{TsoRequest, TsoResponse};

use crate::HttpClient;

/// The most timestamps one batched request asks for.
pub const MAX_TSO_BATCH: usize = 10_000;

#[derive(Clone, Debug, thiserror::Error)]
pub enum PdClientError {
    /// No instance answered within the call's deadline (the last failure is named).
    #[error("placement driver unavailable after {after:?} (endpoints {endpoints}): {last}")]
    Unavailable {
        endpoints: String,
        after: Duration,
        last: String,
    },
    /// The answer was not what the protocol says.
    #[error("placement driver {endpoint} answered unexpectedly: {detail}")]
    Protocol { endpoint: String, detail: String },
    /// The leader refused the request as it is (HTTP 400): asking again would not help.
    #[error("placement driver {endpoint} refused the request: {reason}")]
    Rejected { endpoint: String, reason: String },
    /// No endpoint is configured.
    #[error("no placement-driver endpoint configured")]
    NoEndpoints,
}

/// An answer that may be a refusal: `(error, leader hint)`.
trait Refusable: Message + Default {
    fn refusal(&self) -> Option<(&str, &str)>;
}

/// Every answer of the placement driver spells a refusal the same way: `error` and `leader`.
macro_rules! refusable {
    ($($t:ty),*) => {$(
        impl Refusable for $t {
            fn refusal(&self) -> Option<(&str, &str)> {
                (!self.error.is_empty()).then_some((self.error.as_str(), self.leader.as_str()))
            }
        }
    )*};
}

refusable!(
    TsoResponse,
    AllocIdResponse,
    HeartbeatResponse,
    OperatorsResponse,
    RulesResponse,
    WatchResponse
);

#[derive(Debug)]
struct Inner {
    endpoints: Vec<String>,
    /// The leader last seen (empty: unknown; the endpoints are tried in turn).
    leader: Mutex<String>,
    http: HttpClient,
    /// The budget of one call, retries included.
    deadline: Duration,
    /// One attempt's timeout.
    attempt_timeout: Duration,
}

type TsWaiter = oneshot::Sender<Result<u64, PdClientError>>;

/// Cheap to clone; clones share the leader cache and the timestamp dispatcher.
#[derive(Clone, Debug)]
pub struct PdClient {
    inner: Arc<Inner>,
    batcher: Arc<OnceLock<mpsc::UnboundedSender<TsWaiter>>>,
}

impl PdClient {
    /// A client of the instances at `endpoints` (`http://host:port`); each call gives up after
    /// `deadline`.
    pub fn new(endpoints: &[String], deadline: Duration) -> PdClient {
        PdClient::metered(
            endpoints,
            deadline,
            crate::Meter::unlabelled(wire::traffic::Role::Client),
            None,
        )
    }

    /// [`PdClient::new`] counting its traffic as `meter`'s node (a server's, a worker's, an
    /// entry node's zone), over TLS with the node's `tls` ([`HttpClient::with_tls`]).
    pub fn metered(
        endpoints: &[String],
        deadline: Duration,
        meter: crate::Meter,
        tls: Option<&crate::tls::Tls>,
    ) -> PdClient {
        PdClient::over(
            endpoints,
            deadline,
            HttpClient::with_tls(1 << 20, tls).with_meter(meter),
        )
    }

    /// A client of the instances at `endpoints` calling them with `http` (its TLS, meter and
    /// admin token: `stratus ctl` drains and sets rules as an admin).
    pub fn over(endpoints: &[String], deadline: Duration, http: HttpClient) -> PdClient {
        PdClient {
            inner: Arc::new(Inner {
                endpoints: endpoints
                    .iter()
                    .map(|e| e.trim_end_matches('/').to_string())
                    .collect(),
                leader: Mutex::new(String::new()),
                http,
                deadline,
                attempt_timeout: deadline.min(Duration::from_secs(2)),
            }),
            batcher: Arc::new(OnceLock::new()),
        }
    }

    pub fn endpoints(&self) -> &[String] {
        &self.inner.endpoints
    }

    /// One timestamp, batched with concurrent callers'. Must run inside a Tokio runtime.
    pub async fn get_ts(&self) -> Result<u64, PdClientError> {
        let (tx, rx) = oneshot::channel();
        let batcher = self.batcher.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(dispatch(self.inner.clone(), rx));
            tx
        });
        if batcher.send(tx).is_err() {
            return Err(self
                .inner
                .unavailable(Duration::ZERO, "the timestamp dispatcher stopped".into()));
        }
        rx.await.unwrap_or_else(|_| {
            Err(self
                .inner
                .unavailable(Duration::ZERO, "the timestamp dispatcher stopped".into()))
        })
    }

    /// `count` consecutive timestamps in one request (not batched with others); the first.
    pub async fn get_ts_batch(&self, count: u32) -> Result<u64, PdClientError> {
        self.inner.tso(count).await
    }

    /// `count` new ids (the first returned).
    pub async fn alloc_ids(&self, count: u32) -> Result<u64, PdClientError> {
        let resp: AllocIdResponse = self
            .inner
            .call(paths::PD_ALLOC_ID, &AllocIdRequest { count })
            .await?;
        if resp.first == 0 || resp.count < count {
            return Err(PdClientError::Protocol {
                endpoint: self.inner.leader.lock().clone(),
                detail: format!(
                    "expected {count} ids, found first={} count={}",
                    resp.first, resp.count
                ),
            });
        }
        Ok(resp.first)
    }

    /// The cluster view once its topology differs from the one `token` names (0: at once),
    /// or after `wait` with the same token: a long poll held by the placement leader
    /// (`pd::watch`). The answer's token goes into the next call.
    pub async fn watch(&self, token: u64, wait: Duration) -> Result<WatchResponse, PdClientError> {
        let wait_ms = u32::try_from(wait.as_millis()).unwrap_or(u32::MAX);
        self.inner
            .call_waiting(paths::PD_WATCH, &WatchRequest { token, wait_ms }, wait)
            .await
    }

    /// Registers (or renews) a storage server and reports the regions it leads.
    pub async fn store_heartbeat(
        &self,
        hb: &StoreHeartbeat,
    ) -> Result<HeartbeatResponse, PdClientError> {
        self.inner.call(paths::PD_STORE_HEARTBEAT, hb).await
    }

    /// Registers (or renews) a worker; the answer carries its id.
    pub async fn worker_heartbeat(
        &self,
        hb: &WorkerHeartbeat,
    ) -> Result<HeartbeatResponse, PdClientError> {
        self.inner.call(paths::PD_WORKER_HEARTBEAT, hb).await
    }

    /// The registered servers and workers and the routing table, from the first instance that
    /// answers (every instance reads them from the metadata store).
    pub async fn cluster(&self) -> Result<ClusterView, PdClientError> {
        self.view(paths::PD_CLUSTER).await
    }

    /// Sets a server's scheduling state (`stratus ctl server drain`).
    pub async fn set_store_state(
        &self,
        store_id: u64,
        state: StoreState,
    ) -> Result<HeartbeatResponse, PdClientError> {
        let req = StoreStateRequest {
            store_id,
            state: state as i32,
        };
        self.inner.call(paths::PD_STORE_STATE, &req).await
    }

    /// The leader's operators in flight.
    pub async fn operators(&self) -> Result<OperatorsResponse, PdClientError> {
        self.inner
            .call(paths::PD_OPERATORS, &OperatorsRequest {})
            .await
    }

    /// The placement rules (`stratus ctl rule`).
    pub async fn rules(&self) -> Result<RulesResponse, PdClientError> {
        self.inner
            .call(paths::PD_RULES, &RulesRequest::default())
            .await
    }

    /// Sets `rule`, replacing the one with its id; every rule after the change. A rule that
    /// does not validate is [`PdClientError::Rejected`] with the reason.
    pub async fn put_rule(&self, rule: PlacementRule) -> Result<RulesResponse, PdClientError> {
        let req = RulesRequest {
            put: Some(rule),
            ..RulesRequest::default()
        };
        self.inner.call(paths::PD_RULES, &req).await
    }

    /// Deletes the rule `id`; every rule after the change.
    pub async fn delete_rule(&self, id: &str) -> Result<RulesResponse, PdClientError> {
        let req = RulesRequest {
            delete: id.to_string(),
            ..RulesRequest::default()
        };
        self.inner.call(paths::PD_RULES, &req).await
    }

    /// The registered workers only (`ClusterView::workers`).
    pub async fn workers(&self) -> Result<ClusterView, PdClientError> {
        self.view(paths::PD_WORKERS).await
    }

    async fn view(&self, path: &str) -> Result<ClusterView, PdClientError> {
        let mut last = String::from("no endpoint answered");
        for e in &self.inner.endpoints {
            let url = format!("{e}{path}");
            match self.inner.http.get(&url, self.inner.attempt_timeout).await {
                Ok(reply) if reply.status.is_success() => {
                    let view = ClusterView::decode(reply.body.as_ref()).map_err(|err| {
                        PdClientError::Protocol {
                            endpoint: e.clone(),
                            detail: format!("the cluster view does not decode: {err}"),
                        }
                    })?;
                    if view.error.is_empty() {
                        return Ok(view);
                    }
                    last = format!("{e}: {}", view.error);
                }
                Ok(reply) => last = format!("{e}: {}", reply.status),
                Err(err) => last = err.to_string(),
            }
        }
        Err(self.inner.unavailable(Duration::ZERO, last))
    }

    /// What each instance says about itself (unreachable ones are left out).
    pub async fn members(&self) -> Vec<MembersResponse> {
        let mut out = Vec::new();
        for e in &self.inner.endpoints {
            let url = format!("{e}{}", paths::PD_MEMBERS);
            if let Ok(reply) = self.inner.http.get(&url, self.inner.attempt_timeout).await
                && reply.status.is_success()
                && let Ok(m) = MembersResponse::decode(reply.body.as_ref())
            {
                out.push(m);
            }
        }
        out
    }
}

impl Inner {
    fn unavailable(&self, after: Duration, last: String) -> PdClientError {
        PdClientError::Unavailable {
            endpoints: self.endpoints.join(","),
            after,
            last,
        }
    }

    async fn tso(&self, count: u32) -> Result<u64, PdClientError> {
        let resp: TsoResponse = self.call(paths::TSO, &TsoRequest { count }).await?;
        if resp.first_ts == 0 || resp.count < count {
            return Err(PdClientError::Protocol {
                endpoint: self.leader.lock().clone(),
                detail: format!(
                    "expected {count} timestamps, found first_ts={} count={}",
                    resp.first_ts, resp.count
                ),
            });
        }
        Ok(resp.first_ts)
    }

    /// POSTs `req` to the leader, following hints and moving across endpoints until an answer
    /// that is not a refusal, or the deadline.
    async fn call<Req: Message, Resp: Refusable>(
        &self,
        path: &str,
        req: &Req,
    ) -> Result<Resp, PdClientError> {
        self.call_waiting(path, req, Duration::ZERO).await
    }

    /// [`Inner::call`] for a request the placement driver may hold for up to `held` (a long
    /// poll): each attempt and the call's deadline get that much longer.
    async fn call_waiting<Req: Message, Resp: Refusable>(
        &self,
        path: &str,
        req: &Req,
        held: Duration,
    ) -> Result<Resp, PdClientError> {
        if self.endpoints.is_empty() {
            return Err(PdClientError::NoEndpoints);
        }
        let started = Instant::now();
        let body = Bytes::from(req.encode_to_vec());
        let mut next_endpoint = 0usize;
        let mut pause = Duration::from_millis(20);
        let mut hints = 0u32;
        let mut last = String::new();
        loop {
            let target = {
                let leader = self.leader.lock();
                if leader.is_empty() {
                    let t = self.endpoints[next_endpoint % self.endpoints.len()].clone();
                    next_endpoint += 1;
                    t
                } else {
                    leader.clone()
                }
            };
            let url = format!("{target}{path}");
            let mut hinted = false;
            // An attempt never runs past the call's deadline.
            // A held request gets its whole hold on every attempt, beside what is left of
            // the call's own deadline.
            let left = self.deadline.saturating_sub(started.elapsed());
            // Cut short by the call's deadline: its timeout says less than the answer before.
            let cut_short = left < self.attempt_timeout;
            let attempt = self
                .attempt_timeout
                .min(left)
                .saturating_add(held)
                .max(Duration::from_millis(1));
            match self.http.post(&url, body.clone(), attempt).await {
                Ok(reply) if reply.status.is_success() => match Resp::decode(reply.body.as_ref()) {
                    Ok(resp) => match resp.refusal() {
                        None => {
                            *self.leader.lock() = target;
                            return Ok(resp);
                        }
                        Some((error, leader)) => {
                            last = format!("{target}: {error}");
                            let mut known = self.leader.lock();
                            if !leader.is_empty() && leader != target {
                                *known = leader.trim_end_matches('/').to_string();
                                hinted = true;
                            } else {
                                known.clear();
                            }
                        }
                    },
                    Err(e) => {
                        return Err(PdClientError::Protocol {
                            endpoint: target,
                            detail: format!("the answer does not decode: {e}"),
                        });
                    }
                },
                Ok(reply) if reply.status == hyper::StatusCode::BAD_REQUEST => {
                    return Err(PdClientError::Rejected {
                        endpoint: target,
                        reason: String::from_utf8_lossy(&reply.body).trim().to_string(),
                    });
                }
                Ok(reply) => {
                    last = format!(
                        "{target}: {} {}",
                        reply.status,
                        String::from_utf8_lossy(&reply.body).trim()
                    );
                    self.leader.lock().clear();
                }
                Err(e) => {
                    if !(cut_short
                        && matches!(e, crate::ClientError::Timeout { .. })
                        && !last.is_empty())
                    {
                        last = e.to_string();
                    }
                    self.leader.lock().clear();
                }
            }
            let elapsed = started.elapsed();
            if elapsed >= self.deadline.saturating_add(held) {
                return Err(self.unavailable(elapsed, last));
            }
            // A hint is followed at once, but two instances naming each other (each thinking
            // the other leads, a moment after an election) must not ping-pong without pause.
            hints += u32::from(hinted);
            if !hinted || hints > 2 {
                tokio::time::sleep(
                    pause.min(self.deadline.saturating_add(held).saturating_sub(elapsed)),
                )
                .await;
                pause = (pause * 2).min(MAX_RETRY_PAUSE);
            }
        }
    }
}

/// The longest pause between two attempts of a call. A failover is the common case for
/// retrying: a new leader is serving a few milliseconds after it wins, and a longer pause
/// would be added whole to every client's failover time (measured with a 200 ms cap: the
/// client's first timestamp came up to 0.7 s after the election, `stratus-bench pd`). An
/// attempt against a dead address fails at once, so a client asks the three instances about
/// 20 times a second while none leads.
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Takes every queued timestamp request, asks once for all of them, answers each.
async fn dispatch(inner: Arc<Inner>, mut rx: mpsc::UnboundedReceiver<TsWaiter>) {
    while let Some(first) = rx.recv().await {
        let mut waiters = vec![first];
        while waiters.len() < MAX_TSO_BATCH {
            match rx.try_recv() {
                Ok(w) => waiters.push(w),
                Err(_) => break,
            }
        }
        let n = waiters.len() as u32;
        match inner.tso(n).await {
            Ok(first_ts) => {
                for (i, w) in waiters.into_iter().enumerate() {
                    let _ = w.send(Ok(first_ts + i as u64));
                }
            }
            Err(e) => {
                for w in waiters {
                    let _ = w.send(Err(e.clone()));
                }
            }
        }
    }
}
