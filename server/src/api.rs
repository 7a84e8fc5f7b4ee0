//! The server's HTTP API: protobuf bodies in and out (messages in `wire` and
//! `wire::coprocessor`), paths in `wire::paths`. Command failures travel inside the response
//! (`KeyError`, region errors); a body that does not decode is a 400; a failure of the server
//! itself (a panicked task) is a 500.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use node::http::{HttpError, decode_proto, proto_response};
use types::ZoneRelation;
use wire::paths;
use wire::region::{
    RawLoadRequest, RawLoadResponse, Region, RegionsResponse, SplitRequest, SplitResponse,
    TransferLeaderRequest, TsoRequest, TsoResponse,
};
use wire::txn::{self as txn_wire, ErrorKind, KeyError};

use crate::metrics::{self, SplitTrigger, TxnCommand, TxnOutcome};
use crate::node::{Node, NodeError};
use crate::region_error;
use crate::txn::{Mutation, MutationOp, PrewriteRequest, TxnError, TxnErrorKind, TxnStatus};

/// Shared by every handler.
pub struct AppState {
    pub node: Arc<Node>,
    /// The address the server listens on.
    pub addr: String,
    pub config_text: String,
}

type AppResult = Result<Response, HttpError>;

/// Every route, each caller checked against its path's tier ([`node::access`]), metered as
/// this server ([`node::traffic::metered`]).
pub fn router(state: Arc<AppState>) -> Router {
    let meter = state.node.config.meter();
    let routes = Router::new()
        .route(paths::CONFIG, get(config))
        .route(paths::STATUS, get(status))
        .route(paths::METRICS, get(node::http::metrics_handler))
        .route(paths::TSO, post(tso))
        .route(paths::RAFT_BATCH, post(raft_batch))
        .route(paths::REGIONS, get(regions))
        .route(paths::SPLIT, post(split))
        .route(paths::RAW_LOAD, post(raw_load))
        .route(paths::ADMIN_FLUSH, post(admin_flush))
        .route(paths::ADMIN_COMPACT, post(admin_compact))
        .route(paths::ADMIN_TRANSFER_LEADER, post(transfer_leader))
        .route(paths::COPROCESSOR, post(coprocessor))
        .route(paths::DELEGATE, post(delegate))
        .route(paths::PREWRITE, post(prewrite))
        .route(paths::COMMIT, post(commit))
        .route(paths::ROLLBACK, post(rollback))
        .route(paths::CHECK_TXN_STATUS, post(check_txn_status))
        .route(paths::CHECK_SECONDARY_LOCKS, post(check_secondary_locks))
        .route(paths::RESOLVE_LOCK, post(resolve_lock))
        .route(paths::SCAN_LOCK, post(scan_lock))
        .route(paths::GET, post(kv_get))
        .route(paths::SCAN, post(kv_scan))
        // Raw loads and transactions carry rows: allow large bodies, but not unbounded ones.
        .layer(DefaultBodyLimit::max(256 << 20))
        .with_state(state.clone());
    let token = state.node.admin_token.clone();
    let routes = node::access::guarded(routes, wire::traffic::Role::Server, token);
    node::traffic::metered(routes, meter)
}

/// Runs blocking work (engine I/O, latches, fsync) off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, HttpError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| HttpError::internal(format!("request task failed: {e}")))
}

async fn config(State(st): State<Arc<AppState>>) -> String {
    st.config_text.clone()
}

