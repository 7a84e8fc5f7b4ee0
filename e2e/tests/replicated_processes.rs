//! Three real server processes replicating every region with Raft ([`ReplicatedCluster`]):
//! they elect a leader per region, a SIGKILL of a leading server (not the TSO's) loses no
//! acknowledged write, a restarted server rejoins its groups, and a frozen leader (SIGSTOP) is
//! replaced and follows the new leader once it runs again.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e::replicated::{ReplicatedCluster, SERVERS, TSO};

/// How long the first elections may take (three debug-build processes starting together).
const FIRST_LEADERS: Duration = Duration::from_secs(60);
/// How long a region may be without a leader after its leader's server is killed: an
/// election takes 10 to 20 ticks of 50 ms, the rest is slack for a loaded machine.
const FAILOVER: Duration = Duration::from_secs(10);

/// The split key: regions `["", k050)` and `[k050, "")`.
const CUT: &[u8] = b"k050";

fn key(n: usize) -> Vec<u8> {
    format!("k{n:03}").into_bytes()
}

/// The keys of phase `phase`: ten in each region (`k000..k049` and `k050..k099`, ten more per
/// phase).
fn phase_keys(phase: usize) -> Vec<Vec<u8>> {
    (0..10)
        .flat_map(|i| [key(phase * 10 + i), key(50 + phase * 10 + i)])
        .collect()
}

/// Writes each key of `keys` (one raw load each) through whichever server takes it, and adds
/// it to `acked`; the server that took each region's keys.
fn write_phase(
    c: &mut ReplicatedCluster,
    keys: &[Vec<u8>],
    phase: usize,
    acked: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    timeout: Duration,
) -> BTreeMap<usize, usize> {
    let mut by_region = BTreeMap::new();
    for k in keys {
        let value = format!("v{phase}-{}", String::from_utf8_lossy(k)).into_bytes();
        let (server, _ts) = c.write(vec![(k.clone(), value.clone())], timeout);
        by_region.insert(c.region_of(k), server);
        acked.insert(k.clone(), value);
    }
    by_region
}

/// Reads every acknowledged key at a fresh timestamp from whichever server leads its region.
fn check_acknowledged(c: &mut ReplicatedCluster, acked: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let ts = c.tso();
    for (k, v) in acked {
        let (_, found) = c.read(k, ts, FAILOVER);
        assert_eq!(
            found.as_deref(),
            Some(v.as_slice()),
            "acknowledged key {} at ts={ts}",
            String::from_utf8_lossy(k)
        );
    }
}

#[test]
fn three_server_processes_elect_leaders_and_survive_a_sigkill_of_one() {
    let mut c = ReplicatedCluster::start(&[CUT.to_vec()]);
    let leaders = c.wait_until_every_region_has_a_leader(FIRST_LEADERS);
    assert_eq!(leaders.len(), 2);
    if leaders.iter().all(|&l| l == TSO) {
        // Every region is led by the TSO's server, which must not be killed.
        let without_tso = c.move_leaders_off(TSO, FAILOVER);
        assert!(!without_tso.contains(&TSO), "{without_tso:?}");
    }

    let mut acked = BTreeMap::new();
    let writers = write_phase(&mut c, &phase_keys(0), 0, &mut acked, FAILOVER);
    let (&region, &victim) = writers
        .iter()
        .find(|&(_, &server)| server != TSO)
        .unwrap_or_else(|| panic!("the TSO's server took every write: {writers:?}"));

    c.kill(victim);
    let killed_at = Instant::now();
    let in_region = key(if region == 0 { 40 } else { 90 });
    let (taker, _) = c.write(vec![(in_region.clone(), b"after-kill".to_vec())], FAILOVER);
    assert_ne!(taker, victim);
    let failover = killed_at.elapsed();
    acked.insert(in_region, b"after-kill".to_vec());
    write_phase(&mut c, &phase_keys(1), 1, &mut acked, FAILOVER);
    check_acknowledged(&mut c, &acked);

    // The restarted server rejoins: with the other non-TSO server killed, a write needs a
    // quorum of two, the TSO's server and the restarted one.
    c.restart(victim);
    let other = (0..SERVERS).find(|&i| i != TSO && i != victim).unwrap();
    c.kill(other);
    write_phase(&mut c, &phase_keys(2), 2, &mut acked, FAILOVER);
    check_acknowledged(&mut c, &acked);
    eprintln!(
        "failover of region {region} after killing server {}: {failover:?}",
        victim + 1
    );
}

