//! Remote compaction at the engine's boundary: a compaction run by a "worker" (the worker's
//! entry point, `run_compaction_job`, on its own handle of the object store) gives the same
//! files and entries as the same compaction run here; and every way a worker can fail (it
//! stores outputs and dies, answers garbage, or the server dies mid-job) compacts here, loses
//! nothing, and leaves no object behind once file GC ran.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use changeset::{CompactionJob, CompactionResult};
use kvengine::{
    ColumnFamily, CompactionOffload, Dfs, Engine, EngineOptions, FileId, LocalDfs, OffloadOutcome,
    SyncPolicy, WriteBatch,
};
use proptest::prelude::*;

#[path = "common/replicas.rs"]
mod replicas;

/// What the test worker does with a job.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Behaviour {
    /// Runs it and answers.
    Answer,
    /// Runs it (its outputs are stored) and then "dies": no answer.
    StoreAndDie,
    /// Runs it and answers with one output's size wrong.
    Garbage,
    /// Runs it and then the server "dies" before it hears back (the compaction thread panics).
    ServerDies,
    /// Answers without its very last output when that output's column family keeps its
    /// tombstones and has others (other jobs are answered as they should).
    DropLastOutput,
    /// The first worker stores its outputs and dies; the retry (with the job's fresh ids) on
    /// a second worker answers.
    RetryAfterStoring,
}

struct TestWorker {
    dfs: LocalDfs,
    behaviour: Mutex<Behaviour>,
    runs: AtomicUsize,
    rejected: AtomicUsize,
    jobs: Mutex<Vec<CompactionJob>>,
    timeout: Duration,
}

impl TestWorker {
    fn new(dfs_dir: &Path, behaviour: Behaviour) -> Arc<TestWorker> {
        Arc::new(TestWorker {
            dfs: LocalDfs::open(dfs_dir).unwrap(),
            behaviour: Mutex::new(behaviour),
            runs: AtomicUsize::new(0),
            rejected: AtomicUsize::new(0),
            jobs: Mutex::new(Vec::new()),
            timeout: Duration::from_millis(50),
        })
    }
}

impl CompactionOffload for TestWorker {
    fn wants(&self, _shard_id: u64, _input_bytes: u64) -> bool {
        true
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn run(
        &self,
        job: &CompactionJob,
        retry: &mut dyn FnMut() -> Option<CompactionJob>,
    ) -> Result<CompactionResult, String> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.jobs.lock().unwrap().push(job.clone());
        // The worker side decodes what the server encoded.
        let job = CompactionJob::decode_checked(job.encode_to_bytes()).unwrap();
        let mut result = kvengine::run_compaction_job(&self.dfs, None, &job).unwrap();
        if *self.behaviour.lock().unwrap() == Behaviour::RetryAfterStoring {
            let again = retry().expect("a retry");
            assert!(
                again
                    .output_ids
                    .iter()
                    .all(|id| !job.output_ids.contains(id)),
                "a retry reuses the ids of the attempt it replaces"
            );
            self.jobs.lock().unwrap().push(again.clone());
            return Ok(kvengine::run_compaction_job(&self.dfs, None, &again).unwrap());
        }
        match *self.behaviour.lock().unwrap() {
            Behaviour::Answer | Behaviour::RetryAfterStoring => Ok(result),
            Behaviour::StoreAndDie => Err("connection reset by peer".into()),
            Behaviour::Garbage => {
                result.outputs[0].size += 1;
                Ok(result)
            }
            Behaviour::DropLastOutput => {
                // The very last output, where its column family keeps others: only the check
                // of the key span can catch it (the ids left are still the job's first ones).
                let of = |cf: u32| result.outputs.iter().filter(|t| t.cf == cf).count();
                if let Some(last) = result.outputs.last()
                    && job.cfs.iter().any(|c| c.cf == last.cf && !c.bottommost)
                    && of(last.cf) >= 2
                {
                    result.outputs.pop();
                }
                Ok(result)
            }
            Behaviour::ServerDies => panic!("the server dies while the worker answers"),
        }
    }

    fn finished(&self, _shard_id: u64, outcome: OffloadOutcome<'_>) {
        if let OffloadOutcome::Rejected { .. } = outcome {
            self.rejected.fetch_add(1, Ordering::SeqCst);
        }
    }
}

