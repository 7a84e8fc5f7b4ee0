//! The SQL front (`sqlfront`: DataFusion over the coprocessor) in process, for the tests that
//! drive the cluster with SQL: a [`FrontClient`] holds a client for the rest of the test
//! process (a front session's tables are `'static` for DataFusion) and the runtime its
//! statements run on. Included with `mod front_client;` by the tests that use it, so the other
//! test binaries do not link DataFusion.

#![allow(dead_code)] // each test uses a part
#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use client::sql::QueryResult;
use client::{Client, ClientConfig};
use e2e::server_proc::ServerProc;
use sqlfront::{Analyzed, FrontError, FrontSession};

pub struct FrontClient {
    pub client: &'static Client,
    rt: tokio::runtime::Runtime,
}

impl FrontClient {
    /// A client for `servers` (the first runs the TSO), with `tweak` applied to the config;
    /// the cache admits results of any process time (test tables answer in well under the
    /// default 5 ms).
    pub fn new(servers: &[&ServerProc], tweak: impl FnOnce(&mut ClientConfig)) -> FrontClient {
        let mut cfg = ClientConfig::new(servers.iter().map(|s| s.base_url().to_string()));
        cfg.cop_cache.admission_min_process_time = types::ReadableDuration::millis(0);
        tweak(&mut cfg);
        FrontClient::with_config(cfg)
    }

    pub fn with_config(cfg: ClientConfig) -> FrontClient {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let client = {
            let _guard = rt.enter();
            Client::new(cfg).expect("valid client config")
        };
        FrontClient {
            client: Box::leak(Box::new(client)),
            rt,
        }
    }

    /// A new session (its own variables and warnings, as a connection has).
    pub fn session(&self) -> FrontSession {
        FrontSession::new(self.client)
    }

    pub fn block_on<F: std::future::Future>(&self, fut: F) -> F::Output {
        self.rt.block_on(fut)
    }

    pub fn try_exec(&self, s: &mut FrontSession, sql: &str) -> Result<QueryResult, FrontError> {
        self.rt
            .block_on(s.execute(sql))
            .map(sqlfront::Output::into_query_result)
    }

    /// Runs `sql`, panicking with the error's chain when it fails.
    pub fn exec(&self, s: &mut FrontSession, sql: &str) -> QueryResult {
        self.try_exec(s, sql)
            .unwrap_or_else(|e| panic!("{sql}: {}", node::error_chain(&e)))
    }

    /// `EXPLAIN ANALYZE sql`, typed.
    pub fn analyze(&self, s: &mut FrontSession, sql: &str) -> Analyzed {
        self.rt
            .block_on(s.analyze(sql))
            .unwrap_or_else(|e| panic!("EXPLAIN ANALYZE {sql}: {}", node::error_chain(&e)))
    }
}

impl Drop for FrontClient {
    /// The client outlives the test's cluster: stop its background work with it.
    fn drop(&mut self) {
        self.client.close();
    }
}
