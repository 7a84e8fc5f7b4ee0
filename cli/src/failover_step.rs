//! The demo's failover step: a server that leads regions is SIGKILLed while a query loop and a
//! write loop run; both go on once the other replicas elect new leaders, and the restarted
//! server catches up.
//!
//! What it checks (a claim it cannot back is a [`DemoError::Unexpected`]):
//! * no query failed, and every answer equals the one before the kill (the queried table is
//!   not written meanwhile);
//! * no write failed, writes were acknowledged after the kill, and every acknowledged row is
//!   in the table afterwards (none lost) while no row exists that was never written;
//! * the restarted server reaches, for every region, the data version (applied Raft index)
//!   of the other replicas.
//!
//! The loops run on the loaded cluster's runtime in a thread of their own, so that the demo's
//! thread can kill and restart the server with blocking calls meanwhile.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use client::Client;
use sqlfront::{FrontSession, Output};
use wire::datum::Datum;

use crate::demo::{DemoError, ms};
use crate::leader_placement;
use crate::loaded_cluster::{LoadedCluster, StepError};

/// The server killed: it leads the regions of non-negative handles (all of `table`'s writes),
/// and is not the TSO (`server-a`), which stays on one server in this release.
pub const VICTIM: &str = "server-b";
/// Handles of the rows the write loop inserts: far above the sample rows'.
const FIRST_ID: i64 = 1_000_000;
/// How long the loops run before the kill and after the restart.
const STEADY: Duration = Duration::from_secs(1);
/// How long the dead server may take to be restarted by the supervisor.
const RESTART_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the restarted server may take to catch up.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(60);

/// What the query loop saw.
#[derive(Default)]
struct Queries {
    ok: usize,
    /// Answers that differ from the one before the kill.
    different: Vec<String>,
    failed: Vec<String>,
    /// The longest query.
    longest: Duration,
}

/// What the write loop saw.
#[derive(Default)]
struct Writes {
    /// Ids acknowledged, with when.
    acked: Vec<(i64, Instant)>,
    /// Ids whose statement failed (its outcome unknown to the client).
    failed: Vec<(i64, String)>,
}

impl Writes {
    /// The longest time between two acknowledgements (or the start and the first): how long
    /// writes stood still.
    fn longest_pause(&self, started: Instant) -> Duration {
        let mut last = started;
        let mut longest = Duration::ZERO;
        for &(_, at) in &self.acked {
            longest = longest.max(at.saturating_duration_since(last));
            last = at;
        }
        longest
    }
}

