//! The delegate path ("first way"): a client sends a plain cop request to a worker's
//! `POST /delegate/coprocessor`; the worker asks the server owning the region for what a read
//! needs (`POST /delegate` with a [`DelegateRequest`]), rebuilds the snapshot from the
//! [`DelegateResponse`] and executes the request itself.
//!
//! Field layout (protobuf; a tag is never renumbered or reused):
//!
//! ```text
//! DelegateRequest                          worker → server, POST /delegate
//!   1 request       coprocessor::Request   region context (id, ver), ranges, start_ts, DAG
//!   2 worker_zone   string                 the asking worker's `zone` label ("" = none)
//!   3 memtable_data_format uint32          the newest memtable-data format the worker reads
//!                                          (0 = not sent: a worker from before v2, which
//!                                          reads format 1)
//!
//! DelegateResponse                         server → worker
//!   1 region_error  coprocessor::RegionError  set: nothing else is (the client refreshes)
//!   2 locked        coprocessor::LockInfo     set: a lock blocks the read (the client resolves)
//!   3 other_error   string                    set: the server failed (or the request is bad)
//!   4 memtable_data bytes    the memtable WRITE rows a read at start_ts needs, in the layout
//!                            of `changeset::memtable_data` (the offload body's second section),
//!                            in the newest format both the worker and the server read
//!   5 changeset     bytes    the snapshot ChangeSet (protobuf, the offload body's third section)
//!   6 data_version  uint64   the origin snapshot's data version (`cache_last_version`)
//!   7 newer_versions_seen bool  memtable versions newer than start_ts were left out
//!   8 locks_seen    bool     non-blocking locks sit in the ranges
//!   9 server_zone   string   the answering server's `zone` label ("" = none)
//! ```
//!
//! The server runs the same checks as before an offload (region and epoch, memory locks, the
//! request's own checks, the LOCK CF scan), so a response with none of fields 1–3 set is a
//! snapshot the worker may execute on. Fields 7 and 8 are the cacheability evidence: either
//! makes the worker's result uncacheable, as on the offload path. The server never answers a
//! cache hit here, and neither does the worker.

use bytes::Bytes;
use prost::Message;
use types::Zone;

/// `POST /delegate` (server): what a worker asks the owning server for.
#[derive(Clone, PartialEq, Message)]
pub struct DelegateRequest {
    /// The client's request; its cache fields are ignored.
    #[prost(message, optional, tag = "1")]
    pub request: Option<crate::coprocessor::Request>,
    /// The worker's zone, so the server can count bytes that cross zones.
    #[prost(string, tag = "2")]
    pub worker_zone: String,
    /// The newest memtable-data format the worker reads (0: not sent, format 1).
    #[prost(uint32, tag = "3")]
    pub memtable_data_format: u32,
}

/// The server's answer to a [`DelegateRequest`] (see the module docs for the fields).
#[derive(Clone, PartialEq, Message)]
pub struct DelegateResponse {
    #[prost(message, optional, tag = "1")]
    pub region_error: Option<crate::coprocessor::RegionError>,
    #[prost(message, optional, tag = "2")]
    pub locked: Option<crate::coprocessor::LockInfo>,
    #[prost(string, tag = "3")]
    pub other_error: String,
    #[prost(bytes = "bytes", tag = "4")]
    pub memtable_data: Bytes,
    #[prost(bytes = "bytes", tag = "5")]
    pub changeset: Bytes,
    #[prost(uint64, tag = "6")]
    pub data_version: u64,
    #[prost(bool, tag = "7")]
    pub newer_versions_seen: bool,
    #[prost(bool, tag = "8")]
    pub locks_seen: bool,
    #[prost(string, tag = "9")]
    pub server_zone: String,
}

types::label_enum! {
    /// What a [`DelegateResponse`] is, as a metric label
    /// (`stratus_server_delegate_requests_total{result}`).
    pub enum DelegateResult: "delegate result" {
        /// A snapshot the worker may execute on.
        Ok = "ok",
        /// A lock blocks the read.
        Locked = "locked",
        /// The region moved or changed (the client refreshes).
        RegionError = "region_error",
        /// The server failed, or the request is bad.
        Error = "error",
    }
}

impl DelegateRequest {
    /// The asking worker's zone (`None`: it has no zone label).
    pub fn worker_zone(&self) -> Option<Zone> {
        Zone::label(self.worker_zone.as_str())
    }
}

