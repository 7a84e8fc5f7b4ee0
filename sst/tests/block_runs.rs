//! The block-at-a-time scan (`TableIter::next_run`) against the row-at-a-time cursor and the
//! BTreeMap oracle: a scan that mixes runs of any length, runs cut short by a bound or by the
//! visitor, and single steps visits exactly the oracle's rows, in both directions, across block
//! boundaries, over old versions and tombstones.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use common::*;
use proptest::prelude::*;
use sst::{RunBound, RunRow};

/// One move of a mixed scan.
#[derive(Debug, Clone)]
enum Move {
    /// `next`/`prev`.
    Step,
    /// A run of at most `max` rows whose visitor refuses the row after `accept` rows, bounded
    /// by `bound` (inclusive or not) when given.
    Run {
        max: usize,
        accept: usize,
        bound: Option<(Vec<u8>, bool)>,
    },
}

fn move_strategy() -> impl Strategy<Value = Move> {
    prop_oneof![
        1 => Just(Move::Step),
        3 => (
            0usize..80,
            0usize..80,
            prop::option::of((key_strategy(), any::<bool>())),
        )
            .prop_map(|(max, accept, bound)| Move::Run { max, accept, bound }),
    ]
}

type Row = (Vec<u8>, (u64, Cell));

fn run_row(r: &RunRow<'_>) -> Row {
    (
        r.key.to_vec(),
        (r.version, (r.user_meta.to_vec(), r.value.to_vec(), false)),
    )
}

/// Scans the whole table (from the first key, or from the last in reverse) with `moves`
/// (repeated; steps once moves run out) and returns every row visited, checking on the way
/// that a run respects its bound, its `max` and its visitor, and that it never returns a
/// tombstone.
fn mixed_scan(t: &sst::Table, ts: u64, reverse: bool, moves: &[Move]) -> Vec<Row> {
    let mut it = t.iter(ts);
    if reverse {
        it.seek_to_last().unwrap();
    } else {
        it.seek_to_first().unwrap();
    }
    let mut got = Vec::new();
    let mut i = 0;
    while it.valid() {
        let m = moves
            .get(i % moves.len().max(1))
            .cloned()
            .unwrap_or(Move::Step);
        i += 1;
        match m {
            Move::Step => {
                got.push((it.key().to_vec(), iter_pair(&it)));
                if reverse {
                    it.prev().unwrap();
                } else {
                    it.next().unwrap();
                }
            }
            Move::Run { max, accept, bound } => {
                let b = bound.as_ref().map(|(k, inclusive)| RunBound {
                    key: k,
                    inclusive: *inclusive,
                });
                let mut seen = Vec::new();
                let n = it
                    .next_run(b, reverse, max, |r| {
                        if seen.len() == accept {
                            return false;
                        }
                        assert!(b.is_none_or(|b| b.admits(r.key, reverse)), "past the bound");
                        seen.push(run_row(r));
                        true
                    })
                    .unwrap();
                assert_eq!(n, seen.len(), "the count is what the visitor consumed");
                assert!(n <= max);
                if let Some((last, _)) = seen.last() {
                    assert_eq!(
                        it.last_run_key(),
                        &last[..],
                        "last_run_key is the last row consumed"
                    );
                }
                got.extend(seen);
            }
        }
        // Bound the work of a script that never moves (every run taking 0 rows).
        if i > 100_000 {
            panic!("scan made no progress");
        }
        if i % moves.len().max(1) == 0 && it.valid() {
            // Guarantee progress once per round of the script.
            got.push((it.key().to_vec(), iter_pair(&it)));
            if reverse {
                it.prev().unwrap();
            } else {
                it.next().unwrap();
            }
        }
    }
    got
}

