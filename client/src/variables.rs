//! System variables of an entry session: their names, values, scopes, and where GLOBAL values
//! live.
//!
//! Two variables steer analytic requests:
//! * `stratus_remote_coprocessor` (`ON` | `OFF`, default `OFF`): send each region's request to
//!   a worker (the delegate path) instead of its server;
//! * `tidb_tiflash_node_selection_policy` (`all_nodes` (default) | `priority_local_zone_nodes`
//!   | `only_local_zone_nodes`): which workers those requests go to (see `node_selection`).
//!
//! Both have GLOBAL and SESSION scope. A GLOBAL value is stored in the cluster, so every entry
//! node sees it: one committed row per variable under the reserved key prefix
//! [`GLOBAL_PREFIX`] (`m_sysvar_<name>`, value = the canonical value text; table data lives
//! under `t` and never collides). A new session starts from the GLOBAL values read at its
//! start; `SET SESSION` changes only that session; `SET GLOBAL` stores the value and, as in
//! MySQL and TiDB, changes the sessions started afterwards, not the current one.
//!
//! Names are case-insensitive; values are case-insensitive words. A wrong name or value is an
//! error naming what was expected; nothing is stored.

use std::fmt;

use kvproto::paths;
use kvproto::region::{KvPair, RawLoadRequest, RawLoadResponse};
use kvproto::txn::{GetRequest, GetResponse};

use crate::error::{Error, Result};
use crate::node_selection::{NodeSelectionPolicy, POLICY_VARIABLE};
use crate::paging::Client;

pub const REMOTE_COPROCESSOR: &str = "stratus_remote_coprocessor";
pub const NODE_SELECTION_POLICY: &str = POLICY_VARIABLE;
/// Every variable an entry session knows.
pub const NAMES: [&str; 2] = [REMOTE_COPROCESSOR, NODE_SELECTION_POLICY];
/// Key prefix of GLOBAL values in the cluster.
pub const GLOBAL_PREFIX: &[u8] = b"m_sysvar_";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Global,
    Session,
}

/// A session's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Variables {
    pub remote_coprocessor: bool,
    pub node_selection_policy: NodeSelectionPolicy,
}

/// One parsed assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    RemoteCoprocessor(bool),
    NodeSelectionPolicy(NodeSelectionPolicy),
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

impl Setting {
    /// Parses `name = value`.
    pub fn parse(name: &str, value: &str) -> std::result::Result<Setting, VariableError> {
        let name_lc = name.to_ascii_lowercase();
        let value_lc = value.trim().to_ascii_lowercase();
        if name_lc == REMOTE_COPROCESSOR {
            return match value_lc.as_str() {
                "on" | "1" | "true" => Ok(Setting::RemoteCoprocessor(true)),
                "off" | "0" | "false" => Ok(Setting::RemoteCoprocessor(false)),
                _ => Err(VariableError::BadValue {
                    name: REMOTE_COPROCESSOR,
                    value: value.to_string(),
                    allowed: "ON,OFF".into(),
                }),
            };
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
        }
    }

    /// The canonical value text (what is stored and shown).
    pub fn value_text(&self) -> String {
        match self {
            Setting::RemoteCoprocessor(true) => "ON".into(),
            Setting::RemoteCoprocessor(false) => "OFF".into(),
            Setting::NodeSelectionPolicy(p) => p.as_str().into(),
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {}", self.name(), self.value_text())
    }
}

impl Variables {
    pub fn apply(&mut self, s: Setting) {
        match s {
            Setting::RemoteCoprocessor(on) => self.remote_coprocessor = on,
            Setting::NodeSelectionPolicy(p) => self.node_selection_policy = p,
        }
    }

    /// The value of `name` as text, or an error for an unknown name.
    pub fn get(&self, name: &str) -> std::result::Result<String, VariableError> {
        let setting = match name.to_ascii_lowercase().as_str() {
            REMOTE_COPROCESSOR => Setting::RemoteCoprocessor(self.remote_coprocessor),
            NODE_SELECTION_POLICY => Setting::NodeSelectionPolicy(self.node_selection_policy),
            _ => {
                return Err(VariableError::Unknown {
                    name: name.to_string(),
                });
            }
        };
        Ok(setting.value_text())
    }
}

/// The cluster key of `name`'s GLOBAL value.
pub fn global_key(name: &str) -> Vec<u8> {
    let mut k = GLOBAL_PREFIX.to_vec();
    k.extend_from_slice(name.as_bytes());
    k
}

impl Client {
    /// Stores a GLOBAL value (validated first; nothing is written for a bad one).
    pub async fn set_global_variable(&self, name: &str, value: &str) -> Result<Setting> {
        let setting = Setting::parse(name, value)?;
        let key = global_key(setting.name());
        let server = self.lock_resolver().server_of(&key).await?;
        let req = RawLoadRequest {
            pairs: vec![KvPair {
                key,
                value: setting.value_text().into_bytes(),
            }],
        };
        let resp: RawLoadResponse = self
            .transport()
            .post(&server, paths::RAW_LOAD, &req, "raw load response")
            .await?;
        if let Some(e) = resp.error {
            return Err(Error::TxnCommand {
                command: "raw_load",
                message: format!("kind={} {}", e.kind, e.message),
            });
        }
        Ok(setting)
    }

    /// The GLOBAL values stored in the cluster at a fresh timestamp, over the defaults. A
    /// stored value that does not parse (written by something else) is an error naming it.
    pub async fn global_variables(&self) -> Result<Variables> {
        let ts = self.current_ts().await?;
        let mut vars = Variables::default();
        for name in NAMES {
            let key = global_key(name);
            let server = self.lock_resolver().server_of(&key).await?;
            let req = GetRequest {
                key,
                start_ts: ts,
                bypass_locks: Vec::new(),
            };
            let resp: GetResponse = self
                .transport()
                .post(&server, paths::GET, &req, "get response")
                .await?;
            if let Some(e) = resp.error {
                return Err(Error::TxnCommand {
                    command: "get",
                    message: format!("kind={} {}", e.kind, e.message),
                });
            }
            if resp.found {
                let text = String::from_utf8_lossy(&resp.value);
                vars.apply(Setting::parse(name, &text)?);
            }
        }
        Ok(vars)
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
                self.vars.apply(s);
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
    fn an_unknown_variable_is_named() {
        let e = Setting::parse("tidb_mystery", "1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown system variable: name=\"tidb_mystery\" \
             known=stratus_remote_coprocessor,tidb_tiflash_node_selection_policy"
        );
        assert!(Variables::default().get("tidb_mystery").is_err());
    }

    #[test]
    fn defaults_are_off_and_all_nodes() {
        let v = Variables::default();
        assert_eq!(v.get(REMOTE_COPROCESSOR).unwrap(), "OFF");
        assert_eq!(v.get(NODE_SELECTION_POLICY).unwrap(), "all_nodes");
    }

    #[test]
    fn global_keys_sit_under_the_reserved_prefix_outside_table_data() {
        let k = global_key(REMOTE_COPROCESSOR);
        assert!(k.starts_with(GLOBAL_PREFIX));
        assert!(k.as_slice() < b"t".as_slice(), "table keys start with t");
    }
}
