//! The SQL front (issue 19) over the MySQL wire protocol: `stratus sql-server` (DataFusion
//! above the coprocessor) on a real `stratus-server`, driven by `mysql_async` from this
//! process, against baselines measured in the same run.
//!
//! * **Load rate**: `entries` rows into `t (id BIGINT PRIMARY KEY, grp INT, v DOUBLE,
//!   k BIGINT, s VARCHAR(16))` with 1,000-row `INSERT ... VALUES` statements through the
//!   endpoint. Baseline: the same statements into a second table through the same SQL front
//!   in this process (`sqlfront::FrontSession`), without the wire protocol. (Until the
//!   hand-written SELECT planner was deleted, the baseline was that planner; BENCHMARKS.md
//!   keeps its last comparison.)
//! * **Analytic queries**: the five queries of `stratus bench` over `t`, a first run and
//!   [`REPEATS`] repeats (median), through the endpoint and through the front in process,
//!   both with
//!   `SET stratus_cop_cache = OFF` (every run scans). The answers must agree (doubles within
//!   a relative 1e-9: partial sums may add up in another order). Point selects by primary
//!   key (a prepared statement on the endpoint): p50 and p99 of [`POINT_SELECTS`] ids.
//! * **TPC-H SF [`SCALE_FACTOR`]**, queries 1, 3, 5, 6 and 10 with the validation
//!   parameters, through the endpoint (tables loaded through it with 1,000-row INSERTs).
//!   Baseline and oracle: the same generator's rows (`tpchgen-arrow`) as DataFusion
//!   `MemTable`s in this process, with the column types the endpoint gives the Stratus
//!   tables, running the same query text. Every row must agree (decimals exactly, doubles
//!   within a relative 1e-9, in order: every query but Q6 has an ORDER BY).
//!
//! Whatever fails on the endpoint is reported in the tables, with the statement and the
//! error after them; the suite goes on. A mismatch or a failure makes the process exit with
//! status 1 after the report, so a run that printed numbers over wrong answers cannot pass
//! for a good one.
//!
//! The server and the endpoint are the binaries of the profile this bench runs in
//! (`e2e::binaries`: `target/release/` under `cargo run --release`; with `E2E_NO_BUILD=1`
//! the ones already there). One server, one region (no split by size), the server's default
//! block size, memtable and block cache; the tables are flushed and compacted after their
//! load, so the queries read SSTs.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::sql::QueryResult;
use client::{Client, ClientConfig};
use datafusion::arrow::array::{Array, ArrayRef, Int64Array, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use e2e::cluster::{Cluster, StoreKind};
use e2e::server_proc::ServerProc;
use e2e::sql_endpoint::SqlEndpoint;
use mysql_async::prelude::Queryable;
use rand::Rng;
use server::config::KvEngineSection;
use tokio::runtime::Runtime;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, RegionGenerator,
    SupplierGenerator,
};
use tpchgen_arrow::{
    CustomerArrow, LineItemArrow, NationArrow, OrderArrow, RegionArrow, SupplierArrow,
};
use wire::datum::Datum;

use crate::report::{latency_row, percentile, rate, row, table_header};
use crate::workload::rng;

/// Rows of `t` when `--entries` is not given.
pub const DEFAULT_ROWS: usize = 200_000;
/// Rows per `INSERT ... VALUES` statement, in every load.
const ROWS_PER_INSERT: usize = 1_000;
/// Timed repeats of each analytic query after its first run.
const REPEATS: usize = 7;
/// Point selects timed on each front (after [`POINT_WARMUP`] untimed ones).
const POINT_SELECTS: usize = 500;
const POINT_WARMUP: usize = 20;
/// Lookups by the indexed column `k`, timed before and after its index.
const INDEX_LOOKUPS: usize = 100;
/// Distinct values of `grp`.
const GROUPS: usize = 16;
/// TPC-H scale factor: lineitem has about 600,000 rows.
const SCALE_FACTOR: f64 = 0.1;
/// Timed runs of each TPC-H query on each side; the median counts.
const TPCH_RUNS: usize = 3;
/// Relative tolerance for doubles.
const REAL_TOLERANCE: f64 = 1e-9;

/// The analytic queries of `stratus bench` (`cli::bench::QUERIES`, the same text: this crate
/// does not link the command line), over `t`.
const QUERIES: [(&str, &str); 5] = [
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

const T_COLUMNS: &str = "(id BIGINT PRIMARY KEY, grp INT, v DOUBLE, k BIGINT, s VARCHAR(16))";

pub fn run(entries: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let lab = Lab::start();
    eprintln!("sql: endpoint at {}", lab.endpoint.addr);
    let mut endpoint = EndpointConn::connect(&rt, &lab.endpoint);
    let client = {
        let _guard = rt.enter();
        Client::new(ClientConfig {
            servers: vec![lab.server.base_url().to_string()],
            ..ClientConfig::default()
        })
        .expect("client for the in-process front")
    };
    let client: &'static Client = Box::leak(Box::new(client));
    let mut engine = EngineFront {
        rt: &rt,
        front: sqlfront::FrontSession::new(client),
    };
    let mut report = Report::default();

    print_settings(&lab, entries);
    load_rates(&lab, &mut endpoint, &mut engine, entries, &mut report);
    analytic_queries(&mut endpoint, &mut engine, entries, &mut report);
    tpch(&rt, &lab, &mut endpoint, &mut report);

    report.print_problems();
    if report.failed() {
        eprintln!("sql: answers differ or statements failed (see above)");
        std::process::exit(1);
    }
}

fn print_settings(lab: &Lab, entries: usize) {
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let kv = &lab.server.config.kvengine;
    println!(
        "\nSettings: {build} build of `stratus-bench` and of the `stratus-server` and \
         `stratus sql-server` it starts (from `{}`); one server (local-directory store, one \
         region, no split by size; {} blocks, {} memtable, {} block cache, WAL sync {:?}); `t` \
         and `t2`, then the TPC-H tables, flushed and compacted after their loads. Endpoint \
         client: `mysql_async` (text protocol; point selects as a prepared statement), one \
         connection. In-process front: `sqlfront::FrontSession` on a 2-thread runtime in the \
         bench process (the endpoint's runtime has 2 threads too). `t`: {entries} rows, grp = id % \
         {GROUPS}, v uniform in [0, 1000) with 3 decimals, k uniform in ±10^12, s = 's' + id % \
         100. `SET stratus_cop_cache = OFF` on both fronts.",
        e2e::binaries::target_dir().display(),
        kv.block_size,
        kv.memtable_size,
        kv.block_cache_size,
        kv.wal_sync,
    );
}

// -- the cluster and the two fronts ---------------------------------------------------------

/// A server, a cluster file naming it and the endpoint over it (as e2e's mysql_endpoint
/// tests start them), with the server's default engine settings instead of the test ones.
struct Lab {
    endpoint: SqlEndpoint,
    server: ServerProc,
    _file: PathBuf,
    _cluster: Cluster,
}

impl Lab {
    fn start() -> Lab {
        let cluster = Cluster::new(StoreKind::Local);
        let mut cfg = cluster.server_config("server");
        let defaults = KvEngineSection::default();
        cfg.kvengine.block_size = defaults.block_size;
        cfg.kvengine.memtable_size = defaults.memtable_size;
        cfg.kvengine.block_cache_size = defaults.block_cache_size;
        let server = ServerProc::start(&cfg);
        let file = cluster.path("cluster.toml");
        std::fs::write(&file, format!("servers = [\"{}\"]\n", server.base_url()))
            .expect("write the cluster file");
        let endpoint = SqlEndpoint::start(&file);
        Lab {
            endpoint,
            server,
            _file: file,
            _cluster: cluster,
        }
    }
}

/// One MySQL connection to the endpoint. Cells come back as the text protocol sends them
/// (`None` for NULL).
struct EndpointConn<'r> {
    rt: &'r Runtime,
    conn: mysql_async::Conn,
}

