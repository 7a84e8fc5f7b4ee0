//! One placement-driver instance: the election loop and the HTTP API.
//!
//! Every instance serves `GET /pd/members` (who leads) and answers `POST /tso` and
//! `POST /pd/alloc-id`; only the leader hands out timestamps and ids, the others answer with
//! the leader's URL. Routes:
//!
//! | path | body in → out |
//! |---|---|
//! | `POST /tso` | `wire::region::TsoRequest` → `TsoResponse` |
//! | `POST /pd/alloc-id` | `wire::pd::AllocIdRequest` → `AllocIdResponse` |
//! | `GET /pd/members` | → `wire::pd::MembersResponse` |
//! | `POST /pd/store-heartbeat` | `wire::pd::StoreHeartbeat` → `HeartbeatResponse` (leader) |
//! | `POST /pd/worker-heartbeat` | `wire::pd::WorkerHeartbeat` → `HeartbeatResponse` (leader) |
//! | `GET /pd/cluster` | → `wire::pd::ClusterView`: servers, workers, routing table (any instance) |
//! | `GET /pd/workers` | → `wire::pd::ClusterView` with the workers only (any instance) |
//! | `POST /pd/store-state` | `wire::pd::StoreStateRequest` → `HeartbeatResponse` (leader) |
//! | `POST /pd/operators` | `wire::pd::OperatorsRequest` → `OperatorsResponse`: the moves in flight (leader) |
//! | `POST /pd/rules` | `wire::pd::RulesRequest` → `RulesResponse`: set, delete or list placement rules (leader) |
//! | `POST /pd/watch` | `wire::pd::WatchRequest` → `WatchResponse`: the view once its topology changed (leader, long poll) |
//!
//! **Scheduling.** The leader plans every `schedule-interval` (`pd::scheduler`, from the
//! registered servers and the routing table; nothing when the metadata store cannot be read)
//! and hands each server the steps of the regions it leads in the answer to its heartbeat.
//! Operators live in the leader's memory, as in PD: a new leader plans afresh from the table.
//! The same round advances the GC safe point (`pd::gc`), which heartbeat answers carry.
//! | `GET /config`, `GET /metrics` | text |

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use node::http::{decode_proto, proto_response};
use tokio::sync::watch;
use wire::paths;
use wire::pd::{
    AllocIdRequest, AllocIdResponse, ClusterView, HeartbeatResponse, MembersResponse,
    OperatorsResponse, RulesRequest, RulesResponse, StoreHeartbeat, StoreState, StoreStateRequest,
    WatchRequest, WatchResponse, WorkerHeartbeat,
};
use wire::region::{TsoRequest, TsoResponse};

use crate::election::{Fence, Leadership, serve_deadline};
use crate::error::PdError;
use crate::gc::GcSafePoint;
use crate::id_alloc::IdAllocator;
use crate::keys::{Keys, parse_u64};
use crate::meta::{Compare, Lease, MetaStore, Op, Txn};
use crate::metrics;
use crate::registry::Registry;
use crate::scheduler::{Scheduler, SchedulerConfig, StoreView};
use crate::stale_replicas::StaleReplicas;
use crate::tso::{Tso, now_ms};

/// How often a follower looks for a leader (and campaigns when there is none).
const FOLLOWER_POLL: Duration = Duration::from_millis(100);

/// Settings of one instance (from `[pd]`).
#[derive(Clone, Debug)]
pub struct PdOptions {
    pub name: String,
    /// This instance's base URL as others reach it.
    pub url: String,
    pub cluster_name: String,
    pub lease_ttl: Duration,
    pub tso_window: Duration,
    pub id_batch: u64,
    pub node_lease_ttl: Duration,
    /// The effective config text served at `GET /config`.
    pub config_text: String,
    pub scheduler: SchedulerConfig,
    pub schedule_interval: Duration,
    /// How far the GC safe point trails now (`pd::gc`).
    pub gc_life_time: Duration,
    /// What the admin paths (drains, operators, rules) accept besides an admin's certificate
    /// (`security.admin-token-path`).
    pub admin_token: Option<node::tls::AdminToken>,
}

