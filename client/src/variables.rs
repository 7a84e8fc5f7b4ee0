//! System variables of an entry session: their names, values, scopes, and where GLOBAL values
//! live.
//!
//! Six variables steer analytic requests ([`Session::coprocessor`]):
//! * `stratus_remote_coprocessor` (`ON` | `OFF`, default `OFF`): send each region's request to
//!   a worker (the delegate path) instead of its server;
//! * `tidb_tiflash_node_selection_policy` (`all_nodes` (default) | `priority_local_zone_nodes`
//!   | `only_local_zone_nodes`): which workers those requests go to (see `node_selection`);
//! * `stratus_paging_initial_size` and `stratus_paging_max_size` (integers ≥ 1, initial ≤
//!   max; defaults: the client config's `paging.initial-size` and `paging.max-size`): the
//!   first page's `paging_size` and the most it doubles to. Small pages return the first rows
//!   sooner and cost more round trips;
//! * `stratus_cop_cache` (`ON` | `OFF`, default `ON`): whether requests look pages up in the
//!   coprocessor cache and offer computed pages to it (`OFF` to measure uncached runs);
//! * `tidb_replica_read` (`leader` (default) | `follower` | `leader-and-follower`, TiDB's
//!   name and values): which replica serves a request sent to a server; a follower serves it
//!   as a replica read, seeing every acknowledged write (see `replica_read`).
//!
//! One steers writes ([`Variables::commit_options`]):
//! * `tidb_enable_async_commit` (`ON` | `OFF`, default `OFF`, TiDB's name): a statement whose
//!   rows span several regions commits with async commit (acknowledged once every prewrite
//!   landed: one round trip less) instead of 2PC (see `sql::txn_write`). `OFF` by default so
//!   nothing changes for existing users.
//!
//! All have GLOBAL and SESSION scope. A GLOBAL value is stored in the cluster, so every entry
//! node sees it: one committed row per variable under the reserved key prefix
//! [`GLOBAL_PREFIX`] (`m_sysvar_<name>`, value = the canonical value text; table data lives
//! under `t` and never collides). A new session starts from the GLOBAL values read at its
//! start; `SET SESSION` changes only that session; `SET GLOBAL` stores the value and, as in
//! MySQL and TiDB, changes the sessions started afterwards, not the current one.
//!
//! Names are case-insensitive; values are case-insensitive words. A wrong name or value is an
//! error naming what was expected; nothing is stored.

use std::fmt;

use wire::paths;
use wire::region::{KvPair, RawLoadRequest, RawLoadResponse};
use wire::txn::{GetRequest, GetResponse, ScanEntry, ScanRequest, ScanResponse};

use crate::config::{ClientConfig, PagingConfig};
use crate::error::{Error, Result};
use crate::node_selection::{NodeSelectionPolicy, POLICY_VARIABLE};
use crate::paging::{Client, CopOptions};
use crate::replica_read::ReplicaReadPolicy;
use crate::sql::txn_write::CommitOptions;

pub const REMOTE_COPROCESSOR: &str = "stratus_remote_coprocessor";
pub const NODE_SELECTION_POLICY: &str = POLICY_VARIABLE;
pub const PAGING_INITIAL_SIZE: &str = "stratus_paging_initial_size";
pub const PAGING_MAX_SIZE: &str = "stratus_paging_max_size";
pub const COP_CACHE: &str = "stratus_cop_cache";
pub const ASYNC_COMMIT: &str = "tidb_enable_async_commit";
pub const REPLICA_READ: &str = "tidb_replica_read";
/// Every variable an entry session knows.
pub const NAMES: [&str; 7] = [
    REMOTE_COPROCESSOR,
    NODE_SELECTION_POLICY,
    PAGING_INITIAL_SIZE,
    PAGING_MAX_SIZE,
    COP_CACHE,
    ASYNC_COMMIT,
    REPLICA_READ,
];
/// Key prefix of GLOBAL values in the cluster.
pub const GLOBAL_PREFIX: &[u8] = b"m_sysvar_";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Global,
    Session,
}

/// A session's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variables {
    pub remote_coprocessor: bool,
    pub node_selection_policy: NodeSelectionPolicy,
    pub paging_initial_size: u64,
    pub paging_max_size: u64,
    pub cop_cache: bool,
    pub async_commit: bool,
    pub replica_read: ReplicaReadPolicy,
}