async fn status(State(st): State<Arc<AppState>>) -> Response {
    let node = &st.node;
    let s = &node.config.server;
    let body = serde_json::json!({
        "role": "server",
        "addr": st.addr,
        "labels": s.labels,
        "tso": s.tso,
        "uptime_secs": node.started.elapsed().as_secs(),
        "regions": node.engine().shard_ids().len(),
        "remote_coprocessor_addr": node.config.kvengine.remote_coprocessor_addr,
        "remote_coprocessor_workers": node
            .coprocessor
            .dispatcher()
            .map(|d| d.workers().status(std::time::Instant::now())),
        "cpu": node.cpu.as_ref().map(|m| serde_json::json!({
            "state": format!("{:?}", m.state(std::time::Instant::now())),
            "last_sample": m.last_sample(),
        })),
        "patterns_remembered": node.coprocessor.patterns_remembered(),
    });
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn tso(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: TsoRequest = decode_proto(&body)?;
    let Some(tso) = st.node.tso.clone() else {
        return Err(HttpError::bad_request(
            "this server does not run the TSO (server.tso = false); ask the one that does",
        ));
    };
    let count = req.count.max(1);
    let resp = match blocking(move || tso.get_ts_batch(count)).await? {
        Ok(first_ts) => TsoResponse {
            first_ts,
            count,
            ..TsoResponse::default()
        },
        Err(e) => TsoResponse {
            error: error_chain(&e),
            ..TsoResponse::default()
        },
    };
    Ok(proto_response(&resp))
}

/// `POST /raft/batch`: Raft messages from another server, handed to the store loop. Decoded
/// with prost (`wire::raft`); the store loop converts each to raft-rs's types and refuses what
/// no peer may send.
///
/// On the server's multi-thread runtime the handler runs the store round itself when none is
/// running (`Router::deliver_batch`: a follower appends and acknowledges, a leader commits and
/// answers its writers, without waking the store thread), inside `block_in_place` so the
/// worker's other tasks move to another thread meanwhile. The answer then leaves after the
/// round, so the sender's next request (one in flight per destination) carries everything
/// queued meanwhile. A current-thread runtime (in-process tests) cannot give its only worker
/// away: there the messages go to the mailbox.
async fn raft_batch(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let batch: wire::raft::RaftBatch = decode_proto(&body)?;
    let router = st.node.storage.router();
    match tokio::runtime::Handle::current().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| router.deliver_batch(batch.messages))
        }
        _ => {
            for m in batch.messages {
                router.deliver(m);
            }
        }
    }
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}

/// One region as `/regions` and split answers show it: range and epoch from the engine, the
/// replicas from the configured `[raft] peers` (membership is static until the placement
/// service exists, issue 17; a standalone server sends none, and the client takes the server
/// it asked as the one replica), the leader and its term from the Raft store.
pub(crate) fn region_of(node: &Node, id: u64) -> Result<Region, NodeError> {
    let info = node.engine().shard_info(id)?;
    // Alone, the one answering server is the only replica (callers know it already).
    let peers = if node.config.raft.peers.is_empty() {
        Vec::new()
    } else {
        node.members.peers_of(node.storage.router(), id)
    };
    let status = node.storage.router().status(id);
    let conf_ver = status.as_ref().map_or(0, |s| s.conf_index);
    Ok(Region {
        id,
        ver: info.ver,
        start: info.start.to_vec(),
        end: info.end.to_vec(),
        data_version: info.snap_version(),
        approximate_size: node.region_size(id)?,
        peers,
        leader_store_id: status.as_ref().and_then(|s| s.leader).unwrap_or(0),
        leader_term: status.map_or(0, |s| s.term),
        conf_ver,
    })
}

async fn regions(State(st): State<Arc<AppState>>) -> AppResult {
    let node = st.node.clone();
    let mut regions = blocking(move || {
        node.engine()
            .shard_ids()
            .into_iter()
            .filter_map(|id| region_of(&node, id).ok())
            .collect::<Vec<_>>()
    })
    .await?;
    regions.sort_by(|a, b| a.start.cmp(&b.start));
    let labels = wire::region::labels(&st.node.config.server.labels);
    Ok(proto_response(&RegionsResponse {
        regions,
        labels,
        addr: st.addr.clone(),
    }))
}

async fn split(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: SplitRequest = decode_proto(&body)?;
    let node = st.node.clone();
    let resp = blocking(move || {
        if let Err(e) = node.engine().shard_info(req.region_id) {
            {
                return SplitResponse {
                    region_error: Some(wire::coprocessor::RegionError {
                        message: error_chain(&e),
                        kind: wire::coprocessor::RegionErrorKind::RegionNotFound as i32,
                        region_id: req.region_id,
                        ..Default::default()
                    }),
                    ..SplitResponse::default()
                };
            }
        }
        match node.split(req.region_id, &req.split_key, SplitTrigger::Request) {
            Ok((l, r)) => SplitResponse {
                left: region_of(&node, l).ok(),
                right: region_of(&node, r).ok(),
                ..SplitResponse::default()
            },
            Err(NodeError::NotLeader(e)) => SplitResponse {
                region_error: region_error::from_raft(&e, &node.config.raft),
                error: error_chain(&e),
                ..SplitResponse::default()
            },
            Err(e) => SplitResponse {
                error: error_chain(&e),
                ..SplitResponse::default()
            },
        }
    })
    .await?;
    Ok(proto_response(&resp))
}

