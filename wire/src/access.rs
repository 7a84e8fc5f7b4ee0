//! Who may call which HTTP path: the one table every listener checks a caller against when
//! TLS names its peers (`node::access`).
//!
//! Three tiers, by what a call can do:
//!
//! * [`Access::Client`]: reads, transactions, coprocessor pages, the placement driver's views
//!   and timestamps, status/config/metrics pages: what an entry node (a SQL front, a tool)
//!   needs;
//! * [`Access::Node`]: conversations only cluster nodes have with each other: Raft messages, a
//!   server's offload to a worker, a worker's delegate request to a server, heartbeats to the
//!   placement driver, ids from its allocator (store and region ids: a client that could take
//!   them would exhaust the 16-bit store ids);
//! * [`Access::Admin`]: state changes outside the SQL path: raw loads (bulk loads and `SET
//!   GLOBAL`), manual splits, flushes and compactions, leader transfers, drains, operators and
//!   placement rules.
//!
//! A caller is a node, an admin or a client ([`Caller`], from its certificate's common name).
//! A node may call every path (servers and workers stand in for one another on the delegate
//! path, and the placement driver's scheduler moves leaders); an admin every path but the
//! node-only ones; a client only client paths.
//!
//! `/coprocessor` is two conversations ([`crate::traffic::TrafficPath::of_answer`]): a
//! client's page on a server, a server's offload on a worker. Unknown paths are client paths
//! (the router answers them 404).

use crate::paths;
use crate::traffic::Role;

types::label_enum! {
    /// What a path requires of its caller.
    pub enum Access: "access tier" {
        Client = "client",
        Node = "node",
        Admin = "admin",
    }
}

types::label_enum! {
    /// Who a caller is, by the name its certificate carries.
    pub enum Caller: "caller" {
        Client = "client",
        Node = "node",
        Admin = "admin",
    }
}

impl Caller {
    /// Whether this caller may call a path requiring `access`.
    pub fn may(self, access: Access) -> bool {
        matches!(
            (self, access),
            (Caller::Node, _)
                | (Caller::Admin, Access::Client | Access::Admin)
                | (Caller::Client, Access::Client)
        )
    }
}

/// What a call to `path` on a process of role `callee` requires.
pub fn required(callee: Role, path: &str) -> Access {
    let p = path.trim_end_matches('/');
    match p {
        paths::COPROCESSOR | paths::COMPACT if callee == Role::Worker => Access::Node,
        paths::RAFT_BATCH
        | paths::DELEGATE
        | paths::PD_STORE_HEARTBEAT
        | paths::PD_WORKER_HEARTBEAT
        | paths::PD_ALLOC_ID => Access::Node,
        paths::SPLIT
        | paths::RAW_LOAD
        | paths::ADMIN_FLUSH
        | paths::ADMIN_COMPACT
        | paths::ADMIN_TRANSFER_LEADER
        | paths::PD_STORE_STATE
        | paths::PD_OPERATORS
        | paths::PD_RULES => Access::Admin,
        _ => Access::Client,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_nodes_reach_raft_offload_delegate_and_heartbeats() {
        for (role, path) in [
            (Role::Server, paths::RAFT_BATCH),
            (Role::Server, paths::DELEGATE),
            (Role::Worker, paths::COPROCESSOR),
            (Role::Worker, paths::COMPACT),
            (Role::Pd, paths::PD_STORE_HEARTBEAT),
            (Role::Pd, paths::PD_WORKER_HEARTBEAT),
            (Role::Pd, paths::PD_ALLOC_ID),
        ] {
            let access = required(role, path);
            assert_eq!(access, Access::Node, "{role} {path}");
            assert!(Caller::Node.may(access));
            assert!(!Caller::Admin.may(access), "{role} {path}");
            assert!(!Caller::Client.may(access), "{role} {path}");
        }
    }

    #[test]
    fn state_changes_outside_sql_need_an_admin_or_a_node() {
        for (role, path) in [
            (Role::Server, paths::SPLIT),
            (Role::Server, paths::RAW_LOAD),
            (Role::Server, paths::ADMIN_FLUSH),
            (Role::Server, paths::ADMIN_COMPACT),
            (Role::Server, "/admin/transfer_leader/"),
            (Role::Pd, paths::PD_STORE_STATE),
            (Role::Pd, paths::PD_OPERATORS),
            (Role::Pd, paths::PD_RULES),
        ] {
            let access = required(role, path);
            assert_eq!(access, Access::Admin, "{role} {path}");
            assert!(Caller::Admin.may(access) && Caller::Node.may(access));
            assert!(!Caller::Client.may(access), "{role} {path}");
        }
    }

    #[test]
    fn a_client_reaches_reads_transactions_pages_and_views() {
        for (role, path) in [
            (Role::Server, paths::COPROCESSOR),
            (Role::Server, paths::GET),
            (Role::Server, paths::PREWRITE),
            (Role::Server, paths::REGIONS),
            (Role::Server, paths::METRICS),
            (Role::Worker, paths::DELEGATE_COPROCESSOR),
            (Role::Pd, paths::TSO),
            (Role::Pd, paths::PD_MEMBERS),
            (Role::Pd, paths::PD_WATCH),
            (Role::Pd, "/no/such/path"),
        ] {
            let access = required(role, path);
            assert_eq!(access, Access::Client, "{role} {path}");
            for caller in Caller::ALL {
                assert!(caller.may(access), "{caller} {role} {path}");
            }
        }
    }
}
