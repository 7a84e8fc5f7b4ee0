//! Three Raft stores in one process, over real engines (external log mode), real Raft logs on
//! disk (fdatasync'd) and one shared object store directory, connected by an in-process
//! transport that can cut links. What it proves: a region replicated on three stores elects a
//! leader, acknowledges a write only once a quorum holds it, applies the same entries to every
//! replica (same data version and scans at the same applied index), keeps working when one
//! store dies, and a restarted store catches up from its own log.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kvengine::raft_log::{RaftLog, RaftLogOptions};
use kvengine::{
    ColumnFamily, Dfs, DfsOp, Engine, EngineOptions, FaultDfs, LocalDfs, LogMode, SyncPolicy,
    WriteBatch,
};
use raftstore::{
    ChangePeer, ChannelNetwork, InitialRegion, RaftConfig, RaftStore, RaftStoreError, Router,
};

const REGION: u64 = 1;
const TIMEOUT: Duration = Duration::from_secs(10);

struct Node {
    engine: Engine,
    store: RaftStore,
    log: Arc<RaftLog>,
    /// This store's view of the shared object store, counting its calls.
    dfs: Arc<FaultDfs<LocalDfs>>,
}

struct Cluster {
    dir: tempfile::TempDir,
    net: Arc<ChannelNetwork>,
    nodes: HashMap<u64, Node>,
    /// Raft messages (not stores' heartbeats) delivered to any store so far.
    raft_messages: Arc<AtomicU64>,
}

fn config() -> RaftConfig {
    RaftConfig {
        tick_interval: types::ReadableDuration::millis(20),
        propose_timeout: types::ReadableDuration::secs(10),
        ..RaftConfig::default()
    }
}