type TextRow = Vec<Option<String>>;

impl<'r> EndpointConn<'r> {
    fn connect(rt: &'r Runtime, endpoint: &SqlEndpoint) -> EndpointConn<'r> {
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname(endpoint.addr.ip().to_string())
            .tcp_port(endpoint.addr.port())
            .user(Some("root"))
            .pass(Some(e2e::sql_endpoint::ROOT_PASSWORD))
            .db_name(Some("test"))
            .prefer_socket(false)
            .max_allowed_packet(Some(64 << 20))
            .wait_timeout(Some(28_800));
        let conn = rt
            .block_on(mysql_async::Conn::new(opts))
            .expect("connect to the sql endpoint");
        EndpointConn { rt, conn }
    }

    /// Runs a statement without a result set; its affected rows.
    fn execute(&mut self, sql: &str) -> Result<u64, String> {
        self.rt
            .block_on(self.conn.query_drop(sql))
            .map_err(|e| e.to_string())?;
        Ok(self.conn.affected_rows())
    }

    /// Runs a query; every row, every cell as text.
    fn query(&mut self, sql: &str) -> Result<Vec<TextRow>, String> {
        let conn = &mut self.conn;
        let rows: Vec<mysql_async::Row> = self
            .rt
            .block_on(async move {
                let mut result = conn.query_iter(sql).await?;
                let rows = result.collect().await?;
                result.drop_result().await?;
                Ok::<_, mysql_async::Error>(rows)
            })
            .map_err(|e| e.to_string())?;
        Ok(rows
            .into_iter()
            .map(|r| r.unwrap().into_iter().map(value_text).collect())
            .collect())
    }

    fn prepare(&mut self, sql: &str) -> Result<mysql_async::Statement, String> {
        self.rt
            .block_on(self.conn.prep(sql))
            .map_err(|e| e.to_string())
    }

    /// Executes a prepared statement with one integer parameter; the first row.
    fn execute_prepared(
        &mut self,
        stmt: &mysql_async::Statement,
        param: i64,
    ) -> Result<Option<TextRow>, String> {
        let row: Option<mysql_async::Row> = self
            .rt
            .block_on(self.conn.exec_first(stmt, (param,)))
            .map_err(|e| e.to_string())?;
        Ok(row.map(|r| r.unwrap().into_iter().map(value_text).collect()))
    }
}

/// A cell as text: what the text protocol sent, or a binary-protocol value printed.
fn value_text(v: mysql_async::Value) -> Option<String> {
    use mysql_async::Value;
    match v {
        Value::NULL => None,
        Value::Bytes(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Value::Int(i) => Some(i.to_string()),
        Value::UInt(u) => Some(u.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Double(d) => Some(d.to_string()),
        other => Some(other.as_sql(true).trim_matches('\'').to_string()),
    }
}

/// The same SQL front in this process: DataFusion and the coprocessor, no wire protocol.
struct EngineFront<'a> {
    rt: &'a Runtime,
    front: sqlfront::FrontSession,
}

impl EngineFront<'_> {
    fn execute(&mut self, sql: &str) -> Result<QueryResult, String> {
        self.rt
            .block_on(self.front.execute(sql))
            .map(sqlfront::Output::into_query_result)
            .map_err(|e| node::error_chain(&e))
    }
}

// -- answers ----------------------------------------------------------------------------------

/// How a baseline's cell is compared with the endpoint's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Integers and decimals: equal as exact numbers (`3`, `3.00` and `3.0000` are equal).
    Exact,
    /// Doubles: within a relative [`REAL_TOLERANCE`].
    Real,
    /// Strings and dates: the same text.
    Text,
}

/// A baseline's cell: its kind and its text (`None` for NULL).
#[derive(Debug, Clone)]
struct Want {
    kind: Kind,
    text: Option<String>,
}

impl Want {
    fn of_datum(d: &Datum) -> Want {
        let (kind, text) = match d {
            Datum::Null => (Kind::Text, None),
            Datum::Int(i) => (Kind::Exact, Some(i.to_string())),
            Datum::UInt(u) => (Kind::Exact, Some(u.to_string())),
            Datum::Real(r) => (Kind::Real, Some(r.to_string())),
            Datum::Bytes(b) => (Kind::Text, Some(String::from_utf8_lossy(b).into_owned())),
        };
        Want { kind, text }
    }