async fn raw_load(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: RawLoadRequest = decode_proto(&body)?;
    let node = st.node.clone();
    let pairs = req.pairs.into_iter().map(|p| (p.key, p.value)).collect();
    let resp = match blocking(move || crate::raw_load::raw_load(&node, pairs)).await? {
        Ok(commit_ts) => RawLoadResponse {
            commit_ts,
            error: None,
        },
        Err(e) => RawLoadResponse {
            commit_ts: 0,
            error: Some(key_error(&e, &st.node.config.raft)),
        },
    };
    count(TxnCommand::RawLoad, resp.error.is_none());
    Ok(proto_response(&resp))
}

/// The regions this server leads: only a leader flushes or compacts (followers apply its
/// ChangeSets from the log), so flushing every server flushes every region once.
fn led_regions(node: &Node) -> Vec<u64> {
    node.storage
        .router()
        .regions()
        .into_iter()
        .filter(|(_, s)| s.is_leader)
        .map(|(id, _)| id)
        .collect()
}

async fn admin_flush(State(st): State<Arc<AppState>>) -> AppResult {
    let node = st.node.clone();
    blocking(move || -> Result<(), kvengine::Error> {
        for id in led_regions(&node) {
            node.engine().flush_shard(id)?;
        }
        Ok(())
    })
    .await?
    .map_err(|e| HttpError::internal(format!("flush failed: {}", error_chain(&e))))?;
    Ok("flushed\n".into_response())
}

async fn admin_compact(State(st): State<Arc<AppState>>) -> AppResult {
    let node = st.node.clone();
    let n = blocking(move || -> Result<usize, kvengine::Error> {
        let mut n = 0;
        for id in led_regions(&node) {
            node.engine().flush_shard(id)?;
            n += node.engine().compact_shard(id, true)?;
        }
        Ok(n)
    })
    .await?
    .map_err(|e| HttpError::internal(format!("compaction failed: {}", error_chain(&e))))?;
    Ok(format!("compacted {n}\n").into_response())
}

/// `POST /admin/transfer_leader`: starts handing the leadership of a region this server leads
/// to another of its replicas (raft-rs's leader transfer: the target campaigns once it has
/// caught up). 204 when started, 409 when this server does not lead the region or the target
/// is not a replica.
async fn transfer_leader(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: TransferLeaderRequest = decode_proto(&body)?;
    let node = &st.node;
    let router = node.storage.router();
    let Some(status) = router.status(req.region_id) else {
        return Err(HttpError::conflict(format!(
            "region {} has no replica here (store {})",
            req.region_id,
            router.store_id()
        )));
    };
    if !status.is_leader {
        return Err(HttpError::conflict(format!(
            "region {} is not led by this server (store {}); leader={:?}",
            req.region_id,
            router.store_id(),
            status.leader
        )));
    }
    if !node
        .members
        .is_voter(router, req.region_id, req.to_store_id)
    {
        let voters = router.membership(req.region_id).map(|m| m.voters);
        return Err(HttpError::conflict(format!(
            "expected a voter of region {} as the target (one of {voters:?}), found store {}",
            req.region_id, req.to_store_id
        )));
    }
    router.transfer_leader(req.region_id, req.to_store_id);
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}

async fn coprocessor(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: wire::coprocessor::Request = decode_proto(&body)?;
    let resp = st.node.coprocessor.handle(req).await;
    Ok(proto_response(&resp))
}

/// `POST /delegate` (`crate::delegate`): the encoded answer's bytes are counted by the zone
/// relation of the asking worker (from the request) and this server.
async fn delegate(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: wire::delegate::DelegateRequest = decode_proto(&body)?;
    let node = st.node.clone();
    let worker_zone = req.worker_zone();
    let server_zone = st.node.config.zone();
    let max_format = st.node.config.memtable_data_format();
    let resp = {
        let server_zone = server_zone.clone();
        blocking(move || {
            crate::delegate::answer(&node.coprocessor, &req, server_zone.as_ref(), max_format)
        })
        .await?
    };
    metrics::DELEGATE_REQUESTS
        .with_label_values(&[resp.result().as_str()])
        .inc();
    let relation = ZoneRelation::of(server_zone.as_ref(), worker_zone.as_ref());
    metrics::DELEGATE_BYTES
        .with_label_values(&[relation.as_str()])
        .inc_by(prost::Message::encoded_len(&resp) as u64);
    Ok(proto_response(&resp))
}

