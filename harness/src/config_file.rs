//! The one config writer: a node's config file is its program's own config struct
//! ([`server::config::ServerConfig`], [`worker::WorkerConfig`]) built in Rust, usually with
//! struct update syntax from its defaults, and serialized with `toml::to_string`.
//!
//! Why not TOML written by hand: a hand-built table can name a key the program does not have
//! (the node then refuses to start, at best in another process's log) or set a value of the
//! wrong type, and nothing ties it to the struct when a key is renamed. A struct cannot name a
//! key that does not exist, and the compiler follows every rename.
//!
//! Serializing is not enough on its own: the file must load back, through the loader the node
//! uses ([`node::config::parse`], which refuses unknown keys), into the same struct. A
//! serializer that renders a value its deserializer reads differently (a size, a duration, an
//! escaped key, a float) would make the node run with something else than what its caller
//! built. So [`render`] loads what it rendered and refuses it unless it is equal, every time,
//! before the file is written.
//!
//! Validation (values that parse but cannot work) is left to the node: a test may write an
//! invalid config on purpose to see the node refuse it. A test that needs a key the struct
//! cannot express (an unknown key, a value of the wrong type) writes it with
//! [`render_with_raw_key`], which says so in its name.

use std::fmt::Debug;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A node program's config struct.
pub trait NodeConfig: Serialize + DeserializeOwned + PartialEq + Debug {
    /// The program's name, as in its listening line (`{PROGRAM} listening on http://ADDR`).
    const PROGRAM: &'static str;
    /// The `stratus` subcommand that runs the same program (`stratus server`).
    const SUBCOMMAND: &'static str;
}

impl NodeConfig for server::config::ServerConfig {
    const PROGRAM: &'static str = "stratus-server";
    const SUBCOMMAND: &'static str = "server";
}

impl NodeConfig for worker::WorkerConfig {
    const PROGRAM: &'static str = "stratus-worker";
    const SUBCOMMAND: &'static str = "worker";
}

impl NodeConfig for pd::PdConfig {
    const PROGRAM: &'static str = "stratus-pd";
    const SUBCOMMAND: &'static str = "pd";
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("cannot render the {program} config: cause={cause}")]
    Render {
        program: &'static str,
        cause: toml::ser::Error,
    },
    /// The rendered text does not load back into an equal struct: a bug of a config type's
    /// serialization, caught before a node runs with a config nobody built.
    #[error(
        "the rendered {program} config does not load back equal: cause={cause}\n--- rendered ---\n{text}"
    )]
    RoundTrip {
        program: &'static str,
        cause: String,
        text: String,
    },
    #[error("the {program} config has no section {section}: it is not a table")]
    NoSection {
        program: &'static str,
        section: String,
    },
    #[error("cannot write the file: path={} cause={cause}", path.display())]
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },
}

/// The config as TOML, proven to load back equal through the nodes' loader.
pub fn render<T: NodeConfig>(config: &T) -> Result<String, ConfigFileError> {
    let text = toml::to_string(config).map_err(|cause| ConfigFileError::Render {
        program: T::PROGRAM,
        cause,
    })?;
    let round_trip = |cause: String| ConfigFileError::RoundTrip {
        program: T::PROGRAM,
        cause,
        text: text.clone(),
    };
    let loaded: T =
        node::config::parse(&text, "the rendered config").map_err(|e| round_trip(e.to_string()))?;
    if &loaded != config {
        return Err(round_trip(format!(
            "loaded {loaded:?}, expected {config:?}"
        )));
    }
    Ok(text)
}

/// Writes [`render`]'s text to `path` (see [`write_atomically`]).
pub fn write<T: NodeConfig>(path: &Path, config: &T) -> Result<(), ConfigFileError> {
    write_atomically(path, &render(config)?)
}

