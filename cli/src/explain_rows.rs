//! `EXPLAIN` on a loaded cluster, read as one row per region: where each region ran (on its
//! server, offloaded to a worker, or sent to a worker by the client) and why. `stratus demo`
//! checks every claim it prints against these rows; `stratus bench` runs its statements
//! through the same [`Session`].
//!
//! [`NodeNames`] turns the node URLs in a row into the names `stratus up` prints.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use client::Client;
use client::sql::{Engine, QueryResult};
use wire::datum::Datum;

use crate::loaded_cluster::{LoadedCluster, StepError};
use crate::local_cluster::LocalCluster;

/// An [`Engine`] on the loaded cluster's runtime; statements fail as [`StepError::Statement`].
pub struct Session<'a> {
    rt: &'a tokio::runtime::Runtime,
    engine: Engine<'a>,
}

/// A query run through `EXPLAIN` (which executes it): its region rows, warnings and time.
pub struct Explained {
    pub elapsed: Duration,
    pub regions: Vec<RegionRow>,
    pub warnings: Vec<String>,
}

impl<'a> Session<'a> {
    pub fn new(lab: &'a LoadedCluster, client: &'a Client) -> Session<'a> {
        Session {
            rt: &lab.rt,
            engine: Engine::new(client),
        }
    }

    pub fn execute(&mut self, sql: &str) -> Result<QueryResult, StepError> {
        self.rt
            .block_on(self.engine.execute(sql))
            .map_err(|e| StepError::Statement {
                sql: sql.to_string(),
                message: node::error_chain(&e),
            })
    }

    /// Runs `EXPLAIN sql` (timed: it executes the query) for its region rows.
    pub fn explained(&mut self, sql: &str) -> Result<Explained, StepError> {
        let explain = format!("EXPLAIN {sql}");
        let t = Instant::now();
        let plan = self.execute(&explain)?;
        let elapsed = t.elapsed();
        let regions = region_rows(&plan).map_err(|column| StepError::ExplainColumns {
            sql: explain,
            column,
        })?;
        Ok(Explained {
            elapsed,
            regions,
            warnings: plan.warnings,
        })
    }
}

/// One region row of `EXPLAIN`: `id` = `region <id>`, `task` = where it ran, `detail` =
/// `reason=<r> pages=<n> rows=<n> cache_hit=<bool>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionRow {
    pub region: String,
    pub task: String,
    pub detail: String,
}

/// Where a region ran, from EXPLAIN's task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `server <url> local`: on its server.
    Local,
    /// `server <url> remote <worker>`: offloaded by its server.
    Remote,
    /// `worker <addr>`: sent to a worker by the client (the delegate path).
    Worker,
    /// Anything else (e.g. a fallback).
    Other,
}

impl RegionRow {
    /// The region id (the text after `region `).
    pub fn id(&self) -> &str {
        self.region
            .strip_prefix("region ")
            .unwrap_or(&self.region)
            .trim()
    }

    /// Where the region ran; a region whose pages ran in several places (comma-separated in
    /// the task) is placed by its first.
    pub fn place(&self) -> Place {
        let first = self.task.split(',').next().unwrap_or("");
        let words: Vec<&str> = first.split_whitespace().collect();
        match words.as_slice() {
            ["server", _, "local"] => Place::Local,
            ["server", _, "remote", ..] => Place::Remote,
            ["worker", ..] => Place::Worker,
            _ => Place::Other,
        }
    }

    /// The server URL of a `server ...` task, the worker URL of a `worker ...` task.
    pub fn node(&self) -> &str {
        self.task.split_whitespace().nth(1).unwrap_or("")
    }

    /// The worker of `server <url> remote <worker>`.
    pub fn remote_worker(&self) -> &str {
        self.task.split_whitespace().nth(3).unwrap_or("")
    }

    /// The value of `key=` in the detail (empty when absent).
    pub fn detail(&self, key: &str) -> &str {
        self.detail
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == key)
            .map_or("", |(_, v)| v)
    }

    /// Whether `reason` is one of the region's reasons (comma-separated when its pages
    /// differed).
    pub fn has_reason(&self, reason: &str) -> bool {
        self.detail("reason").split(',').any(|r| r == reason)
    }
}

