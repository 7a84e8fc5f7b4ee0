//! Model test of `LogMode::External`: a generated log of writes (WRITE, LOCK and EXTRA CFs), no-ops,
//! Freezes, the leader's flush and compaction ChangeSets (some dropped by the "log"), and
//! splits, applied in order to three engines, replica 0 leading every shard, with followers
//! closed and reopened at random (then re-applying the log above their `data_sequence`).
//!
//! After every entry every replica must show the same SnapVersion and shard state, the same
//! scans in every CF, and a live state equal to what its manifest on disk describes, and no
//! follower may have put a file to the (shared) object store. After every operation the data
//! must equal a BTreeMap model. At the end, every file in the object store must be named by a
//! file list: the outputs of dropped proposals were deleted.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

#[path = "common/replicas.rs"]
mod replicas;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kvengine::{ApplyOutcome, ColumnFamily, Dfs, SinkError, WriteBatch};
use proptest::prelude::*;
use replicas::{Cluster, Entry, PROPOSAL_WAIT, scan};

const SHARD: u64 = 1;
/// The timestamps every check reads at (data versions are 1, 2, ... one per WRITE/EXTRA op).
const READ_TS: [u64; 4] = [5, 15, 40, u64::MAX];

#[derive(Debug, Clone)]
enum Op {
    Put(u8, u8),
    Delete(u8),
    Lock(u8, u8),
    Unlock(u8),
    Extra(u8, u8),
    /// A WRITE record and the removal of the key's lock in one batch, as a commit does.
    Commit(u8, u8),
    /// A no-op entry on the n-th shard (in key order, modulo the shard count).
    Noop(u8),
    /// A Freeze entry on the n-th shard.
    Freeze(u8),
    /// Freeze entries for the Freezes the leader asked for.
    DeliverFreezes,
    /// The leader's next flush proposal becomes an entry.
    DeliverFlush,
    /// The leader's next flush proposal is dropped by the log.
    DropFlush,
    /// `flush_shard` on the leader, through the log.
    FlushShard(u8),
    /// `compact_shard(.., force_l0)` on the leader, through the log.
    Compact(u8),
    /// A split entry at this key on the shard holding it.
    Split(u8),
    /// Close follower 1 or 2 and reopen it.
    Reopen(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..16, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => (0u8..16).prop_map(Op::Delete),
        3 => (0u8..16, any::<u8>()).prop_map(|(k, v)| Op::Lock(k, v)),
        1 => (0u8..16).prop_map(Op::Unlock),
        1 => (0u8..16, any::<u8>()).prop_map(|(k, v)| Op::Extra(k, v)),
        2 => (0u8..16, any::<u8>()).prop_map(|(k, v)| Op::Commit(k, v)),
        1 => any::<u8>().prop_map(Op::Noop),
        2 => any::<u8>().prop_map(Op::Freeze),
        2 => Just(Op::DeliverFreezes),
        3 => Just(Op::DeliverFlush),
        1 => Just(Op::DropFlush),
        1 => any::<u8>().prop_map(Op::FlushShard),
        2 => any::<u8>().prop_map(Op::Compact),
        2 => (1u8..16).prop_map(Op::Split),
        1 => any::<bool>().prop_map(Op::Reopen),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k:03}").into_bytes()
}

fn value(v: u8) -> Vec<u8> {
    vec![v; 40]
}

type Versions = BTreeMap<u64, Option<Vec<u8>>>;

#[derive(Default)]
struct Model {
    write: BTreeMap<Vec<u8>, Versions>,
    extra: BTreeMap<Vec<u8>, Versions>,
    locks: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// Key and value of every key visible at `ts`.
fn visible(data: &BTreeMap<Vec<u8>, Versions>, ts: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    data.iter()
        .filter_map(|(k, versions)| {
            let v = versions.range(..=ts).next_back()?.1.clone()?;
            Some((k.clone(), v))
        })
        .collect()
}

/// The shards, `(start, end, id)` in key order, tiling the key space.
struct ShardMap(Vec<(Vec<u8>, Vec<u8>, u64)>);

impl ShardMap {
    fn route(&self, k: &[u8]) -> u64 {
        self.0
            .iter()
            .find(|(s, e, _)| k >= s.as_slice() && (e.is_empty() || k < e.as_slice()))
            .expect("shards tile the key space")
            .2
    }

