//! The client's routing to region leaders, against scripted fake servers (no Raft): each fake
//! answers what a replica would (`NotLeader` with or without a hint, an epoch change with the
//! current regions, a broken or refused connection), and every test asserts what each fake
//! received, so a retry sent to the wrong place fails.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use client::sql::txn_write::{self, CommitMode, CommitOptions, RowWrite};
use client::{ClientConfig, NodeSelectionPolicy};
use e2e::entry_client::{EntryClient, handle_v_dag};
use e2e::fake_server::{Answer, FakeServer, refused_url};
use e2e::sample_table::SampleTable;
use prost::Message;
use types::ReadableDuration;
use wire::codec::datum::encode_datum;
use wire::coprocessor::{self as proto, LockInfo, RegionError, RegionErrorKind, SelectResponse};
use wire::datum::Datum;
use wire::delegate::REGION_SERVER_HEADER;
use wire::paths;
use wire::region::{Peer, RawLoadResponse, Region, RegionsResponse, TsoResponse};
use wire::txn::{
    CheckSecondaryLocksRequest, CheckSecondaryLocksResponse, CheckTxnStatusRequest,
    CheckTxnStatusResponse, CommandResponse, CommitRequest, ErrorKind, GetResponse, KeyError,
    PrewriteRequest, PrewriteResponse, ResolveLockRequest, ResolveLockResponse, TxnState,
};

const T: SampleTable = SampleTable { id: 31 };

/// Region `id` over `[start, end)` at `ver`, on `peers` (store id, base URL), led by
/// `leader` (0 = unknown).
fn region(id: u64, range: (&[u8], &[u8]), ver: u64, peers: &[(u64, &str)], leader: u64) -> Region {
    Region {
        id,
        ver,
        start: range.0.to_vec(),
        end: range.1.to_vec(),
        peers: peers
            .iter()
            .map(|(store_id, addr)| Peer {
                store_id: *store_id,
                addr: addr.to_string(),
                ..Peer::default()
            })
            .collect(),
        leader_store_id: leader,
        leader_term: 1,
        ..Region::default()
    }
}

fn regions(list: Vec<Region>) -> Answer {
    Answer::ok(&RegionsResponse {
        regions: list,
        ..RegionsResponse::default()
    })
}

/// A coprocessor page of `[handle, v]` rows, the region's last.
fn page(rows: &[(i64, i64)]) -> Answer {
    let mut rows_data = Vec::new();
    for (h, v) in rows {
        encode_datum(&mut rows_data, &Datum::Int(*h), false);
        encode_datum(&mut rows_data, &Datum::Int(*v), false);
    }
    let sel = SelectResponse {
        rows_data,
        row_count: rows.len() as u64,
        column_count: 2,
        ..SelectResponse::default()
    };
    Answer::ok(&proto::Response {
        data: sel.encode_to_vec(),
        ..proto::Response::default()
    })
}

fn not_leader(region_id: u64, hint: Option<(u64, &str)>) -> RegionError {
    let (leader_store_id, leader_addr) = hint.map_or((0, String::new()), |(s, a)| (s, a.into()));
    RegionError {
        kind: RegionErrorKind::NotLeader as i32,
        region_id,
        message: "not leader".into(),
        leader_store_id,
        leader_addr,
        ..RegionError::default()
    }
}

fn cop_error(e: RegionError) -> Answer {
    Answer::ok(&proto::Response {
        region_error: Some(e),
        ..proto::Response::default()
    })
}

/// A txn command's `KeyError` carrying a region error (kind `Busy`, as servers send it).
fn routing_error(e: RegionError) -> KeyError {
    KeyError {
        kind: ErrorKind::Busy as i32,
        message: e.message.clone(),
        region_error: Some(e),
        ..KeyError::default()
    }
}

fn client_of(seeds: &[&str], tweak: impl FnOnce(&mut ClientConfig)) -> EntryClient {
    let mut cfg = ClientConfig::new(seeds.iter().map(|s| s.to_string()));
    tweak(&mut cfg);
    EntryClient::with_config(cfg)
}

fn region_ids(reqs: &[e2e::fake_server::Received]) -> Vec<u64> {
    reqs.iter()
        .map(|r| {
            r.decode::<proto::Request>()
                .context
                .map_or(0, |c| c.region_id)
        })
        .collect()
}

#[test]
fn paging_follows_a_not_leader_hint_to_the_named_replica() {
    let (s1, s2, s3) = (
        FakeServer::start(),
        FakeServer::start(),
        FakeServer::start(),
    );
    let (u1, u2, u3) = (s1.base_url(), s2.base_url(), s3.base_url());
    let peers = [(1, u1.as_str()), (2, u2.as_str()), (3, u3.as_str())];
    s1.script(
        paths::REGIONS,
        [regions(vec![region(7, (b"", b""), 1, &peers, 1)])],
    );
    s1.script(
        paths::COPROCESSOR,
        [cop_error(not_leader(7, Some((3, u3.as_str()))))],
    );
    s3.script(paths::COPROCESSOR, [page(&[(1, 10), (2, 20)])]);
    let c = client_of(&[&u1], |_| {});
    let r = c.coprocessor(&handle_v_dag(T, false), vec![T.range()], 100);
    assert_eq!(
        r.rows,
        vec![
            vec![Datum::Int(1), Datum::Int(10)],
            vec![Datum::Int(2), Datum::Int(20)]
        ]
    );
    assert_eq!(region_ids(&s1.received_at(paths::COPROCESSOR)), vec![7]);
    assert!(s2.received().is_empty(), "the hint named s3, not s2");
    assert_eq!(region_ids(&s3.received_at(paths::COPROCESSOR)), vec![7]);
    assert_eq!(r.pages.len(), 1);
    assert_eq!(
        r.pages[0].server, u3,
        "the page names the server that answered"
    );
    assert_eq!(r.stats.region_errors, 1);
    assert_eq!(r.stats.requests, 2);
}

