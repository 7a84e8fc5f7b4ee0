//! `stratus-test-s3` processes, and the object store a server or worker is configured with.

use std::path::{Path, PathBuf};
use std::process::Command;

use harness::supervisor::{Launch, Signal};
use kvengine::DfsSection;
use types::ReadableDuration;

use crate::binaries;
use crate::process::{TestNode, log_path};

/// The credentials `stratus-test-s3` accepts; the harness passes them to servers and workers
/// through the standard AWS environment variables.
pub const ACCESS_KEY: &str = "stratus-e2e-key";
pub const SECRET_KEY: &str = "stratus-e2e-secret";
pub const BUCKET: &str = "stratus-e2e";

/// Fault injection of a `stratus-test-s3` process.
#[derive(Clone, Debug, Default)]
pub struct S3Faults {
    /// The first N GetObject requests answer 500 InternalError.
    pub fail_gets: u64,
    /// Every GetObject waits this long.
    pub get_delay_ms: u64,
}

/// A running `stratus-test-s3` over a directory.
pub struct S3Proc {
    node: TestNode,
    dir: PathBuf,
}

impl S3Proc {
    /// Serves `dir` (bucket [`BUCKET`] is `dir/BUCKET`). Several processes may serve one
    /// directory: they see the same objects.
    pub fn start(dir: &Path, faults: S3Faults) -> S3Proc {
        std::fs::create_dir_all(dir).expect("s3 dir");
        let mut cmd = Command::new(binaries::binary(binaries::TEST_S3));
        cmd.arg("--dir")
            .arg(dir)
            .args(["--addr", "127.0.0.1:0", "--bucket", BUCKET])
            .args(["--fail-gets", &faults.fail_gets.to_string()])
            .args(["--get-delay-ms", &faults.get_delay_ms.to_string()]);
        let log = log_path(dir.parent().unwrap_or(dir), "s3");
        let node = TestNode::start(Launch::new("stratus-test-s3", cmd, "s3", log));
        S3Proc {
            node,
            dir: dir.to_path_buf(),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        self.node.base_url()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The object store at this endpoint, under `prefix`.
    pub fn store(&self, prefix: &str) -> Store {
        Store::S3 {
            endpoint: self.endpoint().to_string(),
            prefix: prefix.to_string(),
            max_attempts: None,
        }
    }

    /// (GetObject requests seen, GetObject requests failed on purpose).
    pub fn get_stats(&self) -> (u64, u64) {
        let text = crate::http_client::get_text(&self.node.url("/-/stats"));
        let field = |name: &str| -> u64 {
            text.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {text:?}"))
        };
        (field("gets"), field("failed_gets"))
    }

    pub fn kill(&mut self) {
        self.node.kill();
    }

    /// Sends `signal`: SIGSTOP freezes the store (every request to it hangs, connections are
    /// still accepted by the kernel), SIGCONT thaws it.
    pub fn signal(&mut self, signal: Signal) {
        self.node.signal(signal);
    }
}

/// Where SST files live: the `[dfs]` section of a server or worker.
#[derive(Clone, Debug)]
pub enum Store {
    Local(PathBuf),
    S3 {
        endpoint: String,
        prefix: String,
        /// `s3-max-attempts` (the default otherwise).
        max_attempts: Option<u32>,
    },
}

impl Store {
    /// The `[dfs]` section of a server or worker on this store.
    pub fn dfs_section(&self) -> DfsSection {
        match self {
            Store::Local(dir) => DfsSection {
                local_dir: dir.clone(),
                ..DfsSection::default()
            },
            Store::S3 {
                endpoint,
                prefix,
                max_attempts,
            } => {
                let defaults = DfsSection::default();
                DfsSection {
                    s3_bucket: BUCKET.into(),
                    s3_endpoint: endpoint.clone(),
                    s3_region: "us-east-1".into(),
                    s3_prefix: prefix.clone(),
                    s3_path_style: true,
                    s3_timeout: ReadableDuration::secs(5),
                    s3_initial_backoff: ReadableDuration::millis(20),
                    s3_max_attempts: max_attempts.unwrap_or(defaults.s3_max_attempts),
                    ..defaults
                }
            }
        }
    }

    /// The same store with `s3-max-attempts = n` (S3 only).
    pub fn with_max_attempts(&self, n: u32) -> Store {
        match self {
            Store::S3 {
                endpoint, prefix, ..
            } => Store::S3 {
                endpoint: endpoint.clone(),
                prefix: prefix.clone(),
                max_attempts: Some(n),
            },
            Store::Local(_) => panic!("s3-max-attempts applies to S3 only"),
        }
    }
}

/// The environment a server or worker needs for [`Store::S3`].
pub fn s3_env(cmd: &mut Command) {
    cmd.env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env("AWS_REGION", "us-east-1")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE");
}
