//! File GC with an external (Raft) log (`LogMode::External`): a file an applied entry retired
//! leaves the object store only once the region's group index (the leader's minimum over every
//! replica's safe index, which the log's owner carries between them) reached the entry's index,
//! no shard here names it and no snapshot here holds it. The test plays the owner: it reads
//! each replica's safe index and hands the minimum to every replica.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

#[path = "common/replicas.rs"]
mod replicas;

use std::collections::BTreeSet;

use kvengine::{ApplyOutcome, ColumnFamily, Engine, WriteBatch};
use replicas::{Cluster, Entry, stored};

const SHARD: u64 = 1;
const RIGHT: u64 = 2;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn put(i: u64, version: u64) -> Entry {
    let mut b = WriteBatch::new();
    b.put(ColumnFamily::Write, &key(i), version, b"", &[i as u8; 64]);
    Entry::Write(b)
}

/// Writes `keys` to `shard` twice over, flushing each round: two L0 files.
fn two_l0_files(c: &mut Cluster, shard: u64, keys: &[u64]) {
    for round in 0..2 {
        for &i in keys {
            c.append(shard, put(i, round * 1000 + i + 1));
        }
        c.append(shard, Entry::Freeze);
        c.flush_all_frozen();
    }
}

/// Runs one compaction of `shard` on the leader and returns the index of its entry.
fn compact(c: &mut Cluster, shard: u64) -> u64 {
    let n = c
        .run_on_leader(move |e| e.compact_shard(shard, true))
        .unwrap();
    assert_eq!(n, 1, "one compaction, one retiring index");
    let (index, _, outcome) = c.logs[&shard].last().unwrap();
    assert_eq!(*outcome, ApplyOutcome::Applied);
    *index
}

/// Plays the log's owner: the group index of `shard` is the lowest safe index of any replica,
/// and every replica learns it. Returns it.
fn spread_group_index(c: &Cluster, shard: u64) -> u64 {
    let group = c
        .engines()
        .map(|e| e.file_gc_safe_index(shard))
        .min()
        .unwrap();
    for e in c.engines() {
        e.raise_file_gc_group_index(shard, group);
    }
    group
}

fn collect_everywhere(c: &Cluster) {
    for e in c.engines() {
        e.collect_garbage();
    }
}

fn assert_all_stored(c: &Cluster, files: &BTreeSet<u64>, why: &str) {
    let stored = stored(c);
    assert!(
        files.is_subset(&stored),
        "{why}: deleted {:?}",
        files.difference(&stored).collect::<Vec<_>>()
    );
}

fn assert_none_stored(c: &Cluster, files: &BTreeSet<u64>, why: &str) {
    let stored = stored(c);
    assert!(
        files.is_disjoint(&stored),
        "{why}: left {:?}",
        files.intersection(&stored).collect::<Vec<_>>()
    );
}

fn tables(e: &Engine, shard: u64) -> BTreeSet<u64> {
    e.shard_table_ids(shard).unwrap()
}

#[test]
fn a_retired_file_is_kept_until_the_group_index_reaches_the_index_that_retired_it() {
    let mut c = Cluster::new(SHARD);
    two_l0_files(&mut c, SHARD, &[0, 3, 6, 9]);
    let inputs = tables(c.leader(), SHARD);
    assert_eq!(inputs.len(), 2);
    let retired_at = compact(&mut c, SHARD);
    assert!(inputs.is_disjoint(&tables(c.leader(), SHARD)));
    // Nothing was reported yet: every replica keeps the inputs, and each has them pending.
    collect_everywhere(&c);
    assert_all_stored(&c, &inputs, "no group index yet");
    for e in c.engines() {
        assert_eq!(e.pending_deletes(), inputs.len());
        assert_eq!(e.file_gc_safe_index(SHARD), retired_at);
    }
    for e in c.engines() {
        e.raise_file_gc_group_index(SHARD, retired_at - 1);
    }
    collect_everywhere(&c);
    assert_all_stored(&c, &inputs, "group index below the retiring entry");
    assert_eq!(spread_group_index(&c, SHARD), retired_at);
    collect_everywhere(&c);
    assert_none_stored(&c, &inputs, "group index at the retiring entry");
    for e in c.engines() {
        assert_eq!(e.pending_deletes(), 0);
        assert_eq!(e.file_gc_group_index(SHARD), retired_at);
    }
    assert_all_stored(&c, &c.leader().live_file_ids(), "live files");
    c.check_agreement(&[u64::MAX]);
}

#[test]
fn a_snapshot_of_a_retired_file_holds_back_its_replicas_safe_index_until_dropped() {
    let mut c = Cluster::new(SHARD);
    two_l0_files(&mut c, SHARD, &[0, 3, 6, 9]);
    let inputs = tables(c.leader(), SHARD);
    let follower_snap = c.replicas[1].engine().snapshot(SHARD).unwrap();
    let retired_at = compact(&mut c, SHARD);
    assert_eq!(c.replicas[0].engine().file_gc_safe_index(SHARD), retired_at);
    assert_eq!(
        c.replicas[1].engine().file_gc_safe_index(SHARD),
        retired_at - 1,
        "the follower reading the inputs"
    );
    assert_eq!(spread_group_index(&c, SHARD), retired_at - 1);
    collect_everywhere(&c);
    assert_all_stored(&c, &inputs, "a follower's snapshot reads them");
    // The snapshot still reads the inputs from the object store.
    let got = follower_snap
        .get(ColumnFamily::Write, &key(3), u64::MAX)
        .unwrap()
        .unwrap();
    assert_eq!(got.value.as_ref(), [3u8; 64]);
    drop(follower_snap);
    assert_eq!(spread_group_index(&c, SHARD), retired_at);
    collect_everywhere(&c);
    assert_none_stored(&c, &inputs, "the snapshot was dropped");
}

