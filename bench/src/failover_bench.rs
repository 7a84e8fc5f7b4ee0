//! Failover on three real server processes (`e2e::replicated::ReplicatedCluster`, debug or
//! release binaries as the bench runs, default `[raft]` settings: 100 ms ticks, an election
//! after 10 to 20 ticks without a leader).
//!
//! * **Unavailability**: SIGKILL the server leading the region (never the TSO's), then raw-load
//!   one key of it through whichever server takes it, again and again: the time from the kill
//!   to the first acknowledged write, over `KILLS` kills. Baseline, same run: the same with a
//!   follower's server killed (no election: what a write costs while a server dies).
//! * **Catch-up**: a server down while writes go on for `DOWN`, then restarted: the time from
//!   its restart until it reports the leader's data version for every region. Baseline: the
//!   same after a restart with nothing missed.

use std::time::{Duration, Instant};

use e2e::replicated::{ReplicatedCluster, SERVERS, TSO};

use crate::report::{latency_row, percentile, table_header};

const KILLS: usize = 20;
const DOWN: Duration = Duration::from_secs(60);
const TIMEOUT: Duration = Duration::from_secs(60);
const TICK: Duration = Duration::from_millis(100);

fn key(i: usize) -> Vec<u8> {
    format!("f{i:08}").into_bytes()
}

/// The server leading the only region, moved off the TSO's server if it is there.
fn leader(c: &mut ReplicatedCluster) -> usize {
    loop {
        let leaders = c.reported_leaders();
        match leaders.values().next() {
            Some(&l) if l != TSO => return l,
            Some(_) => {
                c.move_leaders_off(TSO, TIMEOUT);
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Kills `victim`, writes until a write is acknowledged, restarts it; the time to that write.
fn outage(c: &mut ReplicatedCluster, victim: usize, n: &mut usize) -> Duration {
    let t0 = Instant::now();
    c.kill(victim);
    *n += 1;
    c.write(vec![(key(*n), b"v".to_vec())], TIMEOUT);
    let took = t0.elapsed();
    c.restart(victim);
    c.wait_until_every_region_has_a_leader(TIMEOUT);
    took
}

/// Until every server reports the same data version for every region as the others.
fn caught_up(c: &mut ReplicatedCluster, t0: Instant) -> Duration {
    loop {
        let versions: Vec<Vec<(u64, u64)>> = (0..SERVERS)
            .map(|i| {
                let mut v: Vec<(u64, u64)> = c
                    .server(i)
                    .regions()
                    .regions
                    .iter()
                    .map(|r| (r.id, r.data_version))
                    .collect();
                v.sort_unstable();
                v
            })
            .collect();
        if versions.windows(2).all(|w| w[0] == w[1]) {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < TIMEOUT, "no catch-up within {TIMEOUT:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn catch_up(c: &mut ReplicatedCluster, down: Duration, n: &mut usize) -> Duration {
    let victim = (0..SERVERS)
        .find(|&i| i != TSO && i != leader(c))
        .expect("a follower outside the TSO's server");
    c.kill(victim);
    let until = Instant::now() + down;
    while Instant::now() < until {
        *n += 1;
        c.write(vec![(key(*n), vec![b'x'; 1000])], TIMEOUT);
    }
    let t0 = Instant::now();
    c.restart(victim);
    caught_up(c, t0)
}

pub fn run() {
    let mut c = ReplicatedCluster::start_with_tick(&[], TICK);
    c.wait_until_every_region_has_a_leader(TIMEOUT);
    let mut n = 0;
    let (mut leader_kills, mut follower_kills) = (Vec::new(), Vec::new());
    for round in 0..KILLS {
        let l = leader(&mut c);
        leader_kills.push(outage(&mut c, l, &mut n));
        let l = leader(&mut c);
        let follower = (0..SERVERS)
            .find(|&i| i != TSO && i != l)
            .expect("a follower outside the TSO's server");
        follower_kills.push(outage(&mut c, follower, &mut n));
        eprintln!(
            "kill {round}: leader {:?}, follower {:?}",
            leader_kills[round], follower_kills[round]
        );
    }
    table_header(&format!(
        "failover (3 server processes, 1 region, default [raft]: 100 ms ticks, election after 10-20 ticks; {KILLS} kills of each kind)"
    ));
    leader_kills.sort_unstable();
    follower_kills.sort_unstable();
    for (p, name) in [(0.5, "p50"), (0.99, "p99")] {
        latency_row(
            &format!("kill to first acknowledged write, leader's server killed, {name}"),
            percentile(&leader_kills, p),
            "follower's server killed",
            percentile(&follower_kills, p),
        );
    }
    let idle = catch_up(&mut c, Duration::ZERO, &mut n);
    let after = catch_up(&mut c, DOWN, &mut n);
    latency_row(
        &format!(
            "catch-up after {} s down with writes going on",
            DOWN.as_secs()
        ),
        after,
        "restart with nothing missed",
        idle,
    );
    println!("\n({n} writes)");
}
