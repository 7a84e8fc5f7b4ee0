//! `[raft]` of `server.toml`: who the replicas are and how the Raft groups run.
//!
//! ```toml
//! [raft]
//! peers = [                                 # every server of the cluster (this one too)
//!   { id = 1, addr = "http://10.0.0.1:20160", zone = "a" },
//!   { id = 2, addr = "http://10.0.0.2:20160", zone = "b" },
//!   { id = 3, addr = "http://10.0.0.3:20160", zone = "c" },
//! ]
//! replicas = 3                              # the initial regions live on the first `replicas` peers
//! tick-interval = "100ms"
//! election-timeout-ticks = 10               # randomized in [10, 20) ticks by raft-rs
//! heartbeat-ticks = 2
//! max-batch-size = "1MiB"                   # per request to one destination server
//! max-inflight-msgs = 256
//! max-entry-size = "8MiB"
//! propose-timeout = "5s"
//! hibernate-regions = true                  # idle regions stop ticking and heartbeating
//! ```
//!
//! Peer id = store id = the server's `node-id`. The initial regions start with a voter on each
//! of the first `replicas` peers; membership changes later (the placement driver's scheduling,
//! `membership`). A server listed in its own `peers` but not among the first `replicas` joins
//! an existing cluster: it creates no region and receives replicas. Addresses of servers not
//! listed here come from the placement driver's registrations. An empty `peers` list is a
//! one-server cluster (the server is the only voter of every region).

use std::collections::BTreeSet;
use std::time::Duration;

use node::ConfigError;
use serde::{Deserialize, Serialize};
use types::{ReadableDuration, ReadableSize, Zone};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct RaftConfig {
    /// Every server of the cluster, this one included; the first `replicas` hold a voter of
    /// every region. Empty: this server alone.
    pub peers: Vec<PeerConfig>,
    /// Voters per region. 3 survives the loss of one server; each replica costs a copy of
    /// every write on the network and in a WAL (the SSTs are shared in the object store).
    pub replicas: usize,
    /// One Raft tick. Election and heartbeat timeouts are counted in ticks, so this scales
    /// them all: shorter detects a dead leader sooner and costs more wake-ups per awake
    /// region.
    pub tick_interval: ReadableDuration,
    /// Ticks without a leader before a follower campaigns (randomized by raft-rs in [n, 2n)).
    /// Must exceed `heartbeat-ticks`: a few lost heartbeats must not start an election.
    pub election_timeout_ticks: usize,
    /// Ticks between a leader's heartbeats.
    pub heartbeat_ticks: usize,
    /// Bytes of Raft messages in one `POST /raft/batch` to one server; also the most entry
    /// bytes raft-rs puts in one append. Larger batches amortize requests and fsyncs on the
    /// follower; smaller ones bound the latency a large append adds to the messages behind it.
    /// A single larger message is still sent, alone.
    pub max_batch_size: ReadableSize,
    /// Appends a leader sends a follower before it waits for acknowledgements: bounds the
    /// memory a slow follower holds on the leader.
    pub max_inflight_msgs: usize,
    /// Largest proposal accepted (a write batch, a ChangeSet); a larger one is refused.
    pub max_entry_size: ReadableSize,
    /// How often a write waiting for its entry checks that this server still leads the region
    /// in the term it proposed in (it keeps waiting while it does; the server's transaction
    /// layer); how long a flush or compaction result waits to apply.
    pub propose_timeout: ReadableDuration,
    /// Idle regions stop ticking and sending heartbeats (`hibernation`): a server's Raft cost
    /// then follows its active regions. Stores still send each other one heartbeat per
    /// `heartbeat-ticks`, from which a sleeping follower learns that its leader died.
    pub hibernate_regions: bool,
}

/// One server of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct PeerConfig {
    /// The server's `node-id` (its store id and Raft peer id): 1 or more, unique.
    pub id: u64,
    /// The server's base URL, `http://host:port`.
    pub addr: String,
    /// The server's zone ("" = none).
    #[serde(with = "types::zone::optional")]
    pub zone: Option<Zone>,
}