/// Runs the step on `lab` (whose cluster it kills a server of) with `client`; `query` is a
/// read-only query of a table the loop does not write, `table` the one it writes
/// (`id BIGINT PRIMARY KEY` and four more columns, the sample table's shape).
pub fn run(
    lab: &mut LoadedCluster,
    client: &'static Client,
    query: &str,
    table: &str,
    out: &mut dyn Write,
) -> Result<(), DemoError> {
    let before = lab.leaders_per_server()?;
    let led = before
        .iter()
        .find(|(name, _)| name == VICTIM)
        .map_or(0, |(_, n)| *n);
    if led == 0 {
        return Err(DemoError::Unexpected {
            step: "failover",
            expected: format!("{VICTIM} leading regions"),
            found: describe(&before),
        });
    }
    let expected = lab.rt.block_on(async {
        FrontSession::new(client)
            .execute(query)
            .await
            .map(Output::into_query_result)
            .map_err(|e| statement_error(query, &e))
    })?;
    writeln!(
        out,
        "Regions led: {}. A query loop ({query}) and a write loop (INSERT INTO {table}) \
         run; after a second {VICTIM} (leading {led}) gets SIGKILL.",
        describe(&before)
    )?;

    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let rt = &lab.rt;
    let cluster = &mut lab.cluster;
    let (restart, (queries, writes)) = std::thread::scope(|s| {
        let loops = s.spawn(|| {
            rt.block_on(async {
                tokio::join!(
                    query_loop(client, query, &expected.rows, &stop),
                    write_loop(client, table, &stop)
                )
            })
        });
        let outcome = kill_and_restart(cluster, &stop);
        stop.store(true, Ordering::Release);
        let seen = loops.join();
        outcome.map(|restart| {
            (
                restart,
                seen.unwrap_or_else(|p| std::panic::resume_unwind(p)),
            )
        })
    })?;
    let killed_at = restart.killed_at;
    writeln!(out, "supervisor: {}", restart.said)?;
    let after_kill = writes
        .acked
        .iter()
        .filter(|(_, at)| *at > killed_at)
        .count();
    writeln!(
        out,
        "queries: {} answered, {} failed, {} different from before the kill; the longest took {}",
        queries.ok,
        queries.failed.len(),
        queries.different.len(),
        ms(queries.longest)
    )?;
    writeln!(
        out,
        "writes: {} acknowledged ({after_kill} after the kill), {} failed; writes stood still \
         for at most {} (new leaders elected among the two other replicas)",
        writes.acked.len(),
        writes.failed.len(),
        ms(writes.longest_pause(started))
    )?;
    check(
        queries.failed.is_empty() && queries.different.is_empty() && queries.ok > 0,
        "every query answered, as before the kill",
        || {
            format!(
                "failed={:?} different={:?}",
                queries.failed, queries.different
            )
        },
    )?;
    check(
        writes.failed.is_empty() && after_kill > 0,
        "every write acknowledged, some after the kill",
        || format!("failed={:?} after_kill={after_kill}", writes.failed),
    )?;

    writeln!(
        out,
        "{VICTIM} caught up {} after its restart: every region at the data version (applied \
         Raft index) the other replicas had when it came back",
        ms(restart.caught_up)
    )?;
    let regions = wait_all_equal(&lab.cluster.server_urls())?;
    writeln!(
        out,
        "once the loops stopped, all {} regions were at the same data version on every server",
        regions
    )?;
    let found = rows_written(lab, client, table)?;
    let acked: BTreeSet<i64> = writes.acked.iter().map(|(id, _)| *id).collect();
    let missing: Vec<&i64> = acked.difference(&found).collect();
    let attempted = FIRST_ID + writes.acked.len() as i64 + writes.failed.len() as i64;
    let unknown: Vec<&i64> = found.iter().filter(|id| **id >= attempted).collect();
    check(
        missing.is_empty() && unknown.is_empty(),
        "every acknowledged row in the table, no row never written",
        || format!("missing={missing:?} never_written={unknown:?}"),
    )?;
    writeln!(
        out,
        "all {} acknowledged rows are in {table}; regions led now: {}",
        acked.len(),
        describe(&lab.leaders_per_server()?)
    )?;
    Ok(())
}

/// What [`kill_and_restart`] saw.
struct Restart {
    killed_at: Instant,
    /// The supervisor's line.
    said: String,
    /// From the restart until [`VICTIM`] reached the versions the others had then.
    caught_up: Duration,
}

