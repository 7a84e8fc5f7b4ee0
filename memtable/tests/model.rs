//! Model test: random operation sequences against a `BTreeMap` oracle.
//!
//! Keys come from a tiny alphabet and versions from a tiny range, so keys collide, stale puts
//! (which must be ignored) are frequent, and reads at random ts land between, on and outside
//! versions. Keys and values are short strings so a shrunk counter-example reads like a story.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;

use memtable::size_estimate::{key_charge, version_charge};
use memtable::{CfIter, ColumnFamily, Memtable, VersionRef};
use proptest::prelude::*;

/// One version in the oracle.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ModelVersion {
    meta: Vec<u8>,
    value: Vec<u8>,
    tombstone: bool,
}

/// What a version looks like to the test: (version, meta, value, tombstone). Strings, so that a
/// counter-example prints `"xy"` rather than `[120, 121]`.
type Seen = (u64, String, String, bool);

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn seen(v: &VersionRef) -> Seen {
    (
        v.version(),
        text(v.user_meta()),
        text(v.value()),
        v.is_tombstone(),
    )
}

fn seen_model(version: u64, m: &ModelVersion) -> Seen {
    (version, text(&m.meta), text(&m.value), m.tombstone)
}

/// The oracle: per column family, key → version → data.
#[derive(Default)]
struct Model {
    cfs: [BTreeMap<Vec<u8>, BTreeMap<u64, ModelVersion>>; ColumnFamily::COUNT],
    size: usize,
}

impl Model {
    fn insert(&mut self, cf: ColumnFamily, key: &[u8], version: u64, m: ModelVersion) -> bool {
        let versions = self.cfs[cf.index()].entry(key.to_vec()).or_default();
        if versions
            .keys()
            .next_back()
            .is_some_and(|&newest| newest >= version)
        {
            return false;
        }
        if versions.is_empty() {
            self.size += key_charge(key.len());
        }
        self.size += version_charge(m.meta.len(), m.value.len());
        versions.insert(version, m);
        true
    }

    fn get(&self, cf: ColumnFamily, key: &[u8], ts: u64) -> Option<Seen> {
        let (v, m) = self.cfs[cf.index()].get(key)?.range(..=ts).next_back()?;
        Some(seen_model(*v, m))
    }

    /// Keys visible at `ts`, ascending, each with its visible version.
    fn visible(&self, cf: ColumnFamily, ts: u64) -> Vec<(String, Seen)> {
        self.cfs[cf.index()]
            .keys()
            .filter_map(|k| Some((text(k), self.get(cf, k, ts)?)))
            .collect()
    }

    fn len(&self, cf: ColumnFamily) -> usize {
        self.cfs[cf.index()]
            .values()
            .filter(|v| !v.is_empty())
            .count()
    }
}

/// Where a cursor walk starts.
#[derive(Debug, Clone)]
enum Start {
    Seek(String),
    SeekForPrev(String),
    First,
    Last,
}

#[derive(Debug, Clone, Copy)]
enum Move {
    Next,
    Prev,
}

#[derive(Debug, Clone)]
enum Op {
    Put {
        cf: ColumnFamily,
        key: String,
        version: u64,
        meta: String,
        value: String,
    },
    Delete {
        cf: ColumnFamily,
        key: String,
        version: u64,
        meta: String,
    },
    Get {
        cf: ColumnFamily,
        key: String,
        ts: u64,
    },
    GetNewest {
        cf: ColumnFamily,
        key: String,
    },
    Versions {
        cf: ColumnFamily,
        key: String,
    },
    /// Seek (or seek_to_first) then `next` to the end.
    ScanForward {
        cf: ColumnFamily,
        from: Option<String>,
        ts: u64,
    },
    /// Seek_for_prev (or seek_to_last) then `prev` to the start.
    ScanBackward {
        cf: ColumnFamily,
        from: Option<String>,
        ts: u64,
    },
    /// A start then mixed `next`/`prev`, checking the position after every move.
    Walk {
        cf: ColumnFamily,
        start: Start,
        ts: u64,
        moves: Vec<Move>,
    },
}

fn cf() -> impl Strategy<Value = ColumnFamily> {
    prop::sample::select(ColumnFamily::ALL.to_vec())
}

/// Up to two letters out of three: 13 keys including the empty key, with prefixes of each other.
fn key() -> impl Strategy<Value = String> {
    "[abc]{0,2}"
}

fn version() -> impl Strategy<Value = u64> {
    0..12u64
}

