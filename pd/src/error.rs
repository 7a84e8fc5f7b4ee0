//! Errors of the placement driver.

use crate::meta::MetaError;

#[derive(Debug, thiserror::Error)]
pub enum PdError {
    /// This instance does not lead (or its lease ran out): ask `leader` (empty: none elected).
    #[error("this placement-driver instance is not the leader (leader: {})", if leader.is_empty() { "none elected" } else { leader })]
    NotLeader { leader: String },
    /// The metadata store failed.
    #[error(transparent)]
    Meta(#[from] MetaError),
    /// A value in the metadata store is not what this crate writes: never overwritten, since
    /// resetting the TSO mark or the id counter could hand out something twice.
    #[error("corrupt metadata: {0}")]
    Corrupt(String),
    /// The TSO's persisted window is used up and could not be extended (the store is
    /// unreachable): no timestamp is handed out until it can be.
    #[error("timestamp window exhausted at {physical_ms} ms and not extended: {cause}")]
    WindowExhausted { physical_ms: u64, cause: String },
    /// A request asked for no timestamps/ids, or too many at once.
    #[error("invalid count: expected 1..={max}, found {found}")]
    InvalidCount { found: u64, max: u64 },
    /// The leader cannot answer yet (it was just elected); asking again shortly works.
    #[error("not ready: {what}")]
    NotReady { what: &'static str },
    /// A request the placement driver refuses as it is (a placement rule that does not
    /// validate, a rule to delete that does not exist).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A write fenced by the leader key failed: another instance leads now.
    #[error("leadership lost while writing {what}")]
    LeadershipLost { what: &'static str },
}
