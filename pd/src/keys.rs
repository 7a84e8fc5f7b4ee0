//! Where the placement driver keeps each piece of metadata: one prefix per cluster
//! (`/stratus/<cluster-name>/`, so clusters can share an etcd), one key per item beneath it.
//! Values are short decimal strings or names, readable with `etcdctl get --prefix /stratus/`.
//!
//! | key | value | written by |
//! |---|---|---|
//! | `cluster-id` | decimal u64, fixed at first start | the first instance (create if absent) |
//! | `pd/leader` | the leader's base URL, under its lease | the election |
//! | `tso/mark` | decimal ms: every timestamp handed out has a smaller physical part | the TSO |
//! | `id/alloc` | decimal: every id handed out is at most this | the id allocator |
//! | `gc/safe-point` | decimal timestamp: no read below it; only ever raised | the leader (`gc`) |
//! | `stores/<id>` | `wire::pd::StoreInfo` (protobuf), under the server's lease | store heartbeats |
//! | `workers/<id>` | `wire::pd::WorkerInfo` (protobuf), under the worker's lease | worker heartbeats |
//! | `worker-ids/<url>` | decimal: the id of the worker at that URL, for ever | its first heartbeat |
//! | `regions/<id>` | `wire::region::Region` (protobuf): the routing table | region leaders' reports |
//! | `rules/<id>` | `wire::pd::PlacementRule` (protobuf), kept without a lease | `stratus ctl rule` |
//!
//! Ids in keys are zero-padded to 20 digits, so a prefix scan returns them in id order.

/// The keys of one cluster.
#[derive(Clone, Debug)]
pub struct Keys {
    root: String,
}

impl Keys {
    pub fn new(cluster_name: &str) -> Keys {
        Keys {
            root: format!("/stratus/{cluster_name}/"),
        }
    }

    fn key(&self, rest: &str) -> Vec<u8> {
        format!("{}{rest}", self.root).into_bytes()
    }

    pub fn cluster_id(&self) -> Vec<u8> {
        self.key("cluster-id")
    }

    pub fn leader(&self) -> Vec<u8> {
        self.key("pd/leader")
    }

    pub fn tso_mark(&self) -> Vec<u8> {
        self.key("tso/mark")
    }

    pub fn id_alloc(&self) -> Vec<u8> {
        self.key("id/alloc")
    }

    pub fn gc_safe_point(&self) -> Vec<u8> {
        self.key("gc/safe-point")
    }

    pub fn stores(&self) -> Vec<u8> {
        self.key("stores/")
    }

    pub fn store(&self, id: u64) -> Vec<u8> {
        self.key(&format!("stores/{id:020}"))
    }

    pub fn workers(&self) -> Vec<u8> {
        self.key("workers/")
    }

    pub fn worker(&self, id: u64) -> Vec<u8> {
        self.key(&format!("workers/{id:020}"))
    }

    pub fn worker_id_of(&self, url: &str) -> Vec<u8> {
        self.key(&format!("worker-ids/{url}"))
    }

    /// Servers' scheduling states (`wire::pd::StoreState`, decimal), kept without a lease:
    /// a draining server stays draining across its restarts.
    pub fn store_states(&self) -> Vec<u8> {
        self.key("store-states/")
    }

    pub fn store_state(&self, id: u64) -> Vec<u8> {
        self.key(&format!("store-states/{id:020}"))
    }

    /// Placement rules by their id (ids are the user's names, any text).
    pub fn rules(&self) -> Vec<u8> {
        self.key("rules/")
    }

    pub fn rule(&self, id: &str) -> Vec<u8> {
        self.key(&format!("rules/{id}"))
    }

    pub fn regions(&self) -> Vec<u8> {
        self.key("regions/")
    }

    pub fn region(&self, id: u64) -> Vec<u8> {
        self.key(&format!("regions/{id:020}"))
    }
}

/// Parses a decimal u64 value written by this crate; the error names the key.
pub fn parse_u64(key: &[u8], value: &[u8]) -> Result<u64, String> {
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            format!(
                "expected a decimal number at {}, found {:?}",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(&value[..value.len().min(40)])
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_live_under_the_cluster_prefix() {
        let k = Keys::new("c1");
        assert_eq!(k.leader(), b"/stratus/c1/pd/leader");
        assert_eq!(k.tso_mark(), b"/stratus/c1/tso/mark");
    }

    #[test]
    fn a_value_that_is_not_a_number_names_its_key() {
        let e = parse_u64(b"/k", b"x1").unwrap_err();
        assert!(e.contains("/k") && e.contains("x1"), "{e}");
        assert_eq!(parse_u64(b"/k", b"42").unwrap(), 42);
    }
}
