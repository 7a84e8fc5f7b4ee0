//! Bank transfers: concurrent transactions move money between accounts with 2PC, async commit
//! and 1PC mixed, some abandoned part-way as if their coordinator died. The total never
//! changes, so a read that saw part of a transfer (one account debited, the other not yet
//! credited) would see a different total: every snapshot read must see exactly the initial
//! total.
//!
//! * In process: transfer threads, reader threads, and flushes and compactions, all at once.
//! * Across SIGKILL: a child process (`stratus-bank-txn`) runs the transfers with a synced WAL
//!   and prints each committed transfer; the test kills it at a random moment, reopens the
//!   engine, resolves the locks left behind (including those of a transaction the child
//!   abandoned on purpose, whose outcome is known), checks the total and that every printed
//!   commit is there at its commit_ts, and restarts the child on the same directory.
//!   `STRATUS_CRASH_ITERATIONS` sets the number of kills (default 8).

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kvengine::{Engine, EngineOptions, LocalDfs, SyncPolicy};
use rand::Rng;
use rand::seq::{IndexedRandom, IteratorRandom};
use server::tso::Tso;
use server::txn::{
    ClientOptions, CommitStage, KvEntry, Mode, Storage, TxnClient, TxnError, TxnErrorKind,
};

const ACCOUNTS: usize = 40;
const INITIAL_BALANCE: u64 = 100;
const TOTAL: u64 = ACCOUNTS as u64 * INITIAL_BALANCE;

fn account(i: usize) -> Vec<u8> {
    format!("acct{i:03}").into_bytes()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn balance(e: &KvEntry) -> u64 {
    text(&e.value)
        .parse()
        .unwrap_or_else(|_| panic!("balance of {} is not a number: {:?}", text(&e.key), e.value))
}

/// Account → balance, checking that every account is there and the total is conserved.
fn check_conserved(entries: &[KvEntry], ts: u64, who: &str) -> BTreeMap<String, u64> {
    let balances: BTreeMap<String, u64> =
        entries.iter().map(|e| (text(&e.key), balance(e))).collect();
    let sum: u64 = balances.values().sum();
    assert_eq!(
        (balances.len(), sum),
        (ACCOUNTS, TOTAL),
        "{who} at ts {ts}: expected {ACCOUNTS} accounts holding {TOTAL}: {balances:?}"
    );
    balances
}

fn retryable(e: &TxnError) -> bool {
    matches!(
        e.kind(),
        TxnErrorKind::Conflict | TxnErrorKind::TxnFinished | TxnErrorKind::Busy
    )
}

/// The three shards of the in-process test, as `(id, start, end)`.
fn shard_layout() -> Vec<(u64, Vec<u8>, Vec<u8>)> {
    let (a, b) = (account(ACCOUNTS / 3), account(2 * ACCOUNTS / 3));
    vec![
        (1, Vec::new(), a.clone()),
        (2, a, b.clone()),
        (3, b, Vec::new()),
    ]
}

fn shard_of(shards: &[(u64, Vec<u8>, Vec<u8>)], i: usize) -> u64 {
    let k = account(i);
    shards
        .iter()
        .find(|(_, s, e)| k >= *s && (e.is_empty() || k < *e))
        .expect("every account is in a shard")
        .0
}

#[derive(Default)]
struct Outcomes(Mutex<BTreeMap<String, usize>>);

impl Outcomes {
    fn add(&self, what: String) {
        *self.0.lock().unwrap().entry(what).or_default() += 1;
    }

    fn get(&self, what: &str) -> usize {
        self.0.lock().unwrap().get(what).copied().unwrap_or(0)
    }
}

/// Random transfers until `deadline`: half of them between two accounts of one shard.
fn run_transfers(
    client: &TxnClient,
    shards: &[(u64, Vec<u8>, Vec<u8>)],
    outcomes: &Outcomes,
    deadline: Instant,
) {
    let mut rng = rand::rng();
    while Instant::now() < deadline {
        let from = rng.random_range(0..ACCOUNTS);
        let to = if rng.random_bool(0.5) {
            (0..ACCOUNTS)
                .filter(|&j| j != from && shard_of(shards, j) == shard_of(shards, from))
                .choose(&mut rng)
                .unwrap()
        } else {
            (0..ACCOUNTS)
                .filter(|&j| j != from)
                .choose(&mut rng)
                .unwrap()
        };
        let mode = *[Mode::TwoPc, Mode::AsyncCommit, Mode::OnePc]
            .choose(&mut rng)
            .unwrap();
        let abandon = rng.random_bool(0.04).then(|| {
            *[CommitStage::Prewritten, CommitStage::PrimaryCommitted]
                .choose(&mut rng)
                .unwrap()
        });
        let result: Result<String, TxnError> = (|| {
            let mut txn = client.begin()?;
            let read = |i: usize| -> Result<u64, TxnError> {
                let v = txn.get(&account(i))?.expect("accounts are never deleted");
                Ok(text(&v).parse().expect("balance is a number"))
            };
            let (from_bal, to_bal) = (read(from)?, read(to)?);
            if from_bal == 0 {
                return Ok("skipped (empty account)".to_string());
            }
            let amount = rng.random_range(1..=from_bal.div_ceil(2));
            txn.set(account(from), (from_bal - amount).to_string());
            txn.set(account(to), (to_bal + amount).to_string());
            Ok(match abandon {
                None => format!("committed {:?}", txn.commit(mode)?.mode),
                Some(stage) => {
                    let a = txn.commit_stopping_after(mode, stage)?;
                    let state = if a.committed_at.is_some() {
                        "committed"
                    } else {
                        "uncommitted"
                    };
                    format!("abandoned {:?} {stage:?} ({state})", a.mode)
                }
            })
        })();
        match result {
            Ok(what) => outcomes.add(what),
            Err(e) if retryable(&e) => outcomes.add(format!("failed {:?}", e.kind())),
            Err(e) => panic!("transfer {from} -> {to} ({mode:?}): unexpected error {e:?}"),
        }
    }
}

/// Scans every account at fresh timestamps, and now and then again at a timestamp it already
/// read, which must give the same balances.
fn run_reader(client: &TxnClient, id: usize, outcomes: &Outcomes, stop: &AtomicBool) {
    let mut rng = rand::rng();
    let mut seen: Vec<(u64, BTreeMap<String, u64>)> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if !seen.is_empty() && rng.random_bool(0.3) {
            let (ts, before) = seen.choose(&mut rng).unwrap();
            let again = check_conserved(
                &client.scan(b"", b"", 0, *ts).unwrap(),
                *ts,
                &format!("reader {id} re-read"),
            );
            assert_eq!(
                &again, before,
                "reader {id}: a second read at ts {ts} differs from the first"
            );
            outcomes.add("re-read".into());
        } else {
            let ts = client.current_ts().unwrap();
            let balances = check_conserved(
                &client.scan(b"", b"", 0, ts).unwrap(),
                ts,
                &format!("reader {id}"),
            );
            if seen.len() >= 200 {
                seen.swap_remove(rng.random_range(0..seen.len()));
            }
            seen.push((ts, balances));
            outcomes.add("read".into());
        }
    }
}

