//! WRITE-CF records as the commands write and search them: commit records (a Put, a Delete
//! tombstone or a Lock record at version commit_ts, with `WriteMeta{kind, start_ts,
//! commit_ts}` as user meta) and "what became of transaction `start_ts` on this key".

use kvengine::mvcc::{LockType, WriteKind, WriteMeta};
use kvengine::{ColumnFamily, SnapAccess, WriteBatch};

use super::error::{Result, TxnError};
use super::rollback_marker::marker_exists;

/// Where a rollback went (see [`super::rollback_marker`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacedRollback {
    /// A Rollback record in WRITE at version start_ts.
    WriteRecord,
    /// A marker in EXTRA at this version.
    ExtraMarker { version: u64 },
}

/// What the WRITE and EXTRA CFs say about one transaction on one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnRecord {
    Committed {
        commit_ts: u64,
        kind: WriteKind,
    },
    RolledBack,
    /// Neither committed nor rolled back (it may still hold a lock).
    Missing,
}

pub(crate) fn decode_write_meta(key: &[u8], meta: &[u8]) -> Result<WriteMeta> {
    WriteMeta::decode(meta).map_err(|source| {
        TxnError::Engine(kvengine::Error::Record {
            key: key.to_vec(),
            source,
        })
    })
}

/// Searches the versions `>= start_ts` of `key` for the commit or rollback record of
/// transaction `start_ts` (a commit record's version is its commit_ts > start_ts; a rollback
/// record's is start_ts), then the EXTRA CF for a rollback marker.
pub(crate) fn find_txn_record(snap: &SnapAccess, key: &[u8], start_ts: u64) -> Result<TxnRecord> {
    for v in snap.write_versions_since(key, start_ts)? {
        let meta = decode_write_meta(key, &v.user_meta)?;
        if meta.start_ts != start_ts {
            continue;
        }
        return Ok(match meta.kind {
            WriteKind::Rollback => TxnRecord::RolledBack,
            kind => TxnRecord::Committed {
                commit_ts: v.version,
                kind,
            },
        });
    }
    if marker_exists(snap, key, start_ts)? {
        return Ok(TxnRecord::RolledBack);
    }
    Ok(TxnRecord::Missing)
}

/// Adds the commit record of a key whose lock (or 1PC mutation) has type `lock_type` and, for
/// a Put, `value`.
pub(crate) fn put_commit_record(
    batch: &mut WriteBatch,
    key: &[u8],
    lock_type: LockType,
    value: &[u8],
    start_ts: u64,
    commit_ts: u64,
) {
    let kind = match lock_type {
        LockType::Put => WriteKind::Put,
        LockType::Delete => WriteKind::Delete,
        // A pessimistic lock never reaches a commit here (this layer does not take them); if
        // one did, committing it changes nothing, like a Lock.
        LockType::Lock | LockType::Pessimistic => WriteKind::Lock,
    };
    let meta = WriteMeta {
        kind,
        start_ts,
        commit_ts,
    }
    .encode();
    match kind {
        WriteKind::Delete => {
            batch.delete(ColumnFamily::Write, key, commit_ts, &meta);
        }
        WriteKind::Put => {
            batch.put(ColumnFamily::Write, key, commit_ts, &meta, value);
        }
        WriteKind::Lock | WriteKind::Rollback => {
            batch.put(ColumnFamily::Write, key, commit_ts, &meta, b"");
        }
    }
}

/// Fails if `key` already has a WRITE version at or above `commit_ts`: the memtable would drop
/// our commit record (equal version) or file it under a newer one. The rollback rules make
/// this impossible while the key holds our lock.
pub(crate) fn check_commit_ts_free(snap: &SnapAccess, key: &[u8], commit_ts: u64) -> Result<()> {
    if let Some(v) = snap.newest_write(key)?
        && v.version >= commit_ts
    {
        let meta = decode_write_meta(key, &v.user_meta)?;
        debug_assert!(
            false,
            "commit at {commit_ts} over version {} of start_ts {} on {key:?}",
            v.version, meta.start_ts
        );
        return Err(TxnError::CommitTsCollision {
            key: key.to_vec(),
            commit_ts,
            found_version: v.version,
            found_start_ts: meta.start_ts,
        });
    }
    Ok(())
}
