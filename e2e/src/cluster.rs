//! Test clusters: a temporary directory, the object store (a local directory or a
//! `stratus-test-s3` process), and the processes a test starts in them.

use std::path::PathBuf;

use crate::s3_proc::{S3Faults, S3Proc, Store};
use crate::server_proc::{ServerProc, ServerSetup};
use crate::worker_proc::{WorkerProc, WorkerSetup};

/// Which object store the cluster's servers and workers share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// A local directory (the default store).
    Local,
    /// A bucket on a `stratus-test-s3` process.
    S3,
}

/// A directory, the store, and the S3 process if any. Processes started from its configs
/// must be dropped before it (declare them first in a struct, or bind them later in a test).
pub struct Cluster {
    pub s3: Option<S3Proc>,
    pub store: Store,
    /// Dropped last: deletes every file of the test.
    pub dir: tempfile::TempDir,
}

impl Cluster {
    pub fn new(kind: StoreKind) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("stratus-e2e-")
            .tempdir()
            .expect("tempdir");
        let (s3, store) = match kind {
            StoreKind::Local => (None, Store::Local(dir.path().join("dfs"))),
            StoreKind::S3 => {
                let s3 = S3Proc::start(&dir.path().join("s3"), S3Faults::default());
                let store = s3.store("e2e/");
                (Some(s3), store)
            }
        };
        Cluster { s3, store, dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Another `stratus-test-s3` process over this cluster's bucket directory, with `faults`
    /// (S3 clusters only): the same objects through another endpoint.
    pub fn s3_endpoint_with(&self, faults: S3Faults) -> S3Proc {
        let s3 = self.s3.as_ref().expect("an S3 cluster");
        S3Proc::start(s3.dir(), faults)
    }

    /// The store at `s3` with this cluster's prefix.
    pub fn store_at(&self, s3: &S3Proc) -> Store {
        s3.store("e2e/")
    }

    /// A server setup in `dir/name`, on the cluster's store.
    pub fn server_config(&self, name: &str) -> ServerSetup {
        ServerSetup::new(&self.path(name), &self.store)
    }

    /// A worker setup in `dir/name`, on the cluster's store.
    pub fn worker_config(&self, name: &str) -> WorkerSetup {
        WorkerSetup::new(&self.path(name), &self.store)
    }
}

/// A worker, a server that offloads every coprocessor request to it (and runs the TSO), and a
/// server that never offloads (taking timestamps from the first). Write the same data to both
/// servers (`transactions::commit` with both) and compare their answers.
pub struct OffloadPair {
    pub remote: ServerProc,
    pub local: ServerProc,
    pub worker: WorkerProc,
    pub cluster: Cluster,
}

impl OffloadPair {
    /// `tweak` adjusts both servers' configs (before the offload and TSO settings).
    pub fn start(kind: StoreKind, tweak: impl Fn(&mut ServerSetup)) -> OffloadPair {
        let cluster = Cluster::new(kind);
        let worker = WorkerProc::start(&cluster.worker_config("worker"));
        let mut remote_cfg = cluster.server_config("remote");
        tweak(&mut remote_cfg);
        remote_cfg.server.node_id = 1;
        remote_cfg.offload_all_to_worker(&worker);
        let remote = ServerProc::start(&remote_cfg);
        let mut local_cfg = cluster.server_config("local");
        tweak(&mut local_cfg);
        local_cfg.server.node_id = 2;
        local_cfg.tso_from(&remote);
        let local = ServerProc::start(&local_cfg);
        OffloadPair {
            remote,
            local,
            worker,
            cluster,
        }
    }

    pub fn both(&self) -> [&ServerProc; 2] {
        [&self.remote, &self.local]
    }
}
