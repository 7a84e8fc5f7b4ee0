//! A replicated log in miniature, for tests of `LogMode::External`: three engines (replica 0
//! leads every shard) on one shared object store, each behind its own `FaultDfs` so that puts
//! are counted per engine, and a test-driven "log" that gives every entry its index and applies
//! it to every replica in turn. Include it with
//! `#[path = "common/replicas.rs"] mod replicas;`.
//!
//! The leader's jobs reach the log through [`LeaderSink`]: a Freeze request is queued until the
//! test delivers it, a ChangeSet proposal blocks the job until the test appends it as an entry
//! (or drops it). Nothing is applied behind the test's back: the engines run no background
//! compaction, and a flush only proposes. Every check can therefore compare exact states.

#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender, channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use changeset::{ChangeSet, ShardFiles};
use kvengine::manifest::Manifest;
use kvengine::{
    ApplyOutcome, ChangeSetSink, ColumnFamily, DfsOp, Engine, EngineOptions, FaultDfs, LocalDfs,
    LogMode, SinkError, WriteBatch,
};

/// How long a test waits for the leader's flush thread to propose before it fails.
pub const PROPOSAL_WAIT: Duration = Duration::from_secs(20);

/// One entry of a shard's log.
#[derive(Clone, Debug)]
pub enum Entry {
    Write(WriteBatch),
    Noop,
    Freeze,
    ChangeSet(ChangeSet),
    Split { key: Vec<u8>, right_id: u64 },
}

/// Applies `entry`, the log entry `index` of shard `shard_id`, to `engine`. Entries without an
/// outcome of their own answer `Applied`.
pub fn apply(
    engine: &Engine,
    shard_id: u64,
    index: u64,
    entry: &Entry,
) -> kvengine::Result<ApplyOutcome> {
    match entry {
        Entry::Write(batch) => engine
            .apply_write(shard_id, index, batch)
            .map(|()| ApplyOutcome::Applied),
        Entry::Noop => engine
            .apply_noop(shard_id, index)
            .map(|()| ApplyOutcome::Applied),
        Entry::Freeze => engine
            .apply_freeze(shard_id, index)
            .map(|()| ApplyOutcome::Applied),
        Entry::ChangeSet(cs) => engine.apply_change_set_at(index, cs),
        Entry::Split { key, right_id } => engine.apply_split(shard_id, index, key, *right_id),
    }
}

/// What the leader's jobs hand to the log.
pub enum Event {
    Freeze(u64),
    ChangeSet(ChangeSet, SyncSender<Result<ApplyOutcome, SinkError>>),
}

/// The leader's sink: every call becomes an [`Event`] for the test.
pub struct LeaderSink {
    tx: Mutex<Sender<Event>>,
    pub freezes: AtomicUsize,
}

impl LeaderSink {
    pub fn with_events() -> (Arc<LeaderSink>, Receiver<Event>) {
        let (tx, rx) = channel();
        let sink = LeaderSink {
            tx: Mutex::new(tx),
            freezes: AtomicUsize::new(0),
        };
        (Arc::new(sink), rx)
    }
}

impl ChangeSetSink for LeaderSink {
    fn propose_freeze(&self, shard_id: u64) {
        self.freezes.fetch_add(1, Ordering::SeqCst);
        let _ = self.tx.lock().unwrap().send(Event::Freeze(shard_id));
    }

    fn propose_change_set(&self, cs: &ChangeSet) -> Result<ApplyOutcome, SinkError> {
        let (reply, outcome) = sync_channel(1);
        let stopped = || SinkError::Unknown {
            reason: "test log stopped".into(),
        };
        if self
            .tx
            .lock()
            .unwrap()
            .send(Event::ChangeSet(cs.clone(), reply))
            .is_err()
        {
            return Err(stopped());
        }
        outcome.recv().unwrap_or_else(|_| Err(stopped()))
    }
}

/// A follower's sink: it must never be called.
#[derive(Default)]
pub struct FollowerSink {
    pub calls: AtomicUsize,
}

impl ChangeSetSink for FollowerSink {
    fn propose_freeze(&self, _shard_id: u64) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }

    fn propose_change_set(&self, _cs: &ChangeSet) -> Result<ApplyOutcome, SinkError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(SinkError::Dropped {
            reason: "a follower proposed".into(),
        })
    }
}

pub struct Replica {
    pub engine: Option<Engine>,
    pub dfs: Arc<FaultDfs<LocalDfs>>,
    pub dir: PathBuf,
    pub node_id: u16,
}

impl Replica {
    pub fn engine(&self) -> &Engine {
        self.engine.as_ref().expect("replica is open")
    }

