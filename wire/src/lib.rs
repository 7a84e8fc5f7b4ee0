//! The Stratus wire: everything that crosses a process boundary, and the values and byte
//! formats a client needs to fill and read it. Protobuf via prost derive (no protoc).
//!
//! This crate sits at the bottom of the crate graph, on `types` only: it depends on no engine
//! crate (no `kvengine`, `sst`, `memtable`) and on nothing of AWS, so an entry node (the
//! `client` crate) links the protocol without the engine. Executing a request is the `cop`
//! crate's job, storing data the engine's; what a request *is* lives here. `.ci/run` fails when
//! `cargo tree -p client -e normal` lists an engine crate or `aws-sdk-s3`.
//!
//! Modules in the order a client's data flows through them:
//!
//! * [`datum`]: SQL values ([`datum::Datum`]) and the column types a table declares;
//! * [`codec`]: their byte formats: memcomparable numbers, bytes and datums, record and index
//!   keys, row values (a client encodes keys and rows to write them, and decodes result rows);
//! * [`region`]: the TSO, the regions a server owns (how a client routes a key), split, raw
//!   bulk load;
//! * [`txn`]: the transaction commands (prewrite, commit, lock resolution, MVCC reads) and
//!   their errors;
//! * [`coprocessor`]: the coprocessor request and response, the DAG a request carries
//!   (executors, expressions) and its result, region errors, lock info, exec details;
//! * [`placement`]: where a request ran and why (location, offload reason, fallback cause):
//!   the closed sets the exec details and the metrics speak;
//! * [`paging`]: how a page reports the keys it covered and which ranges the next page asks
//!   for;
//! * [`offload`]: the body a storage server POSTs to a worker (framing of three sections);
//! * [`delegate`]: what a worker asks the owning server for on the delegate path, and the
//!   answer;
//! * [`raft`]: Raft messages between storage servers (a prost mirror of raft-rs's `eraftpb`,
//!   so that rust-protobuf never parses bytes from the network), in per-region envelopes,
//!   batched per destination server;
//! * [`read_index`]: the context a read-index request carries to the leader and back (a
//!   follower read's start_ts and ranges, the leader's memory-lock check);
//! * [`pd`]: what servers, workers and clients ask the placement driver (ids, its members;
//!   timestamps are [`region::TsoRequest`] at [`paths::TSO`], as on a server running a TSO);
//! * [`paths`] and [`PROTOBUF_CONTENT_TYPE`]: where each message is POSTed;
//! * [`traffic`]: which conversation a request's bytes belong to (by path) and the zone
//!   header both ends of an exchange send, the vocabulary of the network byte metrics;
//! * [`access`]: which paths a client, an admin or only another node may call (checked by
//!   every listener when TLS names its peers);
//! * [`fuzzing`]: the engine-free parts of the fuzz targets over these messages (framing and
//!   round-trip checks, sample DAGs for seeds).
//!
//! **Rolling upgrades.** Old and new servers, workers and clients talk to each other while a
//! cluster is upgraded, so a protobuf tag is never renumbered or reused: a new field gets a new
//! tag, a removed field's tag is retired, and decoders ignore tags they do not know.
//! Enumerations travel as `i32` and are checked by their user, so an unknown value is a clear
//! error instead of a decode failure. Byte formats (the codecs, the offload framing) carry a
//! version, documented beside their encoder; a change bumps it and keeps the old one decoding.

pub mod access;
pub mod codec;
pub mod coprocessor;
pub mod datum;
pub mod delegate;
pub mod fuzzing;
pub mod offload;
pub mod paging;
pub mod pd;
pub mod placement;
pub mod raft;
pub mod raft_cmd;
pub mod read_index;
pub mod region;
pub mod traffic;
pub mod txn;

