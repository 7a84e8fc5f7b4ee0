//! The demo's "a zone without its replica" step: what the node-selection policies do for an
//! entry node whose zone lost its replicas of a table, and how the whole-replica rule brings
//! them back.
//!
//! 1. A client in zone c runs the aggregate under `priority_local_zone_nodes`: every region of
//!    `t` has a caught-up replica in zone c, so zone-c workers read them all, no warning.
//! 2. The placement rule `t-without-c` (table `t`'s keys: zones a and b only, narrower than
//!    `whole-replica`, so it wins for those regions) takes zone c's replicas of `t` away:
//!    `t`'s regions keep two voters. The same query now warns `Total N region(s) can not be
//!    accessed by TiFlash in the zone [c]` and the regions are read by the workers of zones a
//!    and b; `only_local_zone_nodes` reads them from zone c's workers across zones (with the
//!    same warning), or fails when there are more than its tolerance (3 per zone-c worker).
//! 3. Deleting `t-without-c` lets `whole-replica` rule again: zone c gets a replica of each
//!    region back (a Raft snapshot each: the region's file list, no data copied), and once
//!    they are caught up the query runs in zone c with no warning.
//!
//! Each claim is checked against what the cluster answered, as in the rest of the demo.

use std::io::Write;
use std::time::{Duration, Instant};

use wire::pd::ClusterView;

use crate::demo::{DemoError, ms};
use crate::explain_rows::{Explained, NodeNames, Place, Session, node, place};
use crate::loaded_cluster::{LoadedCluster, StepError};
use crate::local_cluster::ClusterError;
use crate::table_format::{self, column_names, text_cell};

/// The rule the step sets and deletes.
const RULE: &str = "t-without-c";
/// How long the placement driver may take to move the replicas.
const SETTLE: Duration = Duration::from_secs(90);

/// Runs the step for table `table_id` with the aggregate `query`.
pub(crate) fn run(
    lab: &LoadedCluster,
    table_id: i64,
    query: &str,
    names: &NodeNames,
    out: &mut dyn Write,
) -> Result<(), DemoError> {
    writeln!(
        out,
        "A client in zone c now. The rule whole-replica keeps a replica of every region in \
         each of zones a, b and c; a narrower rule for table t's keys, zones a and b only, \
         takes zone c's replicas of t away (t's regions keep two voters meanwhile)."
    )?;
    let mut config = lab.cluster.client_config_in("c");
    config.cop_cache.admission_min_process_time = types::ReadableDuration::millis(0);
    let client = lab.static_client(config)?;
    let mut session = Session::new(lab, client);
    session.execute("SET stratus_cop_cache = OFF")?;
    session.execute("SET stratus_remote_coprocessor = ON")?;
    session.execute("SET tidb_tiflash_node_selection_policy = priority_local_zone_nodes")?;

    let before = session.explained(query)?;
    writeln!(out, "\npriority_local_zone_nodes, zone c holding t:")?;
    print_readers(out, &before, names)?;
    check(&before, names, "zone c holding t", false, |zone| {
        zone == "c"
    })?;

    let t = Instant::now();
    lab.cluster
        .set_rule(RULE, &["a", "b"], Some(table_id))
        .map_err(StepError::from)?;
    wait_for(lab, table_id, "zone c's replicas of t removed", |r| {
        r.peers.iter().all(|p| p.zone != "c")
    })?;
    writeln!(
        out,
        "\nstratus ctl rules set {RULE} a,b table:{table_id} → zone c's replicas of t gone in {}",
        ms(t.elapsed())
    )?;
    let without = explained_until(&mut session, query, |run| !run.warnings.is_empty())?;
    writeln!(out, "\npriority_local_zone_nodes, zone c without t:")?;
    print_readers(out, &without, names)?;
    check(&without, names, "zone c without t", true, |zone| {
        zone != "c"
    })?;
    writeln!(
        out,
        "→ no region of t is accessible in zone c: the workers of zones a and b read them, \
         and the warning says so"
    )?;
    session.execute("SET tidb_tiflash_node_selection_policy = only_local_zone_nodes")?;
    match session.explained(query) {
        Ok(only) => {
            writeln!(out, "\nonly_local_zone_nodes, zone c without t:")?;
            print_readers(out, &only, names)?;
            check(&only, names, "only_local without t", true, |zone| {
                zone == "c"
            })?;
            writeln!(
                out,
                "→ zone c's workers read every region across zones (within the tolerance of \
                 3 regions per zone-c worker), with the same warning"
            )?;
        }
        Err(e) => {
            let text = e.to_string();
            if !text.contains("can not be accessed by TiFlash in the zone [c]") {
                return Err(e.into());
            }
            writeln!(
                out,
                "\nonly_local_zone_nodes, zone c without t: the query fails, more regions \
                 than the tolerance (3 per zone-c worker) are out of reach:\n  {text}"
            )?;
        }
    }

    let t = Instant::now();
    lab.cluster.delete_rule(RULE).map_err(StepError::from)?;
    // Three caught-up voters again (zone c's is added as a learner, then promoted): the
    // failover step after this one kills a server and needs the other two for a quorum.
    wait_for(
        lab,
        table_id,
        "zone c's replicas of t back and caught up",
        |r| {
            r.peers.iter().any(|p| p.zone == "c")
                && r.peers
                    .iter()
                    .filter(|p| !p.is_learner() && !p.pending)
                    .count()
                    == 3
        },
    )?;
    writeln!(
        out,
        "\nstratus ctl rules delete {RULE} → whole-replica rules t again: zone c's replicas \
         back and caught up in {} (a Raft snapshot each: the file list, no data copied)",
        ms(t.elapsed())
    )?;
    session.execute("SET tidb_tiflash_node_selection_policy = priority_local_zone_nodes")?;
    let after = explained_until(&mut session, query, |run| run.warnings.is_empty())?;
    writeln!(out, "\npriority_local_zone_nodes, zone c holding t again:")?;
    print_readers(out, &after, names)?;
    check(&after, names, "zone c holding t again", false, |zone| {
        zone == "c"
    })?;
    writeln!(out, "→ every region read in zone c again, no warning")?;
    client.close();
    Ok(())
}

