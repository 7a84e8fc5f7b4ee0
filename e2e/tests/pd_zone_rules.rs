//! Placement rules and an etcd outage, on real processes: a real etcd, a placement driver on
//! it, three servers in zones a, b and c with three replicas per region, and the bank
//! workload (`e2e::bank`) running throughout.
//!
//! 1. etcd is SIGKILLed for 10 s. Reads and writes on the existing leaders go on (the
//!    placement leader's lease and TSO window outlast the outage here: nobody else can be
//!    elected while etcd is down, so it serves until its lease runs out). A fourth server,
//!    in zone c, starts during the outage: it cannot register, and nothing is scheduled onto
//!    it until etcd is back.
//! 2. etcd restarts: scheduling resumes, the fourth server receives replicas, and after
//!    settling no region ever has two replicas in one zone (servers 3 and 4 share zone c, so
//!    together they hold exactly one replica of each region).
//! 3. Server 3 is SIGKILLed for good: every region gets its zone-c replica back on server 4.
//!
//! After the run, every acknowledged transfer is read back at its commit_ts, and the total
//! is still the starting one.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use e2e::bank::{
    Bank, StopOnDrop, client, counts, cut_keys, describe, fully_replicated_on, on_pd,
    open_accounts, operators_in_flight, spawn_workload, view, wait_view, zone_conflicts,
};
use e2e::cluster::{Cluster, StoreKind};
use e2e::pd_proc::{PdProc, PdSetup};
use e2e::replicated::ReplicatedCluster;
use e2e::server_proc::ServerProc;
use harness::etcd::EtcdCluster;
use types::ReadableDuration;

const OUTAGE: Duration = Duration::from_secs(10);

#[test]
fn scheduling_pauses_while_etcd_is_down_then_keeps_one_replica_per_zone() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut etcd = EtcdCluster::start(&cluster.path("etcd"), 1).unwrap();
    let mut pd_setup = PdSetup::new(&cluster.path("pd"), "pd-1", 0, &etcd.endpoints());
    // Longer than the outage: the leader keeps its word (and its timestamps) throughout.
    pd_setup.pd.lease_ttl = ReadableDuration::secs(20);
    pd_setup.pd.tso_window = ReadableDuration::secs(30);
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
    wait_view(&pd, "every region on servers 1, 2, 3", |v| {
        fully_replicated_on(v, &[1, 2, 3])
    });

    let port = harness::ports::reserve(1).unwrap()[0];
    let mut setup4 = rc.joining_setup(4, "c", port, &cuts);
    on_pd(&mut setup4, &pd_url, heartbeat);
    urls.push(format!("http://127.0.0.1:{port}"));

    let bank = Bank::default();
    let stop = AtomicBool::new(false);
    let _s4 = std::thread::scope(|scope| {
        let _stop_on_exit = StopOnDrop(&stop);
        spawn_workload(scope, &pd_url, &urls, &bank, &stop);

        // 1. etcd goes away for ten seconds; a server in zone c starts meanwhile.
        etcd.kill(0);
        let outage = Instant::now();
        let acked_at_outage = bank.acked_count();
        let s4 = ServerProc::start(&setup4);
        while outage.elapsed() < OUTAGE {
            std::thread::sleep(Duration::from_millis(200));
        }
        let acked_in_outage = bank.acked_count() - acked_at_outage;
        assert!(
            acked_in_outage >= 3,
            "only {acked_in_outage} transfers went through while etcd was down; failures: {:?}",
            bank.failed().iter().rev().take(10).collect::<Vec<_>>()
        );
        // Nothing was scheduled: server 4 itself holds no replica.
        let held = s4.regions().regions;
        assert!(
            held.is_empty(),
            "server 4 got replicas while etcd was down: {:?}",
            held.iter().map(|r| r.id).collect::<Vec<_>>()
        );

        // 2. etcd is back: scheduling resumes and fills server 4 without ever putting two
        // replicas of a region in zone c.
        etcd.restart(0).unwrap();
        let resumed = Instant::now();
        let v = wait_view(&pd, "server 4 holds replicas, scheduling settled", |v| {
            counts(v).0.get(&4).copied().unwrap_or(0) >= 2
                && fully_replicated_on(v, &[1, 2, 3, 4])
                && operators_in_flight(&pd) == Some(0)
        });
        eprintln!(
            "scheduling settled {:?} after etcd came back",
            resumed.elapsed()
        );
        let replicas = counts(&v).0;
        assert_eq!(
            replicas.get(&3).copied().unwrap_or(0) + replicas.get(&4).copied().unwrap_or(0),
            v.regions.len(),
            "zone c should hold exactly one replica of each region:\n{}",
            describe(&v)
        );
        // Settled: for a while, no routing table shows two replicas in one zone.
        let watch = Instant::now();
        while watch.elapsed() < Duration::from_secs(5) {
            if let Some(v) = view(&pd) {
                let conflicts = zone_conflicts(&v);
                assert!(
                    conflicts.is_empty(),
                    "regions {conflicts:?} have two replicas in one zone:\n{}",
                    describe(&v)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }

        // 3. Server 3 (zone c) dies for good: zone c's replicas are rebuilt on server 4.
        rc.kill(2);
        let killed = Instant::now();
        wait_view(&pd, "every region on servers 1, 2, 4", |v| {
            fully_replicated_on(v, &[1, 2, 4])
        });
        eprintln!(
            "zone c rebuilt on server 4 {:?} after the kill",
            killed.elapsed()
        );
        stop.store(true, Ordering::Release);
        s4
    });
    bank.verify(&client(&pd_url, &urls), 20, 10);
}
