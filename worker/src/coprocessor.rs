//! One offloaded coprocessor request, from body bytes to a cop response: split the offload
//! body into its sections (`wire::offload`), decode the cop request and the snapshot
//! ChangeSet, rebuild the read-only snapshot ([`SnapAccess::from_remote_cached`], over the
//! worker's open tables) and run the handler on it with the worker's options (never a cache
//! hit).
//!
//! Failures split by whose fault they are, because the server reacts differently:
//! * [`OffloadError::is_bad_request`]: the body is not one a server following the protocol
//!   sends (framing, protobuf, shipped rows or snapshot description). Retrying the same body
//!   fails the same way; the server should run the request locally and look for a bug. The
//!   shipped rows of a v4 blob are checked a block at a time as the execution reads them, so
//!   this can also come after the rebuild ([`cop::handler::handle_shipped`]).
//! * otherwise the object store failed while the files were opened (missing file, I/O, S3
//!   unreachable, a stored table failing its checks): the body may be fine, another worker or
//!   a later retry may succeed.
//!
//! Everything here is synchronous. [`Offload::decode`] is cheap (the framing slices the body,
//! the ChangeSet decodes into slices of it), so the HTTP layer calls it directly, then applies
//! TopN paging ([`crate::topn_paging`]) and the cop-limiter ([`crate::cop_limiter`]) to the
//! decoded request, and runs the CPU- and I/O-bound [`Offload::execute`] on a blocking thread.
//! Nothing allocates more than the body justifies: the memtable rows are indexed in place (a
//! v4 blob's a block at a time, as reads reach them).

use std::time::{Duration, Instant};

use bytes::Bytes;
use changeset::{ChangeSet, ChangeSetDecodeError, MemtableDataFormat};
use cop::handler::HandlerOptions;
use kvengine::{SnapAccess, TableCache};
use prost::Message;
use wire::coprocessor::{Request, Response};
use wire::offload::OffloadDecodeError;

