//! Transaction reads on a snapshot: shipping a snapshot's memtable to a worker
//! (`to_remote` + `from_remote`) against a plain memcpy of the same bytes, the same followed by
//! one full scan of the rebuilt snapshot (where a v4 blob's blocks are decoded), and a point
//! get with the lock check (`mvcc_get`) against the same get without it (`committed_value`).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use changeset::MemtableDataFormat;
use kvengine::mvcc::{Lock, LockType, WriteKind, WriteMeta};
use kvengine::{
    ColumnFamily, Dfs, Engine, EngineOptions, LocalDfs, SnapAccess, SyncPolicy, WriteBatch,
};

use crate::report::{rate, row, table_header};
use crate::workload::{key, rng, shuffled};

/// WRITE rows in the shipped memtable, and keys read by the point-get rows.
const ROWS: usize = 200_000;
/// Value bytes per WRITE row (the row also carries a 24-byte key and 17 bytes of meta).
const VALUE_LEN: usize = 100;
/// Locks on keys outside the read set: half flushed to a LOCK table, half in the memtable.
const LOCKS: usize = 16;
/// Timed repetitions; the best one counts (the others absorb page faults and frequency steps).
const REPEATS: usize = 5;

fn engine(dir: &std::path::Path) -> (Engine, Arc<dyn Dfs>) {
    let mut opts = EngineOptions::new(dir.join("engine"));
    opts.wal_sync = SyncPolicy::Off;
    opts.memtable_size = 1 << 30;
    opts.wal_segment_size = 256 * 1024 * 1024;
    opts.compaction_threads = 0;
    let dfs: Arc<dyn Dfs> = Arc::new(LocalDfs::open(dir.join("dfs")).expect("dfs"));
    let e = Engine::open(opts, dfs.clone()).expect("open");
    e.create_shard(1, b"", b"").expect("shard");
    (e, dfs)
}

fn meta(commit_ts: u64) -> [u8; 17] {
    WriteMeta {
        kind: WriteKind::Put,
        start_ts: commit_ts - 1,
        commit_ts,
    }
    .encode()
}

/// Commits `ROWS` rows (key i at commit_ts 2i + 2), 1000 per batch.
fn fill(e: &Engine) {
    let mut r = rng(11);
    let mut v = vec![0u8; VALUE_LEN];
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(1000) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            rand::Rng::fill(&mut r, &mut v[..VALUE_LEN / 2]);
            let ts = 2 * i as u64 + 2;
            b.put(ColumnFamily::Write, &key(i), ts, &meta(ts), &v);
        }
        e.write(1, &b).expect("write");
    }
}

fn best(mut f: impl FnMut() -> Duration) -> Duration {
    (0..REPEATS).map(|_| f()).min().unwrap_or_default()
}

/// Best times of shipping the whole memtable in one format, and the blob's length.
struct Shipped {
    /// to_remote + from_remote.
    total: Duration,
    /// to_remote alone.
    encode: Duration,
    /// from_remote alone.
    rebuild: Duration,
    /// to_remote + from_remote + one full scan of the rebuilt snapshot.
    with_scan: Duration,
    len: usize,
    /// Heap bytes the rebuilt snapshot holds beside the blob to read it.
    index_memory: usize,
}

/// Reads every row of `snap` at `ts` (touching each value), as a worker's full-range scan does.
fn scan_all(snap: &SnapAccess, ts: u64) -> usize {
    let mut it = snap
        .iter(ColumnFamily::Write, b"", b"", ts, false)
        .expect("iter");
    let (mut rows, mut bytes) = (0, 0);
    while it.valid() {
        rows += 1;
        bytes += it.value().len();
        it.next().expect("next");
    }
    black_box(bytes);
    rows
}

