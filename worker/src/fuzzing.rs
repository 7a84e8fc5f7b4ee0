//! Entry point of the `offload_body` fuzz target (`fuzz/fuzz_targets/offload_body.rs`), kept in
//! the library so that the committed corpus replays as an ordinary test
//! (`worker/tests/fuzz_corpus_replay.rs`) through the very same code.
//!
//! [`offload_body`] takes the bytes the way `POST /coprocessor` does once it has read them: the
//! framing, the cop request and the ChangeSet decode ([`Offload::decode`]), the worker's TopN
//! paging policy applies, the snapshot is rebuilt ([`kvengine::SnapAccess::from_remote_cached`]) and
//! the handler runs the request on it ([`Offload::execute`]). A fuzzer that only reached the
//! framing would never test what a worker does with a hostile ChangeSet or memtable section.
//!
//! The object store is a [`Fixture`]: real SST files (rows compacted into the levels, rows in an
//! L0 file) written once per process by an engine, then held in memory, so a body naming those
//! files rebuilds a real snapshot and runs on real data. The engine is deterministic (no
//! background threads, file ids from a fresh allocator), so the same files get the same ids in
//! every process and the committed seeds, real bodies that engine shipped for real requests,
//! name files that exist. The data is a few hundred rows: whatever the request asks, the
//! handler finishes quickly.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use bytes::Bytes;
use changeset::encode_changeset;
use kvengine::mvcc::{WriteKind, WriteMeta};
use kvengine::{
    ColumnFamily, Dfs, Engine, EngineOptions, FileId, LocalDfs, SyncPolicy, TableCache, WriteBatch,
};
use prost::Message;
use wire::codec::row::encode_row;
use wire::codec::table::{record_key, record_range};
use wire::coprocessor::{Context, KeyRange, REQ_TYPE_DAG, Request, Response};
use wire::datum::Datum;
use wire::fuzzing::{SAMPLE_BYTES_COLUMN, SAMPLE_INT_COLUMN, sample_dags};

use crate::coprocessor::Offload;

/// The shard of the fixture's engine (one shard over the whole key space).
pub const FIXTURE_SHARD: u64 = 1;
/// The table the fixture's rows belong to (the sample columns of [`wire::fuzzing`]).
pub const FIXTURE_TABLE: i64 = 7;
/// The read timestamp of most seeds: it sees the levels, L0 and most memtable versions, not the
/// newer versions written above it.
pub const FIXTURE_READ_TS: u64 = 100;
/// `cop-topn-max-pushdown-rows` of the fuzzed worker: low enough for a seed's TopN to page.
pub const TOPN_MAX_PUSHDOWN_ROWS: u64 = 100;

/// The `offload_body` target: must never panic, whatever the input. A body that executes
/// answers a response that encodes and decodes to itself, and vouches for no data version.
pub fn offload_body(data: &[u8]) {
    wire::fuzzing::offload_body(data);
    let body = Bytes::copy_from_slice(data);
    let Ok(mut offload) = Offload::decode(&body) else {
        return;
    };
    crate::topn_paging::apply(&mut offload.request, TOPN_MAX_PUSHDOWN_ROWS);
    let fixture = Fixture::get();
    let Ok(executed) = offload.execute(&fixture.tables) else {
        return;
    };
    let response = executed.response;
    assert_eq!(
        response.cache_last_version, 0,
        "a rebuilt snapshot never vouches for a data version"
    );
    let again =
        Response::decode(response.encode_to_vec().as_slice()).expect("an encoded response decodes");
    assert_eq!(again, response);
}

/// Real bodies the fixture's engine shipped, each for a real request: every DAG shape of
/// [`sample_dags`] over the whole table, and requests that page, read backwards, read older
/// or newer versions, or read a few ranges.
pub fn offload_body_seeds() -> Vec<(String, Vec<u8>)> {
    Fixture::get().seeds.clone()
}

