//! Network traffic by path and zone: the closed vocabulary every node meters its bytes in
//! (`node::traffic` counts them), and the header that tells each end of an HTTP exchange the
//! other end's zone.
//!
//! * [`TrafficPath`]: which conversation bytes belong to (client ↔ server, client ↔ worker,
//!   worker ↔ server on the delegate path, server → worker offload, Raft, the placement
//!   driver, the object store, anything else);
//! * [`Direction`]: sent or received, from the counting node's point of view;
//! * [`Role`]: what kind of process counts, which [`TrafficPath::of_call`] and
//!   [`TrafficPath::of_answer`] need for the one path two conversations share
//!   ([`paths::COPROCESSOR`]: a client's request to a server, or a server's offload to a
//!   worker);
//! * [`ZONE_HEADER`]: every request a node sends carries the sender's zone label, and every
//!   answer a node's HTTP server gives carries the answering node's, so both ends know the
//!   peer's zone without a lookup (`""` or no header: no zone).
//!
//! Classification is by the HTTP path alone (plus the role for `/coprocessor`), so the caller
//! and the callee of one exchange put its bytes under the same path without telling each other.

use crate::paths;

/// The header carrying the sending (request) or answering (response) node's zone label; empty
/// or absent means the node has no zone.
pub const ZONE_HEADER: &str = "x-stratus-zone";

types::label_enum! {
    /// Which conversation bytes belong to (`stratus_network_bytes_total{path}`).
    pub enum TrafficPath: "traffic path" {
        /// An entry node and a storage server: coprocessor pages, transaction commands, region
        /// lists, splits, bulk loads.
        ClientServer = "client_server",
        /// An entry node and a worker on the delegate path (`POST /delegate/coprocessor`).
        ClientWorker = "client_worker",
        /// A worker asking the owning server for a snapshot on the delegate path
        /// (`POST /delegate`).
        Delegate = "delegate",
        /// A server shipping a snapshot and a request to a worker (`POST /coprocessor` on a
        /// worker), and the worker's answer.
        Offload = "offload",
        /// Raft messages between servers (`POST /raft/batch`).
        Raft = "raft",
        /// The placement driver and timestamps: heartbeats, TSO, ids, topology watches.
        Pd = "pd",
        /// Reads and writes of SST files in the object store (counted only for a store reached
        /// over the network, S3; see `kvengine::DfsTraffic`).
        ObjectStore = "object_store",
        /// Anything else: metrics scrapes, status and config pages, admin commands, the
        /// placement driver's metadata store.
        Other = "other",
    }
}

types::label_enum! {
    /// Which way bytes went, seen from the node that counts them.
    pub enum Direction: "traffic direction" {
        Sent = "sent",
        Received = "received",
    }
}

types::label_enum! {
    /// What kind of process meters its traffic.
    pub enum Role: "node role" {
        /// A storage server (`stratus server`).
        Server = "server",
        /// A worker (`stratus worker`).
        Worker = "worker",
        /// A placement-driver instance (`stratus pd`).
        Pd = "pd",
        /// An entry node (the client library), or a tool.
        Client = "client",
    }
}

impl TrafficPath {
    /// The path of a request to `path` (an HTTP path, no query) sent by a process of role
    /// `caller`. `/coprocessor` is an offload when a server sends it (servers send it only to
    /// workers), a client's page otherwise.
    pub fn of_call(path: &str, caller: Role) -> TrafficPath {
        match Self::by_path(path) {
            Some(p) => p,
            None if caller == Role::Server => TrafficPath::Offload,
            None => TrafficPath::ClientServer,
        }
    }

    /// The path of a request to `path` answered by a process of role `callee`. `/coprocessor`
    /// is an offload when a worker answers it, a client's page when a server does.
    pub fn of_answer(path: &str, callee: Role) -> TrafficPath {
        match Self::by_path(path) {
            Some(p) => p,
            None if callee == Role::Worker => TrafficPath::Offload,
            None => TrafficPath::ClientServer,
        }
    }