/// A read ts: one past the version range too, so "everything visible" is covered.
fn ts() -> impl Strategy<Value = u64> {
    0..13u64
}

fn bytes() -> impl Strategy<Value = String> {
    "[xyz]{0,3}"
}

fn start() -> impl Strategy<Value = Start> {
    prop_oneof![
        key().prop_map(Start::Seek),
        key().prop_map(Start::SeekForPrev),
        Just(Start::First),
        Just(Start::Last),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (cf(), key(), version(), bytes(), bytes()).prop_map(|(cf, key, version, meta, value)| {
            Op::Put { cf, key, version, meta, value }
        }),
        2 => (cf(), key(), version(), bytes())
            .prop_map(|(cf, key, version, meta)| Op::Delete { cf, key, version, meta }),
        2 => (cf(), key(), ts()).prop_map(|(cf, key, ts)| Op::Get { cf, key, ts }),
        1 => (cf(), key()).prop_map(|(cf, key)| Op::GetNewest { cf, key }),
        1 => (cf(), key()).prop_map(|(cf, key)| Op::Versions { cf, key }),
        1 => (cf(), prop::option::of(key()), ts())
            .prop_map(|(cf, from, ts)| Op::ScanForward { cf, from, ts }),
        1 => (cf(), prop::option::of(key()), ts())
            .prop_map(|(cf, from, ts)| Op::ScanBackward { cf, from, ts }),
        2 => (
            cf(),
            start(),
            ts(),
            prop::collection::vec(prop_oneof![Just(Move::Next), Just(Move::Prev)], 0..8)
        )
            .prop_map(|(cf, start, ts, moves)| Op::Walk { cf, start, ts, moves }),
    ]
}

fn current(it: &CfIter<'_>) -> Option<(String, Seen)> {
    it.valid().then(|| (text(it.key()), seen(it.version())))
}

/// Index of the first visible key `>= from`, if any.
fn first_at_or_after(visible: &[(String, Seen)], from: &str) -> Option<usize> {
    let i = visible.partition_point(|(k, _)| k.as_str() < from);
    (i < visible.len()).then_some(i)
}

/// Index of the last visible key `<= from`, if any.
fn last_at_or_before(visible: &[(String, Seen)], from: &str) -> Option<usize> {
    visible
        .partition_point(|(k, _)| k.as_str() <= from)
        .checked_sub(1)
}