/// The config with one key the struct cannot express: `key = value` in `[section]` (`None`:
/// at the top level), replacing the struct's value if it has one. Not checked to load back:
/// it is for tests proving that a node refuses an unknown key or a value of the wrong type.
pub fn render_with_raw_key<T: NodeConfig>(
    config: &T,
    section: Option<&str>,
    key: &str,
    value: toml::Value,
) -> Result<String, ConfigFileError> {
    let render_err = |cause| ConfigFileError::Render {
        program: T::PROGRAM,
        cause,
    };
    let mut table = toml::Table::try_from(config).map_err(render_err)?;
    let target = match section {
        None => &mut table,
        Some(name) => table
            .entry(name)
            .or_insert_with(|| toml::Table::new().into())
            .as_table_mut()
            .ok_or_else(|| ConfigFileError::NoSection {
                program: T::PROGRAM,
                section: name.to_string(),
            })?,
    };
    target.insert(key.to_string(), value);
    toml::to_string(&table).map_err(render_err)
}

/// Writes `text` to a temporary name beside `path` and renames it over `path`, so that a
/// reader (a node starting, a server sampling its `cpu-load` file, `stratus sql` reading the
/// cluster file) never sees half a file. The directory is created if missing.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), ConfigFileError> {
    let err = |cause| ConfigFileError::Write {
        path: path.to_path_buf(),
        cause,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvengine::DfsSection;
    use server::config::{KvEngineSection, RangeConfig, ServerConfig, ServerSection, WalSync};
    use types::{ReadableDuration, ReadableSize};
    use worker::WorkerConfig;

    /// A server config away from the defaults wherever serialization could go wrong: escaped
    /// keys, sizes that print in several units, sub-second durations, a float, an enum, a list
    /// of tables, a huge count, S3.
    fn unusual_server() -> ServerConfig {
        ServerConfig {
            server: ServerSection {
                addr: "127.0.0.1:0".into(),
                data_dir: "/tmp/d a/\u{e9}".into(),
                node_id: 65535,
                labels: [("zone".to_string(), "b \"quoted\"".to_string())].into(),
                ranges: vec![
                    RangeConfig {
                        start: String::new(),
                        end: node::config::escape_key(b"t\x80\x00\\'\""),
                    },
                    RangeConfig {
                        start: node::config::escape_key(b"t\x80\x00\\'\""),
                        end: String::new(),
                    },
                ],
                tso: false,
                // https: the config below has TLS, which refuses http URLs of other nodes.
                tso_addr: "https://127.0.0.1:9".into(),
                pd_endpoints: Vec::new(),
                pd_heartbeat_interval: ReadableDuration::millis(250),
                region_split_size: ReadableSize(3 * 1024 + 1),
                split_check_interval: ReadableDuration::millis(1500),
                shutdown_grace: ReadableDuration::millis(1),
            },
            kvengine: KvEngineSection {
                remote_coprocessor_workers: vec![server::config::WorkerEndpoint {
                    addr: "https://127.0.0.1:1/coprocessor".into(),
                    zone: types::Zone::label("b"),
                }],
                remote_coprocessor_load_aware_cpu_threshold: 0.1 + 0.2,
                remote_coprocessor_load_aware_force_blocks_size: ReadableSize(1 << 50),
                remote_coprocessor_load_aware_force_num_ranges: 1 << 40,
                remote_coprocessor_long_query_after: vec![ReadableDuration::millis(1)],
                block_size: ReadableSize::kib(1),
                wal_sync: WalSync::GroupCommit,
                ..KvEngineSection::default()
            },
            dfs: DfsSection {
                s3_bucket: "bucket".into(),
                s3_endpoint: "http://127.0.0.1:9000".into(),
                s3_prefix: "e2e/".into(),
                s3_max_attempts: 1,
                ..DfsSection::default()
            },
            raft: server::config::RaftConfig {
                peers: vec![server::config::PeerConfig {
                    id: 65535,
                    addr: "https://127.0.0.1:9".into(),
                    zone: types::Zone::label("b"),
                }],
                replicas: 1,
                tick_interval: ReadableDuration::millis(50),
                ..Default::default()
            },
            http: node::http::HttpLimits {
                max_connections: 3,
                header_read_timeout: ReadableDuration::millis(250),
                max_header_size: ReadableSize(1500),
            },
            security: node::tls::SecurityConfig {
                ca_path: "/tls/ca.pem".into(),
                cert_path: "/tls/a b.pem".into(),
                key_path: "/tls/a-key.pem".into(),
                cert_allowed_cn: vec!["stratus-server".into(), "x \"y\"".into()],
                node_cn: vec!["stratus-server".into()],
                admin_cn: vec!["stratus-admin".into()],
                admin_token_path: "/tls/admin token".into(),
            },
        }
    }

    #[test]
    fn server_configs_load_back_equal_through_the_servers_loader() {
        for config in [ServerConfig::default(), unusual_server()] {
            let text = render(&config).unwrap();
            let loaded: ServerConfig = node::config::parse(&text, "t").unwrap();
            assert_eq!(loaded, config);
        }
        unusual_server().validate().unwrap();
    }

    #[test]
    fn worker_configs_load_back_equal_through_the_workers_loader() {
        let unusual = WorkerConfig {
            cop_topn_max_pushdown_rows: 7,
            worker: worker::WorkerSection {
                labels: [("zone".to_string(), "a".to_string())].into(),
                max_request_size: ReadableSize(123 << 20),
                ..worker::WorkerSection::default()
            },
            cop_limiter: worker::CopLimiterSection {
                high_mem_ratio: 1.0 / 3.0,
                memory_limit: ReadableSize(1),
                ..worker::CopLimiterSection::default()
            },
            ..WorkerConfig::default()
        };
        for config in [WorkerConfig::default(), unusual] {
            let text = render(&config).unwrap();
            assert_eq!(WorkerConfig::parse(&text, "t").unwrap(), config);
        }
    }

    #[test]
    fn a_value_that_would_load_back_different_is_refused_before_any_file_is_written() {
        // Durations print in whole microseconds: a sub-microsecond part is lost on the way.
        let mut config = ServerConfig::default();
        config.server.shutdown_grace = ReadableDuration(std::time::Duration::from_nanos(1500));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.toml");
        let e = write(&path, &config).unwrap_err();
        assert!(matches!(e, ConfigFileError::RoundTrip { .. }), "{e}");
        assert!(!path.exists());
    }

    #[test]
    fn a_raw_key_lands_in_its_section_and_the_node_loader_refuses_it() {
        let text = render_with_raw_key(
            &ServerConfig::default(),
            Some("kvengine"),
            "remote-coprocessor-adress",
            "x".into(),
        )
        .unwrap();
        let e = node::config::parse::<ServerConfig>(&text, "t").unwrap_err();
        assert!(e.to_string().contains("remote-coprocessor-adress"), "{e}");
        let text = render_with_raw_key(
            &WorkerConfig::default(),
            None,
            "cop-topn-max-pushdown-rows",
            "many".into(),
        )
        .unwrap();
        assert!(WorkerConfig::parse(&text, "t").is_err());
        let e = render_with_raw_key(
            &WorkerConfig::default(),
            Some("cop-topn-max-pushdown-rows"),
            "x",
            1.into(),
        )
        .unwrap_err();
        assert!(matches!(e, ConfigFileError::NoSection { .. }), "{e}");
    }

    #[test]
    fn written_files_replace_the_old_one_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nodes/server-a.toml");
        write(&path, &ServerConfig::default()).unwrap();
        write(&path, &unusual_server()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let loaded: ServerConfig = node::config::parse(&text, "t").unwrap();
        assert_eq!(loaded, unusual_server());
        assert!(!dir.path().join("nodes/server-a.toml.tmp").exists());
    }
}