// ---------------------------------------------------------------------------------------------
// Transaction commands.

fn count(command: TxnCommand, ok: bool) {
    let outcome = if ok {
        TxnOutcome::Ok
    } else {
        TxnOutcome::Error
    };
    metrics::TXN_REQUESTS
        .with_label_values(&[command.as_str(), outcome.as_str()])
        .inc();
}

/// The wire form of a transaction error. Errors about where the command was sent (not the
/// leader, a stale epoch, a leader change mid-command, a region busy or gone, a key outside
/// this server's regions) also carry a `region_error` ([`crate::region_error`]), so the
/// client re-routes instead of failing the statement; `kind` stays `Busy`/`Invalid` for
/// clients that do not read it.
pub fn key_error(e: &TxnError, raft: &raftstore::RaftConfig) -> KeyError {
    let kind = match e.kind() {
        TxnErrorKind::Locked => ErrorKind::Locked,
        TxnErrorKind::Conflict => ErrorKind::Conflict,
        TxnErrorKind::TxnFinished => ErrorKind::TxnFinished,
        TxnErrorKind::Invalid => ErrorKind::Invalid,
        TxnErrorKind::Corruption => ErrorKind::Corruption,
        TxnErrorKind::Io => ErrorKind::Io,
        TxnErrorKind::Busy => ErrorKind::Busy,
        TxnErrorKind::CommitTsTooLarge => ErrorKind::CommitTsTooLarge,
    };
    KeyError {
        kind: kind as i32,
        locked: e.lock_info().map(cop::handler::lock_info),
        message: error_chain(e),
        conflict_commit_ts: match e {
            TxnError::WriteConflict {
                conflict_commit_ts, ..
            } => *conflict_commit_ts,
            _ => 0,
        },
        region_error: match e {
            TxnError::Raft(r) => region_error::from_raft(r, raft),
            TxnError::Engine(en) => region_error::from_engine(en),
            TxnError::KeyOutsideShards { .. } => Some(wire::coprocessor::RegionError {
                message: error_chain(e),
                kind: wire::coprocessor::RegionErrorKind::KeyNotInRegion as i32,
                ..Default::default()
            }),
            _ => None,
        },
        committed_ts: match e {
            TxnError::TxnAlreadyCommitted { commit_ts, .. } => *commit_ts,
            _ => 0,
        },
    }
}

fn mutation(m: txn_wire::Mutation) -> Result<Mutation, HttpError> {
    let op = match txn_wire::Op::try_from(m.op) {
        Ok(txn_wire::Op::Put) => MutationOp::Put,
        Ok(txn_wire::Op::Delete) => MutationOp::Delete,
        Ok(txn_wire::Op::Lock) => MutationOp::Lock,
        Err(_) => {
            return Err(HttpError::bad_request(format!(
                "expected a mutation op 0 (put), 1 (delete) or 2 (lock), found {}",
                m.op
            )));
        }
    };
    Ok(Mutation {
        op,
        key: m.key,
        value: m.value,
    })
}

async fn prewrite(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: txn_wire::PrewriteRequest = decode_proto(&body)?;
    let mutations = req
        .mutations
        .into_iter()
        .map(mutation)
        .collect::<Result<Vec<_>, _>>()?;
    let preq = PrewriteRequest {
        mutations,
        primary: req.primary,
        start_ts: req.start_ts,
        lock_ttl_ms: req.lock_ttl_ms,
        txn_size: req.txn_size,
        use_async_commit: req.use_async_commit,
        secondaries: req.secondaries,
        try_one_pc: req.try_one_pc,
        max_commit_ts: req.max_commit_ts,
    };
    let use_async_commit = preq.use_async_commit;
    let storage = st.node.storage.clone();
    let resp = match blocking(move || storage.prewrite(&preq)).await? {
        Ok(r) => txn_wire::PrewriteResponse {
            min_commit_ts: r.min_commit_ts,
            one_pc_commit_ts: r.one_pc_commit_ts.unwrap_or(0),
            error: None,
        },
        Err(e) => txn_wire::PrewriteResponse {
            error: Some(key_error(&e, &st.node.config.raft)),
            ..Default::default()
        },
    };
    count(TxnCommand::Prewrite, resp.error.is_none());
    if use_async_commit && resp.error.is_none() {
        metrics::ASYNC_COMMIT_PREWRITES.inc();
    }
    Ok(proto_response(&resp))
}

