//! `stratus bench --zones`: zone-local analytic reads on the local cluster (a server and two
//! workers in each of zones a, b and c), measured.
//!
//! The sample table, the five queries of [`crate::bench::QUERIES`] (each reads the whole
//! table) on the delegate path from a client in zone a, under each node-selection policy, in
//! two placements measured in the same run:
//!
//! * **whole replica** (the local cluster's rule `whole-replica`): every zone holds a replica
//!   of every region;
//! * **one replica** (the baseline, the layout before replication): rules give each region of
//!   the table one replica, in zone a below handle 0 and in zone b from it.
//!
//! After the load (flushed to SST files), a tenth more rows are inserted and left in the
//! memtables, half at each end of the table: the rows a worker fetches from a server with the
//! snapshot. The SST files come from the shared object store, which has no zone label here
//! (a regional bucket), so reading them crosses no zone.
//!
//! Per policy, query and placement: the median latency of `runs` runs, the bytes scanned (the
//! approximate size of the table's regions, as their leaders report it to the placement
//! driver: every query reads them all), the bytes that crossed zones (EXPLAIN's total: the
//! client's own hops, the workers' reads of servers, the servers' offloads), their ratio, and
//! whether the run warned. Latency is wall time with the offload CPU signal idle, cache off.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::bench::{BenchError, QUERIES};
use crate::explain_rows::{Explained, Session};
use crate::loaded_cluster::{LoadedCluster, StepError};
use crate::local_cluster::ZONES;

/// The policies, in the order reported.
const POLICIES: [&str; 3] = [
    "all_nodes",
    "priority_local_zone_nodes",
    "only_local_zone_nodes",
];

/// One policy × query × placement.
#[derive(Debug, Clone)]
struct Row {
    placement: &'static str,
    policy: &'static str,
    query: &'static str,
    latency: Duration,
    scanned: u64,
    crossed: u64,
    warned: bool,
}

/// Runs the suite with `rows` rows and `runs` timed runs per cell; the Markdown report.
pub fn run_to(
    rows: u64,
    runs: u32,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<(), BenchError> {
    if runs == 0 {
        return Err(BenchError::NoRuns);
    }
    let lab = LoadedCluster::start(log)?;
    let table = lab.load(rows, log)?;
    let client = lab.static_client(lab.cluster.client_config_in("a"))?;
    let mut session = Session::new(&lab, client);
    // A tenth more rows, left in the memtables (the load flushed what it wrote): what a
    // worker fetches from a server with the snapshot, as recent writes are in a live table.
    let extra = (rows / 10).max(2);
    let half = i64::try_from(rows / 2).unwrap_or(i64::MAX);
    let ids = (1..=i64::try_from(extra / 2).unwrap_or(0))
        .flat_map(|i| [-half - i, half + i - 1])
        .collect::<Vec<_>>();
    for chunk in ids.chunks(500) {
        let values: Vec<String> = chunk
            .iter()
            .map(|id| {
                let i = id.rem_euclid(10_007);
                format!(
                    "({id}, {}, {}, {}.0, 's{}')",
                    i % 1000,
                    i % 16,
                    i % 1000,
                    i % 97
                )
            })
            .collect();
        session.execute(&format!("INSERT INTO t VALUES {}", values.join(", ")))?;
    }
    writeln!(log, "{} rows more in the memtables", ids.len())?;
    session.execute("SET stratus_cop_cache = OFF")?;
    session.execute("SET stratus_remote_coprocessor = ON")?;
    let mut measured = Vec::new();
    for placement in ["whole replica", "one replica"] {
        if placement == "one replica" {
            let (start, end) = wire::codec::table::table_range(table.id);
            let mid = wire::codec::table::record_key(table.id, 0);
            lab.cluster
                .set_rule_range("one-replica-a", &["a"], start, mid.clone())
                .map_err(StepError::from)?;
            lab.cluster
                .set_rule_range("one-replica-b", &["b"], mid, end)
                .map_err(StepError::from)?;
        }
        let t = Instant::now();
        let scanned = settle(&lab, table.id, placement == "whole replica")?;
        writeln!(
            log,
            "{placement}: placed in {:.1} s, table {scanned} bytes",
            t.elapsed().as_secs_f64()
        )?;
        // The client's routing table follows the placement driver's watch.
        session.execute("SET tidb_tiflash_node_selection_policy = priority_local_zone_nodes")?;
        crate::zone_step::explained_until(&mut session, QUERIES[0].1, |run| {
            run.warnings.is_empty() == (placement == "whole replica")
        })?;
        for policy in POLICIES {
            session.execute(&format!(
                "SET tidb_tiflash_node_selection_policy = {policy}"
            ))?;
            for (query, sql) in QUERIES {
                writeln!(log, "{placement} {policy} {query}")?;
                session.explained(sql)?;
                let mut times = Vec::new();
                let mut crossed = Vec::new();
                let mut warned = false;
                for _ in 0..runs {
                    let run: Explained = session.explained(sql)?;
                    times.push(run.elapsed);
                    crossed.push(run.cross_zone_bytes);
                    warned |= !run.warnings.is_empty();
                }
                times.sort_unstable();
                crossed.sort_unstable();
                measured.push(Row {
                    placement,
                    policy,
                    query,
                    latency: times[times.len() / 2],
                    scanned,
                    crossed: crossed[crossed.len() / 2],
                    warned,
                });
            }
        }
    }
    drop(session);
    client.close();
    lab.stop()?;
    out.write_all(render(rows, runs, &measured).as_bytes())?;
    Ok(())
}

/// Waits until every region of the table has its replicas as `whole` says (a caught-up one
/// in each zone; else exactly one); the table's bytes (sum of the regions' sizes).
fn settle(lab: &LoadedCluster, table_id: i64, whole: bool) -> Result<u64, StepError> {
    let regions = crate::zone_step::wait_for(lab, table_id, "the table's replicas placed", |r| {
        if whole {
            ZONES
                .iter()
                .all(|z| r.peers.iter().any(|p| p.zone == *z && !p.pending))
        } else {
            r.peers.len() == 1
        }
    })?;
    Ok(regions.iter().map(|r| r.approximate_size).sum())
}

fn render(rows: u64, runs: u32, measured: &[Row]) -> String {
    let mut s = format!(
        "### Zone-local reads: {rows} rows, client in zone a, delegate path, median of {runs}\n\n\
         | placement | policy | query | latency ms | bytes scanned | cross-zone bytes | \
         cross / scanned | warned |\n|---|---|---|---|---|---|---|---|\n"
    );
    for r in measured {
        let ratio = if r.scanned == 0 {
            0.0
        } else {
            r.crossed as f64 / r.scanned as f64
        };
        s.push_str(&format!(
            "| {} | {} | {} | {:.1} | {} | {} | {:.4}% | {} |\n",
            r.placement,
            r.policy,
            r.query,
            r.latency.as_secs_f64() * 1e3,
            r.scanned,
            r.crossed,
            ratio * 100.0,
            if r.warned { "yes" } else { "no" }
        ));
    }
    s
}
