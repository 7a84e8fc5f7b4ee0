//! What the fuzz targets that send request bodies through a node's own router share (the
//! server's `server_request`, the placement driver's `pd_request`): the endpoint table a
//! selector byte picks from, the in-process request, and the check every answer must pass.
//!
//! The check, whatever the body:
//!
//! * no handler panics or fails (a panicked task is a 500);
//! * a body that does not decode as the endpoint's request is refused (400);
//! * a body that decodes is answered 200 with a response that decodes, refusals travelling
//!   inside the answer, except on an endpoint that judges a request's content
//!   ([`Endpoint::judging_content`]): there a decodable body may also be refused (400), with a
//!   reason other than the decode error.

use axum::Router;
use axum::body::Body;
use axum::http::{Method, StatusCode};
use prost::Message;
use tower_service::Service;

/// One endpoint of a target: its path, and whether a body decodes as its request and an
/// answer as its response.
pub struct Endpoint {
    pub path: &'static str,
    accepts: fn(&[u8]) -> bool,
    answer_decodes: fn(&[u8]) -> bool,
    judges_content: bool,
}

impl Endpoint {
    pub const fn new(
        path: &'static str,
        accepts: fn(&[u8]) -> bool,
        answer_decodes: fn(&[u8]) -> bool,
    ) -> Endpoint {
        Endpoint {
            path,
            accepts,
            answer_decodes,
            judges_content: false,
        }
    }

    /// The handler refuses (400) some bodies that decode, for what they say (and the target
    /// does not repeat its rules to predict which).
    pub const fn judging_content(self) -> Endpoint {
        Endpoint {
            judges_content: true,
            ..self
        }
    }

    /// Whether `body` decodes as this endpoint's request (with valid enumerations where the
    /// handler checks them).
    pub fn accepts(&self, body: &[u8]) -> bool {
        (self.accepts)(body)
    }

    /// Panics, as a fuzz target must, when the answer (`status`, `answer`) to `body` breaks
    /// the rules of the module docs.
    pub fn check_answer(&self, body: &[u8], status: StatusCode, answer: &[u8]) {
        let path = self.path;
        let text = String::from_utf8_lossy(answer);
        assert_ne!(
            status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{path}: the handler failed: {text}"
        );
        // What `crate::http::decode_proto` answers for a body that does not decode.
        let decode_refusal = text.starts_with("expected a protobuf");
        if !self.accepts(body) {
            assert_eq!(
                status,
                StatusCode::BAD_REQUEST,
                "{path}: a body that does not decode is refused: {text}"
            );
        } else if status == StatusCode::BAD_REQUEST && self.judges_content {
            assert!(
                !text.trim().is_empty() && !decode_refusal,
                "{path}: a decodable body refused for its content says why: {text}"
            );
        } else {
            assert_eq!(
                status,
                StatusCode::OK,
                "{path}: a body that decodes is answered: {text}"
            );
            assert!(
                (self.answer_decodes)(answer),
                "{path}: the answer decodes as the endpoint's response"
            );
        }
    }
}

/// Whether `body` decodes as `M` and re-encodes to a message that decodes the same.
pub fn decodes<M: Message + Default + PartialEq + std::fmt::Debug>(body: &[u8]) -> bool {
    wire::fuzzing::round_trip::<M>(body).is_some()
}

/// A target's input: a selector byte choosing one of `endpoints` (modulo their number), then
/// the body. `None` for the empty input.
pub fn selected<'d>(
    endpoints: &'static [Endpoint],
    data: &'d [u8],
) -> Option<(&'static Endpoint, &'d [u8])> {
    let (&which, body) = data.split_first()?;
    Some((&endpoints[usize::from(which) % endpoints.len()], body))
}

/// The selector byte of `path` among `endpoints`, for seeds.
pub fn selector(endpoints: &[Endpoint], path: &str) -> u8 {
    let i = endpoints
        .iter()
        .position(|e| e.path == path)
        .expect("a fuzzed endpoint");
    u8::try_from(i).expect("fewer than 256 endpoints")
}

/// The endpoint of `path` among `endpoints`; panics for a path the target does not fuzz.
pub fn endpoint<'e>(endpoints: &'e [Endpoint], path: &str) -> &'e Endpoint {
    endpoints
        .iter()
        .find(|e| e.path == path)
        .unwrap_or_else(|| panic!("not a fuzzed endpoint: {path}"))
}

/// Checks that `seeds` (`(name, selector byte + body)`) reach every one of `endpoints`, and
/// returns the names of those whose body the endpoint does not accept (the seeds meant to be
/// refused), in order.
pub fn refused_seeds<'s>(
    endpoints: &'static [Endpoint],
    seeds: &'s [(String, Vec<u8>)],
) -> Vec<&'s str> {
    for e in endpoints {
        assert!(
            seeds
                .iter()
                .any(|(_, data)| selected(endpoints, data).is_some_and(|(s, _)| s.path == e.path)),
            "no seed for {}",
            e.path
        );
    }
    seeds
        .iter()
        .filter(|(_, data)| selected(endpoints, data).is_some_and(|(e, body)| !e.accepts(body)))
        .map(|(name, _)| name.as_str())
        .collect()
}

/// One request through `router` on `runtime`, in process: the status and the answer's bytes.
pub fn call(
    runtime: &tokio::runtime::Runtime,
    router: &Router,
    method: Method,
    path: &str,
    body: &[u8],
) -> (StatusCode, Vec<u8>) {
    let request = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header(
            axum::http::header::CONTENT_TYPE,
            wire::PROTOBUF_CONTENT_TYPE,
        )
        .body(Body::from(body.to_vec()))
        .expect("a request with a static path builds");
    let mut router = router.clone();
    runtime.block_on(async move {
        let response = match router.call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("an in-process answer is read whole");
        (status, bytes.to_vec())
    })
}
