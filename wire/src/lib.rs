//! Stratus wire types between processes (protobuf via prost derive, no protoc).
//!
//! * [`txn`]: the transaction commands a server serves over HTTP, and their errors.
//! * [`region`]: TSO, region listing, split, raw bulk load.
//! * [`offload`]: the body a storage server POSTs to a worker (framing of three sections).
//! * [`delegate`]: what a worker asks the owning server for on the delegate path, and the answer.
//! * [`fuzzing`]: entry points shared by the cargo-fuzz targets and the corpus replay test.
//!
//! The coprocessor request and response themselves are `crate::coprocessor`. Rolling upgrades: a tag is
//! never renumbered or reused, a new field gets a new tag, decoders ignore unknown tags.

pub mod delegate;
pub mod fuzzing;
pub mod offload;
pub mod region;
pub mod txn;

/// HTTP paths of a storage server (all `POST` with protobuf bodies unless noted).
pub mod paths {
    pub const TSO: &str = "/tso";
    pub const REGIONS: &str = "/regions"; // GET
    pub const SPLIT: &str = "/split";
    pub const RAW_LOAD: &str = "/raw/load";
    pub const COPROCESSOR: &str = "/coprocessor";
    /// Server: a worker's `DelegateRequest` in, a `DelegateResponse` out (`wire::delegate`).
    pub const DELEGATE: &str = "/delegate";
    /// Worker: a client's `crate::coprocessor::Request` in, a `crate::coprocessor::Response` out; the header
    /// `wire::delegate::REGION_SERVER_HEADER` names the owning server's base URL.
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
    /// Flushes every region's memtables to L0 files (empty body; answers 200 when done).
    pub const ADMIN_FLUSH: &str = "/admin/flush";
    /// Compacts every region (L0 into the levels) (empty body; answers 200 when done).
    pub const ADMIN_COMPACT: &str = "/admin/compact";
    /// Every process: `GET` the effective config (TOML), status (JSON), metrics (Prometheus text).
    pub const CONFIG: &str = "/config";
    pub const STATUS: &str = "/status";
    pub const METRICS: &str = "/metrics";
}

/// Content type of every protobuf body.
pub const PROTOBUF_CONTENT_TYPE: &str = "application/x-protobuf";