/// HTTP paths of a storage server (all `POST` with protobuf bodies unless noted).
pub mod paths {
    /// A server running the TSO, and every placement-driver instance (its leader answers).
    pub const TSO: &str = "/tso";
    /// Placement driver: [`crate::pd::AllocIdRequest`] in, [`crate::pd::AllocIdResponse`] out.
    pub const PD_ALLOC_ID: &str = "/pd/alloc-id";
    /// Placement driver, `GET`: [`crate::pd::MembersResponse`] (who leads, the cluster id).
    pub const PD_MEMBERS: &str = "/pd/members";
    /// Placement driver: [`crate::pd::StoreHeartbeat`] in, [`crate::pd::HeartbeatResponse`] out.
    pub const PD_STORE_HEARTBEAT: &str = "/pd/store-heartbeat";
    /// Placement driver: [`crate::pd::WorkerHeartbeat`] in, [`crate::pd::HeartbeatResponse`] out.
    pub const PD_WORKER_HEARTBEAT: &str = "/pd/worker-heartbeat";
    /// Placement driver, `GET`: [`crate::pd::ClusterView`] (stores, workers, regions).
    pub const PD_CLUSTER: &str = "/pd/cluster";
    /// Placement driver, `GET`: [`crate::pd::ClusterView`] with the registered workers only.
    pub const PD_WORKERS: &str = "/pd/workers";
    /// Placement driver: [`crate::pd::StoreStateRequest`] in, [`crate::pd::HeartbeatResponse`]
    /// out (`stratus ctl server drain`).
    pub const PD_STORE_STATE: &str = "/pd/store-state";
    /// Placement driver: [`crate::pd::OperatorsRequest`] in, [`crate::pd::OperatorsResponse`]
    /// out (the moves in flight).
    pub const PD_OPERATORS: &str = "/pd/operators";
    /// Placement driver: [`crate::pd::RulesRequest`] in, [`crate::pd::RulesResponse`] out
    /// (`stratus ctl rule`).
    pub const PD_RULES: &str = "/pd/rules";
    /// Placement driver: [`crate::pd::WatchRequest`] in, [`crate::pd::WatchResponse`] out (a
    /// long poll for topology changes).
    pub const PD_WATCH: &str = "/pd/watch";
    pub const REGIONS: &str = "/regions"; // GET
    pub const SPLIT: &str = "/split";
    pub const RAW_LOAD: &str = "/raw/load";
    pub const COPROCESSOR: &str = "/coprocessor";
    /// Worker: a server's `changeset::CompactionJob` in, a `CompactionResult` out (remote
    /// compaction; the job's bytes are opaque here, the engine-free crate does not decode them).
    pub const COMPACT: &str = "/compact";
    /// Server: a worker's `DelegateRequest` in, a `DelegateResponse` out ([`crate::delegate`]).
    pub const DELEGATE: &str = "/delegate";
    /// Worker: a client's [`crate::coprocessor::Request`] in, a `Response` out; the header
    /// [`crate::delegate::REGION_SERVER_HEADER`] names the owning server's base URL.
    pub const DELEGATE_COPROCESSOR: &str = "/delegate/coprocessor";
    pub const PREWRITE: &str = "/txn/prewrite";
    pub const COMMIT: &str = "/txn/commit";
    pub const ROLLBACK: &str = "/txn/rollback";
    pub const CHECK_TXN_STATUS: &str = "/txn/check_txn_status";
    pub const CHECK_SECONDARY_LOCKS: &str = "/txn/check_secondary_locks";
    pub const RESOLVE_LOCK: &str = "/txn/resolve_lock";
    pub const SCAN_LOCK: &str = "/txn/scan_lock";
    pub const GET: &str = "/txn/get";
    pub const SCAN: &str = "/txn/scan";
    /// Flushes the memtables of every region this server leads to L0 files (empty body; answers
    /// 200 when done). Followers get the files through the log, so flushing every server
    /// flushes every region once.
    pub const ADMIN_FLUSH: &str = "/admin/flush";
    /// Compacts every region this server leads (L0 into the levels) (empty body; answers 200
    /// when done).
    pub const ADMIN_COMPACT: &str = "/admin/compact";
    /// `POST`: [`crate::region::TransferLeaderRequest`].
    pub const ADMIN_TRANSFER_LEADER: &str = "/admin/transfer_leader";
    /// Server: a [`crate::raft::RaftBatch`] from another server in; an empty 200 once the
    /// messages are queued for the store loop.
    pub const RAFT_BATCH: &str = "/raft/batch";
    /// Every process: `GET` the effective config (TOML), status (JSON), metrics (Prometheus text).
    pub const CONFIG: &str = "/config";
    pub const STATUS: &str = "/status";
    pub const METRICS: &str = "/metrics";
}

/// Content type of every protobuf body.
pub const PROTOBUF_CONTENT_TYPE: &str = "application/x-protobuf";
