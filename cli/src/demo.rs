//! `stratus demo`: the first command of the README. It starts a local cluster in a temporary
//! directory, loads the sample table and walks through what Stratus decides and why, in output
//! meant to be read by a person:
//!
//! 1. the nodes (a server and two workers in each of zones `a`, `b` and `c`, each server
//!    holding a replica of every region, the whole-replica rule on), and which server leads
//!    which regions;
//! 2. the load of table `t` (progress bar on stderr, rows/s), then a flush of every server:
//!    the offload estimate counts SST blocks only, so data still in memtables would look small;
//!    then a compaction of every region, each run on a worker (`remote-compaction`);
//! 3. local or offloaded, and why: a query over a small table stays local (too small to be
//!    worth shipping, even on a busy server); the whole-table aggregate stays local on an idle
//!    server (`cpu_idle`) and goes to a worker on a busy one (`cpu_busy`). The CPU load is the
//!    cluster's `cpu-load` file ([`LocalCluster::set_cpu_load`]), so the demo is the same on
//!    any machine;
//! 4. the coprocessor cache: the same aggregate again is answered from the cache
//!    (`cache_hit=true`), and how much faster that is;
//! 5. node selection on the delegate path: the same aggregate under each value of
//!    `tidb_tiflash_node_selection_policy`, which worker read which region, and `SHOW WARNINGS`
//!    (none: every region has a replica in the client's zone);
//! 6. a zone without its replica ([`zone_step`](crate::zone_step)): from zone c, a placement
//!    rule takes zone c's replicas of `t` away and the local policies warn, then the
//!    whole-replica rule brings them back;
//! 7. the servers' decision counters (`tikv_coprocessor_remote_decision_total`), counted
//!    from the first query of step 3 (the loads' own reads are left out);
//! 8. failover ([`failover_step`](crate::failover_step)): `server-b` is SIGKILLed while a
//!    query loop and a write loop run; both go on once the other replicas elect new leaders,
//!    and the supervisor restarts `server-b`, which catches up (after step 7: a restarted
//!    server's counters start from zero);
//! 9. a clean stop of every node, and the total time.
//!
//! Every claim the demo prints is checked against what the cluster answered: a region that
//! ran elsewhere than the step says is a [`DemoError::Unexpected`], not a misleading line.
//!
//! The client admits every result to the coprocessor cache (admission minimum process time
//! 0 instead of 5 ms) so that step 4 shows a hit for every region even with few rows.
//!
//! The cluster it runs on is a [`LoadedCluster`], the region rows it checks come from
//! [`explain_rows`](crate::explain_rows), and step 6 reads
//! [`decision_metrics`](crate::decision_metrics).
//!
//! [`LocalCluster::set_cpu_load`]: crate::local_cluster::LocalCluster::set_cpu_load

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use client::sql::RegionExplain;
use types::RegionId;
use wire::datum::Datum;
use wire::placement::OffloadReason;

use crate::decision_metrics::{decision_counts, decision_delta, render_decisions};
use crate::explain_rows::{Explained, NodeNames, Place, Session, node, place};
use crate::failover_step;
use crate::leader_placement;
use crate::loaded_cluster::{LoadedCluster, StepError};
use crate::table_format::{self, column_names, text_cell};

/// The whole-table aggregate of steps 3 to 5.
const AGGREGATE: &str = "SELECT grp, COUNT(*), SUM(v), AVG(v) FROM t GROUP BY grp ORDER BY grp";

/// The small table of step 3, and its rows: far below `remote-coprocessor-min-blocks-size`.
const SMALL_TABLE: &str = "t_small";
const SMALL_ROWS: u64 = 100;

/// The narrow query of step 3. (`WHERE id BETWEEN 0 AND 99` on `t` would not do: the
/// estimate counts whole SST blocks (64 KiB by default), so even the few blocks holding those
/// rows exceed the local cluster's `remote-coprocessor-min-blocks-size` of 32 KiB, and a busy
/// server ships it.)
const NARROW: &str = "SELECT COUNT(*), SUM(v) FROM t_small";

