//! Entry point of the `server_request` fuzz target (`fuzz/fuzz_targets/server_request.rs`), kept
//! in the library so that the committed corpus replays as an ordinary test
//! (`server/tests/fuzz_corpus_replay.rs`) through the very same code.
//!
//! [`Fixture::request`] POSTs a body to one of the server's endpoints ([`ENDPOINTS`]) through
//! the server's own router ([`crate::api::router`]), in process, without a socket: the body
//! meets the handler's decoding and validation, then the transaction layer, the coprocessor
//! endpoint or the delegate answer, on a real [`Node`] with a small engine. What must hold
//! whatever the body:
//!
//! * no handler panics (a panicked task is a 500);
//! * a body is refused (400) exactly when it does not decode as the endpoint's request (or,
//!   for a prewrite, names an unknown mutation op): everything else is answered 200, failures
//!   travelling inside the answer;
//! * a 200 answer decodes as the endpoint's response.
//!
//! The node is deterministic: its TSO starts from a persisted high-water mark far ahead of the
//! wall clock ([`FIXTURE_PHYSICAL_MS`]), so it counts logically from there and every fixture
//! hands out the same timestamps, and so the same region ids (regions are named by
//! timestamps). The seeds ([`Fixture::seeds`]) name those regions, keys and locks, so they
//! reach past the region and lock checks. The fixture's state moves with every request (a
//! fuzzer's inputs prewrite, commit, split), which is what a server sees too.

use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::http::{Method, StatusCode};
use node::fuzzing::{Endpoint, decodes};
use prost::Message;
use wire::codec::row::encode_row;
use wire::codec::table::{record_key, record_range};
use wire::coprocessor::{Context, KeyRange, REQ_TYPE_DAG};
use wire::datum::Datum;
use wire::fuzzing::{SAMPLE_BYTES_COLUMN, SAMPLE_INT_COLUMN, round_trip, sample_dags};
use wire::{delegate, paths, region, txn};

use crate::api::AppState;
use crate::config::{RangeConfig, ServerConfig, WalSync};
use crate::node::{Node, NodeError};
use crate::tso::{ManualClock, Tso, TsoError, TsoOptions};

/// The physical milliseconds the fixture's TSO starts from: about the year 3085, so the wall
/// clock never catches up and timestamps depend only on how many were handed out.
pub const FIXTURE_PHYSICAL_MS: u64 = 1 << 45;
/// The table of the fixture's first region (ids below [`FIXTURE_TABLE_B`]).
pub const FIXTURE_TABLE_A: i64 = 1;
/// The table of the fixture's second region (ids from here on).
pub const FIXTURE_TABLE_B: i64 = 2;

/// A prewrite whose mutation ops are all known: the handler refuses the others with a 400.
fn prewrite_accepted(body: &[u8]) -> bool {
    round_trip::<txn::PrewriteRequest>(body)
        .is_some_and(|r| r.mutations.iter().all(|m| txn::Op::try_from(m.op).is_ok()))
}

/// Every endpoint that takes a body, in the order of the target's selector byte.
pub const ENDPOINTS: [Endpoint; 14] = [
    Endpoint::new(
        paths::TSO,
        decodes::<region::TsoRequest>,
        decodes::<region::TsoResponse>,
    ),
    Endpoint::new(
        paths::SPLIT,
        decodes::<region::SplitRequest>,
        decodes::<region::SplitResponse>,
    ),
    Endpoint::new(
        paths::RAW_LOAD,
        decodes::<region::RawLoadRequest>,
        decodes::<region::RawLoadResponse>,
    ),
    Endpoint::new(
        paths::PREWRITE,
        prewrite_accepted,
        decodes::<txn::PrewriteResponse>,
    ),
    Endpoint::new(
        paths::COMMIT,
        decodes::<txn::CommitRequest>,
        decodes::<txn::CommandResponse>,
    ),
    Endpoint::new(
        paths::ROLLBACK,
        decodes::<txn::RollbackRequest>,
        decodes::<txn::CommandResponse>,
    ),
    Endpoint::new(
        paths::CHECK_TXN_STATUS,
        decodes::<txn::CheckTxnStatusRequest>,
        decodes::<txn::CheckTxnStatusResponse>,
    ),
    Endpoint::new(
        paths::CHECK_SECONDARY_LOCKS,
        decodes::<txn::CheckSecondaryLocksRequest>,
        decodes::<txn::CheckSecondaryLocksResponse>,
    ),
    Endpoint::new(
        paths::RESOLVE_LOCK,
        decodes::<txn::ResolveLockRequest>,
        decodes::<txn::ResolveLockResponse>,
    ),
    Endpoint::new(
        paths::SCAN_LOCK,
        decodes::<txn::ScanLockRequest>,
        decodes::<txn::ScanLockResponse>,
    ),
    Endpoint::new(
        paths::GET,
        decodes::<txn::GetRequest>,
        decodes::<txn::GetResponse>,
    ),
    Endpoint::new(
        paths::SCAN,
        decodes::<txn::ScanRequest>,
        decodes::<txn::ScanResponse>,
    ),
    Endpoint::new(
        paths::COPROCESSOR,
        decodes::<wire::coprocessor::Request>,
        decodes::<wire::coprocessor::Response>,
    ),
    Endpoint::new(
        paths::DELEGATE,
        decodes::<delegate::DelegateRequest>,
        decodes::<delegate::DelegateResponse>,
    ),
];

