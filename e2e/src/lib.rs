//! End-to-end test harness: real `stratus-server`, `stratus-worker` and `stratus-test-s3`
//! processes on 127.0.0.1 with ephemeral ports, always stopped (SIGKILL on drop).
//!
//! The processes run under the `harness` crate, as `stratus up`'s nodes do: one supervisor
//! ([`harness::supervisor`]), configs that are the programs' own config structs
//! ([`harness::config_file`]), one blocking HTTP client ([`harness::http`]) and strict metric
//! reads ([`harness::metrics`]). What this crate adds is what tests need on top:
//!
//! * [`bank`]: a bank workload and the routing-table checks of the scheduling tests;
//! * [`binaries`]: locating (and building once) the binaries under test;
//! * [`process`]: a node whose failures panic and whose log is shown when its test fails;
//! * [`pd_proc`]: placement-driver instances (`stratus-pd`) over a test etcd
//!   ([`harness::etcd`]) or the embedded store;
//! * [`server_proc`], [`worker_proc`], [`s3_proc`]: the three processes, their setups (a
//!   directory and a typed config) and typed HTTP calls; [`cluster`]: a temporary directory, a
//!   store, common topologies; [`replicated`]: three servers replicating every region with
//!   Raft, each of which a test can SIGKILL, restart, SIGSTOP and SIGCONT;
//! * [`http_client`]: the HTTP calls with a test's assertions (protobuf bodies, 200 expected);
//! * [`transactions`]: identical two-phase commits on several servers sharing a TSO;
//! * [`coprocessor`]: requests with region context, paging, row decoding;
//! * [`entry_client`]: the entry node's library (`client::Client`) on its own runtime;
//! * [`sample_table`]: a table with known answers;
//! * [`fake_worker`]: a worker stand-in answering a fixed status (fault injection);
//! * [`fake_server`]: a storage-server stand-in answering scripted queues per path and
//!   recording every request (client routing tests);
//! * [`offload_body`]: offload bodies captured from a server, changed, sent to a worker;
//! * [`zones`]: zone labels, several zoned workers, the delegate endpoint of a worker.

pub mod bank;
pub mod binaries;
pub mod cluster;
pub mod coprocessor;
pub mod entry_client;
pub mod fake_server;
pub mod fake_worker;
pub mod http_client;
pub mod offload_body;
pub mod pd_proc;
pub mod process;
pub mod replicated;
pub mod s3_proc;
pub mod sample_table;
pub mod server_proc;
pub mod sql_endpoint;
pub mod transactions;
pub mod worker_proc;
pub mod zones;
