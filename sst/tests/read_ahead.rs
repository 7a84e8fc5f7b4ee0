//! Read-ahead through the block cache's loaders (`TableIter::bound_read_ahead`): a scan with
//! loaders visits exactly the rows a scan without them visits, in both directions, row by row
//! or in runs; the loaders never load a block outside the scan's range and never load a block
//! twice; and from the scan's second block on, the loaders, not the scan, load its blocks, in
//! batches rather than one hand-over per block. The test cache runs each batch at once on the
//! scan's thread, so what was loaded by whom is deterministic.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use std::cell::Cell as StdCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::*;
use proptest::prelude::*;
use sst::block_cache::ReadAheadJob;
use sst::{Block, BlockCache, BuilderOptions, Compression, RunBound, Table};

thread_local! {
    /// Set while a read-ahead batch runs: inserts then come from a loader.
    static IN_LOADER: StdCell<bool> = const { StdCell::new(false) };
}

/// A cache whose "loaders" run each batch at once (or refuse every batch), recording every
/// insert and who made it.
struct LoaderCache {
    blocks: Mutex<HashMap<(u64, u64), Block>>,
    depth: usize,
    refuse: bool,
    /// Offsets inserted, in order, each with whether a loader inserted it.
    inserts: Mutex<Vec<(u64, bool)>>,
    batches: Mutex<usize>,
}

impl LoaderCache {
    fn new(depth: usize, refuse: bool) -> Arc<LoaderCache> {
        Arc::new(LoaderCache {
            blocks: Mutex::default(),
            depth,
            refuse,
            inserts: Mutex::default(),
            batches: Mutex::new(0),
        })
    }

    /// Main-block offsets inserted by the loaders and by the scan.
    fn split(&self, main: &[u64]) -> (Vec<u64>, Vec<u64>) {
        let inserts = self.inserts.lock().unwrap();
        let of = |by_loader: bool| {
            inserts
                .iter()
                .filter(|(o, l)| *l == by_loader && main.contains(o))
                .map(|(o, _)| *o)
                .collect()
        };
        (of(true), of(false))
    }
}

impl BlockCache for LoaderCache {
    fn get(&self, file_id: u64, offset: u64) -> Option<Block> {
        self.blocks.lock().unwrap().get(&(file_id, offset)).cloned()
    }
    fn insert(&self, file_id: u64, offset: u64, block: Block) {
        self.inserts
            .lock()
            .unwrap()
            .push((offset, IN_LOADER.with(|l| l.get())));
        self.blocks.lock().unwrap().insert((file_id, offset), block);
    }
    fn contains(&self, file_id: u64, offset: u64) -> bool {
        self.blocks.lock().unwrap().contains_key(&(file_id, offset))
    }
    fn read_ahead_blocks(&self) -> usize {
        self.depth
    }
    fn read_ahead(&self, job: ReadAheadJob) -> bool {
        if self.refuse {
            return false;
        }
        *self.batches.lock().unwrap() += 1;

        IN_LOADER.with(|l| l.set(true));
        job();
        IN_LOADER.with(|l| l.set(false));
        true
    }
}

fn compressed(block_size: usize) -> BuilderOptions {
    BuilderOptions {
        block_size,
        compression: Compression::Zstd(1),
        ..Default::default()
    }
}

/// A positioned table over `built`'s bytes, reading through `cache`.
fn positioned(dir: &std::path::Path, data: &[u8], cache: Arc<LoaderCache>) -> Table {
    let path = dir.join("1.sst");
    std::fs::write(&path, data).unwrap();
    let t = Table::open_local(1, std::fs::File::open(&path).unwrap(), Some(cache)).unwrap();
    assert!(t.reads_positioned());
    t
}

/// Offsets of the main data blocks (they start the file, back to back).
fn main_offsets(t: &Table) -> Vec<u64> {
    let mut at = 0;
    t.block_sizes()
        .iter()
        .map(|len| {
            let o = at;
            at += len;
            o
        })
        .collect()
}

