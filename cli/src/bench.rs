//! `stratus bench`: the end-to-end SQL benchmark. It starts a local cluster (CPU load from the
//! `cpu-load` file), loads `--rows` rows into the sample table, flushes, and times five
//! analytic queries under four configurations:
//!
//! * offload **off** / **on**: the servers' CPU load is set to 0% / 100%, so every offload
//!   candidate stays local (`cpu_idle`) / goes to a worker of its zone (`cpu_busy`);
//! * cache **off** / **on**: `SET stratus_cop_cache = OFF | ON`.
//!
//! Each (query, configuration) gets a new client, so its coprocessor cache starts empty: the
//! first run is a cold one (with the cache on it fills the cache), then the query is repeated
//! `--runs` times and the median is reported. The client admits every result to the cache
//! (admission minimum process time 0 instead of 5 ms): with the default, a region computed in
//! under 5 ms is not cached, and "cache on" would time a mix of hits and misses. Every run's answer must equal the first answer
//! of the query (doubles within a relative 1e-9, since partial sums may add up in a different
//! order): a mismatch is an error. So is a configuration whose servers' decisions
//! (`tikv_coprocessor_remote_decision_total`, read before and after it) do not match it:
//! offload off must make local decisions only, offload on remote ones only.
//!
//! The report is markdown on stdout, ready for BENCHMARKS.md (and in `--output FILE` if
//! given); the cluster's start and the load go to stderr.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use client::sql::QueryResult;
use wire::datum::Datum;

use wire::placement::DecisionResult;

use crate::decision_metrics::{DecisionCount, DecisionSeries, decision_counts, decision_delta};
use crate::demo::ratio;
use crate::explain_rows::Session;
use crate::loaded_cluster::{LoadedCluster, StepError};

/// `stratus bench` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchOptions {
    /// Rows of the sample table.
    pub rows: u64,
    /// Repeats of each query per configuration, after the first run (at least 1).
    pub runs: u32,
    /// Also write the markdown report to this file.
    pub output: Option<PathBuf>,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            rows: 2_000_000,
            runs: 5,
            output: None,
        }
    }
}

/// Why `stratus bench` failed (printed by `main` as `Error: ...`; exit code 1).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Step(#[from] StepError),
    #[error("--runs must be at least 1: runs=0")]
    NoRuns,
    /// A configuration answered differently from the query's first answer.
    #[error("answers differ: query={query} config={config} expected={expected} found={found}")]
    AnswerMismatch {
        query: &'static str,
        config: String,
        expected: String,
        found: String,
    },
    /// The servers' decisions do not match the configuration (e.g. offload on, nothing
    /// offloaded): the numbers would be mislabelled.
    #[error(
        "decisions do not match the config: query={query} config={config} expected={expected} found={found}"
    )]
    Decisions {
        query: &'static str,
        config: String,
        expected: &'static str,
        found: String,
    },
    #[error("cannot write the report: path={path}: {source}")]
    OutputFile {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl From<std::io::Error> for BenchError {
    fn from(e: std::io::Error) -> Self {
        BenchError::Step(StepError::Output(e))
    }
}

/// The benchmark's queries: a short name and the SQL. Each reads the whole table; each answer
/// is deterministic (the TopN breaks ties of `v` by `id`).
pub const QUERIES: [(&str, &str); 5] = [
    (
        "aggregate",
        "SELECT COUNT(*), SUM(v), MIN(k), MAX(k) FROM t",
    ),
    (
        "group_by",
        "SELECT grp, COUNT(*), SUM(v), AVG(v) FROM t GROUP BY grp ORDER BY grp",
    ),
    ("filter", "SELECT COUNT(*) FROM t WHERE v > 900.0"),
    ("top_n", "SELECT id, v FROM t ORDER BY v DESC, id LIMIT 10"),
    (
        "like_min_max",
        "SELECT MIN(v), MAX(v) FROM t WHERE s LIKE 's1%'",
    ),
];

/// One configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Config {
    offload: bool,
    cache: bool,
}

impl Config {
    const ALL: [Config; 4] = [
        Config {
            offload: false,
            cache: false,
        },
        Config {
            offload: false,
            cache: true,
        },
        Config {
            offload: true,
            cache: false,
        },
        Config {
            offload: true,
            cache: true,
        },
    ];