    fn matches(&self, got: Option<&str>) -> bool {
        match (self.text.as_deref(), got) {
            (None, None) => true,
            (Some(w), Some(g)) => match self.kind {
                Kind::Exact => match (exact_number(w), exact_number(g)) {
                    (Some(a), Some(b)) => a == b,
                    _ => w == g,
                },
                Kind::Real => match (w.parse::<f64>(), g.parse::<f64>()) {
                    (Ok(a), Ok(b)) => {
                        a == b || (a - b).abs() <= REAL_TOLERANCE * a.abs().max(b.abs())
                    }
                    _ => w == g,
                },
                Kind::Text => w == g,
            },
            _ => false,
        }
    }
}

/// A plain decimal number (`-12.3400`) normalised: sign, integer digits without leading
/// zeros, fraction without trailing zeros; `None` when the text is not one.
fn exact_number(s: &str) -> Option<String> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let int = int.trim_start_matches('0');
    let frac = frac.trim_end_matches('0');
    let zero = int.is_empty() && frac.is_empty();
    Some(format!(
        "{}{}.{}",
        if neg && !zero { "-" } else { "" },
        if int.is_empty() { "0" } else { int },
        frac
    ))
}

/// Where two answers first differ, printed for the report; `None` when they agree.
fn first_difference(want: &[Vec<Want>], got: &[TextRow]) -> Option<String> {
    let show_want = |r: &[Want]| {
        r.iter()
            .map(|c| c.text.as_deref().unwrap_or("NULL"))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let show_got = |r: &TextRow| {
        r.iter()
            .map(|c| c.as_deref().unwrap_or("NULL"))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        let same = w.len() == g.len() && w.iter().zip(g).all(|(wc, gc)| wc.matches(gc.as_deref()));
        if !same {
            return Some(format!(
                "row {i}: baseline `{}`, endpoint `{}`",
                show_want(w),
                show_got(g)
            ));
        }
    }
    if want.len() != got.len() {
        let i = want.len().min(got.len());
        return Some(format!(
            "row counts differ: baseline {} rows, endpoint {} rows; first extra row {i}: baseline `{}`, endpoint `{}`",
            want.len(),
            got.len(),
            want.get(i).map_or("-".into(), |r| show_want(r)),
            got.get(i).map_or("-".into(), show_got),
        ));
    }
    None
}

fn datum_rows(r: &QueryResult) -> Vec<Vec<Want>> {
    r.rows
        .iter()
        .map(|row| row.iter().map(Want::of_datum).collect())
        .collect()
}

/// Record batches as rows of [`Want`]s, each cell printed by Arrow and compared by its type.
fn arrow_rows(batches: &[RecordBatch]) -> Result<Vec<Vec<Want>>, ArrowError> {
    let mut rows = Vec::new();
    for b in batches {
        let columns = b
            .columns()
            .iter()
            .map(|a| {
                let kind = match a.data_type() {
                    t if t.is_integer() => Kind::Exact,
                    DataType::Decimal32(..)
                    | DataType::Decimal64(..)
                    | DataType::Decimal128(..)
                    | DataType::Decimal256(..) => Kind::Exact,
                    DataType::Float16 | DataType::Float32 | DataType::Float64 => Kind::Real,
                    _ => Kind::Text,
                };
                Ok((
                    kind,
                    a,
                    ArrayFormatter::try_new(a.as_ref(), &FormatOptions::default())?,
                ))
            })
            .collect::<Result<Vec<_>, ArrowError>>()?;
        for i in 0..b.num_rows() {
            rows.push(
                columns
                    .iter()
                    .map(|(kind, a, f)| Want {
                        kind: *kind,
                        text: (!a.is_null(i)).then(|| f.value(i).to_string()),
                    })
                    .collect(),
            );
        }
    }
    Ok(rows)
}

// -- the report -------------------------------------------------------------------------------

/// What went wrong, printed after the tables.
#[derive(Default)]
struct Report {
    /// `(what, statement, error)`.
    failures: Vec<(String, String, String)>,
    /// `(what, first difference)`.
    mismatches: Vec<(String, String)>,
}

impl Report {
    fn fail(&mut self, what: &str, statement: &str, error: &str) {
        eprintln!("sql: {what} failed: {error}");
        self.failures
            .push((what.to_string(), statement.to_string(), error.to_string()));
    }

    fn mismatch(&mut self, what: &str, difference: String) {
        eprintln!("sql: {what}: answers differ: {difference}");
        self.mismatches.push((what.to_string(), difference));
    }

    fn failed(&self) -> bool {
        !self.failures.is_empty() || !self.mismatches.is_empty()
    }

    fn print_problems(&self) {
        if !self.failures.is_empty() {
            println!("\nStatements that failed on the endpoint:\n");
            for (what, statement, error) in &self.failures {
                println!(
                    "* {what}: `{}`\n  error: `{error}`",
                    shorten(statement, 400)
                );
            }
        }
        if !self.mismatches.is_empty() {
            println!("\nAnswers that differ:\n");
            for (what, difference) in &self.mismatches {
                println!("* {what}: {difference}");
            }
        }
    }
}

/// `s` on one line, cut to `max` characters.
fn shorten(s: &str, max: usize) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let cut: String = one_line.chars().take(max).collect();
        format!("{cut}… ({} characters)", one_line.len())
    }
}