/// The main blocks a scan of `[lo, hi)` may need: from the one that may hold `lo` to the last
/// whose first key is below `hi`.
fn range_blocks(t: &Table, lo: &[u8], hi: &[u8]) -> std::ops::Range<usize> {
    let firsts = t.block_first_keys();
    let start = firsts.iter().rposition(|k| k.as_slice() <= lo).unwrap_or(0);
    let end = match hi.is_empty() {
        true => firsts.len(),
        false => firsts.iter().filter(|k| k.as_slice() < hi).count(),
    };
    start..end
}

type Row = (Vec<u8>, (u64, Cell));

/// Scans `[lo, hi)` (an empty `hi`: to the end) at `ts`, with runs or row by row.
fn scan(t: &Table, ts: u64, (lo, hi): (&[u8], &[u8]), reverse: bool, runs: bool) -> Vec<Row> {
    let mut it = t.iter(ts);
    it.bound_read_ahead(lo, hi);
    let in_range = |k: &[u8]| k >= lo && (hi.is_empty() || k < hi);
    if reverse {
        if hi.is_empty() {
            it.seek_to_last().unwrap();
        } else {
            it.seek_for_prev(hi).unwrap();
            if it.valid() && it.key() == hi {
                it.prev().unwrap();
            }
        }
    } else {
        it.seek(lo).unwrap();
    }
    let mut out = Vec::new();
    while it.valid() && in_range(it.key()) {
        if runs {
            let bound = match reverse {
                true => Some(RunBound {
                    key: lo,
                    inclusive: true,
                }),
                false => (!hi.is_empty()).then_some(RunBound {
                    key: hi,
                    inclusive: false,
                }),
            };
            let n = it
                .next_run(bound, reverse, usize::MAX, |r| {
                    out.push((
                        r.key.to_vec(),
                        (r.version, (r.user_meta.to_vec(), r.value.to_vec(), false)),
                    ));
                    true
                })
                .unwrap();
            if n > 0 {
                continue;
            }
        }
        out.push((it.key().to_vec(), iter_pair(&it)));
        if reverse {
            it.prev().unwrap();
        } else {
            it.next().unwrap();
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn scans_with_loaders_read_like_scans_without_and_stay_in_range(
        oracle in oracle_strategy(150),
        block_size in 64usize..512,
        lo in key_strategy(),
        hi in prop::option::of(key_strategy()),
        ts in 0u64..70,
        reverse in any::<bool>(),
        runs in any::<bool>(),
        depth in 1usize..12,
        refuse in prop::bool::weighted(0.2),
    ) {
        let hi = hi.unwrap_or_default();
        let built = build(&oracle, compressed(block_size));
        let mem = Table::open(1, bytes::Bytes::from(built.data.clone())).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = LoaderCache::new(depth, refuse);
        let t = positioned(dir.path(), &built.data, cache.clone());

        let want = scan(&mem, ts, (&lo, &hi), reverse, false);
        prop_assert_eq!(scan(&t, ts, (&lo, &hi), reverse, runs), want);

        let main = main_offsets(&t);
        let (by_loaders, by_scan) = cache.split(&main);
        let allowed = range_blocks(&t, &lo, &hi);
        for o in &by_loaders {
            let i = main.iter().position(|m| m == o).unwrap();
            prop_assert!(allowed.contains(&i), "block {} loaded ahead, outside {:?}", i, allowed);
        }
        let mut all: Vec<u64> = by_loaders.iter().chain(&by_scan).copied().collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        prop_assert_eq!(all.len(), n, "a block was loaded twice");
        if refuse {
            prop_assert!(by_loaders.is_empty());
        } else {
            // Of the range's blocks, the scan loads its first two itself, the loaders the
            // rest. (Past the range the scan loads its own: a cursor skipping rows that are
            // not visible at `ts` may walk several blocks before it finds the range's end.)
            let inside: Vec<u64> = by_scan
                .iter()
                .copied()
                .filter(|o| allowed.contains(&main.iter().position(|m| m == o).unwrap()))
                .collect();
            prop_assert!(inside.len() <= 2, "the scan loaded {:?} of {:?} itself", inside, allowed);
        }
    }
}

/// A table of many small compressed blocks: (table, main offsets), with its cache.
fn many_blocks(dir: &std::path::Path, depth: usize) -> (Table, Vec<u64>, Arc<LoaderCache>) {
    let oracle = multi_block_oracle(2000);
    let built = build(&oracle, compressed(512));
    let cache = LoaderCache::new(depth, false);
    let t = positioned(dir, &built.data, cache.clone());
    let main = main_offsets(&t);
    assert!(main.len() >= 40, "{} blocks", main.len());
    (t, main, cache)
}

#[test]
fn a_full_scan_loads_only_its_first_two_blocks_itself() {
    for reverse in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let depth = 8;
        let (t, main, cache) = many_blocks(dir.path(), depth);
        let rows = scan(&t, u64::MAX, (b"", b""), reverse, true);
        assert_eq!(rows.len(), 2000);
        let (by_loaders, by_scan) = cache.split(&main);
        let ends = if reverse {
            [main[main.len() - 1], main[main.len() - 2]]
        } else {
            [main[0], main[1]]
        };
        assert_eq!(by_scan, ends, "reverse={reverse}");
        assert_eq!(by_loaders.len(), main.len() - 2);
        // In the scan's order, and handed over once per half-depth of blocks at most.
        let mut ordered = by_loaders.clone();
        ordered.sort_unstable();
        if reverse {
            ordered.reverse();
        }
        assert_eq!(by_loaders, ordered, "reverse={reverse}");
        let batches = *cache.batches.lock().unwrap();
        assert!(
            batches <= (main.len() - 2).div_ceil(depth / 2) + 1,
            "{batches} batches for {} blocks",
            main.len()
        );
    }
}

#[test]
fn a_scan_that_stays_in_one_block_loads_nothing_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let (t, main, cache) = many_blocks(dir.path(), 8);
    // The first few keys of one block, with an open-ended range: the scan stops on its own.
    let mut it = t.iter(u64::MAX);
    it.bound_read_ahead(b"", b"");
    it.seek(b"t1_r01000").unwrap();
    for _ in 0..3 {
        assert!(it.valid());
        it.next().unwrap();
    }
    let (by_loaders, by_scan) = cache.split(&main);
    assert!(by_loaders.is_empty(), "{by_loaders:?}");
    assert_eq!(by_scan.len(), 1);
}

