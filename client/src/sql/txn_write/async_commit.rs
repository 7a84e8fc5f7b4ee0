//! Async commit of a statement whose keys span several regions (TiKV's and client-go's
//! protocol; the servers' side is `server::txn::{prewrite, txn_status}`).
//!
//! Every prewrite carries `use_async_commit` and the primary key; the one that carries the
//! primary also carries every other key (the secondaries), which the server stores in the
//! primary's lock. Each server fixes each lock's `min_commit_ts` above every read it has
//! served of the key (its `max_ts`, synced from the TSO when a region gets a new leader). The
//! prewrites go out region by region, the primary's first.
//!
//! **The commit point is "every key locked".** Once every prewrite landed the transaction is
//! committed, at `commit_ts` = the max `min_commit_ts` over all the answers, whoever finishes
//! it: the statement is acknowledged then, and commits every key at that commit_ts (a failure
//! there is a warning: a resolver that meets a lock finishes it at the same commit_ts, since
//! `check_secondary_locks` finds every key locked). No TSO call, no commit round trip before
//! the acknowledgement: that is the point.
//!
//! **Under the schema lease** every prewrite carries `max_commit_ts` (the lease's end): a
//! server refuses (`CommitTsTooLarge`) to write a lock whose `min_commit_ts` would pass it, so
//! every lock that exists is at or below it, and so is any commit_ts decided from them, by the
//! writer or by a resolver. A refusal is [`SqlError::SchemaLeaseExpired`]: the statement runs
//! again locking its catalog row.
//!
//! **The danger: a prewrite whose outcome is unknown.** An answer lost at the deadline, or a
//! prewrite the region driver had to send again (a broken connection, a leader change: the
//! first try may have landed), leaves the writer not knowing whether all locks exist. Rolling
//! the primary back then could break atomicity: if every lock had landed, a resolver (a
//! reader past the TTL) may already have found them all and committed some keys, and a
//! rollback of the others would leave the statement half-applied. A "definitive" refusal
//! after such a re-send is no proof either: the retried key may have been committed by a
//! resolver and written again by someone else (a write conflict), or found committed
//! (`TxnFinished`). So whenever any prewrite's outcome was unknown, the writer decides as a
//! resolver does ([`crate::lock_resolver::LockResolver::decide_async_commit`], the same code):
//! `check_txn_status` on the primary with `rollback_if_not_exist` (a late primary prewrite
//! can no longer land), then `check_secondary_locks` on every secondary (each missing lock
//! gets a rollback marker, so a late secondary prewrite cannot land either); all locked (or
//! one committed) → committed, the keys are committed and the statement is acknowledged;
//! otherwise → rolled back, the keys are rolled back and the statement fails with the
//! prewrite's error. The first party to check fixes the answer for everyone. If the decision
//! itself cannot be made, [`SqlError::Undetermined`].
//!
//! A prewrite refused definitively (a write conflict, another transaction's lock, a busy
//! server) on its first try, after every earlier prewrite was answered on its first try, is
//! the common failure: the refused keys are not locked and never will be, so the transaction
//! can never be "all locked", and every key is rolled back as in 2PC.

use std::sync::atomic::{AtomicUsize, Ordering};

use wire::paths;
use wire::txn::{ErrorKind, KeyError, Mutation, PrewriteRequest, PrewriteResponse};

use super::{
    CommitMode, LOCK_TTL_MS, Result, SqlError, WriteOutcome, first_error, prewrite_error, rollback,
    send_commit, txn_err,
};
use crate::error::Error;
use crate::lock_resolver::AsyncCommitFate;
use crate::paging::Client;

/// Why the prewrites did not all succeed.
enum Failure {
    /// A prewrite answered this error.
    Refused(KeyError),
    /// A prewrite got no answer in time (or no usable one).
    Lost(Error),
}

impl Failure {
    /// The statement's error, once the transaction is known rolled back.
    async fn into_error(self, client: &Client, start_ts: u64, statement: &'static str) -> SqlError {
        match self {
            Failure::Refused(e) => prewrite_error(client, &e, start_ts, statement).await,
            Failure::Lost(e) => e.into(),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused(e) => write!(f, "kind={} {}", e.kind, e.message),
            Failure::Lost(e) => write!(f, "{e}"),
        }
    }
}