/// Text for a Markdown table cell.
fn cell(s: &str) -> String {
    shorten(s, 300).replace('|', "\\|")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
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

// -- part 1: load rate ------------------------------------------------------------------------

/// One `INSERT ... VALUES` statement and the rows it writes.
struct Insert {
    sql: String,
    rows: u64,
}

/// The `INSERT` statements that load `table` with `entries` rows of `t`'s shape.
fn t_inserts(table: &str, entries: usize) -> Vec<Insert> {
    let mut r = rng(19);
    let mut out = Vec::new();
    for start in (0..entries).step_by(ROWS_PER_INSERT) {
        let mut sql = format!("INSERT INTO {table} VALUES ");
        let end = (start + ROWS_PER_INSERT).min(entries);
        for id in start..end {
            let v: u32 = r.random_range(0..1_000_000);
            let k: i64 = r.random_range(-1_000_000_000_000..1_000_000_000_000);
            if id > start {
                sql.push_str(", ");
            }
            let _ = write!(
                sql,
                "({id}, {}, {}.{:03}, {k}, 's{}')",
                id % GROUPS,
                v / 1000,
                v % 1000,
                id % 100
            );
        }
        out.push(Insert {
            sql,
            rows: (end - start) as u64,
        });
    }
    out
}

/// Runs `inserts` one after the other (`execute` returns the affected rows); the time they
/// took. The first failure, or a statement that wrote another number of rows, stops the load
/// and is returned with its statement.
fn timed_load(
    mut execute: impl FnMut(&str) -> Result<u64, String>,
    inserts: &[Insert],
) -> Result<Duration, (String, String)> {
    let t0 = Instant::now();
    for insert in inserts {
        let n = execute(&insert.sql).map_err(|e| (insert.sql.clone(), e))?;
        if n != insert.rows {
            return Err((
                insert.sql.clone(),
                format!("affected rows: expected {}, found {n}", insert.rows),
            ));
        }
    }
    Ok(t0.elapsed())
}

fn load_rates(
    lab: &Lab,
    endpoint: &mut EndpointConn<'_>,
    engine: &mut EngineFront<'_>,
    entries: usize,
    report: &mut Report,
) {
    let create_t = format!("CREATE TABLE t {T_COLUMNS}");
    endpoint
        .execute(&create_t)
        .unwrap_or_else(|e| panic!("{create_t} on the endpoint: {e}"));
    let create_t2 = format!("CREATE TABLE t2 {T_COLUMNS}");
    engine
        .execute(&create_t2)
        .unwrap_or_else(|e| panic!("{create_t2} in process: {e}"));
    let on_endpoint = t_inserts("t", entries);
    let on_engine = t_inserts("t2", entries);
    eprintln!("sql: loading t through the endpoint");
    let through_endpoint = timed_load(|sql| endpoint.execute(sql), &on_endpoint);
    eprintln!("sql: loading t2 through the front in process");
    let through_engine = timed_load(
        |sql| engine.execute(sql).map(|r| r.affected_rows),
        &on_engine,
    );
    lab.server.compact();
    table_header(&format!(
        "SQL front: load ({entries} rows of 5 columns, {ROWS_PER_INSERT}-row INSERT ... VALUES, one connection; rows/s)"
    ));
    match (&through_endpoint, &through_engine) {
        (Ok(e), Ok(b)) => row(
            "INSERT through the endpoint (mysql_async → stratus sql-server)",
            "rows/s",
            rate(entries as f64, *e),
            "the front in process",
            rate(entries as f64, *b),
        ),
        _ => println!("| INSERT through the endpoint | failed | - | - |"),
    }
    for (what, outcome) in [
        ("load of t through the endpoint", through_endpoint),
        ("load of t2 through the front in process", through_engine),
    ] {
        if let Err((sql, e)) = outcome {
            report.fail(what, &sql, &e);
        }
    }
    // Both loads stored the same rows: the engine reads them back from both tables.
    let check = "SELECT COUNT(*), SUM(v), MIN(k), MAX(k), SUM(grp) FROM";
    match (
        engine.execute(&format!("{check} t")),
        engine.execute(&format!("{check} t2")),
    ) {
        (Ok(a), Ok(b)) => {
            let got: Vec<TextRow> = b
                .rows
                .iter()
                .map(|r| r.iter().map(|d| Want::of_datum(d).text).collect())
                .collect();
            if let Some(d) = first_difference(&datum_rows(&a), &got) {
                report.mismatch("t (endpoint load) against t2 (engine load)", d);
            }
        }
        (a, b) => {
            for e in [a.err(), b.err()].into_iter().flatten() {
                report.fail("the loads' check in process", check, &e);
            }
        }
    }
}

// -- part 2: the analytic queries and point selects --------------------------------------------

/// One query's runs on one front: the first, the repeats, and the first answer.
struct Runs<A> {
    first: Duration,
    repeats: Vec<Duration>,
    answer: A,
}

/// The first run and [`REPEATS`] repeats of `f`; every repeat's answer must equal the first
/// (checked by `same`), else the failing repeat's error.
fn runs<A>(
    mut f: impl FnMut() -> Result<A, String>,
    same: impl Fn(&A, &A) -> Option<String>,
) -> Result<Runs<A>, String> {
    let t = Instant::now();
    let answer = f()?;
    let first = t.elapsed();
    let mut repeats = Vec::with_capacity(REPEATS);
    for i in 0..REPEATS {
        let t = Instant::now();
        let again = f()?;
        repeats.push(t.elapsed());
        if let Some(d) = same(&answer, &again) {
            return Err(format!("repeat {i} answered differently: {d}"));
        }
    }
    Ok(Runs {
        first,
        repeats,
        answer,
    })
}

fn analytic_queries(
    endpoint: &mut EndpointConn<'_>,
    engine: &mut EngineFront<'_>,
    entries: usize,
    report: &mut Report,
) {
    let off = "SET stratus_cop_cache = OFF";
    endpoint
        .execute(off)
        .unwrap_or_else(|e| panic!("{off} on the endpoint: {e}"));
    engine
        .execute(off)
        .unwrap_or_else(|e| panic!("{off} in process: {e}"));

    println!(
        "\n### SQL front: analytic queries over `t` ({entries} rows; first run, then median of {REPEATS} repeats; cache off)\n"
    );
    println!(
        "| query | endpoint first ms | endpoint median ms | in-process first ms | in-process median ms | ratio (endpoint / in-process, medians) | answers equal |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    for (name, sql) in QUERIES {
        eprintln!("sql: {name}");
        let through_endpoint = runs(
            || endpoint.query(sql),
            |a, b| {
                let want: Vec<Vec<Want>> = a
                    .iter()
                    .map(|r| {
                        r.iter()
                            .map(|c| Want {
                                kind: Kind::Real,
                                text: c.clone(),
                            })
                            .collect()
                    })
                    .collect();
                first_difference(&want, b)
            },
        );
        let through_engine = runs(
            || engine.execute(sql),
            |a, b| {
                let got: Vec<TextRow> = b
                    .rows
                    .iter()
                    .map(|r| r.iter().map(|d| Want::of_datum(d).text).collect())
                    .collect();
                first_difference(&datum_rows(a), &got)
            },
        );
        let what = format!("{name} (`{sql}`)");
        match (&through_endpoint, &through_engine) {
            (Ok(e), Ok(b)) => {
                let equal = match first_difference(&datum_rows(&b.answer), &e.answer) {
                    None => "yes".to_string(),
                    Some(d) => {
                        report.mismatch(&what, d);
                        "**no**".to_string()
                    }
                };
                let (em, bm) = (median(&e.repeats), median(&b.repeats));
                println!(
                    "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {equal} |",
                    ms(e.first),
                    ms(em),
                    ms(b.first),
                    ms(bm),
                    ms(em) / ms(bm).max(1e-9)
                );
            }
            (e, b) => {
                fn text<A>(r: &Result<Runs<A>, String>) -> String {
                    match r {
                        Ok(_) => "ok".to_string(),
                        Err(err) => format!("error: {}", cell(err)),
                    }
                }
                println!("| {name} | {} | - | {} | - | - | - |", text(e), text(b));
                if let Err(err) = e {
                    report.fail(&format!("{name} on the endpoint"), sql, err);
                }
                if let Err(err) = b {
                    report.fail(&format!("{name} in process"), sql, err);
                }
            }
        }
    }
    point_selects(endpoint, engine, entries, report);
    index_lookups(endpoint, entries, report);
}

/// Lookups by an indexed column: `SELECT id, v FROM t WHERE k = <a stored k>` for random
/// rows, timed before `CREATE INDEX t_k ON t (k)` (every region scanned, the filter pushed)
/// and after (the index lookup, then the one row read by its handle), each answer checked
/// against the other; and how long the `CREATE INDEX` over the whole table took.
fn index_lookups(endpoint: &mut EndpointConn<'_>, entries: usize, report: &mut Report) {
    let mut r = rng(23);
    let ids: Vec<i64> = (0..POINT_WARMUP + INDEX_LOOKUPS)
        .map(|_| r.random_range(0..entries as i64))
        .collect();
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    let find = format!(
        "SELECT k FROM t WHERE id IN ({}) ORDER BY id",
        list.join(", ")
    );
    let ks: Vec<String> = match endpoint.query(&find) {
        Ok(rows) => rows
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
            .collect(),
        Err(e) => return report.fail("index lookups: reading the keys", &find, &e),
    };
    let timed = |endpoint: &mut EndpointConn<'_>| {
        let mut times = Vec::new();
        let mut answers = Vec::new();
        for (i, k) in ks.iter().enumerate() {
            let sql = format!("SELECT id, v FROM t WHERE k = {k}");
            let t = Instant::now();
            let rows = endpoint.query(&sql).map_err(|e| (sql, e))?;
            if i >= POINT_WARMUP {
                times.push(t.elapsed());
            }
            answers.push(rows);
        }
        times.sort_unstable();
        Ok::<_, (String, String)>((times, answers))
    };
    let (scan_times, scanned) = match timed(endpoint) {
        Ok(t) => t,
        Err((sql, e)) => return report.fail("index lookups before the index", &sql, &e),
    };
    let create = "CREATE INDEX t_k ON t (k)";
    let t = Instant::now();
    if let Err(e) = endpoint.execute(create) {
        return report.fail("CREATE INDEX", create, &e);
    }
    let created = t.elapsed();
    let (index_times, looked_up) = match timed(endpoint) {
        Ok(t) => t,
        Err((sql, e)) => return report.fail("index lookups through the index", &sql, &e),
    };
    for ((k, want), got) in ks.iter().zip(&scanned).zip(&looked_up) {
        if want != got || want.is_empty() {
            report.mismatch(
                &format!("lookup k={k}"),
                format!("scan found {want:?}, the index {got:?}"),
            );
        }
    }
    table_header(&format!(
        "SQL front: `SELECT id, v FROM t WHERE k = <a stored k>` ({INDEX_LOOKUPS} random rows, \
         one at a time, through the endpoint)"
    ));
    for (p, name) in [(0.5, "p50"), (0.99, "p99")] {
        latency_row(
            &format!("with index t_k, {name}"),
            percentile(&index_times, p),
            "before CREATE INDEX: every region scanned, the filter pushed",
            percentile(&scan_times, p),
        );
    }
    println!(
        "\n`{create}` over {entries} rows: {:.1} s, of which {:.1} s is the schema lease it \
         waits out before the backfill.",
        created.as_secs_f64(),
        client::sql::txn_write::SCHEMA_LEASE_MS as f64 / 1000.0
    );
}

