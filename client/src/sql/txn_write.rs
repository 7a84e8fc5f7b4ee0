//! Writing one statement's rows as one transaction through the servers' txn API (shared by
//! INSERT, UPDATE and DELETE): a prewrite per region, sent to its leader, then the commit.
//! [`CommitMode::choose`] picks how:
//!
//! * **1PC** when the statement's keys fall in one region: the prewrite asks to commit in one
//!   phase (when that did not commit, 2PC goes on from there);
//! * **async commit** when the session's `tidb_enable_async_commit` is ON, the keys span
//!   several regions and number at most [`ASYNC_COMMIT_KEYS_LIMIT`] (TiDB's limit: the
//!   primary's lock lists every other key): see the `async_commit` module;
//! * **2PC** otherwise: the primary key's commit (the commit point, Percolator: the first
//!   mutation's key is the primary) and then the other keys' commits.
//!
//! Every command goes through the region driver (`region_rpc`): a leader change, an epoch
//! change or a refused connection re-sends it to the region's leader until the request's
//! deadline. Re-sending is safe because every command is idempotent, and two outcomes need care:
//!
//! * a retried 1PC prewrite answering `TxnFinished` with a `committed_ts`: the first try
//!   committed, so the statement did;
//! * a primary commit still failing at the deadline: its outcome is unknown, and a rollback of
//!   the primary decides (a `committed_ts` in its answer: committed, a warning; success: rolled
//!   back, the error). If the rollback fails too, [`SqlError::Undetermined`].
//!
//! A statement is thus either rolled back or committed when `write` returns (except
//! `Undetermined`), so the statement loop's re-run never meets its own rows.
//!
//! The caller chooses the `start_ts`: UPDATE and DELETE read the rows they change at it, so a
//! row committed by someone else after that read makes the prewrite fail with a write
//! conflict ([`SqlError::WriteConflict`]) instead of being overwritten unseen.
//!
//! A lock of another transaction in the way of the prewrite is resolved as a reader resolves
//! one ([`crate::lock_resolver`]: rolled back once its TTL passed or its primary rolled back,
//! committed when its primary committed, left alone while alive) after this write rolled its
//! own keys back; the write then fails with [`SqlError::KeyLocked`], which the [`super::Engine`]
//! answers by running the whole statement again from a fresh timestamp.

mod async_commit;

use wire::paths;
use wire::txn::{
    CommandResponse, CommitRequest, ErrorKind, KeyError, Mutation, Op, PrewriteRequest,
    PrewriteResponse, RollbackRequest,
};

use super::{Result, SqlError};
use crate::error::Error;
use crate::lock_resolver::ResolveOutcome;
use crate::paging::Client;

/// Lock TTL of a statement's prewrite: how long a reader waits before it may roll back the
/// locks of a statement whose client died.
const LOCK_TTL_MS: u64 = 3_000;
/// The longest lock TTL a write gets ([`lock_ttl_ms`]).
const MAX_LOCK_TTL_MS: u64 = 120_000;

/// The lock TTL of a write of `bytes` (keys and values): [`LOCK_TTL_MS`] for a small one,
/// longer for a large one (TiDB's rule: 6 s per square root of its MiB, at most
/// [`MAX_LOCK_TTL_MS`]). A large transaction's prewrites take longer, and a reader must not
/// roll its primary back while it is still prewriting.
fn lock_ttl_ms(bytes: usize) -> u64 {
    let mib = bytes as f64 / (1024.0 * 1024.0);
    // A float of at most 6000 * sqrt(usize::MAX / 2^20): `as` saturates, never wraps.
    ((6000.0 * mib.sqrt()) as u64).clamp(LOCK_TTL_MS, MAX_LOCK_TTL_MS)
}

/// The most keys a statement commits with async commit (TiDB's
/// `tidb_async_commit_keys_limit` default): the primary's lock carries every other key, and
/// a resolver checks them all. A larger statement commits with 2PC.
pub const ASYNC_COMMIT_KEYS_LIMIT: usize = 256;