    pub fn puts(&self) -> u64 {
        self.dfs.stats(DfsOp::Put).calls
    }
}

/// Small memtables, levels and files, so that a few dozen entries make flushes and
/// compactions; no background compaction (the test runs it on the leader when it wants one);
/// frequent manifest rewrites (split children must survive them).
pub fn options(dir: &Path, node_id: u16) -> EngineOptions {
    let mut o = EngineOptions::new(dir);
    o.log_mode = LogMode::External;
    o.memtable_size = 1024;
    o.block_size = 256;
    o.l0_compaction_files = 2;
    o.base_level_size = 4096;
    o.target_file_size = 2048;
    o.compaction_threads = 0;
    o.manifest_rewrite_after = 8;
    o.node_id = node_id;
    o.external_flush_timeout = PROPOSAL_WAIT;
    o
}

pub struct Cluster {
    pub root: tempfile::TempDir,
    pub replicas: Vec<Replica>,
    pub leader_sink: Arc<LeaderSink>,
    pub follower_sink: Arc<FollowerSink>,
    events: Option<Receiver<Event>>,
    pub pending_freezes: Vec<u64>,
    pub pending_proposals: VecDeque<(ChangeSet, SyncSender<Result<ApplyOutcome, SinkError>>)>,
    /// Every entry appended, per shard, with its index and the outcome it had.
    pub logs: BTreeMap<u64, Vec<(u64, Entry, ApplyOutcome)>>,
    /// The last index of each shard's log.
    pub last_index: BTreeMap<u64, u64>,
    /// When set, [`Cluster::check_agreement`] runs after every entry, reading at these
    /// timestamps.
    pub check_every_entry: Option<Vec<u64>>,
}

impl Cluster {
    /// Three replicas, each with shard `shard_id` over the whole key space; replica 0 leads it.
    pub fn new(shard_id: u64) -> Cluster {
        let root = tempfile::tempdir().unwrap();
        let store = root.path().join("dfs");
        let (leader_sink, events) = LeaderSink::with_events();
        let follower_sink = Arc::new(FollowerSink::default());
        let mut replicas = Vec::new();
        for i in 0..3u16 {
            let dfs = Arc::new(FaultDfs::new(LocalDfs::open(&store).unwrap()));
            let dir = root.path().join(format!("replica-{i}"));
            let engine = Engine::open(options(&dir, i + 1), dfs.clone()).unwrap();
            engine.create_shard(shard_id, b"", b"").unwrap();
            replicas.push(Replica {
                engine: Some(engine),
                dfs,
                dir,
                node_id: i + 1,
            });
        }
        let cluster = Cluster {
            root,
            replicas,
            leader_sink,
            follower_sink,
            events: Some(events),
            pending_freezes: Vec::new(),
            pending_proposals: VecDeque::new(),
            logs: BTreeMap::new(),
            last_index: BTreeMap::from([(shard_id, 0)]),
            check_every_entry: None,
        };
        cluster.install_sinks();
        cluster.leader().set_leader(shard_id, true);
        cluster
    }

    fn install_sinks(&self) {
        for (i, r) in self.replicas.iter().enumerate() {
            let sink: Arc<dyn ChangeSetSink> = if i == 0 {
                self.leader_sink.clone()
            } else {
                self.follower_sink.clone()
            };
            r.engine().set_change_set_sink(sink);
        }
    }

    pub fn leader(&self) -> &Engine {
        self.replicas[0].engine()
    }

    pub fn engines(&self) -> impl Iterator<Item = &Engine> {
        self.replicas.iter().map(Replica::engine)
    }

    /// Appends `entry` to shard `shard_id`'s log and applies it to every replica, which must all
    /// answer alike. Returns the outcome.
    pub fn append(&mut self, shard_id: u64, entry: Entry) -> ApplyOutcome {
        let index = self.last_index[&shard_id] + 1;
        let outcomes: Vec<ApplyOutcome> = self
            .engines()
            .map(|e| apply(e, shard_id, index, &entry).unwrap())
            .collect();
        assert!(
            outcomes.iter().all(|o| *o == outcomes[0]),
            "replicas disagree on entry {index} of shard {shard_id} ({entry:?}): {outcomes:?}"
        );
        let outcome = outcomes[0].clone();
        self.last_index.insert(shard_id, index);
        if let ApplyOutcome::Split { children } = &outcome {
            for child in children {
                self.last_index.insert(*child, index);
            }
        }
        self.logs
            .entry(shard_id)
            .or_default()
            .push((index, entry, outcome.clone()));
        if let Some(ts) = &self.check_every_entry {
            self.check_agreement(ts);
        }
        outcome
    }