    /// Every path but `/coprocessor`, which is `None` (its class depends on who serves it).
    fn by_path(path: &str) -> Option<TrafficPath> {
        let p = path.trim_end_matches('/');
        Some(match p {
            paths::COPROCESSOR => return None,
            paths::DELEGATE_COPROCESSOR => TrafficPath::ClientWorker,
            paths::DELEGATE => TrafficPath::Delegate,
            // A compaction job is offloaded work, as a coprocessor request is.
            paths::COMPACT => TrafficPath::Offload,
            paths::RAFT_BATCH => TrafficPath::Raft,
            paths::TSO => TrafficPath::Pd,
            paths::REGIONS | paths::SPLIT | paths::RAW_LOAD => TrafficPath::ClientServer,
            _ if p.starts_with("/pd/") => TrafficPath::Pd,
            _ if p.starts_with("/txn/") => TrafficPath::ClientServer,
            _ => TrafficPath::Other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_the_metric_values() {
        let labels: Vec<&str> = TrafficPath::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(
            labels,
            [
                "client_server",
                "client_worker",
                "delegate",
                "offload",
                "raft",
                "pd",
                "object_store",
                "other"
            ]
        );
        let dirs: Vec<&str> = Direction::ALL.iter().map(|d| d.as_str()).collect();
        assert_eq!(dirs, ["sent", "received"]);
    }

    /// Every HTTP path a node serves, with the class its caller and its callee give it.
    #[test]
    fn caller_and_callee_put_an_exchange_under_the_same_path() {
        use TrafficPath::*;
        let table: &[(&str, Role, Role, TrafficPath)] = &[
            (paths::COPROCESSOR, Role::Client, Role::Server, ClientServer),
            (paths::COPROCESSOR, Role::Server, Role::Worker, Offload),
            (paths::COMPACT, Role::Server, Role::Worker, Offload),
            (
                paths::DELEGATE_COPROCESSOR,
                Role::Client,
                Role::Worker,
                ClientWorker,
            ),
            (paths::DELEGATE, Role::Worker, Role::Server, Delegate),
            (paths::RAFT_BATCH, Role::Server, Role::Server, Raft),
            (paths::TSO, Role::Server, Role::Pd, Pd),
            (paths::TSO, Role::Client, Role::Server, Pd),
            (paths::PD_STORE_HEARTBEAT, Role::Server, Role::Pd, Pd),
            (paths::PD_WORKER_HEARTBEAT, Role::Worker, Role::Pd, Pd),
            (paths::PD_WATCH, Role::Client, Role::Pd, Pd),
            (paths::PREWRITE, Role::Client, Role::Server, ClientServer),
            (paths::SCAN_LOCK, Role::Client, Role::Server, ClientServer),
            (paths::REGIONS, Role::Client, Role::Server, ClientServer),
            (paths::SPLIT, Role::Client, Role::Server, ClientServer),
            (paths::RAW_LOAD, Role::Client, Role::Server, ClientServer),
            (paths::METRICS, Role::Client, Role::Worker, Other),
            (paths::STATUS, Role::Client, Role::Server, Other),
            (paths::ADMIN_FLUSH, Role::Client, Role::Server, Other),
            ("/v3/kv/range", Role::Pd, Role::Client, Other),
        ];
        for &(path, caller, callee, want) in table {
            assert_eq!(
                TrafficPath::of_call(path, caller),
                want,
                "{path} from {caller}"
            );
            assert_eq!(
                TrafficPath::of_answer(path, callee),
                want,
                "{path} at {callee}"
            );
        }
    }

    #[test]
    fn a_trailing_slash_does_not_change_the_path() {
        assert_eq!(
            TrafficPath::of_call("/delegate/", Role::Worker),
            TrafficPath::Delegate
        );
        assert_eq!(
            TrafficPath::of_answer("/coprocessor/", Role::Worker),
            TrafficPath::Offload
        );
    }
}
