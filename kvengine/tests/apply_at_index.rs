//! `LogMode::External`, one behaviour at a time: the index rules of the `apply_*` entry points,
//! which calls each log mode refuses, splits decided at apply, the leader's Freeze requests and
//! jobs through the sink, and recovery. `replicated_apply.rs` runs them all together.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

#[path = "common/replicas.rs"]
mod replicas;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use changeset::ChangeSet;
use kvengine::{
    ApplyOutcome, ChangeSetSink, ColumnFamily, Dfs, Engine, EngineOptions, Error, ErrorKind,
    LocalDfs, LogMode, SinkError, SyncPolicy, WriteBatch,
};
use replicas::{Cluster, Entry, PROPOSAL_WAIT, options};

const SHARD: u64 = 1;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn put(i: u64, version: u64) -> Entry {
    let mut b = WriteBatch::new();
    b.put(ColumnFamily::Write, &key(i), version, b"", &[i as u8; 64]);
    Entry::Write(b)
}

fn lock(i: u64, value: &[u8]) -> Entry {
    let mut b = WriteBatch::new();
    b.put_lock(&key(i), value);
    Entry::Write(b)
}

/// One External-mode engine with shard [`SHARD`], no sink, leading nothing.
fn external(dir: &std::path::Path) -> Engine {
    let dfs = Arc::new(LocalDfs::open(dir.join("dfs")).unwrap());
    let e = Engine::open(options(&dir.join("engine"), 1), dfs).unwrap();
    if e.shard_ids().is_empty() {
        e.create_shard(SHARD, b"", b"").unwrap();
    }
    e
}

fn stored(dfs: &dyn Dfs) -> BTreeSet<u64> {
    dfs.list().unwrap().into_iter().map(|f| f.get()).collect()
}

#[test]
fn an_index_past_the_next_one_is_a_gap_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let e = external(dir.path());
    replicas::apply(&e, SHARD, 1, &put(1, 1)).unwrap();
    let before = e.shard_info(SHARD).unwrap();
    let cs = ChangeSet {
        shard_id: SHARD,
        shard_ver: before.ver,
        ..Default::default()
    };
    for entry in [
        put(2, 2),
        Entry::Noop,
        Entry::Freeze,
        Entry::ChangeSet(cs),
        Entry::Split {
            key: key(5),
            right_id: 2,
        },
    ] {
        let err = replicas::apply(&e, SHARD, 3, &entry).unwrap_err();
        assert!(
            matches!(
                err,
                Error::LogGap {
                    shard_id: SHARD,
                    applied: 1,
                    index: 3
                }
            ),
            "{entry:?}: {err}"
        );
        assert_eq!(err.kind(), ErrorKind::Invalid);
        assert_eq!(e.shard_info(SHARD).unwrap(), before, "{entry:?}");
    }
}

#[test]
fn reapplying_an_applied_index_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let e = external(dir.path());
    replicas::apply(&e, SHARD, 1, &put(1, 1)).unwrap();
    replicas::apply(&e, SHARD, 2, &Entry::Noop).unwrap();
    let before = e.shard_info(SHARD).unwrap();
    let rows = replicas::scan(&e, SHARD, ColumnFamily::Write, u64::MAX);
    // Other content at an applied index: it was applied before, so it is not applied again.
    for (index, entry) in [(1, put(7, 7)), (2, put(8, 8)), (1, Entry::Freeze)] {
        assert_eq!(
            replicas::apply(&e, SHARD, index, &entry).unwrap(),
            ApplyOutcome::Applied
        );
    }
    let split = Entry::Split {
        key: key(5),
        right_id: 2,
    };
    assert_eq!(
        replicas::apply(&e, SHARD, 2, &split).unwrap(),
        ApplyOutcome::Skipped
    );
    assert_eq!(e.shard_info(SHARD).unwrap(), before);
    assert_eq!(
        replicas::scan(&e, SHARD, ColumnFamily::Write, u64::MAX),
        rows
    );
}

