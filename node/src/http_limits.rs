//! `[http]`: the bounds every HTTP listener of a node puts on its clients, so that no client,
//! slow or hostile, can hold the listener's resources without limit.
//!
//! ```toml
//! [http]
//! max-connections = 1024          # open connections at once; the next waits in the kernel's backlog
//! header-read-timeout = "30s"     # a connection must send a whole request head within this
//! max-header-size = "64KiB"       # a larger request head is refused (431) and the connection closed
//! ```
//!
//! * A connection counts against `max-connections` from accept to close. At the limit the
//!   listener stops accepting, so the excess waits in the kernel's accept queue instead of
//!   costing memory and a task each; a slot frees when any connection closes.
//! * `header-read-timeout` is a deadline for each request head, counted from the moment the
//!   connection waits for it: a client that connects and sends nothing, or dribbles its
//!   headers a byte at a time (slowloris), is cut off when it passes, and so is a keep-alive
//!   connection idle for longer (the node client drops idle connections after 20 s, sooner
//!   than the default, so it never reuses one the server is about to close).
//! * Body sizes are bounded per route where the body is read (a server's 256 MiB for raw
//!   loads, `worker.max-request-size` for offload bodies, axum's 2 MiB elsewhere).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use types::{ReadableDuration, ReadableSize};

use crate::config::ConfigError;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct HttpLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// How long a connection may take to send one request head (whole).
    pub header_read_timeout: ReadableDuration,
    /// The largest request head (request line and headers) accepted.
    pub max_header_size: ReadableSize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 1024,
            header_read_timeout: ReadableDuration::secs(30),
            max_header_size: ReadableSize::kib(64),
        }
    }
}

/// Smallest `max-header-size`: room for a request line and the headers our own clients send.
const MIN_HEADER_SIZE: u64 = 1024;
/// Largest `max-header-size`: a request head is parsed in memory, whole.
const MAX_HEADER_SIZE: u64 = 16 << 20;

impl HttpLimits {
    /// Checks the values a listener cannot work with; errors name the key under `[http]`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_connections == 0 {
            return Err(ConfigError::invalid(
                "http.max-connections",
                "expected at least 1, found 0",
            ));
        }
        if self.header_read_timeout.duration() < Duration::from_millis(10) {
            return Err(ConfigError::invalid(
                "http.header-read-timeout",
                format!("expected at least 10ms, found {}", self.header_read_timeout),
            ));
        }
        let size = self.max_header_size.bytes();
        if !(MIN_HEADER_SIZE..=MAX_HEADER_SIZE).contains(&size) {
            return Err(ConfigError::invalid(
                "http.max-header-size",
                format!(
                    "expected between {} and {}, found {}",
                    ReadableSize(MIN_HEADER_SIZE),
                    ReadableSize(MAX_HEADER_SIZE),
                    self.max_header_size
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_section_is_the_default() {
        let doc = include_str!("http_limits.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("//! [http]"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| format!("{}\n", l.trim_start_matches("//!").trim_start()))
            .collect();
        let parsed: HttpLimits = toml::from_str(&example).unwrap();
        assert_eq!(parsed, HttpLimits::default());
        parsed.validate().unwrap();
    }

    #[test]
    fn unusable_values_are_refused_by_name() {
        let bad = [
            ("max-connections = 0", "http.max-connections"),
            ("header-read-timeout = \"1ms\"", "http.header-read-timeout"),
            ("max-header-size = \"100B\"", "http.max-header-size"),
            ("max-header-size = \"1GiB\"", "http.max-header-size"),
        ];
        for (line, key) in bad {
            let limits: HttpLimits = toml::from_str(line).unwrap();
            let e = limits.validate().unwrap_err().to_string();
            assert!(e.contains(key), "{line}: {e}");
        }
        let unknown = toml::from_str::<HttpLimits>("max-conns = 3").unwrap_err();
        assert!(unknown.to_string().contains("max-conns"), "{unknown}");
    }
}
