//! Model test: a random valid sequence of ChangeSets, delivered with duplicates re-inserted at
//! later positions, leaves `ShardFiles` with exactly the files of a simple model that applies the
//! original sequence once, in order.
//!
//! Operations are generated as seeds interpreted against the model's current state, so every
//! generated compaction is valid when first delivered, and shrinking removes seeds to give a
//! short readable sequence.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;

use bytes::Bytes;
use changeset::{
    Applied, Change, ChangeSet, ColumnFamily, Compaction, FileMeta, Flush, Ingest, L0Create,
    MAX_LEVEL, ShardFiles, TableCreate,
};
use proptest::prelude::*;

const SHARD: u64 = 1;
const VER: u64 = 5;
/// Levels the generator uses (L1..=L3); deeper levels stay empty.
const MODEL_LEVELS: u32 = 3;
/// Smallest keys are drawn below this, so that files often overlap the level below.
const KEY_SPACE: u16 = 2_000;

#[derive(Clone, Debug)]
enum Seed {
    Flush {
        lo: u16,
        span: u16,
        advance: u8,
    },
    Ingest {
        lo: u16,
        span: u16,
        level: u8,
        cf: u8,
    },
    CompactL0 {
        count: u8,
        cf_mask: u8,
        split: bool,
    },
    CompactLevel {
        cf: u8,
        level: u8,
        pick: u16,
        split: bool,
    },
    StaleCompaction {
        pick: u16,
    },
}

fn seed() -> impl Strategy<Value = Seed> {
    prop_oneof![
        3 => (0..KEY_SPACE, 0..500u16, 0..4u8)
            .prop_map(|(lo, span, advance)| Seed::Flush { lo, span, advance }),
        1 => (0..KEY_SPACE, 0..300u16, 0..=MODEL_LEVELS as u8, 0..3u8)
            .prop_map(|(lo, span, level, cf)| Seed::Ingest { lo, span, level, cf }),
        2 => (1..5u8, any::<u8>(), any::<bool>())
            .prop_map(|(count, cf_mask, split)| Seed::CompactL0 { count, cf_mask, split }),
        2 => (0..3u8, 1..MODEL_LEVELS as u8, any::<u16>(), any::<bool>())
            .prop_map(|(cf, level, pick, split)| Seed::CompactLevel { cf, level, pick, split }),
        1 => any::<u16>().prop_map(|pick| Seed::StaleCompaction { pick }),
    ]
}

/// A file in the model: id and inclusive key range as integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ModelFile {
    id: u64,
    lo: u32,
    hi: u32,
}

impl ModelFile {
    fn overlaps(&self, lo: u32, hi: u32) -> bool {
        self.lo <= hi && lo <= self.hi
    }
}

/// The oracle: L0 newest first, and per (cf, level) an unordered list of files.
#[derive(Clone, Debug, Default, PartialEq)]
struct Model {
    data_sequence: u64,
    l0s: Vec<ModelFile>,
    levels: BTreeMap<(ColumnFamily, u32), Vec<ModelFile>>,
}

/// What the first delivery of a generated ChangeSet must return.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Applied,
    Conflicted,
}

fn key(k: u32) -> Bytes {
    Bytes::copy_from_slice(&k.to_be_bytes())
}

fn size(file: ModelFile) -> u64 {
    u64::from(file.hi - file.lo) + 1
}

fn l0_create(file: ModelFile) -> L0Create {
    L0Create {
        id: file.id,
        smallest: key(file.lo),
        biggest: key(file.hi),
        size: size(file),
    }
}

fn table_create(file: ModelFile, cf: ColumnFamily, level: u32) -> TableCreate {
    TableCreate {
        id: file.id,
        level,
        cf: cf.as_u32(),
        smallest: key(file.lo),
        biggest: key(file.hi),
        size: size(file),
    }
}

struct Generator {
    model: Model,
    next_id: u64,
    applied_compactions: Vec<Compaction>,
    changesets: Vec<ChangeSet>,
    expects: Vec<Expect>,
    /// Model state after each generated ChangeSet.
    states: Vec<Model>,
}