#[test]
fn every_entry_sets_the_write_sequence_and_locks_get_base_version_plus_index() {
    let dir = tempfile::tempdir().unwrap();
    let e = external(dir.path());
    let base = e.shard_info(SHARD).unwrap().base_version;
    let entries = [lock(1, b"a"), Entry::Noop, Entry::Freeze, lock(2, b"b")];
    for (index, entry) in (1..).zip(&entries) {
        replicas::apply(&e, SHARD, index, entry).unwrap();
        let info = e.shard_info(SHARD).unwrap();
        assert_eq!(info.write_sequence, index, "{entry:?}");
        assert_eq!(info.snap_version(), base + index);
    }
    let snap = e.snapshot(SHARD).unwrap();
    assert_eq!(snap.get_lock(&key(1)).unwrap().unwrap().version, base + 1);
    assert_eq!(snap.get_lock(&key(2)).unwrap().unwrap().version, base + 4);
    assert_eq!(e.shard_info(SHARD).unwrap().frozen_memtables, 1);
}

#[test]
fn a_write_outside_the_shard_range_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let dfs = Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap());
    let e = Engine::open(options(&dir.path().join("engine"), 1), dfs).unwrap();
    e.create_shard(SHARD, b"k0005", b"").unwrap();
    let err = replicas::apply(&e, SHARD, 1, &put(1, 1)).unwrap_err();
    assert!(matches!(err, Error::KeyNotInShard { .. }), "{err}");
    assert_eq!(e.shard_info(SHARD).unwrap().write_sequence, 0);
}

#[test]
fn an_internal_mode_engine_refuses_every_apply_entry_point() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = EngineOptions::new(dir.path().join("engine"));
    o.wal_sync = SyncPolicy::Off;
    let e = Engine::open(o, Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap())).unwrap();
    e.create_shard(SHARD, b"", b"").unwrap();
    let cs = ChangeSet {
        shard_id: SHARD,
        shard_ver: 1,
        ..Default::default()
    };
    let entries = [
        put(1, 1),
        Entry::Noop,
        Entry::Freeze,
        Entry::ChangeSet(cs),
        Entry::Split {
            key: key(5),
            right_id: 2,
        },
    ];
    for entry in &entries {
        let err = replicas::apply(&e, SHARD, 1, entry).unwrap_err();
        assert!(
            matches!(
                err,
                Error::WrongLogMode {
                    expected: LogMode::External,
                    found: LogMode::Internal,
                    ..
                }
            ),
            "{entry:?}: {err}"
        );
        assert_eq!(err.kind(), ErrorKind::Invalid);
    }
    let text = e.apply_noop(SHARD, 1).unwrap_err().to_string();
    assert!(
        text.contains("op=apply_noop expected=external found=internal"),
        "{text}"
    );
    assert_eq!(e.shard_info(SHARD).unwrap().write_sequence, 0);
}

#[test]
fn an_external_mode_engine_refuses_write_split_and_changesets_without_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let e = external(dir.path());
    let mut b = WriteBatch::new();
    b.put(ColumnFamily::Write, &key(1), 1, b"", b"v");
    let refused = |r: kvengine::Result<()>, op: &str| {
        let err = r.unwrap_err();
        assert!(
            matches!(
                err,
                Error::WrongLogMode {
                    expected: LogMode::Internal,
                    found: LogMode::External,
                    ..
                }
            ),
            "{op}: {err}"
        );
    };
    refused(e.write(SHARD, &b).map(drop), "write");
    refused(e.split(SHARD, &key(5), SHARD, 2), "split");
    let cs = ChangeSet {
        shard_id: SHARD,
        shard_ver: 1,
        sequence: 1,
        ..Default::default()
    };
    refused(e.apply_change_set(&cs).map(drop), "apply_change_set");
    assert_eq!(e.shard_info(SHARD).unwrap().write_sequence, 0);
    assert_eq!(e.wal_segments(), 0, "no WAL in external mode");
    assert!(!dir.path().join("engine").join("wal").exists());
}

