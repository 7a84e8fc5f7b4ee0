//! The transaction coordinator: what a client (and the tests, and later the CLI) drives.
//!
//! * [`TxnClient::begin`] takes a start_ts from the TSO; [`Transaction`] buffers writes and
//!   reads its own writes first, then the snapshot at start_ts.
//! * [`Transaction::commit`] in one of three [`Mode`]s:
//!   - **2PC**: prewrite every key (primary = the smallest key), then
//!     `commit_ts = max(TSO ts, max min_commit_ts)`, commit the primary (the commit point),
//!     then the secondaries (best effort: a reader resolves what is left);
//!   - **async commit**: prewrite with the secondaries listed in the primary's lock; the
//!     transaction is committed as soon as every prewrite landed, at
//!     `commit_ts = max min_commit_ts` (each derived from the server's `max_ts`), then every
//!     key is committed (best effort);
//!   - **1PC**: if every key is in one shard, the prewrite commits; otherwise 2PC.
//! * Reads ([`TxnClient::get`], [`TxnClient::scan`], [`Transaction::get`]) that meet a lock
//!   resolve it ([`TxnClient::resolve_locks_for_read`]) and retry, backing off while the lock's
//!   owner is alive, until [`ClientOptions::lock_wait_timeout`].
//! * A prewrite that meets a lock does the same; any other prewrite failure rolls back every
//!   key of the transaction (so no late prewrite can land) and returns the error.
//!
//! Lock resolution, given a lock of transaction `T` met by a reader at `caller_start_ts`:
//! `check_txn_status` on T's primary (with `rollback_if_not_exist` once the met lock's TTL
//! expired), then: committed → commit the met lock; rolled back → roll it back; an
//! async-commit primary past its TTL → `check_secondary_locks` over the secondaries it lists:
//! all locked (or one committed) → commit every key at the max min_commit_ts, else roll back
//! every key; otherwise T is alive: back off and retry.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvengine::mvcc::{Lock, LockInfo};

use super::error::{Result, TxnError, TxnErrorKind};
use super::prewrite::{Mutation, MutationOp, PrewriteRequest, PrewriteResponse};
use super::reads::KvEntry;
use super::storage::Storage;
use super::txn_status::{TxnStatus, lock_expired};

/// How a transaction commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    TwoPc,
    AsyncCommit,
    OnePc,
}

/// Settings of a [`TxnClient`].
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// TTL of the locks a transaction takes: after it (in TSO physical time from the start_ts),
    /// another transaction may roll the transaction back. Longer = slower recovery from a dead
    /// coordinator; shorter = live but slow transactions get rolled back.
    pub lock_ttl_ms: u64,
    /// How long a read or a prewrite waits for a live lock before failing with
    /// `LockWaitTimeout`.
    pub lock_wait_timeout: Duration,
    /// Longest sleep between two attempts while waiting for a lock.
    pub max_backoff: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            lock_ttl_ms: 3000,
            lock_wait_timeout: Duration::from_secs(10),
            max_backoff: Duration::from_millis(50),
        }
    }
}

/// The outcome of resolving one lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolveOutcome {
    /// The lock is gone (committed or rolled back): retry the read.
    Resolved,
    /// Its transaction may still be running: back off, then retry.
    Alive,
}

/// A committed transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    pub start_ts: u64,
    pub commit_ts: u64,
    /// The mode it actually committed in (1PC falls back to 2PC across shards).
    pub mode: Mode,
}

/// Where [`Transaction::commit_stopping_after`] stops, as if the coordinator died there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitStage {
    /// Every prewrite landed; nothing committed.
    Prewritten,
    /// The primary's commit record is written (2PC), or the primary is committed (async).
    PrimaryCommitted,
}

/// A transaction whose coordinator stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Abandoned {
    pub start_ts: u64,
    pub mode: Mode,
    /// `Some(commit_ts)` if the transaction is committed even though its coordinator stopped
    /// (async commit after every prewrite, 1PC, 2PC after the primary); resolvers will finish
    /// it at this commit_ts. `None`: it is not committed and resolvers will roll it back.
    pub committed_at: Option<u64>,
}

/// The client side of transactions over one [`Storage`]. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TxnClient {
    storage: Arc<Storage>,
    opts: ClientOptions,
}

impl TxnClient {
    pub fn new(storage: Arc<Storage>) -> TxnClient {
        TxnClient::with_options(storage, ClientOptions::default())
    }

    pub fn with_options(storage: Arc<Storage>, opts: ClientOptions) -> TxnClient {
        TxnClient { storage, opts }
    }

