//! Protobuf over HTTP to the cluster's nodes: one POST or GET, a 200 expected, the body
//! decoded. Every failure becomes an [`Error`] naming the URL.

use std::time::Duration;

use bytes::Bytes;
use node::{Exchange, HttpClient, Meter};
use prost::Message;

use crate::error::{Error, Result};

/// The client's connection pool and per-call timeout. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Transport {
    http: HttpClient,
    timeout: Duration,
}

impl Transport {
    /// With `tls` (`[security]`), every call is https with this entry node's certificate.
    pub fn new(
        max_response_bytes: usize,
        timeout: Duration,
        tls: Option<&node::tls::Tls>,
    ) -> Transport {
        Transport {
            http: HttpClient::with_tls(max_response_bytes, tls),
            timeout,
        }
    }

    /// This transport sending the admin token with every request (`security.admin-token-path`
    /// of the client's config: bulk loads and `SET GLOBAL` are admin paths).
    pub fn with_admin_token(mut self, token: Option<node::tls::AdminToken>) -> Transport {
        self.http = self.http.with_admin_token(token);
        self
    }

    /// This transport counting its traffic as `meter`'s entry node (its zone label goes out
    /// with every request; `node::traffic`).
    pub fn with_meter(mut self, meter: Meter) -> Transport {
        self.http = self.http.with_meter(meter);
        self
    }

    /// POSTs `req` to `base + path`; the decoded 200 body.
    pub async fn post<Req: Message, Resp: Message + Default>(
        &self,
        base: &str,
        path: &str,
        req: &Req,
        what: &'static str,
    ) -> Result<Resp> {
        self.post_with_headers(base, path, &[], req, what).await
    }

    /// [`Transport::post`] with extra request headers (a worker's delegate endpoint needs the
    /// owning server's address in one).
    pub async fn post_with_headers<Req: Message, Resp: Message + Default>(
        &self,
        base: &str,
        path: &str,
        headers: &[(&str, &str)],
        req: &Req,
        what: &'static str,
    ) -> Result<Resp> {
        self.post_metered(base, path, headers, req, what)
            .await
            .map(|(resp, _)| resp)
    }

    /// [`Transport::post_with_headers`], with what the exchange moved: the paging driver adds
    /// the bytes that crossed zones to a query's cost.
    pub async fn post_metered<Req: Message, Resp: Message + Default>(
        &self,
        base: &str,
        path: &str,
        headers: &[(&str, &str)],
        req: &Req,
        what: &'static str,
    ) -> Result<(Resp, Exchange)> {
        let url = format!("{base}{path}");
        let reply = self
            .http
            .post_with_headers(
                &url,
                Bytes::from(req.encode_to_vec()),
                headers,
                self.timeout,
            )
            .await
            .map_err(|source| Error::Transport {
                url: url.clone(),
                source,
            })?;
        let exchange = reply.exchange;
        Ok((decode(url, reply, what)?, exchange))
    }

    /// GETs `base + path`; the decoded 200 body.
    pub async fn get<Resp: Message + Default>(
        &self,
        base: &str,
        path: &str,
        what: &'static str,
    ) -> Result<Resp> {
        let url = format!("{base}{path}");
        let reply = self
            .http
            .get(&url, self.timeout)
            .await
            .map_err(|source| Error::Transport {
                url: url.clone(),
                source,
            })?;
        decode(url, reply, what)
    }

    /// GETs `base + path` with `timeout`, succeeding on any 200 (liveness probes); the body.
    pub async fn probe(&self, base: &str, path: &str, timeout: Duration) -> Result<Bytes> {
        let url = format!("{base}{path}");
        let reply = self
            .http
            .get(&url, timeout)
            .await
            .map_err(|source| Error::Transport {
                url: url.clone(),
                source,
            })?;
        if reply.status.as_u16() != 200 {
            return Err(bad_status(url, &reply));
        }
        Ok(reply.body)
    }
}

fn decode<Resp: Message + Default>(
    url: String,
    reply: node::HttpReply,
    what: &'static str,
) -> Result<Resp> {
    if reply.status.as_u16() != 200 {
        return Err(bad_status(url, &reply));
    }
    Resp::decode(reply.body.as_ref()).map_err(|source| Error::Decode { url, what, source })
}

fn bad_status(url: String, reply: &node::HttpReply) -> Error {
    let mut body = String::from_utf8_lossy(&reply.body).into_owned();
    body.truncate(512);
    Error::BadStatus {
        url,
        status: reply.status.as_u16(),
        body,
    }
}
