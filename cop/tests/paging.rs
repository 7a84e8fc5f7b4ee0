//! Paging: random page sizes over random regions and ranges return every row exactly once, in
//! order; pages never overlap and their scanned ranges are exact (asc and desc); paged partial
//! aggregates merge to the unpaged result; TopN pass-through pages followed by a final TopN
//! equal the unpaged TopN; a TopN whose limit fits a page comes back whole, without a range.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use std::collections::BTreeMap;

use common::*;
use cop::handler::{HandlerOptions, handle};
use proptest::prelude::*;
use wire::codec::table::record_key;
use wire::coprocessor::{
    DagRequest, Executor, Expr, ExprType, KeyRange, Request, Response, ScalarFuncSig,
};
use wire::datum::{Datum, FieldType};

const T: i64 = 11;

/// A table spread over levels, L0 and the memtable: handle h has c1 = h, c2 = h % groups.
struct Fixture {
    e: TestEngine,
    /// Visible handles at ts 100, ascending.
    handles: Vec<i64>,
    /// The region's handle bounds `[lo, hi)`.
    lo: i64,
    hi: i64,
}

fn fixture(lo: i64, hi: i64, present: &[bool], groups: i64) -> Fixture {
    let e = TestEngine::with_range(&record_key(T, lo), &record_key(T, hi));
    let mut handles = Vec::new();
    let third = present.len() / 3;
    for (i, &p) in present.iter().enumerate() {
        let h = lo + i as i64;
        if h >= hi {
            break;
        }
        let row = [(1, Datum::Int(h)), (2, Datum::Int(h.rem_euclid(groups)))];
        e.put_row(T, h, 10, &row);
        if !p {
            e.delete_row(T, h, 20 + i as u64 % 3);
        } else {
            handles.push(h);
        }
        if i == third {
            e.compact();
        } else if i == 2 * third {
            e.flush();
        }
    }
    Fixture { e, handles, lo, hi }
}

fn scan(desc: bool) -> Executor {
    table_scan(
        T,
        vec![
            column(1, FieldType::Int64),
            column(2, FieldType::Int64),
            handle_column(3),
        ],
        desc,
    )
}

/// Up to three ranges inside the region, from cut points (a point range where two cuts are
/// adjacent).
fn ranges(f: &Fixture, cuts: &[i64]) -> Vec<KeyRange> {
    let span = f.hi - f.lo;
    let mut c: Vec<i64> = cuts.iter().map(|x| f.lo + x.rem_euclid(span + 1)).collect();
    c.sort();
    c.dedup();
    if c.len() < 2 {
        return vec![handle_range(T, f.lo, f.hi)];
    }
    c.chunks(2)
        .filter(|w| w.len() == 2)
        .map(|w| {
            if w[1] == w[0] + 1 {
                point(T, w[0])
            } else {
                handle_range(T, w[0], w[1])
            }
        })
        .collect()
}

fn in_ranges(h: i64, ranges: &[KeyRange]) -> bool {
    let k = record_key(T, h);
    ranges
        .iter()
        .any(|r| k >= r.start && (r.end.is_empty() || k < r.end))
}

fn opts() -> HandlerOptions {
    HandlerOptions::worker()
}

fn all_rows(pages: &[Response]) -> Vec<Vec<Datum>> {
    pages.iter().flat_map(|p| rows(p).unwrap()).collect()
}

fn handle_of(row: &[Datum]) -> i64 {
    match row.last() {
        Some(Datum::Int(h)) => *h,
        other => panic!("expected a handle, found {other:?}"),
    }
}

/// Merges partial rows `[count, sum, min, max, avg_count, avg_sum, group]` by group.
fn merge_partials(rows: &[Vec<Datum>]) -> BTreeMap<i64, [i64; 6]> {
    let int = |d: &Datum| match d {
        Datum::Int(v) => *v,
        other => panic!("expected an int, found {other:?}"),
    };
    let mut out: BTreeMap<i64, [i64; 6]> = BTreeMap::new();
    for r in rows {
        let g = if r.len() == 7 { int(&r[6]) } else { 0 };
        let v = [
            int(&r[0]),
            int(&r[1]),
            int(&r[2]),
            int(&r[3]),
            int(&r[4]),
            int(&r[5]),
        ];
        let m = out.entry(g).or_insert([0, 0, i64::MAX, i64::MIN, 0, 0]);
        m[0] += v[0];
        m[1] += v[1];
        m[2] = m[2].min(v[2]);
        m[3] = m[3].max(v[3]);
        m[4] += v[4];
        m[5] += v[5];
    }
    out
}

fn aggs() -> Vec<Expr> {
    vec![
        Expr::agg(ExprType::Count, Expr::column(0)),
        Expr::agg(ExprType::Sum, Expr::column(0)),
        Expr::agg(ExprType::Min, Expr::column(0)),
        Expr::agg(ExprType::Max, Expr::column(0)),
        Expr::agg(ExprType::Avg, Expr::column(0)),
    ]
}

