//! The SQL front on three replicated servers while servers die: every statement
//! `UPDATE acct SET v = v + 1 WHERE id IN (a, b)` adds exactly 2 to the table's total, in one
//! transaction. Three writer threads run such statements, one per way to commit ([`Writer`]):
//! 1PC (both rows in one region), 2PC and async commit (`SET tidb_enable_async_commit = ON`;
//! both across the two regions), and a reader sums the table, while a random server other than
//! the TSO's is SIGKILLed and restarted, round after round (`STRATUS_CRASH_ITERATIONS`,
//! default 10): on even rounds one that leads a region (leaders are moved off the TSO's server
//! first when it leads them all), on odd rounds either of the two. What must hold:
//!
//! * **atomic**: every sum a reader sees is even (half a statement would make it odd);
//! * **no stale read**: a sum is at least twice the statements acknowledged before the read
//!   began (a read that missed an acknowledged write would be below it);
//! * **nothing acknowledged is lost**: at the end, each row holds at least the increments
//!   acknowledged to a writer, and at most those plus the ones whose outcome the writer could
//!   not learn (an error at the deadline);
//! * **progress**: statements are acknowledged after every kill (each round waits for one), and
//!   every writer has statements acknowledged;
//! * **async commit was used**: the servers count the async-commit prewrites they answered
//!   (`stratus_server_txn_async_commit_prewrites_total`, read before each kill and at the
//!   end): at least one per statement the async writer had acknowledged (each has two).

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod front_client;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use e2e::replicated::{ReplicatedCluster, SERVERS, TSO};
use front_client::FrontClient;
use rand::Rng;
use std::sync::Mutex;
use wire::codec::table::record_key;
use wire::datum::Datum;

const ACCOUNTS: i64 = 20;
/// The first table of a fresh cluster gets id 1 (`client::sql::catalog`): accounts 0..9 and
/// 10..19 are in different regions, so a statement over both commits with 2PC (or async
/// commit).
const TABLE_ID: i64 = 1;
/// The first account of the second region.
const SPLIT: i64 = 10;
/// Async-commit prewrites a server answered since it started.
const ASYNC_PREWRITES: &str = "stratus_server_txn_async_commit_prewrites_total";

/// How a writer's statements commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writer {
    /// Both accounts in one region.
    OnePc,
    /// One account in each region.
    TwoPc,
    /// One account in each region, with `tidb_enable_async_commit` ON in its session.
    AsyncCommit,
}

impl Writer {
    const ALL: [Writer; 3] = [Writer::OnePc, Writer::TwoPc, Writer::AsyncCommit];

    /// Two distinct accounts as this writer pairs them.
    fn accounts(self, rng: &mut impl Rng) -> (i64, i64) {
        match self {
            Writer::OnePc => {
                let base = if rng.random_bool(0.5) { 0 } else { SPLIT };
                let a = base + rng.random_range(0..SPLIT);
                let b = base + (a - base + rng.random_range(1..SPLIT)) % SPLIT;
                (a, b)
            }
            Writer::TwoPc | Writer::AsyncCommit => (
                rng.random_range(0..SPLIT),
                rng.random_range(SPLIT..ACCOUNTS),
            ),
        }
    }
}