#[test]
fn a_split_entry_is_refused_by_apply_change_set_at() {
    let dir = tempfile::tempdir().unwrap();
    let e = external(dir.path());
    let cs = ChangeSet {
        shard_id: SHARD,
        shard_ver: 1,
        change: Some(changeset::Change::Split(changeset::Split::default())),
        ..Default::default()
    };
    assert!(matches!(
        e.apply_change_set_at(1, &cs),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(e.shard_info(SHARD).unwrap().write_sequence, 0);
}

#[test]
fn a_split_over_a_non_empty_memtable_is_rejected_on_every_replica_alike() {
    let mut c = Cluster::new(SHARD);
    c.append(SHARD, put(1, 1));
    c.append(SHARD, put(9, 2));
    let split = || Entry::Split {
        key: key(5),
        right_id: 2,
    };
    // Active memtable not empty; then a frozen one not flushed yet. `append` checks that every
    // replica answered alike.
    for step in [None, Some(Entry::Freeze)] {
        if let Some(entry) = step {
            c.append(SHARD, entry);
        }
        let outcome = c.append(SHARD, split());
        let ApplyOutcome::Rejected { reason } = &outcome else {
            panic!("split over memtables: {outcome:?}");
        };
        assert!(reason.contains("memtables not empty"), "{reason}");
        for e in c.engines() {
            assert_eq!(e.shard_ids(), vec![SHARD]);
            assert_eq!(
                e.shard_info(SHARD).unwrap().write_sequence,
                c.last_index[&SHARD]
            );
        }
        c.check_agreement(&[u64::MAX]);
    }
    // Once the leader's flush is applied the memtables are empty and the same split applies.
    c.flush_all_frozen();
    assert_eq!(
        c.append(SHARD, split()),
        ApplyOutcome::Split {
            children: vec![SHARD, 2]
        }
    );
    c.check_agreement(&[u64::MAX]);
}

#[test]
fn a_split_key_outside_the_range_or_a_reused_id_is_rejected_on_every_replica() {
    let mut c = Cluster::new(SHARD);
    for (key, right_id) in [(Vec::new(), 2), (key(5), SHARD)] {
        let outcome = c.append(SHARD, Entry::Split { key, right_id });
        assert!(
            matches!(outcome, ApplyOutcome::Rejected { .. }),
            "{outcome:?}"
        );
    }
    for e in c.engines() {
        assert_eq!(e.shard_ids(), vec![SHARD]);
        assert_eq!(e.shard_info(SHARD).unwrap().write_sequence, 2);
    }
}

#[test]
fn the_left_child_keeps_the_parent_id_and_children_start_above_every_parent_version() {
    let mut c = Cluster::new(SHARD);
    for i in 0..10 {
        c.append(SHARD, lock(i, b"l"));
    }
    c.append(SHARD, Entry::Freeze);
    c.flush_all_frozen();
    let parent = c.leader().shard_info(SHARD).unwrap();
    let newest_parent_lock = (0..10)
        .map(|i| {
            let snap = c.leader().snapshot(SHARD).unwrap();
            snap.get_lock(&key(i)).unwrap().unwrap().version
        })
        .max()
        .unwrap();
    assert!(newest_parent_lock <= parent.snap_version());
    let n = parent.write_sequence + 1;
    let outcome = c.append(
        SHARD,
        Entry::Split {
            key: key(5),
            right_id: 7,
        },
    );
    assert_eq!(
        outcome,
        ApplyOutcome::Split {
            children: vec![SHARD, 7]
        }
    );
    let children = |c: &Cluster| -> Vec<_> {
        c.engines()
            .flat_map(|e| [e.shard_info(SHARD).unwrap(), e.shard_info(7).unwrap()])
            .collect()
    };
    for info in children(&c) {
        assert_eq!(info.ver, parent.ver + 1);
        assert_eq!(info.base_version, parent.base_version + n + 1);
        assert_eq!((info.write_sequence, info.data_sequence), (n, n));
        assert_eq!(info.meta_seq, n);
        assert!(info.snap_version() > parent.snap_version() + 1);
    }
    let left = c.leader().shard_info(SHARD).unwrap();
    assert_eq!(
        (left.start.as_ref(), left.end.as_ref()),
        (&b""[..], key(5).as_slice())
    );
    // The left child continues the parent's log; a lock it takes is newer than every lock the
    // parent gave.
    c.append(SHARD, lock(1, b"m"));
    let snap = c.leader().snapshot(SHARD).unwrap();
    let version = snap.get_lock(&key(1)).unwrap().unwrap().version;
    assert_eq!(version, left.base_version + n + 1);
    assert!(version > newest_parent_lock);
    drop(snap);
    // The right child is a new log starting after the split's index.
    c.append(7, lock(8, b"r"));
    assert_eq!(c.leader().shard_info(7).unwrap().write_sequence, n + 1);
    // A reopened replica restores exactly these values (from a manifest that holds the split).
    let before: Vec<_> = children(&c);
    c.reopen_follower(1);
    c.check_agreement(&[u64::MAX]);
    assert_eq!(children(&c), before);
    let lists = c.manifest_lists(1);
    assert_eq!(lists.iter().map(|f| f.id()).collect::<Vec<_>>(), [SHARD, 7]);
    for f in &lists {
        assert_eq!(
            (f.base_version(), f.data_sequence()),
            (parent.base_version + n + 1, n)
        );
    }
}

#[test]
fn reopen_restores_write_sequence_to_data_sequence_and_reapplying_rebuilds_the_state() {
    let mut c = Cluster::new(SHARD);
    for i in 0..4 {
        c.append(SHARD, put(i, i + 1));
    }
    c.append(SHARD, Entry::Freeze); // index 5
    c.flush_all_frozen(); // index 6, data_sequence 5
    c.append(SHARD, put(10, 10));
    c.append(SHARD, Entry::Freeze);
    c.append(SHARD, lock(11, b"x"));
    let expected = replicas::dump(c.leader(), SHARD, &[u64::MAX]);
    // Reopened by hand: right after open, only the flushed data is there.
    {
        let r = &mut c.replicas[2];
        r.engine.take().unwrap().close(false).unwrap();
        let e = Engine::open(options(&r.dir, r.node_id), r.dfs.clone()).unwrap();
        let info = e.shard_info(SHARD).unwrap();
        assert_eq!((info.write_sequence, info.data_sequence), (5, 5));
        assert_eq!((info.frozen_memtables, info.memtable_size), (0, 0));
        assert_eq!(
            replicas::scan(&e, SHARD, ColumnFamily::Write, u64::MAX).len(),
            4
        );
        r.engine = Some(e);
    }
    // The owner re-applies the entries above index 5 (the helper reopens once more first).
    c.reopen_follower(2);
    c.check_agreement(&[u64::MAX]);
    assert_eq!(
        replicas::dump(c.replicas[2].engine(), SHARD, &[u64::MAX]),
        expected
    );
    let info = c.replicas[2].engine().shard_info(SHARD).unwrap();
    assert_eq!((info.write_sequence, info.frozen_memtables), (9, 1));
}

#[test]
fn a_shard_created_at_an_index_continues_from_it_and_keeps_it_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let dfs = Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap());
    let e = Engine::open(options(&dir.path().join("engine"), 1), dfs.clone()).unwrap();
    e.create_shard_at(3, b"", b"", 5).unwrap();
    let info = e.shard_info(3).unwrap();
    assert_eq!(
        (info.write_sequence, info.data_sequence, info.meta_seq),
        (5, 5, 5)
    );
    assert!(matches!(
        e.apply_noop(3, 7),
        Err(Error::LogGap {
            applied: 5,
            index: 7,
            ..
        })
    ));
    e.apply_noop(3, 6).unwrap();
    e.close(false).unwrap();
    drop(e);
    let e = Engine::open(options(&dir.path().join("engine"), 1), dfs).unwrap();
    assert_eq!(e.shard_info(3).unwrap().write_sequence, 5);
}