    /// Moves what the leader's sink received into the pending lists, waiting up to `wait` for
    /// the first event.
    pub fn pump(&mut self, wait: Duration) {
        let Some(events) = &self.events else {
            return;
        };
        let mut first = match events.recv_timeout(wait) {
            Ok(e) => Some(e),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        while let Some(event) = first.take().or_else(|| events.try_recv().ok()) {
            match event {
                Event::Freeze(id) => self.pending_freezes.push(id),
                Event::ChangeSet(cs, reply) => self.pending_proposals.push_back((cs, reply)),
            }
        }
    }

    /// Appends a Freeze entry for every Freeze the leader asked for (of shards still there).
    pub fn deliver_freezes(&mut self) {
        let mut ids = std::mem::take(&mut self.pending_freezes);
        ids.dedup();
        for id in ids {
            if self.last_index.contains_key(&id) && self.leader().shard_info(id).is_ok() {
                self.append(id, Entry::Freeze);
            }
        }
    }

    /// Whether the leader has a frozen memtable, so that its flush thread will propose.
    pub fn leader_has_frozen(&self) -> bool {
        let leader = self.leader();
        leader
            .shard_ids()
            .into_iter()
            .any(|id| leader.shard_info(id).unwrap().frozen_memtables > 0)
    }

    /// Waits until the leader proposed a ChangeSet; false when none came within `wait`.
    pub fn wait_for_proposal(&mut self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        while self.pending_proposals.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            self.pump(deadline - now);
        }
        true
    }

    /// Appends the oldest pending proposal as an entry of its shard and answers the leader's
    /// job with the outcome. Returns the outcome.
    pub fn deliver_proposal(&mut self) -> Option<ApplyOutcome> {
        let (cs, reply) = self.pending_proposals.pop_front()?;
        let outcome = self.append(cs.shard_id, Entry::ChangeSet(cs));
        let _ = reply.send(Ok(outcome.clone()));
        Some(outcome)
    }

    /// Answers the oldest pending proposal with `error` without appending it.
    pub fn refuse_proposal(&mut self, error: SinkError) -> Option<ChangeSet> {
        let (cs, reply) = self.pending_proposals.pop_front()?;
        let _ = reply.send(Err(error));
        Some(cs)
    }

    /// Delivers the leader's flush proposals until it has no frozen memtable left.
    pub fn flush_all_frozen(&mut self) {
        while self.leader_has_frozen() {
            assert!(
                self.wait_for_proposal(PROPOSAL_WAIT),
                "the leader has frozen memtables but proposed no flush"
            );
            self.deliver_proposal();
        }
    }