fn point_selects(
    endpoint: &mut EndpointConn<'_>,
    engine: &mut EngineFront<'_>,
    entries: usize,
    report: &mut Report,
) {
    let sql = "SELECT v FROM t WHERE id = ?";
    let stmt = match endpoint.prepare(sql) {
        Ok(s) => s,
        Err(e) => {
            report.fail("point select: PREPARE on the endpoint", sql, &e);
            return;
        }
    };
    let mut r = rng(7);
    let ids: Vec<i64> = (0..POINT_WARMUP + POINT_SELECTS)
        .map(|_| r.random_range(0..entries as i64))
        .collect();
    let (mut on_endpoint, mut on_engine) = (Vec::new(), Vec::new());
    for (i, &id) in ids.iter().enumerate() {
        let text = format!("SELECT v FROM t WHERE id = {id}");
        let t = Instant::now();
        let got = endpoint.execute_prepared(&stmt, id);
        let endpoint_took = t.elapsed();
        let t = Instant::now();
        let want = engine.execute(&text);
        let engine_took = t.elapsed();
        let (got, want) = match (got, want) {
            (Ok(g), Ok(w)) => (g, w),
            (g, w) => {
                if let Err(e) = g {
                    report.fail("point select on the endpoint", &text, &e);
                }
                if let Err(e) = w {
                    report.fail("point select in process", &text, &e);
                }
                return;
            }
        };
        if let Some(d) = first_difference(&datum_rows(&want), &got.into_iter().collect::<Vec<_>>())
        {
            report.mismatch(&format!("point select id={id}"), d);
        }
        if i >= POINT_WARMUP {
            on_endpoint.push(endpoint_took);
            on_engine.push(engine_took);
        }
    }
    on_endpoint.sort_unstable();
    on_engine.sort_unstable();
    table_header(&format!(
        "SQL front: point select `{sql}` ({POINT_SELECTS} random ids, one at a time; endpoint: prepared statement)"
    ));
    for (p, name) in [(0.5, "p50"), (0.99, "p99")] {
        latency_row(
            &format!("point select through the endpoint, {name}"),
            percentile(&on_endpoint, p),
            "the front in process",
            percentile(&on_engine, p),
        );
    }
}

// -- part 3: TPC-H ----------------------------------------------------------------------------