fn oracle_rows(oracle: &Oracle, ts: u64, reverse: bool) -> Vec<Row> {
    let mut rows: Vec<Row> = oracle
        .keys()
        .filter_map(|k| expected_at(oracle, k, ts).map(|e| (k.clone(), e)))
        .collect();
    if reverse {
        rows.reverse();
    }
    rows
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn runs_mixed_with_steps_visit_exactly_the_oracle_rows(
        oracle in oracle_strategy(80),
        opts in options_strategy(),
        ts in 0u64..70,
        reverse in any::<bool>(),
        moves in prop::collection::vec(move_strategy(), 1..12),
    ) {
        let t = open(&oracle, opts);
        let got = mixed_scan(&t, ts, reverse, &moves);
        prop_assert_eq!(got, oracle_rows(&oracle, ts, reverse));
    }

    #[test]
    fn a_run_resumes_exactly_after_its_last_row(
        oracle in oracle_strategy(80),
        opts in options_strategy(),
        ts in 0u64..70,
        reverse in any::<bool>(),
        page in 1usize..20,
    ) {
        // Pages of `page` rows, as a paged coprocessor scan takes them: every page ends inside
        // a block somewhere, and the next one must start on the very next row.
        let t = open(&oracle, opts);
        let moves = vec![Move::Run { max: page, accept: usize::MAX, bound: None }];
        let got = mixed_scan(&t, ts, reverse, &moves);
        prop_assert_eq!(got, oracle_rows(&oracle, ts, reverse));
    }
}

#[test]
fn one_run_takes_a_whole_table_of_plain_rows() {
    // One version per key, no tombstones, read above every version: nothing needs the
    // row-at-a-time path, so a single unbounded run crosses every block boundary.
    let mut oracle = Oracle::new();
    for i in 0..3000u32 {
        let mut versions = std::collections::BTreeMap::new();
        versions.insert(
            10,
            (b"m".to_vec(), format!("value-{i}").into_bytes(), false),
        );
        oracle.insert(format!("t1_r{i:06}").into_bytes(), versions);
    }
    let t = open(
        &oracle,
        sst::BuilderOptions {
            block_size: 512,
            ..Default::default()
        },
    );
    assert!(t.block_sizes().len() > 50, "the table spans many blocks");
    for reverse in [false, true] {
        let mut it = t.iter(20);
        if reverse {
            it.seek_to_last().unwrap();
        } else {
            it.seek_to_first().unwrap();
        }
        let mut rows = Vec::new();
        let n = it
            .next_run(None, reverse, usize::MAX, |r| {
                rows.push(run_row(r));
                true
            })
            .unwrap();
        assert_eq!(n, 3000);
        assert!(!it.valid(), "the run ended the table");
        assert_eq!(rows, oracle_rows(&oracle, 20, reverse));
    }
}

#[test]
fn a_run_stops_before_a_tombstone_and_a_too_new_version() {
    let mut oracle = Oracle::new();
    let cell = |v: &str, tomb| (b"m".to_vec(), v.as_bytes().to_vec(), tomb);
    for (k, versions) in [
        ("a", vec![(10, cell("a10", false))]),
        ("b", vec![(10, cell("b10", false))]),
        ("c", vec![(10, cell("", true))]),
        ("d", vec![(10, cell("d10", false))]),
        ("e", vec![(5, cell("e5", false)), (30, cell("e30", false))]),
        ("f", vec![(10, cell("f10", false))]),
    ] {
        oracle.insert(k.as_bytes().to_vec(), versions.into_iter().collect());
    }
    let t = open(&oracle, sst::BuilderOptions::default());
    let mut it = t.iter(20);
    it.seek_to_first().unwrap();
    let mut keys = Vec::new();
    let run = |it: &mut sst::TableIter, keys: &mut Vec<Vec<u8>>| {
        it.next_run(None, false, usize::MAX, |r| {
            keys.push(r.key.to_vec());
            true
        })
        .unwrap()
    };
    assert_eq!(
        run(&mut it, &mut keys),
        2,
        "a, b; stops before the tombstone c"
    );
    assert_eq!(it.key(), b"c");
    assert!(it.is_tombstone());
    it.next().unwrap();
    assert_eq!(
        run(&mut it, &mut keys),
        1,
        "d; stops before e, whose newest is too new"
    );
    assert_eq!((it.key(), it.value()), (&b"e"[..], &b"e5"[..]));
    it.next().unwrap();
    assert_eq!(run(&mut it, &mut keys), 1, "f");
    assert!(!it.valid());
    assert_eq!(keys, [&b"a"[..], b"b", b"d", b"f"]);
}
