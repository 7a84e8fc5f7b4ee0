//! The paging driver: [`Client::coprocessor`] runs one DAG over key ranges that may span many
//! regions and servers, and returns every page's rows plus the final merge.
//!
//! 1. The ranges are cut at region boundaries ([`crate::region_cache`]); each region's share
//!    is a **region task**. Up to `region-task-concurrency` tasks run at once (started in key
//!    order); the answer lists pages in key order whatever order they arrived in.
//! 2. A task sends its ranges with `paging_size` = `paging.initial-size` (128), doubling after
//!    every page up to `paging.max-size` (50,000). A response with a resume range (the span
//!    it covered, see `wire::paging`) continues with the task's ranges minus that span; a
//!    response without one ends the task.
//! 3. Pages go to the region's leader. A region error (epoch changed, region split, region
//!    gone, key not in region) replaces the region by the answer's current regions (or those
//!    the answering server lists) and re-splits **what the task has left**: rows of pages
//!    already returned are never asked again, rows not yet returned are asked from the new
//!    regions, so a split between two pages loses and duplicates nothing. Each task re-splits
//!    at most `max-region-retries` times. `NotLeader` moves the task to the leader it names
//!    (at once) or to the next replica (after a backoff); `ServerBusy` and `StaleCommand` back
//!    off and retry the same request; a refused connection marks the server down and moves to
//!    the next replica. Retries of a request share one deadline, `request-timeout` from its
//!    start ([`crate::backoff`]).
//! 4. A `locked` response resolves the lock ([`crate::lock_resolver`]) and retries; while the
//!    lock's transaction is alive the task backs off (up to `lock-wait-timeout`).
//! 5. Every page goes through the coprocessor cache ([`crate::cop_cache`]): a page may be
//!    answered by a cache hit (the entry's rows and resume range) and a computed page may be
//!    stored.
//! 6. The rows of every page, in page order, go through the final merge
//!    ([`crate::final_merge`]). A Limit root also ends a region task once the task returned
//!    `limit` rows (any `limit` rows are a valid answer).
//!
//! The paging sizes and the use of the cache can be overridden per request ([`CopOptions`],
//! [`Client::coprocessor_with`]; a session's variables do so): with the cache off a request
//! neither looks pages up nor offers them. Every page records where it ran (its exec details,
//! read into a typed `wire::placement::Location`: `local`, `remote` and the worker,
//! `fallback`, `cache_hit`, `delegate`; and the reason), which `EXPLAIN` reports.
//!
//! Where a task's pages go is its [`ServedBy`]: the owning server (`POST /coprocessor`,
//! [`Client::coprocessor`]) or a worker chosen by node selection (`POST /delegate/coprocessor`,
//! the delegate path, [`crate::delegate`]). Everything above applies to both; only the send
//! and the cache lookup differ (a worker never answers a cache hit).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use node::Exchange;
use parking_lot::Mutex;
use prost::Message;
use types::{RegionId, Ts};
use wire::codec::datum::decode_datums;
use wire::coprocessor::{
    self as proto, Context, DagRequest, ExecType, KeyRange, Request, Response, SelectResponse,
};
use wire::datum::Datum;
use wire::delegate::REGION_SERVER_HEADER;
use wire::paths;
use wire::placement::{Location, OffloadReason};

use crate::backoff::{Backoff, RetryReason};
use crate::config::{ClientConfig, base_url};
use crate::cop_cache::{CacheEntry, CacheKey, Candidate, CopCache};
use crate::error::{Error, Result};
use crate::final_merge::FinalMerge;
use crate::join::{BoxFuture, next_finished};
use crate::lock_resolver::{LockResolver, ResolveOutcome, TsoSource};
use crate::node_selection::{NodeSelectionPolicy, WorkerNode};
use crate::region_cache::{CachedRegion, RegionCache, RegionRanges};
use crate::region_rpc::{AfterError, Router};
use crate::replica_read::{self, ReplicaReadPolicy};
use crate::transport::Transport;
use crate::worker_liveness::WorkerLiveness;

/// The node a region task's pages are sent to, and so the node that computed a page.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServedBy {
    /// The server owning the region (`POST /coprocessor`; it may offload the page itself).
    Server,
    /// A worker on the delegate path (`POST /delegate/coprocessor`).
    Worker {
        /// The worker's id: its index in the config's `workers`.
        id: u64,
        /// Its base URL.
        addr: String,
        /// Its zone: it reads from a caught-up replica there when the region has one
        /// ([`replica_read::in_zone`]).
        zone: Option<types::Zone>,
    },
}

impl ServedBy {
    /// The worker's id, if a worker.
    pub fn worker_id(&self) -> Option<u64> {
        match self {
            ServedBy::Server => None,
            ServedBy::Worker { id, .. } => Some(*id),
        }
    }
}