    fn name(self) -> String {
        format!(
            "offload={} cache={}",
            on_off(self.offload),
            on_off(self.cache)
        )
    }
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// What one (query, configuration) measured.
#[derive(Debug, Clone)]
struct Measured {
    query: &'static str,
    config: Config,
    first: Duration,
    repeats: Vec<Duration>,
    /// Decisions during its runs, summed over the servers: (result, reason) → count.
    decisions: BTreeMap<DecisionSeries, u64>,
}

impl Measured {
    fn median(&self) -> Duration {
        median(&self.repeats)
    }
}

/// Runs the benchmark; the markdown report goes to stdout (and `opts.output`).
pub fn run(opts: BenchOptions) -> Result<(), BenchError> {
    let mut out = std::io::stdout().lock();
    let mut log = std::io::stderr();
    run_to(&opts, &mut out, &mut log)
}

/// [`run`], with the report to `out` and progress to `log`.
pub fn run_to(
    opts: &BenchOptions,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<(), BenchError> {
    if opts.runs == 0 {
        return Err(BenchError::NoRuns);
    }
    let lab = LoadedCluster::start(log)?;
    lab.load(opts.rows, log)?;
    let mut measured = Vec::new();
    let mut reference: BTreeMap<&'static str, QueryResult> = BTreeMap::new();
    for offload in [false, true] {
        lab.cluster
            .set_cpu_load(if offload { 1.0 } else { 0.0 })
            .map_err(StepError::from)?;
        for (query, sql) in QUERIES {
            for config in Config::ALL.into_iter().filter(|c| c.offload == offload) {
                writeln!(log, "{query}: {}", config.name())?;
                let m = measure(&lab, query, sql, config, opts.runs, &mut reference)?;
                check_decisions(&m)?;
                measured.push(m);
            }
        }
    }
    lab.stop()?;
    measured.sort_by_key(|m| {
        let q = QUERIES.iter().position(|(n, _)| *n == m.query);
        (q, m.config)
    });
    let report = render_report(opts, &measured);
    out.write_all(report.as_bytes())?;
    out.flush()?;
    if let Some(path) = &opts.output {
        std::fs::write(path, &report).map_err(|source| BenchError::OutputFile {
            path: path.clone(),
            source,
        })?;
    }
    Ok(())
}

/// The first run and `runs` repeats of `sql` on a new client under `config`, each answer
/// checked against the query's reference (the first answer seen, recorded here).
fn measure(
    lab: &LoadedCluster,
    query: &'static str,
    sql: &str,
    config: Config,
    runs: u32,
    reference: &mut BTreeMap<&'static str, QueryResult>,
) -> Result<Measured, BenchError> {
    let mut client_config = lab.cluster.client_config();
    client_config.cop_cache.admission_min_process_time = types::ReadableDuration::millis(0);
    let client = lab.static_client(client_config)?;
    // Regions and worker liveness are loaded before the clock starts: the first run is cold
    // for the cache, not for the client's topology.
    lab.rt
        .block_on(client.refresh_regions())
        .map_err(|e| StepError::Client(node::error_chain(&e)))?;
    lab.rt.block_on(client.probe_workers());
    let mut session = Session::new(lab, client);
    session.execute(&format!(
        "SET stratus_cop_cache = {}",
        on_off(config.cache).to_uppercase()
    ))?;
    let before = decision_counts(&lab.cluster)?;
    let mut timed = || -> Result<Duration, BenchError> {
        let t = Instant::now();
        let answer = session.execute(sql)?;
        let elapsed = t.elapsed();
        match reference.get(query) {
            None => {
                reference.insert(query, answer);
            }
            Some(expected) if same_answer(expected, &answer) => {}
            Some(expected) => {
                return Err(BenchError::AnswerMismatch {
                    query,
                    config: config.name(),
                    expected: format!("{:?}", expected.rows),
                    found: format!("{:?}", answer.rows),
                });
            }
        }
        Ok(elapsed)
    };
    let first = timed()?;
    let repeats = (0..runs).map(|_| timed()).collect::<Result<Vec<_>, _>>();
    client.close();
    let repeats = repeats?;
    let after = decision_counts(&lab.cluster)?;
    Ok(Measured {
        query,
        config,
        first,
        repeats,
        decisions: delta(&before, &after)?,
    })
}

/// `after - before` per (result, reason), summed over the servers; zero deltas left out.
fn delta(
    before: &[DecisionCount],
    after: &[DecisionCount],
) -> Result<BTreeMap<DecisionSeries, u64>, StepError> {
    let mut d: BTreeMap<DecisionSeries, u64> = BTreeMap::new();
    for c in decision_delta(before, after)? {
        *d.entry(c.series).or_default() += c.count;
    }
    Ok(d)
}

/// Offload off: some local decisions and no remote one; on: some remote and no local one.
fn check_decisions(m: &Measured) -> Result<(), BenchError> {
    let count = |result: DecisionResult| {
        m.decisions
            .iter()
            .filter(|(series, _)| series.result == result)
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    let (local, remote) = (count(DecisionResult::Local), count(DecisionResult::Remote));
    let (ok, expected) = if m.config.offload {
        (remote > 0 && local == 0, "remote decisions only")
    } else {
        (local > 0 && remote == 0, "local decisions only")
    };
    if ok {
        return Ok(());
    }
    Err(BenchError::Decisions {
        query: m.query,
        config: m.config.name(),
        expected,
        found: if m.decisions.is_empty() {
            "no decisions".into()
        } else {
            decisions_text(&m.decisions)
        },
    })
}

/// `local/cpu_idle=3, remote/cpu_busy=2`.
fn decisions_text(d: &BTreeMap<DecisionSeries, u64>) -> String {
    d.iter()
        .map(|(s, n)| format!("{}/{}={n}", s.result, s.reason))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The median (the mean of the two middle values for an even count); zero for none.
fn median(times: &[Duration]) -> Duration {
    let mut t = times.to_vec();
    t.sort_unstable();
    match t.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => t[n / 2],
        n => (t[n / 2 - 1] + t[n / 2]) / 2,
    }
}

/// Same columns and rows; doubles equal within a relative 1e-9.
fn same_answer(a: &QueryResult, b: &QueryResult) -> bool {
    a.columns == b.columns
        && a.rows.len() == b.rows.len()
        && a.rows
            .iter()
            .zip(&b.rows)
            .all(|(x, y)| x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_datum(p, q)))
}

fn same_datum(a: &Datum, b: &Datum) -> bool {
    match (a, b) {
        (Datum::Real(x), Datum::Real(y)) => x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
        _ => a == b,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

/// The markdown report: the timings (one row per query and configuration), the ratios per
/// query, the decisions per configuration, and the queries.
fn render_report(opts: &BenchOptions, measured: &[Measured]) -> String {
    let mut s = String::new();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    s.push_str(&format!(
        "## stratus bench: {} rows, {} repeats per configuration\n\n\
         Local cluster (2 servers, 4 workers, one machine, {cores} cores, {build} build). \
         offload off/on = servers' CPU load 0%/100% (`cpu_idle` local / `cpu_busy` remote); \
         cache = `stratus_cop_cache`, admitting every result (min process time 0). \
         Each configuration starts with an empty cache.\n\n",
        opts.rows, opts.runs
    ));
    s.push_str("| query | offload | cache | first ms | repeat median ms | repeat/first |\n");
    s.push_str("|---|---|---|---:|---:|---:|\n");
    for m in measured {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.2} |\n",
            m.query,
            on_off(m.config.offload),
            on_off(m.config.cache),
            ms(m.first),
            ms(m.median()),
            ratio(m.median(), m.first)
        ));
    }
    s.push_str("\n| query | offload on / off (repeat median, cache off) | cache hit speed-up (first / repeat median, cache on) |\n");
    s.push_str("|---|---:|---:|\n");
    let find = |q: &str, offload: bool, cache: bool| {
        measured
            .iter()
            .find(|m| m.query == q && m.config == Config { offload, cache })
    };
    for (q, _) in QUERIES {
        let on_off_ratio = match (find(q, true, false), find(q, false, false)) {
            (Some(on), Some(off)) => format!("{:.2}", ratio(on.median(), off.median())),
            _ => "-".into(),
        };
        let speed_up: Vec<String> = [false, true]
            .into_iter()
            .filter_map(|offload| find(q, offload, true))
            .map(|m| {
                format!(
                    "{:.1}× (offload {})",
                    ratio(m.first, m.median()),
                    on_off(m.config.offload)
                )
            })
            .collect();
        s.push_str(&format!(
            "| {q} | {on_off_ratio} | {} |\n",
            speed_up.join(", ")
        ));
    }
    s.push_str(
        "\nServer decisions during each configuration's runs (delta of \
                `tikv_coprocessor_remote_decision_total`, all servers, all queries):\n\n",
    );
    s.push_str("| offload | cache | decisions |\n|---|---|---|\n");
    for config in Config::ALL {
        let mut sum: BTreeMap<DecisionSeries, u64> = BTreeMap::new();
        for m in measured.iter().filter(|m| m.config == config) {
            for (k, n) in &m.decisions {
                *sum.entry(*k).or_default() += n;
            }
        }
        s.push_str(&format!(
            "| {} | {} | {} |\n",
            on_off(config.offload),
            on_off(config.cache),
            if sum.is_empty() {
                "none".into()
            } else {
                decisions_text(&sum)
            }
        ));
    }
    s.push_str("\nQueries:\n\n");
    for (q, sql) in QUERIES {
        s.push_str(&format!("* {q}: `{sql}`\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms_(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&[ms_(5), ms_(1), ms_(3)]), ms_(3));
        assert_eq!(median(&[ms_(4), ms_(1), ms_(2), ms_(10)]), ms_(3));
        assert_eq!(median(&[]), Duration::ZERO);
    }

    fn answer(rows: Vec<Vec<Datum>>) -> QueryResult {
        QueryResult {
            columns: vec!["a".into(), "b".into()],
            rows,
            ..QueryResult::default()
        }
    }

    #[test]
    fn answers_match_with_doubles_summed_in_another_order_but_not_otherwise() {
        let a = answer(vec![vec![Datum::Int(1), Datum::Real(0.1 + 0.2 + 0.3)]]);
        let b = answer(vec![vec![Datum::Int(1), Datum::Real(0.3 + 0.2 + 0.1)]]);
        assert!(same_answer(&a, &b));
        let c = answer(vec![vec![Datum::Int(1), Datum::Real(0.61)]]);
        assert!(!same_answer(&a, &c));
        let d = answer(vec![vec![Datum::Int(2), Datum::Real(0.6)]]);
        assert!(!same_answer(&a, &d));
        assert!(!same_answer(&a, &answer(vec![])));
    }

    fn series(result: &str, reason: &str) -> DecisionSeries {
        DecisionSeries {
            result: result.parse().unwrap(),
            reason: reason.parse().unwrap(),
        }
    }

    fn decision_count(result: &str, reason: &str, count: u64) -> DecisionCount {
        DecisionCount {
            server: "server-a".into(),
            series: series(result, reason),
            count,
        }
    }

    fn measured(offload: bool, decisions: &[(&str, &str, u64)]) -> Measured {
        Measured {
            query: "aggregate",
            config: Config {
                offload,
                cache: false,
            },
            first: ms_(1),
            repeats: vec![ms_(1)],
            decisions: decisions
                .iter()
                .map(|(r, why, n)| (series(r, why), *n))
                .collect(),
        }
    }

    #[test]
    fn the_delta_counts_only_decisions_made_in_between() {
        let before = [
            decision_count("local", "cpu_idle", 3),
            decision_count("remote", "cpu_busy", 0),
        ];
        let after = [
            decision_count("local", "cpu_idle", 3),
            decision_count("remote", "cpu_busy", 4),
        ];
        let d = delta(&before, &after).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[&series("remote", "cpu_busy")], 4);
    }

    #[test]
    fn offload_on_without_a_remote_decision_is_an_error() {
        assert!(check_decisions(&measured(true, &[("remote", "cpu_busy", 2)])).is_ok());
        let e = check_decisions(&measured(true, &[])).unwrap_err();
        assert!(e.to_string().contains("found=no decisions"), "{e}");
        assert!(check_decisions(&measured(true, &[("local", "cpu_idle", 2)])).is_err());
        assert!(check_decisions(&measured(false, &[("local", "cpu_idle", 2)])).is_ok());
        assert!(
            check_decisions(&measured(
                false,
                &[("local", "cpu_idle", 2), ("remote", "cpu_busy", 1)]
            ))
            .is_err()
        );
    }

    #[test]
    fn the_report_has_one_row_per_query_and_configuration() {
        let mut all = Vec::new();
        for (q, _) in QUERIES {
            for config in Config::ALL {
                all.push(Measured {
                    query: q,
                    config,
                    first: ms_(10),
                    repeats: vec![ms_(5), ms_(4), ms_(6)],
                    decisions: BTreeMap::new(),
                });
            }
        }
        let report = render_report(&BenchOptions::default(), &all);
        let rows = report
            .lines()
            .skip_while(|l| !l.starts_with("| query | offload | cache |"))
            .skip(2)
            .take_while(|l| l.starts_with("| "))
            .count();
        assert_eq!(rows, 20, "{report}");
        assert!(
            report.contains("| aggregate | off | off | 10.0 | 5.0 | 0.50 |"),
            "{report}"
        );
        assert!(
            report.contains("| group_by | 1.00 | 2.0× (offload off), 2.0× (offload on) |"),
            "{report}"
        );
    }
}