#[test]
fn the_leader_asks_for_one_freeze_per_full_memtable() {
    let mut c = Cluster::new(SHARD);
    let memtable_size = options(std::path::Path::new("x"), 1).memtable_size;
    let mut i = 0;
    let mut write_until = |c: &mut Cluster, size: usize| {
        while c.leader().shard_info(SHARD).unwrap().memtable_size < size {
            i += 1;
            c.append(SHARD, put(i, i));
        }
    };
    write_until(&mut c, memtable_size + 1);
    write_until(&mut c, memtable_size * 3 / 2);
    assert_eq!(c.leader_sink.freezes.load(Ordering::SeqCst), 1);
    c.pump(Duration::from_millis(10));
    assert_eq!(c.pending_freezes, vec![SHARD]);
    c.deliver_freezes();
    for e in c.engines() {
        let info = e.shard_info(SHARD).unwrap();
        assert_eq!((info.frozen_memtables, info.memtable_size), (1, 0));
    }
    // The next memtable gets its own request.
    write_until(&mut c, memtable_size);
    assert_eq!(c.leader_sink.freezes.load(Ordering::SeqCst), 2);
    assert_eq!(c.follower_sink.calls.load(Ordering::SeqCst), 0);
}

#[test]
fn followers_refuse_to_flush_or_compact_and_close_without_flushing() {
    let mut c = Cluster::new(SHARD);
    c.append(SHARD, put(1, 1));
    let follower = c.replicas[1].engine();
    for err in [
        follower.flush_shard(SHARD).unwrap_err(),
        follower.compact_shard(SHARD, true).map(drop).unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                Error::NotLeader {
                    shard_id: SHARD,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(err.kind(), ErrorKind::NotLeader);
    }
    // close(flush) on a follower leaves its memtable to the leader's Freeze and Flush entries.
    c.replicas[1].engine().close(true).unwrap();
    assert_eq!(c.replicas[1].puts(), 0);
    c.reopen_follower(1);
    c.check_agreement(&[u64::MAX]);
}

#[test]
fn flush_shard_and_close_on_the_leader_go_through_the_log() {
    let mut c = Cluster::new(SHARD);
    for i in 0..3 {
        c.append(SHARD, put(i, i + 1));
    }
    c.run_on_leader(|e| e.flush_shard(SHARD)).unwrap();
    let info = c.leader().shard_info(SHARD).unwrap();
    // Index 4 is the Freeze, 5 the Flush of the memtable frozen at 4.
    assert_eq!(
        (info.write_sequence, info.data_sequence, info.l0_files),
        (5, 4, 1)
    );
    c.check_agreement(&[u64::MAX]);
    c.append(SHARD, put(7, 7));
    c.run_on_leader(|e| e.close(true)).unwrap();
    let info = c.replicas[1].engine().shard_info(SHARD).unwrap();
    assert_eq!((info.data_sequence, info.l0_files), (7, 2));
}

/// A sink that never delivers anything.
struct DeafSink;

impl ChangeSetSink for DeafSink {
    fn propose_freeze(&self, _shard_id: u64) {}

    fn propose_change_set(&self, _cs: &ChangeSet) -> Result<ApplyOutcome, SinkError> {
        Err(SinkError::Unknown {
            reason: "deaf".into(),
        })
    }
}

#[test]
fn flush_shard_times_out_when_the_log_never_delivers() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir.path().join("engine"), 1);
    o.external_flush_timeout = Duration::from_millis(200);
    let e = Engine::open(o, Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap())).unwrap();
    e.create_shard(SHARD, b"", b"").unwrap();
    replicas::apply(&e, SHARD, 1, &put(1, 1)).unwrap();
    e.set_leader(SHARD, true);
    // Without a sink a leader cannot propose at all.
    assert_eq!(e.flush_shard(SHARD).unwrap_err().kind(), ErrorKind::Config);
    e.set_change_set_sink(Arc::new(DeafSink));
    let err = e.flush_shard(SHARD).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Timeout {
                op: "flush_shard",
                shard_id: SHARD,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::Busy);
}

