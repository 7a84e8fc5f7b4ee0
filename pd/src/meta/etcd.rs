//! etcd as the metadata store, spoken through etcd's v3 JSON gateway (`POST /v3/kv/range`,
//! `/v3/kv/txn`, `/v3/lease/*` on the client URLs; etcd 3.4 and later serve it by default).
//!
//! Why the gateway and not the `etcd-client` crate: that crate compiles etcd's protos at build
//! time and needs a `protoc` binary, which a fresh machine lacks (the README's main job must
//! build with nothing installed), and it would bring a second HTTP/2 stack (tonic) beside
//! hyper. The gateway carries the same requests with the same semantics (linearizable reads,
//! compare-and-write transactions, leases) as JSON: keys and values base64, 64-bit integers as
//! decimal strings.
//!
//! With TLS (the placement driver's `[security]` and `https://` endpoints) etcd is another node
//! of the cluster: the client presents the placement driver's certificate and trusts only the
//! cluster CA ([`EtcdStore::with_tls`]).
//!
//! Several endpoints (a multi-member etcd): calls go to the last endpoint that answered and move
//! to the next on a connection failure or timeout, so losing one member costs one timeout.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use node::HttpClient;
use serde_json::{Value, json};

use super::{CompareTarget, KeyValue, Lease, LeaseId, MetaError, MetaStore, Op, Txn, prefix_end};

/// The largest answer accepted from etcd (a scan of every region of a big cluster fits).
const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// A client of one etcd cluster.
#[derive(Debug)]
pub struct EtcdStore {
    endpoints: Vec<String>,
    /// The endpoint tried first: the last one that answered.
    current: AtomicUsize,
    client: HttpClient,
    timeout: Duration,
}

impl EtcdStore {
    /// A client of the etcd cluster at `endpoints` (`http://host:port`, the members' client
    /// URLs), each call bounded by `timeout` per endpoint.
    pub fn new(endpoints: Vec<String>, timeout: Duration) -> EtcdStore {
        EtcdStore::with_tls(endpoints, timeout, None)
    }

    /// [`EtcdStore::new`] for a placement driver with `tls` (its `[security]`): when every
    /// endpoint is `https://`, etcd is spoken to as another node of the cluster, presenting
    /// the placement driver's certificate and trusting only the cluster CA (etcd's
    /// `--client-cert-auth --trusted-ca-file`, as PD does with its own certificates). `http://`
    /// endpoints, or no `tls`, get a plain client (https to public roots).
    pub fn with_tls(
        endpoints: Vec<String>,
        timeout: Duration,
        tls: Option<&node::tls::Tls>,
    ) -> EtcdStore {
        let all_https =
            !endpoints.is_empty() && endpoints.iter().all(|e| e.starts_with("https://"));
        let tls = tls.filter(|_| all_https);
        EtcdStore {
            endpoints: endpoints
                .into_iter()
                .map(|e| e.trim_end_matches('/').to_string())
                .collect(),
            current: AtomicUsize::new(0),
            client: HttpClient::with_tls(MAX_RESPONSE_BYTES, tls)
                .with_meter(node::Meter::unlabelled(wire::traffic::Role::Pd)),
            timeout,
        }
    }

    /// POSTs `body` to `path` on the current endpoint, moving to the next endpoints on
    /// transport failures; the decoded JSON answer.
    async fn call(&self, path: &str, body: Value) -> Result<Value, MetaError> {
        let bytes = Bytes::from(body.to_string());
        let n = self.endpoints.len();
        let start = self.current.load(Ordering::Relaxed);
        let mut last = String::from("no endpoint configured");
        for i in 0..n {
            let idx = (start + i) % n;
            let endpoint = &self.endpoints[idx];
            let url = format!("{endpoint}{path}");
            match self.client.post(&url, bytes.clone(), self.timeout).await {
                Ok(reply) => {
                    self.current.store(idx, Ordering::Relaxed);
                    let value: Value =
                        serde_json::from_slice(&reply.body).map_err(|e| MetaError::Protocol {
                            endpoint: endpoint.clone(),
                            expected: format!("a JSON answer to {path}"),
                            found: format!(
                                "{} ({e}): {}",
                                reply.status,
                                String::from_utf8_lossy(&reply.body[..reply.body.len().min(200)])
                            ),
                        })?;
                    if !reply.status.is_success() {
                        let detail = value
                            .get("message")
                            .or_else(|| value.get("error"))
                            .and_then(Value::as_str)
                            .unwrap_or("no message")
                            .to_string();
                        // An unavailable member (no leader, shutting down) sends us elsewhere.
                        if reply.status.as_u16() == 503 || detail.contains("no leader") {
                            last = format!("{endpoint}: {detail}");
                            continue;
                        }
                        return Err(MetaError::Refused {
                            endpoint: endpoint.clone(),
                            detail: format!("{}: {detail}", reply.status),
                        });
                    }
                    return Ok(value);
                }
                Err(e) => last = e.to_string(),
            }
        }
        Err(MetaError::Unavailable {
            endpoints: self.endpoints.join(","),
            detail: last,
        })
    }

    fn endpoint(&self) -> String {
        self.endpoints
            .get(self.current.load(Ordering::Relaxed))
            .cloned()
            .unwrap_or_default()
    }

    fn protocol(&self, expected: &str, found: &Value) -> MetaError {
        let mut found = found.to_string();
        found.truncate(200);
        MetaError::Protocol {
            endpoint: self.endpoint(),
            expected: expected.to_string(),
            found,
        }
    }