/// The rows one page contributed.
#[derive(Debug, Clone, PartialEq)]
pub struct PageRows {
    pub region_id: RegionId,
    /// Where the page was computed (or, for a cache hit, confirmed).
    pub served_by: ServedBy,
    /// The page's index within its region task (0 = first page).
    pub page_index: u64,
    /// Answered by a cache hit.
    pub from_cache: bool,
    /// Whether the page had a resume range (more of the region followed).
    pub resumed: bool,
    pub rows: Vec<Vec<Datum>>,
    /// The base URL of the replica that served the page (the leader, or the replica of a
    /// replica read); on the delegate path, the one the worker read from.
    pub server: String,
    /// Where the page ran, from its exec details: `local`, `remote`, `fallback`, `cache_hit`
    /// (the owning server's answer) or `delegate` (a worker's); `None` when the answer named no
    /// place, or one this client does not know (a newer node's).
    pub location: Option<Location>,
    /// The node named beside the location: the worker that ran it (`remote`), the owning
    /// server (`delegate`); else empty.
    pub remote_addr: String,
    /// Why it ran where it did: the offload decision's reason (see
    /// [`PageRows::offload_reason`]), or a sentence; may be empty.
    pub reason: String,
    /// Body bytes this page moved between zones: this client's request and answer when the
    /// node it asked is in another zone, plus what that node reported for the hops below it
    /// (`ExecDetails.cross_zone_bytes`: an offload, a delegate fetch).
    pub cross_zone_bytes: u64,
    /// How long the page's request took, as this client saw it (`EXPLAIN ANALYZE`'s time).
    pub elapsed: Duration,
}

impl PageRows {
    /// The offload decision's reason, when the reason is one (a local or remote run); `None`
    /// for the sentences of a fallback, a cache hit or the delegate path.
    pub fn offload_reason(&self) -> Option<OffloadReason> {
        self.reason.parse().ok()
    }
}

/// Per-request settings of the paging driver: the config's `paging` sizes and the use of the
/// coprocessor cache, overridable per request (a session's `stratus_paging_initial_size`,
/// `stratus_paging_max_size` and `stratus_cop_cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopOptions {
    /// `paging_size` of a region task's first page (at least 1).
    pub paging_initial_size: u64,
    /// The most a page's `paging_size` doubles to (at least `paging_initial_size`).
    pub paging_max_size: u64,
    /// Look pages up in the coprocessor cache and offer computed pages to it. Off, a request
    /// neither reads nor fills the cache (and asks the server for no cache version).
    pub use_cache: bool,
    /// Which replica serves a request sent to a server (`tidb_replica_read`); the delegate
    /// path's workers read from the leader.
    pub replica_read: ReplicaReadPolicy,
}

impl CopOptions {
    /// The config's paging sizes, with the cache on.
    pub fn from_config(config: &ClientConfig) -> CopOptions {
        CopOptions {
            paging_initial_size: config.paging.initial_size,
            paging_max_size: config.paging.max_size,
            use_cache: true,
            replica_read: ReplicaReadPolicy::Leader,
        }
    }
}

/// What a request cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopStats {
    /// Coprocessor requests sent (every page, every retry).
    pub requests: u64,
    pub cache_hits: u64,
    pub region_errors: u64,
    /// Locks resolved (committed or rolled back) on the way.
    pub locks_resolved: u64,
    /// Body bytes moved between zones for the request, every answered attempt included
    /// ([`PageRows::cross_zone_bytes`] of the pages, and of answers that were retried: region
    /// errors, locks). 0 when no node or the client has a zone label.
    pub cross_zone_bytes: u64,
}

/// The answer of [`Client::coprocessor`].
#[derive(Debug, Clone, PartialEq)]
pub struct CopResult {
    /// The final rows: every page's rows through [`CopResult::merge`].
    pub rows: Vec<Vec<Datum>>,
    /// Every page's rows, in the order the pages were answered.
    pub pages: Vec<PageRows>,
    pub merge: FinalMerge,
    pub stats: CopStats,
    /// Warnings for the caller (later `SHOW WARNINGS`): node selection's on the delegate
    /// path, none on the server path.
    pub warnings: Vec<String>,
}

impl CopResult {
    /// The regions each worker served, by worker id (region ids ascending, each once); pages
    /// served by servers are left out.
    pub fn regions_by_worker(&self) -> BTreeMap<u64, Vec<RegionId>> {
        let mut by: BTreeMap<u64, Vec<RegionId>> = BTreeMap::new();
        for p in &self.pages {
            if let Some(w) = p.served_by.worker_id() {
                by.entry(w).or_default().push(p.region_id);
            }
        }
        for ids in by.values_mut() {
            ids.sort_unstable();
            ids.dedup();
        }
        by
    }
}