impl Default for RaftConfig {
    fn default() -> Self {
        RaftConfig {
            peers: Vec::new(),
            replicas: 3,
            tick_interval: ReadableDuration::millis(100),
            election_timeout_ticks: 10,
            heartbeat_ticks: 2,
            max_batch_size: ReadableSize::mib(1),
            max_inflight_msgs: 256,
            max_entry_size: ReadableSize::mib(8),
            propose_timeout: ReadableDuration::secs(5),
            hibernate_regions: true,
        }
    }
}

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::invalid(&format!("raft.{key}"), message)
}

fn at_least_one(key: &str, value: u64) -> Result<(), ConfigError> {
    if value == 0 {
        return Err(invalid(key, "expected at least 1, found 0"));
    }
    Ok(())
}

fn positive_duration(key: &str, value: ReadableDuration) -> Result<(), ConfigError> {
    if value.duration().is_zero() {
        return Err(invalid(key, "expected a positive duration, found 0"));
    }
    Ok(())
}

impl RaftConfig {
    /// Checks what parsing cannot; the error names the key (`raft.<key>`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        positive_duration("tick-interval", self.tick_interval)?;
        at_least_one("heartbeat-ticks", self.heartbeat_ticks as u64)?;
        at_least_one("election-timeout-ticks", self.election_timeout_ticks as u64)?;
        if self.election_timeout_ticks <= self.heartbeat_ticks {
            return Err(invalid(
                "election-timeout-ticks",
                format!(
                    "expected more than raft.heartbeat-ticks, found election-timeout-ticks={} heartbeat-ticks={}",
                    self.election_timeout_ticks, self.heartbeat_ticks
                ),
            ));
        }
        at_least_one("replicas", self.replicas as u64)?;
        if !self.peers.is_empty() && self.replicas > self.peers.len() {
            return Err(invalid(
                "replicas",
                format!(
                    "expected at most the number of raft.peers, found replicas={} peers={}",
                    self.replicas,
                    self.peers.len()
                ),
            ));
        }
        let mut ids = BTreeSet::new();
        for (i, p) in self.peers.iter().enumerate() {
            if p.id == 0 {
                return Err(invalid(
                    &format!("peers[{i}].id"),
                    "expected a node-id of 1 or more, found 0",
                ));
            }
            if !ids.insert(p.id) {
                return Err(invalid(
                    &format!("peers[{i}].id"),
                    format!("expected ids that are unique, found id={} twice", p.id),
                ));
            }
            if !(p.addr.starts_with("http://") || p.addr.starts_with("https://")) {
                return Err(invalid(
                    &format!("peers[{i}].addr"),
                    format!("expected an http:// or https:// URL, found {:?}", p.addr),
                ));
            }
        }
        at_least_one("max-batch-size", self.max_batch_size.bytes())?;
        at_least_one("max-inflight-msgs", self.max_inflight_msgs as u64)?;
        at_least_one("max-entry-size", self.max_entry_size.bytes())?;
        positive_duration("propose-timeout", self.propose_timeout)?;
        Ok(())
    }

    /// Checks that `peers` lists this server (`store_id` = its `node-id`) when it lists
    /// anyone; the error names `raft.peers`.
    pub fn check_member(&self, store_id: u64) -> Result<(), ConfigError> {
        if self.peers.is_empty() || self.peers.iter().any(|p| p.id == store_id) {
            return Ok(());
        }
        let ids: Vec<String> = self.peers.iter().map(|p| p.id.to_string()).collect();
        Err(invalid(
            "peers",
            format!(
                "expected this server's node-id among the peers, found node-id={store_id} ids=[{}]",
                ids.join(", ")
            ),
        ))
    }

    /// The voters of every region: the ids of the first `replicas` peers, or `store_id`
    /// alone when `peers` is empty.
    pub fn voters(&self, store_id: u64) -> Vec<u64> {
        if self.peers.is_empty() {
            return vec![store_id];
        }
        self.peers
            .iter()
            .take(self.replicas)
            .map(|p| p.id)
            .collect()
    }

    /// The peer with this id.
    pub fn peer(&self, id: u64) -> Option<&PeerConfig> {
        self.peers.iter().find(|p| p.id == id)
    }

    pub fn tick_interval(&self) -> Duration {
        self.tick_interval.duration()
    }

    /// The election timeout as a duration (`election-timeout-ticks` ticks).
    pub fn election_timeout(&self) -> Duration {
        self.tick_interval() * self.election_timeout_ticks as u32
    }

    /// raft-rs's settings for the peer `id` of one region, restarted with `applied` as its
    /// applied index: ticks from this section, check-quorum (a leader cut off from a majority
    /// steps down, so a partitioned minority stops serving), pre-vote (a rejoining server
    /// cannot depose a working leader), linearizable `Safe` read-index.
    pub fn to_raft_config(&self, id: u64, applied: u64) -> raft::Config {
        raft::Config {
            id,
            applied,
            election_tick: self.election_timeout_ticks,
            heartbeat_tick: self.heartbeat_ticks,
            max_size_per_msg: self.max_batch_size.bytes(),
            max_inflight_msgs: self.max_inflight_msgs,
            check_quorum: true,
            pre_vote: true,
            read_only_option: raft::ReadOnlyOption::Safe,
            ..raft::Config::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use node::config::{parse, render};

    use super::*;

    /// A valid three-server section.
    fn three() -> RaftConfig {
        let peer = |id: u64, zone: &str| PeerConfig {
            id,
            addr: format!("http://127.0.0.1:2016{id}"),
            zone: Zone::label(zone),
        };
        RaftConfig {
            peers: vec![peer(1, "a"), peer(2, "b"), peer(3, "c")],
            ..RaftConfig::default()
        }
    }

    /// The whole error text of `config.validate()`.
    fn rejected(config: RaftConfig) -> String {
        config.validate().unwrap_err().to_string()
    }

    #[test]
    fn defaults_and_a_three_server_section_are_valid_and_render_back() {
        RaftConfig::default().validate().unwrap();
        let c = three();
        c.validate().unwrap();
        let again: RaftConfig = parse(&render(&c), "rendered").unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn the_documented_section_parses_to_the_defaults() {
        let text = "peers = [{ id = 1, addr = \"http://10.0.0.1:20160\", zone = \"a\" }]\n\
                    replicas = 1\ntick-interval = \"100ms\"\nelection-timeout-ticks = 10\n\
                    heartbeat-ticks = 2\nmax-batch-size = \"1MiB\"\nmax-inflight-msgs = 256\n\
                    max-entry-size = \"8MiB\"\npropose-timeout = \"5s\"\n";
        let c: RaftConfig = parse(text, "raft.toml").unwrap();
        c.validate().unwrap();
        assert_eq!(
            c,
            RaftConfig {
                peers: vec![PeerConfig {
                    id: 1,
                    addr: "http://10.0.0.1:20160".into(),
                    zone: Zone::label("a"),
                }],
                replicas: 1,
                ..RaftConfig::default()
            }
        );
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = parse::<RaftConfig>("election-ticks = 5\n", "s.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("election-ticks"), "{e}");
        let e = parse::<RaftConfig>("peers = [{ id = 1, adr = \"x\" }]\n", "s.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("adr"), "{e}");
    }

    #[test]
    fn election_timeout_must_exceed_the_heartbeat() {
        let e = rejected(RaftConfig {
            election_timeout_ticks: 2,
            heartbeat_ticks: 2,
            ..three()
        });
        assert_eq!(
            e,
            "invalid config value raft.election-timeout-ticks: expected more than \
             raft.heartbeat-ticks, found election-timeout-ticks=2 heartbeat-ticks=2"
        );
    }

    #[test]
    fn zero_ticks_are_rejected() {
        let e = rejected(RaftConfig {
            heartbeat_ticks: 0,
            ..three()
        });
        assert_eq!(
            e,
            "invalid config value raft.heartbeat-ticks: expected at least 1, found 0"
        );
        let e = rejected(RaftConfig {
            election_timeout_ticks: 0,
            ..three()
        });
        assert!(e.contains("raft.election-timeout-ticks"), "{e}");
        let e = rejected(RaftConfig {
            tick_interval: ReadableDuration::millis(0),
            ..three()
        });
        assert_eq!(
            e,
            "invalid config value raft.tick-interval: expected a positive duration, found 0"
        );
    }

    #[test]
    fn more_replicas_than_peers_are_rejected() {
        let e = rejected(RaftConfig {
            replicas: 4,
            ..three()
        });
        assert_eq!(
            e,
            "invalid config value raft.replicas: expected at most the number of raft.peers, \
             found replicas=4 peers=3"
        );
        let e = rejected(RaftConfig {
            replicas: 0,
            ..three()
        });
        assert!(e.contains("raft.replicas"), "{e}");
    }

    #[test]
    fn peer_ids_must_be_unique_and_non_zero() {
        let mut c = three();
        c.peers[2].id = 1;
        assert_eq!(
            rejected(c),
            "invalid config value raft.peers[2].id: expected ids that are unique, found id=1 twice"
        );
        let mut c = three();
        c.peers[1].id = 0;
        assert_eq!(
            rejected(c),
            "invalid config value raft.peers[1].id: expected a node-id of 1 or more, found 0"
        );
    }

    #[test]
    fn peer_addresses_must_be_urls() {
        let mut c = three();
        c.peers[0].addr = "10.0.0.1:20160".into();
        assert_eq!(
            rejected(c),
            "invalid config value raft.peers[0].addr: expected an http:// or https:// URL, \
             found \"10.0.0.1:20160\""
        );
    }

    #[test]
    fn zero_sizes_counts_and_timeouts_are_named() {
        let cases: Vec<(&str, RaftConfig)> = vec![
            (
                "raft.max-batch-size",
                RaftConfig {
                    max_batch_size: ReadableSize(0),
                    ..three()
                },
            ),
            (
                "raft.max-inflight-msgs",
                RaftConfig {
                    max_inflight_msgs: 0,
                    ..three()
                },
            ),
            (
                "raft.max-entry-size",
                RaftConfig {
                    max_entry_size: ReadableSize(0),
                    ..three()
                },
            ),
            (
                "raft.propose-timeout",
                RaftConfig {
                    propose_timeout: ReadableDuration::millis(0),
                    ..three()
                },
            ),
        ];
        for (key, config) in cases {
            let e = rejected(config);
            assert!(
                e.starts_with(&format!("invalid config value {key}: ")),
                "{key}: {e}"
            );
        }
    }

    #[test]
    fn this_server_must_be_among_the_peers_it_lists() {
        three().check_member(2).unwrap();
        RaftConfig::default().check_member(9).unwrap();
        assert_eq!(
            three().check_member(4).unwrap_err().to_string(),
            "invalid config value raft.peers: expected this server's node-id among the peers, \
             found node-id=4 ids=[1, 2, 3]"
        );
    }

    #[test]
    fn voters_are_the_first_replicas_peers_or_this_server_alone() {
        let c = RaftConfig {
            replicas: 2,
            ..three()
        };
        assert_eq!(c.voters(3), [1, 2]);
        assert_eq!(RaftConfig::default().voters(5), [5]);
    }

    #[test]
    fn the_raft_config_carries_the_ticks_and_passes_raft_rs_validation() {
        let c = RaftConfig {
            election_timeout_ticks: 12,
            heartbeat_ticks: 3,
            max_inflight_msgs: 64,
            max_batch_size: ReadableSize::kib(512),
            ..three()
        };
        let r = c.to_raft_config(2, 77);
        r.validate().unwrap();
        assert_eq!(r.id, 2);
        assert_eq!(r.applied, 77);
        assert_eq!(r.election_tick, 12);
        assert_eq!(r.heartbeat_tick, 3);
        assert_eq!((r.min_election_tick(), r.max_election_tick()), (12, 24));
        assert_eq!(r.max_inflight_msgs, 64);
        assert_eq!(r.max_size_per_msg, 512 * 1024);
        assert!(r.check_quorum);
        assert!(r.pre_vote);
        assert_eq!(r.read_only_option, raft::ReadOnlyOption::Safe);
    }
}