fn paged(d: &DagRequest, ranges: Vec<KeyRange>, paging_size: u64) -> Request {
    let mut req = request(d, ranges, 100);
    req.paging_size = paging_size;
    req
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn pages_return_every_row_once_in_order_with_exact_non_overlapping_scanned_ranges(
        lo in -50i64..50,
        len in 1i64..120,
        present in prop::collection::vec(prop::bool::weighted(0.8), 120),
        cuts in prop::collection::vec(0i64..200, 0..6),
        paging_size in 1u64..40,
        desc in any::<bool>(),
    ) {
        let f = fixture(lo, lo + len, &present, 5);
        let snap = f.e.snap();
        let ranges = ranges(&f, &cuts);
        let d = dag(vec![scan(desc)]);
        let unpaged = rows(&handle(&request(&d, ranges.clone(), 100), &snap, &opts())).unwrap();
        let mut want: Vec<i64> = f.handles.iter().copied().filter(|h| in_ranges(*h, &ranges)).collect();
        if desc {
            want.reverse();
        }
        prop_assert_eq!(unpaged.iter().map(|r| handle_of(r)).collect::<Vec<_>>(), want.clone());

        let pages = run_pages(&snap, &paged(&d, ranges.clone(), paging_size), desc, &opts());
        let got: Vec<i64> = all_rows(&pages).iter().map(|r| handle_of(r)).collect();
        prop_assert_eq!(&got, &want, "every row exactly once, in scan order");
        let mut prev: Option<KeyRange> = None;
        for (i, p) in pages.iter().enumerate() {
            let page_rows = rows(p).unwrap();
            let Some(scanned) = &p.range else {
                prop_assert_eq!(i, pages.len() - 1, "only the last page lacks a range");
                prop_assert!(page_rows.len() as u64 <= paging_size);
                continue;
            };
            prop_assert_eq!(page_rows.len() as u64, paging_size, "a page that stopped early is full");
            // Exact: the scanned range ends (asc) or starts (desc) at the last row's key.
            let last = record_key(T, handle_of(page_rows.last().unwrap()));
            if desc {
                prop_assert_eq!(&scanned.start, &last);
            } else {
                let mut end = last.clone();
                end.push(0);
                prop_assert_eq!(&scanned.end, &end);
            }
            // Every row of the page lies in its scanned range.
            for r in &page_rows {
                let k = record_key(T, handle_of(r));
                prop_assert!(k >= scanned.start && (scanned.end.is_empty() || k < scanned.end));
            }
            // Pages do not overlap: each scanned range starts where the previous one ended.
            if let Some(prev) = &prev {
                if desc {
                    prop_assert!(!scanned.end.is_empty() && scanned.end <= prev.start);
                } else {
                    prop_assert!(scanned.start >= prev.end);
                }
            }
            prev = Some(scanned.clone());
        }
    }

    #[test]
    fn paged_partial_aggregates_merge_to_the_unpaged_result(
        lo in -50i64..50,
        len in 1i64..150,
        present in prop::collection::vec(prop::bool::weighted(0.8), 150),
        cuts in prop::collection::vec(0i64..200, 0..6),
        paging_size in 1u64..12,
        groups in 1i64..30,
        desc in any::<bool>(),
        grouped in any::<bool>(),
    ) {
        let f = fixture(lo, lo + len, &present, groups);
        let snap = f.e.snap();
        let ranges = ranges(&f, &cuts);
        let agg = if grouped {
            hash_agg(vec![Expr::column(1)], aggs())
        } else {
            simple_agg(aggs())
        };
        let d = dag(vec![scan(desc), agg]);
        let unpaged = rows(&handle(&request(&d, ranges.clone(), 100), &snap, &opts())).unwrap();
        let pages = run_pages(&snap, &paged(&d, ranges, paging_size), desc, &opts());
        for p in &pages[..pages.len() - 1] {
            // A page that stopped early holds at least paging_size groups.
            prop_assert!(rows(p).unwrap().len() as u64 >= paging_size);
        }
        prop_assert_eq!(merge_partials(&all_rows(&pages)), merge_partials(&unpaged));
    }

    #[test]
    fn top_n_pass_through_pages_then_a_final_top_n_equal_the_unpaged_top_n(
        lo in -50i64..50,
        len in 1i64..120,
        present in prop::collection::vec(prop::bool::weighted(0.8), 120),
        cuts in prop::collection::vec(0i64..200, 0..6),
        paging_size in 1u64..20,
        extra in 1u64..30,
        groups in 1i64..10,
        desc in any::<bool>(),
        order_desc in any::<bool>(),
    ) {
        let f = fixture(lo, lo + len, &present, groups);
        let snap = f.e.snap();
        let ranges = ranges(&f, &cuts);
        let limit = paging_size + extra;
        // Order by the group column: many ties, broken by scan order.
        let d = dag(vec![scan(desc), top_n(vec![(Expr::column(1), order_desc)], limit)]);
        let unpaged = rows(&handle(&request(&d, ranges.clone(), 100), &snap, &opts())).unwrap();
        let pages = run_pages(&snap, &paged(&d, ranges, paging_size), desc, &opts());
        for p in &pages {
            prop_assert!(rows(p).unwrap().len() as u64 <= paging_size, "pass-through pages are pages");
        }
        // The client's final TopN: a stable sort of the pages in order, cut at the limit.
        let mut merged = all_rows(&pages);
        merged.sort_by(|a, b| {
            let o = a[1].sql_cmp(&b[1]);
            if order_desc { o.reverse() } else { o }
        });
        merged.truncate(limit as usize);
        prop_assert_eq!(merged, unpaged);
    }

    #[test]
    fn a_top_n_whose_limit_fits_a_page_comes_back_whole_without_a_range(
        lo in -50i64..50,
        len in 1i64..120,
        present in prop::collection::vec(prop::bool::weighted(0.8), 120),
        paging_size in 1u64..40,
        limit in 0u64..40,
        desc in any::<bool>(),
    ) {
        let limit = limit.min(paging_size);
        let f = fixture(lo, lo + len, &present, 7);
        let snap = f.e.snap();
        let ranges = vec![handle_range(T, f.lo, f.hi)];
        let d = dag(vec![scan(desc), top_n(vec![(Expr::column(1), false), (Expr::column(0), true)], limit)]);
        let unpaged = rows(&handle(&request(&d, ranges.clone(), 100), &snap, &opts())).unwrap();
        let resp = handle(&paged(&d, ranges, paging_size), &snap, &opts());
        prop_assert!(resp.range.is_none());
        prop_assert_eq!(rows(&resp).unwrap(), unpaged);
    }
}

