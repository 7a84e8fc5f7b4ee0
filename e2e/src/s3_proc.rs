//! `stratus-test-s3` processes, and the object store a server or worker is configured with.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::binaries;
use crate::process::{Proc, next_id};

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
    proc: Proc,
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
        let stderr = dir
            .parent()
            .unwrap_or(dir)
            .join(format!("s3-{}.stderr", next_id()));
        let proc = Proc::spawn("stratus-test-s3", cmd, "s3 listening on ", &stderr);
        S3Proc {
            proc,
            dir: dir.to_path_buf(),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        self.proc.base_url()
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
        let text = crate::http_client::get_text(&self.proc.url("/-/stats"));
        let field = |name: &str| -> u64 {
            text.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {text:?}"))
        };
        (field("gets"), field("failed_gets"))
    }

    pub fn kill(&mut self) {
        self.proc.kill();
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
    /// The `[dfs]` table.
    pub fn dfs_table(&self) -> toml::Table {
        let mut t = toml::Table::new();
        match self {
            Store::Local(dir) => {
                t.insert("local-dir".into(), dir.display().to_string().into());
            }
            Store::S3 {
                endpoint,
                prefix,
                max_attempts,
            } => {
                t.insert("s3-bucket".into(), BUCKET.into());
                t.insert("s3-endpoint".into(), endpoint.clone().into());
                t.insert("s3-region".into(), "us-east-1".into());
                t.insert("s3-prefix".into(), prefix.clone().into());
                t.insert("s3-path-style".into(), true.into());
                t.insert("s3-timeout".into(), "5s".into());
                t.insert("s3-initial-backoff".into(), "20ms".into());
                if let Some(n) = max_attempts {
                    t.insert("s3-max-attempts".into(), i64::from(*n).into());
                }
            }
        }
        t
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