/// A column type of the TPC-H tables as Stratus declares it.
#[derive(Debug, Clone, Copy)]
enum ColumnType {
    BigInt,
    Int,
    /// DECIMAL(15,2): money, quantity, discount and tax.
    Money,
    Date,
    Varchar(u16),
}

impl ColumnType {
    fn sql(self) -> String {
        match self {
            ColumnType::BigInt => "BIGINT".into(),
            ColumnType::Int => "INT".into(),
            ColumnType::Money => "DECIMAL(15,2)".into(),
            ColumnType::Date => "DATE".into(),
            ColumnType::Varchar(n) => format!("VARCHAR({n})"),
        }
    }

    /// The Arrow type the endpoint gives a column of this type (sqlfront's arrow_rows): the
    /// in-memory baseline's tables use the same.
    fn arrow(self) -> DataType {
        match self {
            ColumnType::BigInt | ColumnType::Int => DataType::Int64,
            ColumnType::Money => DataType::Decimal128(15, 2),
            ColumnType::Date => DataType::Date32,
            ColumnType::Varchar(_) => DataType::Utf8,
        }
    }

    /// Whether a literal of this type is quoted in an INSERT.
    fn quoted(self) -> bool {
        matches!(self, ColumnType::Date | ColumnType::Varchar(_))
    }
}

/// A TPC-H table: its columns, the first the primary key. A `surrogate` key is not in the
/// generator's rows: it is the row number (from 1).
struct TpchTable {
    name: &'static str,
    columns: &'static [(&'static str, ColumnType)],
    surrogate: bool,
}

use ColumnType::{BigInt, Date, Int, Money, Varchar};

/// In load order.
const TPCH_TABLES: [TpchTable; 6] = [
    TpchTable {
        name: "region",
        columns: &[
            ("r_regionkey", Int),
            ("r_name", Varchar(25)),
            ("r_comment", Varchar(152)),
        ],
        surrogate: false,
    },
    TpchTable {
        name: "nation",
        columns: &[
            ("n_nationkey", Int),
            ("n_name", Varchar(25)),
            ("n_regionkey", Int),
            ("n_comment", Varchar(152)),
        ],
        surrogate: false,
    },
    TpchTable {
        name: "supplier",
        columns: &[
            ("s_suppkey", BigInt),
            ("s_name", Varchar(25)),
            ("s_address", Varchar(40)),
            ("s_nationkey", Int),
            ("s_phone", Varchar(15)),
            ("s_acctbal", Money),
            ("s_comment", Varchar(101)),
        ],
        surrogate: false,
    },
    TpchTable {
        name: "customer",
        columns: &[
            ("c_custkey", BigInt),
            ("c_name", Varchar(25)),
            ("c_address", Varchar(40)),
            ("c_nationkey", Int),
            ("c_phone", Varchar(15)),
            ("c_acctbal", Money),
            ("c_mktsegment", Varchar(10)),
            ("c_comment", Varchar(117)),
        ],
        surrogate: false,
    },
    TpchTable {
        name: "orders",
        columns: &[
            ("o_orderkey", BigInt),
            ("o_custkey", BigInt),
            ("o_orderstatus", Varchar(1)),
            ("o_totalprice", Money),
            ("o_orderdate", Date),
            ("o_orderpriority", Varchar(15)),
            ("o_clerk", Varchar(15)),
            ("o_shippriority", Int),
            ("o_comment", Varchar(79)),
        ],
        surrogate: false,
    },
    TpchTable {
        name: "lineitem",
        columns: &[
            ("l_id", BigInt),
            ("l_orderkey", BigInt),
            ("l_partkey", BigInt),
            ("l_suppkey", BigInt),
            ("l_linenumber", Int),
            ("l_quantity", Money),
            ("l_extendedprice", Money),
            ("l_discount", Money),
            ("l_tax", Money),
            ("l_returnflag", Varchar(1)),
            ("l_linestatus", Varchar(1)),
            ("l_shipdate", Date),
            ("l_commitdate", Date),
            ("l_receiptdate", Date),
            ("l_shipinstruct", Varchar(25)),
            ("l_shipmode", Varchar(10)),
            ("l_comment", Varchar(44)),
        ],
        surrogate: true,
    },
];

impl TpchTable {
    fn create(&self) -> String {
        let columns: Vec<String> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, (name, ty))| {
                let pk = if i == 0 { " PRIMARY KEY" } else { "" };
                format!("{name} {}{pk}", ty.sql())
            })
            .collect();
        format!("CREATE TABLE {} ({})", self.name, columns.join(", "))
    }

    fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns
                .iter()
                .enumerate()
                .map(|(i, (name, ty))| Field::new(*name, ty.arrow(), i > 0))
                .collect::<Vec<_>>(),
        ))
    }

    /// The generator's rows at [`SCALE_FACTOR`], in this table's column types.
    fn generate(&self) -> Result<Vec<RecordBatch>, ArrowError> {
        let sf = SCALE_FACTOR;
        let generated: Vec<RecordBatch> = match self.name {
            "region" => {
                RegionArrow::new(RegionGenerator::new(sf, 1, 1)).collect::<Result<_, _>>()?
            }
            "nation" => {
                NationArrow::new(NationGenerator::new(sf, 1, 1)).collect::<Result<_, _>>()?
            }
            "supplier" => {
                SupplierArrow::new(SupplierGenerator::new(sf, 1, 1)).collect::<Result<_, _>>()?
            }
            "customer" => {
                CustomerArrow::new(CustomerGenerator::new(sf, 1, 1)).collect::<Result<_, _>>()?
            }
            "orders" => OrderArrow::new(OrderGenerator::new(sf, 1, 1)).collect::<Result<_, _>>()?,
            "lineitem" => {
                LineItemArrow::new(LineItemGenerator::new(sf, 1, 1)).collect::<Result<_, _>>()?
            }
            other => {
                return Err(ArrowError::InvalidArgumentError(format!(
                    "no generator for table {other}"
                )));
            }
        };
        let schema = self.schema();
        let mut next_id = 1i64;
        generated
            .iter()
            .map(|b| {
                let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.columns.len());
                for (i, (name, ty)) in self.columns.iter().enumerate() {
                    if i == 0 && self.surrogate {
                        let n = b.num_rows() as i64;
                        columns.push(Arc::new(Int64Array::from_iter_values(next_id..next_id + n)));
                        next_id += n;
                        continue;
                    }
                    let a = b.column_by_name(name).ok_or_else(|| {
                        ArrowError::SchemaError(format!(
                            "the generator has no column {name}: table={}",
                            self.name
                        ))
                    })?;
                    columns.push(cast(a, &ty.arrow())?);
                }
                RecordBatch::try_new(schema.clone(), columns)
            })
            .collect()
    }

    /// `INSERT ... VALUES` statements of [`ROWS_PER_INSERT`] rows over `batches`.
    fn inserts(&self, batches: &[RecordBatch]) -> Result<Vec<Insert>, ArrowError> {
        let mut out = Vec::new();
        let options = FormatOptions::default();
        for b in batches {
            let formatters = b
                .columns()
                .iter()
                .map(|a| ArrayFormatter::try_new(a.as_ref(), &options))
                .collect::<Result<Vec<_>, _>>()?;
            for start in (0..b.num_rows()).step_by(ROWS_PER_INSERT) {
                let mut sql = format!("INSERT INTO {} VALUES ", self.name);
                let end = (start + ROWS_PER_INSERT).min(b.num_rows());
                for i in start..end {
                    if i > start {
                        sql.push_str(", ");
                    }
                    sql.push('(');
                    for (c, ((_, ty), f)) in self.columns.iter().zip(&formatters).enumerate() {
                        if c > 0 {
                            sql.push_str(", ");
                        }
                        let v = f.value(i).to_string();
                        if b.column(c).is_null(i) {
                            sql.push_str("NULL");
                        } else if ty.quoted() {
                            sql.push('\'');
                            sql.push_str(&v.replace('\\', "\\\\").replace('\'', "''"));
                            sql.push('\'');
                        } else {
                            sql.push_str(&v);
                        }
                    }
                    sql.push(')');
                }
                out.push(Insert {
                    sql,
                    rows: (end - start) as u64,
                });
            }
        }
        Ok(out)
    }
}

