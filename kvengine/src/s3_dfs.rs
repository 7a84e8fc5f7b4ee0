//! The object store on S3 (or any S3-compatible server), through aws-sdk-s3.
//!
//! Each file is one object, `{prefix}{file_id:016x}.sst`. A put is one PutObject (atomic on S3:
//! a reader sees the whole object or none); `get_range` is a ranged GetObject; `list` pages
//! through ListObjectsV2 under the prefix.
//!
//! The [`Dfs`] trait is synchronous and is called from plain threads as well as from threads of
//! a caller's tokio runtime, where `Runtime::block_on` would panic. So `S3Dfs` owns a small
//! runtime of its own: every request is spawned on it and the caller waits for the result on a
//! std channel. Retries (with exponential backoff, on 5xx, throttling, timeouts and connection
//! errors) and timeouts are the SDK's standard ones, configured from [`S3Options`].

use std::future::Future;
use std::io;
use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_smithy_http_client::tls;
use bytes::Bytes;
use types::FileId;

use crate::dfs::Dfs;
use crate::error::{Error, Result};
use crate::metrics;

/// Where and how to reach the bucket. Credentials are not here: they come from the standard AWS
/// environment variables ([`S3Credentials::from_env`]), never from instance metadata (a lookup
/// that hangs for seconds off EC2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Options {
    /// Endpoint URL of an S3-compatible server, e.g. `http://127.0.0.1:9000`. `None` means AWS
    /// S3 itself, resolved from the region.
    pub endpoint: Option<String>,
    /// Region for request signing and (without an endpoint) for the AWS endpoint. Servers that
    /// ignore regions still need one to sign with.
    pub region: String,
    /// Bucket holding the files; it must exist.
    pub bucket: String,
    /// Prepended to every object key, e.g. `cluster-1/sst/`. Engines sharing a bucket use
    /// distinct prefixes (or distinct node ids); `list` only sees files under the prefix.
    pub prefix: String,
    /// Path-style URLs (`endpoint/bucket/key`) instead of virtual-host style
    /// (`bucket.endpoint/key`). Most S3-compatible servers on an IP address need path style.
    pub path_style: bool,
    /// Time limit of one attempt of one request, connection included. It must cover the upload of
    /// a whole SST file at the slowest bandwidth you accept; shorter means a hung connection is
    /// abandoned and retried sooner.
    pub timeout: Duration,
    /// Attempts per request, the first included (1 = no retries). Failed attempts (5xx,
    /// throttling, timeouts, connection errors) are retried with exponential backoff and jitter.
    /// More attempts ride out longer outages but hold a flush thread longer before the engine's
    /// own flush retry takes over.
    pub max_attempts: u32,
    /// Backoff before the first retry; it doubles per retry (with jitter) up to 20 s.
    pub initial_backoff: Duration,
    /// Keys per ListObjectsV2 page (at most 1000, S3's own limit). Smaller pages only cost more
    /// requests; tests use it to exercise pagination.
    pub list_page_size: i32,
}

impl S3Options {
    /// Options for `bucket` on AWS S3 in us-east-1, no prefix, virtual-host style, 30 s per
    /// attempt, 5 attempts starting at 100 ms backoff.
    pub fn new(bucket: impl Into<String>) -> S3Options {
        S3Options {
            endpoint: None,
            region: "us-east-1".into(),
            bucket: bucket.into(),
            prefix: String::new(),
            path_style: false,
            timeout: Duration::from_secs(30),
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            list_page_size: 1000,
        }
    }

    fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::Config { what });
        if self.bucket.len() < 3 {
            return bad(format!(
                "s3 bucket name needs at least 3 characters: bucket={:?}",
                self.bucket
            ));
        }
        if self.region.is_empty() {
            return bad("s3 region must not be empty".into());
        }
        if let Some(e) = &self.endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            return bad(format!(
                "s3 endpoint must start with http:// or https://: endpoint={e}"
            ));
        }
        if self.prefix.starts_with('/') {
            return bad(format!(
                "s3 prefix must not start with '/': prefix={}",
                self.prefix
            ));
        }
        if self.max_attempts == 0 {
            return bad("s3 max_attempts must be at least 1, found=0".into());
        }
        if self.timeout.is_zero() {
            return bad("s3 timeout must be positive, found=0".into());
        }
        if !(1..=1000).contains(&self.list_page_size) {
            return bad(format!(
                "s3 list_page_size must be in 1..=1000, found={}",
                self.list_page_size
            ));
        }
        Ok(())
    }
}

