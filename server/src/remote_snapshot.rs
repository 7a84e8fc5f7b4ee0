//! What a server hands out so that another process can run a request on its data: shared by
//! the offload path ([`crate::dispatcher`], which frames it into `wire::offload` and POSTs
//! it to a worker) and the delegate path ([`crate::delegate`], which answers a worker's
//! `POST /delegate` with it).
//!
//! 1. scan the LOCK CF over the request's ranges on the origin snapshot: a lock that blocks a
//!    read at start_ts is the answer (nothing is shipped: the rebuilt snapshot has no locks,
//!    so it could not see it); non-blocking locks only make the result uncacheable;
//! 2. describe the snapshot (`SnapAccess::to_remote`): the WRITE files that overlap the ranges
//!    plus the memtable rows a read at start_ts needs. Newer memtable versions stay behind,
//!    which also makes the result uncacheable.
//!
//! The region, epoch, memory-lock and request checks come before (the caller's
//! [`crate::coprocessor::Coprocessor`] runs them when it takes the snapshot).

use bytes::Bytes;
use changeset::MemtableDataFormat;
use kvengine::SnapAccess;
use wire::coprocessor::Request;

/// A snapshot description ready to ship, and what the origin learned while building it.
#[derive(Debug, Clone)]
pub struct Shipment {
    /// The memtable rows (`changeset::memtable_data` layout).
    pub memtable_data: Bytes,
    /// Their format.
    pub format: MemtableDataFormat,
    /// The snapshot ChangeSet, encoded (protobuf).
    pub changeset: Vec<u8>,
    /// Memtable versions newer than start_ts were left out of `memtable_data`.
    pub newer_versions_seen: bool,
    /// Non-blocking locks sit in the ranges.
    pub locks_seen: bool,
    /// The origin snapshot's data version (what `cache_last_version` reports).
    pub data_version: u64,
}

impl Shipment {
    /// Whether a result computed from this shipment must not be cached.
    pub fn uncacheable(&self) -> bool {
        self.newer_versions_seen || self.locks_seen
    }
}

/// Why nothing can be shipped.
#[derive(Debug)]
pub enum ShipError {
    /// A lock blocks the read: answer `locked`.
    Locked(Box<kvengine::mvcc::LockInfo>),
    /// The lock scan or the snapshot description failed (a message for the caller).
    Failed(String),
}

/// Steps 1 and 2 of the module docs, for `req` on `snap`, the memtable rows in `format` (the
/// newest the receiving worker and this server read). Blocking.
pub fn ship(
    req: &Request,
    snap: &SnapAccess,
    format: MemtableDataFormat,
) -> Result<Shipment, ShipError> {
    let mut locks_seen = false;
    for r in &req.ranges {
        match snap.check_locks_in_range(&r.start, &r.end, req.start_ts, &[]) {
            Ok(any) => locks_seen |= any,
            Err(kvengine::Error::KeyIsLocked { lock }) => return Err(ShipError::Locked(lock)),
            Err(e) => return Err(ShipError::Failed(format!("lock scan failed: {e}"))),
        }
    }
    let ranges: Vec<(&[u8], &[u8])> = req
        .ranges
        .iter()
        .map(|r| (r.start.as_slice(), r.end.as_slice()))
        .collect();
    let remote = snap
        .to_remote_as(&ranges, req.start_ts, format)
        .map_err(|e| ShipError::Failed(format!("snapshot description failed: {e}")))?;
    Ok(Shipment {
        format,
        changeset: changeset::encode_changeset(&remote.changeset),
        memtable_data: remote.memtable_data,
        newer_versions_seen: remote.filtered_newer,
        locks_seen,
        data_version: cop::cache::response_data_version(snap),
    })
}
