//! The tests' HTTP calls: [`harness::http`] (the harness's one blocking client) with the
//! assertions tests make on every call, so that a test reads as what it checks.

use bytes::Bytes;
use harness::http::{self, HttpError, HttpReply};
use prost::Message;

/// Per-call timeout: generous, a test that hangs fails here instead of at the suite's limit.
pub const CALL_TIMEOUT: std::time::Duration = http::DEFAULT_TIMEOUT;

/// POSTs `body`; transport errors are `Err` (a test may expect them, e.g. a killed process).
pub fn try_post(url: &str, body: impl Into<Bytes>) -> Result<HttpReply, HttpError> {
    http::post(url, body, CALL_TIMEOUT)
}

/// POSTs `body` with extra `headers`; transport errors are `Err`.
pub fn try_post_with_headers(
    url: &str,
    body: impl Into<Bytes>,
    headers: &[(&str, &str)],
) -> Result<HttpReply, HttpError> {
    http::post_with_headers(url, body, headers, CALL_TIMEOUT)
}

pub fn post(url: &str, body: impl Into<Bytes>) -> HttpReply {
    try_post(url, body).unwrap_or_else(|e| panic!("POST {url}: {e}"))
}

pub fn try_get(url: &str) -> Result<HttpReply, HttpError> {
    http::get(url, CALL_TIMEOUT)
}

pub fn get(url: &str) -> HttpReply {
    try_get(url).unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

/// GET, expecting 200; the body as text.
pub fn get_text(url: &str) -> String {
    let reply = http::get_ok(url, CALL_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    http::text(&reply)
}

/// POSTs a protobuf message, expecting 200 and a `Resp` body.
pub fn post_proto<Req: Message, Resp: Message + Default>(url: &str, req: &Req) -> Resp {
    let reply =
        http::post_ok(url, req.encode_to_vec(), CALL_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    Resp::decode(reply.body.as_ref())
        .unwrap_or_else(|e| panic!("POST {url}: the 200 body does not decode: {e}"))
}
