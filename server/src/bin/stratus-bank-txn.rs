//! Test helper for `tests/bank_transfer.rs`: runs money transfers between accounts as
//! transactions (2PC, async commit and 1PC mixed) over a kvengine in DIR until it is killed.
//! The test SIGKILLs it at random moments, reopens the engine itself, resolves the locks left
//! behind and checks that the total is conserved and every printed commit is there. Not meant
//! for anything else.
//!
//! `stratus-bank-txn DIR ACCOUNTS ROUND`
//!
//! * Accounts are keys `acct000`.. (`ACCOUNTS` of them, 100 each at first), spread over three
//!   shards split at `ACCOUNTS/3` and `2*ACCOUNTS/3`. The first and the last account are
//!   *reserved*: no transfer thread or reader of this process touches them.
//! * On start: creates the missing shards, resolves leftover locks, writes the initial balances
//!   in one transaction if no account exists (and fails if some but not all do), checks the
//!   total. Then it moves 1 between the two reserved accounts in a transaction it abandons as
//!   a dying coordinator would (the stage cycles with `ROUND`: async commit after the
//!   prewrites, 2PC after the prewrites, 2PC after the primary, async commit after the
//!   primary), so that every kill leaves locks of a known transaction for the test to resolve.
//! * Then transfer threads run forever, with a reader thread checking that the sum of the
//!   unreserved accounts never changes, and a thread flushing and compacting shards.
//!
//! Output lines (each written with one `write` and flushed):
//! * `init COMMIT_TS` after writing the initial balances;
//! * `reserved MODE STAGE START_TS COMMIT_TS|- OLD_FIRST OLD_LAST NEW_FIRST NEW_LAST` for the
//!   abandoned transaction (`-`: not committed, resolvers must roll it back);
//! * `ready` once the transfer threads start;
//! * `committed START_TS COMMIT_TS FROM NEW_FROM TO NEW_TO` per transfer that is committed
//!   (including abandoned ones that are committed anyway), with account indexes and the
//!   balances it wrote.
//!
//! Exit codes: 2 usage, 3 a conservation violation, 4 any other failure.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kvengine::raft_log::RaftLogOptions;
use kvengine::{Engine, EngineOptions, LocalDfs, LogMode, SyncPolicy};
use raftstore::RaftConfig;
use server::tso::Tso;
use server::txn::{
    ClientOptions, CommitStage, KvEntry, Mode, Storage, Transaction, TxnClient, TxnError,
    TxnErrorKind,
};

const INITIAL_BALANCE: u64 = 100;
const TRANSFER_THREADS: usize = 3;
const EXIT_USAGE: i32 = 2;
const EXIT_VIOLATION: i32 = 3;
const EXIT_FAILURE: i32 = 4;

/// xorshift64*: `rand` is only a dev-dependency of this crate, and this helper needs nothing
/// better than varied choices.
struct Rng(u64);

