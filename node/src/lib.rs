//! Process plumbing shared by `stratus-server` and `stratus-worker`, so both behave the same
//! way at their edges:
//!
//! * [`config`]: `--config path`, TOML with every key optional and unknown keys rejected by
//!   name, the effective config printed back;
//! * [`units`]: sizes (`"32MiB"`) and durations (`"100ms"`) as config values;
//! * [`dfs`]: the `[dfs]` section (local directory or S3, optional file cache);
//! * [`http`]: binding, serving until SIGTERM with a grace period, protobuf bodies, `/metrics`;
//! * [`client`]: the HTTP client (http and https) processes use to call each other;
//! * [`logging`]: `tracing` events to stderr, filtered by `STRATUS_LOG`.

pub mod client;
pub mod config;
pub mod dfs;
pub mod http;
pub mod logging;
pub mod units;

pub use client::{ClientError, HttpClient, HttpReply};
pub use config::ConfigError;
pub use dfs::DfsSection;
pub use units::{ReadableDuration, ReadableSize};

/// An error and each of its sources on one line, joined by `": "`: our errors never repeat
/// their source's text, so the chain is how a reason reaches a log line or an HTTP answer.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}