#[test]
fn a_dropped_proposal_deletes_its_outputs_and_an_unknown_one_keeps_them() {
    let mut c = Cluster::new(SHARD);
    c.append(SHARD, put(1, 1));
    c.append(SHARD, Entry::Freeze);
    let store = c.replicas[0].dfs.clone();
    let mut outputs = Vec::new();
    for error in [
        SinkError::Dropped {
            reason: "index taken by another term".into(),
        },
        SinkError::Unknown {
            reason: "leadership lost".into(),
        },
    ] {
        assert!(c.wait_for_proposal(PROPOSAL_WAIT));
        let cs = c.refuse_proposal(error).unwrap();
        let Some(changeset::Change::Flush(flush)) = &cs.change else {
            panic!("expected a flush, got {cs:?}");
        };
        outputs.push(flush.l0_create.as_ref().unwrap().id);
    }
    // The flush thread proposes a third time; that one is applied.
    assert!(c.wait_for_proposal(PROPOSAL_WAIT));
    assert_eq!(c.deliver_proposal(), Some(ApplyOutcome::Applied));
    c.leader().collect_garbage();
    let stored = stored(store.as_ref());
    assert!(!stored.contains(&outputs[0]), "dropped output deleted");
    assert!(stored.contains(&outputs[1]), "unknown output kept");
    assert!(!c.leader().live_file_ids().contains(&outputs[1]));
    c.check_agreement(&[u64::MAX]);
}