async fn commit(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: txn_wire::CommitRequest = decode_proto(&body)?;
    let storage = st.node.storage.clone();
    let r = blocking(move || storage.commit(&req.keys, req.start_ts, req.commit_ts)).await?;
    command_response(&st, TxnCommand::Commit, r.err())
}

async fn rollback(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: txn_wire::RollbackRequest = decode_proto(&body)?;
    let storage = st.node.storage.clone();
    let r = blocking(move || storage.rollback(&req.keys, req.start_ts)).await?;
    command_response(&st, TxnCommand::Rollback, r.err())
}

fn command_response(st: &AppState, command: TxnCommand, err: Option<TxnError>) -> AppResult {
    count(command, err.is_none());
    Ok(proto_response(&txn_wire::CommandResponse {
        error: err.as_ref().map(|e| key_error(e, &st.node.config.raft)),
    }))
}

async fn check_txn_status(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: txn_wire::CheckTxnStatusRequest = decode_proto(&body)?;
    let storage = st.node.storage.clone();
    let primary = req.primary.clone();
    let r = blocking(move || {
        storage.check_txn_status(
            &req.primary,
            req.lock_ts,
            req.caller_start_ts,
            req.current_ts,
            req.rollback_if_not_exist,
        )
    })
    .await?;
    let mut resp = txn_wire::CheckTxnStatusResponse::default();
    match r {
        Ok(TxnStatus::Committed { commit_ts }) => {
            resp.state = txn_wire::TxnState::Committed as i32;
            resp.commit_ts = commit_ts;
        }
        Ok(TxnStatus::RolledBack) => resp.state = txn_wire::TxnState::RolledBack as i32,
        Ok(TxnStatus::Locked { lock, ttl_expired }) => {
            resp.state = txn_wire::TxnState::Locked as i32;
            resp.lock = Some(cop::handler::lock_info(&lock.info(&primary)));
            resp.ttl_expired = ttl_expired;
            resp.secondaries = lock.secondaries.clone().unwrap_or_default();
        }
        Ok(TxnStatus::LockNotExistRolledBack) => {
            resp.state = txn_wire::TxnState::LockNotExistRolledBack as i32
        }
        Ok(TxnStatus::LockNotExist) => resp.state = txn_wire::TxnState::LockNotExist as i32,
        Err(e) => resp.error = Some(key_error(&e, &st.node.config.raft)),
    }
    count(TxnCommand::CheckTxnStatus, resp.error.is_none());
    Ok(proto_response(&resp))
}

async fn check_secondary_locks(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: txn_wire::CheckSecondaryLocksRequest = decode_proto(&body)?;
    let storage = st.node.storage.clone();
    let r = blocking(move || storage.check_secondary_locks(&req.keys, req.start_ts)).await?;
    let resp = match r {
        Ok(s) => txn_wire::CheckSecondaryLocksResponse {
            all_locked: s.all_locked,
            commit_ts: s.commit_ts.unwrap_or(0),
            min_commit_ts: s.min_commit_ts,
            error: None,
        },
        Err(e) => txn_wire::CheckSecondaryLocksResponse {
            error: Some(key_error(&e, &st.node.config.raft)),
            ..Default::default()
        },
    };
    count(TxnCommand::CheckSecondaryLocks, resp.error.is_none());
    Ok(proto_response(&resp))
}

async fn resolve_lock(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: txn_wire::ResolveLockRequest = decode_proto(&body)?;
    let storage = st.node.storage.clone();
    let r = blocking(move || {
        if req.keys.is_empty() {
            storage.resolve_lock_in_range(&req.start, &req.end, req.start_ts, req.commit_ts)
        } else {
            storage.resolve_lock(req.start_ts, req.commit_ts, &req.keys)
        }
    })
    .await?;
    let resp = match r {
        Ok(n) => txn_wire::ResolveLockResponse {
            resolved: n as u64,
            error: None,
        },
        Err(e) => txn_wire::ResolveLockResponse {
            resolved: 0,
            error: Some(key_error(&e, &st.node.config.raft)),
        },
    };
    count(TxnCommand::ResolveLock, resp.error.is_none());
    Ok(proto_response(&resp))
}

