//! The offload path, end to end with real processes: a `stratus-worker` and two
//! `stratus-server`s holding the same table (local directory store), one offloading every
//! coprocessor request to the worker, one never offloading (e2e's `OffloadPair`).
//!
//! Query: `SELECT COUNT(1), SUM(v)` over the whole table, about 32 MiB of SST blocks after
//! compaction, plus a few thousand rows still in the memtable. Measured in the same run:
//! * latency local vs remote with a cold worker (its first request: empty block cache) and
//!   warm (repeated), medians of several runs;
//! * server CPU time (utime + stime from /proc) per query, offloading server vs local server;
//! * offload body bytes against the in-range memtable rows plus the ChangeSet.
//!
//! The e2e harness builds the release server and worker binaries first when they are stale.

use std::time::{Duration, Instant};

use e2e::cluster::{OffloadPair, StoreKind};
use e2e::coprocessor::{location, request, rows};
use e2e::sample_table::{PAD_COLUMN, SampleTable, V_COLUMN};
use e2e::server_proc::ServerProc;
use rand::Rng;
use server::config::WalSync;
use types::{ReadableDuration, ReadableSize};
use wire::codec::row::encode_row;
use wire::datum::Datum;

use crate::workload::rng;

const TABLE: SampleTable = SampleTable { id: 7 };
/// Rows in SSTs: ~140 bytes each (100 random padding bytes) → about 32 MiB of blocks.
const SST_ROWS: i64 = 240_000;
/// Rows left in the memtable.
const MEM_ROWS: i64 = 3_000;
/// Queries per measured side: their median latency, and their CPU together. Server CPU comes
/// from /proc in clock ticks (10 ms), and a query costs the offloading server about a
/// millisecond: 9 queries read one or two ticks (1.1 or 2.2 ms a query), 41 resolve it to
/// about a quarter of a millisecond.
const RUNS: usize = 41;

fn value(r: &mut impl Rng, v: i64) -> Vec<u8> {
    let mut pad = vec![0u8; 100];
    r.fill(&mut pad[..]);
    encode_row(&[(V_COLUMN, Datum::Int(v)), (PAD_COLUMN, Datum::Bytes(pad))]).expect("row")
}

fn load(servers: &[&ServerProc], handles: std::ops::Range<i64>) -> u64 {
    load_rows(TABLE, servers, handles)
}

/// Raw-loads rows `handles` of `table` (v = handle % 1000, 100 random padding bytes) into
/// every server; the key + value bytes loaded.
pub(crate) fn load_rows(
    table: SampleTable,
    servers: &[&ServerProc],
    handles: std::ops::Range<i64>,
) -> u64 {
    let mut r = rng(handles.start as u64);
    let mut bytes = 0u64;
    let all: Vec<i64> = handles.collect();
    for chunk in all.chunks(2000) {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = chunk
            .iter()
            .map(|&h| (table.key(h), value(&mut r, h % 1000)))
            .collect();
        bytes += pairs
            .iter()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum::<u64>();
        for s in servers {
            s.raw_load(pairs.clone());
        }
    }
    bytes
}