    /// Runs `job` on the leader on another thread (it may wait for its proposals), serving its
    /// proposals and Freeze requests until it returns.
    pub fn run_on_leader<R: Send + 'static>(
        &mut self,
        job: impl FnOnce(Engine) -> R + Send + 'static,
    ) -> R {
        let leader = self.leader().clone();
        let handle = std::thread::spawn(move || job(leader));
        while !handle.is_finished() {
            self.pump(Duration::from_millis(5));
            self.deliver_freezes();
            while self.deliver_proposal().is_some() {}
        }
        handle.join().unwrap()
    }

    /// Closes follower `i` and opens it again, then re-applies every entry above each of its
    /// shards' `data_sequence`, as the owner of a log does after a restart. Re-applied entries
    /// must answer as they did the first time, or `Skipped` for a ChangeSet the manifest holds.
    pub fn reopen_follower(&mut self, i: usize) {
        assert_ne!(i, 0, "only followers are reopened");
        let r = &mut self.replicas[i];
        let engine = r.engine.take().unwrap();
        engine.close(false).unwrap();
        drop(engine);
        let engine = Engine::open(options(&r.dir, r.node_id), r.dfs.clone()).unwrap();
        engine.set_change_set_sink(self.follower_sink.clone());
        for id in engine.shard_ids() {
            let info = engine.shard_info(id).unwrap();
            assert_eq!(
                info.write_sequence, info.data_sequence,
                "reopen restores write_sequence = data_sequence, shard {id}"
            );
            for (index, entry, outcome) in self.logs.get(&id).into_iter().flatten() {
                if *index <= info.write_sequence {
                    continue;
                }
                let again = apply(&engine, id, *index, entry).unwrap();
                let replayed_change_set = again == ApplyOutcome::Skipped && *index <= info.meta_seq;
                assert!(
                    again == *outcome || replayed_change_set,
                    "re-applying entry {index} of shard {id} ({entry:?}) after reopen: {again:?}, first {outcome:?}"
                );
            }
        }
        r.engine = Some(engine);
    }

    /// The per-shard file lists the manifest of replica `i` holds on disk.
    pub fn manifest_lists(&self, i: usize) -> Vec<ShardFiles> {
        Manifest::read_file_lists(&self.replicas[i].dir.join("manifest")).unwrap()
    }

    /// Checks that every replica is in the same state, that each one's live state is what its
    /// manifest on disk describes, and that no follower wrote to the object store or proposed.
    pub fn check_agreement(&self, read_ts: &[u64]) {
        let ids = self.leader().shard_ids();
        for (i, r) in self.replicas.iter().enumerate() {
            let e = r.engine();
            assert_eq!(e.shard_ids(), ids, "shard ids of replica {i}");
            let live: Vec<ShardFiles> = ids.iter().map(|id| e.shard_files(*id).unwrap()).collect();
            assert_eq!(
                live,
                self.manifest_lists(i),
                "live file lists vs the manifest on disk, replica {i}"
            );
            for files in &live {
                assert_eq!(
                    e.shard_table_ids(files.id()).unwrap(),
                    files.file_ids(),
                    "open tables vs file list, replica {i} shard {}",
                    files.id()
                );
            }
            if i > 0 {
                assert_eq!(r.puts(), 0, "follower {i} put a file to the object store");
                // Followers retire what the leader retires, at the same entries (and keep it
                // until the group index passes); only the leader also retires the outputs of
                // its own proposals that came to nothing.
                assert!(
                    e.pending_deletes() <= self.leader().pending_deletes(),
                    "follower {i} has more retired files pending than the leader: {} > {}",
                    e.pending_deletes(),
                    self.leader().pending_deletes()
                );
            }
        }
        assert_eq!(
            self.follower_sink.calls.load(Ordering::SeqCst),
            0,
            "a follower proposed"
        );
        for id in &ids {
            let infos: Vec<_> = self.engines().map(|e| e.shard_info(*id).unwrap()).collect();
            assert!(
                infos.iter().all(|x| *x == infos[0]),
                "shard info of shard {id} differs: {infos:#?}"
            );
            let files: Vec<_> = self
                .engines()
                .map(|e| e.shard_files(*id).unwrap())
                .collect();
            assert!(
                files.iter().all(|x| *x == files[0]),
                "file lists of shard {id} differ"
            );
            let dumps: Vec<_> = self.engines().map(|e| dump(e, *id, read_ts)).collect();
            for (i, d) in dumps.iter().enumerate().skip(1) {
                assert_eq!(
                    *d, dumps[0],
                    "data of shard {id} on replica {i} vs the leader"
                );
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A leader's job blocked on a proposal learns that the log stopped, so the engine's
        // threads can be joined.
        self.events = None;
        self.pending_proposals.clear();
        for r in &mut self.replicas {
            if let Some(e) = r.engine.take() {
                let _ = e.close(false);
            }
        }
    }
}

/// One row of a scan: key, version, user meta, value.
pub type Row = (Vec<u8>, u64, Vec<u8>, Vec<u8>);

/// A scan of `cf` over the whole shard at `ts`.
pub fn scan(engine: &Engine, shard_id: u64, cf: ColumnFamily, ts: u64) -> Vec<Row> {
    let snap = engine.snapshot(shard_id).unwrap();
    let mut it = snap.iter(cf, b"", b"", ts, false).unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((
            it.key().to_vec(),
            it.version(),
            it.user_meta().to_vec(),
            it.value().to_vec(),
        ));
        it.next().unwrap();
    }
    out
}

/// Every CF of the shard at each of `read_ts`, and the LOCK CF at the shard's SnapVersion (the
/// timestamp lock reads use).
pub fn dump(engine: &Engine, shard_id: u64, read_ts: &[u64]) -> Vec<Vec<Row>> {
    let snap_version = engine.shard_info(shard_id).unwrap().snap_version();
    let mut out = vec![scan(engine, shard_id, ColumnFamily::Lock, snap_version)];
    for cf in ColumnFamily::ALL {
        for ts in read_ts {
            out.push(scan(engine, shard_id, cf, *ts));
        }
    }
    out
}

/// Every object in the cluster's store (the replicas share it).
pub fn stored(c: &Cluster) -> std::collections::BTreeSet<u64> {
    use kvengine::Dfs;
    c.replicas[0]
        .dfs
        .list()
        .unwrap()
        .into_iter()
        .map(|f| f.get())
        .collect()
}
