//! The HTTP client processes use to call each other (server → worker offload, server → TSO,
//! client → server): http and https, a per-call timeout, a cap on the response body so a
//! misbehaving peer cannot make the caller allocate without bound. Every exchange is metered
//! ([`crate::traffic`]): the request carries this node's zone header, the body bytes are
//! counted under the peer's zone from the answer's, and the reply says what crossed
//! ([`HttpReply::exchange`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use types::Zone;
use wire::traffic::{Direction, Role, TrafficPath, ZONE_HEADER};

use crate::error_chain;
use crate::tls::Tls;
use crate::traffic::{Exchange, Meter, peer_zone};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// The request did not reach the peer or the connection broke before the answer.
    #[error("request to {url} failed: {reason}")]
    Transport { url: String, reason: String },
    #[error("request to {url} timed out after {after:?}")]
    Timeout { url: String, after: Duration },
    #[error("response from {url} is larger than the limit: expected at most {limit} bytes")]
    BodyTooLarge { url: String, limit: usize },
}

impl ClientError {
    /// Connection failures and timeouts: worth a retry (the peer may be restarting).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ClientError::Transport { .. } | ClientError::Timeout { .. }
        )
    }
}

/// A status and a body, and what the exchange moved.
#[derive(Debug, Clone)]
pub struct HttpReply {
    pub status: StatusCode,
    pub body: Bytes,
    /// The answering node's zone, from its zone header (`None`: it sent none).
    pub peer_zone: Option<Zone>,
    /// The answer's headers (e.g. a worker's memtable-data format,
    /// `wire::offload::MEMTABLE_DATA_FORMAT_HEADER`).
    pub headers: hyper::HeaderMap,
    /// The body bytes both ways, the path they were counted under and whether they crossed
    /// zones.
    pub exchange: Exchange,
}

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// Cheap to clone (connections are pooled and shared).
#[derive(Clone, Debug)]
pub struct HttpClient {
    inner: Client<Connector, Full<Bytes>>,
    max_response_bytes: usize,
    /// Who this client counts traffic as ([`HttpClient::with_meter`]).
    meter: Arc<Meter>,
    /// Sent with every request when set ([`HttpClient::with_admin_token`]).
    admin_token: Option<crate::tls::AdminToken>,
}

impl HttpClient {
    /// A client accepting responses of up to `max_response_bytes`, counting its traffic as an
    /// entry node without a zone until [`HttpClient::with_meter`] says who it is.
    pub fn new(max_response_bytes: usize) -> HttpClient {
        Self::with_tls(max_response_bytes, None)
    }