/// The target's input: a selector byte choosing the endpoint ([`ENDPOINTS`], modulo their
/// number), then the body. `None` for the empty input.
pub fn selected(data: &[u8]) -> Option<(&'static str, &[u8])> {
    node::fuzzing::selected(&ENDPOINTS, data).map(|(e, body)| (e.path, body))
}

/// The selector byte of `path`, for seeds.
pub fn selector(path: &str) -> u8 {
    node::fuzzing::selector(&ENDPOINTS, path)
}

/// The `server_request` target: `body` POSTed to `path` on the process's fixture (see the
/// module docs for what must hold).
pub fn request(path: &str, body: &[u8]) {
    Fixture::shared().check(path, body);
}

/// What the fixture wrote, for seeds that name real regions, keys and locks.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The regions in key order.
    pub regions: Vec<region::Region>,
    /// A 2PC lock left pending: its primary (also its only key) and start_ts.
    pub lock_key: Vec<u8>,
    pub lock_start_ts: u64,
    /// An async-commit lock left pending: primary, secondary and start_ts.
    pub async_primary: Vec<u8>,
    pub async_secondary: Vec<u8>,
    pub async_start_ts: u64,
    /// A timestamp above everything written: reads at it see every commit.
    pub read_ts: u64,
}

/// A server node on a temporary directory, its router, and the runtime that drives them.
pub struct Fixture {
    // Field order is drop order: the runtime stops before the node closes, the directory goes
    // last.
    runtime: tokio::runtime::Runtime,
    router: Router,
    node: Arc<Node>,
    facts: Facts,
    _dir: tempfile::TempDir,
}