    pub fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    pub fn options(&self) -> &ClientOptions {
        &self.opts
    }

    /// A fresh timestamp from the TSO.
    pub fn current_ts(&self) -> Result<u64> {
        Ok(self.storage.tso().get_ts()?)
    }

    /// A new transaction reading at a fresh start_ts.
    pub fn begin(&self) -> Result<Transaction> {
        Ok(Transaction {
            client: self.clone(),
            start_ts: self.current_ts()?,
            mutations: BTreeMap::new(),
        })
    }

    /// The value of `key` at `ts`, resolving locks on the way.
    pub fn get(&self, key: &[u8], ts: u64) -> Result<Option<Vec<u8>>> {
        Ok(self.get_entry(key, ts)?.map(|e| e.value))
    }

    /// Like [`TxnClient::get`], with the commit_ts of the version read.
    pub fn get_entry(&self, key: &[u8], ts: u64) -> Result<Option<KvEntry>> {
        self.with_lock_resolution(ts, || self.storage.get(key, ts, &[]))
    }

    /// Up to `limit` (0 = all) keys of `[start, end)` at `ts`, resolving locks on the way.
    pub fn scan(&self, start: &[u8], end: &[u8], limit: usize, ts: u64) -> Result<Vec<KvEntry>> {
        self.with_lock_resolution(ts, || self.storage.scan(start, end, limit, ts, false))
    }

    /// Runs `op` until it does not fail with `KeyIsLocked`, resolving each lock met.
    fn with_lock_resolution<T>(
        &self,
        caller_start_ts: u64,
        mut op: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        let started = Instant::now();
        let mut backoff = Duration::from_millis(1);
        loop {
            let lock = match op() {
                Err(TxnError::KeyIsLocked(lock)) => lock,
                other => return other,
            };
            let outcome = self.resolve_locks_for_read(&lock, caller_start_ts)?;
            if started.elapsed() >= self.opts.lock_wait_timeout {
                return Err(TxnError::LockWaitTimeout {
                    key: lock.key.clone(),
                    lock_start_ts: lock.start_ts,
                    waited_ms: started.elapsed().as_millis() as u64,
                });
            }
            if outcome == ResolveOutcome::Alive {
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(self.opts.max_backoff);
            }
        }
    }

    /// Resolves the lock a reader (or writer) at `caller_start_ts` met: see the module docs.
    pub fn resolve_locks_for_read(
        &self,
        lock: &LockInfo,
        caller_start_ts: u64,
    ) -> Result<ResolveOutcome> {
        let current_ts = self.current_ts()?;
        let expired = lock_expired(lock.start_ts, lock.ttl_ms, current_ts);
        let status = self.storage.check_txn_status(
            &lock.primary,
            lock.start_ts,
            caller_start_ts,
            current_ts,
            expired,
        )?;
        match status {
            TxnStatus::Committed { commit_ts } => {
                self.storage.resolve_lock(
                    lock.start_ts,
                    commit_ts,
                    std::slice::from_ref(&lock.key),
                )?;
                Ok(ResolveOutcome::Resolved)
            }
            TxnStatus::RolledBack | TxnStatus::LockNotExistRolledBack => {
                self.storage
                    .resolve_lock(lock.start_ts, 0, std::slice::from_ref(&lock.key))?;
                Ok(ResolveOutcome::Resolved)
            }
            TxnStatus::Locked {
                lock: primary_lock,
                ttl_expired: true,
            } => {
                self.resolve_async_commit(&lock.primary, &primary_lock)?;
                Ok(ResolveOutcome::Resolved)
            }
            TxnStatus::Locked { .. } | TxnStatus::LockNotExist => Ok(ResolveOutcome::Alive),
        }
    }

    /// Decides an async-commit transaction whose primary lock expired: committed iff every
    /// secondary is still locked (or one is committed); then resolves every key.
    fn resolve_async_commit(&self, primary: &[u8], primary_lock: &Lock) -> Result<()> {
        let start_ts = primary_lock.start_ts;
        let secondaries = primary_lock.secondaries.clone().unwrap_or_default();
        let commit_ts = if secondaries.is_empty() {
            primary_lock.min_commit_ts
        } else {
            let st = self.storage.check_secondary_locks(&secondaries, start_ts)?;
            match st.commit_ts {
                Some(c) => c,
                None if st.all_locked => st.min_commit_ts.max(primary_lock.min_commit_ts),
                None => 0,
            }
        };
        let mut keys = Vec::with_capacity(secondaries.len() + 1);
        keys.push(primary.to_vec());
        keys.extend(secondaries);
        self.storage.resolve_lock(start_ts, commit_ts, &keys)?;
        Ok(())
    }