impl Default for Variables {
    /// The defaults under a default client config.
    fn default() -> Variables {
        Variables::with_paging(&PagingConfig::default())
    }
}

/// One parsed assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    RemoteCoprocessor(bool),
    NodeSelectionPolicy(NodeSelectionPolicy),
    PagingInitialSize(u64),
    PagingMaxSize(u64),
    CopCache(bool),
    AsyncCommit(bool),
    ReplicaRead(ReplicaReadPolicy),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VariableError {
    #[error("unknown system variable: name={name:?} known={}", NAMES.join(","))]
    Unknown { name: String },
    #[error("variable {name} can't be set to the value of {value:?}: allowed={allowed}")]
    BadValue {
        name: &'static str,
        value: String,
        allowed: String,
    },
}

/// `ON`/`OFF` (also `1`/`0`, `true`/`false`).
fn on_off(name: &'static str, value: &str) -> std::result::Result<bool, VariableError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        _ => Err(VariableError::BadValue {
            name,
            value: value.to_string(),
            allowed: "ON,OFF".into(),
        }),
    }
}

/// An integer of at least 1.
fn page_size(name: &'static str, value: &str) -> std::result::Result<u64, VariableError> {
    match value.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(VariableError::BadValue {
            name,
            value: value.to_string(),
            allowed: "an integer of at least 1".into(),
        }),
    }
}