/// Static credentials, as read from the standard AWS environment variables.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"** redacted **")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "** redacted **"),
            )
            .finish()
    }
}

impl S3Credentials {
    /// Reads `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and (optional) `AWS_SESSION_TOKEN`.
    pub fn from_env() -> Result<S3Credentials> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Like [`from_env`](Self::from_env), with `var` looking up each variable (testable without
    /// touching the process environment). Empty values count as missing.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<S3Credentials> {
        let get = |name: &str| var(name).filter(|v| !v.is_empty());
        match (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
            (Some(access_key_id), Some(secret_access_key)) => Ok(S3Credentials {
                access_key_id,
                secret_access_key,
                session_token: get("AWS_SESSION_TOKEN"),
            }),
            (id, _) => Err(Error::Config {
                what: format!(
                    "s3 credentials missing from the environment: \
                     AWS_ACCESS_KEY_ID set={} AWS_SECRET_ACCESS_KEY set={}",
                    id.is_some(),
                    get("AWS_SECRET_ACCESS_KEY").is_some()
                ),
            }),
        }
    }
}

/// SST files as objects in an S3 bucket.
pub struct S3Dfs {
    client: Client,
    bucket: String,
    prefix: String,
    list_page_size: i32,
    /// Runs every request; `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
}

impl S3Dfs {
    /// Connects with credentials from the standard AWS environment variables.
    pub fn open(opts: S3Options) -> Result<S3Dfs> {
        Self::open_with_credentials(opts, S3Credentials::from_env()?)
    }

    /// Connects with the given credentials. No request is sent: a wrong endpoint or bucket shows
    /// up as an error of the first operation.
    pub fn open_with_credentials(opts: S3Options, creds: S3Credentials) -> Result<S3Dfs> {
        opts.validate()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("stratus-s3")
            .enable_all()
            .build()
            .map_err(Error::io("start s3 runtime", "-"))?;
        let http_client = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(
                tls::rustls_provider::CryptoMode::Ring,
            ))
            .build_https();
        // The whole operation may take every attempt plus the backoffs between them.
        let backoffs = (1..opts.max_attempts)
            .map(|i| {
                opts.initial_backoff
                    .saturating_mul(1 << (i - 1).min(16))
                    .min(Duration::from_secs(20))
            })
            .fold(Duration::ZERO, Duration::saturating_add);
        let operation_timeout = opts
            .timeout
            .saturating_mul(opts.max_attempts)
            .saturating_add(backoffs);
        let mut config = aws_sdk_s3::config::Builder::new()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(opts.region.clone()))
            .credentials_provider(Credentials::new(
                creds.access_key_id,
                creds.secret_access_key,
                creds.session_token,
                None,
                "stratus-env",
            ))
            .http_client(http_client)
            .force_path_style(opts.path_style)
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(opts.max_attempts)
                    .with_initial_backoff(opts.initial_backoff),
            )
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(opts.timeout)
                    .operation_attempt_timeout(opts.timeout)
                    .operation_timeout(operation_timeout)
                    .build(),
            );
        if let Some(endpoint) = &opts.endpoint {
            config = config.endpoint_url(endpoint);
        }
        Ok(S3Dfs {
            client: Client::from_conf(config.build()),
            bucket: opts.bucket,
            prefix: opts.prefix,
            list_page_size: opts.list_page_size,
            runtime: Some(runtime),
        })
    }

    /// The object key of a file.
    pub fn key_of(&self, file_id: FileId) -> String {
        format!("{}{file_id:016x}.sst", self.prefix)
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Runs `fut` on the own runtime and waits for it on this (any) thread.
    fn run<T: Send + 'static>(
        &self,
        op: &'static str,
        file_id: FileId,
        fut: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let rt = self.runtime.as_ref().expect("runtime lives until drop");
        rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv().unwrap_or_else(|_| {
            Err(Error::Dfs {
                op,
                file_id,
                source: io::Error::other("s3 request task ended without a reply"),
            })
        })
    }
}

