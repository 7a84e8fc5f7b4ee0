//! `EXPLAIN ANALYZE` on a loaded cluster, read as one typed row per region ([`RegionExplain`],
//! from the SQL front's [`FrontSession::analyze`]): where each region ran (on its server,
//! offloaded to a worker, or sent to a worker by the client) and why. `stratus demo` checks
//! every claim it prints against these fields, never against rendered text; `stratus bench`
//! runs its statements through the same [`Session`], so both measure the front users reach
//! (DataFusion over the coprocessor), not a planner of their own.
//!
//! [`NodeNames`] prints a row's node URLs as the names `stratus up` prints.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use client::Client;
use client::sql::explain::SentTo;
use client::sql::{QueryResult, RegionExplain};
use sqlfront::FrontSession;
use wire::placement::Location;

use crate::loaded_cluster::{LoadedCluster, StepError};
use crate::local_cluster::LocalCluster;

/// A SQL front session on the loaded cluster's runtime; statements fail as
/// [`StepError::Statement`].
pub struct Session<'a> {
    rt: &'a tokio::runtime::Runtime,
    front: FrontSession,
}

/// A query run through `EXPLAIN ANALYZE` (which executes it): its region rows, warnings and
/// time.
pub struct Explained {
    pub elapsed: Duration,
    pub regions: Vec<RegionExplain>,
    pub warnings: Vec<String>,
    /// Body bytes the query moved between zones (`Analyzed::cross_zone_bytes`).
    pub cross_zone_bytes: u64,
}

impl<'a> Session<'a> {
    /// A session over `client`, which lives as long as the process (a front session's
    /// tables are shared with DataFusion's planner, which wants them `'static`).
    pub fn new(lab: &'a LoadedCluster, client: &'static Client) -> Session<'a> {
        Session {
            rt: &lab.rt,
            front: FrontSession::new(client),
        }
    }

    pub fn execute(&mut self, sql: &str) -> Result<QueryResult, StepError> {
        self.rt
            .block_on(self.front.execute(sql))
            .map(sqlfront::Output::into_query_result)
            .map_err(|e| StepError::Statement {
                sql: sql.to_string(),
                message: node::error_chain(&e),
            })
    }

    /// Runs `EXPLAIN ANALYZE sql` (timed: it executes the query) for its region rows.
    pub fn explained(&mut self, sql: &str) -> Result<Explained, StepError> {
        let t = Instant::now();
        let analyzed =
            self.rt
                .block_on(self.front.analyze(sql))
                .map_err(|e| StepError::Statement {
                    sql: format!("EXPLAIN ANALYZE {sql}"),
                    message: node::error_chain(&e),
                })?;
        Ok(Explained {
            elapsed: t.elapsed(),
            regions: analyzed.regions().cloned().collect(),
            cross_zone_bytes: analyzed.cross_zone_bytes(),
            warnings: analyzed.warnings,
        })
    }
}

/// Where a region ran, by the first place its pages ran (a region whose pages ran in several
/// places is placed by its first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// On its server.
    Local,
    /// Offloaded by its server to a worker.
    Remote,
    /// Sent to a worker by the client (the delegate path).
    Worker,
    /// Anything else (e.g. a fallback, a cache hit).
    Other,
}

/// The [`Place`] of `region`.
pub fn place(region: &RegionExplain) -> Place {
    match region.places.first() {
        Some(p) => match (&p.sent_to, p.location) {
            (SentTo::Server(_), Some(Location::Local)) => Place::Local,
            (SentTo::Server(_), Some(Location::Remote)) => Place::Remote,
            (SentTo::Worker(_), _) => Place::Worker,
            _ => Place::Other,
        },
        None => Place::Other,
    }
}

/// The node `region`'s first pages were sent to (its server, or the worker on the delegate
/// path); empty when it has none.
pub fn node(region: &RegionExplain) -> &str {
    region.places.first().map_or("", |p| p.sent_to.url())
}

/// Node URLs → names, to print `server-a` instead of `http://127.0.0.1:41234`.
pub struct NodeNames {
    by_url: BTreeMap<String, (String, String)>,
}