/// How a statement may commit: the session's choice ([`crate::Variables::commit_options`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitOptions {
    /// `tidb_enable_async_commit`: async commit for a statement over several regions.
    pub async_commit: bool,
    /// `Some(ts)`: the writes were encoded with table schemas known current at `ts` (read
    /// then, or checked then) without locking their catalog rows, so they must commit within
    /// [`SCHEMA_LEASE_MS`] of `ts` (see [`schema_lease_end`]); past it, nothing is written and
    /// the error is [`SqlError::SchemaLeaseExpired`] (an autocommit statement then runs again
    /// locking the catalog row, [`locked_catalog`]). An autocommit statement's `ts` is its
    /// `start_ts`; an explicit transaction's, the ts its `COMMIT` checked the schemas at.
    pub schema_lease: Option<u64>,
}

/// How long after its `start_ts` a statement that read a schema without locking it may
/// commit (TiDB's schema lease, in TSO milliseconds). `CREATE INDEX` waits this long after
/// publishing a new index before it reads the rows to backfill, so every statement that
/// wrote under the schema without the index has committed below the backfill's read
/// timestamp, or not at all: the backfill sees every row such a statement wrote.
///
/// The bound is enforced on commit timestamps, not clocks: a 2PC commit checks the commit
/// ts it took from the TSO, and a 1PC prewrite carries `max_commit_ts` (the server commits it
/// in one phase only at or below it), and an async-commit prewrite carries it too (the server
/// refuses to lock past it, so no resolver can commit the statement later than it).
pub const SCHEMA_LEASE_MS: u64 = 5_000;

/// How an autocommit statement keeps the schema it read: under the lease, or (after a try
/// that overran it) by locking the table's catalog row as a transaction does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaGuard {
    Lease,
    CatalogLock,
}

impl SchemaGuard {
    /// The extra write this guard needs for table `table`: the catalog row's lock, or none.
    pub fn write(self, table: &str) -> Option<RowWrite> {
        (self == SchemaGuard::CatalogLock).then(|| RowWrite::Lock {
            key: super::catalog::catalog_key(table),
        })
    }

    /// `opts` with this guard's lease setting, for a statement that read its schema at
    /// `start_ts`.
    pub fn options(self, opts: CommitOptions, start_ts: u64) -> CommitOptions {
        CommitOptions {
            schema_lease: (self == SchemaGuard::Lease).then_some(start_ts),
            ..opts
        }
    }
}

/// Runs an autocommit statement (`attempt`, from its start_ts on) under the schema lease,
/// and once more locking the catalog row when that try overran the lease.
pub async fn locked_catalog<T, F, Fut>(mut attempt: F) -> Result<T>
where
    F: FnMut(SchemaGuard) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    match attempt(SchemaGuard::Lease).await {
        Err(SqlError::SchemaLeaseExpired { .. }) => attempt(SchemaGuard::CatalogLock).await,
        other => other,
    }
}

/// The highest commit ts of writes encoded with schemas known current at `ts`.
pub fn schema_lease_end(ts: u64) -> u64 {
    ts.saturating_add(SCHEMA_LEASE_MS << types::Ts::LOGICAL_BITS)
}

/// How a statement commits (or committed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitMode {
    /// The prewrite commits (one region).
    OnePc,
    /// Prewrite, then commit the primary (the commit point), then the others.
    TwoPc,
    /// Prewrite with async commit: committed once every prewrite landed.
    AsyncCommit,
}

impl CommitMode {
    /// The mode to try for `keys` keys in `regions` regions: 1PC in one region (the fewest
    /// round trips, whatever the session says), async commit when the session asks for it and
    /// the statement is small enough ([`ASYNC_COMMIT_KEYS_LIMIT`]), 2PC otherwise.
    pub fn choose(regions: usize, keys: usize, opts: CommitOptions) -> CommitMode {
        if regions <= 1 {
            CommitMode::OnePc
        } else if opts.async_commit && keys <= ASYNC_COMMIT_KEYS_LIMIT {
            CommitMode::AsyncCommit
        } else {
            CommitMode::TwoPc
        }
    }
}

/// One key's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowWrite {
    /// Store `value` under `key` (a new row, or a row's new value).
    Put { key: Vec<u8>, value: Vec<u8> },
    /// Remove the row at `key`.
    Delete { key: Vec<u8> },
    /// Lock the row at `key` without changing it: a transaction that read it and depends on
    /// it staying as read (`SELECT ... FOR UPDATE`) conflicts with any other writer of it.
    Lock { key: Vec<u8> },
}

