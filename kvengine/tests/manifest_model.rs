//! Model test: random valid sequences of ChangeSets (creates, flushes, L0 compactions, stale
//! compactions, splits), with rewrites and restarts at random points, always reopen to the
//! state the manifest had in memory, and reference exactly the files a simple model expects.
//!
//! Operations are seeds interpreted against the manifest's current state, so every generated
//! ChangeSet is valid when recorded and shrinking gives a short readable sequence.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use bytes::Bytes;
use changeset::{
    Applied, Change, ChangeSet, ColumnFamily, Compaction, Flush, L0Create, ShardFiles,
    ShardSplitInfo, Split, TableCreate,
};
use kvengine::manifest::{Manifest, ManifestOptions};
use proptest::prelude::*;

/// Keys are u16 big-endian; a shard with an empty end reaches up to KEY_END.
const KEY_END: u32 = 1 << 16;

#[derive(Clone, Debug)]
enum Op {
    Create,
    Flush { shard: u16, lo: u16, span: u16 },
    CompactL0 { shard: u16, count: u8 },
    StaleCompaction { shard: u16 },
    Split { shard: u16, at: u16 },
    Rewrite,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::Create),
        6 => (any::<u16>(), any::<u16>(), 0..2000u16)
            .prop_map(|(shard, lo, span)| Op::Flush { shard, lo, span }),
        3 => (any::<u16>(), 1..4u8).prop_map(|(shard, count)| Op::CompactL0 { shard, count }),
        1 => any::<u16>().prop_map(|shard| Op::StaleCompaction { shard }),
        2 => (any::<u16>(), any::<u16>()).prop_map(|(shard, at)| Op::Split { shard, at }),
        1 => Just(Op::Rewrite),
        1 => Just(Op::Reopen),
    ]
}

fn key(k: u32) -> Bytes {
    Bytes::copy_from_slice(&(k as u16).to_be_bytes())
}

fn key_value(b: &Bytes) -> u32 {
    u32::from(u16::from_be_bytes([b[0], b[1]]))
}

fn range(shard: &ShardFiles) -> (u32, u32) {
    let start = if shard.start().is_empty() {
        0
    } else {
        key_value(shard.start())
    };
    let end = if shard.end().is_empty() {
        KEY_END
    } else {
        key_value(shard.end())
    };
    (start, end)
}

fn changeset(shard: &ShardFiles, change: Change) -> ChangeSet {
    ChangeSet {
        shard_id: shard.id(),
        shard_ver: shard.ver(),
        sequence: shard.meta_seq() + 1,
        properties: BTreeMap::new(),
        change: Some(change),
    }
}

struct Harness {
    opts: ManifestOptions,
    manifest: Manifest,
    next_file_id: u64,
    next_shard_id: u64,
    /// Model: every file id that must be live.
    live: BTreeSet<u64>,
    /// Model: every live shard id.
    shard_ids: BTreeSet<u64>,
    /// The end of the key space not yet given to a shard: `Create` takes a slice of it.
    unclaimed_start: u32,
}

impl Harness {
    fn pick(&self, seed: u16) -> Option<ShardFiles> {
        let shards = self.manifest.shards();
        (!shards.is_empty()).then(|| shards[seed as usize % shards.len()].clone())
    }

    fn fresh_file_id(&mut self) -> u64 {
        self.next_file_id += 1;
        self.next_file_id
    }

    fn record(&self, cs: &ChangeSet) -> Applied {
        self.manifest
            .record(cs)
            .unwrap_or_else(|e| panic!("{e:?} for {cs:?}"))
            .applied
    }