#[test]
fn a_drained_region_returns_no_range_even_when_the_last_page_is_exactly_full() {
    let f = fixture(0, 10, &[true; 10], 3);
    let snap = f.e.snap();
    let d = dag(vec![scan(false)]);
    let resp = handle(&paged(&d, vec![handle_range(T, 0, 10)], 10), &snap, &opts());
    assert_eq!(rows(&resp).unwrap().len(), 10);
    assert!(resp.range.is_none());
    let resp = handle(&paged(&d, vec![handle_range(T, 0, 10)], 9), &snap, &opts());
    assert_eq!(
        resp.range,
        Some(KeyRange::new(record_key(T, 0), {
            let mut k = record_key(T, 8);
            k.push(0);
            k
        }))
    );
}

#[test]
fn a_limit_reached_within_a_page_ends_the_region_without_a_range() {
    let f = fixture(0, 50, &[true; 50], 3);
    let d = dag(vec![scan(true), limit(7)]);
    let resp = handle(
        &paged(&d, vec![handle_range(T, 0, 50)], 10),
        &f.e.snap(),
        &opts(),
    );
    assert!(resp.range.is_none());
    let got: Vec<i64> = rows(&resp).unwrap().iter().map(|r| handle_of(r)).collect();
    assert_eq!(got, (43..50).rev().collect::<Vec<_>>());
}

#[test]
fn a_selection_page_holds_paging_size_matching_rows_and_covers_the_rows_it_skipped() {
    let f = fixture(0, 100, &[true; 100], 10);
    // c2 = h % 10 == 3: handles 3, 13, 23, ...
    let eq = Expr::func(ScalarFuncSig::Eq, vec![Expr::column(1), Expr::int(3)]);
    let d = dag(vec![scan(false), selection(vec![eq])]);
    let pages = run_pages(
        &f.e.snap(),
        &paged(&d, vec![handle_range(T, 0, 100)], 4),
        false,
        &opts(),
    );
    let sizes: Vec<usize> = pages.iter().map(|p| rows(p).unwrap().len()).collect();
    assert_eq!(sizes, vec![4, 4, 2]);
    let got: Vec<i64> = all_rows(&pages).iter().map(|r| handle_of(r)).collect();
    assert_eq!(got, (0..10).map(|i| i * 10 + 3).collect::<Vec<_>>());
}

#[test]
fn a_response_byte_limit_ends_the_page_with_a_range_even_without_paging() {
    let f = fixture(0, 200, &[true; 200], 3);
    let d = dag(vec![scan(false)]);
    let small = HandlerOptions {
        max_response_bytes: 300,
        ..opts()
    };
    let req = request(&d, vec![handle_range(T, 0, 200)], 100);
    let first = handle(&req, &f.e.snap(), &small);
    assert!(first.range.is_some());
    assert!(rows(&first).unwrap().len() < 200);
    let pages = run_pages(&f.e.snap(), &req, false, &small);
    assert!(pages.len() > 2);
    let got: Vec<i64> = all_rows(&pages).iter().map(|r| handle_of(r)).collect();
    assert_eq!(got, (0..200).collect::<Vec<_>>());
    // Aggregates are not cut: they only exist complete.
    let d = dag(vec![scan(false), hash_agg(vec![Expr::column(0)], aggs())]);
    let resp = handle(
        &request(&d, vec![handle_range(T, 0, 200)], 100),
        &f.e.snap(),
        &small,
    );
    assert!(resp.range.is_none());
    assert_eq!(rows(&resp).unwrap().len(), 200);
}