fn check(mt: &Memtable, model: &mut Model, op: &Op) -> Result<(), TestCaseError> {
    match op {
        Op::Put {
            cf,
            key,
            version,
            meta,
            value,
        } => {
            let expected = model.insert(
                *cf,
                key.as_bytes(),
                *version,
                ModelVersion {
                    meta: meta.clone().into_bytes(),
                    value: value.clone().into_bytes(),
                    tombstone: false,
                },
            );
            let accepted = mt.put(
                *cf,
                key.as_bytes(),
                *version,
                meta.as_bytes(),
                value.as_bytes(),
            );
            prop_assert_eq!(accepted, expected, "put accepted");
        }
        Op::Delete {
            cf,
            key,
            version,
            meta,
        } => {
            let expected = model.insert(
                *cf,
                key.as_bytes(),
                *version,
                ModelVersion {
                    meta: meta.clone().into_bytes(),
                    value: Vec::new(),
                    tombstone: true,
                },
            );
            let accepted = mt.delete(*cf, key.as_bytes(), *version, meta.as_bytes());
            prop_assert_eq!(accepted, expected, "delete accepted");
        }
        Op::Get { cf, key, ts } => {
            let got = mt.cf(*cf).get(key.as_bytes(), *ts).map(|v| seen(&v));
            prop_assert_eq!(got, model.get(*cf, key.as_bytes(), *ts));
        }
        Op::GetNewest { cf, key } => {
            let got = mt.cf(*cf).get_newest(key.as_bytes()).map(|v| seen(&v));
            prop_assert_eq!(got, model.get(*cf, key.as_bytes(), u64::MAX));
        }
        Op::Versions { cf, key } => {
            let got: Vec<Seen> = mt
                .cf(*cf)
                .versions(key.as_bytes())
                .map(|v| seen(&v))
                .collect();
            let expected: Vec<Seen> = model.cfs[cf.index()]
                .get(key.as_bytes())
                .map(|vs| vs.iter().rev().map(|(v, m)| seen_model(*v, m)).collect())
                .unwrap_or_default();
            prop_assert_eq!(got, expected);
        }
        Op::ScanForward { cf, from, ts } => {
            let mut it = mt.cf(*cf).iter(*ts);
            match from {
                Some(from) => it.seek(from.as_bytes()),
                None => it.seek_to_first(),
            }
            let mut got = Vec::new();
            while let Some(entry) = current(&it) {
                got.push(entry);
                it.next();
            }
            let visible = model.visible(*cf, *ts);
            let skip = match from {
                Some(from) => first_at_or_after(&visible, from).unwrap_or(visible.len()),
                None => 0,
            };
            prop_assert_eq!(got, visible[skip..].to_vec());
        }
        Op::ScanBackward { cf, from, ts } => {
            let mut it = mt.cf(*cf).iter(*ts);
            match from {
                Some(from) => it.seek_for_prev(from.as_bytes()),
                None => it.seek_to_last(),
            }
            let mut got = Vec::new();
            while let Some(entry) = current(&it) {
                got.push(entry);
                it.prev();
            }
            let visible = model.visible(*cf, *ts);
            let end = match from {
                Some(from) => last_at_or_before(&visible, from).map_or(0, |i| i + 1),
                None => visible.len(),
            };
            let expected: Vec<_> = visible[..end].iter().rev().cloned().collect();
            prop_assert_eq!(got, expected);
        }
        Op::Walk {
            cf,
            start,
            ts,
            moves,
        } => {
            let visible = model.visible(*cf, *ts);
            let mut it = mt.cf(*cf).iter(*ts);
            prop_assert!(!it.valid(), "a new cursor is unpositioned");
            let mut at = match start {
                Start::Seek(k) => {
                    it.seek(k.as_bytes());
                    first_at_or_after(&visible, k)
                }
                Start::SeekForPrev(k) => {
                    it.seek_for_prev(k.as_bytes());
                    last_at_or_before(&visible, k)
                }
                Start::First => {
                    it.seek_to_first();
                    (!visible.is_empty()).then_some(0)
                }
                Start::Last => {
                    it.seek_to_last();
                    visible.len().checked_sub(1)
                }
            };
            prop_assert_eq!(
                current(&it),
                at.map(|i| visible[i].clone()),
                "after {:?}",
                start
            );
            for (step, mv) in moves.iter().enumerate() {
                // Moving off either end leaves the cursor invalid, and an invalid cursor stays so.
                at = match mv {
                    Move::Next => {
                        it.next();
                        at.map(|i| i + 1).filter(|&i| i < visible.len())
                    }
                    Move::Prev => {
                        it.prev();
                        at.and_then(|i| i.checked_sub(1))
                    }
                };
                prop_assert_eq!(
                    current(&it),
                    at.map(|i| visible[i].clone()),
                    "after move {} ({:?})",
                    step,
                    mv
                );
            }
        }
    }
    Ok(())
}

/// Size, key counts and emptiness after every operation; the full flush walk at the end.
fn check_totals(mt: &Memtable, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(mt.size(), model.size, "size");
    for cf in ColumnFamily::ALL {
        prop_assert_eq!(mt.cf(cf).len(), model.len(cf), "len of {}", cf);
    }
    prop_assert_eq!(
        mt.is_empty(),
        ColumnFamily::ALL.iter().all(|&cf| model.len(cf) == 0)
    );
    Ok(())
}

fn check_flush_walk(mt: &Memtable, model: &Model) -> Result<(), TestCaseError> {
    for cf in ColumnFamily::ALL {
        let got: Vec<(String, Vec<Seen>)> = mt
            .cf(cf)
            .iter_all()
            .map(|kv| (text(kv.key()), kv.versions().map(|v| seen(&v)).collect()))
            .collect();
        let expected: Vec<(String, Vec<Seen>)> = model.cfs[cf.index()]
            .iter()
            .filter(|(_, vs)| !vs.is_empty())
            .map(|(k, vs)| {
                (
                    text(k),
                    vs.iter().rev().map(|(v, m)| seen_model(*v, m)).collect(),
                )
            })
            .collect();
        prop_assert_eq!(got, expected, "iter_all of {}", cf);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn memtable_matches_btreemap_model(ops in prop::collection::vec(op(), 1..100)) {
        let mt = Memtable::new();
        let mut model = Model::default();
        for op in &ops {
            check(&mt, &mut model, op)?;
            check_totals(&mt, &model)?;
        }
        check_flush_walk(&mt, &model)?;
    }
}