#[test]
fn a_snapshot_here_keeps_a_retired_file_even_past_the_group_index() {
    let mut c = Cluster::new(SHARD);
    two_l0_files(&mut c, SHARD, &[0, 3, 6, 9]);
    let inputs = tables(c.leader(), SHARD);
    let snap = c.replicas[2].engine().snapshot(SHARD).unwrap();
    let retired_at = compact(&mut c, SHARD);
    // Whatever the group index says, the replica holding the snapshot does not delete.
    let holder = c.replicas[2].engine();
    holder.raise_file_gc_group_index(SHARD, retired_at);
    holder.collect_garbage();
    assert_all_stored(&c, &inputs, "a snapshot here reads them");
    assert_eq!(holder.pending_deletes(), inputs.len());
    drop(snap);
    holder.collect_garbage();
    assert_none_stored(&c, &inputs, "the snapshot was dropped");
}

/// Split children share their parent's files; each child retires a shared file in its own log,
/// and the file goes only once both group indexes passed their retirements. A snapshot of the
/// left child reading it holds back the right child's safe index, the child that retires it
/// last there, and not the left one's (which would wait for the sibling to compact).
#[test]
fn a_file_split_children_share_waits_for_both_childrens_retirements() {
    let mut c = Cluster::new(SHARD);
    two_l0_files(&mut c, SHARD, &[0, 3, 6, 9]);
    let shared = tables(c.leader(), SHARD);
    let outcome = c.append(
        SHARD,
        Entry::Split {
            key: key(5),
            right_id: RIGHT,
        },
    );
    assert!(matches!(outcome, ApplyOutcome::Split { .. }), "{outcome:?}");
    c.leader().set_leader(RIGHT, true);
    assert_eq!(tables(c.leader(), RIGHT), shared, "both children name them");
    let left_snap = c.replicas[2].engine().snapshot(SHARD).unwrap();
    let left_at = compact(&mut c, SHARD);
    assert_eq!(spread_group_index(&c, SHARD), left_at);
    collect_everywhere(&c);
    assert_all_stored(&c, &shared, "the right child still names them");
    let right_at = compact(&mut c, RIGHT);
    for e in c.engines() {
        e.raise_file_gc_group_index(RIGHT, right_at - 1);
    }
    collect_everywhere(&c);
    assert_all_stored(
        &c,
        &shared,
        "the right child's group index is below its compaction",
    );
    assert_eq!(
        spread_group_index(&c, RIGHT),
        right_at - 1,
        "the left child's snapshot on replica 2"
    );
    collect_everywhere(&c);
    assert_all_stored(&c, &shared, "a snapshot on replica 2 reads them");
    drop(left_snap);
    assert_eq!(spread_group_index(&c, RIGHT), right_at);
    collect_everywhere(&c);
    assert_none_stored(
        &c,
        &shared,
        "both children's replicas are past their compactions",
    );
    c.check_agreement(&[u64::MAX]);
}

/// A restarted replica forgot which regions retired a shared file before the restart: until
/// every region's group index reached what its manifest held at open, it deletes nothing it
/// retired.
#[test]
fn a_restarted_replica_deletes_nothing_until_every_region_passed_its_manifest() {
    let mut c = Cluster::new(SHARD);
    two_l0_files(&mut c, SHARD, &[0, 3, 6, 9]);
    c.append(
        SHARD,
        Entry::Split {
            key: key(5),
            right_id: RIGHT,
        },
    );
    c.leader().set_leader(RIGHT, true);
    let right_manifest = c.replicas[1].engine().shard_info(RIGHT).unwrap().meta_seq;
    assert!(right_manifest > 0);
    c.reopen_follower(1);
    // A file of the left child only, then a compaction retiring it (and the shared ones).
    for i in [0, 1, 2] {
        c.append(SHARD, put(i, 5000 + i));
    }
    c.append(SHARD, Entry::Freeze);
    c.flush_all_frozen();
    let before = tables(c.leader(), SHARD);
    let left_only: BTreeSet<u64> = before
        .difference(&tables(c.leader(), RIGHT))
        .copied()
        .collect();
    assert_eq!(left_only.len(), 1);
    let left_at = compact(&mut c, SHARD);
    let restarted = c.replicas[1].engine();
    restarted.raise_file_gc_group_index(SHARD, left_at);
    restarted.collect_garbage();
    assert_all_stored(
        &c,
        &left_only,
        "the right region never reported since the restart",
    );
    restarted.raise_file_gc_group_index(RIGHT, right_manifest);
    restarted.collect_garbage();
    assert_none_stored(&c, &left_only, "every region passed its manifest");
    assert_all_stored(&c, &tables(c.leader(), RIGHT), "the right child's files");
}
