//! A blocking HTTP client for tests: `node::HttpClient` on a runtime this module owns.

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use node::{HttpClient, HttpReply};
use prost::Message;

/// Per-call timeout: generous, a test that hangs fails here instead of at the suite's limit.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("e2e-http")
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

fn client() -> &'static HttpClient {
    static CLIENT: OnceLock<HttpClient> = OnceLock::new();
    CLIENT.get_or_init(|| HttpClient::new(1 << 30))
}

/// POSTs `body`; transport errors are `Err` (a test may expect them, e.g. a killed process).
pub fn try_post(url: &str, body: impl Into<Bytes>) -> Result<HttpReply, node::ClientError> {
    let body = body.into();
    runtime().block_on(client().post(url, body, CALL_TIMEOUT))
}

/// POSTs `body` with extra `headers`; transport errors are `Err`.
pub fn try_post_with_headers(
    url: &str,
    body: impl Into<Bytes>,
    headers: &[(&str, &str)],
) -> Result<HttpReply, node::ClientError> {
    let body = body.into();
    runtime().block_on(client().post_with_headers(url, body, headers, CALL_TIMEOUT))
}

pub fn post(url: &str, body: impl Into<Bytes>) -> HttpReply {
    try_post(url, body).unwrap_or_else(|e| panic!("POST {url}: {e}"))
}

pub fn try_get(url: &str) -> Result<HttpReply, node::ClientError> {
    runtime().block_on(client().get(url, CALL_TIMEOUT))
}

pub fn get(url: &str) -> HttpReply {
    try_get(url).unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

/// GET, expecting 200; the body as text.
pub fn get_text(url: &str) -> String {
    let reply = get(url);
    assert_eq!(
        reply.status.as_u16(),
        200,
        "GET {url}: {}",
        String::from_utf8_lossy(&reply.body)
    );
    String::from_utf8_lossy(&reply.body).into_owned()
}

/// POSTs a protobuf message, expecting 200 and a `Resp` body.
pub fn post_proto<Req: Message, Resp: Message + Default>(url: &str, req: &Req) -> Resp {
    let reply = post(url, req.encode_to_vec());
    assert_eq!(
        reply.status.as_u16(),
        200,
        "POST {url}: {}",
        String::from_utf8_lossy(&reply.body)
    );
    Resp::decode(reply.body.as_ref())
        .unwrap_or_else(|e| panic!("POST {url}: the 200 body does not decode: {e}"))
}