#[test]
fn concurrent_transfers_conserve_the_total_in_every_snapshot() {
    let shards = shard_layout();
    let shard_refs: Vec<(u64, &[u8], &[u8])> = shards
        .iter()
        .map(|(id, s, e)| (*id, s.as_slice(), e.as_slice()))
        .collect();
    let c = common::cluster_with(
        &shard_refs,
        false,
        ClientOptions {
            // Abandoned transfers are resolved quickly; a slow live one may be rolled back,
            // which its coordinator sees as a failed commit.
            lock_ttl_ms: 200,
            lock_wait_timeout: Duration::from_secs(20),
            max_backoff: Duration::from_millis(5),
        },
    );
    let mut init = c.client.begin().unwrap();
    for i in 0..ACCOUNTS {
        init.set(account(i), INITIAL_BALANCE.to_string());
    }
    init.commit(Mode::TwoPc).unwrap();

    let outcomes = Outcomes::default();
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(6);
    std::thread::scope(|s| {
        let transfers: Vec<_> = (0..4)
            .map(|_| s.spawn(|| run_transfers(&c.client, &shards, &outcomes, deadline)))
            .collect();
        for id in 0..2 {
            let (c, outcomes, stop) = (&c, &outcomes, &stop);
            s.spawn(move || run_reader(&c.client, id, outcomes, stop));
        }
        s.spawn(|| {
            let mut rng = rand::rng();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(rng.random_range(10..40)));
                let id = rng.random_range(1..=3);
                c.engine().flush_shard(id).unwrap();
                if rng.random_bool(0.25) {
                    c.engine().compact_shard(id, true).unwrap();
                }
                outcomes.add("flush".into());
            }
        });
        for t in transfers {
            t.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });

    c.client
        .resolve_locks_in_range(b"", b"", Duration::from_secs(10))
        .unwrap();
    let ts = c.ts();
    let last = check_conserved(&c.client.scan(b"", b"", 0, ts).unwrap(), ts, "final scan");
    eprintln!("outcomes: {:?}", outcomes.0.lock().unwrap());

    // The run exercised what this test claims to cover.
    for what in [
        "committed TwoPc",
        "committed AsyncCommit",
        "committed OnePc",
        "read",
        "re-read",
        "flush",
    ] {
        assert!(
            outcomes.get(what) >= 10,
            "too few {what:?}: {:?}",
            outcomes.0.lock().unwrap()
        );
    }
    let abandoned: usize = outcomes
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("abandoned"))
        .map(|(_, n)| n)
        .sum();
    assert!(abandoned > 0, "no transfer was abandoned");
    assert_ne!(
        last.values().copied().collect::<Vec<_>>(),
        vec![INITIAL_BALANCE; ACCOUNTS],
        "no money moved"
    );
}