/// How often a client reads the workers' registrations at most (they change on a lease's
/// scale, seconds).
pub const REGISTRATIONS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The entry node's handle on the cluster. Share it (`Arc`) between tasks: every method takes
/// `&self`.
#[derive(Debug)]
pub struct Client {
    config: ClientConfig,
    transport: Transport,
    tso: TsoSource,
    /// The placement driver, when configured: timestamps, the routing table and the workers'
    /// registrations come from it.
    pd: Option<node::PdClient>,
    regions: Arc<RegionCache>,
    workers: Arc<WorkerLiveness>,
    /// Keeps `regions` and `workers` current from the placement driver, when configured.
    watch: crate::topology_watch::TopologyWatch,
    cache: Arc<CopCache>,
    /// Re-reads `[security]`'s files every `node::tls::RELOAD_INTERVAL` (a client made inside
    /// a runtime with TLS): the connections it opens next present and trust the rotated files,
    /// as a node's clients do. Stopped when the client is dropped.
    _tls_reloader: Option<TlsReloader>,
}

/// The task reloading a client's TLS files; aborted on drop.
#[derive(Debug)]
struct TlsReloader(tokio::task::JoinHandle<()>);

impl Drop for TlsReloader {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One region's share of a request, and where its paging stands.
#[derive(Debug, Clone)]
struct RegionTask {
    /// Where the task's pages go in the answer: its index among the request's tasks, extended
    /// by a child index each time a region error re-split it.
    order: Vec<u32>,
    region: CachedRegion,
    /// Where its pages go. The children of a re-split keep it: a split child has its parent's
    /// replicas, so its replica zones are its parent's and the choice still holds.
    target: ServedBy,
    ranges: Vec<KeyRange>,
    paging_size: u64,
    page_index: u64,
    region_retries: u32,
    /// Rows this task returned so far (for a Limit root).
    rows: u64,
}

/// The request-wide inputs of every region task.
struct RequestParts {
    data: Bytes,
    start_ts: u64,
    desc: bool,
    limit: Option<u64>,
    opts: CopOptions,
    /// When the request gives up (`request-timeout` after it started), retries included.
    deadline: tokio::time::Instant,
}

/// What one region task produced.
struct TaskOutput {
    order: Vec<u32>,
    pages: Vec<PageRows>,
    stats: CopStats,
    end: TaskEnd,
}

type TaskFuture<'a> = BoxFuture<'a, Result<TaskOutput>>;

impl CopStats {
    fn add(&mut self, o: &CopStats) {
        self.requests += o.requests;
        self.cache_hits += o.cache_hits;
        self.region_errors += o.region_errors;
        self.locks_resolved += o.locks_resolved;
        self.cross_zone_bytes += o.cross_zone_bytes;
    }
}

/// How a region task ended.
enum TaskEnd {
    Done,
    /// A region error: these ranges are left, to be re-split.
    Resplit(Box<RegionTask>),
}

/// How a request's region tasks choose their node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dispatch {
    /// Every region to its owning server.
    Servers,
    /// Every region to a worker chosen by node selection under this policy.
    Workers(NodeSelectionPolicy),
}

impl Client {
    /// A client for `config` (validated); regions load on first use.
    pub fn new(config: ClientConfig) -> Result<Client> {
        let cache = Arc::new(CopCache::new(config.cop_cache.clone()));
        Client::with_cop_cache(config, cache)
    }