impl Setting {
    /// Parses `name = value`.
    pub fn parse(name: &str, value: &str) -> std::result::Result<Setting, VariableError> {
        let name_lc = name.to_ascii_lowercase();
        let value_lc = value.trim().to_ascii_lowercase();
        match name_lc.as_str() {
            REMOTE_COPROCESSOR => {
                return on_off(REMOTE_COPROCESSOR, value).map(Setting::RemoteCoprocessor);
            }
            COP_CACHE => return on_off(COP_CACHE, value).map(Setting::CopCache),
            ASYNC_COMMIT => return on_off(ASYNC_COMMIT, value).map(Setting::AsyncCommit),
            PAGING_INITIAL_SIZE => {
                return page_size(PAGING_INITIAL_SIZE, value).map(Setting::PagingInitialSize);
            }
            PAGING_MAX_SIZE => {
                return page_size(PAGING_MAX_SIZE, value).map(Setting::PagingMaxSize);
            }
            _ => {}
        }
        if name_lc == REPLICA_READ {
            return value_lc
                .parse::<ReplicaReadPolicy>()
                .map(Setting::ReplicaRead)
                .map_err(|_| VariableError::BadValue {
                    name: REPLICA_READ,
                    value: value.to_string(),
                    allowed: ReplicaReadPolicy::ALL
                        .iter()
                        .map(|p| p.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                });
        }
        if name_lc == NODE_SELECTION_POLICY {
            return value_lc
                .parse::<NodeSelectionPolicy>()
                .map(Setting::NodeSelectionPolicy)
                .map_err(|_| VariableError::BadValue {
                    name: NODE_SELECTION_POLICY,
                    value: value.to_string(),
                    allowed: NodeSelectionPolicy::ALL
                        .iter()
                        .map(|p| p.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                });
        }
        Err(VariableError::Unknown {
            name: name.to_string(),
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Setting::RemoteCoprocessor(_) => REMOTE_COPROCESSOR,
            Setting::NodeSelectionPolicy(_) => NODE_SELECTION_POLICY,
            Setting::PagingInitialSize(_) => PAGING_INITIAL_SIZE,
            Setting::PagingMaxSize(_) => PAGING_MAX_SIZE,
            Setting::CopCache(_) => COP_CACHE,
            Setting::AsyncCommit(_) => ASYNC_COMMIT,
            Setting::ReplicaRead(_) => REPLICA_READ,
        }
    }

    /// The canonical value text (what is stored and shown).
    pub fn value_text(&self) -> String {
        match self {
            Setting::RemoteCoprocessor(on) | Setting::CopCache(on) | Setting::AsyncCommit(on) => {
                if *on { "ON" } else { "OFF" }.into()
            }
            Setting::NodeSelectionPolicy(p) => p.as_str().into(),
            Setting::ReplicaRead(p) => p.as_str().into(),
            Setting::PagingInitialSize(n) | Setting::PagingMaxSize(n) => n.to_string(),
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {}", self.name(), self.value_text())
    }
}

impl Variables {
    /// The defaults under `config` (its paging sizes).
    pub fn from_config(config: &ClientConfig) -> Variables {
        Variables::with_paging(&config.paging)
    }

    fn with_paging(paging: &PagingConfig) -> Variables {
        Variables {
            remote_coprocessor: false,
            node_selection_policy: NodeSelectionPolicy::default(),
            paging_initial_size: paging.initial_size,
            paging_max_size: paging.max_size,
            cop_cache: true,
            async_commit: false,
            replica_read: ReplicaReadPolicy::default(),
        }
    }

    /// Applies `s`, refusing a paging size that breaks `initial ≤ max` with the other one's
    /// current value (nothing changes then).
    pub fn apply(&mut self, s: Setting) -> std::result::Result<(), VariableError> {
        let bad = |name, n: u64, allowed: String| VariableError::BadValue {
            name,
            value: n.to_string(),
            allowed,
        };
        match s {
            Setting::PagingInitialSize(n) if n > self.paging_max_size => {
                return Err(bad(
                    PAGING_INITIAL_SIZE,
                    n,
                    format!(
                        "an integer from 1 to {PAGING_MAX_SIZE} ({})",
                        self.paging_max_size
                    ),
                ));
            }
            Setting::PagingMaxSize(n) if n < self.paging_initial_size => {
                return Err(bad(
                    PAGING_MAX_SIZE,
                    n,
                    format!(
                        "an integer of at least {PAGING_INITIAL_SIZE} ({})",
                        self.paging_initial_size
                    ),
                ));
            }
            _ => {}
        }
        self.apply_unchecked(s);
        Ok(())
    }

    fn apply_unchecked(&mut self, s: Setting) {
        match s {
            Setting::RemoteCoprocessor(on) => self.remote_coprocessor = on,
            Setting::NodeSelectionPolicy(p) => self.node_selection_policy = p,
            Setting::PagingInitialSize(n) => self.paging_initial_size = n,
            Setting::PagingMaxSize(n) => self.paging_max_size = n,
            Setting::CopCache(on) => self.cop_cache = on,
            Setting::AsyncCommit(on) => self.async_commit = on,
            Setting::ReplicaRead(p) => self.replica_read = p,
        }
    }

    /// Every variable's setting, in [`NAMES`] order.
    pub fn settings(&self) -> [Setting; NAMES.len()] {
        [
            Setting::RemoteCoprocessor(self.remote_coprocessor),
            Setting::NodeSelectionPolicy(self.node_selection_policy),
            Setting::PagingInitialSize(self.paging_initial_size),
            Setting::PagingMaxSize(self.paging_max_size),
            Setting::CopCache(self.cop_cache),
            Setting::AsyncCommit(self.async_commit),
            Setting::ReplicaRead(self.replica_read),
        ]
    }

    /// The value of `name` as text, or an error for an unknown name.
    pub fn get(&self, name: &str) -> std::result::Result<String, VariableError> {
        let name_lc = name.to_ascii_lowercase();
        self.settings()
            .into_iter()
            .find(|s| s.name() == name_lc)
            .map(|s| s.value_text())
            .ok_or_else(|| VariableError::Unknown {
                name: name.to_string(),
            })
    }

    /// The paging driver's settings for a request of this session.
    pub fn cop_options(&self) -> CopOptions {
        CopOptions {
            paging_initial_size: self.paging_initial_size.max(1),
            paging_max_size: self.paging_max_size.max(self.paging_initial_size).max(1),
            use_cache: self.cop_cache,
            replica_read: self.replica_read,
        }
    }

    /// How a write statement of this session may commit.
    pub fn commit_options(&self) -> CommitOptions {
        CommitOptions {
            async_commit: self.async_commit,
            schema_lease: None,
        }
    }
}

/// The cluster key of `name`'s GLOBAL value.
pub fn global_key(name: &str) -> Vec<u8> {
    let mut k = GLOBAL_PREFIX.to_vec();
    k.extend_from_slice(name.as_bytes());
    k
}

impl Client {
    /// Stores a GLOBAL value (validated first, paging sizes against the other GLOBAL one;
    /// nothing is written for a bad one).
    pub async fn set_global_variable(&self, name: &str, value: &str) -> Result<Setting> {
        let setting = Setting::parse(name, value)?;
        if matches!(
            setting,
            Setting::PagingInitialSize(_) | Setting::PagingMaxSize(_)
        ) {
            self.global_variables().await?.apply(setting)?;
        }
        let pair = KvPair {
            key: global_key(setting.name()),
            value: setting.value_text().into_bytes(),
        };
        let mut backoff = self.backoff();
        let transport = self.transport();
        let answers: Vec<RawLoadResponse> = self
            .router()
            .send_by_region(vec![pair], &mut backoff, |server, pairs| async move {
                let req = RawLoadRequest { pairs };
                transport
                    .post(&server, paths::RAW_LOAD, &req, "raw load response")
                    .await
            })
            .await?;
        let resp = answers.into_iter().next().unwrap_or_default();
        if let Some(e) = resp.error {
            return Err(Error::TxnCommand {
                command: "raw_load",
                message: format!("kind={} {}", e.kind, e.message),
            });
        }
        Ok(setting)
    }

    /// The GLOBAL values stored in the cluster at a fresh timestamp, over the defaults (of
    /// this client's config). A stored value that does not parse (written by something else)
    /// is an error naming it.
    pub async fn global_variables(&self) -> Result<Variables> {
        let ts = self.current_ts().await?;
        let mut vars = Variables::from_config(self.config());
        for name in NAMES {
            let resp = self.get_at(global_key(name), ts).await?;
            if let Some(e) = resp.error {
                return Err(Error::TxnCommand {
                    command: "get",
                    message: format!("kind={} {}", e.kind, e.message),
                });
            }
            if resp.found {
                let text = String::from_utf8_lossy(&resp.value);
                // Unchecked: the paging sizes were checked against each other when stored
                // (and the paging driver never goes below the initial size).
                vars.apply_unchecked(Setting::parse(name, &text)?);
            }
        }
        Ok(vars)
    }

    /// A session with `vars` instead of the GLOBAL values (a front that keeps a connection's
    /// variables itself and starts a session per statement).
    pub fn session_with(&self, vars: Variables) -> Session<'_> {
        Session { client: self, vars }
    }

    /// Every committed key of `[start, end)` at `start_ts` with its value, in key order, read
    /// region by region from each region's leader (`end` empty: to the end of the key space).
    /// For small ranges such as the catalog: the answer is held in memory.
    pub async fn scan_at(
        &self,
        start: Vec<u8>,
        end: Vec<u8>,
        start_ts: u64,
    ) -> Result<Vec<ScanEntry>> {
        let mut out = Vec::new();
        let mut cursor = start;
        loop {
            let mut backoff = self.backoff();
            let transport = self.transport();
            let regions = self.region_cache();
            // The request stops at the region's end as the cache knows it; the next one
            // starts there.
            let mut region_end = Vec::new();
            let answers: Vec<ScanResponse> = self
                .router()
                .send_by_region(vec![cursor.clone()], &mut backoff, |server, keys| {
                    let start = keys.into_iter().next().unwrap_or_default();
                    let stop = regions
                        .lookup(&start)
                        .map(|r| r.region.end.clone())
                        .unwrap_or_default();
                    region_end = stop.clone();
                    let req_end = match (end.is_empty(), stop.is_empty()) {
                        (true, _) => stop,
                        (false, true) => end.clone(),
                        (false, false) => std::cmp::min(stop, end.clone()),
                    };
                    let req = ScanRequest {
                        start,
                        end: req_end,
                        limit: 0,
                        start_ts,
                        reverse: false,
                    };
                    async move {
                        transport
                            .post(&server, paths::SCAN, &req, "scan response")
                            .await
                    }
                })
                .await?;
            for a in answers {
                if let Some(e) = a.error {
                    return Err(Error::TxnCommand {
                        command: "scan",
                        message: format!("kind={} {}", e.kind, e.message),
                    });
                }
                out.extend(a.entries);
            }
            if region_end.is_empty() || (!end.is_empty() && region_end >= end) {
                return Ok(out);
            }
            cursor = region_end;
        }
    }

    /// The answer to `GET key` at `start_ts` from the key's region leader (following leader
    /// changes until the request's deadline).
    pub(crate) async fn get_at(&self, key: Vec<u8>, start_ts: u64) -> Result<GetResponse> {
        let mut backoff = self.backoff();
        let transport = self.transport();
        let answers: Vec<GetResponse> = self
            .router()
            .send_by_region(vec![key], &mut backoff, |server, mut keys| async move {
                let req = GetRequest {
                    key: keys.pop().unwrap_or_default(),
                    start_ts,
                    bypass_locks: Vec::new(),
                };
                transport
                    .post(&server, paths::GET, &req, "get response")
                    .await
            })
            .await?;
        Ok(answers.into_iter().next().unwrap_or_default())
    }

    /// A session starting from the GLOBAL values.
    pub async fn session(&self) -> Result<Session<'_>> {
        Ok(Session {
            client: self,
            vars: self.global_variables().await?,
        })
    }
}

/// An entry session: a client and its own variable values.
#[derive(Debug)]
pub struct Session<'a> {
    pub client: &'a Client,
    vars: Variables,
}

impl Session<'_> {
    pub fn variables(&self) -> &Variables {
        &self.vars
    }

