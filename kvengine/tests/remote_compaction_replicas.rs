//! A remote compaction's result that reaches the Raft log after the region compacted without
//! it (the job's leader lost its proposal, another compaction replaced the inputs, then the old
//! proposal committed) is rejected by the apply as a conflict on every replica, changes
//! nothing, and its outputs leave the object store once file GC ran.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

#[path = "common/replicas.rs"]
mod replicas;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use changeset::{Change, CompactionJob, CompactionResult};
use kvengine::{
    ApplyOutcome, ColumnFamily, CompactionOffload, LocalDfs, OffloadOutcome, SinkError, WriteBatch,
};
use replicas::{Cluster, Entry, PROPOSAL_WAIT, stored};

const SHARD: u64 = 1;

/// Runs jobs with the worker's entry point while `remote` is set.
struct Worker {
    dfs: LocalDfs,
    remote: AtomicBool,
    runs: AtomicUsize,
}

impl CompactionOffload for Worker {
    fn wants(&self, _: u64, _: u64) -> bool {
        self.remote.load(Ordering::SeqCst)
    }
    fn timeout(&self) -> Duration {
        Duration::from_millis(50)
    }
    fn run(
        &self,
        job: &CompactionJob,
        _retry: &mut dyn FnMut() -> Option<CompactionJob>,
    ) -> Result<CompactionResult, String> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        kvengine::run_compaction_job(&self.dfs, None, job).map_err(|e| e.to_string())
    }
    fn finished(&self, _: u64, outcome: OffloadOutcome<'_>) {
        assert!(
            !matches!(outcome, OffloadOutcome::Rejected { .. }),
            "a good result was rejected: {outcome:?}"
        );
    }
}

fn put(i: u64, version: u64) -> Entry {
    let mut b = WriteBatch::new();
    b.put(
        ColumnFamily::Write,
        format!("k{i:04}").as_bytes(),
        version,
        b"",
        &[i as u8; 64],
    );
    Entry::Write(b)
}

#[test]
fn a_late_remote_result_after_a_local_compaction_is_a_conflict_and_its_outputs_are_collected() {
    let mut c = Cluster::new(SHARD);
    for round in 0..2u64 {
        for i in 0..40 {
            c.append(SHARD, put(i, round * 1000 + i + 1));
        }
        c.append(SHARD, Entry::Freeze);
        c.flush_all_frozen();
    }
    let worker = Arc::new(Worker {
        dfs: LocalDfs::open(c.root.path().join("dfs")).unwrap(),
        remote: AtomicBool::new(true),
        runs: AtomicUsize::new(0),
    });
    c.leader().set_compaction_offload(worker.clone());

    // The remote job's result is proposed, but its proposal is lost (say the leader changed):
    // the job learns nothing certain, and the proposal may still commit later.
    let leader = c.leader().clone();
    let job = std::thread::spawn(move || leader.compact_shard(SHARD, true));
    assert!(
        c.wait_for_proposal(PROPOSAL_WAIT),
        "the remote compaction proposed nothing"
    );
    let late = c
        .refuse_proposal(SinkError::Unknown {
            reason: "leadership lost".into(),
        })
        .unwrap();
    assert!(job.join().unwrap().is_err());
    assert_eq!(worker.runs.load(Ordering::SeqCst), 1);
    let Some(Change::Compaction(late_compaction)) = &late.change else {
        panic!("expected a compaction, found {late:?}");
    };
    let late_outputs: BTreeSet<u64> = late_compaction.table_creates.iter().map(|t| t.id).collect();
    assert!(!late_outputs.is_empty());
    assert!(late_outputs.is_subset(&stored(&c)));

    // The region compacts here meanwhile, replacing the inputs.
    worker.remote.store(false, Ordering::SeqCst);
    let n = c.run_on_leader(|e| e.compact_shard(SHARD, true)).unwrap();
    assert_eq!(n, 1);
    let read_ts = [500, 1500, u64::MAX];
    let before = replicas::dump(c.leader(), SHARD, &read_ts);

    // Then the old proposal commits: every replica rejects it, nothing changes.
    let outcome = c.append(SHARD, Entry::ChangeSet(late));
    assert_eq!(outcome, ApplyOutcome::Conflicted);
    c.check_agreement(&read_ts);
    for e in c.engines() {
        assert_eq!(replicas::dump(e, SHARD, &read_ts), before);
        assert!(e.live_file_ids().is_disjoint(&late_outputs));
    }

    // File GC removes the late outputs (and the replaced inputs) everywhere.
    let group = c
        .engines()
        .map(|e| e.file_gc_safe_index(SHARD))
        .min()
        .unwrap();
    for e in c.engines() {
        e.raise_file_gc_group_index(SHARD, group);
        e.collect_garbage();
    }
    let left = stored(&c);
    assert!(
        left.is_disjoint(&late_outputs),
        "late outputs still stored: {:x?}",
        left.intersection(&late_outputs).collect::<Vec<_>>()
    );
    assert_eq!(left, c.leader().live_file_ids());
}