    fn run(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Create => {
                if self.unclaimed_start + 1000 > KEY_END {
                    return Ok(());
                }
                let (start, end) = (self.unclaimed_start, self.unclaimed_start + 1000);
                self.unclaimed_start = end;
                self.next_shard_id += 1;
                let end = if end == KEY_END {
                    Bytes::new()
                } else {
                    key(end)
                };
                let files = ShardFiles::new(self.next_shard_id, 1, key(start), end, 0);
                self.manifest.create_shard(&files).unwrap();
                self.shard_ids.insert(self.next_shard_id);
            }
            Op::Flush { shard, lo, span } => {
                let Some(shard) = self.pick(shard) else {
                    return Ok(());
                };
                let (start, end) = range(&shard);
                let lo = start + u32::from(lo) % (end - start);
                let hi = (lo + u32::from(span)).min(end - 1);
                let id = self.fresh_file_id();
                let data_sequence = shard.data_sequence() + 3;
                let cs = changeset(
                    &shard,
                    Change::Flush(Flush {
                        l0_create: Some(L0Create {
                            id,
                            smallest: key(lo),
                            biggest: key(hi),
                            size: u64::from(hi - lo) + 1,
                        }),
                        data_sequence,
                        version: shard.base_version() + data_sequence,
                    }),
                );
                prop_assert_eq!(self.record(&cs), Applied::Applied);
                self.live.insert(id);
            }
            Op::CompactL0 { shard, count } => {
                let Some(shard) = self.pick(shard) else {
                    return Ok(());
                };
                // The oldest `count` L0 files and every L1 file they overlap.
                let l0s = shard.l0s();
                let inputs = &l0s[l0s.len().saturating_sub(count as usize)..];
                if inputs.is_empty() {
                    return Ok(());
                }
                let lo = inputs.iter().map(|f| f.smallest.clone()).min().unwrap();
                let hi = inputs.iter().map(|f| f.biggest.clone()).max().unwrap();
                let bottoms: Vec<_> = shard
                    .level(ColumnFamily::Write, 1)
                    .iter()
                    .filter(|f| f.biggest >= lo && f.smallest <= hi)
                    .cloned()
                    .collect();
                let smallest = bottoms
                    .iter()
                    .map(|f| f.smallest.clone())
                    .chain([lo])
                    .min()
                    .unwrap();
                let biggest = bottoms
                    .iter()
                    .map(|f| f.biggest.clone())
                    .chain([hi])
                    .max()
                    .unwrap();
                let output = self.fresh_file_id();
                let cs = changeset(
                    &shard,
                    Change::Compaction(Compaction {
                        cf: 0,
                        level: 0,
                        top_deletes: inputs.iter().map(|f| f.id).collect(),
                        bottom_deletes: bottoms.iter().map(|f| f.id).collect(),
                        table_creates: vec![TableCreate {
                            id: output,
                            level: 1,
                            cf: ColumnFamily::Write.as_u32(),
                            smallest,
                            biggest,
                            size: 1,
                        }],
                        conflicted: false,
                        safe_point: 0,
                    }),
                );
                prop_assert_eq!(self.record(&cs), Applied::Applied);
                // Split children share files: an input may still be live in a sibling.
                let still_used: BTreeSet<u64> = self.manifest.live_file_ids();
                for f in inputs.iter().chain(&bottoms) {
                    if !still_used.contains(&f.id) {
                        self.live.remove(&f.id);
                    }
                }
                self.live.insert(output);
            }
            Op::StaleCompaction { shard } => {
                let Some(shard) = self.pick(shard) else {
                    return Ok(());
                };
                let (start, _) = range(&shard);
                let missing = self.fresh_file_id();
                let output = self.fresh_file_id();
                let cs = changeset(
                    &shard,
                    Change::Compaction(Compaction {
                        cf: 0,
                        level: 0,
                        top_deletes: vec![missing],
                        bottom_deletes: vec![],
                        table_creates: vec![TableCreate {
                            id: output,
                            level: 1,
                            cf: ColumnFamily::Write.as_u32(),
                            smallest: key(start),
                            biggest: key(start),
                            size: 1,
                        }],
                        conflicted: false,
                        safe_point: 0,
                    }),
                );
                prop_assert!(matches!(self.record(&cs), Applied::Conflicted(_)));
            }
            Op::Split { shard, at } => {
                let Some(shard) = self.pick(shard) else {
                    return Ok(());
                };
                let (start, end) = range(&shard);
                if end - start < 2 {
                    return Ok(());
                }
                let at = start + 1 + u32::from(at) % (end - start - 1);
                self.next_shard_id += 1;
                let base_version = shard.base_version() + shard.data_sequence() + 1;
                let cs = changeset(
                    &shard,
                    Change::Split(Split {
                        new_shards: vec![
                            ShardSplitInfo {
                                id: shard.id(),
                                start: shard.start().clone(),
                                end: key(at),
                                base_version,
                                data_sequence: 0,
                            },
                            ShardSplitInfo {
                                id: self.next_shard_id,
                                start: key(at),
                                end: shard.end().clone(),
                                base_version,
                                data_sequence: 0,
                            },
                        ],
                    }),
                );
                prop_assert!(matches!(self.record(&cs), Applied::Split(_)));
                self.shard_ids.insert(self.next_shard_id);
            }
            Op::Rewrite => self.manifest.rewrite().unwrap(),
            Op::Reopen => self.reopen()?,
        }
        Ok(())
    }

    fn reopen(&mut self) -> Result<(), TestCaseError> {
        let before = self.manifest.shards();
        // Dropping is a crash as far as the manifest knows: it has no shutdown step.
        self.manifest = Manifest::open(self.opts.clone()).unwrap();
        prop_assert_eq!(self.manifest.shards(), before);
        Ok(())
    }
}

fn run_case(dir: &Path, rewrite_after: usize, ops: &[Op]) -> Result<(), TestCaseError> {
    let opts = ManifestOptions {
        dir: dir.to_path_buf(),
        rewrite_after,
    };
    let mut h = Harness {
        manifest: Manifest::open(opts.clone()).unwrap(),
        opts,
        next_file_id: 0,
        next_shard_id: 0,
        live: BTreeSet::new(),
        shard_ids: BTreeSet::new(),
        unclaimed_start: 0,
    };
    h.run(&Op::Create)?;
    for op in ops {
        h.run(op)?;
        prop_assert_eq!(&h.manifest.live_file_ids(), &h.live, "after {:?}", op);
        let shard_ids: BTreeSet<u64> = h.manifest.shards().iter().map(|s| s.id()).collect();
        prop_assert_eq!(&shard_ids, &h.shard_ids, "after {:?}", op);
    }
    h.reopen()?;
    prop_assert_eq!(&h.manifest.live_file_ids(), &h.live);
    Ok(())
}

proptest! {
    // Every record is fdatasync'd and every rewrite costs two more fsyncs and a rename.
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn reopen_equals_the_in_memory_state_for_any_changes_rewrites_and_restarts(
        rewrite_after in 1usize..30,
        ops in prop::collection::vec(op(), 0..40),
    ) {
        let dir = tempfile::tempdir().unwrap();
        run_case(dir.path(), rewrite_after, &ops)?;
    }
}