impl RowWrite {
    pub fn key(&self) -> &[u8] {
        match self {
            RowWrite::Put { key, .. } | RowWrite::Delete { key } | RowWrite::Lock { key } => key,
        }
    }

    fn mutation(&self) -> Mutation {
        match self {
            RowWrite::Put { key, value } => Mutation {
                op: Op::Put as i32,
                key: key.clone(),
                value: value.clone(),
            },
            RowWrite::Delete { key } => Mutation {
                op: Op::Delete as i32,
                key: key.clone(),
                value: Vec::new(),
            },
            RowWrite::Lock { key } => Mutation {
                op: Op::Lock as i32,
                key: key.clone(),
                value: Vec::new(),
            },
        }
    }
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Keys written.
    pub rows: u64,
    /// How it committed (1PC tried in one region and not possible there is `TwoPc`).
    pub mode: CommitMode,
    /// The timestamp the rows were committed at, the version a read at a later ts sees
    /// (`None`: no rows, nothing committed). 1PC: the prewrite's one-phase commit ts; async
    /// commit: the max `min_commit_ts` the prewrites were answered with (or the one a
    /// resolver's decision fixed); 2PC: the primary's commit ts. A caller that needs to
    /// order its statements with other readers' timestamps (tests checking snapshot
    /// isolation, a change feed) takes it from here.
    pub commit_ts: Option<u64>,
    pub warnings: Vec<String>,
}

impl WriteOutcome {
    /// A statement without rows: nothing to commit.
    pub fn empty() -> WriteOutcome {
        WriteOutcome {
            rows: 0,
            mode: CommitMode::TwoPc,
            commit_ts: None,
            warnings: Vec::new(),
        }
    }

    fn committed(rows: u64, mode: CommitMode, commit_ts: u64) -> WriteOutcome {
        WriteOutcome {
            rows,
            mode,
            commit_ts: Some(commit_ts),
            warnings: Vec::new(),
        }
    }
}

fn txn_err(command: &'static str, e: &KeyError) -> SqlError {
    SqlError::Client(Error::TxnCommand {
        command,
        message: format!("kind={} {}", e.kind, e.message),
    })
}

/// The first `KeyError` among `answers`.
fn first_error<R: crate::region_rpc::HasKeyError>(answers: &[R]) -> Option<&KeyError> {
    answers.iter().find_map(|r| r.key_error())
}

