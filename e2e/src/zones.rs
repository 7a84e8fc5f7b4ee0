//! Zones and the delegate path: zone labels on server and worker configs, a server offloading
//! to several zoned workers, and coprocessor requests sent to a worker's
//! `POST /delegate/coprocessor` on behalf of the server owning the region.

use std::collections::BTreeMap;

use prost::Message;
use wire::coprocessor::{Request, Response};
use wire::delegate::REGION_SERVER_HEADER;

use server::config::WorkerEndpoint;
use types::ReadableSize;

use crate::server_proc::{ServerProc, ServerSetup};
use crate::worker_proc::{WorkerProc, WorkerSetup};

/// Labels holding one `zone`.
pub fn zone_labels(zone: &str) -> BTreeMap<String, String> {
    [("zone".to_string(), zone.to_string())].into()
}

/// Sets the server's `zone` label.
pub fn server_zone(cfg: &mut ServerSetup, zone: &str) {
    cfg.server.labels = zone_labels(zone);
}

/// Sets the worker's `zone` label.
pub fn worker_zone(cfg: &mut WorkerSetup, zone: &str) {
    cfg.worker.labels = zone_labels(zone);
}

/// Offload every coprocessor request (threshold 0) to `workers` (`remote-coprocessor-workers`,
/// each with its zone).
pub fn offload_all_to_workers(cfg: &mut ServerSetup, workers: &[(&WorkerProc, &str)]) {
    cfg.kvengine.remote_coprocessor_workers = workers
        .iter()
        .map(|(w, zone)| WorkerEndpoint {
            addr: w.coprocessor_url(),
            zone: types::Zone::label(*zone),
        })
        .collect();
    cfg.kvengine.remote_coprocessor_min_blocks_size = ReadableSize(0);
}

/// The status and body of one HTTP answer.
#[derive(Debug, Clone)]
pub struct RawReply {
    pub status: u16,
    pub body: Vec<u8>,
}

/// POSTs `body` to `worker`'s delegate endpoint with the region server header set to
/// `server` (or without it), whatever the answer.
pub fn post_delegate_raw(worker: &WorkerProc, server: Option<&str>, body: &[u8]) -> RawReply {
    let url = format!(
        "{}{}",
        worker.base_url().trim_end_matches('/'),
        wire::paths::DELEGATE_COPROCESSOR
    );
    let headers: Vec<(&str, &str)> = server
        .map(|s| (REGION_SERVER_HEADER, s))
        .into_iter()
        .collect();
    let reply = crate::http_client::try_post_with_headers(&url, body.to_vec(), &headers)
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    RawReply {
        status: reply.status.as_u16(),
        body: reply.body.to_vec(),
    }
}

/// Sends `req` (routed to a region of `server`) through `worker`'s delegate endpoint,
/// expecting 200 and a cop response.
pub fn delegate(worker: &WorkerProc, server: &ServerProc, req: &Request) -> Response {
    let reply = post_delegate_raw(worker, Some(server.base_url()), &req.encode_to_vec());
    assert_eq!(
        reply.status,
        200,
        "POST /delegate/coprocessor: {}\n{}",
        String::from_utf8_lossy(&reply.body),
        worker.output_report()
    );
    Response::decode(reply.body.as_slice()).expect("a cop response")
}

/// `stratus_server_delegate_bytes_total{zone_relation}`.
pub fn server_delegate_bytes(server: &ServerProc, relation: &str) -> f64 {
    server.metric(
        "stratus_server_delegate_bytes_total",
        &[("zone_relation", relation)],
    )
}

/// `stratus_worker_delegate_bytes_total{zone_relation}`.
pub fn worker_delegate_bytes(worker: &WorkerProc, relation: &str) -> f64 {
    worker.metric(
        "stratus_worker_delegate_bytes_total",
        &[("zone_relation", relation)],
    )
}

/// `stratus_server_offload_dispatches_total{zone_relation}`.
pub fn dispatches(server: &ServerProc, relation: &str) -> f64 {
    server.metric(
        "stratus_server_offload_dispatches_total",
        &[("zone_relation", relation)],
    )
}

/// `stratus_worker_delegate_bytes_total{zone_relation}` summed over `workers`.
pub fn workers_delegate_bytes(workers: &[WorkerProc], relation: &str) -> f64 {
    workers
        .iter()
        .map(|w| worker_delegate_bytes(w, relation))
        .sum()
}
