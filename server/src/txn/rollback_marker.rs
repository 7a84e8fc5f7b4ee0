//! Where a rollback is recorded: a Rollback record in the WRITE CF, or a rollback marker in the
//! EXTRA CF when the WRITE CF cannot take it.
//!
//! A rollback of transaction `start_ts` on `key` leaves a trace so that a late prewrite of that
//! transaction fails and a commit of it reports "rolled back". The usual trace is a Rollback
//! record in WRITE at version `start_ts`. It cannot be used when
//!
//! * the key holds **another transaction's lock**: that transaction may still commit at
//!   `commit_ts == start_ts` (its commit_ts is only bounded below), and two records cannot
//!   share a version: the memtable keeps the first and silently drops the second;
//! * a **WRITE version `>= start_ts` already exists**: at `start_ts` exactly it is another
//!   transaction's commit (same collision); above it the memtable would ignore our older
//!   version. (The newer version already makes a late prewrite fail its conflict check, but a
//!   commit and `check_txn_status` must still learn that the transaction was rolled back.)
//!
//! In those cases a marker goes to the EXTRA CF instead. Commands that ask "was `start_ts`
//! rolled back on `key`?" consult both places (`write_records::find_txn_record`).
//!
//! **EXTRA rollback marker**, format version 1:
//!
//! ```text
//! key      = the user key
//! version  = max(start_ts, newest EXTRA version of the key + 1)
//! meta     = empty
//! value    = format:u8 (=1) kind:u8 (=1, rollback) start_ts:u64le      (10 bytes)
//! ```
//!
//! The version is not simply `start_ts` because markers for older transactions can arrive
//! after markers for newer ones, and the memtable ignores a version that is not newer than the
//! key's newest. A marker's version is never below its start_ts, so a lookup reads the key's
//! EXTRA versions from the newest down to `start_ts` and compares the start_ts inside.
//! Writers of markers hold the key's latch, so the "newest + 1" they compute stays the newest.
//!
//! Limit: compaction GC (once a safe point is set) keeps only the newest version at or below
//! the safe point, of rollback records and markers alike; a transaction older than the safe
//! point must not be prewritten any more (the usual GC contract).

use kvengine::{ColumnFamily, SnapAccess, WriteBatch};

use super::error::{Result, TxnError};
use super::write_records::{PlacedRollback, decode_write_meta};

const MARKER_FORMAT_VERSION: u8 = 1;
const MARKER_KIND_ROLLBACK: u8 = 1;
const MARKER_LEN: usize = 10;

fn encode_marker(start_ts: u64) -> [u8; MARKER_LEN] {
    let mut out = [0u8; MARKER_LEN];
    out[0] = MARKER_FORMAT_VERSION;
    out[1] = MARKER_KIND_ROLLBACK;
    out[2..].copy_from_slice(&start_ts.to_le_bytes());
    out
}

/// The start_ts a marker names.
fn decode_marker(key: &[u8], version: u64, value: &[u8]) -> Result<u64> {
    let bad = |detail: String| TxnError::BadRollbackMarker {
        key: key.to_vec(),
        version,
        detail,
    };
    if value.len() != MARKER_LEN {
        return Err(bad(format!(
            "expected {MARKER_LEN} bytes, found {}",
            value.len()
        )));
    }
    if value[0] != MARKER_FORMAT_VERSION {
        return Err(bad(format!(
            "expected format version {MARKER_FORMAT_VERSION}, found {}",
            value[0]
        )));
    }
    if value[1] != MARKER_KIND_ROLLBACK {
        return Err(bad(format!(
            "expected kind {MARKER_KIND_ROLLBACK} (rollback), found {}",
            value[1]
        )));
    }
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&value[2..]);
    Ok(u64::from_le_bytes(ts))
}

/// Whether the EXTRA CF holds a rollback marker of `start_ts` for `key`.
pub(crate) fn marker_exists(snap: &SnapAccess, key: &[u8], start_ts: u64) -> Result<bool> {
    let mut ts = u64::MAX;
    while let Some(v) = snap.get_raw(ColumnFamily::Extra, key, ts)? {
        if v.version < start_ts {
            break;
        }
        if !v.tombstone && decode_marker(key, v.version, &v.value)? == start_ts {
            return Ok(true);
        }
        match v.version.checked_sub(1) {
            Some(n) => ts = n,
            None => break,
        }
    }
    Ok(false)
}

/// Adds the rollback of `start_ts` on `key` to `batch`, in WRITE or EXTRA per the module rules.
/// `other_lock`: the key currently holds another transaction's lock. The caller has checked
/// that no rollback of `start_ts` exists yet, and holds the key's latch.
pub(crate) fn put_rollback(
    batch: &mut WriteBatch,
    snap: &SnapAccess,
    key: &[u8],
    start_ts: u64,
    other_lock: bool,
) -> Result<PlacedRollback> {
    let newest_write = snap.newest_write(key)?;
    let write_is_free = newest_write.as_ref().is_none_or(|v| v.version < start_ts);
    if write_is_free && !other_lock {
        let meta = kvengine::mvcc::WriteMeta {
            kind: kvengine::mvcc::WriteKind::Rollback,
            start_ts,
            commit_ts: start_ts,
        };
        batch.put(ColumnFamily::Write, key, start_ts, &meta.encode(), b"");
        return Ok(PlacedRollback::WriteRecord);
    }
    if let Some(v) = &newest_write {
        // Validates the record we are working around (a corrupt one must not be hidden).
        decode_write_meta(key, &v.user_meta)?;
    }
    let newest_extra = snap
        .get_raw(ColumnFamily::Extra, key, u64::MAX)?
        .map(|v| v.version);
    let version = match newest_extra {
        Some(n) if n >= start_ts => {
            n.checked_add(1)
                .ok_or_else(|| TxnError::BadRollbackMarker {
                    key: key.to_vec(),
                    version: n,
                    detail: "expected an EXTRA version below u64::MAX, found u64::MAX".into(),
                })?
        }
        _ => start_ts,
    };
    batch.put(
        ColumnFamily::Extra,
        key,
        version,
        b"",
        &encode_marker(start_ts),
    );
    Ok(PlacedRollback::ExtraMarker { version })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_round_trips_and_names_what_is_wrong() {
        let enc = encode_marker(42);
        assert_eq!(decode_marker(b"k", 42, &enc).unwrap(), 42);
        let err = decode_marker(b"k", 42, &enc[..9]).unwrap_err();
        assert!(
            err.to_string().contains("expected 10 bytes, found 9"),
            "{err}"
        );
        let mut bad = enc;
        bad[1] = 7;
        let err = decode_marker(b"k", 42, &bad).unwrap_err();
        assert!(err.to_string().contains("found 7"), "{err}");
    }
}
