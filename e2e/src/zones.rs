//! Zones and the delegate path: zone labels on server and worker configs, a server offloading
//! to several zoned workers, and coprocessor requests sent to a worker's
//! `POST /delegate/coprocessor` on behalf of the server owning the region.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use cop::proto::{Request, Response};
use kvproto::delegate::REGION_SERVER_HEADER;
use prost::Message;

use crate::server_proc::{ServerConfig, ServerProc};
use crate::worker_proc::{WorkerConfig, WorkerProc};

fn zone_labels(zone: &str) -> toml::Table {
    let mut labels = toml::Table::new();
    labels.insert("zone".into(), zone.into());
    labels
}

/// Sets the server's `zone` label.
pub fn server_zone(cfg: &mut ServerConfig, zone: &str) {
    cfg.set("server", "labels", zone_labels(zone));
}

/// Sets the worker's `zone` label.
pub fn worker_zone(cfg: &mut WorkerConfig, zone: &str) {
    cfg.set("worker", "labels", zone_labels(zone));
}

/// Offload every coprocessor request (threshold 0) to `workers` (`remote-coprocessor-workers`,
/// each with its zone).
pub fn offload_all_to_workers(cfg: &mut ServerConfig, workers: &[(&WorkerProc, &str)]) {
    let list: Vec<toml::Value> = workers
        .iter()
        .map(|(w, zone)| {
            let mut t = toml::Table::new();
            t.insert("addr".into(), w.coprocessor_url().into());
            t.insert("zone".into(), (*zone).into());
            t.into()
        })
        .collect();
    cfg.set("kvengine", "remote-coprocessor-workers", list).set(
        "kvengine",
        "remote-coprocessor-min-blocks-size",
        0,
    );
}

/// The status and body of one HTTP answer.
#[derive(Debug, Clone)]
pub struct RawReply {
    pub status: u16,
    pub body: Vec<u8>,
}

/// POSTs `body` to `path` on `worker` with the region server header set to `server` (any
/// string: tests send bad ones), over a fresh HTTP/1.1 connection.
pub fn post_delegate_raw(worker: &WorkerProc, server: Option<&str>, body: &[u8]) -> RawReply {
    let host = worker
        .base_url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut stream = TcpStream::connect(&host).unwrap_or_else(|e| panic!("connect {host}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("read timeout");
    let mut head = format!(
        "POST {} HTTP/1.1\r\nhost: {host}\r\ncontent-type: {}\r\ncontent-length: {}\r\nconnection: close\r\n",
        kvproto::paths::DELEGATE_COPROCESSOR,
        kvproto::PROTOBUF_CONTENT_TYPE,
        body.len()
    );
    if let Some(server) = server {
        head.push_str(&format!("{REGION_SERVER_HEADER}: {server}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("write head");
    stream.write_all(body).expect("write body");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read answer");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let mut body = raw[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    RawReply { status, body }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&data[..line_end])
                .split(';')
                .next()
                .unwrap()
                .trim(),
            16,
        )
        .expect("chunk size");
        data = &data[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
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