struct Opened {
    engine: Engine,
    dfs: Arc<LocalDfs>,
    dfs_dir: PathBuf,
    dir: PathBuf,
}

fn options(dir: &Path) -> EngineOptions {
    let mut o = EngineOptions::new(dir);
    o.wal_sync = SyncPolicy::Off;
    o.memtable_size = 4 * 1024;
    o.block_size = 256;
    o.l0_compaction_files = 100; // only explicit compactions
    o.base_level_size = 1 << 30;
    o.target_file_size = 2 * 1024;
    o.compaction_threads = 0;
    o
}

fn open(root: &Path, name: &str) -> Opened {
    open_with(root, name, options)
}

/// Small levels: L1 spills into L2 as soon as it holds a few KiB, so later compactions of L0
/// into L1 are not the bottommost.
fn small_levels(dir: &Path) -> EngineOptions {
    let mut o = options(dir);
    o.base_level_size = 4 * 1024;
    o
}

fn open_with(root: &Path, name: &str, options: fn(&Path) -> EngineOptions) -> Opened {
    let dir = root.join(name).join("engine");
    let dfs_dir = root.join(name).join("dfs");
    let dfs = Arc::new(LocalDfs::open(&dfs_dir).unwrap());
    let engine = Engine::open(options(&dir), dfs.clone()).unwrap();
    if engine.shard_ids().is_empty() {
        engine.create_shard(1, b"", b"").unwrap();
    }
    Opened {
        engine,
        dfs,
        dfs_dir,
        dir,
    }
}

/// One write: key index, version, put (`Some(value)`) or delete, and whether a flush follows.
type Op = (u8, u64, Option<u8>, bool);

fn apply_ops(e: &Engine, ops: &[Op]) {
    for (k, ver, value, flush) in ops {
        let mut b = WriteBatch::new();
        let key = format!("key-{k:03}").into_bytes();
        match value {
            Some(v) => b.put(
                ColumnFamily::Write,
                &key,
                *ver,
                b"",
                format!("value-{v}-{}", "x".repeat(*v as usize % 40)).as_bytes(),
            ),
            None => b.delete(ColumnFamily::Write, &key, *ver, b""),
        };
        if ver % 5 == 0 {
            b.put(ColumnFamily::Lock, &key, *ver, b"", b"lock");
        }
        e.write(1, &b).unwrap();
        if *flush {
            e.flush_shard(1).unwrap();
        }
    }
    e.flush_shard(1).unwrap();
}

/// Every version of every column family at `ts`.
fn dump(e: &Engine, ts: u64) -> Vec<Vec<replicas::Row>> {
    ColumnFamily::ALL
        .iter()
        .map(|cf| replicas::scan(e, 1, *cf, ts))
        .collect()
}

/// The bytes of every file the engine's file lists name, sorted.
fn live_bytes(o: &Opened) -> Vec<Vec<u8>> {
    let mut files: Vec<Vec<u8>> = o
        .engine
        .live_file_ids()
        .into_iter()
        .map(|id| o.dfs.get(FileId(id)).unwrap().to_vec())
        .collect();
    files.sort();
    files
}

/// Every object in the engine's store.
fn stored(o: &Opened) -> BTreeSet<u64> {
    o.dfs.list().unwrap().into_iter().map(|f| f.0).collect()
}