#[test]
fn a_second_flush_of_one_memtable_is_rejected_on_every_replica() {
    let mut c = Cluster::new(SHARD);
    c.append(SHARD, put(1, 1));
    c.append(SHARD, Entry::Freeze);
    assert!(c.wait_for_proposal(PROPOSAL_WAIT));
    // The first proposal's outcome is unknown to the leader, which flushes again...
    let first = c
        .refuse_proposal(SinkError::Unknown {
            reason: "timeout".into(),
        })
        .unwrap();
    assert!(c.wait_for_proposal(PROPOSAL_WAIT));
    assert_eq!(c.deliver_proposal(), Some(ApplyOutcome::Applied));
    // ...and then the log commits the first one after all.
    let outcome = c.append(SHARD, Entry::ChangeSet(first));
    let ApplyOutcome::Rejected { reason } = &outcome else {
        panic!("second flush of a memtable: {outcome:?}");
    };
    assert!(reason.contains("flush with no frozen memtable"), "{reason}");
    c.check_agreement(&[u64::MAX]);
    assert_eq!(c.leader().shard_info(SHARD).unwrap().l0_files, 1);
}

#[test]
fn a_compaction_proposed_before_a_split_is_rejected_everywhere_and_its_outputs_are_deleted() {
    let mut c = Cluster::new(SHARD);
    for round in 0..2 {
        for i in 0..4 {
            c.append(SHARD, put(i * 3, round * 10 + i + 1));
        }
        c.append(SHARD, Entry::Freeze);
        c.flush_all_frozen();
    }
    let leader = c.leader().clone();
    let job = std::thread::spawn(move || leader.compact_shard(SHARD, true));
    assert!(c.wait_for_proposal(PROPOSAL_WAIT));
    let (compaction, reply) = c.pending_proposals.pop_front().unwrap();
    let outputs: Vec<u64> = match &compaction.change {
        Some(changeset::Change::Compaction(cp)) => cp.table_creates.iter().map(|t| t.id).collect(),
        other => panic!("expected a compaction, got {other:?}"),
    };
    assert!(!outputs.is_empty());
    assert!(matches!(
        c.append(
            SHARD,
            Entry::Split {
                key: key(5),
                right_id: 2
            }
        ),
        ApplyOutcome::Split { .. }
    ));
    let outcome = c.append(SHARD, Entry::ChangeSet(compaction));
    let ApplyOutcome::Rejected { reason } = &outcome else {
        panic!("stale compaction: {outcome:?}");
    };
    assert!(reason.contains("another shard version"), "{reason}");
    reply.send(Ok(outcome)).unwrap();
    assert_eq!(job.join().unwrap().unwrap(), 0);
    c.leader().collect_garbage();
    let stored = stored(c.replicas[0].dfs.as_ref());
    for id in outputs {
        assert!(
            !stored.contains(&id),
            "output {id} of the rejected compaction deleted"
        );
    }
    c.check_agreement(&[u64::MAX]);
}

/// A Raft snapshot that does not fit is refused with an error naming why, and nothing
/// changes: a changeset that is not a snapshot, one standing for another index than the one
/// it is installed at, and one of another range (a split the replica missed).
#[test]
fn a_raft_snapshot_that_does_not_fit_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let e = external(dir.path());
    for i in 1..=3 {
        replicas::apply(&e, SHARD, i, &put(i, i)).unwrap();
    }
    let before = e.shard_info(SHARD).unwrap();
    let good = e.raft_snapshot(SHARD).unwrap();
    let mut not_a_snapshot = good.clone();
    not_a_snapshot.change = None;
    let mut other_range = good.clone();
    if let Some(changeset::Change::Snapshot(s)) = &mut other_range.change {
        s.end = bytes::Bytes::from_static(b"m");
        s.data_sequence = 10;
    }
    let mut other_index = good.clone();
    if let Some(changeset::Change::Snapshot(s)) = &mut other_index.change {
        s.data_sequence = 9;
    }
    for (what, cs, index) in [
        ("not a snapshot", &not_a_snapshot, 10),
        ("another range", &other_range, 10),
        ("another index", &other_index, 10),
    ] {
        let err = e.install_raft_snapshot(index, cs).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Invalid, "{what}: {err}");
        let after = e.shard_info(SHARD).unwrap();
        assert_eq!(
            (after.write_sequence, after.ver, after.end.to_vec()),
            (before.write_sequence, before.ver, before.end.to_vec()),
            "{what} changed the shard"
        );
    }
}