impl NodeNames {
    pub fn of(cluster: &LocalCluster) -> NodeNames {
        let by_url = cluster
            .servers()
            .iter()
            .chain(cluster.workers())
            .map(|n| (url_key(&n.url), (n.name.clone(), n.zone.clone())))
            .collect();
        NodeNames { by_url }
    }

    /// The name of the node at `url`, or `url` itself.
    pub fn name<'s>(&'s self, url: &'s str) -> &'s str {
        self.by_url.get(&url_key(url)).map_or(url, |(n, _)| n)
    }

    /// The zone of the node at `url` (`?` when unknown).
    pub fn zone(&self, url: &str) -> &str {
        self.by_url.get(&url_key(url)).map_or("?", |(_, z)| z)
    }

    /// The region's `task` column with every node URL replaced by the node's name.
    pub fn task(&self, region: &RegionExplain) -> String {
        region.task_named(&|url| self.name(url).to_string())
    }
}

/// The `scheme://host:port` of a URL (`http://` added when missing): a worker's coprocessor
/// URL (`.../coprocessor`) names the same node as its base URL.
fn url_key(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let authority = rest.split('/').next().unwrap_or(rest);
    format!("{scheme}://{authority}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::sql::explain::Place as PagePlace;
    use types::RegionId;

    fn region(places: Vec<PagePlace>, reasons: &[&str]) -> RegionExplain {
        RegionExplain {
            region_id: RegionId(2),
            places,
            reasons: reasons.iter().map(|r| r.to_string()).collect(),
            pages: 1,
            rows: 16,
            cache_hit: false,
            cross_zone_bytes: 0,
            elapsed: std::time::Duration::ZERO,
        }
    }

    fn at(sent_to: SentTo, location: Option<Location>, remote_worker: &str) -> PagePlace {
        PagePlace {
            sent_to,
            location,
            remote_worker: remote_worker.into(),
        }
    }

    fn server() -> SentTo {
        SentTo::Server("http://127.0.0.1:7000".into())
    }

    #[test]
    fn a_region_is_placed_by_the_first_place_its_pages_ran() {
        let remote = region(
            vec![at(
                server(),
                Some(Location::Remote),
                "http://127.0.0.1:7100",
            )],
            &["cpu_busy"],
        );
        assert_eq!(place(&remote), Place::Remote);
        assert_eq!(node(&remote), "http://127.0.0.1:7000");
        let mixed = region(
            vec![
                at(server(), Some(Location::Local), ""),
                at(server(), Some(Location::CacheHit), ""),
            ],
            &["cpu_idle"],
        );
        assert_eq!(place(&mixed), Place::Local);
        let worker = SentTo::Worker("http://127.0.0.1:7101".into());
        let delegated = region(vec![at(worker, Some(Location::Delegate), "")], &[]);
        assert_eq!(place(&delegated), Place::Worker);
        assert_eq!(node(&delegated), "http://127.0.0.1:7101");
        let fallback = region(vec![at(server(), Some(Location::Fallback), "")], &[]);
        assert_eq!(place(&fallback), Place::Other);
        assert_eq!(place(&region(Vec::new(), &[])), Place::Other);
    }

    #[test]
    fn node_urls_in_a_task_become_names_only_when_they_match_exactly() {
        let names = NodeNames {
            by_url: [
                (
                    "http://127.0.0.1:700".to_string(),
                    ("server-a".into(), "a".into()),
                ),
                (
                    "http://127.0.0.1:7001".to_string(),
                    ("worker-b1".into(), "b".into()),
                ),
            ]
            .into(),
        };
        let offloaded = region(
            vec![at(
                SentTo::Server("http://127.0.0.1:700/".into()),
                Some(Location::Remote),
                "http://127.0.0.1:7001/coprocessor",
            )],
            &[],
        );
        assert_eq!(names.task(&offloaded), "server server-a remote worker-b1");
        let worker = SentTo::Worker("127.0.0.1:7001".into());
        assert_eq!(
            names.task(&region(vec![at(worker, None, "")], &[])),
            "worker worker-b1"
        );
        let unknown = SentTo::Worker("http://127.0.0.1:70".into());
        assert_eq!(
            names.task(&region(vec![at(unknown, None, "")], &[])),
            "worker http://127.0.0.1:70"
        );
        assert_eq!(names.zone("http://127.0.0.1:7001"), "b");
    }
}