/// Writes `writes` as one transaction at `start_ts`, committing as `opts` allows (see the
/// module docs); `statement` names the statement in errors and warnings. A failed prewrite
/// rolls back every key and is an error (a write conflict is [`SqlError::WriteConflict`]); a
/// failed commit after the commit point is a warning (readers roll those keys forward).
pub async fn write(
    client: &Client,
    writes: &[RowWrite],
    start_ts: u64,
    statement: &'static str,
    opts: CommitOptions,
) -> Result<WriteOutcome> {
    let Some(first) = writes.first() else {
        return Ok(WriteOutcome::empty());
    };
    let primary = first.key().to_vec();
    let mutations: Vec<Mutation> = writes.iter().map(RowWrite::mutation).collect();
    let router = client.router();
    // By region, the primary's first: its lock must exist before any secondary's.
    let mut groups: Vec<Vec<Mutation>> = router
        .group(&mutations)
        .await?
        .into_iter()
        .map(|(_, idx)| idx.into_iter().map(|i| mutations[i].clone()).collect())
        .collect();
    groups.sort_by_key(|g: &Vec<Mutation>| !g.iter().any(|m| m.key == primary));
    let rows = writes.len() as u64;
    let mode = CommitMode::choose(groups.len(), writes.len(), opts);
    let max_commit_ts = opts.schema_lease.map(schema_lease_end);
    if mode == CommitMode::AsyncCommit {
        return async_commit::write(
            client,
            &groups,
            &primary,
            start_ts,
            max_commit_ts.unwrap_or(0),
            statement,
        )
        .await;
    }
    // 1PC only for the whole statement in one request: a group that a region change splits
    // again on its way is prewritten in parts, each an ordinary 2PC prewrite.
    let one_pc_size = if mode == CommitMode::OnePc {
        writes.len()
    } else {
        0
    };
    let ttl = lock_ttl_ms(mutations.iter().map(|m| m.key.len() + m.value.len()).sum());
    let mut min_commit_ts = start_ts + 1;
    let mut backoff = client.backoff();
    let transport = client.transport();
    for (i, group) in groups.iter().enumerate() {
        let prewrite = |server: String, mutations: Vec<Mutation>| {
            let primary = primary.clone();
            async move {
                let req = PrewriteRequest {
                    try_one_pc: mutations.len() == one_pc_size,
                    max_commit_ts: max_commit_ts.unwrap_or(0),
                    mutations,
                    primary,
                    start_ts,
                    lock_ttl_ms: ttl,
                    txn_size: rows,
                    use_async_commit: false,
                    secondaries: Vec::new(),
                };
                transport
                    .post(&server, paths::PREWRITE, &req, "prewrite response")
                    .await
            }
        };
        let sent: crate::error::Result<Vec<PrewriteResponse>> = router
            .send_by_region(group.clone(), &mut backoff, prewrite)
            .await;
        // A retried 1PC prewrite whose first try committed: the statement is done. (Without a
        // 1PC try nothing can have committed before the commit below.)
        if let Ok(answers) = &sent
            && let Some(e) = first_error(answers)
            && one_pc_size > 0
            && e.kind == ErrorKind::TxnFinished as i32
            && e.committed_ts > 0
        {
            return Ok(WriteOutcome::committed(
                rows,
                CommitMode::OnePc,
                e.committed_ts,
            ));
        }
        let key_error: Option<KeyError> = match &sent {
            Ok(answers) => first_error(answers).cloned(),
            Err(_) => None,
        };
        if one_pc_size > 0 && (sent.is_err() || key_error.is_some()) {
            // A 1PC try whose answer was lost may have committed, and its retry can then meet
            // another transaction's lock or write on the same keys before it finds its own
            // commit record: a rollback of the primary decides, so a committed statement is
            // never reported failed (and run again by the statement loop).
            match decide_by_rollback(client, &primary, start_ts).await {
                Decided::Committed(ts) => {
                    tracing::info!(
                        statement,
                        start_ts,
                        commit_ts = ts,
                        "a retried 1PC prewrite had committed"
                    );
                    return Ok(WriteOutcome::committed(rows, CommitMode::OnePc, ts));
                }
                Decided::RolledBack => {}
                Decided::Unknown(why) => {
                    tracing::warn!(statement, start_ts, rollback = %why, "1PC outcome unknown");
                    return Err(SqlError::Undetermined {
                        statement,
                        start_ts,
                    });
                }
            }
        }
        let answers = match sent {
            Ok(a) => a,
            Err(e) => {
                rollback(client, &groups[..=i], start_ts).await;
                return Err(e.into());
            }
        };
        if let Some(e) = key_error {
            rollback(client, &groups[..=i], start_ts).await;
            return Err(prewrite_error(client, &e, start_ts, statement).await);
        }
        if let Some(ts) = answers
            .iter()
            .map(|r| r.one_pc_commit_ts)
            .find(|&ts| ts != 0)
        {
            return Ok(WriteOutcome::committed(rows, CommitMode::OnePc, ts));
        }
        for r in &answers {
            min_commit_ts = min_commit_ts.max(r.min_commit_ts);
        }
    }
    let commit_ts = client.current_ts().await?.max(min_commit_ts);
    if let Some(max) = max_commit_ts
        && commit_ts > max
    {
        rollback(client, &groups, start_ts).await;
        return Err(SqlError::SchemaLeaseExpired {
            statement,
            start_ts,
        });
    }
    // The commit point.
    let mut warnings = Vec::new();
    match send_commit(client, vec![primary.clone()], start_ts, commit_ts).await {
        Ok(answers) => {
            if let Some(e) = first_error(&answers) {
                rollback(client, &groups, start_ts).await;
                return Err(txn_err("commit", e));
            }
        }
        Err(e) => {
            // The outcome is unknown (a leader change cut the commit off, or no replica
            // answered until the deadline): a rollback of the primary decides.
            match decide_by_rollback(client, &primary, start_ts).await {
                Decided::Committed(ts) => warnings.push(format!(
                    "{statement} committed, though its commit answer was lost (a rollback \
                     found it committed): commit_ts={ts} error={e}"
                )),
                Decided::RolledBack => {
                    rollback(client, &groups, start_ts).await;
                    return Err(e.into());
                }
                Decided::Unknown(why) => {
                    tracing::warn!(statement, start_ts, error = %e, rollback = %why, "commit outcome unknown");
                    return Err(SqlError::Undetermined {
                        statement,
                        start_ts,
                    });
                }
            }
        }
    }
    let secondaries: Vec<Vec<u8>> = mutations
        .into_iter()
        .map(|m| m.key)
        .filter(|k| *k != primary)
        .collect();
    if !secondaries.is_empty() {
        match send_commit(client, secondaries, start_ts, commit_ts).await {
            Ok(answers) => {
                if let Some(e) = first_error(&answers) {
                    warnings.push(secondary_warning(statement, &txn_err("commit", e)));
                }
            }
            Err(e) => warnings.push(secondary_warning(statement, &e)),
        }
    }
    Ok(WriteOutcome {
        rows,
        mode: CommitMode::TwoPc,
        commit_ts: Some(commit_ts),
        warnings,
    })
}