    fn pick(&self, n: u8) -> u64 {
        self.0[n as usize % self.0.len()].2
    }
}

/// The data of every shard of the leader (replicas were checked equal), concatenated in key
/// order, against the model.
fn check_model(cluster: &Cluster, map: &ShardMap, model: &Model) -> Result<(), TestCaseError> {
    let leader = cluster.leader();
    let rows = |cf: ColumnFamily, ts: Option<u64>| -> Vec<(Vec<u8>, Vec<u8>)> {
        map.0
            .iter()
            .flat_map(|(_, _, id)| {
                let ts = ts.unwrap_or_else(|| leader.shard_info(*id).unwrap().snap_version());
                scan(leader, *id, cf, ts)
            })
            .map(|(k, _, _, v)| (k, v))
            .collect()
    };
    for ts in READ_TS {
        prop_assert_eq!(
            rows(ColumnFamily::Write, Some(ts)),
            visible(&model.write, ts),
            "WRITE at ts={}",
            ts
        );
        prop_assert_eq!(
            rows(ColumnFamily::Extra, Some(ts)),
            visible(&model.extra, ts),
            "EXTRA at ts={}",
            ts
        );
    }
    let locks: Vec<_> = model
        .locks
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    prop_assert_eq!(
        rows(ColumnFamily::Lock, None),
        locks,
        "LOCK at the snap version"
    );
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut cluster = Cluster::new(SHARD);
    cluster.check_every_entry = Some(READ_TS.to_vec());
    let mut map = ShardMap(vec![(Vec::new(), Vec::new(), SHARD)]);
    let mut model = Model::default();
    let mut version = 0u64;
    let mut next_id = SHARD + 1;
    for op in ops {
        cluster.pump(Duration::ZERO);
        let write = |cluster: &mut Cluster, k: u8, fill: &dyn Fn(&mut WriteBatch)| {
            let mut b = WriteBatch::new();
            fill(&mut b);
            let outcome = cluster.append(map.route(&key(k)), Entry::Write(b));
            assert_eq!(outcome, ApplyOutcome::Applied);
        };
        match op {
            Op::Put(k, v) => {
                version += 1;
                write(&mut cluster, k, &|b| {
                    b.put(ColumnFamily::Write, &key(k), version, b"m", &value(v));
                });
                let versions = model.write.entry(key(k)).or_default();
                versions.insert(version, Some(value(v)));
            }
            Op::Delete(k) => {
                version += 1;
                write(&mut cluster, k, &|b| {
                    b.delete(ColumnFamily::Write, &key(k), version, b"");
                });
                model.write.entry(key(k)).or_default().insert(version, None);
            }
            Op::Lock(k, v) => {
                write(&mut cluster, k, &|b| {
                    b.put_lock(&key(k), &value(v));
                });
                model.locks.insert(key(k), value(v));
            }
            Op::Unlock(k) => {
                write(&mut cluster, k, &|b| {
                    b.delete_lock(&key(k));
                });
                model.locks.remove(&key(k));
            }
            Op::Extra(k, v) => {
                version += 1;
                write(&mut cluster, k, &|b| {
                    b.put(ColumnFamily::Extra, &key(k), version, b"", &value(v));
                });
                let versions = model.extra.entry(key(k)).or_default();
                versions.insert(version, Some(value(v)));
            }
            Op::Commit(k, v) => {
                version += 1;
                write(&mut cluster, k, &|b| {
                    b.put(ColumnFamily::Write, &key(k), version, b"c", &value(v));
                    b.delete_lock(&key(k));
                });
                let versions = model.write.entry(key(k)).or_default();
                versions.insert(version, Some(value(v)));
                model.locks.remove(&key(k));
            }
            Op::Noop(n) => {
                let outcome = cluster.append(map.pick(n), Entry::Noop);
                prop_assert_eq!(outcome, ApplyOutcome::Applied);
            }
            Op::Freeze(n) => {
                cluster.append(map.pick(n), Entry::Freeze);
            }
            Op::DeliverFreezes => cluster.deliver_freezes(),
            Op::DeliverFlush | Op::DropFlush => {
                if cluster.pending_proposals.is_empty() && cluster.leader_has_frozen() {
                    prop_assert!(
                        cluster.wait_for_proposal(PROPOSAL_WAIT),
                        "the leader has frozen memtables but proposed no flush"
                    );
                }
                if let Op::DropFlush = op {
                    cluster.refuse_proposal(SinkError::Dropped {
                        reason: "another term took the index".into(),
                    });
                } else if let Some(outcome) = cluster.deliver_proposal() {
                    prop_assert_eq!(outcome, ApplyOutcome::Applied);
                }
            }
            Op::FlushShard(n) => {
                let id = map.pick(n);
                cluster.run_on_leader(move |e| e.flush_shard(id)).unwrap();
                let info = cluster.leader().shard_info(id).unwrap();
                prop_assert_eq!(
                    (info.frozen_memtables, info.memtable_size),
                    (0, 0),
                    "flush_shard leaves no memtable"
                );
            }
            Op::Compact(n) => {
                let id = map.pick(n);
                cluster
                    .run_on_leader(move |e| e.compact_shard(id, true))
                    .unwrap();
            }
            Op::Split(k) => {
                let at = key(k);
                let Some(pos) = map
                    .0
                    .iter()
                    .position(|(s, e, _)| at > *s && (e.is_empty() || at < *e))
                else {
                    continue;
                };
                let (start, end, id) = map.0[pos].clone();
                let before = cluster.leader().shard_info(id).unwrap();
                let right_id = next_id;
                let outcome = cluster.append(
                    id,
                    Entry::Split {
                        key: at.clone(),
                        right_id,
                    },
                );
                let index = before.write_sequence + 1;
                if before.frozen_memtables > 0 || before.memtable_size > 0 {
                    prop_assert!(
                        matches!(outcome, ApplyOutcome::Rejected { .. }),
                        "split over non-empty memtables: {:?}",
                        outcome
                    );
                    prop_assert_eq!(
                        cluster.leader().shard_info(id).unwrap().write_sequence,
                        index
                    );
                    continue;
                }
                prop_assert_eq!(
                    outcome,
                    ApplyOutcome::Split {
                        children: vec![id, right_id]
                    }
                );
                for child in [id, right_id] {
                    let info = cluster.leader().shard_info(child).unwrap();
                    prop_assert_eq!(info.base_version, before.base_version + index + 1);
                    prop_assert_eq!((info.write_sequence, info.data_sequence), (index, index));
                    prop_assert!(
                        info.snap_version() > before.snap_version() + 1,
                        "a child's versions are above the parent's"
                    );
                }
                cluster.leader().set_leader(right_id, true);
                map.0
                    .splice(pos..=pos, [(start, at.clone(), id), (at, end, right_id)]);
                next_id += 1;
            }
            Op::Reopen(second) => {
                cluster.reopen_follower(if second { 2 } else { 1 });
                cluster.check_agreement(&READ_TS);
            }
        }
        check_model(&cluster, &map, &model)?;
    }
    // Everything the leader froze is flushed, then garbage is collected: every file a file list
    // names is still in the object store. (Files the log retired stay: no replica deletes them
    // before the region's group index, which no one raises here, passed the retiring index;
    // `file_gc_replicas.rs` tests that.)
    cluster.pump(Duration::ZERO);
    while cluster.deliver_proposal().is_some() {}
    cluster.flush_all_frozen();
    check_model(&cluster, &map, &model)?;
    cluster.leader().collect_garbage();
    let live = cluster.leader().live_file_ids();
    let stored: BTreeSet<u64> = cluster.replicas[0]
        .dfs
        .inner()
        .list()
        .unwrap()
        .into_iter()
        .map(kvengine::FileId::get)
        .collect();
    prop_assert!(
        live.is_subset(&stored),
        "files a file list names are gone from the object store: {:?}",
        live.difference(&stored).collect::<Vec<_>>()
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn replicas_applying_one_log_stay_identical_and_match_a_btreemap_model(
        ops in prop::collection::vec(op(), 1..120)
    ) {
        run(ops)?;
    }
}