/// One instance over the metadata store `S`.
#[derive(Debug)]
pub struct Pd<S: MetaStore> {
    store: S,
    keys: Keys,
    options: PdOptions,
    leadership: Leadership,
    tso: Tso,
    ids: IdAllocator,
    registry: Registry,
    scheduler: parking_lot::Mutex<Scheduler>,
    stale: parking_lot::Mutex<StaleReplicas>,
    gc: GcSafePoint,
    topology: crate::watch::Topology,
    cluster_id: AtomicU64,
}

impl<S: MetaStore> Pd<S> {
    pub fn new(store: S, options: PdOptions) -> Pd<S> {
        metrics::register_all();
        let keys = Keys::new(&options.cluster_name);
        Pd {
            tso: Tso::new(keys.tso_mark(), options.tso_window),
            ids: IdAllocator::new(keys.id_alloc(), options.id_batch),
            leadership: Leadership::new(options.url.clone()),
            registry: Registry::new(keys.clone(), options.node_lease_ttl),
            scheduler: parking_lot::Mutex::new(Scheduler::new(options.scheduler.clone())),
            stale: parking_lot::Mutex::new(StaleReplicas::new(options.node_lease_ttl)),
            gc: GcSafePoint::new(keys.gc_safe_point()),
            topology: crate::watch::Topology::default(),
            cluster_id: AtomicU64::new(0),
            store,
            keys,
            options,
        }
    }