impl Generator {
    fn new() -> Self {
        Self {
            model: Model::default(),
            next_id: 100,
            applied_compactions: Vec::new(),
            changesets: Vec::new(),
            expects: Vec::new(),
            states: Vec::new(),
        }
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn push(&mut self, change: Change, expect: Expect) {
        let sequence = self.changesets.len() as u64 + 1;
        self.changesets.push(ChangeSet {
            shard_id: SHARD,
            shard_ver: VER,
            sequence,
            properties: BTreeMap::new(),
            change: Some(change),
        });
        self.expects.push(expect);
        self.states.push(self.model.clone());
    }

    fn level(&mut self, cf: ColumnFamily, level: u32) -> &mut Vec<ModelFile> {
        self.model.levels.entry((cf, level)).or_default()
    }

    /// Output files covering `[lo, hi]`: one, or two split at the middle.
    fn outputs(&mut self, lo: u32, hi: u32, split: bool) -> Vec<ModelFile> {
        if split && hi > lo {
            let mid = lo + (hi - lo) / 2;
            let (a, b) = (self.fresh_id(), self.fresh_id());
            vec![
                ModelFile { id: a, lo, hi: mid },
                ModelFile {
                    id: b,
                    lo: mid + 1,
                    hi,
                },
            ]
        } else {
            vec![ModelFile {
                id: self.fresh_id(),
                lo,
                hi,
            }]
        }
    }

    fn apply_seed(&mut self, seed: &Seed) {
        match *seed {
            Seed::Flush { lo, span, advance } => {
                let file = ModelFile {
                    id: self.fresh_id(),
                    lo: u32::from(lo),
                    hi: u32::from(lo) + u32::from(span),
                };
                self.model.l0s.insert(0, file);
                self.model.data_sequence += u64::from(advance);
                let flush = Flush {
                    l0_create: Some(l0_create(file)),
                    data_sequence: self.model.data_sequence,
                    version: 10_000 + self.model.data_sequence,
                };
                self.push(Change::Flush(flush), Expect::Applied);
            }
            Seed::Ingest {
                lo,
                span,
                level,
                cf,
            } => {
                let cf = ColumnFamily::ALL[usize::from(cf)];
                let file = ModelFile {
                    id: self.fresh_id(),
                    lo: u32::from(lo),
                    hi: u32::from(lo) + u32::from(span),
                };
                let level = u32::from(level);
                let fits = level > 0
                    && !self
                        .level(cf, level)
                        .iter()
                        .any(|f| f.overlaps(file.lo, file.hi));
                let ingest = if fits {
                    self.level(cf, level).push(file);
                    Ingest {
                        l0_creates: vec![],
                        table_creates: vec![table_create(file, cf, level)],
                    }
                } else {
                    self.model.l0s.insert(0, file);
                    Ingest {
                        l0_creates: vec![l0_create(file)],
                        table_creates: vec![],
                    }
                };
                self.push(Change::Ingest(ingest), Expect::Applied);
            }
            Seed::CompactL0 {
                count,
                cf_mask,
                split,
            } => {
                if self.model.l0s.is_empty() {
                    return;
                }
                let count = usize::from(count).min(self.model.l0s.len());
                let tops = self.model.l0s.split_off(self.model.l0s.len() - count);
                let lo = tops.iter().map(|f| f.lo).min().unwrap();
                let hi = tops.iter().map(|f| f.hi).max().unwrap();
                let mut bottom_deletes = Vec::new();
                let mut table_creates = Vec::new();
                for cf in ColumnFamily::ALL {
                    let level = self.level(cf, 1);
                    let (bottoms, kept): (Vec<ModelFile>, Vec<ModelFile>) =
                        level.iter().partition(|f| f.overlaps(lo, hi));
                    *level = kept;
                    // An L0 file may hold no rows of a column family; then it has no output.
                    if bottoms.is_empty() && cf_mask & (1 << cf.index()) == 0 {
                        continue;
                    }
                    let out_lo = bottoms.iter().map(|f| f.lo).fold(lo, u32::min);
                    let out_hi = bottoms.iter().map(|f| f.hi).fold(hi, u32::max);
                    bottom_deletes.extend(bottoms.iter().map(|f| f.id));
                    let outputs = self.outputs(out_lo, out_hi, split);
                    table_creates.extend(outputs.iter().map(|f| table_create(*f, cf, 1)));
                    self.level(cf, 1).extend(outputs);
                }
                let compaction = Compaction {
                    cf: 0,
                    level: 0,
                    top_deletes: tops.iter().map(|f| f.id).collect(),
                    bottom_deletes,
                    table_creates,
                    conflicted: false,
                    safe_point: 0,
                };
                self.applied_compactions.push(compaction.clone());
                self.push(Change::Compaction(compaction), Expect::Applied);
            }
            Seed::CompactLevel {
                cf,
                level,
                pick,
                split,
            } => {
                let cf = ColumnFamily::ALL[usize::from(cf)];
                let level = u32::from(level);
                let target = level + 1;
                let tops = self.level(cf, level);
                if tops.is_empty() {
                    return;
                }
                let top = tops.remove(usize::from(pick) % tops.len());
                let bottom_level = self.level(cf, target);
                let (bottoms, kept): (Vec<ModelFile>, Vec<ModelFile>) = bottom_level
                    .iter()
                    .partition(|f| f.overlaps(top.lo, top.hi));
                *bottom_level = kept;
                // With nothing below and no split, the file moves down unchanged.
                let outputs = if bottoms.is_empty() && !split {
                    vec![top]
                } else {
                    let lo = bottoms.iter().map(|f| f.lo).fold(top.lo, u32::min);
                    let hi = bottoms.iter().map(|f| f.hi).fold(top.hi, u32::max);
                    self.outputs(lo, hi, split)
                };
                self.level(cf, target).extend(outputs.iter().copied());
                let compaction = Compaction {
                    cf: cf.as_u32(),
                    level,
                    top_deletes: vec![top.id],
                    bottom_deletes: bottoms.iter().map(|f| f.id).collect(),
                    table_creates: outputs
                        .iter()
                        .map(|f| table_create(*f, cf, target))
                        .collect(),
                    conflicted: false,
                    safe_point: 0,
                };
                self.applied_compactions.push(compaction.clone());
                self.push(Change::Compaction(compaction), Expect::Applied);
            }
            Seed::StaleCompaction { pick } => {
                if self.applied_compactions.is_empty() {
                    return;
                }
                let index = usize::from(pick) % self.applied_compactions.len();
                let mut stale = self.applied_compactions[index].clone();
                // A retry that rebuilt its outputs under new ids; its inputs are long gone.
                for table in &mut stale.table_creates {
                    table.id = self.fresh_id();
                }
                self.push(Change::Compaction(stale), Expect::Conflicted);
            }
        }
    }
}

fn generate(seeds: &[Seed]) -> Generator {
    let mut generator = Generator::new();
    for seed in seeds {
        generator.apply_seed(seed);
    }
    generator
}

/// Compares the shard's files with the model's, file by file.
fn assert_matches_model(shard: &ShardFiles, model: &Model) -> Result<(), TestCaseError> {
    let as_model = |f: &FileMeta| ModelFile {
        id: f.id,
        lo: u32::from_be_bytes(f.smallest.as_ref().try_into().unwrap()),
        hi: u32::from_be_bytes(f.biggest.as_ref().try_into().unwrap()),
    };
    let l0s: Vec<ModelFile> = shard.l0s().iter().map(as_model).collect();
    prop_assert_eq!(&l0s, &model.l0s, "l0s");
    for cf in ColumnFamily::ALL {
        for level in 1..=MAX_LEVEL {
            let actual: Vec<ModelFile> = shard.level(cf, level).iter().map(as_model).collect();
            let mut expected = model.levels.get(&(cf, level)).cloned().unwrap_or_default();
            expected.sort_by_key(|f| f.lo);
            prop_assert_eq!(&actual, &expected, "cf={} level={}", cf, level);
        }
    }
    prop_assert_eq!(shard.data_sequence(), model.data_sequence);
    Ok(())
}

fn model_matches_shard(
    seeds: Vec<Seed>,
    duplicates: Vec<(usize, usize)>,
) -> Result<(), TestCaseError> {
    let generated = generate(&seeds);
    let count = generated.changesets.len();
    prop_assume!(count > 0);

    // Delivery order: the originals in order, plus duplicates placed after their original.
    let mut delivery: Vec<(usize, bool)> = (0..count).map(|i| (i, false)).collect();
    for (which, offset) in duplicates {
        let original = which % count;
        let position = delivery
            .iter()
            .position(|&(i, dup)| i == original && !dup)
            .unwrap();
        let later = position + 1 + offset % (delivery.len() - position);
        delivery.insert(later, (original, true));
    }

    let mut shard = ShardFiles::new(SHARD, VER, Bytes::new(), Bytes::new(), 1_000);
    let mut delivered_up_to = None;
    for (index, duplicate) in delivery {
        let changeset = &generated.changesets[index];
        let before = shard.clone();
        let result = shard.apply(changeset);
        if duplicate {
            prop_assert_eq!(
                result,
                Ok(Applied::Skipped {
                    meta_seq: before.meta_seq()
                })
            );
            prop_assert_eq!(&shard, &before, "a duplicate changed the shard");
        } else {
            match (generated.expects[index], result) {
                (Expect::Applied, Ok(Applied::Applied)) => {}
                (Expect::Conflicted, Ok(Applied::Conflicted(marked))) => {
                    let Some(Change::Compaction(c)) = &marked.change else {
                        return Err(TestCaseError::fail("conflicted result is not a compaction"));
                    };
                    prop_assert!(c.conflicted);
                }
                (expect, result) => {
                    return Err(TestCaseError::fail(format!(
                        "sequence {} expected {expect:?}, got {result:?}",
                        changeset.sequence
                    )));
                }
            }
            delivered_up_to = Some(index);
        }
        let index = delivered_up_to.expect("the first delivery is an original");
        prop_assert_eq!(shard.meta_seq(), generated.changesets[index].sequence);
        assert_matches_model(&shard, &generated.states[index])?;
    }
    assert_matches_model(&shard, &generated.model)?;
    // The final state survives a snapshot round trip.
    let rebuilt = ShardFiles::from_changeset(&shard.to_changeset()).unwrap();
    prop_assert_eq!(rebuilt, shard);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn delivery_with_duplicates_matches_a_model_applying_each_changeset_once(
        seeds in prop::collection::vec(seed(), 1..60),
        duplicates in prop::collection::vec((any::<usize>(), any::<usize>()), 0..20),
    ) {
        model_matches_shard(seeds, duplicates)?;
    }
}

#[test]
fn generator_produces_every_kind_including_stale_conflicts() {
    let seeds = [
        Seed::Flush {
            lo: 10,
            span: 20,
            advance: 1,
        },
        Seed::Flush {
            lo: 25,
            span: 20,
            advance: 1,
        },
        Seed::CompactL0 {
            count: 2,
            cf_mask: 0b111,
            split: true,
        },
        Seed::CompactLevel {
            cf: 0,
            level: 1,
            pick: 0,
            split: false,
        },
        Seed::StaleCompaction { pick: 0 },
        Seed::Ingest {
            lo: 500,
            span: 5,
            level: 2,
            cf: 1,
        },
    ];
    let generated = generate(&seeds);
    assert_eq!(generated.changesets.len(), 6);
    assert_eq!(generated.expects[4], Expect::Conflicted);
    model_matches_shard(seeds.to_vec(), vec![(2, 3), (0, 0), (4, 1)]).unwrap();
}