    /// `SET [GLOBAL | SESSION] name = value`. GLOBAL stores the value for sessions started
    /// later and leaves this one as it is (see the module docs).
    pub async fn set(&mut self, scope: Scope, name: &str, value: &str) -> Result<Setting> {
        match scope {
            Scope::Session => {
                let s = Setting::parse(name, value)?;
                self.vars.apply(s)?;
                Ok(s)
            }
            Scope::Global => self.client.set_global_variable(name, value).await,
        }
    }

    /// `SELECT @@[global.]name`.
    pub async fn get(&self, scope: Scope, name: &str) -> Result<String> {
        let vars = match scope {
            Scope::Session => self.vars,
            Scope::Global => self.client.global_variables().await?,
        };
        Ok(vars.get(name)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_case_insensitively_into_canonical_text() {
        for (v, want) in [("on", "ON"), ("ON", "ON"), ("1", "ON"), ("Off", "OFF")] {
            let s = Setting::parse("STRATUS_REMOTE_COPROCESSOR", v).unwrap();
            assert_eq!(s.value_text(), want, "{v}");
        }
        let s = Setting::parse(NODE_SELECTION_POLICY, "Only_Local_Zone_Nodes").unwrap();
        assert_eq!(
            s,
            Setting::NodeSelectionPolicy(NodeSelectionPolicy::OnlyLocalZoneNodes)
        );
        assert_eq!(s.value_text(), "only_local_zone_nodes");
    }

    #[test]
    fn a_wrong_value_names_the_variable_and_the_allowed_values() {
        let e = Setting::parse(NODE_SELECTION_POLICY, "nearest").unwrap_err();
        assert_eq!(
            e.to_string(),
            "variable tidb_tiflash_node_selection_policy can't be set to the value of \"nearest\": \
             allowed=all_nodes,priority_local_zone_nodes,only_local_zone_nodes"
        );
        let e = Setting::parse(REMOTE_COPROCESSOR, "yes please").unwrap_err();
        assert!(e.to_string().contains("allowed=ON,OFF"), "{e}");
    }

    #[test]
    fn tidb_replica_read_takes_tidbs_values_and_steers_the_paging_driver() {
        let mut vars = Variables::default();
        assert_eq!(vars.get(REPLICA_READ).unwrap(), "leader");
        let s = Setting::parse("TIDB_REPLICA_READ", " Leader-And-Follower ").unwrap();
        assert_eq!(
            s,
            Setting::ReplicaRead(ReplicaReadPolicy::LeaderAndFollower)
        );
        vars.apply(s).unwrap();
        assert_eq!(vars.get(REPLICA_READ).unwrap(), "leader-and-follower");
        assert_eq!(
            vars.cop_options().replica_read,
            ReplicaReadPolicy::LeaderAndFollower
        );
        let e = Setting::parse(REPLICA_READ, "closest-replicas").unwrap_err();
        assert_eq!(
            e.to_string(),
            "variable tidb_replica_read can't be set to the value of \"closest-replicas\": \
             allowed=leader,follower,leader-and-follower"
        );
    }

    #[test]
    fn an_unknown_variable_is_named() {
        let e = Setting::parse("tidb_mystery", "1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown system variable: name=\"tidb_mystery\" \
             known=stratus_remote_coprocessor,tidb_tiflash_node_selection_policy,\
             stratus_paging_initial_size,stratus_paging_max_size,stratus_cop_cache,\
             tidb_enable_async_commit,tidb_replica_read"
        );
        assert!(Variables::default().get("tidb_mystery").is_err());
    }

    #[test]
    fn defaults_are_off_and_all_nodes() {
        let v = Variables::default();
        assert_eq!(v.get(REMOTE_COPROCESSOR).unwrap(), "OFF");
        assert_eq!(v.get(NODE_SELECTION_POLICY).unwrap(), "all_nodes");
        assert_eq!(v.get(COP_CACHE).unwrap(), "ON");
        assert_eq!(v.get(ASYNC_COMMIT).unwrap(), "OFF");
        assert!(!v.commit_options().async_commit);
    }

    #[test]
    fn paging_defaults_come_from_the_client_config() {
        let mut cfg = ClientConfig::new(["127.0.0.1:9"]);
        cfg.paging.initial_size = 7;
        cfg.paging.max_size = 700;
        let v = Variables::from_config(&cfg);
        assert_eq!(v.get(PAGING_INITIAL_SIZE).unwrap(), "7");
        assert_eq!(v.get("STRATUS_PAGING_MAX_SIZE").unwrap(), "700");
        let o = v.cop_options();
        assert_eq!((o.paging_initial_size, o.paging_max_size), (7, 700));
        assert!(o.use_cache);
    }

    #[test]
    fn paging_sizes_must_be_positive_integers_with_initial_at_most_max() {
        for bad in ["0", "-3", "1.5", "lots"] {
            let e = Setting::parse(PAGING_INITIAL_SIZE, bad).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "variable stratus_paging_initial_size can't be set to the value of \
                     {bad:?}: allowed=an integer of at least 1"
                )
            );
        }
        let mut v = Variables::default();
        let e = v
            .apply(Setting::parse(PAGING_MAX_SIZE, "64").unwrap())
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("at least stratus_paging_initial_size (128)"),
            "{e}"
        );
        v.apply(Setting::parse(PAGING_INITIAL_SIZE, "16").unwrap())
            .unwrap();
        v.apply(Setting::parse(PAGING_MAX_SIZE, "64").unwrap())
            .unwrap();
        let e = v
            .apply(Setting::parse(PAGING_INITIAL_SIZE, "65").unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("stratus_paging_initial_size"), "{e}");
        assert!(
            e.to_string().contains("stratus_paging_max_size (64)"),
            "{e}"
        );
        assert_eq!(v.paging_initial_size, 16, "a refused value changes nothing");
        let e = v
            .apply(Setting::parse(PAGING_MAX_SIZE, "15").unwrap())
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("at least stratus_paging_initial_size"),
            "{e}"
        );
        assert_eq!(v.paging_max_size, 64, "a refused value changes nothing");
    }

    #[test]
    fn cop_cache_off_turns_the_cache_off_for_requests() {
        let mut v = Variables::default();
        v.apply(Setting::parse("Stratus_Cop_Cache", "off").unwrap())
            .unwrap();
        assert_eq!(v.get(COP_CACHE).unwrap(), "OFF");
        assert!(!v.cop_options().use_cache);
        let e = Setting::parse(COP_CACHE, "maybe").unwrap_err();
        assert!(e.to_string().contains("allowed=ON,OFF"), "{e}");
    }

    #[test]
    fn async_commit_parses_on_off_words_and_reaches_the_commit_options() {
        for v in ["ON", "on", "1", "TRUE"] {
            let s = Setting::parse("TIDB_ENABLE_ASYNC_COMMIT", v).unwrap();
            assert_eq!(s, Setting::AsyncCommit(true), "{v}");
            assert_eq!(s.value_text(), "ON");
        }
        for v in ["off", "0", "false", " Off "] {
            let s = Setting::parse(ASYNC_COMMIT, v).unwrap();
            assert_eq!(s, Setting::AsyncCommit(false), "{v:?}");
            assert_eq!(s.value_text(), "OFF");
        }
        let mut vars = Variables::default();
        vars.apply(Setting::parse(ASYNC_COMMIT, "on").unwrap())
            .unwrap();
        assert_eq!(vars.get("tidb_enable_async_commit").unwrap(), "ON");
        assert!(vars.commit_options().async_commit);
        assert!(
            vars.settings().contains(&Setting::AsyncCommit(true)),
            "SHOW VARIABLES lists it"
        );
    }

    #[test]
    fn a_bad_async_commit_value_is_refused_naming_on_and_off() {
        for bad in ["2", "yes", "", "async"] {
            let e = Setting::parse(ASYNC_COMMIT, bad).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "variable tidb_enable_async_commit can't be set to the value of {bad:?}: \
                     allowed=ON,OFF"
                )
            );
        }
    }

    #[test]
    fn global_keys_sit_under_the_reserved_prefix_outside_table_data() {
        let k = global_key(REMOTE_COPROCESSOR);
        assert!(k.starts_with(GLOBAL_PREFIX));
        assert!(k.as_slice() < b"t".as_slice(), "table keys start with t");
    }
}