    /// Resolves every lock in `[start, end)` (empty end = unbounded), waiting for live ones
    /// to expire, e.g. after a restart left the locks of dead coordinators behind. Returns how
    /// many locks it resolved; fails with `LockWaitTimeout` if locks remain after `timeout`.
    pub fn resolve_locks_in_range(
        &self,
        start: &[u8],
        end: &[u8],
        timeout: Duration,
    ) -> Result<usize> {
        let started = Instant::now();
        let mut resolved = 0;
        loop {
            let locks = self.storage.scan_locks(start, end, u64::MAX, 0)?;
            let Some(first) = locks.first() else {
                return Ok(resolved);
            };
            let caller = self.current_ts()?;
            let mut alive = false;
            for lock in &locks {
                match self.resolve_locks_for_read(lock, caller)? {
                    ResolveOutcome::Resolved => resolved += 1,
                    ResolveOutcome::Alive => alive = true,
                }
            }
            if alive {
                if started.elapsed() >= timeout {
                    return Err(TxnError::LockWaitTimeout {
                        key: first.key.clone(),
                        lock_start_ts: first.start_ts,
                        waited_ms: started.elapsed().as_millis() as u64,
                    });
                }
                std::thread::sleep(self.opts.max_backoff);
            }
        }
    }
}

/// A transaction being built: buffered writes over a snapshot at `start_ts`.
#[derive(Debug)]
pub struct Transaction {
    client: TxnClient,
    start_ts: u64,
    /// Buffered mutations by key (the first key is the primary).
    mutations: BTreeMap<Vec<u8>, Mutation>,
}

impl Transaction {
    pub fn start_ts(&self) -> u64 {
        self.start_ts
    }

