//! Snapshot isolation against an oracle on three replicated servers while leaders move and
//! servers die: `server/tests/snapshot_isolation_model.rs` (one in-process one-voter store)
//! again, through the client crate the SQL front writes and reads with, against real
//! processes with three replicas per region.
//!
//! Writer threads run random transactions over 16 rows of a table cut into three regions
//! (puts, deletes and lock-only rows, one to four rows each, every row's new value unique to
//! its transaction) with `client::sql::txn_write::write`, which picks 1PC (one region), async
//! commit (half the writers' transactions ask for it) or 2PC, and follows leaders. Each reads
//! one row at its start_ts first, so write conflicts happen. The oracle records
//! `(start_ts, commit_ts, writes)` of each acknowledged transaction (`WriteOutcome::commit_ts`).
//! Reader threads read the table, or one row, at fresh TSO timestamps and at earlier ones
//! through the coprocessor paging driver (`Client::coprocessor_with`, which resolves the locks
//! it meets), each read under a random `tidb_replica_read` (leader, follower,
//! leader-and-follower: followers serve replica reads after the leader's read index and lock
//! check). Meanwhile the leadership of a random region moves to a random server every few
//! hundred ms (`/admin/transfer_leader`), and in every phase a server other than the TSO's is
//! SIGKILLed and restarted (`STRATUS_CRASH_ITERATIONS` kills in all, default one per phase).
//!
//! After the run every transaction's primary is asked for its fate (`check_txn_status` with
//! `rollback_if_not_exist`, and the resolver's decision for an async-commit lock still
//! there): an acknowledged transaction must be committed at the commit_ts it was acknowledged
//! with, a failed one must not be committed, and one whose outcome the client reported as
//! undetermined joins the oracle when it committed. Then:
//!
//! * every read at `ts` equals the oracle's state at `ts`: all committed transactions with
//!   `commit_ts <= ts` applied in commit_ts order (a stale read after a leader change, a lost
//!   write or half a transaction shows here);
//! * no two committed transactions that wrote the same row overlap (`A.start < B.commit` and
//!   `B.start < A.commit`): first-committer-wins.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use client::paging::CopOptions;
use client::replica_read::ReplicaReadPolicy;
use client::sql::SqlError;
use client::sql::txn_write::{self, CommitMode, CommitOptions, RowWrite};
use e2e::entry_client::{EntryClient, handle_v_dag};
use e2e::replicated::{ReplicatedCluster, SERVERS, TSO};
use e2e::sample_table::SampleTable;
use rand::Rng;
use rand::seq::IndexedRandom;
use wire::coprocessor::KeyRange;
use wire::datum::Datum;
use wire::txn::TxnState;

/// A table no catalog knows: the servers read rows by key, the DAG names the table id.
const TABLE: SampleTable = SampleTable { id: 1 };
/// Rows `0..ROWS`, the handles writers pick from.
const ROWS: i64 = 16;
/// Region boundaries (handles): three regions, so transactions over two or three of them use
/// 2PC or async commit.
const CUTS: [i64; 2] = [6, 11];
const WRITERS: usize = 4;
const READERS: usize = 2;
const PHASES: usize = 3;
/// How long writers and readers run in each phase (longer when the phase's kills take more).
const PHASE_TIME: Duration = Duration::from_secs(9);
/// How long a server stays dead, at most (writes go on without it meanwhile).
const MAX_DOWNTIME_MS: u64 = 1_200;
/// Statement name in the client's errors and warnings.
const STATEMENT: &str = "si model";

