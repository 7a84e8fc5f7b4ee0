//! Writing one statement's rows as one transaction through the servers' txn API (shared by
//! INSERT, UPDATE and DELETE): a prewrite per owning server — asking for 1PC when there is
//! only one, which the server grants when the keys fall in one region — then, when that did
//! not commit, the primary key's commit (the commit point, Percolator: the first mutation's
//! key is the primary) and the other keys' commits.
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

use std::collections::BTreeMap;

use wire::paths;
use wire::txn::{
    CommandResponse, CommitRequest, ErrorKind, Mutation, Op, PrewriteRequest, PrewriteResponse,
    RollbackRequest,
};

use super::{Result, SqlError};
use crate::error::Error;
use crate::lock_resolver::ResolveOutcome;
use crate::paging::Client;

/// Lock TTL of a statement's prewrite: how long a reader waits before it may roll back the
/// locks of a statement whose client died.
const LOCK_TTL_MS: u64 = 3_000;

/// One key's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowWrite {
    /// Store `value` under `key` (a new row, or a row's new value).
    Put { key: Vec<u8>, value: Vec<u8> },
    /// Remove the row at `key`.
    Delete { key: Vec<u8> },
}

impl RowWrite {
    pub fn key(&self) -> &[u8] {
        match self {
            RowWrite::Put { key, .. } | RowWrite::Delete { key } => key,
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
        }
    }
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Keys written.
    pub rows: u64,
    /// Committed in one phase (one server, one region).
    pub one_pc: bool,
    pub warnings: Vec<String>,
}

fn txn_err(command: &'static str, e: &wire::txn::KeyError) -> SqlError {
    SqlError::Client(Error::TxnCommand {
        command,
        message: format!("kind={} {}", e.kind, e.message),
    })
}

/// Writes `writes` as one transaction at `start_ts` (see the module docs); `statement` names
/// the statement in errors and warnings. A failed prewrite rolls back every key and is an
/// error (a write conflict is [`SqlError::WriteConflict`]); a failed secondary commit after
/// the commit point is a warning (readers roll those keys forward from the primary).
pub async fn write(
    client: &Client,
    writes: &[RowWrite],
    start_ts: u64,
    statement: &'static str,
) -> Result<WriteOutcome> {
    let Some(first) = writes.first() else {
        return Ok(WriteOutcome {
            rows: 0,
            one_pc: false,
            warnings: Vec::new(),
        });
    };
    let primary = first.key().to_vec();
    let primary_server = client.lock_resolver().server_of(&primary).await?;
    let mut by_server: BTreeMap<String, Vec<Mutation>> = BTreeMap::new();
    for w in writes {
        let server = client.lock_resolver().server_of(w.key()).await?;
        by_server.entry(server).or_default().push(w.mutation());
    }
    // The primary's server first: its locks must exist before any secondary's.
    let mut groups: Vec<(String, Vec<Mutation>)> = by_server.into_iter().collect();
    groups.sort_by_key(|(server, _)| *server != primary_server);
    let single = groups.len() == 1;
    let rows = writes.len() as u64;
    let mut min_commit_ts = start_ts + 1;
    for (i, (server, mutations)) in groups.iter().enumerate() {
        let req = PrewriteRequest {
            mutations: mutations.clone(),
            primary: primary.clone(),
            start_ts,
            lock_ttl_ms: LOCK_TTL_MS,
            txn_size: rows,
            use_async_commit: false,
            secondaries: Vec::new(),
            try_one_pc: single,
        };
        let resp: PrewriteResponse = client
            .transport()
            .post(server, paths::PREWRITE, &req, "prewrite response")
            .await?;
        if let Some(e) = resp.error {
            rollback(client, &groups[..=i], start_ts).await;
            if e.kind == ErrorKind::Conflict as i32 {
                return Err(SqlError::WriteConflict {
                    statement,
                    start_ts,
                    conflict_commit_ts: e.conflict_commit_ts,
                });
            }
            if let (true, Some(lock)) = (e.kind == ErrorKind::Locked as i32, &e.locked) {
                let resolution = match client.lock_resolver().resolve(lock, start_ts).await {
                    Ok(ResolveOutcome::Resolved) => "resolved".to_string(),
                    Ok(ResolveOutcome::Alive) => "alive".to_string(),
                    Err(e) => format!("not resolved: {e}"),
                };
                return Err(SqlError::KeyLocked {
                    statement,
                    lock_ts: lock.lock_version,
                    resolution,
                });
            }
            if e.kind == ErrorKind::Busy as i32 {
                return Err(SqlError::ServerBusy {
                    statement,
                    reason: e.message,
                });
            }
            return Err(txn_err("prewrite", &e));
        }
        if single && resp.one_pc_commit_ts != 0 {
            return Ok(WriteOutcome {
                rows,
                one_pc: true,
                warnings: Vec::new(),
            });
        }
        min_commit_ts = min_commit_ts.max(resp.min_commit_ts);
    }
    let commit_ts = client.current_ts().await?.max(min_commit_ts);
    let commit = |server: String, keys: Vec<Vec<u8>>| async move {
        let req = CommitRequest {
            keys,
            start_ts,
            commit_ts,
        };
        let resp: CommandResponse = client
            .transport()
            .post(&server, paths::COMMIT, &req, "commit response")
            .await?;
        match resp.error {
            Some(e) => Err(txn_err("commit", &e)),
            None => Ok(()),
        }
    };
    if let Err(e) = commit(primary_server.clone(), vec![primary.clone()]).await {
        rollback(client, &groups, start_ts).await;
        return Err(e);
    }
    let mut warnings = Vec::new();
    for (server, mutations) in groups {
        let keys: Vec<Vec<u8>> = mutations
            .into_iter()
            .map(|m| m.key)
            .filter(|k| *k != primary)
            .collect();
        if keys.is_empty() {
            continue;
        }
        if let Err(e) = commit(server.clone(), keys).await {
            warnings.push(format!(
                "{statement} committed, but a secondary commit failed (readers resolve its \
                 locks): server={server} error={e}"
            ));
        }
    }
    Ok(WriteOutcome {
        rows,
        one_pc: false,
        warnings,
    })
}

/// Best-effort rollback of every key of `groups` (a reader resolves what is left after the
/// lock TTL).
async fn rollback(client: &Client, groups: &[(String, Vec<Mutation>)], start_ts: u64) {
    for (server, mutations) in groups {
        let req = RollbackRequest {
            keys: mutations.iter().map(|m| m.key.clone()).collect(),
            start_ts,
        };
        let r: crate::error::Result<CommandResponse> = client
            .transport()
            .post(server, paths::ROLLBACK, &req, "rollback response")
            .await;
        if let Err(e) = r {
            tracing::warn!(server = %server, error = %e, "statement rollback failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puts_and_deletes_become_txn_mutations() {
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
    }
}