/// The object store the fuzzed worker reads, and the bodies shipped from it (see the module
/// docs).
pub struct Fixture {
    /// The SST files, in memory, behind a cache of open tables that keeps none (no block
    /// cache either): each input rebuilds from the files alone, whatever came before it.
    pub tables: TableCache,
    seeds: Vec<(String, Vec<u8>)>,
}

impl Fixture {
    /// The process's fixture, written on first use.
    pub fn get() -> &'static Fixture {
        static FIXTURE: OnceLock<Fixture> = OnceLock::new();
        FIXTURE.get_or_init(|| Fixture::write().expect("the fuzz fixture is written"))
    }

    /// Writes the table through an engine in a temporary directory, ships the seeds' snapshots,
    /// and keeps the files in memory; the directory goes.
    fn write() -> Result<Fixture, kvengine::Error> {
        let dir = tempfile::tempdir().map_err(|source| kvengine::Error::Io {
            op: "create temp dir",
            path: std::env::temp_dir(),
            source,
        })?;
        let mut opts = EngineOptions::new(dir.path().join("engine"));
        opts.wal_sync = SyncPolicy::Off;
        opts.memtable_size = 1 << 20;
        opts.block_size = 256;
        opts.l0_compaction_files = 100;
        opts.compaction_threads = 0;
        let local = Arc::new(LocalDfs::open(dir.path().join("dfs"))?);
        let engine = Engine::open(opts, local.clone())?;
        engine.create_shard(FIXTURE_SHARD, b"", b"")?;
        let write = |handle: i64, commit_ts: u64, value: Option<i64>| {
            let kind = if value.is_some() {
                WriteKind::Put
            } else {
                WriteKind::Delete
            };
            let meta = WriteMeta {
                kind,
                start_ts: commit_ts - 1,
                commit_ts,
            }
            .encode();
            let key = record_key(FIXTURE_TABLE, handle);
            let mut batch = WriteBatch::new();
            match value {
                Some(v) => {
                    let row = encode_row(&[
                        (SAMPLE_INT_COLUMN, Datum::Int(v)),
                        (
                            SAMPLE_BYTES_COLUMN,
                            Datum::Bytes(format!("row {handle}").into_bytes()),
                        ),
                    ])
                    .expect("a small row encodes");
                    batch.put(ColumnFamily::Write, &key, commit_ts, &meta, &row);
                }
                None => {
                    batch.delete(ColumnFamily::Write, &key, commit_ts, &meta);
                }
            }
            engine.write(FIXTURE_SHARD, &batch).map(|_| ())
        };
        // Rows 1..=100 in the levels, 101..=200 in an L0 file (with a version newer than the
        // reads), 201..=300 in the memtable with updates, deletes and a newer version.
        for h in 1..=100 {
            write(h, 10, Some(h))?;
        }
        engine.flush_shard(FIXTURE_SHARD)?;
        engine.compact_shard(FIXTURE_SHARD, true)?;
        for h in 101..=200 {
            write(h, 20, Some(h))?;
        }
        write(120, 500, Some(1_000_000))?;
        engine.flush_shard(FIXTURE_SHARD)?;
        for h in 201..=300 {
            write(h, 30, Some(h))?;
        }
        for h in (5..300).step_by(37) {
            write(h, 40, Some(-h))?;
        }
        for h in [3, 150, 250] {
            write(h, 45, None)?;
        }
        write(2, 1000, Some(1_000_000))?;

        let snap = engine.snapshot(FIXTURE_SHARD)?;
        let mut seeds = Vec::new();
        for (name, request) in seed_requests() {
            let ranges: Vec<(&[u8], &[u8])> = request
                .ranges
                .iter()
                .map(|r| (r.start.as_slice(), r.end.as_slice()))
                .collect();
            // Every memtable-data format a worker reads; v1's seeds kept their names.
            for format in changeset::MemtableDataFormat::ALL {
                let remote = snap.to_remote_as(&ranges, request.start_ts, format)?;
                let body = wire::offload::encode(
                    &request.encode_to_vec(),
                    &remote.memtable_data,
                    &encode_changeset(&remote.changeset),
                );
                let name = match format {
                    changeset::MemtableDataFormat::V1 => name.clone(),
                    _ => format!("{name}_{format}"),
                };
                seeds.push((name, body));
            }
        }
        drop(snap);

        let files = MemDfs::default();
        for id in local.list()? {
            files.put(id, local.get(id)?)?;
        }
        engine.close(false)?;
        Ok(Fixture {
            tables: TableCache::new(Arc::new(files), None, 0),
            seeds,
        })
    }
}