/// The policies of step 5, in the order shown.
const POLICIES: [&str; 3] = [
    "all_nodes",
    "priority_local_zone_nodes",
    "only_local_zone_nodes",
];

/// `stratus demo` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoOptions {
    /// Rows of the sample table (fewer: a faster demo; tests use 20,000).
    pub rows: u64,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions { rows: 200_000 }
    }
}

/// Why `stratus demo` failed (printed by `main` as `Error: ...`; exit code 1).
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Step(#[from] StepError),
    /// The cluster did not behave as the step explains.
    #[error("{step}: expected {expected}, found {found}")]
    Unexpected {
        step: &'static str,
        expected: String,
        found: String,
    },
}

impl From<std::io::Error> for DemoError {
    fn from(e: std::io::Error) -> Self {
        DemoError::Step(StepError::Output(e))
    }
}

/// Runs the demo, printing to stdout (the load progress bar goes to stderr).
pub fn run(opts: DemoOptions) -> Result<(), DemoError> {
    let mut out = std::io::stdout().lock();
    run_to(&opts, &mut out)
}

/// [`run`], printing to `out`.
pub fn run_to(opts: &DemoOptions, out: &mut dyn Write) -> Result<(), DemoError> {
    let started = Instant::now();
    writeln!(
        out,
        "Stratus demo: a local cluster, {} rows, and what runs where.",
        opts.rows
    )?;
    heading(out, "1. the cluster")?;
    let mut lab = LoadedCluster::start(out)?;
    heading(out, "2. the sample table")?;
    let table = lab.load(opts.rows, out)?;
    lab.compact(out)?;
    let names = NodeNames::of(&lab.cluster);
    let mut client_config = lab.cluster.client_config();
    client_config.cop_cache.admission_min_process_time = types::ReadableDuration::millis(0);
    let client = lab.static_client(client_config)?;
    let mut session = Session::new(&lab, client);

    // 3. Local or offloaded, and why.
    heading(out, "3. local or offloaded, and why")?;
    writeln!(
        out,
        "The server decides per region: too few SST blocks to be worth shipping stays local; \
         a big one stays local while the server's CPU is idle and goes to a worker of its \
         zone when it is busy.\n"
    )?;
    session.execute("SET stratus_cop_cache = OFF")?;
    lab.load_table(SMALL_TABLE, SMALL_ROWS, out)?;
    // The decisions of step 6 are those of the queries from here on, not of the loads.
    let before = decision_counts(&lab.cluster)?;
    lab.cluster.set_cpu_load(1.0).map_err(StepError::from)?;
    writeln!(out, "\nCPU load 100%, a small table: {NARROW}")?;
    let narrow = session.explained(NARROW)?;
    print_regions(out, &narrow, &names)?;
    expect_all(&narrow, "small query", "every region local", |r| {
        place(r) == Place::Local && r.has_reason(OffloadReason::BelowMinBlocksSize)
    })?;
    writeln!(
        out,
        "→ too small to be worth shipping (below remote-coprocessor-min-blocks-size): local \
         even on a busy server"
    )?;

    lab.cluster.set_cpu_load(0.0).map_err(StepError::from)?;
    writeln!(out, "\nCPU load 0%, whole-table aggregate: {AGGREGATE}")?;
    let idle = session.explained(AGGREGATE)?;
    print_regions(out, &idle, &names)?;
    expect_any(
        &idle,
        "idle server",
        "a local region with reason cpu_idle",
        |r| place(r) == Place::Local && r.has_reason(OffloadReason::CpuIdle),
    )?;
    let t = Instant::now();
    let answer = session.execute(AGGREGATE)?;
    writeln!(out, "\nThe answer ({}):", ms(t.elapsed()))?;
    out.write_all(table_format::render(&answer.columns, &answer.rows).as_bytes())?;

    lab.cluster.set_cpu_load(1.0).map_err(StepError::from)?;
    writeln!(out, "\nCPU load 100%, the same aggregate:")?;
    let busy = session.explained(AGGREGATE)?;
    print_regions(out, &busy, &names)?;
    expect_any(
        &busy,
        "busy server",
        "a remote region with reason cpu_busy",
        |r| place(r) == Place::Remote && r.has_reason(OffloadReason::CpuBusy),
    )?;
    writeln!(
        out,
        "\nidle: {} local; busy: {} offloaded to a worker",
        ms(idle.elapsed),
        ms(busy.elapsed)
    )?;

    // 4. The coprocessor cache.
    heading(out, "4. the coprocessor cache")?;
    writeln!(
        out,
        "A repeated request carries the version of its cached result; the server answers \
         \"still valid\" without running it while nothing in the region changed.\n"
    )?;
    session.execute("SET stratus_cop_cache = ON")?;
    let first = session.explained(AGGREGATE)?;
    writeln!(out, "first run ({}):", ms(first.elapsed))?;
    print_regions(out, &first, &names)?;
    let repeat = session.explained(AGGREGATE)?;
    writeln!(out, "\nrepeated run ({}):", ms(repeat.elapsed))?;
    print_regions(out, &repeat, &names)?;
    expect_all(
        &repeat,
        "repeated aggregate",
        "cache_hit=true on every region",
        |r| r.cache_hit,
    )?;
    writeln!(
        out,
        "\nfirst {} → repeated {}: {:.1}× faster",
        ms(first.elapsed),
        ms(repeat.elapsed),
        ratio(first.elapsed, repeat.elapsed)
    )?;

    // 5. Node selection on the delegate path.
    heading(out, "5. node selection (the delegate path)")?;
    writeln!(
        out,
        "With stratus_remote_coprocessor = ON the client sends each region straight to a \
         worker chosen by tidb_tiflash_node_selection_policy. This client is in zone a; \
         every region has a replica in each of zones a, b and c (a Raft group of three), so \
         no region is out of reach of zone a."
    )?;
    session.execute("SET stratus_cop_cache = OFF")?;
    session.execute("SET stratus_remote_coprocessor = ON")?;
    let replicas = replica_zones(&lab)?;
    for policy in POLICIES {
        session.execute(&format!(
            "SET tidb_tiflash_node_selection_policy = {policy}"
        ))?;
        let run = session.explained(AGGREGATE)?;
        let warnings = session.execute("SHOW WARNINGS")?;
        writeln!(out, "\n{policy} ({}):", ms(run.elapsed))?;
        let placed = print_selection(out, &run, &replicas, &names)?;
        out.write_all(table_format::render(&warnings.columns, &warnings.rows).as_bytes())?;
        let warned = !run.warnings.is_empty() || !warnings.rows.is_empty();
        writeln!(out, "→ {}", explain_policy(policy, &placed, warned)?)?;
        writeln!(
            out,
            "  bytes moved across zones: {} (every read in its reader's zone)",
            run.cross_zone_bytes
        )?;
        if policy != "all_nodes" && run.cross_zone_bytes != 0 {
            return Err(DemoError::Unexpected {
                step: policy,
                expected: "no byte across zones from zone a".into(),
                found: format!("{} bytes", run.cross_zone_bytes),
            });
        }
    }
    session.execute("SET stratus_remote_coprocessor = OFF")?;
    drop(session);

    // 6. A zone without its replica.
    heading(out, "6. a zone without its replica")?;
    crate::zone_step::run(&lab, table.id, AGGREGATE, &names, out)?;

    // 7. Decision counts.
    heading(out, "7. the servers' decisions")?;
    writeln!(
        out,
        "tikv_coprocessor_remote_decision_total{{result,reason}} from each server's /metrics, \
         counted since the first query of step 3: one per region request a server decided (cache hits, \
         requests below the size threshold and delegated ones are not decisions):\n"
    )?;
    let after = decision_counts(&lab.cluster)?;
    out.write_all(render_decisions(&decision_delta(&before, &after)?).as_bytes())?;

    // 8. Failover.
    heading(out, "8. failover")?;
    writeln!(
        out,
        "Every write is committed by a quorum of the region's three replicas before it is \
         acknowledged, so losing one server loses nothing and stops nothing for long.\n"
    )?;
    failover_step::run(&mut lab, client, AGGREGATE, SMALL_TABLE, out)?;

    // 9. Stop.
    client.close();
    heading(out, "9. stop")?;
    lab.stop()?;
    writeln!(out, "every node stopped cleanly")?;
    writeln!(
        out,
        "demo finished in {:.1} s",
        started.elapsed().as_secs_f64()
    )?;
    Ok(())
}