/// SIGKILLs [`VICTIM`] after [`STEADY`], lets the supervisor restart it, waits until it
/// caught up with the others, and lets the loops run [`STEADY`] more.
fn kill_and_restart(
    cluster: &mut crate::local_cluster::LocalCluster,
    stop: &AtomicBool,
) -> Result<Restart, DemoError> {
    let urls = cluster.server_urls();
    let victim = victim_index(cluster);
    std::thread::sleep(STEADY);
    let killed_at = Instant::now();
    cluster.kill(VICTIM).map_err(StepError::from)?;
    let said = loop {
        let said = cluster.restart_dead().map_err(StepError::from)?;
        if !said.is_empty() {
            break said.join("; ");
        }
        if killed_at.elapsed() > RESTART_TIMEOUT || stop.load(Ordering::Acquire) {
            return Err(DemoError::Unexpected {
                step: "failover",
                expected: format!("{VICTIM} restarted within {RESTART_TIMEOUT:?}"),
                found: "no restart".into(),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let restarted = Instant::now();
    let others: Vec<(u64, String)> = urls
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != victim)
        .map(|(_, u)| u.clone())
        .collect();
    let target = highest(&versions(&others)?);
    loop {
        let have = versions(std::slice::from_ref(&urls[victim]))?;
        if reached(&have[0], &target) {
            break;
        }
        if restarted.elapsed() > CATCH_UP_TIMEOUT {
            return Err(DemoError::Unexpected {
                step: "failover",
                expected: format!("{VICTIM} at {target:?} within {CATCH_UP_TIMEOUT:?}"),
                found: format!("{:?}", have[0]),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let caught_up = restarted.elapsed();
    std::thread::sleep(STEADY.saturating_sub(caught_up));
    Ok(Restart {
        killed_at,
        said,
        caught_up,
    })
}

fn victim_index(cluster: &crate::local_cluster::LocalCluster) -> usize {
    cluster
        .servers()
        .iter()
        .position(|s| s.name == VICTIM)
        .unwrap_or(0)
}

async fn query_loop(
    client: &'static Client,
    query: &str,
    expected: &[Vec<Datum>],
    stop: &AtomicBool,
) -> Queries {
    let mut front = FrontSession::new(client);
    let mut seen = Queries::default();
    while !stop.load(Ordering::Acquire) {
        let t = Instant::now();
        match front.execute(query).await.map(Output::into_query_result) {
            Ok(answer) if same_rows(&answer.rows, expected) => seen.ok += 1,
            Ok(answer) => seen.different.push(format!("{:?}", answer.rows)),
            Err(e) => seen.failed.push(node::error_chain(&e)),
        }
        seen.longest = seen.longest.max(t.elapsed());
    }
    seen
}

async fn write_loop(client: &'static Client, table: &str, stop: &AtomicBool) -> Writes {
    let mut front = FrontSession::new(client);
    let mut seen = Writes::default();
    let mut id = FIRST_ID;
    while !stop.load(Ordering::Acquire) {
        let sql = format!("INSERT INTO {table} VALUES ({id}, 0, 0, 0.0, 'failover')");
        match front.execute(&sql).await {
            Ok(_) => seen.acked.push((id, Instant::now())),
            Err(e) => seen.failed.push((id, node::error_chain(&e))),
        }
        id += 1;
    }
    seen
}

/// Equal rows, reals within a relative 1e-9 (a sum of doubles may be added up in another
/// order when a region's pages ran elsewhere).
fn same_rows(a: &[Vec<Datum>], b: &[Vec<Datum>]) -> bool {
    let same = |x: &Datum, y: &Datum| match (x, y) {
        (Datum::Real(x), Datum::Real(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
        _ => x == y,
    };
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(r, s)| r.len() == s.len() && r.iter().zip(s).all(|(x, y)| same(x, y)))
}

/// Each server's data version of every region it holds, in `urls` order.
fn versions(urls: &[(u64, String)]) -> Result<Vec<BTreeMap<u64, u64>>, DemoError> {
    urls.iter()
        .map(|(_, url)| leader_placement::data_versions(url))
        .collect::<Result<_, _>>()
        .map_err(|e| {
            DemoError::Step(StepError::Regions {
                server: "all".into(),
                reason: e.to_string(),
            })
        })
}

/// `have` holds every region of `target` at its version or a later one.
fn reached(have: &BTreeMap<u64, u64>, target: &BTreeMap<u64, u64>) -> bool {
    target
        .iter()
        .all(|(id, v)| have.get(id).is_some_and(|h| h >= v))
}

/// Waits until every server lists the same regions at the same data versions (the writes
/// stopped: the versions stand still but for log truncations); how many regions.
fn wait_all_equal(urls: &[(u64, String)]) -> Result<usize, DemoError> {
    let deadline = Instant::now() + CATCH_UP_TIMEOUT;
    loop {
        let per_server = versions(urls)?;
        if per_server.windows(2).all(|w| w[0] == w[1]) {
            return Ok(per_server.first().map_or(0, BTreeMap::len));
        }
        if Instant::now() > deadline {
            return Err(DemoError::Unexpected {
                step: "failover",
                expected: format!("equal data versions within {CATCH_UP_TIMEOUT:?}"),
                found: format!("{per_server:?}"),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Per region, the highest version among `per_server`.
fn highest(per_server: &[BTreeMap<u64, u64>]) -> BTreeMap<u64, u64> {
    let mut out = BTreeMap::new();
    for versions in per_server {
        for (&id, &v) in versions {
            let e = out.entry(id).or_insert(v);
            *e = (*e).max(v);
        }
    }
    out
}

/// The handles at or above [`FIRST_ID`] in `table`.
fn rows_written(
    lab: &LoadedCluster,
    client: &'static Client,
    table: &str,
) -> Result<BTreeSet<i64>, DemoError> {
    let sql = format!("SELECT id FROM {table} WHERE id >= {FIRST_ID}");
    let answer = lab.rt.block_on(async {
        FrontSession::new(client)
            .execute(&sql)
            .await
            .map(Output::into_query_result)
            .map_err(|e| statement_error(&sql, &e))
    })?;
    answer
        .rows
        .iter()
        .map(|row| match row.first() {
            Some(Datum::Int(id)) => Ok(*id),
            other => Err(DemoError::Unexpected {
                step: "failover",
                expected: "an integer id per row".into(),
                found: format!("{other:?}"),
            }),
        })
        .collect()
}

fn statement_error(sql: &str, e: &sqlfront::FrontError) -> StepError {
    StepError::Statement {
        sql: sql.to_string(),
        message: node::error_chain(e),
    }
}

fn check(ok: bool, expected: &str, found: impl FnOnce() -> String) -> Result<(), DemoError> {
    if ok {
        return Ok(());
    }
    Err(DemoError::Unexpected {
        step: "failover",
        expected: expected.to_string(),
        found: found(),
    })
}

/// `server-a 3, server-b 2, server-c 0`.
fn describe(counts: &[(String, usize)]) -> String {
    counts
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_pause_is_the_widest_gap_between_acknowledgements() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let writes = Writes {
            acked: vec![(1, at(10)), (2, at(20)), (3, at(1520)), (4, at(1530))],
            failed: Vec::new(),
        };
        assert_eq!(writes.longest_pause(t0), Duration::from_millis(1500));
        assert_eq!(Writes::default().longest_pause(t0), Duration::ZERO);
    }

    #[test]
    fn a_server_is_caught_up_when_it_has_the_highest_version_of_every_region() {
        let a: BTreeMap<u64, u64> = [(1, 10), (2, 7)].into();
        let b: BTreeMap<u64, u64> = [(1, 9), (2, 8), (3, 1)].into();
        let top = highest(&[a.clone(), b.clone()]);
        assert_eq!(top, [(1, 10), (2, 8), (3, 1)].into());
        assert!(!reached(&a, &top) && !reached(&b, &top));
        assert!(reached(&top, &top));
        let ahead: BTreeMap<u64, u64> = [(1, 11), (2, 8), (3, 2)].into();
        assert!(reached(&ahead, &top), "later versions count as reached");
    }

    #[test]
    fn answers_are_the_same_up_to_the_rounding_of_real_sums() {
        let row = |v: f64| vec![vec![Datum::Int(1), Datum::Real(v)]];
        assert!(same_rows(&row(1e6), &row(1e6 + 1e-6)));
        assert!(!same_rows(&row(1e6), &row(1e6 + 1.0)));
        assert!(!same_rows(&row(1.0), &[]));
        assert!(!same_rows(&[vec![Datum::Int(1)]], &[vec![Datum::Int(2)]]));
    }
}