/// A fitting snapshot at a later index replaces the memtables by the files and moves the
/// write sequence there; one at or below the applied index is skipped.
#[test]
fn a_raft_snapshot_at_a_later_index_becomes_the_state_at_that_index() {
    let dir = tempfile::tempdir().unwrap();
    let e = external(dir.path());
    for i in 1..=3 {
        replicas::apply(&e, SHARD, i, &put(i, i)).unwrap();
    }
    let mut snap = e.raft_snapshot(SHARD).unwrap();
    if let Some(changeset::Change::Snapshot(s)) = &mut snap.change {
        s.data_sequence = 7;
    }
    assert_eq!(
        e.install_raft_snapshot(3, &{
            let mut s = snap.clone();
            if let Some(changeset::Change::Snapshot(f)) = &mut s.change {
                f.data_sequence = 3;
            }
            s
        })
        .unwrap(),
        ApplyOutcome::Skipped
    );
    e.install_raft_snapshot(7, &snap).unwrap();
    let info = e.shard_info(SHARD).unwrap();
    assert_eq!((info.write_sequence, info.data_sequence), (7, 7));
    assert_eq!(info.memtable_size, 0, "the memtables were dropped");
    // The next entry applies at 8.
    replicas::apply(&e, SHARD, 8, &put(8, 8)).unwrap();
    assert_eq!(e.shard_info(SHARD).unwrap().write_sequence, 8);
}

/// A replica that starts from a leader's snapshot replays the entries above the snapshot's
/// index, and a Flush and a compaction among them are already in the snapshot's files: they
/// are skipped, as after a restart, not refused. A refused one would doom the files it
/// created, which the snapshot names: once the replica leaves the region (or the files are
/// compacted away on it), its file GC would delete them from the shared object store under
/// the other replicas.
#[test]
fn entries_a_raft_snapshot_already_holds_are_skipped_and_their_files_stay() {
    let mut c = Cluster::new(SHARD);
    for round in 0..2u64 {
        for i in 0..4 {
            c.append(SHARD, put(i * 3 + round, round * 10 + i + 1));
        }
        c.append(SHARD, Entry::Freeze);
        c.flush_all_frozen();
    }
    c.run_on_leader(|e| e.compact_shard(SHARD, true)).unwrap();
    let leader_files = c.leader().live_file_ids();
    let snap = c.leader().raft_snapshot(SHARD).unwrap();
    let Some(changeset::Change::Snapshot(s)) = &snap.change else {
        panic!("expected a snapshot, got {snap:?}");
    };
    let index = s.data_sequence;
    let above: Vec<(u64, Entry)> = c.logs[&SHARD]
        .iter()
        .filter(|(i, _, _)| *i > index)
        .map(|(i, e, _)| (*i, e.clone()))
        .collect();
    assert!(
        above
            .iter()
            .any(|(_, e)| matches!(e, Entry::ChangeSet(cs) if matches!(cs.change, Some(changeset::Change::Compaction(_))))),
        "the compaction's entry lies above the snapshot's index {index}"
    );

    // A fourth replica on the same object store joins from the snapshot.
    let dfs = Arc::new(LocalDfs::open(c.root.path().join("dfs")).unwrap());
    let joiner = Engine::open(options(&c.root.path().join("joiner"), 4), dfs).unwrap();
    joiner.create_shard_for_raft_snapshot(&snap).unwrap();
    assert_eq!(
        joiner.install_raft_snapshot(index, &snap).unwrap(),
        ApplyOutcome::Applied
    );
    for (i, entry) in &above {
        let outcome = replicas::apply(&joiner, SHARD, *i, entry).unwrap();
        if let Entry::ChangeSet(_) = entry {
            assert_eq!(
                outcome,
                ApplyOutcome::Skipped,
                "entry {i} is in the snapshot's files: {entry:?}"
            );
        }
    }
    assert_eq!(
        replicas::dump(&joiner, SHARD, &[u64::MAX]),
        replicas::dump(c.leader(), SHARD, &[u64::MAX]),
        "the joiner reads what the leader reads"
    );

    // The joiner leaves the region; nothing it collects is a file the others name.
    joiner.destroy_shard(SHARD).unwrap();
    joiner.collect_garbage();
    let stored = replicas::stored(&c);
    for id in &leader_files {
        assert!(
            stored.contains(id),
            "file {id} the leader names was deleted"
        );
    }
    c.check_agreement(&[u64::MAX]);
}
