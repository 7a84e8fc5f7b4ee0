//! The coprocessor's messages (protobuf via prost derive, no protoc): the request and response,
//! the DAG a request carries (executors and expressions), the DAG's result, and what a response
//! reports instead of one (region errors, lock info). A client builds requests and reads
//! responses with these alone; `cop` executes them on an engine snapshot, the server and the
//! worker carry them.
//!
//! Rolling upgrades: a tag is never renumbered or reused; a new field gets a new tag; decoders
//! ignore tags they do not know. Enumerations travel as `i32` and are checked when a request is
//! built into executors, so an unknown value is a clear error instead of a decode failure.

use prost::Message;

/// `Request.tp` of a DAG request (the only type served).
pub const REQ_TYPE_DAG: i64 = 103;

/// A key range `[start, end)`; an empty `end` is unbounded.
#[derive(Clone, PartialEq, Eq, Hash, Message)]
pub struct KeyRange {
    #[prost(bytes = "vec", tag = "1")]
    pub start: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub end: Vec<u8>,
}

impl KeyRange {
    pub fn new(start: impl Into<Vec<u8>>, end: impl Into<Vec<u8>>) -> KeyRange {
        KeyRange {
            start: start.into(),
            end: end.into(),
        }
    }
}

/// Which region the request is for and until when it is worth answering.
#[derive(Clone, PartialEq, Message)]
pub struct Context {
    #[prost(uint64, tag = "1")]
    pub region_id: u64,
    /// The region's version (epoch) the client routed by; a mismatch is a region error.
    #[prost(uint64, tag = "2")]
    pub region_ver: u64,
    #[prost(uint32, tag = "3")]
    pub keyspace_id: u32,
    /// Unix milliseconds after which the client no longer waits; 0 = no deadline.
    #[prost(uint64, tag = "4")]
    pub deadline_ms: u64,
    /// A replica read: any replica may serve it, a follower after a read index from the leader
    /// (which checks its memory locks for the request's start_ts and ranges) and after applying
    /// up to it. Without it only the region's leader answers (`NotLeader` elsewhere).
    #[prost(bool, tag = "5")]
    pub replica_read: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct Request {
    #[prost(message, optional, tag = "1")]
    pub context: Option<Context>,
    #[prost(int64, tag = "2")]
    pub tp: i64,
    /// An encoded [`DagRequest`].
    #[prost(bytes = "vec", tag = "3")]
    pub data: Vec<u8>,
    #[prost(uint64, tag = "4")]
    pub start_ts: u64,
    #[prost(message, repeated, tag = "5")]
    pub ranges: Vec<KeyRange>,
    #[prost(bool, tag = "6")]
    pub is_cache_enabled: bool,
    /// The data version the client's cached result was computed at; 0 = no cached entry.
    #[prost(uint64, tag = "7")]
    pub cache_if_match_version: u64,
    /// Rows per page; 0 = no paging.
    #[prost(uint64, tag = "8")]
    pub paging_size: u64,
}

/// Why a region cannot serve the request; the client refreshes its region cache and retries.
#[derive(Clone, PartialEq, Message)]
pub struct RegionError {
    #[prost(string, tag = "1")]
    pub message: String,
    /// One of [`RegionErrorKind`].
    #[prost(int32, tag = "2")]
    pub kind: i32,
    #[prost(uint64, tag = "3")]
    pub region_id: u64,
    /// The region's current version, when known.
    #[prost(uint64, tag = "4")]
    pub current_ver: u64,
    /// For `NotLeader`: the leader's store id when the answering server knows it (0: unknown).
    #[prost(uint64, tag = "5")]
    pub leader_store_id: u64,
    /// For `NotLeader`: the leader's base URL when known ("" = unknown).
    #[prost(string, tag = "6")]
    pub leader_addr: String,
    /// For `EpochNotMatch`: the answering server's regions overlapping the request, when known,
    /// so the client can re-split without another round trip.
    #[prost(message, repeated, tag = "7")]
    pub current_regions: Vec<crate::region::Region>,
}

impl RegionError {
    /// The typed kind (`None`: a kind this build does not know, from a newer server).
    pub fn kind(&self) -> Option<RegionErrorKind> {
        RegionErrorKind::from_i32(self.kind)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum RegionErrorKind {
    RegionNotFound = 1,
    EpochNotMatch = 2,
    KeyNotInRegion = 3,
    ServerBusy = 4,
    /// This server's replica of the region is not its serving leader (or is a leader that has
    /// not applied an entry of its term yet): ask the leader, or again shortly.
    NotLeader = 5,
    /// A leader change dropped the command, or left its outcome unknown: send it again to the
    /// new leader (every command that can get this answer is idempotent).
    StaleCommand = 6,
}

impl RegionErrorKind {
    pub const ALL: [RegionErrorKind; 6] = [
        RegionErrorKind::RegionNotFound,
        RegionErrorKind::EpochNotMatch,
        RegionErrorKind::KeyNotInRegion,
        RegionErrorKind::ServerBusy,
        RegionErrorKind::NotLeader,
        RegionErrorKind::StaleCommand,
    ];

    pub fn from_i32(v: i32) -> Option<RegionErrorKind> {
        RegionErrorKind::ALL.into_iter().find(|k| *k as i32 == v)
    }

    /// A stable name (metric label, logs).
    pub fn as_str(self) -> &'static str {
        match self {
            RegionErrorKind::RegionNotFound => "region_not_found",
            RegionErrorKind::EpochNotMatch => "epoch_not_match",
            RegionErrorKind::KeyNotInRegion => "key_not_in_region",
            RegionErrorKind::ServerBusy => "server_busy",
            RegionErrorKind::NotLeader => "not_leader",
            RegionErrorKind::StaleCommand => "stale_command",
        }
    }
}

/// A transaction lock the request ran into (mirrors kvengine's `LockInfo`).
#[derive(Clone, PartialEq, Message)]
pub struct LockInfo {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub primary_lock: Vec<u8>,
    /// The locking transaction's start_ts.
    #[prost(uint64, tag = "3")]
    pub lock_version: u64,
    #[prost(uint64, tag = "4")]
    pub lock_ttl: u64,
    #[prost(uint64, tag = "5")]
    pub txn_size: u64,
    /// 0 Put, 1 Delete, 2 Lock, 3 Pessimistic.
    #[prost(int32, tag = "6")]
    pub lock_type: i32,
    #[prost(bool, tag = "7")]
    pub use_async_commit: bool,
    #[prost(uint64, tag = "8")]
    pub min_commit_ts: u64,
}

/// Where and how a request ran; the server fills the location fields.
#[derive(Clone, PartialEq, Message)]
pub struct ExecDetails {
    #[prost(uint64, tag = "1")]
    pub scanned_keys: u64,
    #[prost(uint64, tag = "2")]
    pub processed_ns: u64,
    #[prost(uint64, tag = "3")]
    pub wait_ns: u64,
    /// Where it ran: a [`crate::placement::Location`] label (`local`, `remote`, `fallback`,
    /// `cache_hit`, `delegate`); read it with [`ExecDetails::location`](Self::location()).
    #[prost(string, tag = "4")]
    pub location: String,
    /// The worker's address when it ran remotely.
    #[prost(string, tag = "5")]
    pub remote_addr: String,
    /// Why it ran there: an [`crate::placement::OffloadReason`] label for a local or remote
    /// decision, else a sentence (a fallback's cause, a cache hit, the delegate path).
    #[prost(string, tag = "6")]
    pub reason: String,
    /// Bytes this answer's computation moved between zones below the node that answered the
    /// client: a server's offload body and the worker's answer when the worker is in another
    /// zone; a worker's delegate request and the server's snapshot when the server is. The
    /// client adds its own hop's bytes (`EXPLAIN`'s `cross_zone_bytes`). HTTP body bytes; 0
    /// when nothing crossed, or either end has no zone label.
    #[prost(uint64, tag = "7")]
    pub cross_zone_bytes: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Response {
    /// An encoded [`SelectResponse`].
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
    #[prost(message, optional, tag = "2")]
    pub region_error: Option<RegionError>,
    #[prost(message, optional, tag = "3")]
    pub locked: Option<LockInfo>,
    #[prost(string, tag = "4")]
    pub other_error: String,
    /// Present only when a page stopped early: the span of keys this page covered (the
    /// "scanned range"). Ascending: `[start of the first range, last scanned key + 0x00)`, so
    /// the next page starts at `range.end`; descending: `[last scanned key, end of the last
    /// range)`, so the next page ends at `range.start`. The client's next request asks for its
    /// ranges minus this span (`crate::paging::remaining_ranges`). Absent: the region is done.
    #[prost(message, optional, tag = "5")]
    pub range: Option<KeyRange>,
    #[prost(bool, tag = "6")]
    pub is_cache_hit: bool,
    /// The data version the result is valid for (the client's cache key version).
    #[prost(uint64, tag = "7")]
    pub cache_last_version: u64,
    #[prost(bool, tag = "8")]
    pub can_be_cached: bool,
    #[prost(message, optional, tag = "9")]
    pub exec_details: Option<ExecDetails>,
}

/// A pushed-down query: executors in post order (the scan first, each next one consuming the
/// previous), which output columns to return, and how.
#[derive(Clone, PartialEq, Message)]
pub struct DagRequest {
    #[prost(message, repeated, tag = "1")]
    pub executors: Vec<Executor>,
    /// Columns of the last executor's output to return, in order; empty = all.
    #[prost(uint32, repeated, tag = "2")]
    pub output_offsets: Vec<u32>,
    /// 0 = datum rows (the only encoding served).
    #[prost(int32, tag = "3")]
    pub encode_type: i32,
    /// Seconds east of UTC (kept for date-time functions; no function uses it yet).
    #[prost(int64, tag = "4")]
    pub time_zone_offset: i64,
    #[prost(bool, tag = "5")]
    pub collect_execution_summaries: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum ExecType {
    TableScan = 0,
    IndexScan = 1,
    Selection = 2,
    /// Hash aggregation: with group-by items.
    HashAgg = 3,
    /// Simple aggregation: no group-by items, one partial row (none over no rows).
    SimpleAgg = 4,
    TopN = 5,
    Limit = 6,
    Projection = 7,
}

impl ExecType {
    pub fn from_i32(v: i32) -> Option<ExecType> {
        Some(match v {
            0 => ExecType::TableScan,
            1 => ExecType::IndexScan,
            2 => ExecType::Selection,
            3 => ExecType::HashAgg,
            4 => ExecType::SimpleAgg,
            5 => ExecType::TopN,
            6 => ExecType::Limit,
            7 => ExecType::Projection,
            _ => return None,
        })
    }
}

#[derive(Clone, PartialEq, Message)]
pub struct Executor {
    /// One of [`ExecType`]; the matching field below is set.
    #[prost(int32, tag = "1")]
    pub tp: i32,
    #[prost(message, optional, tag = "2")]
    pub tbl_scan: Option<TableScan>,
    #[prost(message, optional, tag = "3")]
    pub idx_scan: Option<IndexScan>,
    #[prost(message, optional, tag = "4")]
    pub selection: Option<Selection>,
    #[prost(message, optional, tag = "5")]
    pub aggregation: Option<Aggregation>,
    #[prost(message, optional, tag = "6")]
    pub top_n: Option<TopN>,
    #[prost(message, optional, tag = "7")]
    pub limit: Option<Limit>,
    #[prost(message, optional, tag = "8")]
    pub projection: Option<Projection>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ColumnInfo {
    #[prost(int64, tag = "1")]
    pub column_id: i64,
    /// A [`crate::datum::FieldType`].
    #[prost(int32, tag = "2")]
    pub tp: i32,
    /// The column is the integer primary key: its value is the record key's handle.
    #[prost(bool, tag = "3")]
    pub pk_handle: bool,
    /// The value of a row that lacks the column, as an encoded datum
    /// ([`crate::codec::datum`]); empty = NULL.
    #[prost(bytes = "vec", tag = "4")]
    pub default_val: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TableScan {
    #[prost(int64, tag = "1")]
    pub table_id: i64,
    #[prost(message, repeated, tag = "2")]
    pub columns: Vec<ColumnInfo>,
    #[prost(bool, tag = "3")]
    pub desc: bool,
}

/// Scans index entries; `columns` are the index columns in index order, optionally followed by
/// a `pk_handle` column that receives the row handle.
#[derive(Clone, PartialEq, Message)]
pub struct IndexScan {
    #[prost(int64, tag = "1")]
    pub table_id: i64,
    #[prost(int64, tag = "2")]
    pub index_id: i64,
    #[prost(message, repeated, tag = "3")]
    pub columns: Vec<ColumnInfo>,
    #[prost(bool, tag = "4")]
    pub desc: bool,
    /// Unique index: the handle is in the value, not the key.
    #[prost(bool, tag = "5")]
    pub unique: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct Selection {
    /// All must be true (NULL and false drop the row).
    #[prost(message, repeated, tag = "1")]
    pub conditions: Vec<Expr>,
}

/// Output columns: the aggregates' partial results first (AVG as count then sum), then the
/// group-by values.
#[derive(Clone, PartialEq, Message)]
pub struct Aggregation {
    #[prost(message, repeated, tag = "1")]
    pub group_by: Vec<Expr>,
    /// Expressions of tp Count/Sum/Min/Max/Avg with one child.
    #[prost(message, repeated, tag = "2")]
    pub agg_func: Vec<Expr>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ByItem {
    #[prost(message, optional, tag = "1")]
    pub expr: Option<Expr>,
    #[prost(bool, tag = "2")]
    pub desc: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct TopN {
    #[prost(message, repeated, tag = "1")]
    pub order_by: Vec<ByItem>,
    #[prost(uint64, tag = "2")]
    pub limit: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Limit {
    #[prost(uint64, tag = "1")]
    pub limit: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Projection {
    #[prost(message, repeated, tag = "1")]
    pub exprs: Vec<Expr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum ExprType {
    Null = 0,
    /// `val` = 8 bytes little-endian.
    Int64 = 1,
    UInt64 = 2,
    /// `val` = the f64's bits, 8 bytes little-endian.
    Float64 = 3,
    /// `val` = the bytes.
    Bytes = 4,
    /// `column_offset` = index of the input column.
    ColumnRef = 10,
    /// `sig` = a [`ScalarFuncSig`], `children` = its arguments.
    ScalarFunc = 20,
    Count = 100,
    Sum = 101,
    Min = 102,
    Max = 103,
    Avg = 104,
}

impl ExprType {
    pub fn from_i32(v: i32) -> Option<ExprType> {
        Some(match v {
            0 => ExprType::Null,
            1 => ExprType::Int64,
            2 => ExprType::UInt64,
            3 => ExprType::Float64,
            4 => ExprType::Bytes,
            10 => ExprType::ColumnRef,
            20 => ExprType::ScalarFunc,
            100 => ExprType::Count,
            101 => ExprType::Sum,
            102 => ExprType::Min,
            103 => ExprType::Max,
            104 => ExprType::Avg,
            _ => return None,
        })
    }
}

/// Scalar functions. Comparisons and arithmetic take operands of any numeric types (ints,
/// uints, reals: mixed operands compare by value; arithmetic with a real operand is real,
/// otherwise integer with overflow errors) or two byte strings (comparisons only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum ScalarFuncSig {
    Lt = 1,
    Le = 2,
    Gt = 3,
    Ge = 4,
    Eq = 5,
    Ne = 6,
    Plus = 10,
    Minus = 11,
    Multiply = 12,
    /// Real division; division by zero is NULL (SQL).
    Divide = 13,
    /// Integer division; division by zero is NULL.
    IntDiv = 14,
    Mod = 15,
    UnaryMinus = 16,
    /// Three-valued logic.
    And = 20,
    Or = 21,
    Not = 22,
    IsNull = 30,
    /// First child is the value, the others the list; NULL rules of SQL.
    In = 40,
    /// Value, pattern: `%` any run, `_` one byte, `\` escapes.
    Like = 41,
}

impl ScalarFuncSig {
    pub fn from_i32(v: i32) -> Option<ScalarFuncSig> {
        use ScalarFuncSig::*;
        Some(match v {
            1 => Lt,
            2 => Le,
            3 => Gt,
            4 => Ge,
            5 => Eq,
            6 => Ne,
            10 => Plus,
            11 => Minus,
            12 => Multiply,
            13 => Divide,
            14 => IntDiv,
            15 => Mod,
            16 => UnaryMinus,
            20 => And,
            21 => Or,
            22 => Not,
            30 => IsNull,
            40 => In,
            41 => Like,
            _ => return None,
        })
    }
}

#[derive(Clone, PartialEq, Message)]
pub struct Expr {
    /// An [`ExprType`].
    #[prost(int32, tag = "1")]
    pub tp: i32,
    #[prost(bytes = "vec", tag = "2")]
    pub val: Vec<u8>,
    /// A [`ScalarFuncSig`] when `tp` is ScalarFunc.
    #[prost(int32, tag = "3")]
    pub sig: i32,
    #[prost(message, repeated, tag = "4")]
    pub children: Vec<Expr>,
    #[prost(uint32, tag = "5")]
    pub column_offset: u32,
}

impl Expr {
    pub fn column(offset: u32) -> Expr {
        Expr {
            tp: ExprType::ColumnRef as i32,
            column_offset: offset,
            ..Expr::default()
        }
    }

    pub fn null() -> Expr {
        Expr {
            tp: ExprType::Null as i32,
            ..Expr::default()
        }
    }

    pub fn int(v: i64) -> Expr {
        Expr {
            tp: ExprType::Int64 as i32,
            val: v.to_le_bytes().to_vec(),
            ..Expr::default()
        }
    }

    pub fn uint(v: u64) -> Expr {
        Expr {
            tp: ExprType::UInt64 as i32,
            val: v.to_le_bytes().to_vec(),
            ..Expr::default()
        }
    }

    pub fn real(v: f64) -> Expr {
        Expr {
            tp: ExprType::Float64 as i32,
            val: v.to_bits().to_le_bytes().to_vec(),
            ..Expr::default()
        }
    }

    pub fn bytes(v: impl Into<Vec<u8>>) -> Expr {
        Expr {
            tp: ExprType::Bytes as i32,
            val: v.into(),
            ..Expr::default()
        }
    }

    pub fn func(sig: ScalarFuncSig, children: Vec<Expr>) -> Expr {
        Expr {
            tp: ExprType::ScalarFunc as i32,
            sig: sig as i32,
            children,
            ..Expr::default()
        }
    }

    pub fn agg(tp: ExprType, child: Expr) -> Expr {
        Expr {
            tp: tp as i32,
            children: vec![child],
            ..Expr::default()
        }
    }
}

/// The result of a DAG: rows of datums, or an evaluation error (errors travel here, inside the
/// response data, not as transport errors).
#[derive(Clone, PartialEq, Message)]
pub struct SelectResponse {
    #[prost(message, optional, tag = "1")]
    pub error: Option<EvalError>,
    /// Rows, each the output columns as encoded datums ([`crate::codec::datum`]), concatenated.
    #[prost(bytes = "vec", tag = "2")]
    pub rows_data: Vec<u8>,
    #[prost(uint64, tag = "3")]
    pub row_count: u64,
    /// Columns per row.
    #[prost(uint32, tag = "4")]
    pub column_count: u32,
    #[prost(message, repeated, tag = "5")]
    pub execution_summaries: Vec<ExecutionSummary>,
}

/// Codes of [`EvalError`], stable on the wire: they reach clients inside responses (the client's
/// own final merge reports an overflow with the same code), so a code is never changed or
/// reused.
pub mod eval_error_code {
    /// A value out of range (an overflow in arithmetic or an aggregate).
    pub const OVERFLOW: i32 = 1690;
    /// A type an expression cannot take.
    pub const TYPE: i32 = 1105;
    /// A stored row or key that does not decode.
    pub const CORRUPT_DATA: i32 = 1300;
}

/// An evaluation error: a property of the query on this data (codes in [`eval_error_code`]).
#[derive(Clone, PartialEq, Message)]
pub struct EvalError {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub msg: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct ExecutionSummary {
    #[prost(uint64, tag = "1")]
    pub time_processed_ns: u64,
    #[prost(uint64, tag = "2")]
    pub num_produced_rows: u64,
    #[prost(uint64, tag = "3")]
    pub num_iterations: u64,
}
