//! What replication costs a commit: the same transactions through a region replicated on
//! three Raft stores against the same region on one store, on the same cluster code.
//!
//! Each store is a real engine (external-log mode) with its own Raft log on disk (fdatasync'd
//! per round in the every-batch rows), all sharing one object-store directory, connected by
//! the in-process transport (`raftstore::ChannelNetwork`): what is measured is the Raft path
//! (append on every replica, a quorum round, apply) without HTTP between servers. The
//! transactions run through `TxnClient` on the leader's `Storage`, as a server runs them.
//!
//! Rows: throughput (3 replicas / 1 replica, higher is better) and commit latency p50/p99
//! (3 replicas / 1 replica, lower is better), 2PC and 1PC, 1 and 2 client threads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kvengine::raft_log::{RaftLog, RaftLogOptions};
use kvengine::{Engine, EngineOptions, LocalDfs, LogMode, SyncPolicy};
use raftstore::{ChannelNetwork, InitialRegion, RaftConfig, RaftStore};
use server::tso::Tso;
use server::txn::{Mode, Storage, TxnClient};

use crate::report::{latency_row, rate, row, table_header};
use crate::workload::{key, rng, value};

const REGION: u64 = 1;

/// The stores of one region; the leader's storage serves the transactions.
struct Group {
    _dir: tempfile::TempDir,
    storages: Vec<Arc<Storage>>,
    leader: usize,
}

/// `replicas` voting stores and `learners` more, each holding a Raft learner of the region
/// (added by the leader, caught up by snapshot before this returns): the analytic zones of a
/// whole-replica placement rule (none: the plain replicated group).
fn group_with_learners(replicas: u64, learners: u64, sync: SyncPolicy) -> Group {
    let dir = tempfile::tempdir().expect("tmp");
    let net = ChannelNetwork::new();
    let tso = Arc::new(Tso::open(dir.path().join("tso")).expect("tso"));
    let voters: Vec<u64> = (1..=replicas).collect();
    let mut storages = Vec::new();
    for id in 1..=replicas + learners {
        let sd = dir.path().join(format!("store-{id}"));
        let mut opts = EngineOptions::new(sd.join("engine"));
        opts.log_mode = LogMode::External;
        opts.node_id = id as u16;
        let dfs = Arc::new(LocalDfs::open(dir.path().join("dfs")).expect("dfs"));
        let engine = Engine::open(opts, dfs).expect("engine");
        let log = Arc::new(
            RaftLog::open(RaftLogOptions {
                sync,
                segment_size: 256 * 1024 * 1024,
                ..RaftLogOptions::new(sd.join("raft"))
            })
            .expect("raft log"),
        );
        // A learner's store starts without the region: its leader's first message creates it.
        if id <= replicas {
            RaftStore::bootstrap(
                &engine,
                &log,
                &[InitialRegion {
                    id: REGION,
                    start: Vec::new(),
                    end: Vec::new(),
                    voters: voters.clone(),
                }],
            )
            .expect("bootstrap");
        }
        let inbox = net.register(id);
        let transport = Arc::new(net.transport(id));
        let config = RaftConfig {
            tick_interval: types::ReadableDuration::millis(50),
            ..RaftConfig::default()
        };
        let store = RaftStore::start(id, config, engine.clone(), log, transport).expect("start");
        let router = store.router().clone();
        // The network's receiving side, as a server's `POST /raft/batch` handler: what
        // arrived meanwhile goes in one round, run on this thread when none is running.
        std::thread::spawn(move || {
            while let Ok(batch) = inbox.recv() {
                let mut msgs = batch.messages;
                for more in inbox.try_iter() {
                    msgs.extend(more.messages);
                }
                router.deliver_batch(msgs);
            }
        });
        storages.push(Arc::new(
            Storage::new(engine, tso.clone(), store).expect("storage"),
        ));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let leader = loop {
        if let Some(i) = storages
            .iter()
            .position(|s| s.router().status(REGION).is_some_and(|st| st.serving))
        {
            break i;
        }
        assert!(Instant::now() < deadline, "no leader elected");
        std::thread::sleep(Duration::from_millis(10));
    };
    let router = storages[leader].router();
    for store in replicas + 1..=replicas + learners {
        router
            .change_peer(
                REGION,
                raftstore::ChangePeer::AddLearner { store },
                Duration::from_secs(10),
            )
            .expect("add learner");
    }
    while learners > 0
        && router
            .membership(REGION)
            .is_none_or(|m| m.learners.len() as u64 != learners || !m.pending.is_empty())
    {
        assert!(Instant::now() < deadline, "the learners never caught up");
        std::thread::sleep(Duration::from_millis(10));
    }
    Group {
        _dir: dir,
        storages,
        leader,
    }
}

struct Run {
    elapsed: Duration,
    /// Every commit's latency, sorted.
    latencies: Vec<Duration>,
}

impl Run {
    fn percentile(&self, p: f64) -> Duration {
        crate::report::percentile(&self.latencies, p)
    }
}

fn commit_run(replicas: u64, sync: SyncPolicy, mode: Mode, txns: usize, threads: usize) -> Run {
    commit_run_with_learners(replicas, 0, sync, mode, txns, threads)
}

fn commit_run_with_learners(
    replicas: u64,
    learners: u64,
    sync: SyncPolicy,
    mode: Mode,
    txns: usize,
    threads: usize,
) -> Run {
    let g = group_with_learners(replicas, learners, sync);
    let client = TxnClient::new(g.storages[g.leader].clone());
    let per_thread = txns / threads;
    let t0 = Instant::now();
    let mut latencies: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let client = client.clone();
                s.spawn(move || {
                    let v = value(&mut rng(t as u64));
                    let mut lat = Vec::with_capacity(per_thread);
                    for i in t * per_thread..(t + 1) * per_thread {
                        let t1 = Instant::now();
                        let mut txn = client.begin().expect("begin");
                        txn.set(key(2 * i), v.clone());
                        txn.set(key(2 * i + 1), v.clone());
                        txn.commit(mode).expect("commit");
                        lat.push(t1.elapsed());
                    }
                    lat
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("client thread"))
            .collect()
    });
    let elapsed = t0.elapsed();
    latencies.sort_unstable();
    for s in &g.storages {
        s.raft().stop();
        s.engine().close(false).expect("close");
    }
    Run { elapsed, latencies }
}

