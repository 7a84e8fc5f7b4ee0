//! `POST /delegate`: the server's half of the delegate path ("first way"). A worker that a
//! client sent a coprocessor request to asks the server owning the region for what a read
//! needs; the server runs the checks it runs before an offload and answers a
//! [`DelegateResponse`] (`wire::delegate` documents the fields):
//!
//! 1. region and epoch, memory locks (raising max_ts), the snapshot, the request's own checks
//!    ([`Coprocessor::checked_snapshot`], as for `POST /coprocessor`): a region error or
//!    `locked` is the answer;
//! 2. the LOCK CF scan and the snapshot description ([`crate::remote_snapshot::ship`], as
//!    before an offload): a blocking lock answers `locked`; otherwise the memtable rows, the
//!    ChangeSet, the origin's data version and the cacheability evidence (newer versions left
//!    out, non-blocking locks seen). The memtable rows are in the newest format the worker
//!    said it reads (`DelegateRequest.memtable_data_format`; absent = format 1) and this
//!    server writes (`remote-coprocessor-memtable-data-format`).
//!
//! The cache fields of the request are ignored: a delegate answer is never a cache hit. The
//! snapshot is not kept alive past the answer, so a compaction may delete a listed file
//! before the worker opens it; the worker then fails (502) and the client retries.

use changeset::MemtableDataFormat;
use types::Zone;
use wire::coprocessor::Request;
use wire::delegate::{DelegateRequest, DelegateResponse};

use crate::coprocessor::Coprocessor;
use crate::remote_snapshot::{ShipError, ship};

/// Answers `req` for a server in `server_zone` that writes memtable data up to `max_format`
/// (see the module docs). The rows go in the newest format both sides read. Blocking.
pub fn answer(
    cop: &Coprocessor,
    req: &DelegateRequest,
    server_zone: Option<&Zone>,
    max_format: MemtableDataFormat,
) -> DelegateResponse {
    let format = MemtableDataFormat::agreed(req.memtable_data_format).min(max_format);
    let mut resp = match &req.request {
        Some(request) => snapshot_answer(cop, request, format),
        None => DelegateResponse {
            other_error: "delegate request without a coprocessor request: expected field 1".into(),
            ..DelegateResponse::default()
        },
    };
    resp.server_zone = types::zone::label(server_zone).to_string();
    resp
}

fn snapshot_answer(
    cop: &Coprocessor,
    req: &Request,
    format: MemtableDataFormat,
) -> DelegateResponse {
    let snap = match cop.checked_snapshot(req) {
        Ok(snap) => snap,
        Err(refused) => {
            let refused = *refused;
            return DelegateResponse {
                region_error: refused.region_error,
                locked: refused.locked,
                other_error: refused.other_error,
                ..DelegateResponse::default()
            };
        }
    };
    match ship(req, &snap, format) {
        Ok(shipment) => DelegateResponse {
            memtable_data: shipment.memtable_data,
            changeset: shipment.changeset.into(),
            data_version: shipment.data_version,
            newer_versions_seen: shipment.newer_versions_seen,
            locks_seen: shipment.locks_seen,
            ..DelegateResponse::default()
        },
        Err(ShipError::Locked(lock)) => DelegateResponse {
            locked: Some(cop::handler::lock_info(&lock)),
            ..DelegateResponse::default()
        },
        Err(ShipError::Failed(detail)) => DelegateResponse {
            other_error: detail,
            ..DelegateResponse::default()
        },
    }
}