fn ship_as(snap: &SnapAccess, dfs: &Arc<dyn Dfs>, format: MemtableDataFormat) -> Shipped {
    let ts = u64::MAX >> 1;
    let all: &[(&[u8], &[u8])] = &[(b"", b"")];
    let probe = snap.to_remote_as(all, ts, format).expect("to_remote");
    assert_eq!(probe.rows, ROWS as u64);
    let mut encode = Duration::MAX;
    let mut rebuild = Duration::MAX;
    let mut index_memory = 0;
    let total = best(|| {
        let t0 = Instant::now();
        let remote = snap.to_remote_as(all, ts, format).expect("to_remote");
        let t1 = Instant::now();
        let data = remote.memtable_data;
        let rebuilt = SnapAccess::from_remote(&remote.changeset, &data, dfs.clone(), None)
            .expect("from_remote");
        let t2 = Instant::now();
        index_memory = black_box(&rebuilt).remote_index_memory();
        encode = encode.min(t1 - t0);
        rebuild = rebuild.min(t2 - t1);
        t2 - t0
    });
    let with_scan = best(|| {
        let t0 = Instant::now();
        let remote = snap.to_remote_as(all, ts, format).expect("to_remote");
        let rebuilt =
            SnapAccess::from_remote(&remote.changeset, &remote.memtable_data, dfs.clone(), None)
                .expect("from_remote");
        assert_eq!(scan_all(&rebuilt, ts), ROWS);
        t0.elapsed()
    });
    Shipped {
        total,
        encode,
        rebuild,
        with_scan,
        len: probe.memtable_data.len(),
        index_memory,
    }
}

/// Best time of copying `len` bytes into a new buffer: what a transfer minimally costs.
fn memcpy(len: usize) -> Duration {
    let src = vec![7u8; len];
    best(|| {
        let t0 = Instant::now();
        let dst = black_box(&src).to_vec();
        let d = t0.elapsed();
        black_box(dst);
        d
    })
}

fn ship(e: &Engine, dfs: &Arc<dyn Dfs>) {
    let snap = e.snapshot(1).expect("snapshot");
    let shipped: Vec<_> = MemtableDataFormat::ALL
        .into_iter()
        .map(|f| (f, ship_as(&snap, dfs, f)))
        .collect();
    // Rates are over the rows laid out flat (the v1 blob) for every format, so that they
    // compare the same work; the newer formats also get a row against a copy of their own,
    // smaller blob.
    let v1_len = shipped[0].1.len;
    let mb = v1_len as f64 / 1e6;
    let memcpy_v1 = rate(mb, memcpy(v1_len));
    let sizes: Vec<String> = shipped
        .iter()
        .map(|(f, s)| format!("{f} {:.1} MB", s.len as f64 / 1e6))
        .collect();
    table_header(&format!(
        "snapshot shipping ({ROWS} WRITE rows, {VALUE_LEN}-byte values, no SSTs, one full range; \
         memtable data {}; MB/s of the v1 size)",
        sizes.join(", ")
    ));
    let base = "memcpy of the v1 blob into a new buffer";
    let v3 = shipped
        .iter()
        .find(|(f, _)| *f == MemtableDataFormat::V3)
        .map(|(_, s)| (s.with_scan, s.index_memory));
    for (f, s) in &shipped {
        let Shipped {
            total,
            encode,
            rebuild,
            with_scan,
            len,
            index_memory,
        } = s;
        row(
            &format!("{f}: to_remote + from_remote"),
            "MB/s",
            rate(mb, *total),
            base,
            memcpy_v1,
        );
        // What a worker pays before its answer is ready: a v4 rebuild defers each block's
        // decode to the scan, so the shipping rows alone would flatter it.
        if let Some((v3_with_scan, v3_memory)) = v3 {
            row(
                &format!("  {f}: to_remote + from_remote + a full scan of the rebuilt snapshot"),
                "MB/s",
                rate(mb, *with_scan),
                "v3: the same",
                rate(mb, v3_with_scan),
            );
            row(
                &format!("  {f}: memory the rebuilt snapshot holds beside the blob"),
                "MiB",
                *index_memory as f64 / (1 << 20) as f64,
                "v3: the same",
                v3_memory as f64 / (1 << 20) as f64,
            );
        }
        row(
            &format!("  {f}: to_remote alone (walk + encode)"),
            "MB/s",
            rate(mb, *encode),
            base,
            memcpy_v1,
        );
        row(
            &format!("  {f}: from_remote alone (decode + index)"),
            "MB/s",
            rate(mb, *rebuild),
            base,
            memcpy_v1,
        );
        if *f != MemtableDataFormat::V1 {
            row(
                &format!("{f}: to_remote + from_remote, against a copy of the {f} blob"),
                "MB/s",
                rate(mb, *total),
                &format!("memcpy of the {f} blob (rate over the v1 size)"),
                rate(mb, memcpy(*len)),
            );
            row(
                &format!("{f} blob size against v1"),
                "MB",
                *len as f64 / 1e6,
                "v1 blob",
                mb,
            );
        }
    }
}