impl Drop for S3Dfs {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which panics inside another runtime's thread.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// What went wrong with one S3 request, as the `source` of [`Error::Dfs`]. `NoSuchKey` (or a 404
/// without a code, as HEAD-like replies have) becomes [`Error::FileNotFound`] where `not_found`
/// allows it; a missing bucket never does.
fn s3_error<E, R>(
    op: &'static str,
    file_id: FileId,
    bucket: &str,
    key: &str,
    not_found: bool,
    e: SdkError<E, R>,
) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
    SdkError<E, R>: std::error::Error,
{
    let (kind, detail) = match &e {
        SdkError::ServiceError(se) => {
            let code = se.err().code();
            if not_found && code == Some("NoSuchKey") {
                return Error::FileNotFound { file_id };
            }
            let kind = match code {
                Some("NoSuchKey" | "NoSuchBucket") => io::ErrorKind::NotFound,
                Some("AccessDenied" | "InvalidAccessKeyId" | "SignatureDoesNotMatch") => {
                    io::ErrorKind::PermissionDenied
                }
                _ => io::ErrorKind::Other,
            };
            let detail = format!(
                "s3 service error: code={} message={}",
                code.unwrap_or("none"),
                se.err().message().unwrap_or("none")
            );
            (kind, detail)
        }
        SdkError::TimeoutError(_) => (
            io::ErrorKind::TimedOut,
            format!("s3 request timed out: {}", DisplayErrorContext(&e)),
        ),
        _ => (
            io::ErrorKind::Other,
            format!("s3 request failed: {}", DisplayErrorContext(&e)),
        ),
    };
    Error::Dfs {
        op,
        file_id,
        source: io::Error::new(kind, format!("{detail} bucket={bucket} key={key}")),
    }
}

fn body_error(op: &'static str, file_id: FileId, key: &str, e: impl std::fmt::Display) -> Error {
    Error::Dfs {
        op,
        file_id,
        source: io::Error::other(format!("reading s3 response body failed: {e} key={key}")),
    }
}

impl Dfs for S3Dfs {
    fn put(&self, file_id: FileId, data: Bytes) -> Result<()> {
        metrics::dfs_request("put");
        let (client, bucket, key) = (
            self.client.clone(),
            self.bucket.clone(),
            self.key_of(file_id),
        );
        // A plain overwrite: ids are never reused, so a second put of an id is a retry of the
        // same bytes after a lost reply, and must succeed.
        self.run("put", file_id, async move {
            client
                .put_object()
                .bucket(&bucket)
                .key(&key)
                .content_length(data.len() as i64)
                .body(ByteStream::from(data))
                .send()
                .await
                .map_err(|e| s3_error("put", file_id, &bucket, &key, false, e))?;
            Ok(())
        })
    }

    fn get(&self, file_id: FileId) -> Result<Bytes> {
        metrics::dfs_request("get");
        let (client, bucket, key) = (
            self.client.clone(),
            self.bucket.clone(),
            self.key_of(file_id),
        );
        self.run("get", file_id, async move {
            let resp = client
                .get_object()
                .bucket(&bucket)
                .key(&key)
                .send()
                .await
                .map_err(|e| s3_error("get", file_id, &bucket, &key, true, e))?;
            let body = resp.body.collect().await;
            Ok(body
                .map_err(|e| body_error("get", file_id, &key, e))?
                .into_bytes())
        })
    }

    fn get_range(&self, file_id: FileId, offset: u64, len: u64) -> Result<Bytes> {
        metrics::dfs_request("get_range");
        if len == 0 {
            // An empty HTTP range cannot be expressed.
            return Ok(Bytes::new());
        }
        let (client, bucket, key) = (
            self.client.clone(),
            self.bucket.clone(),
            self.key_of(file_id),
        );
        self.run("get_range", file_id, async move {
            let past_end = |size: String| Error::Dfs {
                op: "get_range",
                file_id,
                source: io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("range past end of file: offset={offset} len={len} size={size}"),
                ),
            };
            let last = offset
                .checked_add(len - 1)
                .ok_or_else(|| past_end("?".into()))?;
            let resp = client
                .get_object()
                .bucket(&bucket)
                .key(&key)
                .range(format!("bytes={offset}-{last}"))
                .send()
                .await
                .map_err(|e| match &e {
                    SdkError::ServiceError(se) if se.err().code() == Some("InvalidRange") => {
                        past_end("?".into())
                    }
                    _ => s3_error("get_range", file_id, &bucket, &key, true, e),
                })?;
            let size = resp
                .content_range()
                .and_then(|r| r.rsplit('/').next())
                .unwrap_or("?")
                .to_string();
            let body = resp.body.collect().await;
            let data = body
                .map_err(|e| body_error("get_range", file_id, &key, e))?
                .into_bytes();
            if data.len() as u64 != len {
                return Err(past_end(size));
            }
            Ok(data)
        })
    }