    /// The value of `key` as this transaction sees it: its own buffered write, else the
    /// snapshot at start_ts.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.mutations.get(key).map(|m| m.op) {
            Some(MutationOp::Put) => Ok(Some(self.mutations[key].value.clone())),
            Some(MutationOp::Delete) => Ok(None),
            Some(MutationOp::Lock) | None => self.client.get(key, self.start_ts),
        }
    }

    pub fn set(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        let m = Mutation::put(key, value);
        self.mutations.insert(m.key.clone(), m);
    }

    pub fn delete(&mut self, key: impl Into<Vec<u8>>) {
        let m = Mutation::delete(key);
        self.mutations.insert(m.key.clone(), m);
    }

    /// Makes the commit conflict with any write to `key` since start_ts, without writing it
    /// (a no-op if the transaction already writes the key).
    pub fn lock_key(&mut self, key: impl Into<Vec<u8>>) {
        let m = Mutation::lock(key);
        self.mutations.entry(m.key.clone()).or_insert(m);
    }

    /// The buffered mutations, in key order.
    pub fn mutations(&self) -> impl Iterator<Item = &Mutation> {
        self.mutations.values()
    }

    /// Commits. A transaction without writes commits trivially at its start_ts.
    pub fn commit(self, mode: Mode) -> Result<Committed> {
        let start_ts = self.start_ts;
        match self.run_commit(mode, None)? {
            Progress::Done(c) => Ok(c),
            Progress::Stopped(a) => Err(TxnError::InvalidRequest {
                what: format!(
                    "commit: expected to finish, found it stopped start_ts={start_ts} mode={:?}",
                    a.mode
                ),
            }),
        }
    }

    /// Runs the commit up to `stage` and stops, leaving its locks behind as a coordinator that
    /// died there would: for crash and lock-resolution tests. A 1PC commit has no stage to stop
    /// at and completes.
    pub fn commit_stopping_after(self, mode: Mode, stage: CommitStage) -> Result<Abandoned> {
        match self.run_commit(mode, Some(stage))? {
            Progress::Done(c) => Ok(Abandoned {
                start_ts: c.start_ts,
                mode: c.mode,
                committed_at: Some(c.commit_ts),
            }),
            Progress::Stopped(a) => Ok(a),
        }
    }

    fn run_commit(self, mode: Mode, stop: Option<CommitStage>) -> Result<Progress> {
        let start_ts = self.start_ts;
        let client = self.client;
        let storage = &client.storage;
        let mutations: Vec<Mutation> = self.mutations.into_values().collect();
        let Some(first) = mutations.first() else {
            return Ok(Progress::Done(Committed {
                start_ts,
                commit_ts: start_ts,
                mode,
            }));
        };
        let primary = first.key.clone();
        let keys: Vec<Vec<u8>> = mutations.iter().map(|m| m.key.clone()).collect();
        let try_one_pc = mode == Mode::OnePc && {
            let shard = storage.shard_for_key(&primary)?;
            let mut same = true;
            for k in &keys[1..] {
                same &= storage.shard_for_key(k)? == shard;
            }
            same
        };
        let use_async_commit = mode == Mode::AsyncCommit;
        let req = PrewriteRequest {
            txn_size: mutations.len() as u64,
            mutations,
            primary: primary.clone(),
            start_ts,
            lock_ttl_ms: client.opts.lock_ttl_ms,
            use_async_commit,
            secondaries: if use_async_commit {
                keys[1..].to_vec()
            } else {
                Vec::new()
            },
            try_one_pc,
            max_commit_ts: 0,
        };
        let resp = client.prewrite_resolving(&req, &keys)?;
        if let Some(commit_ts) = resp.one_pc_commit_ts {
            return Ok(Progress::Done(Committed {
                start_ts,
                commit_ts,
                mode: Mode::OnePc,
            }));
        }
        let mode = if use_async_commit {
            Mode::AsyncCommit
        } else {
            Mode::TwoPc
        };
        if mode == Mode::AsyncCommit {
            // Committed now: every key is prewritten.
            let commit_ts = resp.min_commit_ts;
            if stop == Some(CommitStage::Prewritten) {
                return Ok(Progress::Stopped(Abandoned {
                    start_ts,
                    mode,
                    committed_at: Some(commit_ts),
                }));
            }
            let to_commit = if stop == Some(CommitStage::PrimaryCommitted) {
                &keys[..1]
            } else {
                &keys[..]
            };
            if let Err(e) = storage.commit(to_commit, start_ts, commit_ts) {
                // Resolvers finish it; the transaction is committed either way.
                tracing::warn!(error = %e, start_ts, commit_ts, "async commit: committing keys failed");
            }
            return Ok(match stop {
                Some(_) => Progress::Stopped(Abandoned {
                    start_ts,
                    mode,
                    committed_at: Some(commit_ts),
                }),
                None => Progress::Done(Committed {
                    start_ts,
                    commit_ts,
                    mode,
                }),
            });
        }
        if stop == Some(CommitStage::Prewritten) {
            return Ok(Progress::Stopped(Abandoned {
                start_ts,
                mode,
                committed_at: None,
            }));
        }
        let commit_ts = client.current_ts()?.max(resp.min_commit_ts);
        if let Err(e) = storage.commit(std::slice::from_ref(&primary), start_ts, commit_ts) {
            if e.kind() == TxnErrorKind::TxnFinished {
                // Rolled back by a resolver: clean up the secondaries too.
                client.abort(&keys[1..], start_ts);
            }
            return Err(e);
        }
        if stop == Some(CommitStage::PrimaryCommitted) {
            return Ok(Progress::Stopped(Abandoned {
                start_ts,
                mode,
                committed_at: Some(commit_ts),
            }));
        }
        if keys.len() > 1
            && let Err(e) = storage.commit(&keys[1..], start_ts, commit_ts)
        {
            tracing::warn!(error = %e, start_ts, commit_ts, "2pc: committing secondaries failed");
        }
        Ok(Progress::Done(Committed {
            start_ts,
            commit_ts,
            mode,
        }))
    }
}

enum Progress {
    Done(Committed),
    Stopped(Abandoned),
}

impl TxnClient {
    /// Prewrites, resolving locks in the way; on any other failure rolls back every key of
    /// the transaction (best effort) and returns the failure.
    fn prewrite_resolving(
        &self,
        req: &PrewriteRequest,
        keys: &[Vec<u8>],
    ) -> Result<PrewriteResponse> {
        let result = self.with_lock_resolution(req.start_ts, || self.storage.prewrite(req));
        if let Err(e) = &result {
            tracing::debug!(error = %e, start_ts = req.start_ts, "prewrite failed: rolling back");
            self.abort(keys, req.start_ts);
        }
        result
    }

    /// Rolls back `keys` of transaction `start_ts`, logging a failure: whatever is left is a
    /// lock that resolvers roll back after its TTL.
    fn abort(&self, keys: &[Vec<u8>], start_ts: u64) {
        if keys.is_empty() {
            return;
        }
        if let Err(e) = self.storage.rollback(keys, start_ts) {
            tracing::warn!(error = %e, start_ts, "rollback after a failed commit failed");
        }
    }
}