/// Writes `groups` (the mutations by region, the primary's group first) with async commit
/// (see the module docs).
pub(super) async fn write(
    client: &Client,
    groups: &[Vec<Mutation>],
    primary: &[u8],
    start_ts: u64,
    max_commit_ts: u64,
    statement: &'static str,
) -> Result<WriteOutcome> {
    let keys: Vec<Vec<u8>> = groups
        .iter()
        .flat_map(|g| g.iter().map(|m| m.key.clone()))
        .collect();
    let rows = keys.len() as u64;
    let secondaries: Vec<Vec<u8>> = keys.iter().filter(|k| *k != primary).cloned().collect();
    let router = client.router();
    let transport = client.transport();
    let mut commit_ts = start_ts + 1;
    // Some prewrite may have landed without this writer knowing.
    let mut in_doubt = false;
    for (i, group) in groups.iter().enumerate() {
        let sends = AtomicUsize::new(0);
        let prewrite = |server: String, mutations: Vec<Mutation>| {
            sends.fetch_add(1, Ordering::Relaxed);
            let has_primary = mutations.iter().any(|m| m.key == primary);
            let req = PrewriteRequest {
                mutations,
                primary: primary.to_vec(),
                start_ts,
                lock_ttl_ms: LOCK_TTL_MS,
                txn_size: rows,
                use_async_commit: true,
                secondaries: if has_primary {
                    secondaries.clone()
                } else {
                    Vec::new()
                },
                try_one_pc: false,
                max_commit_ts,
            };
            async move {
                transport
                    .post::<_, PrewriteResponse>(
                        &server,
                        paths::PREWRITE,
                        &req,
                        "prewrite response",
                    )
                    .await
            }
        };
        let mut backoff = client.backoff();
        let sent = router
            .send_by_region(group.clone(), &mut backoff, prewrite)
            .await;
        let failure = match sent {
            Ok(answers) => {
                // More sends than answers: a try was sent again, and may have landed.
                in_doubt |= sends.load(Ordering::Relaxed) > answers.len();
                match first_error(&answers) {
                    None => {
                        for r in &answers {
                            commit_ts = commit_ts.max(r.min_commit_ts);
                        }
                        continue;
                    }
                    Some(e) => {
                        // A finished transaction on a first try is no answer to trust either.
                        in_doubt |= e.kind == ErrorKind::TxnFinished as i32;
                        Failure::Refused(e.clone())
                    }
                }
            }
            Err(e) => {
                in_doubt = true;
                Failure::Lost(e)
            }
        };
        if !in_doubt {
            rollback(client, &groups[..=i], start_ts).await;
            return Err(failure.into_error(client, start_ts, statement).await);
        }
        return decide(client, primary, &secondaries, start_ts, statement, failure).await;
    }
    // Every key is locked: committed at commit_ts, acknowledged from here on.
    let mut warnings = Vec::new();
    match send_commit(client, keys, start_ts, commit_ts).await {
        Ok(answers) => {
            if let Some(e) = first_error(&answers) {
                warnings.push(commit_warning(statement, commit_ts, &txn_err("commit", e)));
            }
        }
        Err(e) => warnings.push(commit_warning(statement, commit_ts, &e)),
    }
    Ok(WriteOutcome {
        rows,
        mode: CommitMode::AsyncCommit,
        commit_ts: Some(commit_ts),
        warnings,
    })
}

fn commit_warning(statement: &str, commit_ts: u64, e: &dyn std::fmt::Display) -> String {
    format!(
        "{statement} committed (async commit), but committing its keys failed (readers \
         resolve its locks): commit_ts={commit_ts} error={e}"
    )
}

/// The statement's outcome when a prewrite failed after some prewrite's outcome became
/// unknown: decided as a resolver decides (see the module docs).
async fn decide(
    client: &Client,
    primary: &[u8],
    secondaries: &[Vec<u8>],
    start_ts: u64,
    statement: &'static str,
    failure: Failure,
) -> Result<WriteOutcome> {
    let rows = secondaries.len() as u64 + 1;
    match client
        .lock_resolver()
        .decide_async_commit(primary, start_ts, secondaries)
        .await
    {
        Ok(AsyncCommitFate::Committed { commit_ts }) => {
            tracing::info!(
                statement,
                start_ts,
                commit_ts,
                prewrite = %failure,
                "an async-commit statement in doubt had every key locked: committed"
            );
            Ok(WriteOutcome {
                rows,
                mode: CommitMode::AsyncCommit,
                commit_ts: Some(commit_ts),
                warnings: vec![format!(
                    "{statement} committed, though a prewrite failed (every key was found \
                     locked): commit_ts={commit_ts} error={failure}"
                )],
            })
        }
        Ok(AsyncCommitFate::RolledBack) => {
            Err(failure.into_error(client, start_ts, statement).await)
        }
        Err(why) => {
            tracing::warn!(statement, start_ts, prewrite = %failure, decision = %why, "async commit outcome unknown");
            Err(SqlError::Undetermined {
                statement,
                start_ts,
            })
        }
    }
}