/// Why an offload body could not be turned into a snapshot and a request.
#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    /// The three-section framing does not hold.
    #[error("bad offload body framing")]
    Framing(#[source] OffloadDecodeError),
    /// The first section is not a protobuf cop request.
    #[error("cop request does not decode: expected a protobuf Request, found {len} bytes")]
    Request {
        len: usize,
        #[source]
        source: prost::DecodeError,
    },
    /// The third section is not a protobuf ChangeSet.
    #[error("snapshot changeset does not decode")]
    ChangeSet(#[source] ChangeSetDecodeError),
    /// The ChangeSet or the memtable rows decode but describe no snapshot a server sends (not a
    /// snapshot, an inconsistent file list, corrupt or out-of-range rows).
    #[error("shipped snapshot rejected")]
    Snapshot(#[source] kvengine::Error),
    /// The object store failed while the snapshot's files were opened.
    #[error("object store failed while rebuilding the snapshot")]
    Store(#[source] kvengine::Error),
    /// The memtable rows are in a format newer than this worker reads
    /// (`worker.memtable-data-format`), or in none it knows.
    #[error("memtable data format not read here: expected at most {max}, found {found}")]
    MemtableDataFormat {
        max: MemtableDataFormat,
        found: String,
    },
}

impl OffloadError {
    /// Whether the body itself is at fault (400) rather than the object store (502).
    pub fn is_bad_request(&self) -> bool {
        !matches!(self, OffloadError::Store(_))
    }

    /// The message and every source's, on one line: what the HTTP answer carries.
    pub fn reason(&self) -> String {
        crate::error_chain(self)
    }

    /// Sorts an error of [`SnapAccess::from_remote_cached`]: errors about what was shipped are the
    /// body's fault; everything else happened while the object store was read.
    fn from_rebuild(e: kvengine::Error) -> OffloadError {
        use kvengine::Error as E;
        match e {
            E::RemoteSnapshot { .. }
            | E::RemoteMemtableData { .. }
            | E::ChangeSet(_)
            | E::Record { .. } => OffloadError::Snapshot(e),
            _ => OffloadError::Store(e),
        }
    }
}

/// An offload body with its sections decoded, the snapshot not yet rebuilt.
#[derive(Debug, Clone)]
pub struct Offload {
    pub request: Request,
    pub changeset: ChangeSet,
    /// The shipped memtable rows; the rebuilt snapshot reads them in place.
    pub memtable_data: Bytes,
}

impl Offload {
    /// Splits and decodes `body`; the ChangeSet's keys stay slices of it.
    pub fn decode(body: &Bytes) -> Result<Offload, OffloadError> {
        let sections = wire::offload::decode(body).map_err(OffloadError::Framing)?;
        let request =
            Request::decode(sections.request.as_ref()).map_err(|source| OffloadError::Request {
                len: sections.request.len(),
                source,
            })?;
        let changeset =
            changeset::decode_changeset(sections.changeset).map_err(OffloadError::ChangeSet)?;
        Ok(Offload {
            request,
            changeset,
            memtable_data: sections.memtable_data,
        })
    }

    /// Refuses memtable rows in a format newer than `max` (what this worker advertises), as a
    /// build that only reads up to `max` would.
    pub fn check_memtable_data_format(&self, max: MemtableDataFormat) -> Result<(), OffloadError> {
        match changeset::memtable_data::peek_format(&self.memtable_data) {
            Ok(found) if found <= max => Ok(()),
            Ok(found) => Err(OffloadError::MemtableDataFormat {
                max,
                found: found.to_string(),
            }),
            // Not a blob at all: the rebuild reports it in full.
            Err(_) => Ok(()),
        }
    }

    /// Rebuilds the snapshot the origin described, taking its tables from `tables` (the
    /// worker's open tables; what is not there is opened from its object store and kept).
    pub fn rebuild(&self, tables: &TableCache) -> Result<SnapAccess, OffloadError> {
        SnapAccess::from_remote_cached(&self.changeset, &self.memtable_data, tables)
            .map_err(OffloadError::from_rebuild)
    }
}

/// What [`execute`] produced.
#[derive(Debug)]
pub struct Executed {
    /// The handler's response, `cache_last_version` cleared.
    pub response: Response,
    /// Time spent rebuilding the snapshot (opening files included; also recorded in
    /// `stratus_worker_snapshot_rebuild_seconds`).
    pub rebuild: Duration,
}

/// Decodes `body`, rebuilds its snapshot and runs its request: the whole of `POST
/// /coprocessor` but the HTTP, the TopN paging and the limiter. Blocking.
pub fn execute(body: &Bytes, tables: &TableCache) -> Result<Executed, OffloadError> {
    Offload::decode(body)?.execute(tables)
}

impl Offload {
    /// Rebuilds the snapshot and runs the request on it. Blocking.
    ///
    /// The response's `cache_last_version` is 0: a rebuilt snapshot has no data version of its
    /// own, so the worker never vouches for one (the server fills in the version it shipped).
    /// Everything else, exec details included, is the handler's.
    pub fn execute(&self, tables: &TableCache) -> Result<Executed, OffloadError> {
        let t0 = Instant::now();
        let snap = self.rebuild(tables);
        let rebuild = t0.elapsed();
        // Failed rebuilds count too: a slow failing store is what this histogram must show.
        crate::metrics::SNAPSHOT_REBUILD_SECONDS.observe(rebuild.as_secs_f64());
        let snap = snap?;
        let handled = cop::handler::handle_shipped(&self.request, &snap, &HandlerOptions::worker());
        // The tables stay open in the worker's cache; the pages this request made resident
        // need not (`kvengine::TableCache`).
        snap.release_pages();
        // A v4 block found corrupt by the execution is the body's fault, as at the rebuild.
        let mut response = handled.map_err(OffloadError::Snapshot)?;
        response.cache_last_version = 0;
        Ok(Executed { response, rebuild })
    }
}
