//! Resolving a lock a coprocessor read met, over the servers' transaction API, the same
//! protocol as the server's own `TxnClient::resolve_locks_for_read`:
//!
//! 1. a fresh `current_ts` from the TSO; the met lock expired iff its TTL (milliseconds from
//!    the physical part of its start_ts) passed by then;
//! 2. `POST /txn/check_txn_status` at the leader of the lock's **primary** key (with
//!    `rollback_if_not_exist` once the met lock expired, so a primary whose prewrite never
//!    landed is rolled back and can never land);
//! 3. committed → `POST /txn/resolve_lock` commits the met key at the commit_ts; rolled back
//!    (now or before) → it rolls the key back; an async-commit primary past its TTL →
//!    `check_secondary_locks` on every listed secondary (grouped by region): one committed, or
//!    all still locked → commit every key (at the max min_commit_ts when all are locked),
//!    otherwise roll every key back; a live primary → [`ResolveOutcome::Alive`]: the caller
//!    backs off and retries the read.
//!
//! Resolution is idempotent: two readers resolving the same lock reach the same decision,
//! because the primary decides (for async commit: the primary, then the secondaries it lists,
//! each missing one rolled back as it is checked, so the first party to check fixes the
//! answer). So every command goes through [`Router::send_by_region`]: a command a leader change
//! cut off is simply sent again to the new leader.
//!
//! The SQL writer, when it cannot know whether all its async-commit prewrites landed, decides
//! its own transaction with the same code ([`LockResolver::decide_async_commit`], which ends
//! in the resolver's own decision over the secondaries), so it and every resolver agree.

use std::time::Duration;

use types::Ts;
use wire::coprocessor::LockInfo;
use wire::paths;
use wire::region::{TsoRequest, TsoResponse};
use wire::txn::{
    CheckSecondaryLocksRequest, CheckSecondaryLocksResponse, CheckTxnStatusRequest,
    CheckTxnStatusResponse, KeyError, ResolveLockRequest, ResolveLockResponse, TxnState,
};

use crate::backoff::{Backoff, RetryReason};
use crate::error::{Error, Result};
use crate::region_rpc::Router;

/// What became of one lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolveOutcome {
    /// The lock is gone (committed or rolled back): retry the read.
    Resolved,
    /// Its transaction may still be running: back off, then retry.
    Alive,
}

/// What became of an async-commit transaction whose coordinator was in doubt
/// ([`LockResolver::decide_async_commit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncCommitFate {
    /// Committed (every key was prewritten), at `commit_ts`; its keys are committed now.
    Committed { commit_ts: u64 },
    /// Rolled back; its keys are rolled back now, and no late prewrite of it can land.
    RolledBack,
}

/// Whether a lock taken at `lock_ts` with `ttl_ms` has expired by `current_ts`: the TTL counts
/// physical milliseconds ([`Ts::physical_millis`], the layout the server's TSO issues).
pub fn lock_expired(lock_ts: u64, ttl_ms: u64, current_ts: u64) -> bool {
    Ts(current_ts).physical_millis() >= Ts(lock_ts).physical_millis().saturating_add(ttl_ms)
}

/// Where an entry node's timestamps come from.
#[derive(Debug)]
pub enum TsoSource {
    /// The storage server running the TSO (its base URL).
    Server(String),
    /// The placement driver (`pd-endpoints`).
    Pd(node::PdClient),
}

pub struct LockResolver<'a> {
    pub(crate) router: Router<'a>,
    /// Where timestamps come from.
    pub tso: &'a TsoSource,
    /// The budget of each command, retries included.
    pub request_timeout: Duration,
}

