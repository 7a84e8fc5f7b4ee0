//! Offload bodies sent to a real worker directly: captured from a server of this build on their
//! way to a fake worker, decoded, changed (as an older server would have sent them, another
//! keyspace, a deadline), and posted to a `stratus-worker`.

use bytes::Bytes;
use harness::http::HttpReply;
use prost::Message;
use wire::coprocessor::{Request, Response};

use crate::cluster::Cluster;
use crate::fake_worker::FakeWorker;
use crate::server_proc::{ServerProc, ServerSetup};
use crate::worker_proc::WorkerProc;

/// The three sections of an offload body, the request decoded.
#[derive(Clone, Debug)]
pub struct OffloadBody {
    pub request: Request,
    pub memtable_data: Bytes,
    pub changeset: Bytes,
}

impl OffloadBody {
    pub fn decode(body: &[u8]) -> OffloadBody {
        let sections = wire::offload::decode(&Bytes::copy_from_slice(body))
            .unwrap_or_else(|e| panic!("not an offload body: {e}"));
        OffloadBody {
            request: Request::decode(sections.request.as_ref()).expect("a cop request"),
            memtable_data: sections.memtable_data,
            changeset: sections.changeset,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        wire::offload::encode(
            &self.request.encode_to_vec(),
            &self.memtable_data,
            &self.changeset,
        )
    }

    /// The same body with `change` applied to its request.
    pub fn with_request(&self, change: impl FnOnce(&mut Request)) -> OffloadBody {
        let mut body = self.clone();
        change(&mut body.request);
        body
    }
}

/// A server that offloads every coprocessor request to a fake worker answering 503, without
/// retrying, so it answers every request locally: its answers are local execution, and the
/// fake worker keeps the bodies it tried to send. The server's files stay in the store as long
/// as nothing is written (no flush, no compaction), so a captured body can be sent to a real
/// worker on the same store afterwards.
pub struct BodyCapture {
    pub server: ServerProc,
    pub fake: FakeWorker,
}

impl BodyCapture {
    /// A server in `cluster/name`; `tweak` adjusts its config after the offload settings.
    pub fn start(cluster: &Cluster, name: &str, tweak: impl FnOnce(&mut ServerSetup)) -> Self {
        let fake = FakeWorker::start(503, b"capturing");
        let mut cfg = cluster.server_config(name);
        cfg.offload_all_to(&fake.coprocessor_url());
        cfg.kvengine.remote_coprocessor_max_retries = 0;
        tweak(&mut cfg);
        let server = ServerProc::start(&cfg);
        BodyCapture { server, fake }
    }

    /// Sends `req` (routed, with context) to the server: its local answer and the body it
    /// tried to offload.
    pub fn capture(&self, req: &Request) -> (Response, OffloadBody) {
        let before = self.fake.count();
        let resp = self.server.coprocessor(req);
        let received = self.fake.received();
        assert_eq!(
            received.len(),
            before + 1,
            "the server offloaded the request once: exec details {:?}",
            resp.exec_details
        );
        let body = OffloadBody::decode(&received[before].body);
        (resp, body)
    }
}

/// Posts `body` to `worker`.
pub fn post(worker: &WorkerProc, body: &OffloadBody) -> HttpReply {
    worker.post_coprocessor(body.encode())
}

/// Posts `body`, expecting 200: the decoded response.
pub fn run(worker: &WorkerProc, body: &OffloadBody) -> Response {
    let reply = post(worker, body);
    assert_eq!(
        reply.status.as_u16(),
        200,
        "worker answered {}: {}",
        reply.status,
        String::from_utf8_lossy(&reply.body)
    );
    Response::decode(reply.body.as_ref()).expect("a cop response")
}

/// Posts `body` page after page, each time asking for what the previous page's `range` left
/// (as the client does with the ranges the server forwards), until a page has no range: every
/// response, in order.
pub fn run_pages(worker: &WorkerProc, body: &OffloadBody, desc: bool) -> Vec<Response> {
    let mut out = Vec::new();
    let mut body = body.clone();
    loop {
        let resp = run(worker, &body);
        crate::coprocessor::assert_answered(&resp, "worker page");
        let next = resp.range.clone();
        out.push(resp);
        let Some(scanned) = next else { break };
        body.request.ranges = wire::paging::remaining_ranges(&body.request.ranges, &scanned, desc);
        assert!(
            out.len() < 10_000,
            "paging does not terminate: last scanned range {scanned:?}"
        );
        if body.request.ranges.is_empty() {
            break;
        }
    }
    out
}