/// utime + stime of a process, in seconds.
pub(crate) fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    // state is field 3 → index 0 here; utime is field 14 → index 11, stime 15 → 12.
    (ticks(11) + ticks(12)) / 100.0
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn run(_entries: usize) {
    let pair = OffloadPair::start(StoreKind::Local, |c| {
        c.kvengine.block_size = ReadableSize::kib(64);
        c.kvengine.memtable_size = ReadableSize::mib(512);
        c.kvengine.wal_sync = WalSync::Off;
        c.kvengine.remote_coprocessor_timeout = ReadableDuration::secs(60);
    });
    let both = pair.both();
    let t0 = Instant::now();
    load(&both, 0..SST_ROWS);
    for s in both {
        s.flush();
        s.compact();
    }
    let mem_bytes = load(&both, SST_ROWS..SST_ROWS + MEM_ROWS);
    eprintln!(
        "offload: loaded {} rows in {:?}",
        SST_ROWS + MEM_ROWS,
        t0.elapsed()
    );

    let dag = TABLE.count_sum_dag();
    // The offloading server runs the TSO; the other takes timestamps from it.
    let query = |s: &ServerProc| {
        let region = s.region_of(&TABLE.key(0));
        let req = request(&dag, vec![TABLE.range()], pair.remote.tso(), &region);
        let t = Instant::now();
        let resp = s.coprocessor(&req);
        let took = t.elapsed();
        assert!(
            resp.other_error.is_empty() && resp.region_error.is_none(),
            "{resp:?}"
        );
        (took, resp)
    };
    let region_size = pair.remote.region_of(&TABLE.key(0)).approximate_size;

    // Remote, cold: the worker's first request.
    let (cold, cold_resp) = query(&pair.remote);
    assert_eq!(
        location(&cold_resp),
        "remote",
        "the offloading server ran it remotely"
    );
    let section = |name: &str| {
        pair.remote.metric(
            "stratus_server_offload_section_bytes_total",
            &[("section", name)],
        )
    };
    let sections = || {
        (
            section("memtable"),
            section("changeset"),
            section("request"),
        )
    };
    // The first body is memtable-data v1: the server had not heard from the worker yet. Its
    // answer advertised the newest format, which the next body uses: that one is measured.
    let first = sections();
    let (_, second_resp) = query(&pair.remote);
    assert_eq!(location(&second_resp), "remote");
    let second = sections();
    let (mem_section, cs_section, req_section) =
        (second.0 - first.0, second.1 - first.1, second.2 - first.2);
    let first_body = first.0 + first.1 + first.2 + 16.0;

    let (_, local_resp) = query(&pair.local);
    assert_eq!(location(&local_resp), "local");
    assert_eq!(
        rows(&cold_resp).expect("the remote answer decodes"),
        rows(&local_resp).expect("the local answer decodes"),
        "remote == local"
    );

    let timed = |s: &ServerProc| -> (Duration, f64) {
        let pid = s.pid().expect("server pid");
        let cpu0 = cpu_secs(pid);
        let lat: Vec<Duration> = (0..RUNS).map(|_| query(s).0).collect();
        (median(lat), (cpu_secs(pid) - cpu0) / RUNS as f64)
    };
    let (local_lat, local_cpu) = timed(&pair.local);
    let worker_metric = |name: &str| pair.worker.metric(name, &[]);
    let worker_counts = || {
        (
            worker_metric("stratus_worker_snapshot_rebuild_seconds_sum"),
            worker_metric("stratus_worker_snapshot_rebuild_seconds_count"),
            worker_metric("stratus_kvengine_table_cache_misses_total"),
        )
    };
    let before_warm = worker_counts();
    let (warm_lat, remote_cpu) = timed(&pair.remote);
    let after_warm = worker_counts();
    let rebuilds = after_warm.1 - before_warm.1;
    let rebuild_ms = (after_warm.0 - before_warm.0) / rebuilds.max(1.0) * 1e3;
    let opened = (after_warm.2 - before_warm.2) / rebuilds.max(1.0);

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("\n### offload (server → worker, real processes, local-directory store)\n");
    println!(
        "Table: {} rows in SSTs ({:.1} MiB of blocks in the region estimate), {} rows ({:.1} KiB) in the memtable; query COUNT(1), SUM(v) over the whole table; medians of {RUNS} runs.\n",
        SST_ROWS,
        region_size as f64 / (1 << 20) as f64,
        MEM_ROWS,
        mem_bytes as f64 / 1024.0
    );
    println!("| measure | remote | local (baseline) | ratio (remote / local) |");
    println!("|---|---|---|---|");
    println!(
        "| latency, worker cold (first request) | {:.1} ms | {:.1} ms | {:.2} |",
        ms(cold),
        ms(local_lat),
        ms(cold) / ms(local_lat)
    );
    println!(
        "| latency, worker warm | {:.1} ms | {:.1} ms | {:.2} |",
        ms(warm_lat),
        ms(local_lat),
        ms(warm_lat) / ms(local_lat)
    );
    println!(
        "| worker: snapshot rebuild per warm query (tables opened per rebuild: {opened:.1}) | {rebuild_ms:.2} ms | {:.1} ms (the local query) | {:.3} |",
        ms(local_lat),
        rebuild_ms / ms(local_lat)
    );
    println!(
        "| server CPU per query | {:.2} ms | {:.2} ms | {:.3} |",
        remote_cpu * 1e3,
        local_cpu * 1e3,
        remote_cpu / local_cpu
    );
    let body = mem_section + cs_section + req_section + 16.0;
    println!(
        "| offload body, first request (memtable data v1: the worker had not advertised {} yet) | {:.1} KiB | in-range memtable rows {:.1} KiB + ChangeSet {:.2} KiB | {:.3} |",
        changeset::MemtableDataFormat::NEWEST,
        first_body / 1024.0,
        mem_bytes as f64 / 1024.0,
        first.1 / 1024.0,
        first_body / (mem_bytes as f64 + first.1)
    );
    println!(
        "| offload body per query (memtable data {}) | {:.1} KiB (memtable {:.1} KiB + ChangeSet {:.2} KiB + request {} B + 16 B framing) | in-range memtable rows {:.1} KiB + ChangeSet {:.2} KiB | {:.3} |",
        changeset::MemtableDataFormat::NEWEST,
        body / 1024.0,
        mem_section / 1024.0,
        cs_section / 1024.0,
        req_section,
        mem_bytes as f64 / 1024.0,
        cs_section / 1024.0,
        body / (mem_bytes as f64 + cs_section)
    );
    // As the memtable holds them: each row also carries its version (8 B) and its WRITE meta
    // (17 B: kind, start_ts, commit_ts).
    let stored = mem_bytes as f64 + 25.0 * MEM_ROWS as f64;
    println!(
        "| offload body vs rows as stored (+ 8 B version + 17 B write meta each) | {:.1} KiB | {:.1} KiB + ChangeSet {:.2} KiB | {:.3} |",
        body / 1024.0,
        stored / 1024.0,
        cs_section / 1024.0,
        body / (stored + cs_section)
    );
}
