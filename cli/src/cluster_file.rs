//! The cluster file: a TOML [`ClientConfig`] naming the servers (and optionally the workers,
//! labels and every other client setting) of the cluster to talk to.

use std::path::{Path, PathBuf};

use client::ClientConfig;

#[derive(Debug, thiserror::Error)]
pub enum ClusterFileError {
    #[error("cannot read cluster file: path={} reason={reason}", path.display())]
    Read { path: PathBuf, reason: String },
    #[error("cluster file is not a valid client config: path={} reason={reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
}

/// Reads and validates the cluster file at `path`; every error names the file.
pub fn load(path: &Path) -> Result<ClientConfig, ClusterFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| ClusterFileError::Read {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    parse(&text).map_err(|reason| ClusterFileError::Invalid {
        path: path.to_path_buf(),
        reason,
    })
}

/// Parses and validates a cluster file's text.
pub fn parse(text: &str) -> Result<ClientConfig, String> {
    let cfg: ClientConfig = toml::from_str(text).map_err(|e| e.message().to_string())?;
    if cfg.servers.is_empty() && cfg.pd_endpoints.is_empty() {
        return Err(
            "no servers: set `servers = [\"http://host:port\"]` or `pd-endpoints` (the placement driver lists them)"
                .into(),
        );
    }
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_workers_and_zone_are_read() {
        let cfg = parse(
            "servers = [\"http://127.0.0.1:1\"]\nworkers = [\"127.0.0.1:2\"]\nlabels = { zone = \"a\" }\n",
        )
        .unwrap();
        assert_eq!(cfg.servers, ["http://127.0.0.1:1"]);
        assert_eq!(cfg.workers, ["127.0.0.1:2"]);
        assert_eq!(cfg.zone(), types::Zone::label("a"));
    }

    #[test]
    fn a_file_without_servers_is_refused() {
        let e = parse("workers = [\"127.0.0.1:2\"]\n").unwrap_err();
        assert!(e.contains("no servers"), "{e}");
    }

    #[test]
    fn the_placement_driver_and_a_zone_are_enough() {
        let cfg = parse("pd-endpoints = [\"http://127.0.0.1:2479\"]\nlabels = { zone = \"a\" }\n")
            .unwrap();
        assert!(cfg.servers.is_empty());
        assert_eq!(cfg.pd_endpoints, ["http://127.0.0.1:2479"]);
    }

    #[test]
    fn an_unknown_key_is_refused() {
        let e = parse("servers = [\"a:1\"]\nserverz = []\n").unwrap_err();
        assert!(e.contains("serverz"), "{e}");
    }

    #[test]
    fn a_missing_file_error_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.toml");
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
    }
}