impl DelegateResponse {
    /// Whether the server answered with an error instead of a snapshot.
    pub fn is_error(&self) -> bool {
        self.result() != DelegateResult::Ok
    }

    /// What the answer is: `region_error`, `locked`, `error` or `ok` (the first that
    /// applies).
    pub fn result(&self) -> DelegateResult {
        if self.region_error.is_some() {
            DelegateResult::RegionError
        } else if self.locked.is_some() {
            DelegateResult::Locked
        } else if !self.other_error.is_empty() {
            DelegateResult::Error
        } else {
            DelegateResult::Ok
        }
    }

    /// The answering server's zone (`None`: it has no zone label).
    pub fn server_zone(&self) -> Option<Zone> {
        Zone::label(self.server_zone.as_str())
    }

    /// Whether a result computed from this snapshot must not be cached: the origin saw
    /// versions newer than the read or locks in the ranges.
    pub fn uncacheable(&self) -> bool {
        self.newer_versions_seen || self.locks_seen
    }
}

/// The header of `POST /delegate/coprocessor` (worker) naming the base URL
/// (`http://host:port`) of the server that owns the request's region.
pub const REGION_SERVER_HEADER: &str = "x-stratus-region-server";

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> crate::coprocessor::Request {
        crate::coprocessor::Request {
            context: Some(crate::coprocessor::Context {
                region_id: 7,
                region_ver: 3,
                keyspace_id: 1,
                deadline_ms: 99,
                replica_read: false,
            }),
            tp: crate::coprocessor::REQ_TYPE_DAG,
            data: vec![1, 2, 3],
            start_ts: 42,
            ranges: vec![crate::coprocessor::KeyRange::new(
                b"t1".to_vec(),
                b"t2".to_vec(),
            )],
            is_cache_enabled: true,
            cache_if_match_version: 5,
            paging_size: 128,
        }
    }

    #[test]
    fn a_delegate_request_round_trips() {
        let req = DelegateRequest {
            request: Some(request()),
            worker_zone: "b".into(),
            memtable_data_format: 2,
        };
        let again = DelegateRequest::decode(req.encode_to_vec().as_slice()).unwrap();
        assert_eq!(again, req);
    }

    #[test]
    fn a_snapshot_answer_round_trips_and_is_no_error() {
        let resp = DelegateResponse {
            memtable_data: Bytes::from_static(b"\x01rows"),
            changeset: Bytes::from_static(b"\x08\x01"),
            data_version: 1234,
            newer_versions_seen: true,
            locks_seen: true,
            server_zone: "a".into(),
            ..DelegateResponse::default()
        };
        let again = DelegateResponse::decode(Bytes::from(resp.encode_to_vec())).unwrap();
        assert_eq!(again, resp);
        assert!(!again.is_error());
        assert_eq!(again.result().as_str(), "ok");
    }

    #[test]
    fn error_answers_round_trip_and_are_errors() {
        let answers = [
            DelegateResponse {
                region_error: Some(crate::coprocessor::RegionError {
                    message: "epoch not match".into(),
                    kind: crate::coprocessor::RegionErrorKind::EpochNotMatch as i32,
                    region_id: 7,
                    current_ver: 4,
                    ..Default::default()
                }),
                ..DelegateResponse::default()
            },
            DelegateResponse {
                locked: Some(crate::coprocessor::LockInfo {
                    key: b"k".to_vec(),
                    primary_lock: b"p".to_vec(),
                    lock_version: 40,
                    ..crate::coprocessor::LockInfo::default()
                }),
                ..DelegateResponse::default()
            },
            DelegateResponse {
                other_error: "snapshot failed".into(),
                ..DelegateResponse::default()
            },
        ];
        let mut results = Vec::new();
        for resp in answers {
            let again = DelegateResponse::decode(resp.encode_to_vec().as_slice()).unwrap();
            assert_eq!(again, resp);
            assert!(again.is_error());
            results.push(again.result().as_str());
        }
        assert_eq!(results, ["region_error", "locked", "error"]);
    }

    #[test]
    fn zones_read_back_with_the_empty_label_as_none() {
        let req = DelegateRequest {
            worker_zone: "b".into(),
            ..DelegateRequest::default()
        };
        assert_eq!(req.worker_zone(), Zone::label("b"));
        assert_eq!(DelegateResponse::default().server_zone(), None);
    }
}