async fn scan_lock(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: txn_wire::ScanLockRequest = decode_proto(&body)?;
    let storage = st.node.storage.clone();
    let r =
        blocking(move || storage.scan_locks(&req.start, &req.end, req.max_ts, req.limit as usize))
            .await?;
    let resp = match r {
        Ok(locks) => txn_wire::ScanLockResponse {
            locks: locks.iter().map(cop::handler::lock_info).collect(),
            error: None,
        },
        Err(e) => txn_wire::ScanLockResponse {
            locks: Vec::new(),
            error: Some(key_error(&e, &st.node.config.raft)),
        },
    };
    count(TxnCommand::ScanLock, resp.error.is_none());
    Ok(proto_response(&resp))
}

async fn kv_get(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: txn_wire::GetRequest = decode_proto(&body)?;
    let storage = st.node.storage.clone();
    let r = blocking(move || storage.get(&req.key, req.start_ts, &req.bypass_locks)).await?;
    let resp = match r {
        Ok(Some(e)) => txn_wire::GetResponse {
            found: true,
            value: e.value,
            commit_ts: e.commit_ts,
            error: None,
        },
        Ok(None) => txn_wire::GetResponse::default(),
        Err(e) => txn_wire::GetResponse {
            error: Some(key_error(&e, &st.node.config.raft)),
            ..Default::default()
        },
    };
    count(TxnCommand::Get, resp.error.is_none());
    Ok(proto_response(&resp))
}

async fn kv_scan(State(st): State<Arc<AppState>>, body: Bytes) -> AppResult {
    let req: txn_wire::ScanRequest = decode_proto(&body)?;
    let storage = st.node.storage.clone();
    let r = blocking(move || {
        storage.scan(
            &req.start,
            &req.end,
            req.limit as usize,
            req.start_ts,
            req.reverse,
        )
    })
    .await?;
    let resp = match r {
        Ok(entries) => txn_wire::ScanResponse {
            entries: entries
                .into_iter()
                .map(|e| txn_wire::ScanEntry {
                    key: e.key,
                    value: e.value,
                    commit_ts: e.commit_ts,
                })
                .collect(),
            error: None,
        },
        Err(e) => txn_wire::ScanResponse {
            entries: Vec::new(),
            error: Some(key_error(&e, &st.node.config.raft)),
        },
    };
    count(TxnCommand::Scan, resp.error.is_none());
    Ok(proto_response(&resp))
}

pub use node::error_chain;

/// How often the size checker runs is configured; this is its loop.
pub async fn split_checker(node: Arc<Node>, every: Duration) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
    tick.tick().await;
    loop {
        tick.tick().await;
        let n = node.clone();
        match tokio::task::spawn_blocking(move || n.check_splits()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!("size split check failed: {}", error_chain(&e)),
            Err(e) => tracing::warn!("size split check panicked: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::coprocessor::RegionErrorKind;

    #[test]
    fn key_error_carries_the_region_error_and_committed_ts() {
        let raft = raftstore::RaftConfig {
            peers: vec![raftstore::PeerConfig {
                id: 2,
                addr: "http://b:1".into(),
                zone: None,
            }],
            ..raftstore::RaftConfig::default()
        };
        let not_leader = TxnError::Raft(raftstore::RaftStoreError::NotLeader {
            region_id: 9,
            store_id: 1,
            leader: Some(2),
        });
        let k = key_error(&not_leader, &raft);
        assert_eq!(k.kind, ErrorKind::Busy as i32);
        let re = k.region_error.expect("a region error");
        assert_eq!(re.kind(), Some(RegionErrorKind::NotLeader));
        assert_eq!((re.region_id, re.leader_addr.as_str()), (9, "http://b:1"));

        let outside = key_error(&TxnError::KeyOutsideShards { key: b"k".to_vec() }, &raft);
        assert_eq!(
            outside.region_error.and_then(|r| r.kind()),
            Some(RegionErrorKind::KeyNotInRegion)
        );

        let committed = TxnError::TxnAlreadyCommitted {
            key: b"k".to_vec(),
            start_ts: 5,
            commit_ts: 8,
        };
        let k = key_error(&committed, &raft);
        assert_eq!((k.kind, k.committed_ts), (ErrorKind::TxnFinished as i32, 8));
        assert!(k.region_error.is_none());

        let conflict = TxnError::WriteConflict {
            key: b"k".to_vec(),
            start_ts: 5,
            conflict_start_ts: 6,
            conflict_commit_ts: 7,
        };
        let k = key_error(&conflict, &raft);
        assert_eq!((k.committed_ts, k.region_error), (0, None));
    }
}