    /// A client sharing `cache` (whose own config then applies, not `config.cop-cache`):
    /// several entry sessions of one process share one cache.
    pub fn with_cop_cache(config: ClientConfig, cache: Arc<CopCache>) -> Result<Client> {
        config.validate()?;
        let security = |e: node::tls::TlsError| crate::error::ConfigError {
            field: "security",
            reason: node::error_chain(&e),
        };
        let tls = config.security.load().map_err(security)?;
        let admin_token = config.security.admin_token().map_err(security)?;
        let servers: Vec<String> = config.servers.iter().map(|s| base_url(s)).collect();
        let pd = (!config.pd_endpoints.is_empty()).then(|| {
            let endpoints: Vec<String> = config.pd_endpoints.iter().map(|p| base_url(p)).collect();
            node::PdClient::metered(
                &endpoints,
                config.request_timeout.duration(),
                config.meter(),
                tls.as_deref(),
            )
        });
        let tso = if let Some(pd) = &pd {
            TsoSource::Pd(pd.clone())
        } else if config.tso_server.is_empty() {
            TsoSource::Server(servers[0].clone())
        } else {
            TsoSource::Server(base_url(&config.tso_server))
        };
        Ok(Client {
            transport: Transport::new(
                usize::try_from(config.max_response_size.bytes()).unwrap_or(usize::MAX),
                config.request_timeout.duration(),
                tls.as_deref(),
            )
            .with_admin_token(admin_token)
            .with_meter(config.meter()),
            tso,
            regions: Arc::new(RegionCache::with_pd(servers, pd.clone())),
            workers: Arc::new(WorkerLiveness::new(
                config.workers.iter().map(|w| base_url(w)).collect(),
                config.dead_worker_ttl.duration(),
            )),
            watch: crate::topology_watch::TopologyWatch::default(),
            cache,
            pd,
            config,
            _tls_reloader: tls
                .filter(|_| tokio::runtime::Handle::try_current().is_ok())
                .map(|tls| {
                    TlsReloader(tokio::spawn(node::http::reload_periodically(
                        tls,
                        node::tls::RELOAD_INTERVAL,
                    )))
                }),
        })
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    pub(crate) fn transport(&self) -> &Transport {
        &self.transport
    }

    pub fn region_cache(&self) -> &RegionCache {
        &self.regions
    }

    pub fn cop_cache(&self) -> &CopCache {
        &self.cache
    }

    pub fn worker_liveness(&self) -> &WorkerLiveness {
        &self.workers
    }

    /// Reloads the regions from every server that answers (fails only when none does).
    pub async fn refresh_regions(&self) -> Result<()> {
        self.regions.load(&self.transport).await
    }

    /// The region cache and the transport to refresh it.
    pub(crate) fn router(&self) -> Router<'_> {
        Router {
            transport: &self.transport,
            regions: &self.regions,
        }
    }

    /// A backoff for one logical request: `request-timeout` from now.
    pub(crate) fn backoff(&self) -> Backoff {
        Backoff::new(self.config.request_timeout.duration())
    }

    /// `ranges` split by the cached regions, loading the regions once when a key has none.
    async fn split_or_load(&self, ranges: &[KeyRange]) -> Result<Vec<RegionRanges>> {
        self.watch_topology();
        match self.regions.split_ranges(ranges) {
            Err(Error::NoRegion { .. }) => {
                self.refresh_regions().await?;
                self.regions.split_ranges(ranges)
            }
            r => r,
        }
    }

    /// Stops the client's background work (the placement driver's topology watch): for a
    /// client that lives as long as the process (a SQL front session's), before its cluster
    /// goes away. The client keeps working; it only stops learning of topology changes ahead
    /// of its requests.
    pub fn close(&self) {
        self.watch.stop();
    }

    /// Starts the placement driver's topology watch once, when configured
    /// ([`crate::topology_watch`]).
    fn watch_topology(&self) {
        if let Some(pd) = &self.pd {
            self.watch.ensure_started(pd, &self.regions, &self.workers);
        }
    }

    /// Takes the workers' registrations from the placement driver (when configured and its
    /// watch is not answering, at most once per [`REGISTRATIONS_EVERY`]: node selection runs
    /// per query), then probes every worker not within its dead TTL.
    pub async fn probe_workers(&self) {
        self.watch_topology();
        if let Some(pd) = &self.pd
            && !self.watch.is_live()
            && self
                .workers
                .registrations_due(std::time::Instant::now(), REGISTRATIONS_EVERY)
        {
            match pd.workers().await {
                Ok(view) => {
                    let registered: Vec<(String, Option<types::Zone>)> = view
                        .workers
                        .iter()
                        .map(|w| (base_url(&w.url), w.zone()))
                        .collect();
                    self.workers
                        .apply_registrations(&registered, std::time::Instant::now());
                }
                Err(e) => tracing::warn!("cannot read the workers' registrations: {e}"),
            }
        }
        self.workers.probe_all(&self.transport).await
    }

    /// The workers that count as alive now (for node selection).
    pub fn alive_workers(&self) -> Vec<WorkerNode> {
        self.workers.alive_workers()
    }

    /// A fresh timestamp from the TSO.
    pub async fn current_ts(&self) -> Result<u64> {
        self.lock_resolver().current_ts().await
    }