/// The region rows of an `EXPLAIN` answer (ids starting with `region`); `Err(column)` when a
/// column is missing.
pub fn region_rows(plan: &QueryResult) -> Result<Vec<RegionRow>, &'static str> {
    let col = |name: &'static str| {
        plan.columns
            .iter()
            .position(|c| c.eq_ignore_ascii_case(name))
            .ok_or(name)
    };
    let (id, task, detail) = (col("id")?, col("task")?, col("detail")?);
    let cell = |row: &[Datum], i: usize| {
        row.get(i)
            .and_then(crate::output_format::text)
            .unwrap_or_default()
    };
    Ok(plan
        .rows
        .iter()
        .filter(|row| cell(row, id).starts_with("region"))
        .map(|row| RegionRow {
            region: cell(row, id),
            task: cell(row, task),
            detail: cell(row, detail),
        })
        .collect())
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

    /// `task` with every word that is a node URL replaced by the node's name.
    pub fn task(&self, task: &str) -> String {
        task.split_whitespace()
            .map(|w| self.name(w))
            .collect::<Vec<_>>()
            .join(" ")
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
    use crate::table_format::{column_names, text_cell};

    fn explain(rows: &[[&str; 3]]) -> QueryResult {
        QueryResult {
            columns: column_names(&["id", "task", "detail"]),
            rows: rows
                .iter()
                .map(|r| r.iter().map(|c| text_cell(c)).collect())
                .collect(),
            ..QueryResult::default()
        }
    }

    #[test]
    fn region_rows_say_where_each_region_ran_and_why() {
        let plan = explain(&[
            ["TableScan_1", "dag", "table=t"],
            [
                "region 2",
                "server http://127.0.0.1:7000 remote http://127.0.0.1:7100",
                "reason=cpu_busy pages=3 rows=16 cache_hit=false",
            ],
            [
                "region 3",
                "server http://127.0.0.1:7001 local",
                "reason=cpu_idle pages=1 rows=16 cache_hit=true",
            ],
            [
                "region 4",
                "worker http://127.0.0.1:7101",
                "reason= pages=1 rows=16 cache_hit=false",
            ],
            [
                "region 5",
                "server http://127.0.0.1:7001 local,server http://127.0.0.1:7001 cache_hit",
                "reason=cpu_idle,cpu_busy pages=2 rows=16 cache_hit=true",
            ],
        ]);
        let regions = region_rows(&plan).unwrap();
        assert_eq!(regions.len(), 4);
        assert_eq!(regions[3].place(), Place::Local);
        assert!(regions[3].has_reason("cpu_busy") && regions[3].has_reason("cpu_idle"));
        assert_eq!(regions[0].id(), "2");
        assert_eq!(regions[0].place(), Place::Remote);
        assert_eq!(regions[0].remote_worker(), "http://127.0.0.1:7100");
        assert!(regions[0].has_reason("cpu_busy"));
        assert_eq!(regions[1].place(), Place::Local);
        assert_eq!(regions[1].detail("cache_hit"), "true");
        assert_eq!(regions[2].place(), Place::Worker);
        assert_eq!(regions[2].node(), "http://127.0.0.1:7101");
        assert!(!regions[2].has_reason("cpu_busy"));
    }

    #[test]
    fn an_explain_without_a_detail_column_is_an_error() {
        let plan = QueryResult {
            columns: column_names(&["id", "task"]),
            ..QueryResult::default()
        };
        assert_eq!(region_rows(&plan), Err("detail"));
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
        assert_eq!(
            names.task("server http://127.0.0.1:700/ remote http://127.0.0.1:7001"),
            "server server-a remote worker-b1"
        );
        assert_eq!(names.task("worker 127.0.0.1:7001"), "worker worker-b1");
        assert_eq!(
            names.task("remote http://127.0.0.1:7001/coprocessor"),
            "remote worker-b1"
        );
        assert_eq!(
            names.task("worker http://127.0.0.1:70"),
            "worker http://127.0.0.1:70"
        );
        assert_eq!(names.zone("http://127.0.0.1:7001"), "b");
    }
}