/// TPC-H queries 1, 3, 5, 6 and 10 with the validation parameters, in the specification's
/// text; only the interval literals are written as DataFusion reads them
/// (`interval '90' day`, not `interval ':1' day (3)`). The tables each query reads.
const TPCH_QUERIES: [(&str, &[&str], &str); 5] = [
    (
        "Q1",
        &["lineitem"],
        "select
    l_returnflag,
    l_linestatus,
    sum(l_quantity) as sum_qty,
    sum(l_extendedprice) as sum_base_price,
    sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,
    avg(l_quantity) as avg_qty,
    avg(l_extendedprice) as avg_price,
    avg(l_discount) as avg_disc,
    count(*) as count_order
from
    lineitem
where
    l_shipdate <= date '1998-12-01' - interval '90' day
group by
    l_returnflag,
    l_linestatus
order by
    l_returnflag,
    l_linestatus",
    ),
    (
        "Q3",
        &["customer", "orders", "lineitem"],
        "select
    l_orderkey,
    sum(l_extendedprice * (1 - l_discount)) as revenue,
    o_orderdate,
    o_shippriority
from
    customer,
    orders,
    lineitem
where
    c_mktsegment = 'BUILDING'
    and c_custkey = o_custkey
    and l_orderkey = o_orderkey
    and o_orderdate < date '1995-03-15'
    and l_shipdate > date '1995-03-15'
group by
    l_orderkey,
    o_orderdate,
    o_shippriority
order by
    revenue desc,
    o_orderdate
limit 10",
    ),
    (
        "Q5",
        &[
            "customer", "orders", "lineitem", "supplier", "nation", "region",
        ],
        "select
    n_name,
    sum(l_extendedprice * (1 - l_discount)) as revenue
from
    customer,
    orders,
    lineitem,
    supplier,
    nation,
    region
where
    c_custkey = o_custkey
    and l_orderkey = o_orderkey
    and l_suppkey = s_suppkey
    and c_nationkey = s_nationkey
    and s_nationkey = n_nationkey
    and n_regionkey = r_regionkey
    and r_name = 'ASIA'
    and o_orderdate >= date '1994-01-01'
    and o_orderdate < date '1994-01-01' + interval '1' year
group by
    n_name
order by
    revenue desc",
    ),
    (
        "Q6",
        &["lineitem"],
        "select
    sum(l_extendedprice * l_discount) as revenue
from
    lineitem
where
    l_shipdate >= date '1994-01-01'
    and l_shipdate < date '1994-01-01' + interval '1' year
    and l_discount between 0.06 - 0.01 and 0.06 + 0.01
    and l_quantity < 24",
    ),
    (
        "Q10",
        &["customer", "orders", "lineitem", "nation"],
        "select
    c_custkey,
    c_name,
    sum(l_extendedprice * (1 - l_discount)) as revenue,
    c_acctbal,
    n_name,
    c_address,
    c_phone,
    c_comment
from
    customer,
    orders,
    lineitem,
    nation
where
    c_custkey = o_custkey
    and l_orderkey = o_orderkey
    and o_orderdate >= date '1993-10-01'
    and o_orderdate < date '1993-10-01' + interval '3' month
    and l_returnflag = 'R'
    and c_nationkey = n_nationkey
group by
    c_custkey,
    c_name,
    c_acctbal,
    c_phone,
    n_name,
    c_address,
    c_comment
order by
    revenue desc
limit 20",
    ),
];

/// The in-memory baseline: DataFusion with the two SQL-reading options the endpoint sets
/// (MySQL's NULL order, `0.06` an exact decimal), and nothing else of the front (no MySQL
/// semantics rules, no pushdown): an independent answer.
fn in_memory_context() -> SessionContext {
    let mut config = SessionConfig::new().set_str("datafusion.sql_parser.dialect", "MySQL");
    config.options_mut().sql_parser.default_null_ordering = "nulls_min".to_string();
    config.options_mut().sql_parser.parse_float_as_decimal = true;
    SessionContext::new_with_config(config)
}

