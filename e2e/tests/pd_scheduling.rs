//! Scheduling through Raft membership changes, on real processes: a placement driver (the
//! embedded store), three servers in zones a, b and c with three replicas per region, and a
//! bank workload (transfers between 24 accounts, each a transaction reading both balances at
//! its start_ts) running throughout, with a reader checking at fresh timestamps that the
//! total never changes.
//!
//! 1. A fourth server (zone d, listed in no founding config, `node-id = 0`: its store id comes
//!    from the placement driver's allocator) starts: replicas and leaders move to it until the
//!    largest and smallest counts per server differ by at most a quarter of the mean plus one.
//!    SIGKILLed and restarted, it comes back under the same id with its replicas.
//! 2. `stratus ctl server drain ID`: the fourth server ends with no replica; then `server up`.
//! 3. Server 2 is SIGKILLed: within `max-store-down-time` plus the scheduling delay, every
//!    region has three voters again, on live servers in three distinct zones.
//! 4. Server 2 restarts with the replicas removed while it was down: it is told to drop them
//!    (it ends holding exactly what the routing table lists it in), and it is filled again
//!    until balanced.
//!
//! After the run, every acknowledged transfer is read back at its commit_ts (nothing
//! acknowledged was lost), and the total is still the starting one.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use e2e::bank::{
    Bank, SETTLE, StopOnDrop, balanced, client, counts, ctl, cut_keys, fully_replicated_on, on_pd,
    open_accounts, spawn_workload, wait_view,
};
use e2e::cluster::{Cluster, StoreKind};
use e2e::pd_proc::{PdProc, PdSetup};
use e2e::replicated::ReplicatedCluster;
use e2e::server_proc::ServerProc;
use types::ReadableDuration;

#[test]
fn replicas_rebalance_onto_a_new_server_leave_a_drained_one_heal_after_a_death_and_a_return() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut pd_setup = PdSetup::new(&cluster.path("pd"), "pd-1", 0, &[]);
    pd_setup.pd.node_lease_ttl = ReadableDuration::secs(2);
    pd_setup.pd.max_store_down_time = ReadableDuration::secs(2);
    pd_setup.pd.schedule_interval = ReadableDuration::millis(200);
    let pd = PdProc::start(&pd_setup);
    let pd_url = pd.base_url().to_string();
    let cuts = cut_keys();
    let heartbeat = ReadableDuration::millis(200);
    let mut rc =
        ReplicatedCluster::start_configured(cluster, &cuts, Duration::from_millis(50), |_, s| {
            on_pd(s, &pd_url, heartbeat)
        });
    rc.wait_until_every_region_has_a_leader(Duration::from_secs(30));
    let mut urls = rc.urls();
    open_accounts(&client(&pd_url, &urls));

    // The fourth server: in the peers list of its own config only (not among the first three,
    // so it creates no region), zone d.
    let port = harness::ports::reserve(1).unwrap()[0];
    let mut setup4 = rc.joining_setup(0, "d", port, &cuts);
    on_pd(&mut setup4, &pd_url, heartbeat);
    let url4 = format!("http://127.0.0.1:{port}");
    urls.push(url4.clone());

    let bank = Bank::default();
    let stop = AtomicBool::new(false);
    let _s4 = std::thread::scope(|scope| {
        // A failed step must still stop the workload, or the scope would wait for it for ever.
        let _stop_on_exit = StopOnDrop(&stop);
        spawn_workload(scope, &pd_url, &urls, &bank, &stop);

        // 1. A fourth server joins under an allocated id: replicas and leaders spread to it.
        let mut s4 = ServerProc::start(&setup4);
        let id4 = registered_id(&pd, &url4);
        assert!(
            id4 > wire::pd::RESERVED_IDS,
            "the joining server's id {id4} is not from the allocator"
        );
        let all = [1, 2, 3, id4];
        let v = wait_view(&pd, "four servers balanced", |v| {
            let (replicas, leaders) = counts(v);
            fully_replicated_on(v, &all) && balanced(&replicas, &all) && balanced(&leaders, &all)
        });
        assert!(counts(&v).0.get(&id4).copied().unwrap_or(0) >= 3, "{v:?}");
        // Restarted, it keeps its id (`<data-dir>/STORE_ID`) and its replicas.
        s4.kill();
        let killed_ms = pd::tso::now_ms();
        let s4 = ServerProc::start(&setup4);
        let v = wait_view(&pd, "the restarted fourth server registered", |v| {
            v.stores.iter().any(|s| {
                s.last_heartbeat_ms > killed_ms
                    && s.heartbeat
                        .as_ref()
                        .is_some_and(|h| h.url.trim_end_matches('/') == url4 && h.region_count >= 3)
            })
        });
        let ids_at_url4: Vec<u64> = v
            .stores
            .iter()
            .filter_map(|s| s.heartbeat.as_ref())
            .filter(|h| h.url.trim_end_matches('/') == url4)
            .map(|h| h.store_id)
            .collect();
        assert_eq!(
            ids_at_url4,
            vec![id4],
            "the restarted server changed its id"
        );

        // 2. Drain it: it ends with no replica; then it takes replicas again.
        let id4_text = id4.to_string();
        let text = ctl(&pd, &["server", "drain", &id4_text]);
        assert!(text.contains("draining"), "{text}");
        wait_view(&pd, "the fourth server drained", |v| {
            fully_replicated_on(v, &[1, 2, 3])
        });
        let servers = ctl(&pd, &["servers"]);
        assert!(servers.contains("draining"), "{servers}");
        ctl(&pd, &["server", "up", &id4_text]);

        // 3. Server 2 dies for good: its replicas are rebuilt on 1, 3 and 4 (zones a, c, d).
        rc.kill(1);
        wait_view(&pd, "every region on servers 1, 3 and the fourth", |v| {
            fully_replicated_on(v, &[1, 3, id4])
        });

        // 4. Server 2 comes back with the replicas it held, which were removed while it was
        // down: it is told to drop them, then receives replicas again until balanced.
        rc.restart(1);
        wait_view(&pd, "server 2 back and the servers balanced", |v| {
            let (replicas, _) = counts(v);
            fully_replicated_on(v, &all) && balanced(&replicas, &all)
        });
        let deadline = Instant::now() + SETTLE;
        loop {
            let v = e2e::pd_proc::block_on(
                node::PdClient::new(std::slice::from_ref(&pd_url), Duration::from_secs(5))
                    .cluster(),
            )
            .unwrap();
            let listed: std::collections::BTreeSet<u64> = v
                .regions
                .iter()
                .filter(|r| r.peers.iter().any(|p| p.store_id == 2))
                .map(|r| r.id)
                .collect();
            let held: std::collections::BTreeSet<u64> = rc
                .server(1)
                .regions()
                .regions
                .iter()
                .map(|r| r.id)
                .collect();
            if held == listed {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "server 2 holds {held:?}, the routing table lists it in {listed:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        stop.store(true, Ordering::Release);
        s4
    });

    bank.verify(&client(&pd_url, &urls), 20, 10);
}

/// The store id the server at `url` registered under (waited for).
fn registered_id(pd: &PdProc, url: &str) -> u64 {
    let v = wait_view(pd, &format!("a server registered at {url}"), |v| {
        v.stores
            .iter()
            .filter_map(|s| s.heartbeat.as_ref())
            .any(|h| h.url.trim_end_matches('/') == url)
    });
    v.stores
        .iter()
        .filter_map(|s| s.heartbeat.as_ref())
        .find(|h| h.url.trim_end_matches('/') == url)
        .map(|h| h.store_id)
        .unwrap()
}
