//! The client's errors. A caller matches on a small set of kinds ([`Error::kind`]): config,
//! transport, region (the region map never settled), locked (a lock outlived the wait), cache
//! protocol, evaluation, server, node selection (the delegate path found no worker the policy
//! allows).

use std::time::Duration;

use types::RegionId;

/// The field of [`crate::ClientConfig`] that is wrong, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid client config: field={field} reason={reason}")]
pub struct ConfigError {
    /// The config key, as written in a TOML file (`paging.initial-size`).
    pub field: &'static str,
    pub reason: String,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A wrong system variable name or value (`SET`).
    #[error(transparent)]
    Variable(#[from] crate::variables::VariableError),
    /// A request did not reach the peer, timed out, or came back with a non-200 status or a
    /// body that does not decode.
    #[error("request to a cluster node failed: url={url}")]
    Transport {
        url: String,
        #[source]
        source: node::ClientError,
    },
    #[error("unexpected answer from a cluster node: url={url} status={status} body={body}")]
    BadStatus {
        url: String,
        status: u16,
        body: String,
    },
    #[error("the answer does not decode: url={url} what={what}")]
    Decode {
        url: String,
        what: &'static str,
        #[source]
        source: prost::DecodeError,
    },
    /// No known region holds a key (the servers' region lists leave a gap).
    #[error("no region holds the key: key={key:?}")]
    NoRegion { key: Vec<u8> },
    /// Region errors kept coming back after the region cache was refreshed each time.
    #[error("region errors did not stop after retries: retries={retries} last={last}")]
    RegionRetriesExhausted { retries: u32, last: String },
    /// A request kept failing (region errors, refused connections) until its deadline
    /// (`request-timeout` from its start) passed.
    #[error(
        "request retried until its deadline: reason={reason} attempts={attempts} waited_ms={waited_ms} last={last}"
    )]
    RetryDeadline {
        reason: crate::backoff::RetryReason,
        attempts: u32,
        waited_ms: u64,
        last: String,
    },
    /// A lock's transaction stayed alive for longer than the client waits.
    #[error("lock wait timed out: key={key:?} lock_ts={lock_ts} waited={waited:?}")]
    LockWaitTimeout {
        key: Vec<u8>,
        lock_ts: u64,
        waited: Duration,
    },
    /// A transaction command (`check_txn_status`, `resolve_lock`, `/tso`) answered an error.
    #[error("transaction command failed: command={command} message={message}")]
    TxnCommand {
        command: &'static str,
        message: String,
    },
    /// The server answered a cache hit for a request the client holds no entry for: the
    /// client did not send `cache_if_match_version`, or the server ignored the key.
    #[error("cache hit without a local entry: region_id={region_id}")]
    CacheHitWithoutEntry { region_id: RegionId },
    /// The query failed on the data (`SelectResponse.error`).
    #[error("evaluation error: code={code} message={message}")]
    Eval { code: i32, message: String },
    /// The server could not serve the request (`other_error`).
    #[error("coprocessor request failed on the server: region_id={region_id} message={message}")]
    Server {
        region_id: RegionId,
        message: String,
    },
    /// A response's data is not a `SelectResponse`.
    #[error("coprocessor response data does not decode: region_id={region_id}")]
    SelectDecode {
        region_id: RegionId,
        #[source]
        source: prost::DecodeError,
    },
    /// The rows of a response do not decode.
    #[error("coprocessor rows do not decode: region_id={region_id}")]
    Rows {
        region_id: RegionId,
        #[source]
        source: wire::codec::CodecError,
    },
    /// The delegate path could not choose workers (no alive worker, none in the entry node's
    /// zone, or too many regions without a local replica under `only_local_zone_nodes`). The
    /// text is the operator-facing message, verbatim (operators search logs for it).
    #[error(transparent)]
    NodeSelection(#[from] crate::node_selection::NodeSelectionError),
    /// The DAG asks for a final merge the client does not implement.
    #[error("unsupported final merge: {what}")]
    UnsupportedMerge { what: String },
}

/// What a caller can do about an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Config,
    /// Retry later: the cluster may be restarting.
    Transport,
    /// Retry: the region map kept changing.
    Region,
    /// Retry later: a transaction holds the rows.
    Locked,
    /// A bug in the client or server cache protocol.
    CacheProtocol,
    /// The query itself fails on this data.
    Eval,
    /// The request cannot be served as built.
    Invalid,
    /// A server refused a write for now (e.g. its region is splitting): retry shortly.
    Busy,
    /// No worker the node selection policy allows can serve the request now: wait for
    /// workers, or change the policy (or turn the delegate path off).
    NodeSelection,
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Config(_) => ErrorKind::Config,
            Error::Variable(_) => ErrorKind::Invalid,
            Error::Transport { .. } | Error::BadStatus { .. } | Error::Decode { .. } => {
                ErrorKind::Transport
            }
            Error::NoRegion { .. } | Error::RegionRetriesExhausted { .. } => ErrorKind::Region,
            Error::RetryDeadline { reason, .. } => match reason {
                crate::backoff::RetryReason::Connection => ErrorKind::Transport,
                _ => ErrorKind::Region,
            },
            Error::LockWaitTimeout { .. } => ErrorKind::Locked,
            Error::CacheHitWithoutEntry { .. } => ErrorKind::CacheProtocol,
            Error::Eval { .. } => ErrorKind::Eval,
            Error::NodeSelection(_) => ErrorKind::NodeSelection,
            Error::TxnCommand { .. }
            | Error::Server { .. }
            | Error::SelectDecode { .. }
            | Error::Rows { .. }
            | Error::UnsupportedMerge { .. } => ErrorKind::Invalid,
        }
    }
}

impl Error {
    /// The peer could not be reached (refused, reset, timed out): another replica, or the same
    /// one after a restart, may answer.
    pub fn is_connection(&self) -> bool {
        matches!(self, Error::Transport { source, .. } if source.is_retryable())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