fn secondary_warning(statement: &str, e: &dyn std::fmt::Display) -> String {
    format!(
        "{statement} committed, but a secondary commit failed (readers resolve its locks): \
         error={e}"
    )
}

/// The statement error for a prewrite's `KeyError` (its keys were rolled back).
async fn prewrite_error(
    client: &Client,
    e: &KeyError,
    start_ts: u64,
    statement: &'static str,
) -> SqlError {
    if e.kind == ErrorKind::Conflict as i32 {
        return SqlError::WriteConflict {
            statement,
            start_ts,
            conflict_commit_ts: e.conflict_commit_ts,
        };
    }
    if let (true, Some(lock)) = (e.kind == ErrorKind::Locked as i32, &e.locked) {
        let resolution = match client.lock_resolver().resolve(lock, start_ts).await {
            Ok(ResolveOutcome::Resolved) => "resolved".to_string(),
            Ok(ResolveOutcome::Alive) => "alive".to_string(),
            Err(e) => format!("not resolved: {e}"),
        };
        return SqlError::KeyLocked {
            statement,
            lock_ts: lock.lock_version,
            resolution,
        };
    }
    if e.kind == ErrorKind::CommitTsTooLarge as i32 {
        return SqlError::SchemaLeaseExpired {
            statement,
            start_ts,
        };
    }
    if e.kind == ErrorKind::Busy as i32 {
        return SqlError::ServerBusy {
            statement,
            reason: e.message.clone(),
        };
    }
    txn_err("prewrite", e)
}

/// What a rollback of the primary said about a transaction whose commit answer was lost.
enum Decided {
    /// The primary had committed at this ts.
    Committed(u64),
    /// The rollback succeeded: the transaction can never commit.
    RolledBack,
    /// The rollback failed too (why).
    Unknown(String),
}

async fn decide_by_rollback(client: &Client, primary: &[u8], start_ts: u64) -> Decided {
    let answers = send_rollback(client, vec![primary.to_vec()], start_ts).await;
    match answers {
        Err(e) => Decided::Unknown(e.to_string()),
        Ok(answers) => match first_error(&answers) {
            None => Decided::RolledBack,
            Some(e) if e.committed_ts > 0 => Decided::Committed(e.committed_ts),
            Some(e) => Decided::Unknown(format!("kind={} {}", e.kind, e.message)),
        },
    }
}

/// Commits `keys` of `start_ts` at `commit_ts` at their regions' leaders (the one commit
/// request of this module and of `async_commit`).
async fn send_commit(
    client: &Client,
    keys: Vec<Vec<u8>>,
    start_ts: u64,
    commit_ts: u64,
) -> crate::error::Result<Vec<CommandResponse>> {
    let mut backoff = client.backoff();
    let transport = client.transport();
    client
        .router()
        .send_by_region(keys, &mut backoff, |server, keys| async move {
            let req = CommitRequest {
                keys,
                start_ts,
                commit_ts,
            };
            transport
                .post(&server, paths::COMMIT, &req, "commit response")
                .await
        })
        .await
}

