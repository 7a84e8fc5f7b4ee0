//! Model test: tables built from random data answer every read exactly as a BTreeMap oracle.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use common::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn point_reads_at_any_ts_match_the_oracle(
        oracle in oracle_strategy(60),
        opts in options_strategy(),
        probes in prop::collection::vec((key_strategy(), 0u64..70), 1..40),
    ) {
        let t = open(&oracle, opts);
        for (k, ts) in probes.iter().map(|(k, ts)| (k.clone(), *ts)).chain(
            oracle.keys().flat_map(|k| [(k.clone(), u64::MAX), (k.clone(), 30)])
        ) {
            let got = t.get(&k, ts).unwrap().map(|v| as_pair(&v));
            prop_assert_eq!(got, expected_at(&oracle, &k, ts), "key={:?} ts={}", k, ts);
        }
        for k in oracle.keys() {
            let got: Vec<_> = t.versions(k).unwrap().iter().map(as_pair).collect();
            let want: Vec<_> = oracle[k].iter().rev().map(|(v, c)| (*v, c.clone())).collect();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn forward_scans_from_any_seek_match_the_oracle(
        oracle in oracle_strategy(60),
        opts in options_strategy(),
        seek in key_strategy(),
        ts in 0u64..70,
    ) {
        let t = open(&oracle, opts);
        let want: Vec<_> = oracle
            .range(seek.clone()..)
            .filter_map(|(k, _)| expected_at(&oracle, k, ts).map(|e| (k.clone(), e)))
            .collect();
        let mut it = t.iter(ts);
        it.seek(&seek).unwrap();
        let mut got = Vec::new();
        while it.valid() {
            got.push((it.key().to_vec(), iter_pair(&it)));
            it.next().unwrap();
        }
        prop_assert_eq!(got, want);
    }

    #[test]
    fn reverse_scans_from_any_seek_match_the_oracle(
        oracle in oracle_strategy(60),
        opts in options_strategy(),
        seek in prop::option::of(key_strategy()),
        ts in 0u64..70,
    ) {
        let t = open(&oracle, opts);
        let upper = seek.clone();
        let want: Vec<_> = oracle
            .iter()
            .rev()
            .filter(|(k, _)| upper.as_ref().is_none_or(|u| k.as_slice() <= u.as_slice()))
            .filter_map(|(k, _)| expected_at(&oracle, k, ts).map(|e| (k.clone(), e)))
            .collect();
        let mut it = t.iter(ts);
        match &seek {
            Some(k) => it.seek_for_prev(k).unwrap(),
            None => it.seek_to_last().unwrap(),
        }
        let mut got = Vec::new();
        while it.valid() {
            got.push((it.key().to_vec(), iter_pair(&it)));
            it.prev().unwrap();
        }
        prop_assert_eq!(got, want);
    }

    #[test]
    fn mixed_next_and_prev_follow_the_oracle(
        oracle in oracle_strategy(40),
        opts in options_strategy(),
        ts in 0u64..70,
        steps in prop::collection::vec(any::<bool>(), 1..60),
    ) {
        let t = open(&oracle, opts);
        let visible: Vec<Vec<u8>> = oracle
            .keys()
            .filter(|k| expected_at(&oracle, k, ts).is_some())
            .cloned()
            .collect();
        let mut it = t.iter(ts);
        it.seek_to_first().unwrap();
        let mut pos: Option<usize> = if visible.is_empty() { None } else { Some(0) };
        for forward in steps {
            match pos {
                None => {
                    prop_assert!(!it.valid());
                    break;
                }
                Some(p) => {
                    prop_assert!(it.valid());
                    prop_assert_eq!(it.key(), visible[p].as_slice());
                    if forward {
                        it.next().unwrap();
                        pos = if p + 1 < visible.len() { Some(p + 1) } else { None };
                    } else {
                        it.prev().unwrap();
                        pos = p.checked_sub(1);
                    }
                }
            }
        }
    }

    #[test]
    fn properties_describe_the_contents(oracle in oracle_strategy(60), opts in options_strategy()) {
        let built = build(&oracle, opts);
        let p = &built.properties;
        let versions: usize = oracle.values().map(|v| v.len()).sum();
        prop_assert_eq!(p.entries as usize, oracle.len());
        prop_assert_eq!(p.old_entries as usize, versions - oracle.len());
        let tombs = oracle.values().flat_map(|v| v.values()).filter(|c| c.2).count();
        prop_assert_eq!(p.tombstones as usize, tombs);
        let max_ts = oracle.values().flat_map(|v| v.keys()).max().copied().unwrap_or(0);
        prop_assert_eq!(p.max_ts, max_ts);
        prop_assert_eq!(p.smallest.clone(), oracle.keys().next().cloned().unwrap_or_default());
        prop_assert_eq!(p.biggest.clone(), oracle.keys().next_back().cloned().unwrap_or_default());
        let t = sst::Table::open(1, bytes::Bytes::from(built.data)).unwrap();
        prop_assert_eq!(t.properties(), p);
    }
}

#[test]
fn builder_rejects_out_of_order_entries() {
    let mut b = sst::TableBuilder::new(sst::BuilderOptions::default()).unwrap();
    b.add(b"b", 5, b"", b"v", false).unwrap();
    assert!(matches!(
        b.add(b"a", 9, b"", b"v", false),
        Err(sst::Error::OutOfOrder(_))
    ));
    assert!(matches!(
        b.add(b"b", 5, b"", b"v", false),
        Err(sst::Error::OutOfOrder(_))
    ));
    assert!(matches!(
        b.add(b"b", 6, b"", b"v", false),
        Err(sst::Error::OutOfOrder(_))
    ));
    b.add(b"b", 4, b"", b"v", false).unwrap();
}

#[test]
fn empty_table_opens_and_reads_nothing() {
    let t = open(&Oracle::new(), sst::BuilderOptions::default());
    assert!(t.is_empty());
    assert_eq!(t.get(b"a", u64::MAX).unwrap(), None);
    let mut it = t.iter(u64::MAX);
    it.seek_to_first().unwrap();
    assert!(!it.valid());
    assert_eq!(t.estimate_blocks_size(&[(b"", b"")]), 0);
}

#[test]
fn local_file_reads_through_a_memory_map() {
    let oracle = multi_block_oracle(500);
    let built = build(
        &oracle,
        sst::BuilderOptions {
            block_size: 512,
            ..Default::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    std::fs::write(&path, &built.data).unwrap();
    let t = sst::Table::open_file(1, &path).unwrap();
    for (k, _) in oracle.iter().step_by(17) {
        let got = t.get(k, u64::MAX).unwrap().map(|v| as_pair(&v));
        assert_eq!(got, expected_at(&oracle, k, u64::MAX));
    }
}