#[test]
fn a_frozen_leader_is_replaced_and_follows_the_new_leader_after_sigcont() {
    let mut c = ReplicatedCluster::start(&[]);
    if c.wait_until_every_region_has_a_leader(FIRST_LEADERS)[0] == TSO {
        // Frozen, the TSO's server would stop every write: another server must lead.
        let moved = c.move_leaders_off(TSO, FAILOVER);
        assert_ne!(moved[0], TSO);
    }
    let k = key(1);
    let (took, _) = c.write(vec![(k.clone(), b"before".to_vec())], FAILOVER);
    assert_ne!(took, TSO);
    let took_url = c.urls()[took].clone();

    c.stop(took);
    let (new_leader, _) = c.write(vec![(k.clone(), b"during".to_vec())], FAILOVER);
    assert_ne!(new_leader, took, "{took_url} is frozen");
    c.cont(took);

    // Back, it may still take itself for the leader (its ticks stood still while it was
    // frozen), but a read needs a read index, which a quorum must confirm: it never answers
    // with the value from before the new leader's write. Then it hears of the new term and
    // refuses what only a leader may serve.
    let ts = c.tso();
    let deadline = Instant::now() + FAILOVER;
    let refusal = loop {
        match c.server(took).try_get(&k, ts, FAILOVER) {
            Err(e) => break e,
            Ok(v) => {
                assert_eq!(
                    v.as_deref(),
                    Some(b"during".as_slice()),
                    "{took_url} served a stale read after SIGCONT"
                );
                assert!(
                    Instant::now() < deadline,
                    "{took_url} still serves reads {FAILOVER:?} after SIGCONT"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    assert!(refusal.contains("not led by this server"), "{refusal}");
    let (_, found) = c.read(&k, ts, FAILOVER);
    assert_eq!(found.as_deref(), Some(b"during".as_slice()));

    // And it follows the new term: with the other non-TSO server killed, a write needs its
    // vote and its copy.
    let other = (0..SERVERS).find(|&i| i != took && i != TSO).unwrap();
    c.kill(other);
    c.write(vec![(key(2), b"after".to_vec())], FAILOVER);
    let (_, found) = c.read(&key(2), c.tso(), FAILOVER);
    assert_eq!(found.as_deref(), Some(b"after".as_slice()));
}

/// A server that leads the right child of a split but not the left one takes writes and reads
/// of the right child's keys at once: its key-to-region map, made before the split, sent those
/// keys to the left child (the parent's id) and refused them as "not the leader", naming the
/// left child's leader, which refused them in turn (`stratus-bench rebalance` found it).
#[test]
fn the_leader_of_a_split_child_alone_takes_its_keys() {
    let mut c = ReplicatedCluster::start(&[]);
    let leader = c.wait_until_every_region_has_a_leader(FIRST_LEADERS)[0];
    assert!(c.server(leader).split_at(CUT.to_vec()));
    let right = c.server(leader).region_of(CUT).id;
    let left = c.server(leader).region_of(b"a").id;
    let to = (0..SERVERS).find(|i| *i != leader).unwrap();
    let to_store = to as u64 + 1;
    let leads = |s: &e2e::server_proc::ServerProc, id: u64| {
        s.regions()
            .regions
            .iter()
            .any(|r| r.id == id && r.leader_store_id == to_store)
    };
    let deadline = Instant::now() + FAILOVER * 3;
    while !leads(c.server(to), right) {
        assert!(
            Instant::now() < deadline,
            "server {to} never led region {right}"
        );
        let body = wire::region::TransferLeaderRequest {
            region_id: right,
            to_store_id: to_store,
        };
        for i in 0..SERVERS {
            let url = c.server(i).url(wire::paths::ADMIN_TRANSFER_LEADER);
            let _ = harness::http::post(
                &url,
                prost::Message::encode_to_vec(&body),
                Duration::from_secs(2),
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        !leads(c.server(to), left),
        "server {to} leads both children: the case needs the left one led elsewhere"
    );
    let k = key(77);
    let committed = c
        .server(to)
        .try_raw_load(vec![(k.clone(), b"right".to_vec())], FAILOVER)
        .unwrap_or_else(|e| panic!("the right child's leader refused its key: {e}"));
    let got = c
        .server(to)
        .try_get(&k, c.tso().max(committed), FAILOVER)
        .unwrap_or_else(|e| panic!("the right child's leader refused a read: {e}"));
    assert_eq!(got, Some(b"right".to_vec()));
}
