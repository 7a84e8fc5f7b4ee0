//! End-to-end test harness: real `stratus-server`, `stratus-worker` and `stratus-test-s3`
//! processes on 127.0.0.1 with ephemeral ports, always stopped (SIGKILL on drop).
//!
//! * [`binaries`]: locating (and building once) the binaries under test;
//! * [`process`]: a child process, its listening line, SIGTERM / SIGKILL;
//! * [`server_proc`], [`worker_proc`], [`s3_proc`]: the three processes, their configs and
//!   typed HTTP calls; [`cluster`]: a temporary directory, a store, common topologies;
//! * [`http_client`]: blocking HTTP with protobuf bodies; [`metrics`]: Prometheus text;
//! * [`transactions`]: identical two-phase commits on several servers sharing a TSO;
//! * [`coprocessor`]: requests with region context, paging, row decoding;
//! * [`entry_client`]: the entry node's library (`client::Client`) on its own runtime;
//! * [`sample_table`]: a table with known answers;
//! * [`fake_worker`]: a worker stand-in answering a fixed status (fault injection);
//! * [`offload_body`]: offload bodies captured from a server, changed, sent to a worker;
//! * [`zones`]: zone labels, several zoned workers, the delegate endpoint of a worker.

pub mod binaries;
pub mod cluster;
pub mod coprocessor;
pub mod entry_client;
pub mod fake_worker;
pub mod http_client;
pub mod metrics;
pub mod offload_body;
pub mod process;
pub mod s3_proc;
pub mod sample_table;
pub mod server_proc;
pub mod transactions;
pub mod worker_proc;
pub mod zones;