fn tpch(rt: &Runtime, lab: &Lab, endpoint: &mut EndpointConn<'_>, report: &mut Report) {
    let ctx = in_memory_context();
    let mut loaded: Vec<&str> = Vec::new();
    let mut load_rows = Vec::new();
    for table in &TPCH_TABLES {
        eprintln!("sql: tpch: generating {}", table.name);
        let batches = table
            .generate()
            .unwrap_or_else(|e| panic!("generate {}: {e}", table.name));
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let inserts = table
            .inserts(&batches)
            .unwrap_or_else(|e| panic!("INSERT statements of {}: {e}", table.name));
        let mem = MemTable::try_new(table.schema(), vec![batches])
            .unwrap_or_else(|e| panic!("in-memory {}: {e}", table.name));
        ctx.register_table(table.name, Arc::new(mem))
            .unwrap_or_else(|e| panic!("register {}: {e}", table.name));
        eprintln!("sql: tpch: loading {} ({rows} rows)", table.name);
        let create = table.create();
        if let Err(e) = endpoint.execute(&create) {
            report.fail(&format!("CREATE TABLE {}", table.name), &create, &e);
            load_rows.push((table.name, rows, Err(e)));
            continue;
        }
        match timed_load(|sql| endpoint.execute(sql), &inserts) {
            Ok(d) => {
                loaded.push(table.name);
                load_rows.push((table.name, rows, Ok(d)));
            }
            Err((sql, e)) => {
                report.fail(&format!("load of {}", table.name), &sql, &e);
                load_rows.push((table.name, rows, Err(e)));
            }
        }
    }
    lab.server.compact();

    println!(
        "\n### SQL front: TPC-H SF {SCALE_FACTOR} load through the endpoint ({ROWS_PER_INSERT}-row INSERT ... VALUES, one connection)\n"
    );
    println!("| table | rows | seconds | rows/s |");
    println!("|---|---:|---:|---:|");
    let (mut all_rows, mut all_time) = (0usize, Duration::ZERO);
    for (name, rows, outcome) in &load_rows {
        match outcome {
            Ok(d) => {
                all_rows += rows;
                all_time += *d;
                println!(
                    "| {name} | {rows} | {:.1} | {:.0} |",
                    d.as_secs_f64(),
                    rate(*rows as f64, *d)
                );
            }
            Err(e) => println!("| {name} | {rows} | error: {} | - |", cell(e)),
        }
    }
    println!(
        "| all | {all_rows} | {:.1} | {:.0} |",
        all_time.as_secs_f64(),
        rate(all_rows as f64, all_time.max(Duration::from_nanos(1)))
    );

    println!(
        "\n### SQL front: TPC-H SF {SCALE_FACTOR}, queries through the endpoint (median of {TPCH_RUNS} runs; cache off)\n"
    );
    println!(
        "| query | endpoint median ms | in-memory DataFusion median ms | ratio (endpoint / in-memory) | rows | answers equal |"
    );
    println!("|---|---:|---:|---:|---:|---|");
    for (name, tables, sql) in TPCH_QUERIES {
        eprintln!("sql: tpch: {name}");
        if let Some(missing) = tables.iter().find(|t| !loaded.contains(t)) {
            println!("| {name} | not run: table {missing} did not load | - | - | - | - |");
            continue;
        }
        let (mut on_endpoint, mut in_memory) = (Vec::new(), Vec::new());
        let mut want: Option<Vec<Vec<Want>>> = None;
        let mut got: Result<Vec<TextRow>, String> = Ok(Vec::new());
        for _ in 0..TPCH_RUNS {
            let t = Instant::now();
            let batches = rt
                .block_on(async { ctx.sql(sql).await?.collect().await })
                .unwrap_or_else(|e| panic!("{name} in memory: {e}"));
            in_memory.push(t.elapsed());
            let rows =
                arrow_rows(&batches).unwrap_or_else(|e| panic!("{name} in memory rows: {e}"));
            want.get_or_insert(rows);
            if got.is_ok() {
                let t = Instant::now();
                let answer = endpoint.query(sql);
                on_endpoint.push(t.elapsed());
                // The first answer is checked; the later runs' must be the same rows.
                got = match (got, answer) {
                    (Ok(prev), Ok(a)) if on_endpoint.len() > 1 && prev != a => Err(format!(
                        "run {} answered differently from the first",
                        on_endpoint.len()
                    )),
                    (_, a) => a,
                };
            }
        }
        let want = want.unwrap_or_default();
        let mem_ms = ms(median(&in_memory));
        match got {
            Ok(rows) => {
                let equal = match first_difference(&want, &rows) {
                    None => "yes".to_string(),
                    Some(d) => {
                        report.mismatch(name, d);
                        "**no**".to_string()
                    }
                };
                let end_ms = ms(median(&on_endpoint));
                println!(
                    "| {name} | {end_ms:.1} | {mem_ms:.1} | {:.2} | {} | {equal} |",
                    end_ms / mem_ms.max(1e-9),
                    rows.len()
                );
            }
            Err(e) => {
                report.fail(&format!("TPC-H {name} on the endpoint"), sql, &e);
                println!(
                    "| {name} | error: {} | {mem_ms:.1} | - | {} (in memory) | no |",
                    cell(&e),
                    want.len()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(t: &str) -> Want {
        Want {
            kind: Kind::Exact,
            text: Some(t.into()),
        }
    }

    #[test]
    fn decimals_are_equal_as_numbers_whatever_their_scale() {
        assert!(exact("3").matches(Some("3.0000")));
        assert!(exact("-0.50").matches(Some("-.5")));
        assert!(exact("0.00").matches(Some("-0")));
        assert!(!exact("25.522005").matches(Some("25.522006")));
        assert!(!exact("1").matches(None));
    }

    #[test]
    fn doubles_are_equal_within_a_relative_tolerance() {
        let w = Want {
            kind: Kind::Real,
            text: Some((0.1 + 0.2 + 0.3f64).to_string()),
        };
        assert!(w.matches(Some(&(0.3 + 0.2 + 0.1f64).to_string())));
        assert!(!w.matches(Some("0.61")));
    }

    #[test]
    fn the_first_differing_row_is_reported() {
        let want = vec![vec![exact("1")], vec![exact("2")]];
        let got = vec![vec![Some("1".to_string())], vec![Some("3".to_string())]];
        let d = first_difference(&want, &got).unwrap_or_default();
        assert!(d.starts_with("row 1:"), "{d}");
        let short = vec![vec![Some("1".to_string())]];
        let d = first_difference(&want, &short).unwrap_or_default();
        assert!(d.contains("row counts differ"), "{d}");
    }
}