// ---- across SIGKILL ----

/// The engine settings of the child (`stratus-bank-txn`), for the reopen.
fn child_engine_options(dir: &std::path::Path) -> EngineOptions {
    let mut opts = EngineOptions::new(dir.join("engine"));
    opts.log_mode = kvengine::LogMode::External;
    opts.memtable_size = 64 * 1024;
    opts.block_cache_size = 8 * 1024 * 1024;
    opts
}

/// A transfer the child printed as committed: `(start_ts, commit_ts, [(account, balance); 2])`.
struct PrintedCommit {
    start_ts: u64,
    commit_ts: u64,
    writes: [(usize, u64); 2],
}

/// The transaction the child abandoned on purpose before starting its transfers.
#[derive(Debug)]
struct Reserved {
    mode: String,
    stage: String,
    start_ts: u64,
    commit_ts: Option<u64>,
    old: [u64; 2],
    new: [u64; 2],
}

#[derive(Default)]
struct ChildOutput {
    init_commit_ts: Option<u64>,
    reserved: Option<Reserved>,
    commits: Vec<PrintedCommit>,
}

fn parse_output(lines: &[String]) -> ChildOutput {
    let mut out = ChildOutput::default();
    let num = |s: &str| -> u64 { s.parse().unwrap_or_else(|_| panic!("bad number {s:?}")) };
    for line in lines {
        let f: Vec<&str> = line.split(' ').collect();
        match f.as_slice() {
            ["init", c] => out.init_commit_ts = Some(num(c)),
            ["reserved", mode, stage, start, commit, o1, o2, n1, n2] => {
                out.reserved = Some(Reserved {
                    mode: mode.to_string(),
                    stage: stage.to_string(),
                    start_ts: num(start),
                    commit_ts: (*commit != "-").then(|| num(commit)),
                    old: [num(o1), num(o2)],
                    new: [num(n1), num(n2)],
                })
            }
            ["ready"] => {}
            ["committed", start, commit, from, new_from, to, new_to] => {
                out.commits.push(PrintedCommit {
                    start_ts: num(start),
                    commit_ts: num(commit),
                    writes: [
                        (num(from) as usize, num(new_from)),
                        (num(to) as usize, num(new_to)),
                    ],
                })
            }
            _ => panic!("unexpected line from the child: {line:?}"),
        }
    }
    out
}

/// Runs the child on `dir` until it prints `ready`, lets it run for `run_for`, SIGKILLs it and
/// returns what it printed.
fn run_child_and_kill(dir: &std::path::Path, round: usize, run_for: Duration) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stratus-bank-txn"))
        .arg(dir)
        .arg(ACCOUNTS.to_string())
        .arg(round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn stratus-bank-txn");
    let stdout = child.stdout.take().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line == "ready" {
                let _ = ready_tx.send(());
            }
            lines.push(line);
        }
        lines
    });
    let ready = ready_rx.recv_timeout(Duration::from_secs(60));
    if ready.is_ok() {
        std::thread::sleep(run_for);
    }
    // SIGKILL on unix (a no-op if the child already exited: `wait` tells).
    let _ = child.kill();
    let status = child.wait().unwrap();
    let lines = reader.join().unwrap();
    assert!(
        ready.is_ok(),
        "round {round}: the child never got ready: {status}; printed {lines:?}"
    );
    assert_eq!(
        status.signal(),
        Some(9),
        "round {round}: the child exited on its own (3 = conservation violated): {status}"
    );
    lines
}

/// How many locks the child's abandoned reserved transfer leaves.
fn reserved_locks_left(r: &Reserved) -> usize {
    match r.stage.as_str() {
        "Prewritten" => 2,
        "PrimaryCommitted" => 1,
        other => panic!("unknown stage {other:?}"),
    }
}

