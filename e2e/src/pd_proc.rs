//! `stratus-pd` processes: their config and what tests ask them.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use harness::NodeConfig;
use harness::config_file;
use harness::supervisor::{Launch, Signal};
use pd::PdConfig;
use pd::config::PdSection;
use prost::Message;
use types::ReadableDuration;
use wire::pd::MembersResponse;

use crate::binaries;
use crate::http_client::try_get;
use crate::process::{TestNode, log_path};

/// An instance to start: its directory (config, embedded store, log) and its config.
#[derive(Clone, Debug)]
pub struct PdSetup {
    pub dir: PathBuf,
    pub config: PdConfig,
}

impl Deref for PdSetup {
    type Target = PdConfig;
    fn deref(&self) -> &PdConfig {
        &self.config
    }
}

impl DerefMut for PdSetup {
    fn deref_mut(&mut self) -> &mut PdConfig {
        &mut self.config
    }
}

impl PdSetup {
    /// An instance named `name` on `port` (0: any; a restarted instance must keep its URL, so
    /// tests that restart reserve ports) over `etcd` (empty: the embedded store), with a 1 s
    /// lease and window (the test etcd's minimum lease is 1 s).
    pub fn new(dir: &Path, name: &str, port: u16, etcd: &[String]) -> PdSetup {
        std::fs::create_dir_all(dir).expect("pd dir");
        PdSetup {
            dir: dir.to_path_buf(),
            config: PdConfig {
                pd: PdSection {
                    name: name.into(),
                    addr: format!("127.0.0.1:{port}"),
                    data_dir: dir.join("data"),
                    etcd_endpoints: etcd.to_vec(),
                    lease_ttl: ReadableDuration::secs(1),
                    tso_window: ReadableDuration::secs(1),
                    shutdown_grace: ReadableDuration::secs(2),
                    ..PdSection::default()
                },
                ..PdConfig::default()
            },
        }
    }

    pub fn command(&self) -> Command {
        let path = self.dir.join("pd.toml");
        config_file::write(&path, &self.config).unwrap_or_else(|e| panic!("{e}"));
        let mut cmd = Command::new(binaries::binary(binaries::PD));
        cmd.arg("--config").arg(path);
        cmd
    }
}

/// A running `stratus-pd`.
pub struct PdProc {
    node: TestNode,
    setup: PdSetup,
}

impl PdProc {
    pub fn start(setup: &PdSetup) -> PdProc {
        let launch = Launch::new(
            format!("{} {}", PdConfig::PROGRAM, setup.pd.name),
            setup.command(),
            PdConfig::PROGRAM,
            log_path(&setup.dir, "pd"),
        );
        PdProc {
            node: TestNode::start(launch),
            setup: setup.clone(),
        }
    }

    pub fn base_url(&self) -> &str {
        self.node.base_url()
    }

    pub fn name(&self) -> &str {
        &self.setup.pd.name
    }

    /// What the instance says about itself and the leader; None when it does not answer.
    pub fn members(&self) -> Option<MembersResponse> {
        let reply = try_get(&self.node.url(wire::paths::PD_MEMBERS)).ok()?;
        if !reply.status.is_success() {
            return None;
        }
        MembersResponse::decode(reply.body.as_ref()).ok()
    }

    pub fn kill(&mut self) {
        self.node.kill()
    }

    pub fn signal(&mut self, signal: Signal) {
        self.node.signal(signal)
    }

    pub fn restart(&mut self) {
        self.node.restart(self.setup.command())
    }

    pub fn output_report(&self) -> String {
        self.node.output_report()
    }

    pub fn metrics_text(&self) -> String {
        crate::http_client::get_text(&self.node.url("/metrics"))
    }
}

/// The URL of the instance every live one of `pds` names as leader, waiting up to `timeout`
/// for them to agree on one that also says it leads.
pub fn wait_for_leader(pds: &[&PdProc], timeout: Duration) -> String {
    let started = Instant::now();
    loop {
        let views: Vec<MembersResponse> = pds.iter().filter_map(|p| p.members()).collect();
        if let Some(first) = views.first()
            && !first.leader.is_empty()
            && views.iter().all(|v| v.leader == first.leader)
            && views.iter().any(|v| v.url == first.leader)
        {
            return first.leader.clone();
        }
        assert!(
            started.elapsed() < timeout,
            "no agreed placement leader after {timeout:?}: {views:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `f` to completion on a fresh current-thread runtime: a test's blocking call into
/// `node::PdClient` or a metadata store.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a test runtime")
        .block_on(f)
}

/// One timestamp from the placement driver at `endpoints` (following its leader for up to
/// 15 s); panics when none comes.
pub fn timestamp(endpoints: &[String]) -> u64 {
    block_on(node::PdClient::new(endpoints, Duration::from_secs(15)).get_ts())
        .unwrap_or_else(|e| panic!("{e}"))
}