/// `== title ==` with a blank line before.
fn heading(out: &mut dyn Write, title: &str) -> std::io::Result<()> {
    writeln!(out, "\n== {title} ==")
}

/// `12.3 ms`.
pub(crate) fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// `a / b`, with a zero `b` counted as a microsecond.
pub(crate) fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-6)
}

/// region | task | detail, with node names for URLs.
fn print_regions(out: &mut dyn Write, run: &Explained, names: &NodeNames) -> std::io::Result<()> {
    let rows: Vec<Vec<Datum>> = run
        .regions
        .iter()
        .map(|r| {
            vec![
                text_cell(&r.id_text()),
                text_cell(&names.task(r)),
                text_cell(&r.detail()),
            ]
        })
        .collect();
    out.write_all(
        table_format::render(&column_names(&["region", "task", "detail"]), &rows).as_bytes(),
    )?;
    writeln!(out, "query time: {}", ms(run.elapsed))
}

/// Every region row must satisfy `ok` (and there must be one).
fn expect_all(
    run: &Explained,
    step: &'static str,
    expected: &str,
    ok: impl Fn(&RegionExplain) -> bool,
) -> Result<(), DemoError> {
    if !run.regions.is_empty() && run.regions.iter().all(ok) {
        return Ok(());
    }
    Err(unexpected(run, step, expected))
}