/// Runs `query` until `done` says its run shows what the placement driver's table already
/// does (the client's routing table follows the placement driver's watch a moment later), at
/// most [`SETTLE`]; the last run. Shared with `stratus bench --zones`.
pub(crate) fn explained_until(
    session: &mut Session<'_>,
    query: &str,
    done: impl Fn(&Explained) -> bool,
) -> Result<Explained, StepError> {
    let deadline = Instant::now() + SETTLE;
    loop {
        let run = session.explained(query)?;
        if done(&run) || Instant::now() > deadline {
            return Ok(run);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// region | read by (zone), then the warnings.
fn print_readers(out: &mut dyn Write, run: &Explained, names: &NodeNames) -> std::io::Result<()> {
    let rows: Vec<Vec<wire::datum::Datum>> = run
        .regions
        .iter()
        .map(|r| {
            vec![
                text_cell(&r.id_text()),
                text_cell(&format!(
                    "{} ({})",
                    names.name(node(r)),
                    names.zone(node(r))
                )),
            ]
        })
        .collect();
    out.write_all(table_format::render(&column_names(&["region", "read by"]), &rows).as_bytes())?;
    for w in &run.warnings {
        writeln!(out, "warning: {w}")?;
    }
    writeln!(
        out,
        "{}bytes moved across zones: {} ({})",
        if run.warnings.is_empty() {
            "no warning; "
        } else {
            ""
        },
        run.cross_zone_bytes,
        ms(run.elapsed)
    )
}

/// Every region went to a worker whose zone `zone_ok` accepts, and the run warned as `warned`
/// says (the warning naming zone c) and moved bytes across zones exactly when it warned: a
/// region out of zone c's reach is read by another zone's worker (its answer crosses to the
/// client) or by a zone-c worker from another zone's replica.
fn check(
    run: &Explained,
    names: &NodeNames,
    step: &'static str,
    warned: bool,
    zone_ok: impl Fn(&str) -> bool,
) -> Result<(), DemoError> {
    let placed_ok = !run.regions.is_empty()
        && run
            .regions
            .iter()
            .all(|r| place(r) == Place::Worker && zone_ok(names.zone(node(r))));
    let warning_ok = if warned {
        run.warnings
            .iter()
            .any(|w| w.contains("can not be accessed by TiFlash in the zone [c]"))
    } else {
        run.warnings.is_empty()
    };
    let crossed_ok = (run.cross_zone_bytes > 0) == warned;
    if placed_ok && warning_ok && crossed_ok {
        return Ok(());
    }
    let found: Vec<String> = run
        .regions
        .iter()
        .map(|r| format!("{} by {}", r.id_text(), names.zone(node(r))))
        .collect();
    Err(DemoError::Unexpected {
        step,
        expected: format!("the readers' zones, warned={warned} and bytes across zones={warned}"),
        found: format!(
            "{} warnings={:?} cross_zone_bytes={}",
            found.join(", "),
            run.warnings,
            run.cross_zone_bytes
        ),
    })
}

/// Waits until every region of table `table_id` in the placement driver's table satisfies
/// `done` (at most [`SETTLE`]); those regions. Shared with `stratus bench --zones`.
pub(crate) fn wait_for(
    lab: &LoadedCluster,
    table_id: i64,
    what: &str,
    done: impl Fn(&wire::region::Region) -> bool,
) -> Result<Vec<wire::region::Region>, StepError> {
    let deadline = Instant::now() + SETTLE;
    let mut last = String::new();
    while Instant::now() < deadline {
        match lab.cluster.pd_view() {
            Ok(view) => {
                let regions = table_regions(&view, table_id);
                if !regions.is_empty() && regions.iter().all(|r| done(r)) {
                    return Ok(regions.into_iter().cloned().collect());
                }
                last = format!("regions of t: {regions:?}");
            }
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(StepError::Cluster(ClusterError::Pd(format!(
        "{what}: not within {SETTLE:?}; {last}"
    ))))
}

/// The regions of the table in the placement driver's routing table.
fn table_regions(view: &ClusterView, table_id: i64) -> Vec<&wire::region::Region> {
    let (start, end) = wire::codec::table::table_range(table_id);
    view.regions
        .iter()
        .filter(|r| (r.end.is_empty() || start < r.end) && r.start < end)
        .collect()
}
