//! Timestamps from the cluster's TSO on another server (`[server] tso-addr`).
//!
//! Each call asks the TSO once: timestamps are not cached in batches, because a cached
//! timestamp used later would be older than ones the TSO handed to other nodes in between, and
//! a read at it could miss a commit that finished before the read began.

use std::time::Duration;

use bytes::Bytes;
use node::HttpClient;
use prost::Message;
use wire::region::{TsoRequest, TsoResponse};

use crate::tso::{TimestampSource, TsoError};

pub struct RemoteTso {
    url: String,
    client: HttpClient,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
}

impl RemoteTso {
    /// A client of the TSO at `base` (`http://host:port`); blocking calls run on `runtime`.
    pub fn new(base: &str, client: HttpClient, runtime: tokio::runtime::Handle) -> RemoteTso {
        RemoteTso {
            url: format!("{}{}", base.trim_end_matches('/'), wire::paths::TSO),
            client,
            runtime,
            timeout: Duration::from_secs(5),
        }
    }

    /// One timestamp (async).
    pub async fn get_ts_async(&self) -> Result<u64, TsoError> {
        let err = |detail: String| TsoError::Remote {
            addr: self.url.clone(),
            detail,
        };
        let body = Bytes::from(TsoRequest { count: 1 }.encode_to_vec());
        let reply = self
            .client
            .post(&self.url, body, self.timeout)
            .await
            .map_err(|e| err(e.to_string()))?;
        if !reply.status.is_success() {
            return Err(err(format!(
                "expected 200, found {}: {}",
                reply.status,
                String::from_utf8_lossy(&reply.body).trim()
            )));
        }
        let resp = TsoResponse::decode(reply.body.as_ref())
            .map_err(|e| err(format!("response does not decode: {e}")))?;
        if !resp.error.is_empty() {
            return Err(err(resp.error));
        }
        if resp.first_ts == 0 || resp.count == 0 {
            return Err(err(format!(
                "expected a timestamp, found first_ts={} count={}",
                resp.first_ts, resp.count
            )));
        }
        Ok(resp.first_ts)
    }
}

impl TimestampSource for RemoteTso {
    /// Blocks on the runtime: call it from a blocking thread (`spawn_blocking`), never from
    /// async code (use [`RemoteTso::get_ts_async`] there).
    fn get_ts(&self) -> Result<u64, TsoError> {
        self.runtime.block_on(self.get_ts_async())
    }
}
