//! The GC safe point on real processes (`pd::gc`): the placement driver (with a one-second
//! `gc-life-time`) keeps it trailing now in its metadata store, holds it below a lock a dead
//! client left behind until that lock is gone, and hands it to the servers with their heartbeat
//! answers; a server then refuses reads and coprocessor requests below it with an error naming
//! both timestamps, and reads above it, compacted or not, are answered as before.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::time::{Duration, Instant};

use e2e::bank::on_pd;
use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{self, rows};
use e2e::pd_proc::{PdProc, PdSetup};
use e2e::replicated::ReplicatedCluster;
use e2e::sample_table::SampleTable;
use e2e::server_proc::ServerProc;
use e2e::transactions::{abandoned_prewrite, put};
use node::PdClient;
use types::{ReadableDuration, Ts};
use wire::coprocessor::Request;
use wire::txn::{CommitRequest, PrewriteRequest, RollbackRequest};

const T: SampleTable = SampleTable { id: 9 };
const TIMEOUT: Duration = Duration::from_secs(30);

fn safe_point(pd: &PdProc) -> u64 {
    e2e::pd_proc::block_on(
        PdClient::new(&[pd.base_url().to_string()], Duration::from_secs(5)).cluster(),
    )
    .unwrap()
    .gc_safe_point
}

fn pd_ts(pd: &PdProc) -> u64 {
    e2e::pd_proc::block_on(
        PdClient::new(&[pd.base_url().to_string()], Duration::from_secs(5)).get_ts(),
    )
    .unwrap()
}

/// Writes `key = value` in a transaction with timestamps from `pd`; its commit_ts.
fn commit(pd: &PdProc, s: &ServerProc, key: &[u8], value: &[u8]) -> u64 {
    let start_ts = pd_ts(pd);
    let r = s.prewrite(&PrewriteRequest {
        mutations: vec![put(key, value)],
        primary: key.to_vec(),
        start_ts,
        lock_ttl_ms: 20_000,
        txn_size: 1,
        ..PrewriteRequest::default()
    });
    assert!(r.error.is_none(), "{r:?}");
    let commit_ts = pd_ts(pd);
    let r = s.commit(&CommitRequest {
        keys: vec![key.to_vec()],
        start_ts,
        commit_ts,
    });
    assert!(r.error.is_none(), "{r:?}");
    commit_ts
}

fn wait_safe_point_above(pd: &PdProc, ts: u64) -> u64 {
    let started = Instant::now();
    loop {
        let sp = safe_point(pd);
        if sp > ts {
            return sp;
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "the safe point stayed at {sp}, never above {ts}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_safe_point_trails_now_waits_for_an_abandoned_lock_and_servers_refuse_reads_below_it() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut pd_setup = PdSetup::new(&cluster.path("pd"), "pd-1", 0, &[]);
    pd_setup.pd.gc_life_time = ReadableDuration::secs(1);
    pd_setup.pd.schedule_interval = ReadableDuration::millis(200);
    let pd = PdProc::start(&pd_setup);
    let pd_url = pd.base_url().to_string();
    let mut rc =
        ReplicatedCluster::start_configured(cluster, &[], Duration::from_millis(50), |_, s| {
            on_pd(s, &pd_url, ReadableDuration::millis(200));
        });
    let leader = rc.wait_until_every_region_has_a_leader(TIMEOUT)[0];
    let s = rc.server(leader);

    // A client prewrote and died: its lock must keep the safe point below its start_ts.
    let lock_ts = pd_ts(&pd);
    abandoned_prewrite(
        s,
        vec![put(&T.key(1000), b"never committed")],
        lock_ts,
        600_000,
    );
    let first = commit(&pd, s, &T.key(1), &SampleTable::value(10, 0));
    let second = commit(&pd, s, &T.key(1), &SampleTable::value(20, 0));
    wait_safe_point_above(&pd, 0);
    // Three life times past the lock: without it the safe point would have passed it.
    while Ts(pd_ts(&pd)).physical_millis() < Ts(lock_ts).physical_millis() + 3_000 {
        std::thread::sleep(Duration::from_millis(100));
    }
    let held = safe_point(&pd);
    assert!(
        held < lock_ts,
        "the safe point {held} passed the abandoned lock at {lock_ts}"
    );
    assert!(
        held > Ts::compose(Ts(lock_ts).physical_millis() - 10_000, 0).get(),
        "the safe point {held} did not trail now by about a second while the lock held it"
    );

    let rolled_back = s.rollback(&RollbackRequest {
        keys: vec![T.key(1000)],
        start_ts: lock_ts,
    });
    assert!(rolled_back.error.is_none(), "{rolled_back:?}");
    let sp = wait_safe_point_above(&pd, second);

    // Every server learns it from its next heartbeat answer, then refuses a read below it:
    // the leader a transactional get and a coprocessor request, the followers a replica read.
    let region = s.region_of(&T.key(1));
    for i in 0..rc.urls().len() {
        let mut old: Request =
            coprocessor::request(&T.count_sum_dag(), vec![T.range()], first, &region);
        old.context.as_mut().unwrap().replica_read = i != leader;
        let started = Instant::now();
        loop {
            let refused = rc.server(i).coprocessor(&old);
            if !refused.other_error.is_empty() {
                assert!(
                    refused.other_error.contains("GC safe point")
                        && refused.other_error.contains(&first.to_string()),
                    "server {i}: {refused:?}"
                );
                break;
            }
            assert!(
                started.elapsed() < TIMEOUT,
                "server {i} still reads below the safe point {sp}: {refused:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let got = s.get(&T.key(1), first);
    let e = got
        .error
        .as_ref()
        .unwrap_or_else(|| panic!("a get below the safe point: {got:?}"));
    assert!(e.message.contains("GC safe point"), "{e:?}");

    // Above it, before and after a compaction that may drop the old versions.
    for compacted in [false, true] {
        if compacted {
            s.compact();
        }
        let now = pd_ts(&pd);
        let got = s.get(&T.key(1), now);
        assert!(got.error.is_none(), "{got:?}");
        assert_eq!(
            got.value,
            SampleTable::value(20, 0),
            "compacted: {compacted}"
        );
        let read = s.coprocessor(&coprocessor::request(
            &T.count_sum_dag(),
            vec![T.range()],
            now,
            &region,
        ));
        coprocessor::assert_answered(&read, "a read above the safe point");
        assert_eq!(
            rows(&read).unwrap(),
            SampleTable::count_sum_rows([20]),
            "compacted: {compacted}"
        );
    }
}
