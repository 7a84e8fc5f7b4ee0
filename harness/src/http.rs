//! The one blocking HTTP client of the harness: `stratus up`, `demo` and `bench` read a node's
//! `/status`, `/metrics` and `/regions` and ask it to flush with it, and the end-to-end tests
//! make every call of theirs with it (protobuf bodies, headers, raw replies).
//!
//! It is the nodes' own client ([`node::HttpClient`]: hyper, pooled connections, a timeout
//! per call, a cap on the body) run on a small runtime this module owns. Callers are plain
//! threads, and some of them are already inside another Tokio runtime (a test driving the entry
//! node's client, `stratus demo` between two `block_on`s), where starting or blocking on a
//! runtime panics. So a call is spawned on the private runtime and the caller waits on a
//! standard channel, which is safe from any thread: at worst it blocks that thread for the
//! call's timeout, as any blocking client would.

use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use node::HttpClient;
pub use node::{ClientError, HttpReply};

/// A generous per-call timeout: a call to a hung node fails here instead of hanging its caller.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Largest answer accepted (a `/metrics` page or a region's rows in a test).
const MAX_RESPONSE_BYTES: usize = 1 << 30;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The call did not get an answer (connection refused, timeout, bad URL, body too large).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// An answer, but not the 200 the caller expected.
    #[error("{method} {url}: expected status 200, found {status}: {body}")]
    Status {
        method: &'static str,
        url: String,
        status: u16,
        body: String,
    },
    #[error("cannot start the runtime of the blocking http client: cause={cause}")]
    Runtime { cause: String },
    #[error("cannot load this process's TLS identity: {cause}")]
    Identity { cause: String },
    #[error("the call was dropped before it answered: method={method} url={url}")]
    Dropped { method: &'static str, url: String },
}

struct Caller {
    rt: tokio::runtime::Runtime,
    client: HttpClient,
    /// The client of https URLs once [`use_identity`] gave this process a certificate.
    identity: std::sync::RwLock<Option<HttpClient>>,
}

/// Makes every later call to an https URL from this process show the certificate of
/// `security` (and trust only its CA): a TLS cluster's supervisor and tests call its nodes
/// as an admin or a client. http URLs keep the plain client.
pub fn use_identity(security: &node::tls::SecurityConfig) -> Result<(), HttpError> {
    let tls = security
        .load()
        .map_err(|e| HttpError::Identity {
            cause: node::error_chain(&e),
        })?
        .ok_or_else(|| HttpError::Identity {
            cause: "expected [security] paths, found none".into(),
        })?;
    let caller = caller()?;
    let client = HttpClient::with_tls(MAX_RESPONSE_BYTES, Some(&tls));
    *caller
        .identity
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(client);
    Ok(())
}

fn caller() -> Result<&'static Caller, HttpError> {
    static CALLER: OnceLock<Result<Caller, String>> = OnceLock::new();
    CALLER
        .get_or_init(|| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("harness-http")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            Ok(Caller {
                rt,
                client: HttpClient::new(MAX_RESPONSE_BYTES),
                identity: std::sync::RwLock::new(None),
            })
        })
        .as_ref()
        .map_err(|cause| HttpError::Runtime {
            cause: cause.clone(),
        })
}

#[derive(Clone, Copy)]
enum Method {
    Get,
    Post,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
        }
    }
}

