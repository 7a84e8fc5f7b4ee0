//! An in-process S3-compatible server (s3s + s3s-fs) on 127.0.0.1 with an ephemeral port, for
//! tests of `S3Dfs`. Include it with `#[path = "common/s3_server.rs"] mod s3_server;`.
//!
//! Accepted sockets get TCP_NODELAY: without it, small responses stall ~40 ms on delayed ACKs.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use kvengine::{S3Credentials, S3Dfs, S3Options};
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;

pub const BUCKET: &str = "stratus-test";
const ACCESS_KEY: &str = "stratus-test-key";
const SECRET_KEY: &str = "stratus-test-secret";

/// A running server; dropping it stops it and deletes its files.
pub struct S3Server {
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
    root: tempfile::TempDir,
}

impl S3Server {
    /// Starts a server with one empty bucket, [`BUCKET`].
    pub fn start() -> S3Server {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(BUCKET)).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("test-s3-server")
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let service = {
            let mut b = S3ServiceBuilder::new(s3s_fs::FileSystem::new(root.path()).unwrap());
            b.set_auth(SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
            b.build()
        };
        runtime.spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                let _ = socket.set_nodelay(true);
                let service = service.clone();
                tokio::spawn(async move {
                    let _ = ConnBuilder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(socket), service)
                        .await;
                });
            }
        });
        S3Server {
            addr,
            runtime: Some(runtime),
            root,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The directory the server keeps its buckets in (one folder per bucket).
    pub fn root(&self) -> &std::path::Path {
        self.root.path()
    }

    /// Options for [`BUCKET`] on this server with `prefix`, with short timeouts and backoffs so
    /// that failing tests fail fast.
    pub fn options(&self, prefix: &str) -> S3Options {
        let mut o = S3Options::new(BUCKET);
        o.endpoint = Some(self.endpoint());
        o.prefix = prefix.to_string();
        o.path_style = true;
        o.timeout = Duration::from_secs(2);
        o.max_attempts = 3;
        o.initial_backoff = Duration::from_millis(10);
        o
    }

    pub fn dfs(&self, prefix: &str) -> S3Dfs {
        S3Dfs::open_with_credentials(self.options(prefix), credentials()).unwrap()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The credentials the server accepts.
pub fn credentials() -> S3Credentials {
    S3Credentials {
        access_key_id: ACCESS_KEY.into(),
        secret_access_key: SECRET_KEY.into(),
        session_token: None,
    }
}