#[test]
fn paging_moves_on_after_connection_refused() {
    let dead = refused_url();
    let s2 = FakeServer::start();
    let u2 = s2.base_url();
    let peers = [(1, dead.as_str()), (2, u2.as_str())];
    // s2 still names the dead server as the leader (no election noticed yet).
    s2.script(
        paths::REGIONS,
        [regions(vec![region(7, (b"", b""), 1, &peers, 1)])],
    );
    s2.script(paths::COPROCESSOR, [page(&[(5, 50)])]);
    // The dead seed does not answer its region list either: loading must not fail for it.
    let c = client_of(&[&dead, &u2], |_| {});
    let r = c.coprocessor(&handle_v_dag(T, false), vec![T.range()], 100);
    assert_eq!(r.rows, vec![vec![Datum::Int(5), Datum::Int(50)]]);
    assert_eq!(region_ids(&s2.received_at(paths::COPROCESSOR)), vec![7]);
    assert_eq!(r.pages[0].server, u2);
    assert_eq!(r.stats.requests, 2, "one refused, one answered");
    let cached = c.client.region_cache().lookup(b"k").unwrap();
    assert_eq!(cached.server(), u2, "the next request goes to s2 directly");
}

#[test]
fn delegate_header_names_the_new_leader_after_a_hint() {
    let (s1, s2, worker) = (
        FakeServer::start(),
        FakeServer::start(),
        FakeServer::start(),
    );
    let (u1, u2) = (s1.base_url(), s2.base_url());
    let peers = [(1, u1.as_str()), (2, u2.as_str())];
    s1.script(
        paths::REGIONS,
        [regions(vec![region(7, (b"", b""), 1, &peers, 1)])],
    );
    worker.script(
        paths::STATUS,
        [Answer::Reply {
            status: 200,
            body: b"{}".to_vec(),
        }],
    );
    // The worker passes its origin's answer through: s1 is no longer the leader.
    worker.script(
        paths::DELEGATE_COPROCESSOR,
        [
            cop_error(not_leader(7, Some((2, u2.as_str())))),
            page(&[(1, 1)]),
        ],
    );
    let c = client_of(&[&u1], |cfg| cfg.workers = vec![worker.base_url()]);
    let r = c
        .block_on(c.client.delegate_coprocessor(
            &handle_v_dag(T, false),
            vec![T.range()],
            100,
            NodeSelectionPolicy::AllNodes,
        ))
        .unwrap();
    assert_eq!(r.rows, vec![vec![Datum::Int(1), Datum::Int(1)]]);
    let origins: Vec<String> = worker
        .received_at(paths::DELEGATE_COPROCESSOR)
        .iter()
        .map(|r| {
            r.headers
                .get(REGION_SERVER_HEADER)
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(origins, vec![u1.clone(), u2.clone()]);
    assert!(s1.received_at(paths::COPROCESSOR).is_empty());
    assert!(s2.received().is_empty(), "pages go through the worker");
}

#[test]
fn txn_write_regroups_after_epoch_not_match() {
    let (s1, s2) = (FakeServer::start(), FakeServer::start());
    let (u1, u2) = (s1.base_url(), s2.base_url());
    let peers = [(1, u1.as_str()), (2, u2.as_str())];
    s1.script(
        paths::REGIONS,
        [regions(vec![region(1, (b"", b""), 1, &peers, 1)])],
    );
    // The region split at "m" before the prewrite arrived; the right half is led by s2.
    let current = vec![
        region(1, (b"", b"m"), 2, &peers, 1),
        region(2, (b"m", b""), 2, &peers, 2),
    ];
    let epoch = RegionError {
        kind: RegionErrorKind::EpochNotMatch as i32,
        region_id: 1,
        message: "epoch not match".into(),
        current_ver: 2,
        current_regions: current,
        ..RegionError::default()
    };
    s1.script(
        paths::PREWRITE,
        [
            Answer::ok(&PrewriteResponse {
                error: Some(KeyError {
                    kind: ErrorKind::Invalid as i32,
                    ..routing_error(epoch)
                }),
                ..PrewriteResponse::default()
            }),
            Answer::ok(&PrewriteResponse::default()),
        ],
    );
    s2.script(paths::PREWRITE, [Answer::ok(&PrewriteResponse::default())]);
    s1.script(
        paths::TSO,
        [Answer::ok(&TsoResponse {
            first_ts: 200,
            ..TsoResponse::default()
        })],
    );
    for s in [&s1, &s2] {
        s.script(paths::COMMIT, [Answer::ok(&CommandResponse::default())]);
    }
    let c = client_of(&[&u1], |_| {});
    let writes = vec![
        RowWrite::Put {
            key: b"a".to_vec(),
            value: b"1".to_vec(),
        },
        RowWrite::Put {
            key: b"z".to_vec(),
            value: b"2".to_vec(),
        },
    ];
    let out = c
        .block_on(txn_write::write(
            &c.client,
            &writes,
            100,
            "insert",
            CommitOptions::default(),
        ))
        .unwrap();
    assert_eq!(
        (out.rows, out.mode, out.commit_ts),
        (2, CommitMode::TwoPc, Some(200))
    );
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let prewrites = |s: &FakeServer| -> Vec<(Vec<Vec<u8>>, bool)> {
        s.received_at(paths::PREWRITE)
            .iter()
            .map(|r| {
                let p: PrewriteRequest = r.decode();
                assert_eq!(p.primary, b"a");
                (
                    p.mutations.into_iter().map(|m| m.key).collect(),
                    p.try_one_pc,
                )
            })
            .collect()
    };
    assert_eq!(
        prewrites(&s1),
        vec![
            (vec![b"a".to_vec(), b"z".to_vec()], true),
            (vec![b"a".to_vec()], false)
        ],
        "one 1PC try for the whole statement, then the left region's share as 2PC"
    );
    assert_eq!(prewrites(&s2), vec![(vec![b"z".to_vec()], false)]);
    let commits = |s: &FakeServer| -> Vec<(Vec<Vec<u8>>, u64)> {
        s.received_at(paths::COMMIT)
            .iter()
            .map(|r| {
                let c: CommitRequest = r.decode();
                (c.keys, c.commit_ts)
            })
            .collect()
    };
    assert_eq!(commits(&s1), vec![(vec![b"a".to_vec()], 200)]);
    assert_eq!(commits(&s2), vec![(vec![b"z".to_vec()], 200)]);
}

#[test]
fn a_retried_one_pc_prewrite_that_committed_is_a_success() {
    let (s1, s2) = (FakeServer::start(), FakeServer::start());
    let (u1, u2) = (s1.base_url(), s2.base_url());
    let peers = [(1, u1.as_str()), (2, u2.as_str())];
    s1.script(
        paths::REGIONS,
        [regions(vec![region(1, (b"", b""), 1, &peers, 1)])],
    );
    // The 1PC prewrite committed on s1, which died before answering; s2 took over.
    s1.script(paths::PREWRITE, [Answer::Hangup]);
    s2.script(
        paths::PREWRITE,
        [Answer::ok(&PrewriteResponse {
            error: Some(KeyError {
                kind: ErrorKind::TxnFinished as i32,
                message: "already committed".into(),
                committed_ts: 150,
                ..KeyError::default()
            }),
            ..PrewriteResponse::default()
        })],
    );
    let c = client_of(&[&u1], |_| {});
    let writes = vec![RowWrite::Put {
        key: b"k".to_vec(),
        value: b"v".to_vec(),
    }];
    let out = c
        .block_on(txn_write::write(
            &c.client,
            &writes,
            100,
            "insert",
            CommitOptions::default(),
        ))
        .unwrap();
    assert_eq!(
        (out.rows, out.mode, out.commit_ts),
        (1, CommitMode::OnePc, Some(150))
    );
    assert_eq!(s1.received_at(paths::PREWRITE).len(), 1);
    let retried: Vec<bool> = s2
        .received_at(paths::PREWRITE)
        .iter()
        .map(|r| r.decode::<PrewriteRequest>().try_one_pc)
        .collect();
    assert_eq!(retried, vec![true]);
    for s in [&s1, &s2] {
        let paths_seen: Vec<String> = s.received().into_iter().map(|r| r.path).collect();
        assert!(
            !paths_seen
                .iter()
                .any(|p| p == paths::ROLLBACK || p == paths::COMMIT),
            "a committed statement is neither rolled back nor committed again: {paths_seen:?}"
        );
    }
}

/// The lost 1PC answer again, but the retry meets another transaction's write on the key
/// before the server finds this one's commit record: the conflict must not fail the statement
/// (the statement loop would run it again and apply it twice); a rollback of the primary finds
/// it committed.
#[test]
fn a_retried_one_pc_prewrite_that_meets_a_conflict_is_decided_by_a_rollback() {
    let (s1, s2) = (FakeServer::start(), FakeServer::start());
    let (u1, u2) = (s1.base_url(), s2.base_url());
    let peers = [(1, u1.as_str()), (2, u2.as_str())];
    s1.script(
        paths::REGIONS,
        [regions(vec![region(1, (b"", b""), 1, &peers, 1)])],
    );
    s1.script(paths::PREWRITE, [Answer::Hangup]);
    s2.script(
        paths::PREWRITE,
        [Answer::ok(&PrewriteResponse {
            error: Some(KeyError {
                kind: ErrorKind::Conflict as i32,
                message: "write conflict".into(),
                conflict_commit_ts: 180,
                ..KeyError::default()
            }),
            ..PrewriteResponse::default()
        })],
    );
    s2.script(
        paths::ROLLBACK,
        [Answer::ok(&wire::txn::CommandResponse {
            error: Some(KeyError {
                kind: ErrorKind::TxnFinished as i32,
                message: "already committed".into(),
                committed_ts: 150,
                ..KeyError::default()
            }),
        })],
    );
    let c = client_of(&[&u1], |_| {});
    let writes = vec![RowWrite::Put {
        key: b"k".to_vec(),
        value: b"v".to_vec(),
    }];
    let out = c
        .block_on(txn_write::write(
            &c.client,
            &writes,
            100,
            "update",
            CommitOptions::default(),
        ))
        .unwrap();
    assert_eq!(
        (out.rows, out.mode, out.commit_ts),
        (1, CommitMode::OnePc, Some(150))
    );
    assert_eq!(
        s2.received_at(paths::ROLLBACK).len(),
        1,
        "the rollback decides"
    );
    assert!(s2.received_at(paths::COMMIT).is_empty());
}

#[test]
fn lock_resolver_retries_check_txn_status_at_the_leader() {
    let (s1, s2) = (FakeServer::start(), FakeServer::start());
    let (u1, u2) = (s1.base_url(), s2.base_url());
    let peers = [(1, u1.as_str()), (2, u2.as_str())];
    s1.script(
        paths::REGIONS,
        [regions(vec![region(7, (b"", b""), 1, &peers, 1)])],
    );
    let lock = LockInfo {
        primary_lock: b"p".to_vec(),
        lock_version: 50,
        key: b"k".to_vec(),
        lock_ttl: 0,
        ..LockInfo::default()
    };
    s1.script(
        paths::COPROCESSOR,
        [Answer::ok(&proto::Response {
            locked: Some(lock),
            ..proto::Response::default()
        })],
    );
    s1.script(
        paths::TSO,
        [Answer::ok(&TsoResponse {
            first_ts: 300,
            ..TsoResponse::default()
        })],
    );
    // The leader moved to s2 between the read and the resolution.
    s1.script(
        paths::CHECK_TXN_STATUS,
        [Answer::ok(&CheckTxnStatusResponse {
            error: Some(routing_error(not_leader(7, Some((2, u2.as_str()))))),
            ..CheckTxnStatusResponse::default()
        })],
    );
    s2.script(
        paths::CHECK_TXN_STATUS,
        [Answer::ok(&CheckTxnStatusResponse {
            state: TxnState::Committed as i32,
            commit_ts: 60,
            ..CheckTxnStatusResponse::default()
        })],
    );
    s2.script(
        paths::RESOLVE_LOCK,
        [Answer::ok(&ResolveLockResponse::default())],
    );
    s2.script(paths::COPROCESSOR, [page(&[(9, 90)])]);
    let c = client_of(&[&u1], |_| {});
    let r = c.coprocessor(&handle_v_dag(T, false), vec![T.range()], 100);
    assert_eq!(r.rows, vec![vec![Datum::Int(9), Datum::Int(90)]]);
    assert_eq!(r.stats.locks_resolved, 1);
    let checks = |s: &FakeServer| -> Vec<Vec<u8>> {
        s.received_at(paths::CHECK_TXN_STATUS)
            .iter()
            .map(|r| r.decode::<CheckTxnStatusRequest>().primary)
            .collect()
    };
    assert_eq!(checks(&s1), vec![b"p".to_vec()]);
    assert_eq!(checks(&s2), vec![b"p".to_vec()]);
    let resolved: Vec<(Vec<Vec<u8>>, u64)> = s2
        .received_at(paths::RESOLVE_LOCK)
        .iter()
        .map(|r| {
            let q: ResolveLockRequest = r.decode();
            (q.keys, q.commit_ts)
        })
        .collect();
    assert_eq!(resolved, vec![(vec![b"k".to_vec()], 60)]);
    assert!(s1.received_at(paths::RESOLVE_LOCK).is_empty());
    assert_eq!(
        s2.received_at(paths::COPROCESSOR).len(),
        1,
        "the read is retried at the new leader"
    );
}

#[test]
fn catalog_and_global_variables_follow_hints() {
    let (s1, s2) = (FakeServer::start(), FakeServer::start());
    let (u1, u2) = (s1.base_url(), s2.base_url());
    let peers = [(1, u1.as_str()), (2, u2.as_str())];
    s1.script(
        paths::REGIONS,
        [regions(vec![region(7, (b"", b""), 1, &peers, 1)])],
    );
    let hint = routing_error(not_leader(7, Some((2, u2.as_str()))));
    s1.script(
        paths::RAW_LOAD,
        [Answer::ok(&RawLoadResponse {
            error: Some(hint.clone()),
            ..RawLoadResponse::default()
        })],
    );
    s2.script(paths::RAW_LOAD, [Answer::ok(&RawLoadResponse::default())]);
    s1.script(
        paths::TSO,
        [Answer::ok(&TsoResponse {
            first_ts: 300,
            ..TsoResponse::default()
        })],
    );
    // Nothing stored under any GLOBAL name (or the catalog key) on the leader.
    s2.script(paths::GET, [Answer::ok(&GetResponse::default())]);
    s1.script(
        paths::GET,
        [Answer::ok(&GetResponse {
            error: Some(hint),
            ..GetResponse::default()
        })],
    );
    let c = client_of(&[&u1], |_| {});
    c.block_on(c.client.set_global_variable("stratus_cop_cache", "OFF"))
        .unwrap();
    assert_eq!(s1.received_at(paths::RAW_LOAD).len(), 1);
    let loaded: Vec<Vec<u8>> = s2
        .received_at(paths::RAW_LOAD)
        .iter()
        .flat_map(|r| r.decode::<wire::region::RawLoadRequest>().pairs)
        .map(|p| p.value)
        .collect();
    assert_eq!(loaded, vec![b"OFF".to_vec()]);
    // The cache now names s2: reads of the GLOBAL values go there directly.
    c.block_on(c.client.global_variables()).unwrap();
    assert!(s1.received_at(paths::GET).is_empty());
    assert_eq!(
        s2.received_at(paths::GET).len(),
        client::variables::NAMES.len()
    );
    // A catalog read through a fresh client that still believes s1 leads: one hint, then s2.
    let fresh = client_of(&[&u1], |_| {});
    let table = fresh
        .block_on(client::sql::catalog::load(&fresh.client, "t"))
        .unwrap();
    assert!(table.is_none());
    assert_eq!(s1.received_at(paths::GET).len(), 1);
    assert_eq!(
        s2.received_at(paths::GET).len(),
        client::variables::NAMES.len() + 1
    );
}

#[test]
fn a_request_fails_with_retry_deadline_when_no_replica_answers() {
    let seed = FakeServer::start();
    let (dead1, dead2) = (refused_url(), refused_url());
    let peers = [(1, dead1.as_str()), (2, dead2.as_str())];
    seed.script(
        paths::REGIONS,
        [regions(vec![region(7, (b"", b""), 1, &peers, 1)])],
    );
    let c = client_of(&[&seed.base_url()], |cfg| {
        cfg.request_timeout = ReadableDuration::millis(800);
    });
    let err = c
        .try_coprocessor(&handle_v_dag(T, false), vec![T.range()], 100)
        .expect_err("no replica answers");
    assert_eq!(err.kind(), client::ErrorKind::Transport);
    match &err {
        client::Error::RetryDeadline {
            reason,
            attempts,
            last,
            ..
        } => {
            assert_eq!(*reason, client::backoff::RetryReason::Connection);
            assert!(*attempts >= 2, "both replicas tried: {err}");
            assert!(
                last.contains(&dead1[7..]) || last.contains(&dead2[7..]),
                "{err}"
            );
        }
        e => panic!("expected a retry deadline, got {e}"),
    }
    assert!(seed.received_at(paths::COPROCESSOR).is_empty());
}

/// One region on s1 alone, whose prewrite (no 1PC granted) and TSO answer, and whose commit
/// never answers; `rollback` is what the rollback of the primary gets.
fn lost_commit(rollback: Answer) -> (FakeServer, EntryClient) {
    let s1 = FakeServer::start();
    let u1 = s1.base_url();
    s1.script(
        paths::REGIONS,
        [regions(vec![region(
            1,
            (b"", b""),
            1,
            &[(1, u1.as_str())],
            1,
        )])],
    );
    s1.script(paths::PREWRITE, [Answer::ok(&PrewriteResponse::default())]);
    s1.script(
        paths::TSO,
        [Answer::ok(&TsoResponse {
            first_ts: 200,
            ..TsoResponse::default()
        })],
    );
    s1.script(paths::COMMIT, [Answer::Hangup]);
    s1.script(paths::ROLLBACK, [rollback]);
    let c = client_of(&[&u1], |cfg| {
        cfg.request_timeout = ReadableDuration::millis(400);
    });
    (s1, c)
}

fn write_k(c: &EntryClient) -> Result<txn_write::WriteOutcome, client::sql::SqlError> {
    let writes = vec![RowWrite::Put {
        key: b"k".to_vec(),
        value: b"v".to_vec(),
    }];
    c.block_on(txn_write::write(
        &c.client,
        &writes,
        100,
        "insert",
        CommitOptions::default(),
    ))
}

fn rolled_back_keys(s: &FakeServer) -> Vec<Vec<Vec<u8>>> {
    s.received_at(paths::ROLLBACK)
        .iter()
        .map(|r| r.decode::<wire::txn::RollbackRequest>().keys)
        .collect()
}

#[test]
fn a_lost_primary_commit_that_a_rollback_finds_committed_is_a_success_with_a_warning() {
    let (s1, c) = lost_commit(Answer::ok(&CommandResponse {
        error: Some(KeyError {
            kind: ErrorKind::TxnFinished as i32,
            message: "already committed".into(),
            committed_ts: 200,
            ..KeyError::default()
        }),
    }));
    let out = write_k(&c).unwrap();
    assert_eq!((out.mode, out.commit_ts), (CommitMode::TwoPc, Some(200)));
    assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
    assert!(
        out.warnings[0].contains("commit_ts=200"),
        "{:?}",
        out.warnings
    );
    assert!(
        s1.received_at(paths::COMMIT).len() >= 2,
        "the commit was retried"
    );
    assert_eq!(rolled_back_keys(&s1), vec![vec![b"k".to_vec()]]);
}

#[test]
fn a_lost_primary_commit_that_a_rollback_undoes_is_an_error() {
    let (s1, c) = lost_commit(Answer::ok(&CommandResponse::default()));
    let err = write_k(&c).expect_err("rolled back");
    assert!(
        matches!(
            &err,
            client::sql::SqlError::Client(client::Error::RetryDeadline { reason, .. })
                if *reason == client::backoff::RetryReason::Connection
        ),
        "{err}"
    );
    // The deciding rollback of the primary, then the statement's rollback of every key.
    assert_eq!(
        rolled_back_keys(&s1),
        vec![vec![b"k".to_vec()], vec![b"k".to_vec()]]
    );
}

#[test]
fn a_lost_primary_commit_whose_rollback_is_lost_too_is_undetermined() {
    let (s1, c) = lost_commit(Answer::Hangup);
    let err = write_k(&c).expect_err("unknown outcome");
    assert!(
        matches!(
            err,
            client::sql::SqlError::Undetermined {
                statement: "insert",
                start_ts: 100
            }
        ),
        "{err}"
    );
    assert_ne!(
        err.kind(),
        client::ErrorKind::Busy,
        "never re-run by the statement loop"
    );
    assert!(!s1.received_at(paths::ROLLBACK).is_empty());
}

#[test]
fn a_worker_whose_origin_is_unreachable_is_sent_the_next_replica() {
    let (s2, worker) = (FakeServer::start(), FakeServer::start());
    let (dead, u2) = (refused_url(), s2.base_url());
    let peers = [(1, dead.as_str()), (2, u2.as_str())];
    s2.script(
        paths::REGIONS,
        [regions(vec![region(7, (b"", b""), 1, &peers, 1)])],
    );
    worker.script(
        paths::STATUS,
        [Answer::Reply {
            status: 200,
            body: b"{}".to_vec(),
        }],
    );
    // The worker could not reach the leader it was named (502), then reads from s2.
    worker.script(
        paths::DELEGATE_COPROCESSOR,
        [
            Answer::Reply {
                status: 502,
                body: b"origin unreachable".to_vec(),
            },
            page(&[(3, 30)]),
        ],
    );
    let c = client_of(&[&u2], |cfg| cfg.workers = vec![worker.base_url()]);
    let r = c
        .block_on(c.client.delegate_coprocessor(
            &handle_v_dag(T, false),
            vec![T.range()],
            100,
            NodeSelectionPolicy::AllNodes,
        ))
        .unwrap();
    assert_eq!(r.rows, vec![vec![Datum::Int(3), Datum::Int(30)]]);
    let origins: Vec<String> = worker
        .received_at(paths::DELEGATE_COPROCESSOR)
        .iter()
        .map(|r| {
            r.headers
                .get(REGION_SERVER_HEADER)
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(origins, vec![dead, u2]);
}

#[test]
fn a_stale_command_is_sent_again_and_follows_the_next_hint() {
    let (s1, s2) = (FakeServer::start(), FakeServer::start());
    let (u1, u2) = (s1.base_url(), s2.base_url());
    let peers = [(1, u1.as_str()), (2, u2.as_str())];
    s1.script(
        paths::REGIONS,
        [regions(vec![region(1, (b"", b""), 1, &peers, 1)])],
    );
    s1.script(
        paths::PREWRITE,
        [
            Answer::ok(&PrewriteResponse {
                error: Some(routing_error(RegionError {
                    kind: RegionErrorKind::StaleCommand as i32,
                    region_id: 1,
                    message: "leader changed".into(),
                    ..RegionError::default()
                })),
                ..PrewriteResponse::default()
            }),
            Answer::ok(&PrewriteResponse {
                error: Some(routing_error(not_leader(1, Some((2, u2.as_str()))))),
                ..PrewriteResponse::default()
            }),
        ],
    );
    s2.script(
        paths::PREWRITE,
        [Answer::ok(&PrewriteResponse {
            one_pc_commit_ts: 120,
            ..PrewriteResponse::default()
        })],
    );
    let c = client_of(&[&u1], |_| {});
    let writes = vec![RowWrite::Put {
        key: b"k".to_vec(),
        value: b"v".to_vec(),
    }];
    let out = c
        .block_on(txn_write::write(
            &c.client,
            &writes,
            100,
            "insert",
            CommitOptions::default(),
        ))
        .unwrap();
    assert_eq!(
        (out.rows, out.mode, out.commit_ts),
        (1, CommitMode::OnePc, Some(120))
    );
    assert_eq!(
        s1.received_at(paths::PREWRITE).len(),
        2,
        "sent again after the stale command"
    );
    assert_eq!(s2.received_at(paths::PREWRITE).len(), 1);
}

/// Two regions split at "m", each on one fake of its own (no other replica to fail over to):
/// s1 leads the primary "a", s2 the secondary "z". Requests that are not scripted answer 404,
/// so a test also proves what the writer did not send.
fn two_regions_for_async_commit() -> (FakeServer, FakeServer, EntryClient) {
    let (s1, s2) = (FakeServer::start(), FakeServer::start());
    let (u1, u2) = (s1.base_url(), s2.base_url());
    s1.script(
        paths::REGIONS,
        [regions(vec![
            region(1, (b"", b"m"), 1, &[(1, u1.as_str())], 1),
            region(2, (b"m", b""), 1, &[(2, u2.as_str())], 2),
        ])],
    );
    let c = client_of(&[&u1], |cfg| {
        cfg.request_timeout = ReadableDuration::millis(400);
    });
    (s1, s2, c)
}

fn prewritten(min_commit_ts: u64) -> Answer {
    Answer::ok(&PrewriteResponse {
        min_commit_ts,
        ..PrewriteResponse::default()
    })
}

/// `UPDATE ... WHERE id IN (a, z)` as the writer sees it, with async commit ON.
fn write_a_and_z(c: &EntryClient) -> Result<txn_write::WriteOutcome, client::sql::SqlError> {
    let writes = vec![
        RowWrite::Put {
            key: b"a".to_vec(),
            value: b"1".to_vec(),
        },
        RowWrite::Put {
            key: b"z".to_vec(),
            value: b"2".to_vec(),
        },
    ];
    c.block_on(txn_write::write(
        &c.client,
        &writes,
        100,
        "update",
        CommitOptions {
            async_commit: true,
            schema_lease: None,
        },
    ))
}

/// The primary's status as check_txn_status reports an async-commit primary still locked.
fn primary_locked(min_commit_ts: u64) -> Answer {
    Answer::ok(&CheckTxnStatusResponse {
        state: TxnState::Locked as i32,
        lock: Some(LockInfo {
            key: b"a".to_vec(),
            primary_lock: b"a".to_vec(),
            lock_version: 100,
            lock_ttl: 3000,
            use_async_commit: true,
            min_commit_ts,
            ..LockInfo::default()
        }),
        secondaries: vec![b"z".to_vec()],
        ..CheckTxnStatusResponse::default()
    })
}

fn secondaries_checked(all_locked: bool, min_commit_ts: u64) -> Answer {
    Answer::ok(&CheckSecondaryLocksResponse {
        all_locked,
        min_commit_ts,
        ..CheckSecondaryLocksResponse::default()
    })
}

/// (keys, commit_ts) of every resolve_lock `s` received.
fn resolved(s: &FakeServer) -> Vec<(Vec<Vec<u8>>, u64)> {
    s.received_at(paths::RESOLVE_LOCK)
        .iter()
        .map(|r| {
            let req: ResolveLockRequest = r.decode();
            assert_eq!(req.start_ts, 100);
            (req.keys, req.commit_ts)
        })
        .collect()
}

/// The writer's own check of its primary: rollback_if_not_exist, so a late prewrite of the
/// primary can no longer land.
fn assert_primary_checked_with_rollback_if_not_exist(s1: &FakeServer) {
    let checks: Vec<CheckTxnStatusRequest> = s1
        .received_at(paths::CHECK_TXN_STATUS)
        .iter()
        .map(|r| r.decode())
        .collect();
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!(
        (
            checks[0].primary.as_slice(),
            checks[0].lock_ts,
            checks[0].rollback_if_not_exist
        ),
        (b"a".as_slice(), 100, true)
    );
}

#[test]
fn async_commit_lists_the_secondaries_with_the_primary_and_commits_at_the_max_min_commit_ts() {
    let (s1, s2, c) = two_regions_for_async_commit();
    s1.script(paths::PREWRITE, [prewritten(150)]);
    s2.script(paths::PREWRITE, [prewritten(170)]);
    for s in [&s1, &s2] {
        s.script(paths::COMMIT, [Answer::ok(&CommandResponse::default())]);
    }
    let out = write_a_and_z(&c).unwrap();
    assert_eq!(
        (out.rows, out.mode, out.commit_ts),
        (2, CommitMode::AsyncCommit, Some(170))
    );
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let prewrite = |s: &FakeServer| -> PrewriteRequest {
        let got = s.received_at(paths::PREWRITE);
        assert_eq!(got.len(), 1);
        got[0].decode()
    };
    let (p1, p2) = (prewrite(&s1), prewrite(&s2));
    for p in [&p1, &p2] {
        assert!(p.use_async_commit && !p.try_one_pc, "{p:?}");
        assert_eq!((p.primary.as_slice(), p.start_ts), (b"a".as_slice(), 100));
    }
    assert_eq!(
        p1.secondaries,
        vec![b"z".to_vec()],
        "the primary's lock lists z"
    );
    assert!(
        p2.secondaries.is_empty(),
        "only the primary's prewrite lists them"
    );
    let commits = |s: &FakeServer| -> Vec<(Vec<Vec<u8>>, u64)> {
        s.received_at(paths::COMMIT)
            .iter()
            .map(|r| {
                let c: CommitRequest = r.decode();
                (c.keys, c.commit_ts)
            })
            .collect()
    };
    assert_eq!(commits(&s1), vec![(vec![b"a".to_vec()], 170)]);
    assert_eq!(commits(&s2), vec![(vec![b"z".to_vec()], 170)]);
    assert!(
        s1.received_at(paths::TSO).is_empty(),
        "the commit_ts comes from the prewrites, not the TSO"
    );
}

#[test]
fn an_async_commit_secondary_whose_answer_is_lost_but_whose_lock_landed_is_committed() {
    let (s1, s2, c) = two_regions_for_async_commit();
    s1.script(paths::PREWRITE, [prewritten(150)]);
    // z's lock landed, but no answer ever comes back until the deadline.
    s2.script(paths::PREWRITE, [Answer::Hangup]);
    s1.script(paths::CHECK_TXN_STATUS, [primary_locked(150)]);
    s2.script(
        paths::CHECK_SECONDARY_LOCKS,
        [secondaries_checked(true, 170)],
    );
    for s in [&s1, &s2] {
        s.script(
            paths::RESOLVE_LOCK,
            [Answer::ok(&ResolveLockResponse::default())],
        );
    }
    let out = write_a_and_z(&c).expect("committed: every key is locked");
    assert_eq!(
        (out.rows, out.mode, out.commit_ts),
        (2, CommitMode::AsyncCommit, Some(170))
    );
    assert!(
        out.warnings.len() == 1 && out.warnings[0].contains("commit_ts=170"),
        "{:?}",
        out.warnings
    );
    assert!(s2.received_at(paths::PREWRITE).len() >= 2, "re-sent");
    assert_primary_checked_with_rollback_if_not_exist(&s1);
    let checked: Vec<CheckSecondaryLocksRequest> = s2
        .received_at(paths::CHECK_SECONDARY_LOCKS)
        .iter()
        .map(|r| r.decode())
        .collect();
    assert_eq!(
        checked,
        vec![CheckSecondaryLocksRequest {
            keys: vec![b"z".to_vec()],
            start_ts: 100
        }]
    );
    assert_eq!(resolved(&s1), vec![(vec![b"a".to_vec()], 170)]);
    assert_eq!(resolved(&s2), vec![(vec![b"z".to_vec()], 170)]);
    for s in [&s1, &s2] {
        assert!(
            s.received_at(paths::ROLLBACK).is_empty(),
            "never rolled back"
        );
    }
}

#[test]
fn an_async_commit_secondary_that_never_landed_is_rolled_back_and_the_statement_fails() {
    let (s1, s2, c) = two_regions_for_async_commit();
    s1.script(paths::PREWRITE, [prewritten(150)]);
    s2.script(paths::PREWRITE, [Answer::Hangup]);
    s1.script(paths::CHECK_TXN_STATUS, [primary_locked(150)]);
    // z has no lock: the check leaves a rollback marker there and says so.
    s2.script(
        paths::CHECK_SECONDARY_LOCKS,
        [secondaries_checked(false, 0)],
    );
    for s in [&s1, &s2] {
        s.script(
            paths::RESOLVE_LOCK,
            [Answer::ok(&ResolveLockResponse::default())],
        );
    }
    let err = write_a_and_z(&c).expect_err("rolled back");
    assert!(
        matches!(
            &err,
            client::sql::SqlError::Client(client::Error::RetryDeadline { reason, .. })
                if *reason == client::backoff::RetryReason::Connection
        ),
        "{err}"
    );
    assert_primary_checked_with_rollback_if_not_exist(&s1);
    assert_eq!(resolved(&s1), vec![(vec![b"a".to_vec()], 0)]);
    assert_eq!(resolved(&s2), vec![(vec![b"z".to_vec()], 0)]);
    for s in [&s1, &s2] {
        assert!(s.received_at(paths::COMMIT).is_empty());
    }
}

/// z's first prewrite landed and its answer was lost; before the re-send arrived, a resolver
/// committed the statement and another one wrote z: the re-send meets a write conflict. That
/// refusal proves nothing, and the primary says committed.
#[test]
fn a_conflict_met_by_a_resent_async_prewrite_is_decided_by_the_primary() {
    let (s1, s2, c) = two_regions_for_async_commit();
    s1.script(paths::PREWRITE, [prewritten(150)]);
    s2.script(
        paths::PREWRITE,
        [
            Answer::Hangup,
            Answer::ok(&PrewriteResponse {
                error: Some(KeyError {
                    kind: ErrorKind::Conflict as i32,
                    message: "write conflict".into(),
                    conflict_commit_ts: 190,
                    ..KeyError::default()
                }),
                ..PrewriteResponse::default()
            }),
        ],
    );
    s1.script(
        paths::CHECK_TXN_STATUS,
        [Answer::ok(&CheckTxnStatusResponse {
            state: TxnState::Committed as i32,
            commit_ts: 170,
            ..CheckTxnStatusResponse::default()
        })],
    );
    for s in [&s1, &s2] {
        s.script(
            paths::RESOLVE_LOCK,
            [Answer::ok(&ResolveLockResponse::default())],
        );
    }
    let out = write_a_and_z(&c).expect("committed by a resolver");
    assert_eq!(
        (out.mode, out.commit_ts),
        (CommitMode::AsyncCommit, Some(170))
    );
    assert!(
        out.warnings.len() == 1 && out.warnings[0].contains("commit_ts=170"),
        "{:?}",
        out.warnings
    );
    assert_primary_checked_with_rollback_if_not_exist(&s1);
    assert!(s2.received_at(paths::CHECK_SECONDARY_LOCKS).is_empty());
    assert_eq!(resolved(&s1), vec![(vec![b"a".to_vec()], 170)]);
    assert_eq!(resolved(&s2), vec![(vec![b"z".to_vec()], 170)]);
    for s in [&s1, &s2] {
        assert!(s.received_at(paths::ROLLBACK).is_empty());
    }
}

/// The common failure: z refused on its first try, every earlier prewrite answered on its
/// first try. z is not locked and never will be, so the statement rolls every key back as 2PC
/// does, without asking anyone.
#[test]
fn a_first_try_conflict_with_no_prewrite_in_doubt_rolls_every_key_back() {
    let (s1, s2, c) = two_regions_for_async_commit();
    s1.script(paths::PREWRITE, [prewritten(150)]);
    s2.script(
        paths::PREWRITE,
        [Answer::ok(&PrewriteResponse {
            error: Some(KeyError {
                kind: ErrorKind::Conflict as i32,
                message: "write conflict".into(),
                conflict_commit_ts: 190,
                ..KeyError::default()
            }),
            ..PrewriteResponse::default()
        })],
    );
    for s in [&s1, &s2] {
        s.script(paths::ROLLBACK, [Answer::ok(&CommandResponse::default())]);
    }
    let err = write_a_and_z(&c).expect_err("a write conflict");
    assert!(
        matches!(
            err,
            client::sql::SqlError::WriteConflict {
                conflict_commit_ts: 190,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(rolled_back_keys(&s1), vec![vec![b"a".to_vec()]]);
    assert_eq!(rolled_back_keys(&s2), vec![vec![b"z".to_vec()]]);
    assert!(s1.received_at(paths::CHECK_TXN_STATUS).is_empty());
    assert!(s2.received_at(paths::CHECK_SECONDARY_LOCKS).is_empty());
}