    pub fn leadership(&self) -> &Leadership {
        &self.leadership
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// The cluster id (0 until [`Pd::ensure_cluster_id`] ran).
    pub fn cluster_id(&self) -> u64 {
        self.cluster_id.load(Ordering::Relaxed)
    }

    /// Reads the cluster id, creating it on the very first start of the cluster.
    pub async fn ensure_cluster_id(&self) -> Result<u64, PdError> {
        let key = self.keys.cluster_id();
        if self.store.get(&key).await?.is_none() {
            // Time and process id: distinct for clusters started apart, and fixed once written.
            let fresh = (now_ms() << 16) ^ u64::from(std::process::id());
            self.store
                .txn(
                    Txn::when(vec![Compare::absent(key.clone())])
                        .then(vec![Op::put(key.clone(), fresh.to_string())]),
                )
                .await?;
        }
        let kv = self.store.get(&key).await?.ok_or_else(|| {
            PdError::Corrupt("the cluster id vanished after it was written".into())
        })?;
        let id = parse_u64(&key, &kv.value).map_err(PdError::Corrupt)?;
        self.cluster_id.store(id, Ordering::Relaxed);
        Ok(id)
    }

    /// Campaigns, leads and follows until `stop` turns true; a leader then gives up its lease
    /// so another instance takes over at once instead of after the lease.
    pub async fn run_election(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        while self.cluster_id() == 0 {
            if let Err(e) = self.ensure_cluster_id().await {
                tracing::warn!("cannot read the cluster id: {e}");
                if sleep_or_stop(&mut stop, FOLLOWER_POLL * 5).await {
                    return;
                }
            }
        }
        loop {
            if *stop.borrow() {
                return;
            }
            match self.campaign_once().await {
                Ok(Some((lease, fence, sent))) => {
                    self.lead(lease, fence, sent, &mut stop).await;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("election: {e}"),
            }
            if sleep_or_stop(&mut stop, FOLLOWER_POLL).await {
                return;
            }
        }
    }

    /// Follows a leader that exists, or tries to become it.
    async fn campaign_once(&self) -> Result<Option<(Lease, Fence, Instant)>, PdError> {
        let key = self.keys.leader();
        if let Some(kv) = self.store.get(&key).await? {
            self.leadership
                .follow(String::from_utf8_lossy(&kv.value).into_owned());
            return Ok(None);
        }
        let sent = Instant::now();
        let lease = self.store.grant_lease(self.options.lease_ttl).await?;
        let won = self
            .store
            .txn(
                Txn::when(vec![Compare::absent(key.clone())]).then(vec![Op::put_leased(
                    key.clone(),
                    self.options.url.clone(),
                    lease.id,
                )]),
            )
            .await?;
        let mine = if won {
            match self.store.get(&key).await {
                Ok(kv) => kv.filter(|kv| kv.lease == lease.id),
                Err(e) => {
                    // Won but cannot read the fence: give the key back at once rather than
                    // leave it under a lease nobody renews.
                    let _ = self.store.revoke(lease.id).await;
                    return Err(e.into());
                }
            }
        } else {
            None
        };
        match mine {
            Some(kv) => Ok(Some((
                lease,
                Fence {
                    key,
                    mod_revision: kv.mod_revision,
                },
                sent,
            ))),
            None => {
                let _ = self.store.revoke(lease.id).await;
                Ok(None)
            }
        }
    }

    /// Serves as the leader until the lease is lost, the fence breaks or `stop`.
    async fn lead(
        &self,
        lease: Lease,
        fence: Fence,
        sent: Instant,
        stop: &mut watch::Receiver<bool>,
    ) {
        self.leadership
            .lead(lease.id, fence.clone(), serve_deadline(sent, lease.ttl));
        if let Err(e) = self.tso.start(&self.store, &fence).await {
            tracing::warn!("won the election but cannot start the TSO: {e}");
            self.step_down(lease).await;
            return;
        }
        self.ids.start();
        // Heartbeat answers carry the safe point from the first one on; a failed read is
        // retried by the first scheduling round.
        if let Err(e) = self.gc.load(&self.store).await {
            tracing::warn!("cannot read the GC safe point: {e}");
        }
        self.registry.reset();
        self.scheduler.lock().reset();
        self.stale.lock().reset();
        metrics::ELECTIONS_WON.inc();
        metrics::IS_LEADER.set(1);
        tracing::info!(name = %self.options.name, url = %self.options.url, "leading");
        let renew_every = (lease.ttl / 3).max(Duration::from_millis(100));
        let tick = renew_every
            .min(self.options.tso_window / 6)
            .max(Duration::from_millis(20));
        // Counted from the grant, as the serving deadline is.
        let mut next_renew = sent + renew_every;
        let tick = tick.min(self.options.schedule_interval);
        let mut next_schedule = Instant::now() + self.options.schedule_interval;
        loop {
            if sleep_or_stop(stop, tick).await {
                break;
            }
            if Instant::now() >= next_schedule {
                next_schedule = Instant::now() + self.options.schedule_interval;
                if let Err(e) = self.schedule_once().await {
                    tracing::debug!("scheduling paused: {e}");
                }
            }
            if Instant::now() >= next_renew {
                let sent = Instant::now();
                match self.store.keep_alive(lease.id).await {
                    Ok(Some(ttl)) => {
                        // The key itself must still be the one this leadership created (a
                        // deleted key lets another instance win while this lease lives).
                        match self.store.get(&fence.key).await {
                            Ok(Some(kv)) if kv.mod_revision == fence.mod_revision => {
                                self.leadership.renewed(lease.id, serve_deadline(sent, ttl));
                                next_renew = sent + renew_every;
                            }
                            Ok(_) => {
                                tracing::warn!(
                                    "the leader key changed under this leadership: stepping down"
                                );
                                break;
                            }
                            Err(e) => tracing::warn!("cannot check the leader key: {e}"),
                        }
                    }
                    Ok(None) => {
                        tracing::warn!("the leader lease expired: stepping down");
                        break;
                    }
                    Err(e) => tracing::warn!("cannot renew the leader lease: {e}"),
                }
            }
            if !self.leadership.is_leader() {
                tracing::warn!(
                    "the leader lease ran out before a renewal succeeded: stepping down"
                );
                break;
            }
            if !self.tso.is_serving() || !self.ids.is_serving() {
                // A fenced write failed (another instance wrote, or a retried write met its
                // own first attempt): step down and let an election re-read the store.
                tracing::warn!("a fenced write failed: stepping down to start over");
                break;
            }
            match self.tso.extend_ahead(&self.store, &fence, false).await {
                Ok(()) => {}
                Err(PdError::LeadershipLost { .. }) => {
                    tracing::warn!("another instance took the leader key: stepping down");
                    break;
                }
                Err(e) => tracing::warn!("cannot extend the tso window: {e}"),
            }
        }
        self.step_down(lease).await;
    }

    async fn step_down(&self, lease: Lease) {
        self.tso.stop();
        self.ids.stop();
        self.leadership.follow(String::new());
        // After `follow`: the watchers it wakes find this instance not leading.
        self.topology.clear();
        metrics::IS_LEADER.set(0);
        if let Err(e) = self.store.revoke(lease.id).await {
            tracing::warn!("cannot revoke the leader lease (it expires by itself): {e}");
        }
    }

    /// The fence when this instance leads, or the error to answer with.
    fn fence(&self) -> Result<Fence, PdError> {
        self.leadership
            .fence()
            .map_err(|leader| PdError::NotLeader { leader })
    }

    /// `count` timestamps, the first returned.
    pub async fn get_ts(&self, count: u32) -> Result<u64, PdError> {
        let fence = self.fence()?;
        let first = self.tso.get_ts(&self.store, &fence, count).await?;
        metrics::TIMESTAMPS.inc_by(u64::from(count));
        Ok(first)
    }

    /// `count` new ids, the first returned.
    pub async fn alloc_ids(&self, count: u32) -> Result<u64, PdError> {
        let fence = self.fence()?;
        self.ids.alloc(&self.store, &fence, count).await
    }

    /// Takes a server's heartbeat (the leader only); the scheduling steps for the regions it
    /// leads.
    pub async fn store_heartbeat(
        &self,
        hb: StoreHeartbeat,
    ) -> Result<Vec<wire::pd::RegionStep>, PdError> {
        let fence = self.fence()?;
        let store_id = hb.store_id;
        // Old replicas first: a scheduling round between the registration and this must not
        // pick the server for a region it still holds an old replica of.
        let destroy = self
            .stale
            .lock()
            .check(Instant::now(), store_id, &hb.held_regions);
        self.registry
            .store_heartbeat(&self.store, &fence, hb)
            .await?;
        let mut steps = self.scheduler.lock().steps_for(store_id);
        steps.extend(destroy);
        Ok(steps)
    }

    /// One scheduling round over what the metadata store holds now (module docs).
    async fn schedule_once(&self) -> Result<(), PdError> {
        self.fence()?;
        let view = self.registry.view(&self.store).await?;
        let now = Instant::now();
        // First what the table says now: a replica removed since the last round must not be
        // added back to its server in this one (`StaleReplicas::observe`).
        let urls = view
            .stores
            .iter()
            .filter_map(|s| s.heartbeat.as_ref())
            .map(|hb| (hb.store_id, hb.url.clone()))
            .collect();
        self.stale.lock().observe(now, &view.regions, &urls);
        let stores: Vec<StoreView> = view
            .stores
            .iter()
            .filter_map(|s| {
                let hb = s.heartbeat.as_ref()?;
                Some(StoreView {
                    id: hb.store_id,
                    url: hb.url.clone(),
                    zone: hb.zone(),
                    state: s.state(),
                    stale: self.stale.lock().unlisted(hb.store_id),
                })
            })
            .collect();
        {
            let mut scheduler = self.scheduler.lock();
            scheduler.set_rules(view.rules.clone());
            scheduler.schedule(now, &stores, &view.regions);
        }
        self.topology.publish(&view);
        self.advance_gc(&view).await
    }

    /// Answers every held watch at once (a shutdown starts): they get "not ready" and ask again
    /// elsewhere.
    pub fn close_watches(&self) {
        self.topology.clear();
    }

    /// The view once its topology differs from `token`, or after `wait` (the leader only).
    pub async fn watch(&self, token: u64, wait: Duration) -> Result<WatchResponse, PdError> {
        self.fence()?;
        let published = self.topology.wait_change(token, wait).await;
        // Still leading: a view published before a step-down is not the cluster's any more.
        self.fence()?;
        let (token, view) = published
            .map(|p| (p.0, p.1.clone()))
            .ok_or(PdError::NotReady {
                what: "the first scheduling round has not read the cluster yet",
            })?;
        Ok(WatchResponse {
            view: Some(ClusterView {
                leader: self.leadership.leader(),
                ..view
            }),
            token,
            ..WatchResponse::default()
        })
    }

    /// Moves the GC safe point up to what the cluster allows now (`pd::gc`).
    async fn advance_gc(&self, view: &ClusterView) -> Result<(), PdError> {
        let fence = self.fence()?;
        match crate::gc::candidate(now_ms(), self.options.gc_life_time, view) {
            Ok(to) => {
                let at = self.gc.advance(&self.store, &fence, to).await?;
                metrics::GC_SAFE_POINT.set(i64::try_from(at).unwrap_or(i64::MAX));
            }
            Err(held) => tracing::debug!("the GC safe point waits: {held}"),
        }
        Ok(())
    }

    /// Sets a server's scheduling state (the leader only).
    pub async fn set_store_state(&self, req: StoreStateRequest) -> Result<(), PdError> {
        let fence = self.fence()?;
        self.registry
            .set_store_state(&self.store, &fence, req.store_id, req.state())
            .await
    }

    /// Sets or deletes a placement rule (the leader only, fenced), then lists them all. The
    /// next scheduling round plans by them.
    pub async fn rules(&self, req: RulesRequest) -> Result<RulesResponse, PdError> {
        let fence = self.fence()?;
        if let Some(rule) = &req.put {
            // A zone no registered server is in is most likely a typo: refused, so a rule
            // never silently places fewer replicas than it names.
            let view = self.registry.view(&self.store).await?;
            let known: std::collections::BTreeSet<String> = view
                .stores
                .iter()
                .filter_map(|s| s.heartbeat.as_ref())
                .filter_map(|h| h.zone().map(|z| z.to_string()))
                .collect();
            if let Some(unknown) = rule.zones.iter().find(|z| !known.contains(*z)) {
                return Err(PdError::Invalid(format!(
                    "rule {:?}: expected zones of registered servers ({}), found {unknown:?}",
                    rule.id,
                    known.into_iter().collect::<Vec<_>>().join(", ")
                )));
            }
            if !req.delete.is_empty() {
                return Err(PdError::Invalid(
                    "expected a rule to set or one to delete, found both".into(),
                ));
            }
            self.registry.put_rule(&self.store, &fence, rule).await?;
        }
        if !req.delete.is_empty() {
            self.registry
                .delete_rule(&self.store, &fence, &req.delete)
                .await?;
        }
        Ok(RulesResponse {
            rules: self.registry.rules(&self.store).await?,
            ..RulesResponse::default()
        })
    }

    /// The operators in flight (the leader only: they live in its memory).
    pub fn operators(&self) -> Result<OperatorsResponse, PdError> {
        self.fence()?;
        Ok(OperatorsResponse {
            operators: self.scheduler.lock().operators(Instant::now()),
            ..OperatorsResponse::default()
        })
    }

    /// Takes a worker's heartbeat (the leader only); the worker's id.
    pub async fn worker_heartbeat(&self, hb: WorkerHeartbeat) -> Result<u64, PdError> {
        let fence = self.fence()?;
        self.registry
            .worker_heartbeat(&self.store, &fence, &self.ids, hb)
            .await
    }

    /// The registered nodes and the routing table (any instance).
    pub async fn cluster_view(&self) -> Result<ClusterView, PdError> {
        let mut view = self.registry.view(&self.store).await?;
        view.leader = self.leadership.leader();
        view.gc_safe_point = self.gc.load(&self.store).await?;
        Ok(view)
    }

    /// The registered workers only (any instance).
    pub async fn workers_view(&self) -> Result<ClusterView, PdError> {
        let mut view = self.registry.workers_view(&self.store).await?;
        view.leader = self.leadership.leader();
        Ok(view)
    }

    pub fn members(&self) -> MembersResponse {
        MembersResponse {
            name: self.options.name.clone(),
            url: self.options.url.clone(),
            leader: self.leadership.leader(),
            cluster_id: self.cluster_id(),
            store: self.store.describe(),
        }
    }
}

/// Sleeps `d`; true when `stop` turned true meanwhile (or its sender is gone).
async fn sleep_or_stop(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => *stop.borrow(),
        changed = stop.changed() => changed.is_err() || *stop.borrow(),
    }
}

/// An answer that can carry a refusal: the error text and, for a follower, the leader's URL.
trait Refusable: prost::Message + Default {
    fn refused(error: String, leader: String) -> Self;
}

macro_rules! refusable {
    ($($t:ty),*) => {$(
        impl Refusable for $t {
            fn refused(error: String, leader: String) -> Self {
                Self { error, leader, ..Self::default() }
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

/// The answer to a request of `kind`: `done` as it is, or its error as a refusal naming the
/// leader when this instance does not lead; counted in `stratus_pd_requests_total`.
fn answer<R: Refusable>(kind: &str, done: Result<R, PdError>) -> Response {
    if let Err(PdError::Invalid(reason)) = &done {
        metrics::REQUESTS
            .with_label_values(&[kind, "invalid"])
            .inc();
        return node::http::HttpError::bad_request(reason.clone()).into_response();
    }
    let (resp, result) = match done {
        Ok(r) => (r, "ok"),
        Err(e) => {
            let (leader, result) = match &e {
                PdError::NotLeader { leader } => (leader.clone(), "not_leader"),
                _ => (String::new(), "error"),
            };
            (R::refused(node::error_chain(&e), leader), result)
        }
    };
    metrics::REQUESTS.with_label_values(&[kind, result]).inc();
    proto_response(&resp)
}

async fn tso_handler<S: MetaStore>(State(pd): State<Arc<Pd<S>>>, body: Bytes) -> Response {
    let req: TsoRequest = match decode_proto(&body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let count = req.count.max(1);
    let done = pd.get_ts(count).await.map(|first_ts| TsoResponse {
        first_ts,
        count,
        ..TsoResponse::default()
    });
    answer("tso", done)
}

async fn alloc_id_handler<S: MetaStore>(State(pd): State<Arc<Pd<S>>>, body: Bytes) -> Response {
    let req: AllocIdRequest = match decode_proto(&body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let count = req.count.max(1);
    let done = pd.alloc_ids(count).await.map(|first| AllocIdResponse {
        first,
        count,
        ..AllocIdResponse::default()
    });
    answer("alloc_id", done)
}

async fn store_heartbeat_handler<S: MetaStore>(
    State(pd): State<Arc<Pd<S>>>,
    body: Bytes,
) -> Response {
    let hb: StoreHeartbeat = match decode_proto(&body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let done = pd.store_heartbeat(hb).await.map(|steps| HeartbeatResponse {
        cluster_id: pd.cluster_id(),
        steps,
        gc_safe_point: pd.gc.known(),
        ..HeartbeatResponse::default()
    });
    answer("store_heartbeat", done)
}

async fn store_state_handler<S: MetaStore>(State(pd): State<Arc<Pd<S>>>, body: Bytes) -> Response {
    let req: StoreStateRequest = match decode_proto(&body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    if StoreState::try_from(req.state).is_err() {
        return answer::<HeartbeatResponse>(
            "store_state",
            Err(PdError::Corrupt(format!(
                "expected a server state (0 = up, 1 = draining), found {}",
                req.state
            ))),
        );
    }
    let done = pd.set_store_state(req).await.map(|()| HeartbeatResponse {
        cluster_id: pd.cluster_id(),
        ..HeartbeatResponse::default()
    });
    answer("store_state", done)
}

async fn watch_handler<S: MetaStore>(State(pd): State<Arc<Pd<S>>>, body: Bytes) -> Response {
    let req: WatchRequest = match decode_proto(&body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let wait = Duration::from_millis(u64::from(req.wait_ms));
    answer("watch", pd.watch(req.token, wait).await)
}

async fn rules_handler<S: MetaStore>(State(pd): State<Arc<Pd<S>>>, body: Bytes) -> Response {
    let req: RulesRequest = match decode_proto(&body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    answer("rules", pd.rules(req).await)
}

async fn operators_handler<S: MetaStore>(State(pd): State<Arc<Pd<S>>>) -> Response {
    answer("operators", pd.operators())
}

async fn worker_heartbeat_handler<S: MetaStore>(
    State(pd): State<Arc<Pd<S>>>,
    body: Bytes,
) -> Response {
    let hb: WorkerHeartbeat = match decode_proto(&body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let done = pd
        .worker_heartbeat(hb)
        .await
        .map(|worker_id| HeartbeatResponse {
            cluster_id: pd.cluster_id(),
            worker_id,
            ..HeartbeatResponse::default()
        });
    answer("worker_heartbeat", done)
}

async fn cluster_handler<S: MetaStore>(State(pd): State<Arc<Pd<S>>>) -> Response {
    view_response(pd.cluster_view().await)
}

async fn workers_handler<S: MetaStore>(State(pd): State<Arc<Pd<S>>>) -> Response {
    view_response(pd.workers_view().await)
}

fn view_response(view: Result<ClusterView, PdError>) -> Response {
    proto_response(&view.unwrap_or_else(|e| ClusterView {
        error: node::error_chain(&e),
        ..ClusterView::default()
    }))
}

async fn members_handler<S: MetaStore>(State(pd): State<Arc<Pd<S>>>) -> Response {
    proto_response(&pd.members())
}

async fn config_handler<S: MetaStore>(State(pd): State<Arc<Pd<S>>>) -> Response {
    pd.options.config_text.clone().into_response()
}

/// The HTTP routes of `pd`, metered as a placement driver (which has no zone label: its bytes
/// count under `zone=""` and never as cross-zone).
pub fn router<S: MetaStore>(pd: Arc<Pd<S>>) -> Router {
    let routes = Router::new()
        .route(paths::TSO, post(tso_handler::<S>))
        .route(paths::PD_ALLOC_ID, post(alloc_id_handler::<S>))
        .route(paths::PD_MEMBERS, get(members_handler::<S>))
        .route(
            paths::PD_STORE_HEARTBEAT,
            post(store_heartbeat_handler::<S>),
        )
        .route(
            paths::PD_WORKER_HEARTBEAT,
            post(worker_heartbeat_handler::<S>),
        )
        .route(paths::PD_CLUSTER, get(cluster_handler::<S>))
        .route(paths::PD_WORKERS, get(workers_handler::<S>))
        .route(paths::PD_STORE_STATE, post(store_state_handler::<S>))
        .route(paths::PD_OPERATORS, post(operators_handler::<S>))
        .route(paths::PD_RULES, post(rules_handler::<S>))
        .route(paths::PD_WATCH, post(watch_handler::<S>))
        .route(paths::CONFIG, get(config_handler::<S>))
        .route(paths::METRICS, get(node::http::metrics_handler))
        .with_state(pd.clone());
    let token = pd.options.admin_token.clone();
    let routes = node::access::guarded(routes, wire::traffic::Role::Pd, token);
    node::traffic::metered(routes, node::Meter::unlabelled(wire::traffic::Role::Pd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::embedded::EmbeddedStore;

    fn options(name: &str) -> PdOptions {
        PdOptions {
            name: name.into(),
            url: format!("http://{name}"),
            cluster_name: "t".into(),
            lease_ttl: Duration::from_millis(300),
            tso_window: Duration::from_millis(300),
            id_batch: 10,
            node_lease_ttl: Duration::from_secs(1),
            config_text: String::new(),
            scheduler: SchedulerConfig::default(),
            schedule_interval: Duration::from_secs(1),
            gc_life_time: Duration::from_secs(600),
            admin_token: None,
        }
    }

    #[test]
    fn one_of_two_instances_leads_and_the_other_takes_over_when_it_stops() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let store = EmbeddedStore::in_memory();
            let a = Arc::new(Pd::new(store.clone(), options("a")));
            let b = Arc::new(Pd::new(store.clone(), options("b")));
            let (stop_a, rx_a) = watch::channel(false);
            let (_stop_b, rx_b) = watch::channel(false);
            let ja = tokio::spawn(a.clone().run_election(rx_a));
            tokio::time::sleep(Duration::from_millis(200)).await;
            tokio::spawn(b.clone().run_election(rx_b));
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(a.leadership().is_leader());
            assert_eq!(b.leadership().leader(), "http://a");
            let e = b.get_ts(1).await.unwrap_err();
            assert!(
                matches!(e, PdError::NotLeader { ref leader } if leader == "http://a"),
                "{e}"
            );
            let before = a.get_ts(1).await.unwrap();
            let id = a.alloc_ids(1).await.unwrap();
            stop_a.send(true).unwrap();
            ja.await.unwrap();
            let deadline = Instant::now() + Duration::from_secs(5);
            while !b.leadership().is_leader() {
                assert!(Instant::now() < deadline, "b never took over");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let mut after = b.get_ts(1).await;
            while matches!(after, Err(PdError::NotLeader { .. })) {
                assert!(Instant::now() < deadline, "b never served a timestamp");
                tokio::time::sleep(Duration::from_millis(10)).await;
                after = b.get_ts(1).await;
            }
            assert!(after.unwrap() > before);
            assert!(b.alloc_ids(1).await.unwrap() > id);
            assert_eq!(a.cluster_id(), b.cluster_id());
            assert_ne!(a.cluster_id(), 0);
        });
    }
}