fn lock(primary: &[u8], start_ts: u64) -> Vec<u8> {
    Lock {
        lock_type: LockType::Put,
        primary: primary.to_vec(),
        start_ts,
        ttl_ms: 3000,
        min_commit_ts: start_ts + 1,
        txn_size: 1,
        value: Some(vec![7; VALUE_LEN]),
        secondaries: None,
    }
    .encode()
}

/// Writes `LOCKS` locks on keys spread over the read set's span but not in it (`key(i)~lock`),
/// flushing the first half so a LOCK table exists.
fn place_locks(e: &Engine, start_ts: u64) {
    for l in 0..LOCKS {
        let k = key(l * (ROWS / LOCKS) + 1)
            .into_iter()
            .chain(*b"~lock")
            .collect::<Vec<_>>();
        let mut b = WriteBatch::new();
        b.put_lock(&k, &lock(&k, start_ts));
        e.write(1, &b).expect("lock");
        if l + 1 == LOCKS / 2 {
            e.flush_shard(1).expect("flush");
        }
    }
}

fn point_gets(e: &Engine) {
    // The data in a level file (compacted), warm in the page cache and block cache.
    e.flush_shard(1).expect("flush");
    e.compact_shard(1, true).expect("compact");
    // Locks of transactions starting after every read below, on other keys.
    let read_ts = 2 * ROWS as u64 + 10;
    place_locks(e, read_ts + 100);
    let snap = e.snapshot(1).expect("snapshot");
    let keys: Vec<Vec<u8>> = shuffled(ROWS, 17).into_iter().map(key).collect();
    let without = |snap: &SnapAccess| {
        let t0 = Instant::now();
        for k in &keys {
            black_box(
                snap.committed_value(k, read_ts)
                    .expect("get")
                    .expect("present"),
            );
        }
        t0.elapsed()
    };
    let with = |snap: &SnapAccess| {
        let t0 = Instant::now();
        for k in &keys {
            black_box(
                snap.mvcc_get(k, read_ts, &[])
                    .expect("get")
                    .expect("present"),
            );
        }
        t0.elapsed()
    };
    // Warm both paths once, then alternate so drift hits both alike.
    without(&snap);
    with(&snap);
    let mut d_without = Duration::MAX;
    let mut d_with = Duration::MAX;
    for _ in 0..REPEATS {
        d_without = d_without.min(without(&snap));
        d_with = d_with.min(with(&snap));
    }
    table_header(&format!(
        "point get at a start_ts ({ROWS} keys in a level file, {LOCKS} locks on other keys: half in a LOCK table, half in the memtable)"
    ));
    row(
        "mvcc_get (lock check + committed value)",
        "gets/s",
        rate(ROWS as f64, d_with),
        "committed_value, no lock check",
        rate(ROWS as f64, d_without),
    );
}

pub fn run(_entries: usize) {
    let d = tempfile::tempdir().expect("tmp");
    let (e, dfs) = engine(d.path());
    fill(&e);
    ship(&e, &dfs);
    point_gets(&e);
    e.close(false).expect("close");
}