impl Cluster {
    fn new(stores: u64) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Cluster {
            dir,
            net: ChannelNetwork::new(),
            nodes: HashMap::new(),
            raft_messages: Arc::new(AtomicU64::new(0)),
        };
        for id in 1..=stores {
            c.start(id);
        }
        c
    }

    fn store_dir(&self, id: u64) -> PathBuf {
        self.dir.path().join(format!("store-{id}"))
    }

    fn start(&mut self, id: u64) {
        self.start_store(id, true);
    }

    /// Starts store `id` without creating the initial region: a server that joins the
    /// cluster later and gets replicas only from membership changes.
    fn join(&mut self, id: u64) {
        self.start_store(id, false);
    }

    fn start_store(&mut self, id: u64, founding: bool) {
        let dir = self.store_dir(id);
        let dfs = Arc::new(FaultDfs::new(
            LocalDfs::open(self.dir.path().join("dfs")).unwrap(),
        ));
        let (engine, log) = open_store(&dir, id, dfs.clone());
        let voters: Vec<u64> = (1..=3).collect();
        if founding {
            RaftStore::bootstrap(
                &engine,
                &log,
                &[InitialRegion {
                    id: REGION,
                    start: Vec::new(),
                    end: Vec::new(),
                    voters,
                }],
            )
            .unwrap();
        }
        let inbox = self.net.register(id);
        let transport = Arc::new(self.net.transport(id));
        let store = RaftStore::start(id, config(), engine.clone(), log.clone(), transport).unwrap();
        let router = store.router().clone();
        let raft_messages = self.raft_messages.clone();
        // The network's inbox of this store feeds its loop until the store is unregistered.
        // What arrived meanwhile goes in one round, run on this thread when none is running
        // (`Router::deliver_batch`, as the server's `POST /raft/batch` handler).
        std::thread::spawn(move || {
            while let Ok(batch) = inbox.recv() {
                let mut msgs = batch.messages;
                for more in inbox.try_iter() {
                    msgs.extend(more.messages);
                }
                let n = msgs.iter().filter(|m| m.message.is_some()).count();
                raft_messages.fetch_add(n as u64, Ordering::Relaxed);
                router.deliver_batch(msgs);
            }
        });
        self.nodes.insert(
            id,
            Node {
                engine,
                store,
                log,
                dfs,
            },
        );
    }

    /// Stops store `id` as a crash would leave it: no flush, its directories kept.
    fn kill(&mut self, id: u64) {
        self.net.unregister(id);
        let node = self.nodes.remove(&id).unwrap();
        node.store.stop();
        node.engine.close(false).unwrap();
    }

    fn router(&self, id: u64) -> &Router {
        self.nodes[&id].store.router()
    }

    fn wait_leader(&self, region: u64) -> u64 {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            for (id, n) in &self.nodes {
                if n.store.router().status(region).is_some_and(|s| s.serving) {
                    return *id;
                }
            }
            assert!(Instant::now() < deadline, "no leader for region {region}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until a store other than `old` serves `region` as its leader.
    fn wait_leader_other_than(&self, region: u64, old: u64) -> u64 {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let serving = self.nodes.iter().find(|(id, n)| {
                **id != old && n.store.router().status(region).is_some_and(|s| s.serving)
            });
            if let Some((id, _)) = serving {
                return *id;
            }
            assert!(
                Instant::now() < deadline,
                "no new leader for region {region}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Writes `key = value` at `version` through the current leader, retrying on routing errors.
    fn put(&self, key: &[u8], version: u64, value: &[u8]) -> u64 {
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Write, key, version, b"", value);
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let leader = self.wait_leader(REGION);
            match self.router(leader).write(REGION, None, &batch, TIMEOUT) {
                Ok(applied) => return applied.index,
                Err(
                    e @ (RaftStoreError::NotLeader { .. } | RaftStoreError::StaleCommand { .. }),
                ) => {
                    assert!(Instant::now() < deadline, "write kept failing: {e}");
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("write failed: {e}"),
            }
        }
    }

    /// Waits until every live replica applied `index`, then checks they agree.
    fn wait_applied_everywhere(&self, index: u64) {
        let deadline = Instant::now() + TIMEOUT;
        for (id, n) in &self.nodes {
            while n.engine.shard_info(REGION).unwrap().write_sequence < index {
                assert!(
                    Instant::now() < deadline,
                    "store {id} never applied {index}"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

fn open_store(dir: &Path, id: u64, dfs: Arc<dyn Dfs>) -> (Engine, Arc<RaftLog>) {
    let mut opts = EngineOptions::new(dir.join("engine"));
    opts.log_mode = LogMode::External;
    opts.node_id = id as u16;
    opts.memtable_size = 16 * 1024;
    let engine = Engine::open(opts, dfs).unwrap();
    let log = RaftLog::open(RaftLogOptions {
        dir: dir.join("raft"),
        segment_size: 1 << 20,
        sync: SyncPolicy::EveryBatch,
    })
    .unwrap();
    (engine, Arc::new(log))
}

/// Every WRITE-CF version of the region on a replica at its applied index, with that index and
/// the data version.
/// `(key, version, value)`.
type Row = (Vec<u8>, u64, Vec<u8>);

fn dump(engine: &Engine) -> (u64, u64, Vec<Row>) {
    let snap = engine.snapshot(REGION).unwrap();
    let mut rows = Vec::new();
    let mut it = snap
        .iter(ColumnFamily::Write, b"", b"", u64::MAX, false)
        .unwrap();
    while it.valid() {
        rows.push((it.key().to_vec(), it.version(), it.value().to_vec()));
        it.next().unwrap();
    }
    (snap.write_sequence(), snap.snap_version(), rows)
}

/// Checks that every replica holds the same rows and data version at the same applied index.
///
/// The replicas are compared once they stand at one applied index: a leader elected while the
/// test runs (a loaded machine misses heartbeats) appends an empty entry of its term after the
/// test's last write, which the new leader applies before its followers do. Waiting for that is
/// bounded; rows that differ at one index fail at once.
fn assert_replicas_agree(c: &Cluster) {
    let deadline = Instant::now() + TIMEOUT;
    let dumps: Vec<_> = loop {
        let dumps: Vec<_> = c
            .nodes
            .iter()
            .map(|(id, n)| (*id, dump(&n.engine)))
            .collect();
        let same_index = dumps.iter().all(|(_, d)| d.0 == dumps[0].1.0);
        if same_index || Instant::now() >= deadline {
            break dumps;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (first_id, first) = &dumps[0];
    for (id, d) in &dumps[1..] {
        assert_eq!(
            d, first,
            "store {id} and store {first_id} differ at applied index {} / {}",
            d.0, first.0
        );
    }
}

#[test]
fn a_write_is_applied_on_every_replica_with_the_same_data_version() {
    let c = Cluster::new(3);
    let mut last = 0;
    for i in 0..50u64 {
        last = c.put(
            format!("k{i:03}").as_bytes(),
            10 + i,
            format!("v{i}").as_bytes(),
        );
    }
    c.wait_applied_everywhere(last);
    assert_replicas_agree(&c);
    let (_, _, rows) = dump(&c.nodes[&1].engine);
    assert_eq!(rows.len(), 50);
}

#[test]
fn writes_go_on_after_the_leader_dies_and_the_restarted_store_catches_up() {
    let mut c = Cluster::new(3);
    for i in 0..20u64 {
        c.put(format!("a{i:03}").as_bytes(), 10 + i, b"before");
    }
    let old_leader = c.wait_leader(REGION);
    c.kill(old_leader);
    let started = Instant::now();
    let mut last = 0;
    for i in 0..20u64 {
        last = c.put(format!("b{i:03}").as_bytes(), 100 + i, b"after");
    }
    assert_ne!(c.wait_leader(REGION), old_leader);
    eprintln!(
        "writes resumed {:?} after the leader died",
        started.elapsed()
    );
    c.start(old_leader);
    c.wait_applied_everywhere(last);
    assert_replicas_agree(&c);
    let (_, _, rows) = dump(&c.nodes[&old_leader].engine);
    assert_eq!(
        rows.len(),
        40,
        "the restarted store holds every acknowledged write"
    );
}

#[test]
fn an_isolated_leader_cannot_acknowledge_a_write() {
    let c = Cluster::new(3);
    c.put(b"x", 10, b"1");
    let old = c.wait_leader(REGION);
    c.net.partition(&[&[old]]);
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Write, b"y", 11, b"", b"lost?");
    let r = c
        .router(old)
        .write(REGION, None, &batch, Duration::from_secs(2));
    assert!(r.is_err(), "an isolated leader acknowledged a write: {r:?}");
    // The others elect a leader and take writes.
    let new = c.wait_leader_other_than(REGION, old);
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Write, b"z", 12, b"", b"2");
    let applied = c.router(new).write(REGION, None, &batch, TIMEOUT).unwrap();
    c.net.heal();
    c.wait_applied_everywhere(applied.index);
    assert_replicas_agree(&c);
    let (_, _, rows) = dump(&c.nodes[&old].engine);
    let keys: Vec<_> = rows.iter().map(|r| r.0.clone()).collect();
    assert!(keys.contains(&b"z".to_vec()));
}

#[test]
fn only_the_leader_writes_files_and_followers_apply_its_change_sets() {
    let c = Cluster::new(3);
    let mut last = 0;
    // 16 KiB memtables: these writes freeze and flush several times.
    for i in 0..400u64 {
        last = c.put(format!("k{i:04}").as_bytes(), 10 + i, &[b'v'; 100]);
    }
    let leader = c.wait_leader(REGION);
    c.nodes[&leader].engine.flush_shard(REGION).unwrap();
    let after_flush = c.put(b"zzz", 1000, b"last");
    c.wait_applied_everywhere(after_flush.max(last));
    let files: Vec<_> = c
        .nodes
        .values()
        .map(|n| n.engine.shard_files(REGION).unwrap())
        .collect();
    assert!(
        !c.nodes[&leader]
            .engine
            .shard_table_ids(REGION)
            .unwrap()
            .is_empty(),
        "nothing was flushed"
    );
    for (id, n) in &c.nodes {
        let puts = n.dfs.stats(DfsOp::Put).calls;
        if *id == leader {
            assert!(puts > 0, "the leader put no file");
        } else {
            assert_eq!(puts, 0, "follower {id} wrote {puts} files");
        }
    }
    for f in &files[1..] {
        assert_eq!(f, &files[0], "replicas hold different file lists");
    }
    assert_replicas_agree(&c);
}

#[test]
fn a_split_starts_the_right_child_group_on_every_store() {
    let c = Cluster::new(3);
    for i in 0..20u64 {
        c.put(format!("k{i:03}").as_bytes(), 10 + i, b"v");
    }
    let leader = c.wait_leader(REGION);
    c.nodes[&leader].engine.flush_shard(REGION).unwrap();
    let ver = c.nodes[&leader].engine.shard_info(REGION).unwrap().ver;
    let applied = c
        .router(leader)
        .split(REGION, ver, b"k010", 2, TIMEOUT)
        .unwrap();
    assert!(
        matches!(applied.outcome, Some(kvengine::ApplyOutcome::Split { .. })),
        "{applied:?}"
    );
    let right_leader = c.wait_leader(2);
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Write, b"k015", 100, b"", b"right");
    let index = c
        .router(right_leader)
        .write(2, None, &batch, TIMEOUT)
        .unwrap()
        .index;
    let deadline = Instant::now() + TIMEOUT;
    for n in c.nodes.values() {
        while n
            .engine
            .shard_info(2)
            .map(|i| i.write_sequence)
            .unwrap_or(0)
            < index
        {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(10));
        }
        let info = n.engine.shard_info(REGION).unwrap();
        assert_eq!(info.end.as_ref(), b"k010");
    }
}

#[test]
fn a_whole_cluster_restart_keeps_every_acknowledged_write() {
    let mut c = Cluster::new(3);
    let mut last = 0;
    for i in 0..300u64 {
        // Enough to freeze and flush a few memtables: the restart replays the log above what
        // each replica flushed.
        last = c.put(format!("k{i:04}").as_bytes(), 10 + i, &[b'v'; 100]);
    }
    c.wait_applied_everywhere(last);
    let before = dump(&c.nodes[&1].engine);
    for id in 1..=3 {
        c.kill(id);
    }
    for id in 1..=3 {
        c.start(id);
    }
    let after_restart = c.put(b"zzzz", 5000, b"after");
    c.wait_applied_everywhere(after_restart);
    assert_replicas_agree(&c);
    let (_, _, rows) = dump(&c.nodes[&1].engine);
    assert_eq!(rows.len(), before.2.len() + 1);
    for row in &before.2 {
        assert!(rows.contains(row), "lost {row:?}");
    }
}

#[test]
fn a_proposal_above_the_entry_size_limit_is_refused_and_nothing_applies() {
    let c = Cluster::new(3);
    let leader = c.wait_leader(REGION);
    let before = c.nodes[&leader]
        .engine
        .shard_info(REGION)
        .unwrap()
        .write_sequence;
    let mut batch = WriteBatch::new();
    // The default limit is 8 MiB.
    batch.put(ColumnFamily::Write, b"big", 10, b"", &vec![7u8; 9 << 20]);
    let err = c
        .router(leader)
        .write(REGION, None, &batch, TIMEOUT)
        .unwrap_err();
    assert!(
        matches!(&err, RaftStoreError::InvalidCommand { detail, .. } if detail.contains("raft.max-entry-size")),
        "{err}"
    );
    assert_eq!(
        c.nodes[&leader]
            .engine
            .shard_info(REGION)
            .unwrap()
            .write_sequence,
        before
    );
}

/// Store `id`'s read point `at` covers the write acknowledged at `acked`, and the store answered
/// only once it applied that far.
fn assert_read_point(c: &Cluster, id: u64, at: u64, acked: u64) {
    assert!(
        at >= acked,
        "store {id}'s read point {at} below the write at {acked}"
    );
    let applied = c.nodes[&id]
        .engine
        .shard_info(REGION)
        .unwrap()
        .write_sequence;
    assert!(
        applied >= at,
        "store {id} answered at {at} having applied {applied}"
    );
}

#[test]
fn a_read_index_covers_every_acknowledged_write_and_only_the_leader_gives_one() {
    let c = Cluster::new(3);
    let acked = c.put(b"r", 10, b"1");
    let leader = c.wait_leader(REGION);
    let at = c.router(leader).read_index(REGION, TIMEOUT).unwrap();
    assert_read_point(&c, leader, at, acked);
    // A follower refuses (its lock checks and max_ts are not the leader's), naming the leader.
    let follower = *c.nodes.keys().find(|id| **id != leader).unwrap();
    match c.router(follower).read_index(REGION, TIMEOUT) {
        Err(RaftStoreError::NotLeader { leader: hint, .. }) => {
            assert_eq!(hint, Some(leader), "the follower's hint")
        }
        other => panic!("a follower gave a read index: {other:?}"),
    }
}

#[test]
fn an_isolated_leader_cannot_confirm_a_read_while_the_majority_takes_writes() {
    let c = Cluster::new(3);
    c.put(b"x", 10, b"1");
    let old = c.wait_leader(REGION);
    c.net.partition(&[&[old]]);
    // The majority elects a leader and takes a write the old leader never sees.
    let new = c.wait_leader_other_than(REGION, old);
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Write, b"z", 12, b"", b"2");
    c.router(new).write(REGION, None, &batch, TIMEOUT).unwrap();
    // The old leader may still believe it leads, but a read needs a quorum's heartbeat answer.
    let r = c.router(old).read_index(REGION, Duration::from_secs(3));
    assert!(
        matches!(
            r,
            Err(RaftStoreError::NotLeader { .. } | RaftStoreError::Timeout { .. })
        ),
        "an isolated old leader confirmed a read: {r:?}"
    );
}

#[test]
fn a_replica_behind_the_truncated_log_catches_up_by_snapshot_without_copying_a_file() {
    let mut c = Cluster::new(3);
    c.put(b"a", 10, b"first");
    let leader = c.wait_leader(REGION);
    let victim = *c.nodes.keys().find(|id| **id != leader).unwrap();
    let victim_applied = c.nodes[&victim]
        .engine
        .shard_info(REGION)
        .unwrap()
        .write_sequence;
    c.kill(victim);
    // 16 KiB memtables: these writes freeze and flush several times; then the leader flushes
    // the rest and its log GC truncates past everything the victim has.
    let mut last = 0;
    for i in 0..400u64 {
        last = c.put(format!("k{i:04}").as_bytes(), 100 + i, &[b'v'; 100]);
    }
    let leader = c.wait_leader(REGION);
    c.nodes[&leader].engine.flush_shard(REGION).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let truncated = c.nodes[&leader].log.state(REGION).unwrap().truncated_index;
        if truncated > victim_applied + 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the leader never truncated its log past index {victim_applied} (truncated at {truncated})"
        );
        // Writes keep the log GC's threshold within reach.
        last = c.put(b"tick", 1000, b"x");
        std::thread::sleep(Duration::from_millis(50));
    }
    c.start(victim);
    last = last.max(c.put(b"z", 2000, b"after restart"));
    c.wait_applied_everywhere(last);
    assert_replicas_agree(&c);
    let restarted = &c.nodes[&victim];
    assert_eq!(
        restarted.dfs.stats(DfsOp::Put).calls,
        0,
        "the restarted replica wrote files instead of referencing the leader's"
    );
    let truncated = restarted.log.state(REGION).unwrap().truncated_index;
    assert!(
        truncated > victim_applied,
        "the restarted replica's log starts at {truncated}: it replayed entries instead of installing a snapshot"
    );
    // The file lists (a replica's own properties, such as the snapshot it installed, aside).
    assert_eq!(
        restarted.engine.shard_files(REGION).unwrap().to_snapshot(),
        c.nodes[&leader]
            .engine
            .shard_files(REGION)
            .unwrap()
            .to_snapshot(),
        "the snapshot's file list differs from the leader's"
    );
}

#[test]
fn a_split_a_down_voter_missed_stays_in_the_log_across_restarts_of_the_others() {
    let mut c = Cluster::new(3);
    for i in 0..20u64 {
        c.put(format!("k{i:03}").as_bytes(), 10 + i, b"v");
    }
    let leader = c.wait_leader(REGION);
    let victim = *c.nodes.keys().find(|id| **id != leader).unwrap();
    c.kill(victim);
    c.nodes[&leader].engine.flush_shard(REGION).unwrap();
    let ver = c.nodes[&leader].engine.shard_info(REGION).unwrap().ver;
    let split_index = c
        .router(leader)
        .split(REGION, ver, b"k010", 2, TIMEOUT)
        .unwrap()
        .index;
    // Both live stores restart, one at a time (the other keeps the quorum with it): what they
    // knew of the split in memory is gone, the log still holds it.
    let live: Vec<u64> = c.nodes.keys().copied().collect();
    for id in live {
        c.kill(id);
        c.start(id);
        c.wait_leader(REGION);
    }
    // Enough flushed writes to the left half for the log GC to truncate far past the split.
    for i in 0..400u64 {
        c.put(format!("a{i:04}").as_bytes(), 100 + i, &[b'v'; 100]);
    }
    let leader = c.wait_leader(REGION);
    c.nodes[&leader].engine.flush_shard(REGION).unwrap();
    let until = Instant::now() + Duration::from_secs(2);
    let mut last = 0;
    while Instant::now() < until {
        last = c.put(b"a_tick", 1000, b"x");
        std::thread::sleep(Duration::from_millis(50));
    }
    for (id, n) in &c.nodes {
        let truncated = n.log.state(REGION).unwrap().truncated_index;
        assert!(
            truncated < split_index,
            "store {id} truncated its log at {truncated}, past the split at {split_index} the down store never appended"
        );
    }
    // The down store comes back, appends the split from the log, and serves both halves.
    c.start(victim);
    c.wait_applied_everywhere(last);
    let right = c.nodes[&victim].engine.shard_info(2).unwrap();
    assert_eq!(right.start.as_ref(), b"k010");
    assert_eq!(
        c.nodes[&victim]
            .engine
            .shard_info(REGION)
            .unwrap()
            .end
            .as_ref(),
        b"k010"
    );
}

/// The split child's leader reaches a store before the parent's split does, and the store
/// gets both in one round: the child's message makes an empty replica there (its ready taken
/// first), then the parent's split, applied in the same round, replaces that replica. The
/// round must not advance the empty replica's ready on the split's peer (raft-rs panicked and
/// the store halted), nor write its hard state over the split's, and the replica the split
/// made keeps the term the empty one had learned.
#[test]
fn a_split_applied_in_the_round_its_childs_leader_first_reached_the_store_replaces_the_empty_replica()
 {
    const RIGHT: u64 = 2;
    let c = Cluster::new(3);
    for i in 0..20u64 {
        c.put(format!("k{i:03}").as_bytes(), 10 + i, b"v");
    }
    let leader = c.wait_leader(REGION);
    let lagging = *c.nodes.keys().find(|id| **id != leader).unwrap();
    // Everything the parent and the child send the lagging store is held back.
    let held = Arc::new(std::sync::Mutex::new(Vec::new()));
    {
        let held = held.clone();
        c.net.drop_if(move |m| {
            let hold = m.to_store == lagging && (m.region_id == REGION || m.region_id == RIGHT);
            if hold {
                held.lock().unwrap().push(m.clone());
            }
            hold
        });
    }
    c.nodes[&leader].engine.flush_shard(REGION).unwrap();
    let ver = c.nodes[&leader].engine.shard_info(REGION).unwrap().ver;
    let split_index = c
        .router(leader)
        .split(REGION, ver, b"k010", RIGHT, TIMEOUT)
        .unwrap()
        .index;
    // A write to the left half after the split: its append tells the lagging store that the
    // split committed.
    c.put(b"a", 100, b"left");
    let right_leader = c.wait_leader(RIGHT);
    let child_term = c.router(right_leader).status(RIGHT).unwrap().term;
    let from_child_leader = |m: &wire::raft::RaftMessage| {
        m.region_id == RIGHT
            && m.message.as_ref().is_some_and(|msg| {
                matches!(
                    msg.msg_type(),
                    wire::raft::MessageType::MsgAppend | wire::raft::MessageType::MsgHeartbeat
                ) && msg.term == child_term
            })
    };
    let deadline = Instant::now() + TIMEOUT;
    while !held.lock().unwrap().iter().any(from_child_leader) {
        assert!(
            Instant::now() < deadline,
            "the child's leader sent the lagging store nothing"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(c.nodes[&lagging].log.state(RIGHT).is_none());
    // One delivery, one round: the child's message makes the empty replica, the parent's
    // appends commit the split, applied after this round's log write.
    let msgs = std::mem::take(&mut *held.lock().unwrap());
    c.router(lagging).deliver_batch(msgs);
    let deadline = Instant::now() + TIMEOUT;
    let state = loop {
        if let Some(state) = c.nodes[&lagging].log.state(RIGHT) {
            break state;
        }
        assert!(
            Instant::now() < deadline,
            "the lagging store never applied the split"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(state.truncated_index, split_index);
    assert!(
        state.hard_state.term >= child_term && state.hard_state.commit >= split_index,
        "the split's replica must keep the term its empty replica learned ({child_term}) and commit the split ({split_index}): {:?}",
        state.hard_state
    );
    assert_eq!(c.router(lagging).stopped(), None);
    // The network heals: the replica the split made follows the child's leader.
    c.net.heal();
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Write, b"k015", 200, b"", b"right");
    let right_leader = c.wait_leader(RIGHT);
    let index = c
        .router(right_leader)
        .write(RIGHT, None, &batch, TIMEOUT)
        .unwrap()
        .index;
    let deadline = Instant::now() + TIMEOUT;
    while c.nodes[&lagging]
        .engine
        .shard_info(RIGHT)
        .map_or(0, |i| i.write_sequence)
        < index
    {
        assert!(
            Instant::now() < deadline,
            "the lagging store never applied the child's write: {:?}",
            c.router(lagging).stopped()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(c.router(lagging).stopped(), None);
}

#[test]
fn a_replica_that_crashed_between_a_snapshots_engine_install_and_its_log_truncation_starts_and_catches_up()
 {
    let mut c = Cluster::new(3);
    c.put(b"a", 10, b"first");
    let leader = c.wait_leader(REGION);
    let victim = *c.nodes.keys().find(|id| **id != leader).unwrap();
    c.kill(victim);
    for i in 0..400u64 {
        c.put(format!("k{i:04}").as_bytes(), 100 + i, &[b'v'; 100]);
    }
    let leader = c.wait_leader(REGION);
    c.nodes[&leader].engine.flush_shard(REGION).unwrap();
    // The engine half of the snapshot the leader would send, then a "crash" before the log
    // half: the victim's engine is ahead of its log.
    let cs = c.nodes[&leader].engine.raft_snapshot(REGION).unwrap();
    let Some(changeset::Change::Snapshot(files)) = &cs.change else {
        panic!("not a snapshot: {cs:?}")
    };
    let index = files.data_sequence;
    let term = c.nodes[&leader].log.term(REGION, index).unwrap();
    {
        let dfs = Arc::new(FaultDfs::new(
            LocalDfs::open(c.dir.path().join("dfs")).unwrap(),
        ));
        let (engine, log) = open_store(&c.store_dir(victim), victim, dfs);
        assert!(
            log.state(REGION).unwrap().last_index < index,
            "the log is behind the snapshot"
        );
        raftstore::snapshot_install::install_in_engine(&engine, index, term, &cs).unwrap();
        engine.close(false).unwrap();
    }
    c.start(victim);
    let state = c.nodes[&victim].log.state(REGION).unwrap();
    assert_eq!(
        (state.truncated_index, state.truncated_term),
        (index, term),
        "the log half of the install was completed at start"
    );
    let last = c.put(b"z", 2000, b"after restart");
    c.wait_applied_everywhere(last);
    assert_replicas_agree(&c);
}

// ---- hibernation ----

impl Cluster {
    /// Waits until every live store's replica of `region` sleeps.
    fn wait_asleep(&self, region: u64) {
        let deadline = Instant::now() + TIMEOUT;
        while !self.nodes.values().all(|n| {
            n.store
                .router()
                .status(region)
                .is_some_and(|s| s.hibernating)
        }) {
            let statuses: Vec<_> = self
                .nodes
                .iter()
                .map(|(id, n)| (*id, n.store.router().status(region)))
                .collect();
            assert!(
                Instant::now() < deadline,
                "region {region} never fell asleep: {statuses:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Raft messages delivered during `window`.
    fn raft_messages_during(&self, window: Duration) -> u64 {
        let before = self.raft_messages.load(Ordering::Relaxed);
        std::thread::sleep(window);
        self.raft_messages.load(Ordering::Relaxed) - before
    }
}

/// Ten election timeouts at the test's 20 ms ticks.
const QUIET: Duration = Duration::from_secs(2);

#[test]
fn an_idle_region_falls_asleep_on_every_replica_and_sends_no_raft_message() {
    let c = Cluster::new(3);
    c.put(b"x", 10, b"1");
    let awake = c.raft_messages_during(QUIET);
    assert!(awake > 0, "an awake region heartbeats");
    c.wait_asleep(REGION);
    let asleep = c.raft_messages_during(QUIET);
    assert_eq!(
        asleep, 0,
        "a sleeping region sent Raft messages (awake: {awake})"
    );
}

#[test]
fn a_write_wakes_a_sleeping_region_and_it_falls_asleep_again() {
    let c = Cluster::new(3);
    c.put(b"x", 10, b"1");
    c.wait_asleep(REGION);
    let leader = c.wait_leader(REGION);
    let term = c.router(leader).status(REGION).unwrap().term;
    let index = c.put(b"y", 11, b"2");
    c.wait_applied_everywhere(index);
    assert_replicas_agree(&c);
    assert_eq!(
        c.wait_leader(REGION),
        leader,
        "a wake-up is not an election"
    );
    assert_eq!(c.router(leader).status(REGION).unwrap().term, term);
    c.wait_asleep(REGION);
}

#[test]
fn a_sleeping_region_elects_a_new_leader_once_the_leaders_store_dies() {
    let mut c = Cluster::new(3);
    c.put(b"x", 10, b"1");
    c.wait_asleep(REGION);
    let old = c.wait_leader(REGION);
    c.kill(old);
    let started = Instant::now();
    let index = c.put(b"y", 11, b"2");
    let new = c.wait_leader(REGION);
    assert_ne!(new, old);
    eprintln!(
        "a sleeping region took writes {:?} after its leader died",
        started.elapsed()
    );
    c.start(old);
    c.wait_applied_everywhere(index);
    assert_replicas_agree(&c);
}

#[test]
fn a_restarted_follower_does_not_depose_the_leader_of_a_sleeping_region() {
    let mut c = Cluster::new(3);
    c.put(b"x", 10, b"1");
    c.wait_asleep(REGION);
    let leader = c.wait_leader(REGION);
    let term = c.router(leader).status(REGION).unwrap().term;
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    c.kill(follower);
    c.start(follower);
    // The restarted replica ticks and, hearing no heartbeat, asks for pre-votes: they wake
    // the leader, whose heartbeats make it a follower again, in the same term.
    std::thread::sleep(QUIET);
    assert_eq!(c.wait_leader(REGION), leader);
    assert_eq!(c.router(leader).status(REGION).unwrap().term, term);
    let index = c.put(b"y", 11, b"2");
    c.wait_applied_everywhere(index);
    assert_replicas_agree(&c);
}

/// A leader's side of follower reads that records what it was asked and reports a lock on any
/// range that holds `locked_key`.
#[derive(Default)]
struct RecordingCheck {
    asked: std::sync::Mutex<Vec<(u64, u64, Vec<wire::coprocessor::KeyRange>)>>,
    locked_key: Option<Vec<u8>>,
}

impl raftstore::ReplicaReadCheck for RecordingCheck {
    fn check(
        &self,
        region_id: u64,
        start_ts: u64,
        ranges: &[wire::coprocessor::KeyRange],
    ) -> Option<wire::coprocessor::LockInfo> {
        self.asked
            .lock()
            .unwrap()
            .push((region_id, start_ts, ranges.to_vec()));
        let key = self.locked_key.as_ref()?;
        ranges
            .iter()
            .any(|r| r.start.as_slice() <= key.as_slice() && (r.end.is_empty() || key < &r.end))
            .then(|| wire::coprocessor::LockInfo {
                key: key.clone(),
                primary_lock: key.clone(),
                lock_version: start_ts - 1,
                ..wire::coprocessor::LockInfo::default()
            })
    }
}

fn replica_read(start_ts: u64, start: &[u8], end: &[u8]) -> raftstore::ReplicaRead {
    raftstore::ReplicaRead {
        start_ts,
        ranges: vec![wire::coprocessor::KeyRange {
            start: start.to_vec(),
            end: end.to_vec(),
        }],
    }
}

/// Installs one check per store; returns them by store id.
fn install_checks(c: &Cluster, locked_key: Option<&[u8]>) -> HashMap<u64, Arc<RecordingCheck>> {
    c.nodes
        .iter()
        .map(|(id, n)| {
            let check = Arc::new(RecordingCheck {
                locked_key: locked_key.map(<[u8]>::to_vec),
                ..RecordingCheck::default()
            });
            n.store.set_replica_read_check(check.clone());
            (*id, check)
        })
        .collect()
}

#[test]
fn a_follower_serves_a_replica_read_once_the_leader_checked_it_and_it_applied_every_acknowledged_write()
 {
    let c = Cluster::new(3);
    let checks = install_checks(&c, None);
    let acked = c.put(b"r", 10, b"1");
    let leader = c.wait_leader(REGION);
    let follower = *c.nodes.keys().find(|id| **id != leader).unwrap();
    let at = c
        .router(follower)
        .replica_read_index(REGION, replica_read(50, b"a", b"z"), TIMEOUT)
        .unwrap();
    assert_read_point(&c, follower, at, acked);
    // The leader checked the read with its start_ts and ranges; nobody else was asked.
    let asked = checks[&leader].asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        vec![(REGION, 50, replica_read(50, b"a", b"z").ranges)]
    );
    for (id, check) in &checks {
        if *id != leader {
            assert!(
                check.asked.lock().unwrap().is_empty(),
                "store {id} was asked"
            );
        }
    }
    // A replica read on the leader is its own read: nothing to forward, nothing to check.
    let on_leader = c
        .router(leader)
        .replica_read_index(REGION, replica_read(60, b"", b""), TIMEOUT)
        .unwrap();
    assert!(on_leader >= acked);
    assert_eq!(checks[&leader].asked.lock().unwrap().len(), 1);
}

#[test]
fn a_lock_the_leader_holds_in_the_ranges_blocks_a_follower_read_and_others_pass() {
    let c = Cluster::new(3);
    install_checks(&c, Some(b"m"));
    c.put(b"r", 10, b"1");
    let leader = c.wait_leader(REGION);
    let follower = *c.nodes.keys().find(|id| **id != leader).unwrap();
    match c
        .router(follower)
        .replica_read_index(REGION, replica_read(70, b"a", b"z"), TIMEOUT)
    {
        Err(RaftStoreError::ReadLocked {
            region_id,
            start_ts,
            lock,
        }) => {
            assert_eq!((region_id, start_ts), (REGION, 70));
            assert_eq!(lock.key, b"m".to_vec());
            assert_eq!(lock.lock_version, 69);
        }
        other => panic!("a read over the leader's lock was allowed: {other:?}"),
    }
    // Ranges clear of the lock read on.
    c.router(follower)
        .replica_read_index(REGION, replica_read(70, b"n", b"z"), TIMEOUT)
        .unwrap();
}

#[test]
fn a_replica_read_on_a_sleeping_region_wakes_it_and_is_served_by_the_follower() {
    let c = Cluster::new(3);
    let checks = install_checks(&c, None);
    let acked = c.put(b"r", 10, b"1");
    c.wait_asleep(REGION);
    let leader = c.wait_leader(REGION);
    let follower = *c.nodes.keys().find(|id| **id != leader).unwrap();
    let at = c
        .router(follower)
        .replica_read_index(REGION, replica_read(90, b"", b""), TIMEOUT)
        .unwrap();
    assert!(at >= acked, "read point {at} below the write at {acked}");
    assert_eq!(checks[&leader].asked.lock().unwrap().len(), 1);
}

#[test]
fn a_follower_refuses_a_replica_read_its_leader_did_not_check() {
    let c = Cluster::new(3);
    c.put(b"r", 10, b"1");
    let leader = c.wait_leader(REGION);
    let follower = *c.nodes.keys().find(|id| **id != leader).unwrap();
    match c
        .router(follower)
        .replica_read_index(REGION, replica_read(80, b"", b""), TIMEOUT)
    {
        Err(RaftStoreError::ReadNotChecked { leader: hint, .. }) => {
            assert_eq!(hint, Some(leader), "the refusal names the leader")
        }
        other => panic!("an unchecked follower read was allowed: {other:?}"),
    }
}

// ---- file GC across replicas ----

impl Cluster {
    /// Every file id in the shared object store.
    fn stored(&self) -> BTreeSet<u64> {
        let node = self.nodes.values().next().unwrap();
        node.dfs
            .list()
            .unwrap()
            .into_iter()
            .map(|f| f.get())
            .collect()
    }

    /// Writes and flushes twice through the leader: the region holds two L0 files (fewer than
    /// the engine's compaction trigger). Returns the leader and the region's files.
    fn two_flushed_files(&self) -> (u64, BTreeSet<u64>) {
        for round in 0..2u64 {
            for i in 0..40u64 {
                self.put(
                    format!("k{i:03}").as_bytes(),
                    10 + round * 100 + i,
                    &[b'v'; 100],
                );
            }
            let leader = self.wait_leader(REGION);
            self.nodes[&leader].engine.flush_shard(REGION).unwrap();
        }
        let leader = self.wait_leader(REGION);
        let files = self.nodes[&leader].engine.shard_table_ids(REGION).unwrap();
        assert_eq!(files.len(), 2, "two flushes, two L0 files: {files:?}");
        (leader, files)
    }

    /// Compacts the region on `leader` (it proposes and waits for the entry to apply there).
    /// Returns the index of the last compaction entry.
    fn compact(&self, leader: u64) -> u64 {
        let engine = &self.nodes[&leader].engine;
        assert!(engine.compact_shard(REGION, true).unwrap() >= 1);
        engine.shard_info(REGION).unwrap().meta_seq
    }

    /// Waits until the stores `ids` applied `index`.
    fn wait_applied_on(&self, ids: &[u64], index: u64) {
        let deadline = Instant::now() + TIMEOUT;
        for id in ids {
            while self.nodes[id]
                .engine
                .shard_info(REGION)
                .unwrap()
                .write_sequence
                < index
            {
                assert!(
                    Instant::now() < deadline,
                    "store {id} never applied {index}"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// Checks for `window`, collecting garbage on every store now and then, that every one
    /// of `files` stays in the object store.
    fn assert_kept_for(&self, files: &BTreeSet<u64>, window: Duration, why: &str) {
        let until = Instant::now() + window;
        while Instant::now() < until {
            for n in self.nodes.values() {
                n.engine.collect_garbage();
            }
            let stored = self.stored();
            assert!(
                files.is_subset(&stored),
                "{why}, yet deleted: {:?}",
                files.difference(&stored).collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until none of `files` is in the object store.
    fn wait_deleted(&self, files: &BTreeSet<u64>, why: &str) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            for n in self.nodes.values() {
                n.engine.collect_garbage();
            }
            let stored = self.stored();
            if files.is_disjoint(&stored) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{why}, yet still stored: {:?}",
                files.intersection(&stored).collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn a_compactions_inputs_stay_while_a_cut_off_follower_has_not_applied_it() {
    let c = Cluster::new(3);
    let (leader, inputs) = c.two_flushed_files();
    let victim = *c.nodes.keys().find(|id| **id != leader).unwrap();
    let others: Vec<u64> = c.nodes.keys().copied().filter(|id| *id != victim).collect();
    c.net.partition(&[&[victim]]);
    let retired_at = c.compact(leader);
    let now: BTreeSet<u64> = c.nodes[&leader].engine.shard_table_ids(REGION).unwrap();
    assert!(
        inputs.is_disjoint(&now),
        "the compaction replaced the inputs"
    );
    c.wait_applied_on(&others, retired_at);
    c.assert_kept_for(
        &inputs,
        Duration::from_secs(1),
        "the cut-off follower still names the inputs",
    );
    let victim_applied = c.nodes[&victim]
        .engine
        .shard_info(REGION)
        .unwrap()
        .write_sequence;
    assert!(
        victim_applied < retired_at,
        "the victim applied {victim_applied}"
    );
    c.net.heal();
    c.wait_applied_everywhere(retired_at);
    c.wait_deleted(&inputs, "every replica applied the compaction");
    let live = c.nodes[&leader].engine.live_file_ids();
    assert!(live.is_subset(&c.stored()), "a live file was deleted");
    // The followers learn the group index from the leader's next messages.
    let deadline = Instant::now() + TIMEOUT;
    for (id, n) in &c.nodes {
        while n.engine.file_gc_group_index(REGION) < retired_at {
            assert!(
                Instant::now() < deadline,
                "store {id} never learned the group index"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    assert_replicas_agree(&c);
}

/// A follower serving a read holds a snapshot of the inputs: they stay until it is dropped,
/// and the region, asleep meanwhile, reports that without waking (a `FileGc` extra message).
#[test]
fn a_followers_snapshot_keeps_the_inputs_until_dropped_even_while_the_region_sleeps() {
    let c = Cluster::new(3);
    let (leader, inputs) = c.two_flushed_files();
    let reader = *c.nodes.keys().find(|id| **id != leader).unwrap();
    let snap = c.nodes[&reader].engine.snapshot(REGION).unwrap();
    let retired_at = c.compact(leader);
    c.wait_applied_everywhere(retired_at);
    c.wait_asleep(REGION);
    c.assert_kept_for(
        &inputs,
        Duration::from_secs(1),
        "a follower's snapshot reads the inputs",
    );
    let got = snap
        .get(ColumnFamily::Write, b"k007", u64::MAX)
        .unwrap()
        .unwrap();
    assert_eq!(got.value.as_ref(), &[b'v'; 100][..]);
    drop(snap);
    c.wait_deleted(&inputs, "the snapshot was dropped");
    for (id, n) in &c.nodes {
        assert!(
            n.store.router().status(REGION).unwrap().hibernating,
            "store {id} woke to report"
        );
    }
}

impl Cluster {
    /// Proposes `change` through the region's current leader, retrying while leadership moves.
    fn change_peer(&self, change: ChangePeer) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let leader = self.wait_leader(REGION);
            match self.router(leader).change_peer(REGION, change, TIMEOUT) {
                Ok(_) => return,
                Err(
                    e @ (RaftStoreError::NotLeader { .. } | RaftStoreError::StaleCommand { .. }),
                ) => {
                    assert!(Instant::now() < deadline, "{change:?} kept failing: {e}");
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("{change:?} failed: {e}"),
            }
        }
    }

    /// Waits until every replica listed in `stores` reports the same conf index (the
    /// region's conf_ver), above `above`; that index. The status is published at the end of
    /// the round that applied the change, so it is waited for.
    fn wait_conf_index(&self, stores: &[u64], above: u64) -> u64 {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let seen: Vec<u64> = stores
                .iter()
                .map(|id| self.router(*id).status(REGION).map_or(0, |s| s.conf_index))
                .collect();
            if seen[0] > above && seen.iter().all(|c| *c == seen[0]) {
                return seen[0];
            }
            assert!(
                Instant::now() < deadline,
                "stores {stores:?} report conf indexes {seen:?}, expected one above {above}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until store `id` holds the region and applied `index`.
    fn wait_replica_applied(&self, id: u64, index: u64) {
        let deadline = Instant::now() + TIMEOUT;
        while self.nodes[&id]
            .engine
            .shard_info(REGION)
            .map_or(true, |i| i.write_sequence < index)
        {
            assert!(
                Instant::now() < deadline,
                "store {id} never got the region up to index {index}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn a_replica_moves_to_a_new_store_by_learner_snapshot_promotion_and_removal() {
    let mut c = Cluster::new(3);
    // Part of the data in files (the snapshot names them), part only in the log.
    for i in 0..200u64 {
        c.put(format!("k{i:04}").as_bytes(), 100 + i, &[b'v'; 100]);
    }
    let leader = c.wait_leader(REGION);
    c.nodes[&leader].engine.flush_shard(REGION).unwrap();
    let mut last = 0;
    for i in 200..220u64 {
        last = c.put(format!("k{i:04}").as_bytes(), 100 + i, b"in the log");
    }
    c.join(4);
    assert!(
        c.nodes[&4].engine.shard_ids().is_empty(),
        "a joining store holds no region before it is added"
    );
    let initial: Vec<u64> = (1..=3)
        .map(|id| {
            c.router(id)
                .status(REGION)
                .map_or(u64::MAX, |s| s.conf_index)
        })
        .collect();
    assert_eq!(
        initial,
        vec![0, 0, 0],
        "the initial members have conf_ver 0"
    );
    c.change_peer(ChangePeer::AddLearner { store: 4 });
    c.wait_replica_applied(4, last);
    let leader = c.wait_leader(REGION);
    let members = c.router(leader).membership(REGION).unwrap();
    assert_eq!((members.voters, members.learners), (vec![1, 2, 3], vec![4]));
    // Every replica, the learner's snapshot included, agrees on the new conf_ver.
    let added = c.wait_conf_index(&[1, 2, 3, 4], 0);
    assert_eq!(
        c.nodes[&4].dfs.stats(DfsOp::Put).calls,
        0,
        "the new replica wrote files instead of referencing the leader's"
    );
    // A learner is not a voter: a refused double add says so and changes nothing.
    let again = c
        .router(leader)
        .change_peer(REGION, ChangePeer::AddLearner { store: 4 }, TIMEOUT);
    assert!(
        matches!(again, Err(RaftStoreError::InvalidCommand { .. })),
        "{again:?}"
    );
    c.change_peer(ChangePeer::Promote { store: 4 });
    let promoted = c.wait_conf_index(&[1, 2, 3, 4], added);
    // Store 1 leaves: its leadership first, if it has it.
    c.lead_elsewhere_than(1);
    c.change_peer(ChangePeer::Remove { store: 1 });
    let deadline = Instant::now() + TIMEOUT;
    while !c.nodes[&1].engine.shard_ids().is_empty() || c.nodes[&1].log.state(REGION).is_some() {
        assert!(
            Instant::now() < deadline,
            "the removed replica on store 1 never left"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let leader = c.wait_leader(REGION);
    let members = c.router(leader).membership(REGION).unwrap();
    assert_eq!((members.voters, members.learners), (vec![2, 3, 4], vec![]));
    // Store 1 is gone for good; 2, 3 and 4 take writes and agree, and store 4 keeps
    // everything across a restart.
    c.kill(1);
    let last = c.put(b"after the move", 5000, b"x");
    c.wait_applied_everywhere(last);
    assert_replicas_agree(&c);
    let removed = c.wait_conf_index(&[2, 3, 4], promoted);
    c.kill(4);
    c.join(4);
    let last = c.put(b"after the restart", 6000, b"y");
    c.wait_applied_everywhere(last);
    assert_replicas_agree(&c);
    assert_eq!(
        c.wait_conf_index(&[2, 3, 4], promoted),
        removed,
        "a restart keeps the conf_ver"
    );
    let (_, _, rows) = dump(&c.nodes[&4].engine);
    assert_eq!(rows.len(), 222, "store 4 lost rows: {rows:?}");
}

impl Cluster {
    /// Waits until store `id` no longer holds the region (its replica left).
    fn wait_replica_gone(&self, id: u64) {
        let deadline = Instant::now() + TIMEOUT;
        while self.nodes[&id].engine.shard_ids().contains(&REGION) {
            assert!(
                Instant::now() < deadline,
                "the removed replica on store {id} never left"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until the region's leader is not `id`, moving it away when it is. raft-rs drops
    /// a transfer whose target does not catch up within an election timeout (a loaded
    /// machine), so it is asked again until one goes through.
    fn lead_elsewhere_than(&self, id: u64) {
        let deadline = Instant::now() + TIMEOUT;
        while self.wait_leader(REGION) == id {
            assert!(Instant::now() < deadline, "store {id} kept the leadership");
            let to = *self.nodes.keys().find(|s| **s != id).unwrap();
            self.router(id).transfer_leader(REGION, to);
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

#[test]
fn a_replica_removed_and_added_again_does_not_replay_its_own_old_removal() {
    let mut c = Cluster::new(3);
    for i in 0..50u64 {
        c.put(format!("k{i:04}").as_bytes(), 100 + i, b"v");
    }
    let leader = c.wait_leader(REGION);
    c.nodes[&leader].engine.flush_shard(REGION).unwrap();
    c.join(4);
    c.change_peer(ChangePeer::AddLearner { store: 4 });
    c.change_peer(ChangePeer::Promote { store: 4 });
    c.lead_elsewhere_than(4);
    c.change_peer(ChangePeer::Remove { store: 4 });
    c.wait_replica_gone(4);
    // No flush since: the next snapshot stands for an index below the removal, which store
    // 4's new replica then finds in the log it replays.
    let mut last = 0;
    for i in 50..60u64 {
        last = c.put(format!("k{i:04}").as_bytes(), 100 + i, b"after the removal");
    }
    // A message still in flight for the removed replica does not make it again for a while.
    std::thread::sleep(Duration::from_secs(4));
    c.change_peer(ChangePeer::AddLearner { store: 4 });
    c.wait_replica_applied(4, last);
    c.change_peer(ChangePeer::Promote { store: 4 });
    let last = c.put(b"after the second add", 5000, b"x");
    c.wait_applied_everywhere(last);
    assert_replicas_agree(&c);
    let leader = c.wait_leader(REGION);
    let members = c.router(leader).membership(REGION).unwrap();
    assert_eq!(members.voters, vec![1, 2, 3, 4]);
    // A restart replays the log from the flushed point: the old removal is skipped again.
    c.kill(4);
    c.join(4);
    let last = c.put(b"after the restart", 6000, b"y");
    c.wait_applied_everywhere(last);
    assert_replicas_agree(&c);
    assert_eq!(
        c.router(4).membership(REGION).map(|m| m.voters),
        Some(vec![1, 2, 3, 4])
    );
}

/// A follower serves reads from files its leader compacted: it takes the compaction's GC safe
/// point with the ChangeSet, before the files are visible, so its own check refuses reads
/// below it even before its placement-driver heartbeat says so; a snapshot carries it too.
#[test]
fn followers_take_the_safe_point_a_compaction_or_a_snapshot_dropped_versions_at() {
    let c = Cluster::new(3);
    for i in 0..50u64 {
        c.put(format!("k{i:03}").as_bytes(), 10 + i, b"v");
    }
    let leader = c.wait_leader(REGION);
    let safe_point = 1_000;
    c.nodes[&leader].engine.set_gc_safe_point(safe_point);
    c.nodes[&leader].engine.flush_shard(REGION).unwrap();
    c.nodes[&leader].engine.compact_shard(REGION, true).unwrap();
    let last = c.put(b"after", 2_000, b"x");
    c.wait_applied_everywhere(last);
    for (id, n) in &c.nodes {
        assert!(
            n.engine.gc_safe_point() >= safe_point,
            "store {id} applied the compaction with safe point {}",
            n.engine.gc_safe_point()
        );
    }
    // A replica that starts from a snapshot gets it from the snapshot.
    let follower = *c.nodes.keys().find(|id| **id != leader).unwrap();
    let snap = c.nodes[&leader].engine.raft_snapshot(REGION).unwrap();
    assert_eq!(
        snap.properties
            .get(kvengine::GC_SAFE_POINT_PROPERTY)
            .map(|b| u64::from_be_bytes(b.as_slice().try_into().unwrap())),
        Some(c.nodes[&leader].engine.gc_safe_point()),
        "store {follower}'s snapshot would not carry the safe point"
    );
}
