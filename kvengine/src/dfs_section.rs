//! The `[dfs]` section of a process's config file: where SST files live, as people write it.
//! Servers and workers both read it (a worker must point at the same store as the servers it
//! serves); it lives beside [`DfsConfig`], the engine's view of the same choice, so that the
//! node plumbing (`node`) and the client need no engine to load configs.
//!
//! ```toml
//! [dfs]
//! local-dir = "./stratus-data/dfs"   # used when s3-bucket is empty (the default)
//! s3-bucket = ""                     # non-empty: files live in this S3 bucket
//! s3-endpoint = ""                   # an S3-compatible server, e.g. "http://127.0.0.1:9000"; empty = AWS
//! s3-region = "us-east-1"
//! s3-prefix = ""
//! s3-path-style = true
//! s3-timeout = "30s"                 # per attempt
//! s3-max-attempts = 5
//! s3-initial-backoff = "100ms"
//! cache-dir = ""                     # a whole-file cache in front of S3; empty = none
//! cache-capacity = "10GiB"
//! zone = ""                          # the store's zone label; empty = none (see below)
//! ```
//!
//! S3 credentials come from the standard AWS environment variables.
//!
//! `zone` labels the store like a node (a bucket that lives in one zone, as an S3 Express One
//! Zone directory bucket does). The nodes count the bytes they read from and write to an S3
//! store as `object_store` traffic under this zone, so they are cross-zone only when the
//! store has a zone and it differs from the node's; an unlabelled store is never cross-zone
//! (a regional bucket is no zone's). A local directory moves no network bytes.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use types::Zone;
use types::units::{ReadableDuration, ReadableSize};

use crate::s3_dfs::S3Options;
use crate::{CacheConfig, DfsConfig};

/// A `[dfs]` value that parses but cannot work. Its text is the one every config error of a
/// node has (`invalid config value <key>: <message>`); a node maps it onto its own config
/// error with the same key and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid config value {key}: {message}")]
pub struct InvalidDfsSection {
    /// The full key, e.g. `dfs.s3-bucket`.
    pub key: &'static str,
    pub message: String,
}

impl InvalidDfsSection {
    fn new(key: &'static str, message: impl Into<String>) -> InvalidDfsSection {
        InvalidDfsSection {
            key,
            message: message.into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct DfsSection {
    pub local_dir: PathBuf,
    pub s3_bucket: String,
    pub s3_endpoint: String,
    pub s3_region: String,
    pub s3_prefix: String,
    pub s3_path_style: bool,
    pub s3_timeout: ReadableDuration,
    pub s3_max_attempts: u32,
    pub s3_initial_backoff: ReadableDuration,
    pub cache_dir: PathBuf,
    pub cache_capacity: ReadableSize,
    /// The store's zone label (`""`: none); see the module docs.
    #[serde(with = "types::zone::optional")]
    pub zone: Option<Zone>,
}

impl Default for DfsSection {
    fn default() -> Self {
        DfsSection {
            local_dir: PathBuf::from("./stratus-data/dfs"),
            s3_bucket: String::new(),
            s3_endpoint: String::new(),
            s3_region: "us-east-1".into(),
            s3_prefix: String::new(),
            s3_path_style: true,
            s3_timeout: ReadableDuration::secs(30),
            s3_max_attempts: 5,
            s3_initial_backoff: ReadableDuration::millis(100),
            cache_dir: PathBuf::new(),
            cache_capacity: ReadableSize::gib(10),
            zone: None,
        }
    }
}

impl DfsSection {
    /// The store this section describes.
    pub fn to_dfs_config(&self) -> Result<DfsConfig, InvalidDfsSection> {
        if self.s3_bucket.is_empty() {
            if self.local_dir.as_os_str().is_empty() {
                return Err(InvalidDfsSection::new(
                    "dfs.local-dir",
                    "expected a directory (or set dfs.s3-bucket), found an empty path",
                ));
            }
            return Ok(DfsConfig::Local {
                dir: self.local_dir.clone(),
            });
        }
        if self.s3_bucket.len() < 3 {
            return Err(InvalidDfsSection::new(
                "dfs.s3-bucket",
                format!(
                    "expected a bucket name of at least 3 characters, found {:?}",
                    self.s3_bucket
                ),
            ));
        }
        if self.s3_max_attempts == 0 {
            return Err(InvalidDfsSection::new(
                "dfs.s3-max-attempts",
                "expected at least 1, found 0",
            ));
        }
        let is_url =
            self.s3_endpoint.starts_with("http://") || self.s3_endpoint.starts_with("https://");
        if !self.s3_endpoint.is_empty() && !is_url {
            return Err(InvalidDfsSection::new(
                "dfs.s3-endpoint",
                format!(
                    "expected an http:// or https:// URL, found {:?}",
                    self.s3_endpoint
                ),
            ));
        }
        let mut options = S3Options::new(self.s3_bucket.clone());
        options.endpoint = (!self.s3_endpoint.is_empty()).then(|| self.s3_endpoint.clone());
        options.region = self.s3_region.clone();
        options.prefix = self.s3_prefix.clone();
        options.path_style = self.s3_path_style;
        options.timeout = self.s3_timeout.duration();
        options.max_attempts = self.s3_max_attempts;
        options.initial_backoff = self.s3_initial_backoff.duration();
        let cache = (!self.cache_dir.as_os_str().is_empty()).then(|| CacheConfig {
            dir: self.cache_dir.clone(),
            budget_bytes: self.cache_capacity.bytes(),
        });
        Ok(DfsConfig::S3 {
            options,
            credentials: None,
            cache,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_a_local_directory() {
        match DfsSection::default().to_dfs_config().unwrap() {
            DfsConfig::Local { dir } => assert_eq!(dir, PathBuf::from("./stratus-data/dfs")),
            other => panic!("expected a local dir, found {other:?}"),
        }
    }

    #[test]
    fn a_bucket_selects_s3_with_the_cache() {
        let s = DfsSection {
            s3_bucket: "stratus".into(),
            s3_endpoint: "http://127.0.0.1:9000".into(),
            cache_dir: "/tmp/c".into(),
            ..DfsSection::default()
        };
        match s.to_dfs_config().unwrap() {
            DfsConfig::S3 { options, cache, .. } => {
                assert_eq!(options.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
                assert!(options.path_style);
                assert_eq!(cache.unwrap().budget_bytes, 10 << 30);
            }
            other => panic!("expected S3, found {other:?}"),
        }
    }

    #[test]
    fn bad_values_name_their_key() {
        let bad = DfsSection {
            s3_bucket: "stratus".into(),
            s3_endpoint: "127.0.0.1:9000".into(),
            ..DfsSection::default()
        };
        assert!(
            bad.to_dfs_config()
                .unwrap_err()
                .to_string()
                .contains("dfs.s3-endpoint")
        );
        let bad = DfsSection {
            s3_bucket: "ab".into(),
            ..DfsSection::default()
        };
        assert!(
            bad.to_dfs_config()
                .unwrap_err()
                .to_string()
                .contains("dfs.s3-bucket")
        );
    }

    #[test]
    fn the_zone_label_is_optional_and_empty_means_none() {
        let unlabelled: DfsSection = toml::from_str("").unwrap();
        assert_eq!(unlabelled.zone, None);
        let empty: DfsSection = toml::from_str("zone = \"\"").unwrap();
        assert_eq!(empty.zone, None);
        let zoned: DfsSection = toml::from_str("zone = \"b\"").unwrap();
        assert_eq!(zoned.zone, Zone::label("b"));
        assert!(toml::to_string(&zoned).unwrap().contains("zone = \"b\""));
    }
}