/// At least one region row must satisfy `ok`.
fn expect_any(
    run: &Explained,
    step: &'static str,
    expected: &str,
    ok: impl Fn(&RegionExplain) -> bool,
) -> Result<(), DemoError> {
    if run.regions.iter().any(ok) {
        return Ok(());
    }
    Err(unexpected(run, step, expected))
}

fn unexpected(run: &Explained, step: &'static str, expected: &str) -> DemoError {
    let found: Vec<String> = run
        .regions
        .iter()
        .map(|r| format!("[{} | {} | {}]", r.id_text(), r.task(), r.detail()))
        .collect();
    DemoError::Unexpected {
        step,
        expected: expected.to_string(),
        found: if found.is_empty() {
            "no region rows".into()
        } else {
            found.join(" ")
        },
    }
}

/// Region id → the zones holding a replica of it, from the servers' `/regions`.
fn replica_zones(lab: &LoadedCluster) -> Result<BTreeMap<RegionId, Vec<String>>, DemoError> {
    let view =
        leader_placement::leaders(&lab.cluster.server_urls()).map_err(|e| StepError::Regions {
            server: "all".into(),
            reason: e.to_string(),
        })?;
    Ok(view
        .into_iter()
        .map(|(id, led)| {
            let zones = led
                .region
                .replica_zones()
                .iter()
                .map(|z| z.as_str().to_string())
                .collect();
            (RegionId(id), zones)
        })
        .collect())
}

/// One region under a node selection policy: the zones of its replicas and of its reader.
struct Placed {
    replica_zones: Vec<String>,
    worker: String,
    worker_zone: String,
}

impl Placed {
    /// Read by a worker of a zone holding a replica.
    fn in_zone(&self) -> bool {
        self.replica_zones.contains(&self.worker_zone)
    }
}

/// region | replicas in | read by (zone) | read; returns the placements.
fn print_selection(
    out: &mut dyn Write,
    run: &Explained,
    replicas: &BTreeMap<RegionId, Vec<String>>,
    names: &NodeNames,
) -> Result<Vec<Placed>, DemoError> {
    let mut placed = Vec::new();
    let mut rows = Vec::new();
    for r in &run.regions {
        if place(r) != Place::Worker {
            return Err(unexpected(
                run,
                "node selection",
                "every region sent to a worker",
            ));
        }
        let p = Placed {
            replica_zones: replicas.get(&r.region_id).cloned().unwrap_or_default(),
            worker: names.name(node(r)).to_string(),
            worker_zone: names.zone(node(r)).to_string(),
        };
        let read = if p.in_zone() {
            "in a replica's zone"
        } else {
            "across zones"
        };
        rows.push(vec![
            text_cell(&r.id_text()),
            text_cell(&p.replica_zones.join(", ")),
            text_cell(&format!("{} ({})", p.worker, p.worker_zone)),
            text_cell(read),
            text_cell(&r.detail()),
        ]);
        placed.push(p);
    }
    let cols = column_names(&["region", "replicas in", "read by", "read", "detail"]);
    out.write_all(table_format::render(&cols, &rows).as_bytes())?;
    Ok(placed)
}