    /// The lock resolver over this client's regions and TSO: what the paging driver and the
    /// SQL writer resolve locks and decide transactions with.
    pub fn lock_resolver(&self) -> LockResolver<'_> {
        LockResolver {
            router: self.router(),
            tso: &self.tso,
            request_timeout: self.config.request_timeout.duration(),
        }
    }

    /// Runs `dag` over `ranges` (ascending, non-overlapping) at `start_ts`: see the module
    /// docs.
    pub async fn coprocessor(
        &self,
        dag: &DagRequest,
        ranges: Vec<KeyRange>,
        start_ts: u64,
    ) -> Result<CopResult> {
        self.coprocessor_observed(dag, ranges, start_ts, &mut |_| {})
            .await
    }

    /// [`Client::coprocessor`] with `opts` instead of the config's paging sizes and cache use.
    pub async fn coprocessor_with(
        &self,
        dag: &DagRequest,
        ranges: Vec<KeyRange>,
        start_ts: u64,
        opts: CopOptions,
    ) -> Result<CopResult> {
        self.drive(dag, ranges, start_ts, Dispatch::Servers, opts, &mut |_| {})
            .await
    }

    /// [`Client::coprocessor`], calling `on_page` with each page as soon as it is answered,
    /// before the next request is sent: progress reporting, and the point where tests change
    /// the cluster between two pages (split a region, write a row).
    pub async fn coprocessor_observed(
        &self,
        dag: &DagRequest,
        ranges: Vec<KeyRange>,
        start_ts: u64,
        on_page: &mut (dyn FnMut(&PageRows) + Send),
    ) -> Result<CopResult> {
        let opts = CopOptions::from_config(&self.config);
        self.drive(dag, ranges, start_ts, Dispatch::Servers, opts, on_page)
            .await
    }

    /// The paging driver, sending each region task where `dispatch` says.
    pub(crate) async fn drive(
        &self,
        dag: &DagRequest,
        ranges: Vec<KeyRange>,
        start_ts: u64,
        dispatch: Dispatch,
        opts: CopOptions,
        on_page: &mut (dyn FnMut(&PageRows) + Send),
    ) -> Result<CopResult> {
        let merge = FinalMerge::plan(dag)?;
        let data = Bytes::from(dag.encode_to_vec());
        let desc = scan_is_desc(dag);
        let limit = match merge {
            FinalMerge::Limit(n) => Some(n),
            _ => None,
        };
        let deadline = tokio::time::Instant::now() + self.config.request_timeout.duration();
        if self.regions.is_empty() {
            self.refresh_regions().await?;
        }
        let split = self.split_or_load(&ranges).await?;
        let (targets, warnings) = match dispatch {
            Dispatch::Servers => (vec![ServedBy::Server; split.len()], Vec::new()),
            Dispatch::Workers(policy) => self.choose_workers(policy, &split).await?,
        };
        let mut queue: VecDeque<RegionTask> = split
            .into_iter()
            .zip(targets)
            .enumerate()
            .map(|(i, (rr, target))| RegionTask {
                order: vec![i as u32],
                region: rr.region,
                target,
                ranges: rr.ranges,
                paging_size: opts.paging_initial_size.max(1),
                page_index: 0,
                region_retries: 0,
                rows: 0,
            })
            .collect();
        let req = RequestParts {
            data,
            start_ts,
            desc,
            limit,
            opts,
            deadline,
        };
        let on_page = Mutex::new(on_page);
        let concurrency = self.config.region_task_concurrency.max(1);
        let mut running: Vec<TaskFuture<'_>> = Vec::new();
        // (task order, page number within the task, page)
        let mut ordered: Vec<(Vec<u32>, usize, PageRows)> = Vec::new();
        let mut stats = CopStats::default();
        while !queue.is_empty() || !running.is_empty() {
            while running.len() < concurrency
                && let Some(task) = queue.pop_front()
            {
                running.push(Box::pin(self.run_task(task, &req, &on_page)));
            }
            let out = next_finished(&mut running).await?;
            stats.add(&out.stats);
            ordered.extend(
                out.pages
                    .into_iter()
                    .enumerate()
                    .map(|(i, p)| (out.order.clone(), i, p)),
            );
            if let TaskEnd::Resplit(left) = out.end {
                // The new regions' tasks go first, in key order, carrying the paging state;
                // their order extends the parent's, so their pages sort after its pages.
                let split = self.split_or_load(&left.ranges).await?;
                for (j, rr) in split.into_iter().enumerate().rev() {
                    let mut order = left.order.clone();
                    order.push(j as u32);
                    queue.push_front(RegionTask {
                        order,
                        region: rr.region,
                        ranges: rr.ranges,
                        ..(*left).clone()
                    });
                }
            }
        }
        ordered.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        let pages: Vec<PageRows> = ordered.into_iter().map(|(_, _, p)| p).collect();
        let all: Vec<Vec<Datum>> = pages.iter().flat_map(|p| p.rows.clone()).collect();
        let rows = merge.apply(all)?;
        Ok(CopResult {
            rows,
            pages,
            merge,
            stats,
            warnings,
        })
    }

    /// Sends one page to `server` (a replica of the task's region), or through the task's
    /// worker, which asks `server`; the answer and what the exchange moved.
    async fn send_page(
        &self,
        task: &RegionTask,
        server: &str,
        req: &Request,
    ) -> Result<(Response, Exchange)> {
        let what = "coprocessor response";
        match &task.target {
            ServedBy::Server => {
                self.transport
                    .post_metered(server, paths::COPROCESSOR, &[], req, what)
                    .await
            }
            ServedBy::Worker { addr, .. } => {
                let headers = [(REGION_SERVER_HEADER, server)];
                self.transport
                    .post_metered(addr, paths::DELEGATE_COPROCESSOR, &headers, req, what)
                    .await
            }
        }
    }

    /// Ends `task` for a re-split of what it has left, counting one region retry (at most
    /// `max-region-retries`; `last` names the last cause).
    fn resplit(
        &self,
        mut task: RegionTask,
        pages: Vec<PageRows>,
        stats: CopStats,
        last: String,
    ) -> Result<TaskOutput> {
        task.region_retries += 1;
        if task.region_retries > self.config.max_region_retries {
            return Err(Error::RegionRetriesExhausted {
                retries: task.region_retries - 1,
                last,
            });
        }
        Ok(TaskOutput {
            order: task.order.clone(),
            pages,
            stats,
            end: TaskEnd::Resplit(Box::new(task)),
        })
    }

    /// Pages through one region task until it is done or a region error ends it.
    async fn run_task(
        &self,
        mut task: RegionTask,
        req: &RequestParts,
        on_page: &Mutex<&mut (dyn FnMut(&PageRows) + Send)>,
    ) -> Result<TaskOutput> {
        let (data, start_ts, desc, limit) = (&req.data, req.start_ts, req.desc, req.limit);
        let use_cache = req.opts.use_cache;
        let max_size = req.opts.paging_max_size.max(1);
        let mut pages = Vec::new();
        let mut stats = CopStats::default();
        let region_id = task.region.id();
        let mut backoff = Backoff::until(req.deadline);
        // The lock wait has its own budget, restarted after every page.
        let mut lock_wait: Option<Backoff> = None;
        let router = self.router();
        loop {
            // The leader may have moved (another task's answer), or the region changed.
            match self.regions.current(&task.region) {
                Some(r) if r.region.ver == task.region.region.ver => task.region = r,
                _ => {
                    let last = format!("region changed in the cache: region_id={region_id}");
                    return self.resplit(task, pages, stats, last);
                }
            }
            let key = CacheKey::new(proto::REQ_TYPE_DAG, data, &task.ranges, true);
            // A worker never answers a hit: no lookup, so no `cache_if_match_version` (and a
            // hit from a worker is a protocol error below).
            let entry = match task.target {
                ServedBy::Server if use_cache => self.cache.lookup(&key, region_id, Ts(start_ts)),
                _ => None,
            };
            // Where a server-bound page goes (`tidb_replica_read`); a worker reads from a
            // caught-up replica in its own zone, else from the leader.
            let target = match &task.target {
                ServedBy::Server => replica_read::target(
                    &task.region,
                    req.opts.replica_read,
                    |addr| self.regions.is_down(addr),
                    replica_read::next_turn(),
                ),
                ServedBy::Worker { zone, .. } => {
                    replica_read::in_zone(&task.region, zone.as_ref(), |addr| {
                        self.regions.is_down(addr)
                    })
                }
            };
            let req = Request {
                context: Some(Context {
                    region_id: region_id.get(),
                    region_ver: task.region.region.ver,
                    deadline_ms: backoff.deadline_unix_ms(),
                    replica_read: target.replica_read,
                    ..Context::default()
                }),
                tp: proto::REQ_TYPE_DAG,
                data: data.to_vec(),
                start_ts,
                ranges: task.ranges.clone(),
                is_cache_enabled: use_cache,
                cache_if_match_version: entry.as_ref().map_or(0, |e| e.data_version),
                paging_size: task.paging_size,
            };
            let t0 = Instant::now();
            let server = target.addr;
            let (resp, hop) = match backoff
                .attempt(&server, self.send_page(&task, &server, &req))
                .await
            {
                Ok(answered) => answered,
                Err(e) if leader_unreachable(&task.target, &e) => {
                    stats.requests += 1;
                    router
                        .after_connection_error(&server, &e, &mut backoff)
                        .await?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let wall = t0.elapsed();
            stats.requests += 1;
            let below = resp.exec_details.as_ref().map_or(0, |d| d.cross_zone_bytes);
            let cross_zone_bytes = hop.cross_zone_bytes() + below;
            stats.cross_zone_bytes += cross_zone_bytes;
            if let Some(err) = resp.region_error {
                stats.region_errors += 1;
                let after = router
                    .after_region_error(&task.region, &server, &err, &mut backoff)
                    .await?;
                match after {
                    AfterError::Retry => continue,
                    AfterError::Resplit => {
                        let last = format!(
                            "{} region_id={} {}",
                            RetryReason::from_region_error(&err),
                            err.region_id,
                            err.message
                        );
                        return self.resplit(task, pages, stats, last);
                    }
                }
            }
            if let Some(lock) = resp.locked {
                // Resolving then meeting a lock again must not outlive the request: each
                // resolution has its own budget, the page's deadline bounds them all.
                if backoff.remaining().is_zero() {
                    return Err(Error::RetryDeadline {
                        reason: RetryReason::ServerBusy,
                        attempts: backoff.attempts(),
                        waited_ms: u64::try_from(backoff.elapsed().as_millis()).unwrap_or(u64::MAX),
                        last: format!(
                            "locked by a transaction at {} (key {:?})",
                            lock.lock_version, lock.key
                        ),
                    });
                }
                match self.lock_resolver().resolve(&lock, start_ts).await? {
                    ResolveOutcome::Resolved => stats.locks_resolved += 1,
                    ResolveOutcome::Alive => {
                        let wait = lock_wait.get_or_insert_with(|| {
                            Backoff::new(self.config.lock_wait_timeout.duration())
                        });
                        if !wait.pause().await {
                            return Err(Error::LockWaitTimeout {
                                key: lock.key,
                                lock_ts: lock.lock_version,
                                waited: wait.elapsed(),
                            });
                        }
                    }
                }
                continue;
            }
            if !resp.other_error.is_empty() {
                return Err(Error::Server {
                    region_id,
                    message: resp.other_error,
                });
            }
            let (page_data, range, from_cache) = if resp.is_cache_hit {
                let entry = entry
                    .filter(|e| e.data_version == resp.cache_last_version)
                    .ok_or(Error::CacheHitWithoutEntry { region_id })?;
                self.cache.record_hit(&key);
                stats.cache_hits += 1;
                (entry.data.clone(), entry.range.clone(), true)
            } else if !use_cache {
                (Bytes::from(resp.data), resp.range, false)
            } else {
                self.cache.record_miss();
                let page_data = Bytes::from(resp.data);
                let processed_ns = resp.exec_details.as_ref().map_or(0, |d| d.processed_ns);
                let process_time = if processed_ns > 0 {
                    Duration::from_nanos(processed_ns)
                } else {
                    wall
                };
                let candidate = Candidate {
                    page_index: task.page_index,
                    num_ranges: task.ranges.len(),
                    result_bytes: page_data.len(),
                    process_time,
                    can_be_cached: resp.can_be_cached,
                    cache_last_version: resp.cache_last_version,
                };
                let entry = CacheEntry {
                    region_id,
                    start_ts: Ts(start_ts),
                    data_version: resp.cache_last_version,
                    data: page_data.clone(),
                    range: resp.range.clone(),
                };
                // A rejection only means "not stored".
                let _ = self.cache.offer(key, entry, &candidate);
                (page_data, resp.range, false)
            };
            let rows = decode_rows(&page_data, region_id)?;
            task.rows += rows.len() as u64;
            let details = resp.exec_details.unwrap_or_default();
            let location = details.location().unwrap_or_else(|unknown| {
                tracing::debug!(region_id = region_id.get(), error = %unknown, "page ran at a location this client does not know");
                None
            });
            let page = PageRows {
                region_id,
                served_by: task.target.clone(),
                page_index: task.page_index,
                from_cache,
                resumed: range.is_some(),
                rows,
                server: server.clone(),
                location,
                remote_addr: details.remote_addr,
                reason: details.reason,
                cross_zone_bytes,
                elapsed: wall,
            };
            (on_page.lock())(&page);
            pages.push(page);
            lock_wait = None;
            let done = match range {
                None => true,
                Some(scanned) => {
                    task.ranges = wire::paging::remaining_ranges(&task.ranges, &scanned, desc);
                    task.ranges.is_empty() || limit.is_some_and(|n| task.rows >= n)
                }
            };
            if done {
                return Ok(TaskOutput {
                    order: task.order,
                    pages,
                    stats,
                    end: TaskEnd::Done,
                });
            }
            task.page_index += 1;
            task.paging_size = task.paging_size.saturating_mul(2).min(max_size);
        }
    }
}

/// Whether `e`, from sending a page to `target`, means the region's leader could not be
/// reached: a refused or broken connection to it, or, through a worker, the worker's 502
/// (its origin, the leader, did not answer). An unreachable worker is not the leader's fault
/// and stays fatal.
fn leader_unreachable(target: &ServedBy, e: &Error) -> bool {
    match target {
        ServedBy::Server => e.is_connection(),
        ServedBy::Worker { .. } => matches!(e, Error::BadStatus { status: 502, .. }),
    }
}

/// Whether the DAG's scan runs in descending key order.
fn scan_is_desc(dag: &DagRequest) -> bool {
    dag.executors
        .first()
        .is_some_and(|e| match ExecType::from_i32(e.tp) {
            Some(ExecType::TableScan) => e.tbl_scan.as_ref().is_some_and(|s| s.desc),
            Some(ExecType::IndexScan) => e.idx_scan.as_ref().is_some_and(|s| s.desc),
            _ => false,
        })
}

/// The rows of an encoded `SelectResponse`, or its evaluation error.
pub fn decode_rows(data: &[u8], region_id: RegionId) -> Result<Vec<Vec<Datum>>> {
    let sel =
        SelectResponse::decode(data).map_err(|source| Error::SelectDecode { region_id, source })?;
    if let Some(e) = sel.error {
        return Err(Error::Eval {
            code: e.code,
            message: e.msg,
        });
    }
    let width = sel.column_count as usize;
    let count = usize::try_from(sel.row_count).unwrap_or(usize::MAX);
    if width == 0 {
        return Ok(vec![Vec::new(); count]);
    }
    let datums = decode_datums(&sel.rows_data, count.saturating_mul(width))
        .map_err(|source| Error::Rows { region_id, source })?;
    Ok(datums.chunks(width).map(<[Datum]>::to_vec).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::codec::datum::encode_datum;

    #[test]
    fn rows_decode_by_column_count() {
        let mut rows_data = Vec::new();
        for d in [
            Datum::Int(1),
            Datum::Null,
            Datum::Int(2),
            Datum::Bytes(b"x".to_vec()),
        ] {
            encode_datum(&mut rows_data, &d, false);
        }
        let sel = SelectResponse {
            rows_data,
            row_count: 2,
            column_count: 2,
            ..SelectResponse::default()
        };
        assert_eq!(
            decode_rows(&sel.encode_to_vec(), RegionId(1)).unwrap(),
            vec![
                vec![Datum::Int(1), Datum::Null],
                vec![Datum::Int(2), Datum::Bytes(b"x".to_vec())]
            ]
        );
        let failed = SelectResponse {
            error: Some(proto::EvalError {
                code: 1690,
                msg: "overflow".into(),
            }),
            ..SelectResponse::default()
        };
        assert!(matches!(
            decode_rows(&failed.encode_to_vec(), RegionId(1)),
            Err(Error::Eval { code: 1690, .. })
        ));
    }

    #[test]
    fn regions_by_worker_lists_each_region_once_and_leaves_server_pages_out() {
        let page = |region_id: u64, served_by: ServedBy| PageRows {
            region_id: RegionId(region_id),
            served_by,
            page_index: 0,
            from_cache: false,
            resumed: false,
            rows: Vec::new(),
            server: "http://s".into(),
            location: None,
            remote_addr: String::new(),
            reason: String::new(),
            cross_zone_bytes: 0,
            elapsed: Duration::ZERO,
        };
        let w = |id| ServedBy::Worker {
            id,
            addr: format!("http://w{id}"),
            zone: None,
        };
        let result = CopResult {
            rows: Vec::new(),
            pages: vec![
                page(7, w(1)),
                page(7, w(1)),
                page(3, w(1)),
                page(5, w(0)),
                page(9, ServedBy::Server),
            ],
            merge: FinalMerge::Concat,
            stats: CopStats::default(),
            warnings: Vec::new(),
        };
        let by: Vec<(u64, Vec<u64>)> = result
            .regions_by_worker()
            .into_iter()
            .map(|(w, ids)| (w, ids.into_iter().map(RegionId::get).collect()))
            .collect();
        assert_eq!(by, vec![(0, vec![5]), (1, vec![3, 7])]);
    }

    #[test]
    fn a_client_needs_a_valid_config() {
        let e = Client::new(ClientConfig::default()).unwrap_err();
        assert!(
            matches!(&e, Error::Config(c) if c.field == "servers"),
            "{e}"
        );
        let c = Client::new(ClientConfig::new(["127.0.0.1:9"])).unwrap();
        assert!(matches!(&c.tso, TsoSource::Server(url) if url == "http://127.0.0.1:9"));
        assert!(c.region_cache().is_empty());
        let mut with_pd = ClientConfig::new(["127.0.0.1:9"]);
        with_pd.pd_endpoints = vec!["127.0.0.1:8".into()];
        let c = Client::new(with_pd).unwrap();
        assert!(matches!(&c.tso, TsoSource::Pd(pd) if pd.endpoints() == ["http://127.0.0.1:8"]));
    }
}