/// Why the fixture could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("cannot set up the fuzz fixture's directory or runtime")]
    Io(#[from] std::io::Error),
    #[error("cannot pre-set the fuzz fixture's timestamp oracle")]
    Tso(#[from] TsoError),
    #[error("cannot open the fuzz fixture's node")]
    Node(#[from] NodeError),
    #[error("the fuzz fixture's setup request failed: path={path} status={status} answer={answer}")]
    Setup {
        path: &'static str,
        status: u16,
        answer: String,
    },
    #[error("the fuzz fixture's setup answer does not decode: path={path}")]
    Decode {
        path: &'static str,
        #[source]
        source: prost::DecodeError,
    },
}

impl Fixture {
    /// The process's fixture (the fuzz target's), set up on first use and never dropped.
    pub fn shared() -> &'static Fixture {
        static FIXTURE: OnceLock<Fixture> = OnceLock::new();
        FIXTURE.get_or_init(|| Fixture::new().expect("the fuzz fixture is set up"))
    }

    /// A fresh node with two regions (tables [`FIXTURE_TABLE_A`] and [`FIXTURE_TABLE_B`]), rows
    /// in an L0 file and in the memtables, and two pending locks.
    pub fn new() -> Result<Fixture, FixtureError> {
        let dir = tempfile::tempdir()?;
        let data_dir = dir.path().join("server");
        // The TSO resumes from the persisted mark: far ahead of the clock, the same every time.
        Tso::open_with(
            data_dir.join("tso"),
            Arc::new(ManualClock::new(FIXTURE_PHYSICAL_MS)),
            TsoOptions::default(),
        )?;
        let mut config = ServerConfig::default();
        config.server.data_dir = data_dir;
        config.server.region_split_size = types::ReadableSize(0);
        let boundary = escaped(&table_start(FIXTURE_TABLE_B));
        config.server.ranges = vec![
            RangeConfig {
                start: String::new(),
                end: boundary.clone(),
            },
            RangeConfig {
                start: boundary,
                end: String::new(),
            },
        ];
        config.dfs.local_dir = dir.path().join("dfs");
        config.kvengine.wal_sync = WalSync::Off;
        config.kvengine.memtable_size = types::ReadableSize::kib(256);
        config.kvengine.block_size = types::ReadableSize::kib(1);
        config.kvengine.block_cache_size = types::ReadableSize::mib(4);
        config.kvengine.compaction_threads = 0;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let opening = runtime.spawn_blocking(move || Node::open(config, handle));
        let node = runtime.block_on(opening).map_err(std::io::Error::other)??;
        let node = Arc::new(node);
        let router = crate::api::router(Arc::new(AppState {
            node: node.clone(),
            addr: "fuzz".into(),
            config_text: String::new(),
        }));
        let mut fixture = Fixture {
            runtime,
            router,
            node,
            facts: Facts {
                regions: Vec::new(),
                lock_key: Vec::new(),
                lock_start_ts: 0,
                async_primary: Vec::new(),
                async_secondary: Vec::new(),
                async_start_ts: 0,
                read_ts: 0,
            },
            _dir: dir,
        };
        fixture.facts = fixture.write()?;
        Ok(fixture)
    }

    /// What [`Fixture::new`] wrote.
    pub fn facts(&self) -> &Facts {
        &self.facts
    }

    /// POSTs `body` to `path` and checks the answer (see the module docs). Panics on a
    /// violation, as a fuzz target must.
    pub fn check(&self, path: &str, body: &[u8]) {
        let endpoint = node::fuzzing::endpoint(&ENDPOINTS, path);
        let (status, answer) = self.call(Method::POST, path, body);
        endpoint.check_answer(body, status, &answer);
    }

    /// POSTs `body` to `path`: the status and the answer's bytes, unchecked.
    pub fn post(&self, path: &str, body: &[u8]) -> (StatusCode, Vec<u8>) {
        self.call(Method::POST, path, body)
    }

    /// One request through the router: the status and the answer's bytes.
    fn call(&self, method: Method, path: &str, body: &[u8]) -> (StatusCode, Vec<u8>) {
        node::fuzzing::call(&self.runtime, &self.router, method, path, body)
    }

    /// A request the setup needs to succeed: its decoded answer.
    fn setup<M: Message + Default>(
        &self,
        path: &'static str,
        body: &impl Message,
    ) -> Result<M, FixtureError> {
        let (status, answer) = self.call(Method::POST, path, &body.encode_to_vec());
        if status != StatusCode::OK {
            return Err(FixtureError::Setup {
                path,
                status: status.as_u16(),
                answer: String::from_utf8_lossy(&answer).into_owned(),
            });
        }
        M::decode(answer.as_slice()).map_err(|source| FixtureError::Decode { path, source })
    }

    fn ts(&self) -> Result<u64, FixtureError> {
        let r: region::TsoResponse = self.setup(paths::TSO, &region::TsoRequest { count: 1 })?;
        Ok(r.first_ts)
    }

    /// Prewrites `mutations` (primary: the first key) and commits them unless `commit` is
    /// false; the start_ts.
    fn transaction(
        &self,
        mutations: Vec<txn::Mutation>,
        async_secondaries: Option<Vec<Vec<u8>>>,
        commit: bool,
    ) -> Result<u64, FixtureError> {
        let start_ts = self.ts()?;
        let keys: Vec<Vec<u8>> = mutations.iter().map(|m| m.key.clone()).collect();
        let prewrite = txn::PrewriteRequest {
            primary: keys[0].clone(),
            start_ts,
            lock_ttl_ms: 3000,
            txn_size: keys.len() as u64,
            use_async_commit: async_secondaries.is_some(),
            secondaries: async_secondaries.unwrap_or_default(),
            try_one_pc: false,
            max_commit_ts: 0,
            mutations,
        };
        let r: txn::PrewriteResponse = self.setup(paths::PREWRITE, &prewrite)?;
        self.key_error(paths::PREWRITE, r.error)?;
        if commit {
            let commit_ts = self.ts()?;
            let r: txn::CommandResponse = self.setup(
                paths::COMMIT,
                &txn::CommitRequest {
                    keys,
                    start_ts,
                    commit_ts,
                },
            )?;
            self.key_error(paths::COMMIT, r.error)?;
        }
        Ok(start_ts)
    }

    fn key_error(
        &self,
        path: &'static str,
        error: Option<txn::KeyError>,
    ) -> Result<(), FixtureError> {
        match error {
            None => Ok(()),
            Some(e) => Err(FixtureError::Setup {
                path,
                status: 200,
                answer: format!("{e:?}"),
            }),
        }
    }

    /// Rows 1..=40 of both tables committed and flushed to L0, rows 41..=60 committed in the
    /// memtables, then a pending 2PC lock and a pending async-commit lock.
    fn write(&self) -> Result<Facts, FixtureError> {
        let rows = |handles: std::ops::RangeInclusive<i64>| -> Vec<txn::Mutation> {
            [FIXTURE_TABLE_A, FIXTURE_TABLE_B]
                .into_iter()
                .flat_map(|table| handles.clone().map(move |h| put(table, h, h * 10)))
                .collect()
        };
        self.transaction(rows(1..=40), None, true)?;
        let (status, answer) = self.call(Method::POST, paths::ADMIN_FLUSH, b"");
        if status != StatusCode::OK {
            return Err(FixtureError::Setup {
                path: paths::ADMIN_FLUSH,
                status: status.as_u16(),
                answer: String::from_utf8_lossy(&answer).into_owned(),
            });
        }
        self.transaction(rows(41..=60), None, true)?;
        let lock_key = record_key(FIXTURE_TABLE_A, 7);
        let lock_start_ts = self.transaction(vec![put(FIXTURE_TABLE_A, 7, -7)], None, false)?;
        let async_primary = record_key(FIXTURE_TABLE_A, 8);
        let async_secondary = record_key(FIXTURE_TABLE_B, 8);
        let async_start_ts = self.transaction(
            vec![put(FIXTURE_TABLE_A, 8, -8), put(FIXTURE_TABLE_B, 8, -8)],
            Some(vec![async_secondary.clone()]),
            false,
        )?;
        let read_ts = self.ts()?;
        let (status, answer) = self.call(Method::GET, paths::REGIONS, b"");
        if status != StatusCode::OK {
            return Err(FixtureError::Setup {
                path: paths::REGIONS,
                status: status.as_u16(),
                answer: String::from_utf8_lossy(&answer).into_owned(),
            });
        }
        let regions = region::RegionsResponse::decode(answer.as_slice())
            .map_err(|source| FixtureError::Decode {
                path: paths::REGIONS,
                source,
            })?
            .regions;
        Ok(Facts {
            regions,
            lock_key,
            lock_start_ts,
            async_primary,
            async_secondary,
            async_start_ts,
            read_ts,
        })
    }

    /// Real requests to every endpoint, naming the fixture's regions, keys and locks: (name,
    /// selector byte + body). Timestamps of new transactions lie above [`Facts::read_ts`].
    pub fn seeds(&self) -> Vec<(String, Vec<u8>)> {
        seeds(&self.facts)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // Stop the engine's threads before the directory goes; a failure here only leaks.
        if let Err(e) = self.node.close() {
            tracing::warn!(
                "fuzz fixture did not close cleanly: {}",
                node::error_chain(&e)
            );
        }
    }
}

/// The first key of table `id`'s rows: the boundary between the fixture's regions.
fn table_start(id: i64) -> Vec<u8> {
    record_range(id).0
}

/// `key` in the config's `\xNN` escaped form.
fn escaped(key: &[u8]) -> String {
    key.iter().map(|b| format!("\\x{b:02x}")).collect()
}

fn row(handle: i64, value: i64) -> Vec<u8> {
    encode_row(&[
        (SAMPLE_INT_COLUMN, Datum::Int(value)),
        (
            SAMPLE_BYTES_COLUMN,
            Datum::Bytes(format!("row {handle}").into_bytes()),
        ),
    ])
    .expect("a small row encodes")
}

fn put(table: i64, handle: i64, value: i64) -> txn::Mutation {
    txn::Mutation {
        op: txn::Op::Put as i32,
        key: record_key(table, handle),
        value: row(handle, value),
    }
}

fn seeds(facts: &Facts) -> Vec<(String, Vec<u8>)> {
    let later = facts.read_ts + 1000;
    let region_a = &facts.regions[0];
    let region_b = &facts.regions[facts.regions.len() - 1];
    let (a_start, a_end) = record_range(FIXTURE_TABLE_A);
    let b_end = record_range(FIXTURE_TABLE_B).1;
    let key_a = |h: i64| record_key(FIXTURE_TABLE_A, h);
    let key_b = |h: i64| record_key(FIXTURE_TABLE_B, h);
    let cop = |dag: &wire::coprocessor::DagRequest,
               r: &region::Region,
               range: (Vec<u8>, Vec<u8>),
               paging_size: u64| wire::coprocessor::Request {
        context: Some(Context {
            region_id: r.id,
            region_ver: r.ver,
            keyspace_id: 0,
            deadline_ms: 0,
            replica_read: false,
        }),
        tp: REQ_TYPE_DAG,
        data: dag.encode_to_vec(),
        start_ts: facts.read_ts,
        ranges: vec![KeyRange::new(range.0, range.1)],
        is_cache_enabled: true,
        cache_if_match_version: 0,
        paging_size,
    };
    let mut out: Vec<(String, &'static str, Vec<u8>)> = vec![
        (
            "tso".into(),
            paths::TSO,
            region::TsoRequest { count: 3 }.encode_to_vec(),
        ),
        (
            "split".into(),
            paths::SPLIT,
            region::SplitRequest {
                region_id: region_a.id,
                split_key: key_a(30),
            }
            .encode_to_vec(),
        ),
        (
            "raw_load".into(),
            paths::RAW_LOAD,
            region::RawLoadRequest {
                pairs: vec![
                    region::KvPair {
                        key: key_b(100),
                        value: row(100, 1000),
                    },
                    region::KvPair {
                        key: key_b(101),
                        value: row(101, 1010),
                    },
                ],
            }
            .encode_to_vec(),
        ),
        (
            "prewrite_2pc".into(),
            paths::PREWRITE,
            txn::PrewriteRequest {
                mutations: vec![
                    put(FIXTURE_TABLE_A, 100, 1),
                    txn::Mutation {
                        op: txn::Op::Delete as i32,
                        key: key_a(41),
                        value: Vec::new(),
                    },
                    txn::Mutation {
                        op: txn::Op::Lock as i32,
                        key: key_b(41),
                        value: Vec::new(),
                    },
                ],
                primary: key_a(100),
                start_ts: later,
                lock_ttl_ms: 3000,
                txn_size: 3,
                use_async_commit: false,
                secondaries: Vec::new(),
                try_one_pc: false,
                max_commit_ts: 0,
            }
            .encode_to_vec(),
        ),
        (
            "prewrite_1pc".into(),
            paths::PREWRITE,
            txn::PrewriteRequest {
                mutations: vec![put(FIXTURE_TABLE_B, 102, 2)],
                primary: key_b(102),
                start_ts: later + 10,
                lock_ttl_ms: 3000,
                txn_size: 1,
                use_async_commit: false,
                secondaries: Vec::new(),
                try_one_pc: true,
                max_commit_ts: 0,
            }
            .encode_to_vec(),
        ),
        (
            "prewrite_async".into(),
            paths::PREWRITE,
            txn::PrewriteRequest {
                mutations: vec![put(FIXTURE_TABLE_A, 103, 3), put(FIXTURE_TABLE_B, 103, 3)],
                primary: key_a(103),
                start_ts: later + 20,
                lock_ttl_ms: 3000,
                txn_size: 2,
                use_async_commit: true,
                secondaries: vec![key_b(103)],
                try_one_pc: false,
                max_commit_ts: 0,
            }
            .encode_to_vec(),
        ),
        (
            "prewrite_unknown_op".into(),
            paths::PREWRITE,
            txn::PrewriteRequest {
                mutations: vec![txn::Mutation {
                    op: 7,
                    key: key_a(104),
                    value: Vec::new(),
                }],
                primary: key_a(104),
                start_ts: later + 30,
                lock_ttl_ms: 3000,
                txn_size: 1,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "commit_pending_lock".into(),
            paths::COMMIT,
            txn::CommitRequest {
                keys: vec![facts.lock_key.clone()],
                start_ts: facts.lock_start_ts,
                commit_ts: later + 40,
            }
            .encode_to_vec(),
        ),
        (
            "rollback_pending_lock".into(),
            paths::ROLLBACK,
            txn::RollbackRequest {
                keys: vec![facts.lock_key.clone()],
                start_ts: facts.lock_start_ts,
            }
            .encode_to_vec(),
        ),
        (
            "check_txn_status_expired".into(),
            paths::CHECK_TXN_STATUS,
            txn::CheckTxnStatusRequest {
                primary: facts.lock_key.clone(),
                lock_ts: facts.lock_start_ts,
                // Ten seconds of physical time later: the 3 s TTL has expired.
                current_ts: facts.read_ts + 10_000 * crate::tso::LOGICAL_PER_MS,
                rollback_if_not_exist: true,
                caller_start_ts: later,
            }
            .encode_to_vec(),
        ),
        (
            "check_txn_status_async".into(),
            paths::CHECK_TXN_STATUS,
            txn::CheckTxnStatusRequest {
                primary: facts.async_primary.clone(),
                lock_ts: facts.async_start_ts,
                current_ts: later,
                rollback_if_not_exist: false,
                caller_start_ts: later,
            }
            .encode_to_vec(),
        ),
        (
            "check_secondary_locks".into(),
            paths::CHECK_SECONDARY_LOCKS,
            txn::CheckSecondaryLocksRequest {
                keys: vec![facts.async_secondary.clone()],
                start_ts: facts.async_start_ts,
            }
            .encode_to_vec(),
        ),
        (
            "resolve_lock_range".into(),
            paths::RESOLVE_LOCK,
            txn::ResolveLockRequest {
                start_ts: facts.lock_start_ts,
                commit_ts: 0,
                keys: Vec::new(),
                start: a_start.clone(),
                end: b_end.clone(),
            }
            .encode_to_vec(),
        ),
        (
            "resolve_lock_keys".into(),
            paths::RESOLVE_LOCK,
            txn::ResolveLockRequest {
                start_ts: facts.async_start_ts,
                commit_ts: later + 50,
                keys: vec![facts.async_primary.clone(), facts.async_secondary.clone()],
                start: Vec::new(),
                end: Vec::new(),
            }
            .encode_to_vec(),
        ),
        (
            "scan_lock".into(),
            paths::SCAN_LOCK,
            txn::ScanLockRequest {
                start: Vec::new(),
                end: Vec::new(),
                max_ts: later,
                limit: 10,
            }
            .encode_to_vec(),
        ),
        (
            "get_committed".into(),
            paths::GET,
            txn::GetRequest {
                key: key_b(45),
                start_ts: facts.read_ts,
                bypass_locks: Vec::new(),
            }
            .encode_to_vec(),
        ),
        (
            "get_locked_bypassed".into(),
            paths::GET,
            txn::GetRequest {
                key: facts.lock_key.clone(),
                start_ts: facts.read_ts,
                bypass_locks: vec![facts.lock_start_ts],
            }
            .encode_to_vec(),
        ),
        (
            "scan".into(),
            paths::SCAN,
            txn::ScanRequest {
                start: key_b(9),
                end: b_end.clone(),
                limit: 10,
                start_ts: facts.read_ts,
                reverse: false,
            }
            .encode_to_vec(),
        ),
        (
            "scan_reverse".into(),
            paths::SCAN,
            txn::ScanRequest {
                start: key_a(20),
                end: a_end,
                limit: 5,
                start_ts: facts.read_ts,
                reverse: true,
            }
            .encode_to_vec(),
        ),
    ];
    // The coprocessor: every sample DAG over table B past its one lock (the async secondary,
    // row 8), one paged, and the delegate path.
    for (name, dag) in sample_dags(FIXTURE_TABLE_B) {
        out.push((
            format!("coprocessor_{name}"),
            paths::COPROCESSOR,
            cop(&dag, region_b, (key_b(9), b_end.clone()), 0).encode_to_vec(),
        ));
    }
    let dags = sample_dags(FIXTURE_TABLE_A);
    let (_, scan) = &dags[0];
    out.push((
        "coprocessor_paged_scan".into(),
        paths::COPROCESSOR,
        cop(scan, region_a, (key_a(10), key_a(50)), 8).encode_to_vec(),
    ));
    out.push((
        "delegate".into(),
        paths::DELEGATE,
        delegate::DelegateRequest {
            request: Some(cop(scan, region_a, (key_a(20), key_a(40)), 0)),
            worker_zone: "b".into(),
            memtable_data_format: 2,
        }
        .encode_to_vec(),
    ));
    out.into_iter()
        .map(|(name, path, body)| {
            let mut data = vec![selector(path)];
            data.extend_from_slice(&body);
            (name, data)
        })
        .collect()
}
