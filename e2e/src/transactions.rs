//! Two-phase commits through the txn API, applied identically to several servers that share
//! one TSO (so that every server holds the same versions at the same timestamps).

use wire::txn::{CommitRequest, Mutation, Op, PrewriteRequest, RollbackRequest};

use crate::server_proc::ServerProc;

pub fn put(key: &[u8], value: &[u8]) -> Mutation {
    Mutation {
        op: Op::Put as i32,
        key: key.to_vec(),
        value: value.to_vec(),
    }
}

pub fn delete(key: &[u8]) -> Mutation {
    Mutation {
        op: Op::Delete as i32,
        key: key.to_vec(),
        value: Vec::new(),
    }
}

pub fn lock(key: &[u8]) -> Mutation {
    Mutation {
        op: Op::Lock as i32,
        key: key.to_vec(),
        value: Vec::new(),
    }
}

/// Prewrites `mutations` (primary: the first) at a fresh start_ts on every server; the
/// start_ts and the largest min_commit_ts they returned.
pub fn prewrite(tso: &ServerProc, servers: &[&ServerProc], mutations: &[Mutation]) -> (u64, u64) {
    assert!(!mutations.is_empty(), "a transaction needs a mutation");
    let start_ts = tso.tso();
    let req = PrewriteRequest {
        mutations: mutations.to_vec(),
        primary: mutations[0].key.clone(),
        start_ts,
        lock_ttl_ms: 20_000,
        txn_size: mutations.len() as u64,
        ..PrewriteRequest::default()
    };
    let mut min_commit_ts = start_ts + 1;
    for s in servers {
        let r = s.prewrite(&req);
        assert!(
            r.error.is_none(),
            "prewrite at {start_ts} on {}: {:?}",
            s.base_url(),
            r.error
        );
        min_commit_ts = min_commit_ts.max(r.min_commit_ts);
    }
    (start_ts, min_commit_ts)
}

/// Prewrites `mutations` (primary: the first) at `start_ts` on `server` with a lock TTL of
/// `ttl_ms`, as a client that then dies (no commit, no rollback) would; the response, checked
/// to carry no error.
pub fn abandoned_prewrite(
    server: &ServerProc,
    mutations: Vec<Mutation>,
    start_ts: u64,
    ttl_ms: u64,
) -> wire::txn::PrewriteResponse {
    assert!(!mutations.is_empty(), "a transaction needs a mutation");
    let r = server.prewrite(&PrewriteRequest {
        primary: mutations[0].key.clone(),
        txn_size: mutations.len() as u64,
        mutations,
        start_ts,
        lock_ttl_ms: ttl_ms,
        ..PrewriteRequest::default()
    });
    assert!(r.error.is_none(), "prewrite at {start_ts}: {r:?}");
    r
}

/// The timestamps of a committed transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    pub start_ts: u64,
    pub commit_ts: u64,
}

/// Prewrites and commits `mutations` on every server; the timestamps.
pub fn commit(tso: &ServerProc, servers: &[&ServerProc], mutations: &[Mutation]) -> Committed {
    let (start_ts, min_commit_ts) = prewrite(tso, servers, mutations);
    let commit_ts = tso.tso();
    assert!(
        commit_ts >= min_commit_ts,
        "the TSO's {commit_ts} is below a prewrite's min_commit_ts {min_commit_ts}"
    );
    let req = CommitRequest {
        keys: mutations.iter().map(|m| m.key.clone()).collect(),
        start_ts,
        commit_ts,
    };
    for s in servers {
        let r = s.commit(&req);
        assert!(
            r.error.is_none(),
            "commit {start_ts}->{commit_ts} on {}: {:?}",
            s.base_url(),
            r.error
        );
    }
    Committed {
        start_ts,
        commit_ts,
    }
}

/// Prewrites locks on `keys` and rolls the transaction back on every server (leaving rollback
/// records at its start_ts); that start_ts.
pub fn roll_back(tso: &ServerProc, servers: &[&ServerProc], keys: &[Vec<u8>]) -> u64 {
    let mutations: Vec<Mutation> = keys.iter().map(|k| lock(k)).collect();
    let (start_ts, _) = prewrite(tso, servers, &mutations);
    let req = RollbackRequest {
        keys: keys.to_vec(),
        start_ts,
    };
    for s in servers {
        let r = s.rollback(&req);
        assert!(
            r.error.is_none(),
            "rollback {start_ts} on {}: {:?}",
            s.base_url(),
            r.error
        );
    }
    start_ts
}