fn call(
    method: Method,
    url: &str,
    body: Bytes,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<HttpReply, HttpError> {
    let caller = caller()?;
    let (tx, rx) = mpsc::sync_channel(1);
    let owned_url = url.to_string();
    let owned_headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let identity = url
        .starts_with("https://")
        .then(|| {
            caller
                .identity
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        })
        .flatten();
    let client = identity.unwrap_or_else(|| caller.client.clone());
    caller.rt.spawn(async move {
        let headers: Vec<(&str, &str)> = owned_headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let reply = match method {
            Method::Get => client.get(&owned_url, timeout).await,
            Method::Post => {
                client
                    .post_with_headers(&owned_url, body, &headers, timeout)
                    .await
            }
        };
        let _ = tx.send(reply);
    });
    let reply = rx.recv().map_err(|_| HttpError::Dropped {
        method: method.as_str(),
        url: url.to_string(),
    })?;
    Ok(reply?)
}

/// `GET url`, whatever the status.
pub fn get(url: &str, timeout: Duration) -> Result<HttpReply, HttpError> {
    call(Method::Get, url, Bytes::new(), &[], timeout)
}

/// `POST url` with `body`, whatever the status.
pub fn post(url: &str, body: impl Into<Bytes>, timeout: Duration) -> Result<HttpReply, HttpError> {
    call(Method::Post, url, body.into(), &[], timeout)
}

/// [`post`] with extra request headers (`name`, `value`).
pub fn post_with_headers(
    url: &str,
    body: impl Into<Bytes>,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<HttpReply, HttpError> {
    call(Method::Post, url, body.into(), headers, timeout)
}

/// `GET url`, expecting 200.
pub fn get_ok(url: &str, timeout: Duration) -> Result<HttpReply, HttpError> {
    expect_ok(Method::Get, url, get(url, timeout)?)
}

/// `POST url` with `body`, expecting 200.
pub fn post_ok(
    url: &str,
    body: impl Into<Bytes>,
    timeout: Duration,
) -> Result<HttpReply, HttpError> {
    expect_ok(Method::Post, url, post(url, body, timeout)?)
}

/// The text of a reply's body (invalid UTF-8 replaced).
pub fn text(reply: &HttpReply) -> String {
    String::from_utf8_lossy(&reply.body).into_owned()
}

fn expect_ok(method: Method, url: &str, reply: HttpReply) -> Result<HttpReply, HttpError> {
    if reply.status.as_u16() == 200 {
        return Ok(reply);
    }
    Err(HttpError::Status {
        method: method.as_str(),
        url: url.to_string(),
        status: reply.status.as_u16(),
        body: text(&reply).trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A one-shot server answering `answer` to the first connection; the request it read.
    fn serve_once(answer: &'static str) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
            }
            conn.write_all(answer.as_bytes()).unwrap();
            String::from_utf8_lossy(&request).into_owned()
        });
        (url, handle)
    }

    #[test]
    fn a_call_from_inside_another_runtime_does_not_panic() {
        let (url, server) =
            serve_once("HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let reply = rt.block_on(async { get_ok(&format!("{url}/status"), DEFAULT_TIMEOUT) });
        assert_eq!(text(&reply.unwrap()), "hello");
        assert!(server.join().unwrap().starts_with("GET /status HTTP/1.1"));
    }

    #[test]
    fn a_status_other_than_200_is_an_error_naming_the_call() {
        let (url, server) = serve_once(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\nconnection: close\r\n\r\nbusy",
        );
        let e = post_ok(&format!("{url}/admin/flush"), Vec::new(), DEFAULT_TIMEOUT).unwrap_err();
        assert!(
            matches!(&e, HttpError::Status { status: 503, body, .. } if body == "busy"),
            "{e}"
        );
        assert!(e.to_string().contains("POST http://"), "{e}");
        server.join().unwrap();
    }

    #[test]
    fn headers_are_sent() {
        let (url, server) =
            serve_once("HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        post_with_headers(&url, b"x".to_vec(), &[("x-test", "yes")], DEFAULT_TIMEOUT).unwrap();
        assert!(server.join().unwrap().contains("x-test: yes"));
    }

    #[test]
    fn a_refused_connection_is_a_client_error() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = get(&format!("http://127.0.0.1:{port}/"), DEFAULT_TIMEOUT).unwrap_err();
        assert!(matches!(e, HttpError::Client(_)), "{e}");
    }
}