    /// Like [`HttpClient::new`]; with `tls` (a node's `[security]`) the client speaks https
    /// only, presents the node's certificate and accepts only servers whose certificate chains
    /// to the cluster CA and names the address dialled. Without it, http and https to servers
    /// with public certificates.
    pub fn with_tls(max_response_bytes: usize, tls: Option<&Tls>) -> HttpClient {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(Duration::from_secs(5)));
        let https = match tls {
            Some(tls) => hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls.client_config().as_ref().clone())
                .https_only()
                .enable_http1()
                .wrap_connector(http),
            None => hyper_rustls::HttpsConnectorBuilder::new()
                .with_webpki_roots()
                .https_or_http()
                .enable_http1()
                .wrap_connector(http),
        };
        // Idle connections are dropped before a node's listener would close them
        // (`http.header-read-timeout`, 30 s by default, also bounds a keep-alive connection's
        // wait for its next request), so a request never goes out on one being closed.
        let inner = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(20))
            .build(https);
        HttpClient {
            inner,
            max_response_bytes,
            meter: Arc::new(Meter::unlabelled(Role::Client)),
            admin_token: None,
        }
    }

    /// This client sending `token` (`Authorization: Bearer`) with every request: an admin's
    /// client of nodes whose `security.admin-token-path` holds it.
    pub fn with_admin_token(mut self, token: Option<crate::tls::AdminToken>) -> HttpClient {
        self.admin_token = token;
        self
    }

    /// This client counting its traffic as `meter`'s node (its zone goes out in every
    /// request's zone header).
    pub fn with_meter(mut self, meter: Meter) -> HttpClient {
        self.meter = Arc::new(meter);
        self
    }

    pub fn meter(&self) -> &Meter {
        &self.meter
    }

    pub async fn post(
        &self,
        url: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<HttpReply, ClientError> {
        self.call(Method::POST, url, body, &[], timeout).await
    }

    /// [`HttpClient::post`] with extra request headers (`name`, `value`), e.g. the region
    /// server header of a worker's delegate endpoint. A name or value that is not a valid
    /// header is an [`ClientError::InvalidUrl`] naming the URL.
    pub async fn post_with_headers(
        &self,
        url: &str,
        body: Bytes,
        headers: &[(&str, &str)],
        timeout: Duration,
    ) -> Result<HttpReply, ClientError> {
        self.call(Method::POST, url, body, headers, timeout).await
    }

    pub async fn get(&self, url: &str, timeout: Duration) -> Result<HttpReply, ClientError> {
        self.call(Method::GET, url, Bytes::new(), &[], timeout)
            .await
    }

    async fn call(
        &self,
        method: Method,
        url: &str,
        body: Bytes,
        headers: &[(&str, &str)],
        timeout: Duration,
    ) -> Result<HttpReply, ClientError> {
        let uri: hyper::Uri = url.parse().map_err(|e| ClientError::InvalidUrl {
            url: url.to_string(),
            reason: format!("{e}"),
        })?;
        if !matches!(uri.scheme_str(), Some("http") | Some("https")) {
            return Err(ClientError::InvalidUrl {
                url: url.to_string(),
                reason: "expected an http:// or https:// URL".into(),
            });
        }
        let path = TrafficPath::of_call(uri.path(), self.meter.role());
        let sent = body.len() as u64;
        let mut builder = Request::builder()
            .method(method)
            .uri(uri)
            .header(hyper::header::CONTENT_TYPE, wire::PROTOBUF_CONTENT_TYPE);
        if let Some(zone) = self.meter.zone_header() {
            builder = builder.header(ZONE_HEADER, zone.clone());
        }
        if let Some(token) = &self.admin_token {
            builder = builder.header(hyper::header::AUTHORIZATION, token.header_value());
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let req = builder
            .body(Full::new(body))
            .map_err(|e| ClientError::InvalidUrl {
                url: url.to_string(),
                reason: e.to_string(),
            })?;
        let limit = self.max_response_bytes;
        let work = async {
            let resp = self
                .inner
                .request(req)
                .await
                .map_err(|e| ClientError::Transport {
                    url: url.to_string(),
                    reason: error_chain(&e),
                })?;
            let status = resp.status();
            let peer = peer_zone(resp.headers());
            let headers = resp.headers().clone();
            // The answer's head arrived: the request body went out.
            self.meter.count(path, Direction::Sent, peer.as_ref(), sent);
            let body = Limited::new(resp.into_body(), limit)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        ClientError::BodyTooLarge {
                            url: url.to_string(),
                            limit,
                        }
                    } else {
                        ClientError::Transport {
                            url: url.to_string(),
                            reason: format!("reading the body: {e}"),
                        }
                    }
                })?
                .to_bytes();
            let received = body.len() as u64;
            self.meter
                .count(path, Direction::Received, peer.as_ref(), received);
            let exchange = Exchange {
                path,
                sent,
                received,
                relation: self.meter.relation(peer.as_ref()),
            };
            Ok(HttpReply {
                status,
                body,
                peer_zone: peer,
                headers,
                exchange,
            })
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(ClientError::Timeout {
                url: url.to_string(),
                after: timeout,
            }),
        }
    }
}