/// The requests the seeds carry: (name, request).
fn seed_requests() -> Vec<(String, Request)> {
    let (start, end) = record_range(FIXTURE_TABLE);
    let request = |dag: &wire::coprocessor::DagRequest, ranges: Vec<KeyRange>| Request {
        context: Some(Context {
            region_id: FIXTURE_SHARD,
            region_ver: 1,
            keyspace_id: 0,
            deadline_ms: 0,
            replica_read: false,
        }),
        tp: REQ_TYPE_DAG,
        data: dag.encode_to_vec(),
        start_ts: FIXTURE_READ_TS,
        ranges,
        is_cache_enabled: false,
        cache_if_match_version: 0,
        paging_size: 0,
    };
    let whole = || vec![KeyRange::new(start.clone(), end.clone())];
    let dags = sample_dags(FIXTURE_TABLE);
    let mut out: Vec<(String, Request)> = dags
        .iter()
        .map(|(name, dag)| (format!("dag_{name}"), request(dag, whole())))
        .collect();
    let (_, scan) = &dags[0];
    let paged = Request {
        paging_size: 16,
        ..request(scan, whole())
    };
    let old = Request {
        start_ts: 15,
        ..request(scan, whole())
    };
    let newest = Request {
        start_ts: 2000,
        ..request(scan, whole())
    };
    let key = |h: i64| record_key(FIXTURE_TABLE, h);
    let ranges = request(
        scan,
        vec![
            KeyRange::new(key(2), key(6)),
            KeyRange::new(key(118), key(122)),
            KeyRange::new(key(248), key(252)),
        ],
    );
    out.extend([
        ("paged_scan".to_string(), paged),
        ("scan_before_l0".to_string(), old),
        ("scan_newest".to_string(), newest),
        ("three_ranges".to_string(), ranges),
    ]);
    out
}

/// An object store in memory: what the fixture's engine wrote.
#[derive(Default)]
struct MemDfs {
    files: RwLock<HashMap<FileId, Bytes>>,
}

impl MemDfs {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<FileId, Bytes>> {
        // A panicking fuzz input may poison the lock; the map itself is never left half-written.
        self.files.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl Dfs for MemDfs {
    fn put(&self, file_id: FileId, data: Bytes) -> kvengine::Result<()> {
        self.files
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(file_id, data);
        Ok(())
    }

    fn get(&self, file_id: FileId) -> kvengine::Result<Bytes> {
        self.read()
            .get(&file_id)
            .cloned()
            .ok_or(kvengine::Error::FileNotFound { file_id })
    }

    fn get_range(&self, file_id: FileId, offset: u64, len: u64) -> kvengine::Result<Bytes> {
        let all = self.get(file_id)?;
        let end = offset
            .checked_add(len)
            .filter(|e| *e <= all.len() as u64)
            .ok_or_else(|| kvengine::Error::Dfs {
                op: "get_range",
                file_id,
                source: std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "range past end of file: offset={offset} len={len} size={}",
                        all.len()
                    ),
                ),
            })?;
        Ok(all.slice(offset as usize..end as usize))
    }

    fn delete(&self, file_id: FileId) -> kvengine::Result<()> {
        self.files
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&file_id);
        Ok(())
    }

    fn list(&self) -> kvengine::Result<Vec<FileId>> {
        let mut ids: Vec<FileId> = self.read().keys().copied().collect();
        ids.sort_unstable();
        Ok(ids)
    }
}