fn kill_rounds() -> usize {
    std::env::var("STRATUS_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(PHASES)
}

fn entry_client(urls: &[String]) -> EntryClient {
    let mut cfg = client::ClientConfig::new(urls.iter().cloned());
    cfg.request_timeout = types::ReadableDuration::secs(20);
    // Cache every page: reads at later timestamps are then answered from it as often as the
    // servers allow, which this test checks too.
    cfg.cop_cache.admission_min_process_time = types::ReadableDuration::millis(0);
    EntryClient::with_config(cfg)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    /// The row's new value: the transaction's own.
    Put,
    Delete,
    Lock,
}

/// A transaction a writer ran, whatever became of it.
#[derive(Debug, Clone)]
struct Txn {
    start_ts: u64,
    /// The value of each row it puts (unique to it).
    value: i64,
    /// The first is the primary.
    writes: Vec<(i64, Write)>,
    async_commit: bool,
    who: String,
}

impl Txn {
    fn row_writes(&self) -> Vec<RowWrite> {
        self.writes
            .iter()
            .map(|&(h, w)| {
                let key = TABLE.key(h);
                match w {
                    Write::Put => RowWrite::Put {
                        key,
                        value: SampleTable::value(self.value, 0),
                    },
                    Write::Delete => RowWrite::Delete { key },
                    Write::Lock => RowWrite::Lock { key },
                }
            })
            .collect()
    }

    fn primary(&self) -> Vec<u8> {
        TABLE.key(self.writes[0].0)
    }

    fn secondaries(&self) -> Vec<Vec<u8>> {
        self.writes[1..]
            .iter()
            .map(|&(h, _)| TABLE.key(h))
            .collect()
    }
}

#[derive(Debug, Clone)]
struct Committed {
    txn: Txn,
    commit_ts: u64,
    /// How it committed: the client's mode, or `undetermined` (decided after the run).
    how: String,
}

/// Row handle → value.
type State = BTreeMap<i64, i64>;

/// A read and what it returned.
#[derive(Debug)]
struct Observation {
    ts: u64,
    /// `None`: the whole table; `Some(h)`: row `h` alone.
    row: Option<i64>,
    got: State,
    who: String,
}

#[derive(Default)]
struct Oracle {
    /// Acknowledged by the client: committed, at the commit_ts it said.
    acknowledged: Mutex<Vec<Committed>>,
    /// Failed with an error other than `Undetermined`: must not have committed (the error).
    failed: Mutex<Vec<(Txn, String)>>,
    /// `SqlError::Undetermined`: decided after the run.
    undetermined: Mutex<Vec<Txn>>,
    observations: Mutex<Vec<Observation>>,
    /// Reads (and timestamps) that failed, with why: counted, not checked.
    read_errors: Mutex<Vec<String>>,
    /// Timestamps handed out so far, for readers that read in the past.
    issued: Mutex<Vec<u64>>,
}

/// Reads the whole table (`row` None) or one row at `ts` through the paging driver, from the
/// replicas `replica_read` says (`tidb_replica_read`: followers serve replica reads).
fn read(
    c: &EntryClient,
    row: Option<i64>,
    ts: u64,
    replica_read: ReplicaReadPolicy,
) -> Result<State, String> {
    let range = match row {
        None => TABLE.range(),
        Some(h) => KeyRange::new(TABLE.key(h), TABLE.key(h + 1)),
    };
    let opts = CopOptions {
        replica_read,
        ..CopOptions::from_config(c.client.config())
    };
    let dag = handle_v_dag(TABLE, false);
    let result = c
        .block_on(c.client.coprocessor_with(&dag, vec![range], ts, opts))
        .map_err(|e| node::error_chain(&e))?;
    let mut state = State::new();
    for r in &result.rows {
        match r.as_slice() {
            [Datum::Int(h), Datum::Int(v)] => {
                assert!(
                    state.insert(*h, *v).is_none(),
                    "row {h} returned twice by a read at {ts}: {:?}",
                    result.rows
                );
            }
            other => panic!("expected [handle, v], found {other:?}"),
        }
    }
    Ok(state)
}

fn run_writer(urls: &[String], oracle: &Oracle, id: usize, stop: &AtomicBool, values: &AtomicI64) {
    let c = entry_client(urls);
    let mut rng = rand::rng();
    while !stop.load(Ordering::Acquire) {
        let start_ts = match c.block_on(c.client.current_ts()) {
            Ok(ts) => ts,
            Err(e) => {
                let e = format!("writer {id} tso: {}", node::error_chain(&e));
                oracle.read_errors.lock().unwrap().push(e);
                continue;
            }
        };
        oracle.issued.lock().unwrap().push(start_ts);
        // Read a row first, as a transaction would: an observation at start_ts.
        let rh = rng.random_range(0..ROWS);
        match read(&c, Some(rh), start_ts, ReplicaReadPolicy::Leader) {
            Ok(got) => oracle.observations.lock().unwrap().push(Observation {
                ts: start_ts,
                row: Some(rh),
                got,
                who: format!("writer {id} read"),
            }),
            Err(e) => {
                let e = format!("writer {id} read at {start_ts}: {e}");
                oracle.read_errors.lock().unwrap().push(e);
                continue;
            }
        }
        let mut handles: Vec<i64> = (0..ROWS).collect();
        let writes = (0..rng.random_range(1..=4))
            .map(|_| {
                let h = handles.swap_remove(rng.random_range(0..handles.len()));
                let w = match rng.random_range(0..10) {
                    0..=6 => Write::Put,
                    7 | 8 => Write::Delete,
                    _ => Write::Lock,
                };
                (h, w)
            })
            .collect();
        let txn = Txn {
            start_ts,
            value: values.fetch_add(1, Ordering::Relaxed),
            writes,
            async_commit: rng.random_bool(0.5),
            who: format!("writer {id}"),
        };
        let opts = CommitOptions {
            async_commit: txn.async_commit,
            schema_lease: None,
        };
        let written = c.block_on(txn_write::write(
            &c.client,
            &txn.row_writes(),
            start_ts,
            STATEMENT,
            opts,
        ));
        match written {
            Ok(out) => {
                let commit_ts = out
                    .commit_ts
                    .unwrap_or_else(|| panic!("{txn:?} acknowledged without a commit_ts"));
                assert!(
                    commit_ts > start_ts,
                    "{txn:?} acknowledged at commit_ts {commit_ts}, not above its start_ts"
                );
                oracle.acknowledged.lock().unwrap().push(Committed {
                    txn,
                    commit_ts,
                    how: format!("{:?}", out.mode),
                });
            }
            Err(SqlError::Undetermined { .. }) => oracle.undetermined.lock().unwrap().push(txn),
            Err(e) => {
                let e = node::error_chain(&e);
                oracle.failed.lock().unwrap().push((txn, e));
            }
        }
    }
}

fn run_reader(urls: &[String], oracle: &Oracle, id: usize, stop: &AtomicBool) {
    let c = entry_client(urls);
    let mut rng = rand::rng();
    while !stop.load(Ordering::Acquire) {
        let past = oracle.issued.lock().unwrap().choose(&mut rng).copied();
        let ts = match past {
            Some(ts) if rng.random_bool(0.3) => ts,
            _ => match c.block_on(c.client.current_ts()) {
                Ok(ts) => {
                    oracle.issued.lock().unwrap().push(ts);
                    ts
                }
                Err(e) => {
                    let e = format!("reader {id} tso: {}", node::error_chain(&e));
                    oracle.read_errors.lock().unwrap().push(e);
                    continue;
                }
            },
        };
        let row = rng.random_bool(0.5).then(|| rng.random_range(0..ROWS));
        let policy = *ReplicaReadPolicy::ALL.choose(&mut rng).unwrap();
        match read(&c, row, ts, policy) {
            Ok(got) => oracle.observations.lock().unwrap().push(Observation {
                ts,
                row,
                got,
                who: format!("reader {id} ({} replica read)", policy.as_str()),
            }),
            Err(e) => {
                let e = format!("reader {id} read at {ts}: {e}");
                oracle.read_errors.lock().unwrap().push(e);
            }
        }
    }
}

/// The commit_ts of `txn`, or `None` when it is rolled back, decided now (after the run)
/// at its primary: `check_txn_status` with `rollback_if_not_exist` (and a fresh `current_ts`,
/// so a 2PC lock past its TTL is rolled back), the resolver's decision for an async-commit
/// lock still there; a 2PC lock within its TTL is asked again.
fn fate(c: &EntryClient, txn: &Txn) -> Option<u64> {
    let resolver = c.client.lock_resolver();
    let primary = txn.primary();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = c.block_on(c.client.current_ts()).unwrap();
        let status = c
            .block_on(resolver.txn_status(&primary, txn.start_ts, now, true, 0))
            .unwrap_or_else(|e| panic!("status of {txn:?}: {}", node::error_chain(&e)));
        match TxnState::try_from(status.state) {
            Ok(TxnState::Committed) => return Some(status.commit_ts),
            Ok(TxnState::RolledBack | TxnState::LockNotExistRolledBack) => return None,
            Ok(TxnState::Locked) if status.lock.as_ref().is_some_and(|l| l.use_async_commit) => {
                let decided = c
                    .block_on(resolver.decide_async_commit(
                        &primary,
                        txn.start_ts,
                        &txn.secondaries(),
                    ))
                    .unwrap_or_else(|e| panic!("deciding {txn:?}: {}", node::error_chain(&e)));
                return match decided {
                    client::lock_resolver::AsyncCommitFate::Committed { commit_ts } => {
                        Some(commit_ts)
                    }
                    client::lock_resolver::AsyncCommitFate::RolledBack => None,
                };
            }
            Ok(TxnState::Locked) => {
                assert!(
                    Instant::now() < deadline,
                    "{txn:?}: its primary is still locked: {status:?}"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
            other => panic!("{txn:?}: unexpected status {other:?}: {status:?}"),
        }
    }
}

/// What the fault driver did.
#[derive(Debug, Default)]
struct Faults {
    transfers: usize,
    transfers_unfinished: usize,
    kills: usize,
    /// Leader changes of any cause seen between two looks at the reported leaders.
    leader_changes_seen: usize,
}

impl Faults {
    /// Counts the regions whose reported leader differs from `last`, and remembers the new
    /// leaders.
    fn look(&mut self, rc: &mut ReplicatedCluster, last: &mut BTreeMap<u64, usize>) {
        let now = rc.reported_leaders();
        self.leader_changes_seen += now
            .iter()
            .filter(|(r, l)| last.get(r).is_some_and(|old| old != *l))
            .count();
        *last = now;
    }

    /// Moves a random region's leadership to a random reachable server that does not lead it.
    fn transfer_one(&mut self, rc: &mut ReplicatedCluster, rng: &mut impl Rng) {
        // A region whose leader is down gets a new one by election, not by transfer.
        let leaders: Vec<(u64, usize)> = rc
            .reported_leaders()
            .into_iter()
            .filter(|&(_, l)| rc.reachable(l))
            .collect();
        let Some(&(region, from)) = leaders.choose(rng) else {
            return;
        };
        let targets: Vec<usize> = (0..SERVERS)
            .filter(|&i| i != from && rc.reachable(i))
            .collect();
        let Some(&to) = targets.choose(rng) else {
            return;
        };
        match rc.try_transfer_leader(region, to, Duration::from_secs(3)) {
            Ok(()) => self.transfers += 1,
            Err(e) => {
                eprintln!("transfer unfinished: {e}");
                self.transfers_unfinished += 1;
            }
        }
    }
}

/// One phase of faults: leader transfers every 150 to 400 ms for [`PHASE_TIME`], and `kills`
/// SIGKILLs (each of a server other than the TSO's, a region leader when there is one, and its
/// restart after up to [`MAX_DOWNTIME_MS`], transfers going on meanwhile).
fn run_faults(rc: &mut ReplicatedCluster, faults: &mut Faults, kills: usize) {
    let mut rng = rand::rng();
    let start = Instant::now();
    let mut last = rc.reported_leaders();
    // When each kill happens, spread over the phase.
    let mut kill_at: Vec<Duration> = (0..kills)
        .map(|_| PHASE_TIME.mul_f64(rng.random_range(0.1..0.8)))
        .collect();
    kill_at.sort();
    let mut kill_at = kill_at.into_iter().peekable();
    let mut down: Option<(usize, Instant)> = None;
    while start.elapsed() < PHASE_TIME || kill_at.peek().is_some() || down.is_some() {
        match down {
            Some((victim, until)) if Instant::now() >= until => {
                rc.restart(victim);
                down = None;
            }
            None if kill_at.peek().is_some_and(|at| start.elapsed() >= *at) => {
                kill_at.next();
                let leading: Vec<usize> = rc
                    .reported_leaders()
                    .into_values()
                    .filter(|&l| l != TSO)
                    .collect();
                let victim = match leading.choose(&mut rng) {
                    Some(&l) => l,
                    None => loop {
                        let i = rng.random_range(0..SERVERS);
                        if i != TSO {
                            break i;
                        }
                    },
                };
                rc.kill(victim);
                faults.kills += 1;
                let downtime = Duration::from_millis(rng.random_range(300..MAX_DOWNTIME_MS));
                down = Some((victim, Instant::now() + downtime));
            }
            _ => faults.transfer_one(rc, &mut rng),
        }
        faults.look(rc, &mut last);
        std::thread::sleep(Duration::from_millis(rng.random_range(150..400)));
    }
}

/// The oracle's state at each observation's ts, checked against what it read.
fn check_reads(txns: &[Committed], observations: &mut [Observation]) {
    let by_value: BTreeMap<i64, &Committed> = txns.iter().map(|t| (t.txn.value, t)).collect();
    observations.sort_by_key(|o| o.ts);
    let mut state = State::new();
    let mut applied = txns.iter().peekable();
    for obs in observations.iter() {
        while let Some(t) = applied.next_if(|t| t.commit_ts <= obs.ts) {
            for &(h, w) in &t.txn.writes {
                match w {
                    Write::Put => {
                        state.insert(h, t.txn.value);
                    }
                    Write::Delete => {
                        state.remove(&h);
                    }
                    Write::Lock => {}
                }
            }
        }
        let mut want = state.clone();
        if let Some(h) = obs.row {
            want.retain(|wh, _| *wh == h);
        }
        if obs.got != want {
            let writers = |s: &State| -> Vec<String> {
                s.iter()
                    .map(|(h, v)| match by_value.get(v) {
                        Some(t) => format!(
                            "row {h}: {v} by {} start_ts={} commit_ts={} ({})",
                            t.txn.who, t.txn.start_ts, t.commit_ts, t.how
                        ),
                        None => format!("row {h}: {v}, a value of no committed transaction"),
                    })
                    .collect()
            };
            panic!(
                "{} at ts {} (row {:?}) differs from the oracle\n got: {:#?}\nwant: {:#?}",
                obs.who,
                obs.ts,
                obs.row,
                writers(&obs.got),
                writers(&want)
            );
        }
    }
}

/// First-committer-wins: no two overlapping committed transactions wrote the same row.
fn check_first_committer_wins(txns: &[Committed]) {
    let mut by_row: BTreeMap<i64, Vec<&Committed>> = BTreeMap::new();
    for t in txns {
        for &(h, _) in &t.txn.writes {
            by_row.entry(h).or_default().push(t);
        }
    }
    for (h, ts) in &by_row {
        for (i, a) in ts.iter().enumerate() {
            for b in &ts[i + 1..] {
                assert!(
                    !(a.txn.start_ts < b.commit_ts && b.txn.start_ts < a.commit_ts),
                    "overlapping writers of row {h}: {a:?} and {b:?}"
                );
            }
        }
    }
}

#[test]
fn reads_at_every_ts_match_the_oracle_across_leader_changes_and_kills() {
    let cuts: Vec<Vec<u8>> = CUTS.iter().map(|&h| TABLE.key(h)).collect();
    let mut rc = ReplicatedCluster::start(&cuts);
    rc.wait_until_every_region_has_a_leader(Duration::from_secs(30));
    let urls = rc.urls();
    let oracle = Oracle::default();
    let values = AtomicI64::new(1);
    let mut faults = Faults::default();
    let rounds = kill_rounds();
    let started = Instant::now();

    for phase in 0..PHASES {
        // This phase's share of the kill rounds.
        let kills = rounds / PHASES + usize::from(phase < rounds % PHASES);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let mut threads = Vec::new();
            for id in 0..WRITERS {
                let (urls, oracle, stop, values) = (&urls, &oracle, &stop, &values);
                threads.push(s.spawn(move || run_writer(urls, oracle, id, stop, values)));
            }
            for id in 0..READERS {
                let (urls, oracle, stop) = (&urls, &oracle, &stop);
                threads.push(s.spawn(move || run_reader(urls, oracle, id, stop)));
            }
            run_faults(&mut rc, &mut faults, kills);
            stop.store(true, Ordering::Release);
            for t in threads {
                t.join().unwrap();
            }
        });
        rc.wait_until_every_region_has_a_leader(Duration::from_secs(30));
        eprintln!(
            "phase {phase} done after {:?}: {} acknowledged, {faults:?}",
            started.elapsed(),
            oracle.acknowledged.lock().unwrap().len()
        );
    }

    // Every transaction's fate, decided at its primary.
    let c = entry_client(&urls);
    let mut txns = Vec::new();
    for t in oracle.acknowledged.lock().unwrap().iter() {
        let decided = fate(&c, &t.txn);
        assert_eq!(
            decided,
            Some(t.commit_ts),
            "an acknowledged transaction's primary disagrees with its acknowledgement: {t:?}"
        );
        txns.push(t.clone());
    }
    for (t, e) in oracle.failed.lock().unwrap().iter() {
        let decided = fate(&c, t);
        assert_eq!(
            decided, None,
            "a transaction the client reported failed committed: {t:?} error={e}"
        );
    }
    let mut undetermined_committed = 0;
    for t in oracle.undetermined.lock().unwrap().iter() {
        if let Some(commit_ts) = fate(&c, t) {
            undetermined_committed += 1;
            txns.push(Committed {
                txn: t.clone(),
                commit_ts,
                how: "undetermined".into(),
            });
        }
    }
    txns.sort_by_key(|t| t.commit_ts);

    // One last read of everything, after every lock was decided.
    let final_ts = c.block_on(c.client.current_ts()).unwrap();
    let got = read(&c, None, final_ts, ReplicaReadPolicy::Follower)
        .unwrap_or_else(|e| panic!("final read: {e}"));
    let mut observations = std::mem::take(&mut *oracle.observations.lock().unwrap());
    observations.push(Observation {
        ts: final_ts,
        row: None,
        got,
        who: "final read".into(),
    });

    let mut by_mode: BTreeMap<String, usize> = BTreeMap::new();
    for t in &txns {
        *by_mode.entry(t.how.clone()).or_default() += 1;
    }
    let mut failures: BTreeMap<String, usize> = BTreeMap::new();
    for (_, e) in oracle.failed.lock().unwrap().iter() {
        let kind = e.split(':').next().unwrap_or_default().to_string();
        *failures.entry(kind).or_default() += 1;
    }
    let read_errors = oracle.read_errors.lock().unwrap();
    eprintln!(
        "{} committed {by_mode:?}; {} undetermined ({undetermined_committed} of them \
         committed); failed {failures:?}; {} reads, {} read errors {:?}; faults {faults:?}; \
         {:?} in all",
        txns.len(),
        oracle.undetermined.lock().unwrap().len(),
        observations.len(),
        read_errors.len(),
        read_errors.iter().take(3).collect::<Vec<_>>(),
        started.elapsed()
    );

    check_first_committer_wins(&txns);
    check_reads(&txns, &mut observations);

    assert!(
        txns.len() > 50,
        "too few commits to mean anything: {}",
        txns.len()
    );
    for mode in [
        CommitMode::OnePc,
        CommitMode::TwoPc,
        CommitMode::AsyncCommit,
    ] {
        let n = by_mode.get(&format!("{mode:?}")).copied().unwrap_or(0);
        assert!(n >= 5, "too few {mode:?} commits: {n}");
    }
    assert!(
        observations.len() > 100,
        "too few reads: {}",
        observations.len()
    );
    let follower_reads = observations
        .iter()
        .filter(|o| o.who.contains("(follower replica read)"))
        .count();
    assert!(
        follower_reads > 30,
        "too few reads under tidb_replica_read = follower: {follower_reads}"
    );
    assert!(
        faults.transfers >= 5,
        "too few leader transfers: {faults:?}"
    );
    assert_eq!(faults.kills, rounds, "{faults:?}");
}