    fn decode_kv(&self, v: &Value) -> Result<KeyValue, MetaError> {
        let bytes = |field: &str| -> Result<Vec<u8>, MetaError> {
            match v.get(field) {
                None => Ok(Vec::new()),
                Some(s) => s
                    .as_str()
                    .and_then(|s| B64.decode(s).ok())
                    .ok_or_else(|| self.protocol(&format!("base64 {field}"), v)),
            }
        };
        Ok(KeyValue {
            key: bytes("key")?,
            value: bytes("value")?,
            create_revision: int(v.get("create_revision")).unwrap_or(0) as u64,
            mod_revision: int(v.get("mod_revision")).unwrap_or(0) as u64,
            lease: int(v.get("lease")).unwrap_or(0),
        })
    }
}

/// An int64 as the gateway writes it: a decimal string (or, leniently, a number).
fn int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

impl MetaStore for EtcdStore {
    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>, MetaError> {
        let resp = self
            .call("/v3/kv/range", json!({ "key": b64(key) }))
            .await?;
        match resp.get("kvs").and_then(Value::as_array) {
            None => Ok(None),
            Some(kvs) => kvs.first().map(|kv| self.decode_kv(kv)).transpose(),
        }
    }

    async fn scan_prefix(&self, prefix: &[u8]) -> Result<(Vec<KeyValue>, u64), MetaError> {
        let resp = self
            .call(
                "/v3/kv/range",
                json!({ "key": b64(prefix), "range_end": b64(&prefix_end(prefix)) }),
            )
            .await?;
        let revision = int(resp.get("header").and_then(|h| h.get("revision")))
            .ok_or_else(|| self.protocol("a header revision", &resp))?
            as u64;
        let kvs = match resp.get("kvs").and_then(Value::as_array) {
            None => Vec::new(),
            Some(kvs) => kvs
                .iter()
                .map(|kv| self.decode_kv(kv))
                .collect::<Result<_, _>>()?,
        };
        Ok((kvs, revision))
    }

    async fn txn(&self, txn: Txn) -> Result<bool, MetaError> {
        let compare: Vec<Value> = txn
            .compares
            .iter()
            .map(|c| match &c.target {
                CompareTarget::Value(v) => {
                    json!({"key": b64(&c.key), "target": "VALUE", "result": "EQUAL", "value": b64(v)})
                }
                CompareTarget::ModRevision(r) => {
                    json!({"key": b64(&c.key), "target": "MOD", "result": "EQUAL", "mod_revision": r.to_string()})
                }
                CompareTarget::CreateRevision(r) => {
                    json!({"key": b64(&c.key), "target": "CREATE", "result": "EQUAL", "create_revision": r.to_string()})
                }
            })
            .collect();
        let success: Vec<Value> = txn
            .writes
            .iter()
            .map(|op| match op {
                Op::Put { key, value, lease } => json!({"request_put": {
                    "key": b64(key), "value": b64(value), "lease": lease.to_string()
                }}),
                Op::Delete { key } => json!({"request_delete_range": {"key": b64(key)}}),
            })
            .collect();
        let resp = self
            .call(
                "/v3/kv/txn",
                json!({"compare": compare, "success": success, "failure": []}),
            )
            .await?;
        // proto3 JSON leaves out a false `succeeded`.
        Ok(resp
            .get("succeeded")
            .and_then(Value::as_bool)
            .unwrap_or(false))
    }

    async fn grant_lease(&self, ttl: Duration) -> Result<Lease, MetaError> {
        // Whole seconds, rounded up: a lease never lives shorter than asked.
        let secs = ttl.as_millis().div_ceil(1000).max(1);
        let resp = self
            .call("/v3/lease/grant", json!({ "TTL": secs.to_string() }))
            .await?;
        if let Some(err) = resp.get("error").and_then(Value::as_str)
            && !err.is_empty()
        {
            return Err(MetaError::Refused {
                endpoint: self.endpoint(),
                detail: err.to_string(),
            });
        }
        let id = int(resp.get("ID")).ok_or_else(|| self.protocol("a lease ID", &resp))?;
        let granted = int(resp.get("TTL")).ok_or_else(|| self.protocol("a lease TTL", &resp))?;
        Ok(Lease {
            id,
            ttl: Duration::from_secs(granted.max(1) as u64),
        })
    }

    async fn keep_alive(&self, lease: LeaseId) -> Result<Option<Duration>, MetaError> {
        let resp = self
            .call("/v3/lease/keepalive", json!({ "ID": lease.to_string() }))
            .await?;
        let result = resp
            .get("result")
            .ok_or_else(|| self.protocol("a keepalive result", &resp))?;
        // An expired lease answers with no (or a zero) TTL.
        Ok(int(result.get("TTL"))
            .filter(|t| *t > 0)
            .map(|t| Duration::from_secs(t as u64)))
    }

    async fn revoke(&self, lease: LeaseId) -> Result<(), MetaError> {
        match self
            .call("/v3/lease/revoke", json!({ "ID": lease.to_string() }))
            .await
        {
            Ok(_) => Ok(()),
            // Already gone: what revoking wanted.
            Err(MetaError::Refused { detail, .. }) if detail.contains("not found") => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn describe(&self) -> String {
        format!("etcd {}", self.endpoints.join(","))
    }
}