/// Rolls `keys` back at their regions' leaders (the one rollback request of this module).
async fn send_rollback(
    client: &Client,
    keys: Vec<Vec<u8>>,
    start_ts: u64,
) -> crate::error::Result<Vec<CommandResponse>> {
    let mut backoff = client.backoff();
    let transport = client.transport();
    client
        .router()
        .send_by_region(keys, &mut backoff, |server, keys| async move {
            let req = RollbackRequest { keys, start_ts };
            transport
                .post(&server, paths::ROLLBACK, &req, "rollback response")
                .await
        })
        .await
}

/// Best-effort rollback of every key of `groups` (a reader resolves what is left after the
/// lock TTL).
async fn rollback(client: &Client, groups: &[Vec<Mutation>], start_ts: u64) {
    let keys: Vec<Vec<u8>> = groups
        .iter()
        .flat_map(|g| g.iter().map(|m| m.key.clone()))
        .collect();
    let answers = send_rollback(client, keys, start_ts).await;
    match answers {
        Err(e) => tracing::warn!(start_ts, error = %e, "statement rollback failed"),
        Ok(answers) => {
            if let Some(e) = first_error(&answers) {
                tracing::warn!(start_ts, kind = e.kind, message = %e.message, "statement rollback failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_larger_write_gets_a_longer_lock_ttl_up_to_a_cap() {
        assert_eq!(lock_ttl_ms(0), LOCK_TTL_MS);
        assert_eq!(lock_ttl_ms(100 << 10), LOCK_TTL_MS);
        assert_eq!(lock_ttl_ms(1 << 20), 6_000);
        assert_eq!(lock_ttl_ms(100 << 20), 60_000);
        assert_eq!(lock_ttl_ms(usize::MAX), MAX_LOCK_TTL_MS);
    }

    #[test]
    fn one_region_tries_one_pc_whatever_the_session_says() {
        for async_commit in [false, true] {
            let opts = CommitOptions {
                async_commit,
                schema_lease: None,
            };
            assert_eq!(CommitMode::choose(1, 3, opts), CommitMode::OnePc);
            assert_eq!(CommitMode::choose(1, 1000, opts), CommitMode::OnePc);
        }
    }

    #[test]
    fn several_regions_use_async_commit_only_when_asked_and_up_to_the_key_limit_lease_or_not() {
        let on = CommitOptions {
            async_commit: true,
            schema_lease: None,
        };
        assert_eq!(CommitMode::choose(2, 2, on), CommitMode::AsyncCommit);
        assert_eq!(
            CommitMode::choose(5, ASYNC_COMMIT_KEYS_LIMIT, on),
            CommitMode::AsyncCommit
        );
        assert_eq!(
            CommitMode::choose(5, ASYNC_COMMIT_KEYS_LIMIT + 1, on),
            CommitMode::TwoPc
        );
        assert_eq!(
            CommitMode::choose(2, 2, CommitOptions::default()),
            CommitMode::TwoPc,
            "off by default"
        );
        // Under a schema lease the prewrites carry the lease's end as max_commit_ts.
        let leased = CommitOptions {
            schema_lease: Some(7),
            ..on
        };
        assert_eq!(CommitMode::choose(2, 2, leased), CommitMode::AsyncCommit);
        assert_eq!(CommitMode::choose(1, 2, leased), CommitMode::OnePc);
        assert_eq!(
            schema_lease_end(7 << types::Ts::LOGICAL_BITS) >> types::Ts::LOGICAL_BITS,
            7 + SCHEMA_LEASE_MS
        );
    }

    #[test]
    fn puts_deletes_and_locks_become_txn_mutations() {
        let put = RowWrite::Put {
            key: b"k1".to_vec(),
            value: b"v".to_vec(),
        };
        let del = RowWrite::Delete {
            key: b"k2".to_vec(),
        };
        assert_eq!(put.key(), b"k1");
        assert_eq!(put.mutation().op, Op::Put as i32);
        assert_eq!(put.mutation().value, b"v");
        assert_eq!(del.key(), b"k2");
        assert_eq!(del.mutation().op, Op::Delete as i32);
        assert!(del.mutation().value.is_empty());
        let lock = RowWrite::Lock {
            key: b"k3".to_vec(),
        };
        assert_eq!(lock.key(), b"k3");
        assert_eq!(lock.mutation().op, Op::Lock as i32);
        assert!(lock.mutation().value.is_empty());
    }
}