    fn delete(&self, file_id: FileId) -> Result<()> {
        metrics::dfs_request("delete");
        let (client, bucket, key) = (
            self.client.clone(),
            self.bucket.clone(),
            self.key_of(file_id),
        );
        self.run("delete", file_id, async move {
            match client
                .delete_object()
                .bucket(&bucket)
                .key(&key)
                .send()
                .await
            {
                Ok(_) => Ok(()),
                // S3 answers 204 for a missing key; some compatible servers say NoSuchKey.
                Err(SdkError::ServiceError(se)) if se.err().code() == Some("NoSuchKey") => Ok(()),
                Err(e) => Err(s3_error("delete", file_id, &bucket, &key, false, e)),
            }
        })
    }

    /// Every file id under the prefix. Errors carry `file_id=0`: no single file is involved.
    fn list(&self) -> Result<Vec<FileId>> {
        metrics::dfs_request("list");
        let (client, bucket, prefix) = (
            self.client.clone(),
            self.bucket.clone(),
            self.prefix.clone(),
        );
        let page_size = self.list_page_size;
        self.run("list", FileId::default(), async move {
            let mut ids = Vec::new();
            let mut token: Option<String> = None;
            loop {
                let resp = client
                    .list_objects_v2()
                    .bucket(&bucket)
                    .prefix(&prefix)
                    .max_keys(page_size)
                    .set_continuation_token(token.take())
                    .send()
                    .await
                    .map_err(|e| s3_error("list", FileId::default(), &bucket, &prefix, false, e))?;
                for obj in resp.contents() {
                    if let Some(id) = obj
                        .key()
                        .and_then(|k| k.strip_prefix(prefix.as_str()))
                        .and_then(|n| n.strip_suffix(".sst"))
                        .filter(|h| h.len() == 16)
                        .and_then(|h| u64::from_str_radix(h, 16).ok())
                    {
                        ids.push(FileId(id));
                    }
                }
                match resp.next_continuation_token() {
                    Some(t) if resp.is_truncated() == Some(true) => token = Some(t.to_string()),
                    _ => break,
                }
            }
            ids.sort_unstable();
            Ok(ids)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_come_from_the_standard_variables() {
        let vars = |name: &str| match name {
            "AWS_ACCESS_KEY_ID" => Some("ak".to_string()),
            "AWS_SECRET_ACCESS_KEY" => Some("sk".to_string()),
            _ => None,
        };
        let c = S3Credentials::from_vars(vars).unwrap();
        assert_eq!(c.access_key_id, "ak");
        assert_eq!(c.secret_access_key, "sk");
        assert_eq!(c.session_token, None);
        assert!(!format!("{c:?}").contains("sk\""));
    }

    #[test]
    fn missing_credentials_are_a_config_error() {
        let e = S3Credentials::from_vars(|n| (n == "AWS_ACCESS_KEY_ID").then(|| "ak".to_string()))
            .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Config);
        assert!(
            e.to_string().contains("AWS_SECRET_ACCESS_KEY set=false"),
            "{e}"
        );
    }

    #[test]
    fn bad_options_are_rejected_before_any_request() {
        let creds = S3Credentials {
            access_key_id: "ak".into(),
            secret_access_key: "sk".into(),
            session_token: None,
        };
        let mut o = S3Options::new("ab");
        assert!(matches!(
            S3Dfs::open_with_credentials(o.clone(), creds.clone()),
            Err(Error::Config { .. })
        ));
        o.bucket = "bucket".into();
        o.endpoint = Some("127.0.0.1:9000".into());
        assert!(matches!(
            S3Dfs::open_with_credentials(o.clone(), creds.clone()),
            Err(Error::Config { .. })
        ));
        o.endpoint = None;
        o.max_attempts = 0;
        assert!(matches!(
            S3Dfs::open_with_credentials(o, creds),
            Err(Error::Config { .. })
        ));
    }

    #[test]
    fn object_keys_are_prefixed_hex_ids() {
        let mut o = S3Options::new("bucket");
        o.prefix = "c1/sst/".into();
        let creds = S3Credentials {
            access_key_id: "ak".into(),
            secret_access_key: "sk".into(),
            session_token: None,
        };
        let dfs = S3Dfs::open_with_credentials(o, creds).unwrap();
        assert_eq!(dfs.key_of(FileId(0xab)), "c1/sst/00000000000000ab.sst");
    }
}