#[test]
fn a_bounded_scan_reads_ahead_only_inside_its_range() {
    let dir = tempfile::tempdir().unwrap();
    let (t, main, cache) = many_blocks(dir.path(), 16);
    let (lo, hi) = (b"t1_r00500".as_slice(), b"t1_r00700".as_slice());
    let rows = scan(&t, u64::MAX, (lo, hi), false, true);
    assert_eq!(rows.len(), 200);
    let allowed = range_blocks(&t, lo, hi);
    let (by_loaders, _) = cache.split(&main);
    assert!(!by_loaders.is_empty());
    let past = by_loaders
        .iter()
        .map(|o| main.iter().position(|m| m == o).unwrap())
        .filter(|i| !allowed.contains(i))
        .collect::<Vec<_>>();
    assert!(
        past.is_empty(),
        "loaded ahead outside {allowed:?}: {past:?}"
    );
}

#[test]
fn without_bound_read_ahead_a_scan_loads_every_block_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (t, main, cache) = many_blocks(dir.path(), 8);
    let mut it = t.iter(u64::MAX);
    it.seek_to_first().unwrap();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next().unwrap();
    }
    assert_eq!(n, 2000);
    let (by_loaders, by_scan) = cache.split(&main);
    assert!(by_loaders.is_empty());
    assert_eq!(by_scan.len(), main.len());
}