impl LockResolver<'_> {
    /// A fresh timestamp. From a TSO server, a refused connection (it is restarting) is
    /// retried until the deadline; the placement driver's client follows its leader itself.
    pub async fn current_ts(&self) -> Result<u64> {
        let tso_server = match self.tso {
            TsoSource::Server(url) => url.as_str(),
            TsoSource::Pd(pd) => {
                return pd.get_ts().await.map_err(|e| Error::TxnCommand {
                    command: "tso",
                    message: e.to_string(),
                });
            }
        };
        let mut backoff = Backoff::new(self.request_timeout);
        let r: TsoResponse = loop {
            let sent = self
                .router
                .transport
                .post(
                    tso_server,
                    paths::TSO,
                    &TsoRequest { count: 1 },
                    "tso response",
                )
                .await;
            match sent {
                Err(e) if e.is_connection() => {
                    backoff.wait(RetryReason::Connection, e.to_string()).await?;
                }
                r => break r?,
            }
        };
        if !r.error.is_empty() {
            return Err(Error::TxnCommand {
                command: "tso",
                message: r.error,
            });
        }
        Ok(r.first_ts)
    }

    /// Resolves `lock`, met by a reader at `caller_start_ts` (see the module docs).
    pub async fn resolve(&self, lock: &LockInfo, caller_start_ts: u64) -> Result<ResolveOutcome> {
        let current_ts = self.current_ts().await?;
        let expired = lock_expired(lock.lock_version, lock.lock_ttl, current_ts);
        let status = self
            .txn_status(
                &lock.primary_lock,
                lock.lock_version,
                current_ts,
                expired,
                caller_start_ts,
            )
            .await?;
        let met_key = std::slice::from_ref(&lock.key);
        match TxnState::try_from(status.state).unwrap_or(TxnState::Unknown) {
            TxnState::Committed => {
                self.resolve_keys(lock.lock_version, status.commit_ts, met_key)
                    .await?;
                Ok(ResolveOutcome::Resolved)
            }
            TxnState::RolledBack | TxnState::LockNotExistRolledBack => {
                self.resolve_keys(lock.lock_version, 0, met_key).await?;
                Ok(ResolveOutcome::Resolved)
            }
            TxnState::Locked if status.ttl_expired => {
                let primary_min = status.lock.as_ref().map_or(0, |l| l.min_commit_ts);
                self.settle_async_commit(
                    &lock.primary_lock,
                    lock.lock_version,
                    primary_min,
                    status.secondaries,
                )
                .await?;
                Ok(ResolveOutcome::Resolved)
            }
            TxnState::Locked | TxnState::LockNotExist => Ok(ResolveOutcome::Alive),
            TxnState::Unknown => Err(unknown_state(status.state)),
        }
    }

    /// Decides async-commit transaction `start_ts` (primary `primary`, every other key in
    /// `secondaries`) for a coordinator that does not know whether all its prewrites landed,
    /// and commits or rolls back every key accordingly (see `sql::txn_write`). The decision
    /// is a resolver's, without waiting for the TTL: `check_txn_status` on the primary with
    /// `rollback_if_not_exist` (a primary prewrite still on its way can then never land), then,
    /// while the primary is locked, the resolver's decision over the secondaries, which leaves a
    /// rollback marker on every secondary whose lock is missing. Whatever it answers, every
    /// other party that decides the transaction later answers the same.
    pub async fn decide_async_commit(
        &self,
        primary: &[u8],
        start_ts: u64,
        secondaries: &[Vec<u8>],
    ) -> Result<AsyncCommitFate> {
        // current_ts 0: a TTL never counts as expired here (an async-commit lock is never
        // rolled back by check_txn_status anyway); caller_start_ts 0: no reader to make room
        // for.
        let status = self.txn_status(primary, start_ts, 0, true, 0).await?;
        let mut keys = Vec::with_capacity(secondaries.len() + 1);
        keys.push(primary.to_vec());
        keys.extend(secondaries.iter().cloned());
        match TxnState::try_from(status.state).unwrap_or(TxnState::Unknown) {
            TxnState::Committed => {
                self.resolve_keys(start_ts, status.commit_ts, &keys).await?;
                Ok(AsyncCommitFate::Committed {
                    commit_ts: status.commit_ts,
                })
            }
            TxnState::RolledBack | TxnState::LockNotExistRolledBack => {
                self.resolve_keys(start_ts, 0, &keys).await?;
                Ok(AsyncCommitFate::RolledBack)
            }
            TxnState::Locked => match status.lock {
                Some(lock) if lock.use_async_commit => {
                    self.settle_async_commit(
                        primary,
                        start_ts,
                        lock.min_commit_ts,
                        secondaries.to_vec(),
                    )
                    .await
                }
                _ => Err(Error::TxnCommand {
                    command: "check_txn_status",
                    message: format!(
                        "expected the async-commit lock of the primary, found another: \
                         start_ts={start_ts}"
                    ),
                }),
            },
            // rollback_if_not_exist never leaves the primary without lock or record.
            TxnState::LockNotExist | TxnState::Unknown => Err(unknown_state(status.state)),
        }
    }

    /// `check_txn_status` of transaction `start_ts` at the leader of its primary key (public
    /// for a caller deciding a transaction whose outcome it could not learn, e.g. after
    /// [`crate::sql::SqlError::Undetermined`]: with `rollback_if_not_exist` and a fresh
    /// `current_ts` the answer is final unless the primary is still locked).
    pub async fn txn_status(
        &self,
        primary: &[u8],
        start_ts: u64,
        current_ts: u64,
        rollback_if_not_exist: bool,
        caller_start_ts: u64,
    ) -> Result<CheckTxnStatusResponse> {
        let mut backoff = Backoff::new(self.request_timeout);
        let transport = self.router.transport;
        let answers: Vec<CheckTxnStatusResponse> = self
            .router
            .send_by_region(
                vec![primary.to_vec()],
                &mut backoff,
                |server, mut keys| async move {
                    let req = CheckTxnStatusRequest {
                        primary: keys.pop().unwrap_or_default(),
                        lock_ts: start_ts,
                        current_ts,
                        rollback_if_not_exist,
                        caller_start_ts,
                    };
                    transport
                        .post(
                            &server,
                            paths::CHECK_TXN_STATUS,
                            &req,
                            "check_txn_status response",
                        )
                        .await
                },
            )
            .await?;
        let status = answers
            .into_iter()
            .next()
            .ok_or_else(|| Error::TxnCommand {
                command: "check_txn_status",
                message: "no answer".into(),
            })?;
        check("check_txn_status", status.error.as_ref())?;
        Ok(status)
    }

    /// Decides an async-commit transaction whose primary still holds its lock (the one
    /// decision of a resolver and of a coordinator in doubt): `check_secondary_locks` on every
    /// secondary (grouped by region; a missing lock is rolled back there, so its prewrite can
    /// never land): one committed → committed at its commit_ts; all locked → committed at the
    /// max min_commit_ts, the primary's included; otherwise rolled back. Then commits or rolls
    /// back every key.
    async fn settle_async_commit(
        &self,
        primary: &[u8],
        start_ts: u64,
        primary_min_commit_ts: u64,
        secondaries: Vec<Vec<u8>>,
    ) -> Result<AsyncCommitFate> {
        let commit_ts = if secondaries.is_empty() {
            primary_min_commit_ts
        } else {
            let mut backoff = Backoff::new(self.request_timeout);
            let transport = self.router.transport;
            let answers: Vec<CheckSecondaryLocksResponse> = self
                .router
                .send_by_region(
                    secondaries.clone(),
                    &mut backoff,
                    |server, keys| async move {
                        transport
                            .post(
                                &server,
                                paths::CHECK_SECONDARY_LOCKS,
                                &CheckSecondaryLocksRequest { keys, start_ts },
                                "check_secondary_locks response",
                            )
                            .await
                    },
                )
                .await?;
            let mut all_locked = true;
            let mut committed = None;
            let mut min_commit_ts = primary_min_commit_ts;
            for r in answers {
                check("check_secondary_locks", r.error.as_ref())?;
                if r.commit_ts > 0 {
                    committed = Some(r.commit_ts);
                    break;
                }
                all_locked &= r.all_locked;
                min_commit_ts = min_commit_ts.max(r.min_commit_ts);
            }
            match committed {
                Some(c) => c,
                None if all_locked => min_commit_ts,
                None => 0,
            }
        };
        let mut keys = Vec::with_capacity(secondaries.len() + 1);
        keys.push(primary.to_vec());
        keys.extend(secondaries);
        self.resolve_keys(start_ts, commit_ts, &keys).await?;
        Ok(match commit_ts {
            0 => AsyncCommitFate::RolledBack,
            commit_ts => AsyncCommitFate::Committed { commit_ts },
        })
    }

    /// Commits (`commit_ts > 0`) or rolls back the locks of `start_ts` on `keys`, at each
    /// key's region leader.
    async fn resolve_keys(&self, start_ts: u64, commit_ts: u64, keys: &[Vec<u8>]) -> Result<()> {
        let mut backoff = Backoff::new(self.request_timeout);
        let transport = self.router.transport;
        let answers: Vec<ResolveLockResponse> = self
            .router
            .send_by_region(keys.to_vec(), &mut backoff, |server, keys| async move {
                let req = ResolveLockRequest {
                    start_ts,
                    commit_ts,
                    keys,
                    ..ResolveLockRequest::default()
                };
                transport
                    .post(&server, paths::RESOLVE_LOCK, &req, "resolve_lock response")
                    .await
            })
            .await?;
        for r in answers {
            check("resolve_lock", r.error.as_ref())?;
        }
        Ok(())
    }
}

fn unknown_state(state: i32) -> Error {
    Error::TxnCommand {
        command: "check_txn_status",
        message: format!("unknown transaction state: state={state}"),
    }
}

fn check(command: &'static str, e: Option<&KeyError>) -> Result<()> {
    match e {
        None => Ok(()),
        Some(e) => Err(Error::TxnCommand {
            command,
            message: format!("kind={} {}", e.kind, e.message),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_expires_once_its_ttl_passed_in_physical_time() {
        let ts = |ms: u64, logical: u64| Ts::compose(ms, logical).get();
        assert!(!lock_expired(ts(1000, 5), 100, ts(1099, 9)));
        assert!(lock_expired(ts(1000, 5), 100, ts(1100, 0)));
        assert!(lock_expired(ts(1000, 0), 0, ts(1000, 0)));
    }
}