/// The one-line explanation of a policy's outcome, checked against what happened.
fn explain_policy(
    policy: &'static str,
    placed: &[Placed],
    warned: bool,
) -> Result<String, DemoError> {
    let all = |f: &dyn Fn(&Placed) -> bool| !placed.is_empty() && placed.iter().all(f);
    // The workers that read, each once.
    let read_by = || {
        let mut w: Vec<&str> = placed.iter().map(|p| p.worker.as_str()).collect();
        w.sort_unstable();
        w.dedup();
        w.join(", ")
    };
    let (ok, expected, line) = match policy {
        "all_nodes" => (
            all(&|p| p.in_zone()) && !warned,
            "every region read in a zone holding a replica of it, no warning",
            format!(
                "all_nodes: any worker of a zone holding a replica may read a region (here \
                 every worker); read by {}; no warning",
                read_by()
            ),
        ),
        "priority_local_zone_nodes" => (
            all(&|p| p.worker_zone == "a" && p.in_zone()) && !warned,
            "every region read in zone a, no warning",
            format!(
                "priority_local_zone_nodes: every region has a replica in zone a, so zone-a \
                 workers read them all ({}); no warning",
                read_by()
            ),
        ),
        _ => (
            all(&|p| p.worker_zone == "a" && p.in_zone()) && !warned,
            "every region read in zone a, no warning",
            format!(
                "only_local_zone_nodes: the same, and a region without a zone-a replica would \
                 be read across zones with a warning; there is none ({})",
                read_by()
            ),
        ),
    };
    if ok {
        Ok(line)
    } else {
        let found: Vec<String> = placed
            .iter()
            .map(|p| {
                format!(
                    "{} zone {} → replicas in {}",
                    p.worker,
                    p.worker_zone,
                    p.replica_zones.join("/")
                )
            })
            .collect();
        Err(DemoError::Unexpected {
            step: policy,
            expected: expected.to_string(),
            found: format!("{} warned={warned}", found.join(", ")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(replicas: &[&str], worker: &str, worker_zone: &str) -> Placed {
        Placed {
            replica_zones: replicas.iter().map(|z| z.to_string()).collect(),
            worker: worker.into(),
            worker_zone: worker_zone.into(),
        }
    }

    #[test]
    fn each_policy_line_is_checked_against_where_regions_were_read() {
        let abc = ["a", "b", "c"];
        let spread = [
            placed(&abc, "worker-a1", "a"),
            placed(&abc, "worker-b1", "b"),
        ];
        let only_a = [
            placed(&abc, "worker-a1", "a"),
            placed(&abc, "worker-a2", "a"),
        ];
        let away = [placed(&["b"], "worker-a1", "a")];
        assert!(explain_policy("all_nodes", &spread, false).is_ok());
        assert!(explain_policy("all_nodes", &spread, true).is_err());
        assert!(explain_policy("all_nodes", &away, false).is_err());
        assert!(explain_policy("priority_local_zone_nodes", &only_a, false).is_ok());
        assert!(explain_policy("priority_local_zone_nodes", &spread, false).is_err());
        assert!(explain_policy("priority_local_zone_nodes", &only_a, true).is_err());
        let line = explain_policy("only_local_zone_nodes", &only_a, false).unwrap();
        assert!(line.contains("worker-a1, worker-a2"), "{line}");
        assert!(explain_policy("only_local_zone_nodes", &away, true).is_err());
        assert!(explain_policy("only_local_zone_nodes", &[], false).is_err());
    }
}