impl Rng {
    fn seeded() -> Rng {
        static SEEDS: AtomicU64 = AtomicU64::new(0);
        let nth = SEEDS.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mut r = Rng((nanos ^ nth ^ u64::from(std::process::id()).rotate_left(32)) | 1);
        r.next();
        r
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[lo, hi)` (slightly biased, which does not matter here).
    fn below(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(0, 100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(0, items.len() as u64) as usize]
    }
}

fn account(i: usize) -> Vec<u8> {
    format!("acct{i:03}").into_bytes()
}

fn fail(what: impl std::fmt::Display) -> ! {
    eprintln!("stratus-bank-txn: {what}");
    std::process::exit(EXIT_FAILURE)
}

fn violation(what: impl std::fmt::Display) -> ! {
    eprintln!("stratus-bank-txn: conservation violated: {what}");
    std::process::exit(EXIT_VIOLATION)
}

/// Writes one whole line in one call and flushes it, so a kill never leaves half a line.
fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let line = line + "\n";
    if out
        .write_all(line.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        // The test stopped reading: nothing left to report to.
        std::process::exit(EXIT_FAILURE);
    }
}

fn engine_options(dir: &Path) -> EngineOptions {
    let mut opts = EngineOptions::new(dir.join("engine"));
    // Writes go through the Raft log, as on a server.
    opts.log_mode = LogMode::External;
    // Small memtables: kills land around freezes and flushes too.
    opts.memtable_size = 64 * 1024;
    opts.block_cache_size = 8 * 1024 * 1024;
    opts
}

/// The Raft log of the child: every printed commit must survive the kill; small segments, so
/// kills land around segment rolls too.
fn raft_log_options(dir: &Path) -> RaftLogOptions {
    RaftLogOptions {
        sync: SyncPolicy::EveryBatch,
        segment_size: 64 * 1024,
        ..RaftLogOptions::new(dir.join("raft"))
    }
}

/// The three shards: `(id, start, end)`.
fn shard_layout(accounts: usize) -> [(u64, Vec<u8>, Vec<u8>); 3] {
    let (a, b) = (account(accounts / 3), account(2 * accounts / 3));
    [
        (1, Vec::new(), a.clone()),
        (2, a, b.clone()),
        (3, b, Vec::new()),
    ]
}

fn balance(e: &KvEntry) -> u64 {
    parse_balance(&e.key, &e.value)
}

fn parse_balance(key: &[u8], value: &[u8]) -> u64 {
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            violation(format!(
                "balance is not a number key={} value={value:?}",
                String::from_utf8_lossy(key)
            ))
        })
}

/// Whether `e` is worth retrying the transfer for.
fn retryable(e: &TxnError) -> bool {
    matches!(
        e.kind(),
        TxnErrorKind::Conflict | TxnErrorKind::TxnFinished | TxnErrorKind::Busy
    )
}

struct Bank {
    client: TxnClient,
    accounts: usize,
}

impl Bank {
    /// Reads the balance of account `i` in `txn`.
    fn read(&self, txn: &Transaction, i: usize) -> Result<u64, TxnError> {
        let key = account(i);
        match txn.get(&key)? {
            Some(v) => Ok(parse_balance(&key, &v)),
            None => violation(format!(
                "account missing key={} start_ts={}",
                String::from_utf8_lossy(&key),
                txn.start_ts()
            )),
        }
    }

    /// Creates the accounts unless they exist; fails unless all of them then hold the total.
    fn init(&self) {
        let ts = self.client.current_ts().unwrap_or_else(|e| fail(e));
        let all = self
            .client
            .scan(b"", b"", 0, ts)
            .unwrap_or_else(|e| fail(format!("initial scan: {e}")));
        if all.is_empty() {
            let mut txn = self.client.begin().unwrap_or_else(|e| fail(e));
            for i in 0..self.accounts {
                txn.set(account(i), INITIAL_BALANCE.to_string());
            }
            let c = txn
                .commit(Mode::TwoPc)
                .unwrap_or_else(|e| fail(format!("writing the initial balances: {e}")));
            say(format!("init {}", c.commit_ts));
            return;
        }
        let sum: u64 = all.iter().map(balance).sum();
        if all.len() != self.accounts || sum != self.accounts as u64 * INITIAL_BALANCE {
            violation(format!(
                "at start: expected {} accounts holding {}, found {} holding {sum} ts={ts}",
                self.accounts,
                self.accounts as u64 * INITIAL_BALANCE,
                all.len()
            ));
        }
    }

    /// Moves 1 between the reserved accounts and abandons the commit at the stage `round`
    /// picks, leaving its locks for the test to resolve.
    fn abandon_reserved_transfer(&self, round: u64) {
        let (mode, stage) = match round % 4 {
            0 => (Mode::AsyncCommit, CommitStage::Prewritten),
            1 => (Mode::TwoPc, CommitStage::Prewritten),
            2 => (Mode::TwoPc, CommitStage::PrimaryCommitted),
            _ => (Mode::AsyncCommit, CommitStage::PrimaryCommitted),
        };
        let (first, last) = (0, self.accounts - 1);
        let mut txn = self.client.begin().unwrap_or_else(|e| fail(e));
        let old_first = self.read(&txn, first).unwrap_or_else(|e| fail(e));
        let old_last = self.read(&txn, last).unwrap_or_else(|e| fail(e));
        let (new_first, new_last) = if old_first > 0 {
            (old_first - 1, old_last + 1)
        } else {
            (old_first + 1, old_last - 1)
        };
        txn.set(account(first), new_first.to_string());
        txn.set(account(last), new_last.to_string());
        let a = txn
            .commit_stopping_after(mode, stage)
            .unwrap_or_else(|e| fail(format!("reserved transfer: {e}")));
        let commit_ts = a.committed_at.map_or("-".to_string(), |c| c.to_string());
        say(format!(
            "reserved {mode:?} {stage:?} {} {commit_ts} {old_first} {old_last} {new_first} {new_last}",
            a.start_ts
        ));
    }

    /// Transfers between random unreserved accounts forever.
    fn transfer_loop(&self, shards: &[(u64, Vec<u8>, Vec<u8>)]) -> ! {
        let mut rng = Rng::seeded();
        let shard_of = |i: usize| {
            let k = account(i);
            shards
                .iter()
                .position(|(_, s, e)| k >= *s && (e.is_empty() || k < *e))
                .unwrap_or(0)
        };
        let unreserved: Vec<usize> = (1..self.accounts - 1).collect();
        loop {
            let from = rng.pick(&unreserved);
            // Half the pairs share a shard, so 1PC really commits in one phase.
            let same_shard: Vec<usize> = unreserved
                .iter()
                .copied()
                .filter(|&j| j != from && shard_of(j) == shard_of(from))
                .collect();
            let to = if rng.chance(50) && !same_shard.is_empty() {
                rng.pick(&same_shard)
            } else {
                loop {
                    let j = rng.pick(&unreserved);
                    if j != from {
                        break j;
                    }
                }
            };
            let mode = rng.pick(&[Mode::TwoPc, Mode::AsyncCommit, Mode::OnePc]);
            let abandon = rng.chance(3).then(|| {
                if rng.chance(50) {
                    CommitStage::Prewritten
                } else {
                    CommitStage::PrimaryCommitted
                }
            });
            match self.transfer(from, to, mode, abandon, &mut rng) {
                Ok(_) => {}
                Err(e) if retryable(&e) => {}
                Err(e) => fail(format!("transfer {from} -> {to} ({mode:?}): {e}")),
            }
        }
    }

    /// One transfer; prints it if it is committed.
    fn transfer(
        &self,
        from: usize,
        to: usize,
        mode: Mode,
        abandon: Option<CommitStage>,
        rng: &mut Rng,
    ) -> Result<(), TxnError> {
        let mut txn = self.client.begin()?;
        let from_bal = self.read(&txn, from)?;
        let to_bal = self.read(&txn, to)?;
        if from_bal == 0 {
            return Ok(());
        }
        let amount = rng.below(1, from_bal.div_ceil(2) + 1);
        let (new_from, new_to) = (from_bal - amount, to_bal + amount);
        txn.set(account(from), new_from.to_string());
        txn.set(account(to), new_to.to_string());
        let start_ts = txn.start_ts();
        let commit_ts = match abandon {
            None => Some(txn.commit(mode)?.commit_ts),
            Some(stage) => txn.commit_stopping_after(mode, stage)?.committed_at,
        };
        if let Some(commit_ts) = commit_ts {
            say(format!(
                "committed {start_ts} {commit_ts} {from} {new_from} {to} {new_to}"
            ));
        }
        Ok(())
    }

    /// Checks the unreserved accounts at fresh timestamps forever.
    fn reader_loop(&self) -> ! {
        let (start, end) = (account(1), account(self.accounts - 1));
        let want = (self.accounts as u64 - 2) * INITIAL_BALANCE;
        loop {
            let result = self
                .client
                .current_ts()
                .and_then(|ts| Ok((ts, self.client.scan(&start, &end, 0, ts)?)));
            let (ts, entries) = match result {
                Ok(r) => r,
                Err(e) if retryable(&e) => continue,
                Err(e) => fail(format!("reader: {e}")),
            };
            let sum: u64 = entries.iter().map(balance).sum();
            if entries.len() != self.accounts - 2 || sum != want {
                violation(format!(
                    "reader: expected {} accounts holding {want}, found {} holding {sum} ts={ts}",
                    self.accounts - 2,
                    entries.len()
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match args.as_slice() {
        [dir, accounts, round] => accounts
            .parse::<usize>()
            .ok()
            .filter(|&n| n >= 6)
            .zip(round.parse::<u64>().ok())
            .map(|(n, r)| (PathBuf::from(dir), n, r)),
        _ => None,
    };
    let Some((dir, accounts, round)) = parsed else {
        eprintln!("usage: stratus-bank-txn DIR ACCOUNTS(>=6) ROUND");
        std::process::exit(EXIT_USAGE);
    };

    let dfs = LocalDfs::open(dir.join("dfs")).unwrap_or_else(|e| fail(format!("open dfs: {e}")));
    let engine = Engine::open(engine_options(&dir), Arc::new(dfs))
        .unwrap_or_else(|e| fail(format!("open engine: {e}")));
    // A kill may have come between two shard creations: `start_standalone` creates whichever
    // is missing.
    let shards = shard_layout(accounts);
    let raft = raftstore::start_standalone(
        engine.clone(),
        raft_log_options(&dir),
        &shards,
        RaftConfig::default(),
    )
    .unwrap_or_else(|e| fail(format!("start the raft store: {e}")));
    let tso = Tso::open(dir.join("tso")).unwrap_or_else(|e| fail(format!("open tso: {e}")));
    let storage = Arc::new(
        Storage::new(engine.clone(), Arc::new(tso), raft)
            .unwrap_or_else(|e| fail(format!("storage: {e}"))),
    );
    let client = TxnClient::with_options(
        storage,
        ClientOptions {
            lock_ttl_ms: 200,
            lock_wait_timeout: Duration::from_secs(10),
            max_backoff: Duration::from_millis(10),
        },
    );
    client
        .resolve_locks_in_range(b"", b"", Duration::from_secs(10))
        .unwrap_or_else(|e| fail(format!("resolving leftover locks: {e}")));
    let bank = Arc::new(Bank { client, accounts });
    bank.init();
    bank.abandon_reserved_transfer(round);
    say("ready".into());

    for _ in 0..TRANSFER_THREADS {
        let (bank, shards) = (bank.clone(), shards.clone());
        std::thread::spawn(move || bank.transfer_loop(&shards));
    }
    {
        let bank = bank.clone();
        std::thread::spawn(move || bank.reader_loop());
    }
    // Flushes (and now and then a compaction) while the transfers run.
    let mut rng = Rng::seeded();
    loop {
        std::thread::sleep(Duration::from_millis(rng.below(20, 80)));
        let id = rng.below(1, 4);
        engine
            .flush_shard(id)
            .unwrap_or_else(|e| fail(format!("flush shard {id}: {e}")));
        if rng.chance(20) {
            engine
                .compact_shard(id, true)
                .unwrap_or_else(|e| fail(format!("compact shard {id}: {e}")));
        }
    }
}