/// The object store holds exactly what the file lists name: no orphan.
fn assert_no_orphans(o: &Opened) {
    let stored = stored(o);
    let live = o.engine.live_file_ids();
    assert_eq!(
        stored,
        live,
        "objects no file list names: {:x?}",
        stored.difference(&live).collect::<Vec<_>>()
    );
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(
        (
            0u8..60,
            1u64..200,
            proptest::option::weighted(0.8, any::<u8>()),
            proptest::bool::weighted(0.08),
        ),
        20..200,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The same writes and flushes into two engines; one compacts on a "worker", the other
    /// here: the files (byte for byte) and every entry at every read timestamp are the same,
    /// whatever the GC safe point dropped.
    #[test]
    fn a_remote_compaction_writes_the_same_files_as_a_local_one(
        ops in ops(),
        safe_point in 0u64..220,
    ) {
        let root = tempfile::tempdir().unwrap();
        let remote = open(root.path(), "remote");
        let local = open(root.path(), "local");
        let worker = TestWorker::new(&remote.dfs_dir, Behaviour::Answer);
        remote.engine.set_compaction_offload(worker.clone());
        for o in [&remote, &local] {
            apply_ops(&o.engine, &ops);
            o.engine.set_gc_safe_point(safe_point);
        }
        let n_remote = remote.engine.compact_shard(1, true).unwrap();
        let n_local = local.engine.compact_shard(1, true).unwrap();
        prop_assert_eq!(n_remote, n_local);
        prop_assert_eq!(worker.runs.load(Ordering::SeqCst), n_remote);
        prop_assert_eq!(live_bytes(&remote), live_bytes(&local));
        for ts in [safe_point, safe_point + 1, 100, u64::MAX] {
            prop_assert_eq!(dump(&remote.engine, ts), dump(&local.engine, ts));
        }
        for o in [&remote, &local] {
            o.engine.collect_garbage();
            assert_no_orphans(o);
        }
    }
}

fn loaded(root: &Path, behaviour: Behaviour) -> (Opened, Opened, Arc<TestWorker>) {
    let ops: Vec<Op> = (0..300u64)
        .map(|i| {
            (
                (i % 50) as u8,
                i + 1,
                (i % 9 != 0).then_some(i as u8),
                i % 60 == 59,
            )
        })
        .collect();
    let remote = open(root, "remote");
    let local = open(root, "local");
    let worker = TestWorker::new(&remote.dfs_dir, behaviour);
    remote.engine.set_compaction_offload(worker.clone());
    for o in [&remote, &local] {
        apply_ops(&o.engine, &ops);
    }
    (remote, local, worker)
}

/// The remote engine reads what the local one does and holds the same files, and once the
/// doom delay passed and file GC ran, its store holds nothing its file lists do not name.
fn assert_like_local_and_no_orphans(remote: &Opened, local: &Opened, worker: &TestWorker) {
    assert_eq!(
        dump(&remote.engine, u64::MAX),
        dump(&local.engine, u64::MAX)
    );
    assert_eq!(live_bytes(remote), live_bytes(local));
    collect_after_deadline(remote, worker);
    assert_no_orphans(remote);
}

/// Waits out the doom delay of the worker's jobs (deadline + timeout) and runs file GC.
fn collect_after_deadline(o: &Opened, worker: &TestWorker) {
    std::thread::sleep(worker.timeout * 3);
    o.engine.collect_garbage();
}

#[test]
fn a_worker_that_stored_outputs_and_died_costs_a_local_compaction_and_leaves_no_orphan() {
    let root = tempfile::tempdir().unwrap();
    let (remote, local, worker) = loaded(root.path(), Behaviour::StoreAndDie);
    let before = stored(&remote);
    assert!(remote.engine.compact_shard(1, true).unwrap() >= 1);
    local.engine.compact_shard(1, true).unwrap();
    assert!(worker.runs.load(Ordering::SeqCst) >= 1);
    // The dead worker's outputs were stored: objects beyond the inputs and outputs exist.
    let job_ids: BTreeSet<u64> = worker
        .jobs
        .lock()
        .unwrap()
        .iter()
        .flat_map(|j| j.output_ids.clone())
        .collect();
    let stored = stored(&remote);
    assert!(
        stored.iter().any(|id| job_ids.contains(id)),
        "the worker stored nothing: the test proves nothing"
    );
    assert!(before.len() > 1);
    assert_like_local_and_no_orphans(&remote, &local, &worker);
    // No file list names an id a job was given.
    assert!(remote.engine.live_file_ids().is_disjoint(&job_ids));
}

#[test]
fn a_retry_gets_fresh_ids_and_the_first_attempts_outputs_are_deleted() {
    let root = tempfile::tempdir().unwrap();
    let (remote, local, worker) = loaded(root.path(), Behaviour::RetryAfterStoring);
    remote.engine.compact_shard(1, true).unwrap();
    local.engine.compact_shard(1, true).unwrap();
    let jobs = worker.jobs.lock().unwrap().clone();
    assert!(jobs.len() >= 2);
    let first: BTreeSet<u64> = jobs[0].output_ids.iter().copied().collect();
    let second: BTreeSet<u64> = jobs[1].output_ids.iter().copied().collect();
    let live = remote.engine.live_file_ids();
    assert!(
        live.is_disjoint(&first),
        "the first attempt's outputs are live"
    );
    assert!(
        !live.is_disjoint(&second),
        "the retry's outputs are not live"
    );
    assert_like_local_and_no_orphans(&remote, &local, &worker);
}

#[test]
fn a_result_missing_its_last_output_is_rejected_where_no_key_can_vanish() {
    let root = tempfile::tempdir().unwrap();
    let remote = open_with(root.path(), "remote", small_levels);
    let local = open_with(root.path(), "local", small_levels);
    let worker = TestWorker::new(&remote.dfs_dir, Behaviour::DropLastOutput);
    remote.engine.set_compaction_offload(worker.clone());
    // Versions never a multiple of 5: no LOCK rows, so WRITE's outputs come last.
    let ops: Vec<Op> = (0..600u64)
        .map(|i| ((i % 80) as u8, i * 5 + 1, Some(i as u8), i % 100 == 99))
        .collect();
    for o in [&remote, &local] {
        for chunk in ops.chunks(200) {
            apply_ops(&o.engine, chunk);
            o.engine.compact_shard(1, true).unwrap();
        }
    }
    assert!(
        worker.rejected.load(Ordering::SeqCst) >= 1,
        "no compaction above another level was offloaded: the test proves nothing"
    );
    assert_like_local_and_no_orphans(&remote, &local, &worker);
}

#[test]
fn a_garbage_answer_is_rejected_and_compacted_here() {
    let root = tempfile::tempdir().unwrap();
    let (remote, local, worker) = loaded(root.path(), Behaviour::Garbage);
    remote.engine.compact_shard(1, true).unwrap();
    local.engine.compact_shard(1, true).unwrap();
    assert!(worker.rejected.load(Ordering::SeqCst) >= 1);
    assert_like_local_and_no_orphans(&remote, &local, &worker);
}

#[test]
fn a_server_that_dies_mid_job_leaves_orphans_that_gc_removes_after_restart() {
    let root = tempfile::tempdir().unwrap();
    let (remote, local, worker) = loaded(root.path(), Behaviour::ServerDies);
    let expected = dump(&local.engine, u64::MAX);
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        remote.engine.compact_shard(1, true)
    }));
    assert!(died.is_err(), "the compaction thread was meant to die");
    let job_ids: BTreeSet<u64> = worker.jobs.lock().unwrap()[0]
        .output_ids
        .iter()
        .copied()
        .collect();
    let stored = stored(&remote);
    assert!(stored.iter().any(|id| job_ids.contains(id)));
    let intents = remote.dir.join(kvengine::INTENT_DIR);
    assert_eq!(std::fs::read_dir(&intents).unwrap().count(), 1);
    let Opened { engine, dir, .. } = remote;
    drop(engine);
    let reopened = open(root.path(), "remote");
    assert_eq!(reopened.dir, dir);
    // The restarted engine deletes the dead job's objects once its deadline passed twice.
    collect_after_deadline(&reopened, &worker);
    assert_no_orphans(&reopened);
    assert_eq!(std::fs::read_dir(&intents).unwrap().count(), 0);
    assert_eq!(dump(&reopened.engine, u64::MAX), expected);
}

#[test]
fn an_unreadable_intent_is_left_in_place_and_deletes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let o = open(root.path(), "e");
    apply_ops(&o.engine, &[(1, 1, Some(1), true)]);
    let live = o.engine.live_file_ids();
    let intents = o.dir.join(kvengine::INTENT_DIR);
    std::fs::create_dir_all(&intents).unwrap();
    let mut bytes = kvengine::Intent {
        deadline_ms: 0,
        ids: live.iter().copied().collect(),
    }
    .encode();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(intents.join("0000000000000001.job"), &bytes).unwrap();
    let Opened { engine, .. } = o;
    drop(engine);
    let o = open(root.path(), "e");
    o.engine.collect_garbage();
    assert_eq!(o.engine.live_file_ids(), live);
    assert_no_orphans(&o);
    assert!(intents.join("0000000000000001.job").exists());
}