fn iterations() -> usize {
    std::env::var("STRATUS_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

fn client(urls: &[String]) -> FrontClient {
    let mut cfg = client::ClientConfig::new(urls.iter().cloned());
    cfg.request_timeout = types::ReadableDuration::secs(30);
    FrontClient::with_config(cfg)
}

fn exec(c: &FrontClient, sql: &str) -> Result<client::sql::QueryResult, String> {
    c.try_exec(&mut c.session(), sql)
        .map_err(|e| node::error_chain(&e))
}

fn int(d: &Datum) -> i64 {
    match d {
        Datum::Int(v) => *v,
        Datum::Real(v) => *v as i64,
        other => panic!("not an integer: {other:?}"),
    }
}

#[derive(Default)]
struct Ledger {
    /// Increments acknowledged, per account.
    acked: Vec<u64>,
    /// Increments whose statement failed (its outcome unknown to the writer), per account.
    unknown: Vec<u64>,
}

#[test]
fn sql_statements_stay_atomic_and_durable_while_servers_are_sigkilled() {
    let mut rc = ReplicatedCluster::start(&[record_key(TABLE_ID, 10)]);
    rc.wait_until_every_region_has_a_leader(Duration::from_secs(30));
    let urls = rc.urls();
    let setup = client(&urls);
    exec(
        &setup,
        "CREATE TABLE acct (id BIGINT PRIMARY KEY, v BIGINT)",
    )
    .unwrap();
    let values: Vec<String> = (0..ACCOUNTS).map(|i| format!("({i}, 0)")).collect();
    exec(
        &setup,
        &format!("INSERT INTO acct VALUES {}", values.join(", ")),
    )
    .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let acked_statements = Arc::new(AtomicU64::new(0));
    let acked_by_writer: Arc<Vec<AtomicU64>> =
        Arc::new(Writer::ALL.iter().map(|_| AtomicU64::new(0)).collect());
    let ledger = Arc::new(Mutex::new(Ledger {
        acked: vec![0; ACCOUNTS as usize],
        unknown: vec![0; ACCOUNTS as usize],
    }));
    let reads = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for (wi, w) in Writer::ALL.into_iter().enumerate() {
        let (stop, acked_statements, acked_by_writer, ledger, urls) = (
            stop.clone(),
            acked_statements.clone(),
            acked_by_writer.clone(),
            ledger.clone(),
            urls.clone(),
        );
        threads.push(std::thread::spawn(move || {
            let c = client(&urls);
            // One session for all of this writer's statements: its variables carry over.
            let mut session = c.session();
            if w == Writer::AsyncCommit {
                c.exec(&mut session, "SET tidb_enable_async_commit = ON");
            }
            let mut rng = rand::rng();
            let mut failures = Vec::new();
            while !stop.load(Ordering::Acquire) {
                let (a, b) = w.accounts(&mut rng);
                let sql = format!("UPDATE acct SET v = v + 1 WHERE id IN ({a}, {b})");
                match c
                    .try_exec(&mut session, &sql)
                    .map_err(|e| node::error_chain(&e))
                {
                    Ok(r) => {
                        assert_eq!(r.affected_rows, 2, "writer {w:?}: {sql}");
                        let mut l = ledger.lock().unwrap();
                        l.acked[a as usize] += 1;
                        l.acked[b as usize] += 1;
                        drop(l);
                        acked_statements.fetch_add(1, Ordering::AcqRel);
                        acked_by_writer[wi].fetch_add(1, Ordering::AcqRel);
                    }
                    Err(e) => {
                        let mut l = ledger.lock().unwrap();
                        l.unknown[a as usize] += 1;
                        l.unknown[b as usize] += 1;
                        failures.push(e);
                    }
                }
            }
            failures
        }));
    }
    let reader = {
        let (stop, acked_statements, reads, urls) = (
            stop.clone(),
            acked_statements.clone(),
            reads.clone(),
            urls.clone(),
        );
        std::thread::spawn(move || {
            let c = client(&urls);
            while !stop.load(Ordering::Acquire) {
                let floor = acked_statements.load(Ordering::Acquire) * 2;
                let Ok(r) = exec(&c, "SELECT SUM(v) FROM acct") else {
                    continue;
                };
                let sum = int(&r.rows[0][0]) as u64;
                assert_eq!(sum % 2, 0, "a read saw half a statement: sum={sum}");
                assert!(
                    sum >= floor,
                    "a stale read: sum={sum} below twice the {} statements acknowledged before it began",
                    floor / 2
                );
                reads.fetch_add(1, Ordering::AcqRel);
            }
        })
    };

    let mut rng = rand::rng();
    let mut leaders_killed = 0;
    // Async-commit prewrites counted by servers before they were killed (a kill loses them).
    let mut async_prewrites = 0.0;
    for round in 0..iterations() {
        let victim = if round % 2 == 0 {
            let mut leading: Vec<usize> = rc
                .reported_leaders()
                .into_values()
                .filter(|&l| l != TSO)
                .collect();
            if leading.is_empty() {
                leading = rc
                    .move_leaders_off(TSO, Duration::from_secs(30))
                    .into_iter()
                    .filter(|&l| l != TSO)
                    .collect();
            }
            leaders_killed += 1;
            leading[rng.random_range(0..leading.len())]
        } else {
            loop {
                let i = rng.random_range(0..SERVERS);
                if i != TSO {
                    break i;
                }
            }
        };
        std::thread::sleep(Duration::from_millis(rng.random_range(100..600)));
        let before = acked_statements.load(Ordering::Acquire);
        async_prewrites += rc.server(victim).metric(ASYNC_PREWRITES, &[]);
        rc.kill(victim);
        // Writes go on without the victim: at least one statement is acknowledged.
        let deadline = Instant::now() + Duration::from_secs(30);
        while acked_statements.load(Ordering::Acquire) <= before {
            assert!(
                Instant::now() < deadline,
                "round {round}: no statement acknowledged within 30 s of killing server {}",
                victim + 1
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        rc.restart(victim);
    }
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Release);
    let mut failures = Vec::new();
    for t in threads {
        failures.extend(t.join().expect("a writer panicked"));
    }
    reader.join().expect("the reader found a violation");
    assert!(reads.load(Ordering::Acquire) > 0, "no read completed");
    for i in 0..SERVERS {
        async_prewrites += rc.server(i).metric(ASYNC_PREWRITES, &[]);
    }

    let check = client(&urls);
    let rows = exec(&check, "SELECT id, v FROM acct").unwrap().rows;
    assert_eq!(rows.len(), ACCOUNTS as usize);
    let l = ledger.lock().unwrap();
    let mut total = 0;
    for row in &rows {
        let (id, v) = (int(&row[0]) as usize, int(&row[1]) as u64);
        total += v;
        assert!(
            v >= l.acked[id] && v <= l.acked[id] + l.unknown[id],
            "account {id}: v={v}, expected between the {} acknowledged increments and {} more of unknown outcome",
            l.acked[id],
            l.unknown[id]
        );
    }
    assert_eq!(total % 2, 0, "the final total {total} is odd");
    let acked = acked_statements.load(Ordering::Acquire);
    let by_writer: Vec<(Writer, u64)> = Writer::ALL
        .into_iter()
        .zip(acked_by_writer.iter().map(|n| n.load(Ordering::Acquire)))
        .collect();
    assert!(leaders_killed > 0);
    eprintln!(
        "{} rounds ({leaders_killed} killed a leader): {acked} statements acknowledged \
         {by_writer:?}, {} failed, {} reads, {async_prewrites} async-commit prewrites; \
         failures: {:?}",
        iterations(),
        failures.len(),
        reads.load(Ordering::Acquire),
        failures.iter().take(3).collect::<Vec<_>>()
    );
    assert!(acked > 0);
    for (w, n) in &by_writer {
        assert!(*n > 0, "writer {w:?} had no statement acknowledged");
    }
    let async_acked = by_writer
        .iter()
        .find(|(w, _)| *w == Writer::AsyncCommit)
        .map_or(0, |(_, n)| *n) as f64;
    assert!(
        async_prewrites >= async_acked,
        "the async writer's {async_acked} statements did not use async commit: the servers \
         counted {async_prewrites} async-commit prewrites"
    );
}