#[test]
fn sigkill_during_transfers_loses_nothing_and_leaves_no_partial_transaction() {
    let iterations: usize = std::env::var("STRATUS_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rng();
    let mut max_commit_ts = 0u64;
    let mut total_commits = 0usize;
    for round in 0..iterations {
        let run_for = Duration::from_millis(rng.random_range(100..800));
        let lines = run_child_and_kill(dir.path(), round, run_for);
        let out = parse_output(&lines);
        assert_eq!(
            out.init_commit_ts.is_some(),
            round == 0,
            "round {round}: the accounts must be created on the first run only"
        );
        let reserved = out
            .reserved
            .expect("the child prints its reserved transfer");

        // The child is dead: reopen its engine and TSO.
        let engine = Engine::open(
            child_engine_options(dir.path()),
            Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap()),
        )
        .unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
        let tso = Arc::new(Tso::open(dir.path().join("tso")).unwrap());
        // Its regions are all in its Raft log: nothing to create, the store replays the log.
        let raft = raftstore::start_standalone(
            engine.clone(),
            kvengine::raft_log::RaftLogOptions {
                sync: SyncPolicy::EveryBatch,
                ..kvengine::raft_log::RaftLogOptions::new(dir.path().join("raft"))
            },
            &[],
            raftstore::RaftConfig::default(),
        )
        .unwrap_or_else(|e| panic!("round {round}: raft store restart failed: {e}"));
        let storage = Arc::new(Storage::new(engine, tso, raft).unwrap());
        let client = TxnClient::with_options(
            storage,
            ClientOptions {
                lock_ttl_ms: 200,
                ..ClientOptions::default()
            },
        );
        let resolved = client
            .resolve_locks_in_range(b"", b"", Duration::from_secs(10))
            .unwrap();
        assert!(
            resolved >= reserved_locks_left(&reserved),
            "round {round}: resolved {resolved} locks, expected at least those of {reserved:?}"
        );

        // The TSO never goes back below a printed commit.
        let ts = client.current_ts().unwrap();
        for c in &out.commits {
            assert!(c.start_ts < c.commit_ts);
            max_commit_ts = max_commit_ts.max(c.commit_ts);
        }
        max_commit_ts = max_commit_ts.max(reserved.commit_ts.unwrap_or(0));
        assert!(
            ts > max_commit_ts,
            "round {round}: TSO handed out {ts}, not above printed commit_ts {max_commit_ts}"
        );

        let entries = client.scan(b"", b"", 0, ts).unwrap();
        check_conserved(&entries, ts, &format!("round {round}: after the kill"));

        // The abandoned reserved transfer ended as its coordinator left it: committed at the
        // commit_ts it was given, or rolled back.
        let first = &entries[0];
        let last = &entries[ACCOUNTS - 1];
        assert_eq!(
            (text(&first.key), text(&last.key)),
            (text(&account(0)), text(&account(ACCOUNTS - 1)))
        );
        match reserved.commit_ts {
            Some(commit_ts) => {
                assert_eq!(
                    [balance(first), balance(last)],
                    reserved.new,
                    "round {round}: committed {reserved:?} lost"
                );
                assert_eq!(
                    (first.commit_ts, last.commit_ts),
                    (commit_ts, commit_ts),
                    "round {round}: {reserved:?} resolved at another commit_ts"
                );
            }
            None => {
                assert_eq!(
                    [balance(first), balance(last)],
                    reserved.old,
                    "round {round}: uncommitted {reserved:?} was not rolled back"
                );
                assert!(first.commit_ts < reserved.start_ts && last.commit_ts < reserved.start_ts);
            }
        }

        // Every printed transfer is there, whole, at its commit_ts.
        for c in &out.commits {
            for (i, want) in c.writes {
                let got = client
                    .get_entry(&account(i), c.commit_ts)
                    .unwrap()
                    .unwrap_or_else(|| panic!("round {round}: account {i} missing"));
                assert_eq!(
                    (got.commit_ts, balance(&got)),
                    (c.commit_ts, want),
                    "round {round}: transfer start_ts={} commit_ts={} lost on account {i}",
                    c.start_ts,
                    c.commit_ts
                );
            }
        }
        // And the snapshots at (some of) those commits are conserved too.
        for c in out.commits.iter().choose_multiple(&mut rng, 20) {
            let entries = client.scan(b"", b"", 0, c.commit_ts).unwrap();
            check_conserved(
                &entries,
                c.commit_ts,
                &format!("round {round}: at a printed commit"),
            );
        }
        eprintln!(
            "round {round}: ran {} ms, {} transfers printed, {resolved} locks resolved, reserved {} {} {}",
            run_for.as_millis(),
            out.commits.len(),
            reserved.mode,
            reserved.stage,
            if reserved.commit_ts.is_some() {
                "committed"
            } else {
                "rolled back"
            }
        );
        total_commits += out.commits.len();
        // Closes the engine before the next child opens it.
        drop(client);
    }
    assert!(total_commits > 0, "the child never committed a transfer");
}