fn suite(sync: SyncPolicy, sync_name: &str, txns: usize, thread_counts: &[usize]) {
    table_header(&format!(
        "replicated commits ({txns} txns of 2 puts in one region, Raft log sync {sync_name} on every replica)"
    ));
    for &threads in thread_counts {
        let th = if threads == 1 { "thread" } else { "threads" };
        for (mode, name) in [(Mode::TwoPc, "2PC"), (Mode::OnePc, "1PC")] {
            let three = commit_run(3, sync, mode, txns, threads);
            let one = commit_run(1, sync, mode, txns, threads);
            let n = (txns / threads * threads) as f64;
            let what = format!("3 replicas, {threads} {th}");
            compare(name, &what, &three, "1 replica", &one, n, &[0.5, 0.99]);
        }
    }
}

/// One mode's rows: throughput of `n` transactions, then each percentile's commit latency, of
/// `run` (labelled `what`) beside `baseline`.
fn compare(
    mode: &str,
    what: &str,
    run: &Run,
    baseline_name: &str,
    baseline: &Run,
    n: f64,
    percentiles: &[f64],
) {
    row(
        &format!("{mode}, {what}"),
        "txns/s",
        rate(n, run.elapsed),
        baseline_name,
        rate(n, baseline.elapsed),
    );
    for &p in percentiles {
        latency_row(
            &format!("{mode} commit p{}, {what}", (p * 100.0).round()),
            run.percentile(p),
            baseline_name,
            baseline.percentile(p),
        );
    }
}

/// Issue 18's target: a learner on a fourth store (an analytic zone of a whole-replica rule)
/// costs the voters' writes at most 10%. The learner appends every entry the voters commit,
/// but no commit waits for it; on this machine it shares the two cores with the voters, so
/// what it costs here is CPU, not a quorum round.
fn learner_suite(sync: SyncPolicy, sync_name: &str, txns: usize, threads: usize) {
    table_header(&format!(
        "commits with a learner ({txns} txns of 2 puts, 3 voters, Raft log sync {sync_name}, {threads} threads)"
    ));
    for (mode, name) in [(Mode::TwoPc, "2PC"), (Mode::OnePc, "1PC")] {
        let with = commit_run_with_learners(3, 1, sync, mode, txns, threads);
        let without = commit_run(3, sync, mode, txns, threads);
        let n = (txns / threads * threads) as f64;
        compare(
            name,
            "3 voters + 1 learner",
            &with,
            "3 voters",
            &without,
            n,
            &[0.99],
        );
    }
}

/// `stratus-bench learners`.
pub fn run_learners() {
    learner_suite(SyncPolicy::Off, "off", 20_000, 4);
    learner_suite(SyncPolicy::EveryBatch, "every-batch", 400, 4);
}

pub fn run(_entries: usize) {
    // 20,000: a one-replica run of 5,000 took under 0.1 s once a write stopped waking the
    // store thread, too short to measure.
    suite(SyncPolicy::Off, "off", 20_000, &[1, 4]);
    suite(SyncPolicy::EveryBatch, "every-batch", 400, &[1, 4]);
}
