//! The transaction records the engine stores: Percolator locks (LOCK CF values) and write
//! records (WRITE CF user meta). They live here, next to the reads that interpret them, so a
//! snapshot on a worker and the transaction layer on a server agree byte for byte.
//!
//! Both decoders take bytes that came from disk or the network: they never panic, never
//! allocate more than the input holds, and say what they expected and what they found.

use bytes::{Buf, BufMut};

/// What a transaction does to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockType {
    /// Writes a new value.
    Put,
    /// Deletes the key.
    Delete,
    /// Locks the key without changing it (SELECT FOR UPDATE in optimistic mode): readers
    /// ignore it.
    Lock,
    /// A pessimistic lock (not taken by this build's transaction layer, but understood by
    /// readers, which ignore it).
    Pessimistic,
}

impl LockType {
    fn to_u8(self) -> u8 {
        match self {
            LockType::Put => 0,
            LockType::Delete => 1,
            LockType::Lock => 2,
            LockType::Pessimistic => 3,
        }
    }

    fn from_u8(b: u8) -> Option<LockType> {
        Some(match b {
            0 => LockType::Put,
            1 => LockType::Delete,
            2 => LockType::Lock,
            3 => LockType::Pessimistic,
            _ => return None,
        })
    }

    /// Whether a reader must wait for (or resolve) a lock of this type.
    pub fn blocks_reads(self) -> bool {
        matches!(self, LockType::Put | LockType::Delete)
    }
}

/// A Percolator lock: the value of a key in the LOCK CF while a transaction that wrote the key
/// is between prewrite and commit or rollback. The value to commit travels inside the lock
/// (the WRITE CF holds values inline, there is no separate data CF).
///
/// Layout, format version 1 (integers little-endian, `bytes` = u32le length + bytes):
///
/// ```text
/// lock := version:u8 (=1) type:u8 flags:u8 start_ts:u64 ttl_ms:u64 min_commit_ts:u64
///         txn_size:u64 primary:bytes [value:bytes if flags & HAS_VALUE]
///         [count:u32 secondary:bytes{count} if flags & ASYNC_COMMIT]
/// flags := HAS_VALUE (1) | ASYNC_COMMIT (2)
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    pub lock_type: LockType,
    pub primary: Vec<u8>,
    pub start_ts: u64,
    /// Milliseconds after the physical time of `start_ts` until the lock may be rolled back by
    /// another transaction.
    pub ttl_ms: u64,
    /// A read at a start_ts below this may ignore the lock: the transaction will commit above.
    pub min_commit_ts: u64,
    /// Number of keys the transaction writes (a hint for resolvers).
    pub txn_size: u64,
    /// The value a Put commits.
    pub value: Option<Vec<u8>>,
    /// Async commit: the transaction is committed once every key is prewritten; the primary
    /// lists the secondaries so a resolver can check them. `None` for 2PC.
    pub secondaries: Option<Vec<Vec<u8>>>,
}

const LOCK_FORMAT_VERSION: u8 = 1;
const FLAG_HAS_VALUE: u8 = 1;
const FLAG_ASYNC_COMMIT: u8 = 2;
const LOCK_FIXED_LEN: usize = 3 + 8 * 4 + 4;

impl Lock {
    pub fn use_async_commit(&self) -> bool {
        self.secondaries.is_some()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut len = LOCK_FIXED_LEN + self.primary.len();
        if let Some(v) = &self.value {
            len += 4 + v.len();
        }
        if let Some(s) = &self.secondaries {
            len += 4 + s.iter().map(|k| 4 + k.len()).sum::<usize>();
        }
        let mut out = Vec::with_capacity(len);
        let mut flags = 0;
        if self.value.is_some() {
            flags |= FLAG_HAS_VALUE;
        }
        if self.secondaries.is_some() {
            flags |= FLAG_ASYNC_COMMIT;
        }
        out.put_u8(LOCK_FORMAT_VERSION);
        out.put_u8(self.lock_type.to_u8());
        out.put_u8(flags);
        out.put_u64_le(self.start_ts);
        out.put_u64_le(self.ttl_ms);
        out.put_u64_le(self.min_commit_ts);
        out.put_u64_le(self.txn_size);
        put_bytes(&mut out, &self.primary);
        if let Some(v) = &self.value {
            put_bytes(&mut out, v);
        }
        if let Some(s) = &self.secondaries {
            out.put_u32_le(s.len() as u32);
            for k in s {
                put_bytes(&mut out, k);
            }
        }
        out
    }

    pub fn decode(mut data: &[u8]) -> Result<Lock, RecordError> {
        let total = data.len();
        if data.len() < LOCK_FIXED_LEN {
            return Err(RecordError::new(
                "lock",
                format!("expected at least {LOCK_FIXED_LEN} bytes, found {total}"),
            ));
        }
        let version = data.get_u8();
        if version != LOCK_FORMAT_VERSION {
            return Err(RecordError::new(
                "lock",
                format!("expected format version {LOCK_FORMAT_VERSION}, found {version}"),
            ));
        }
        let t = data.get_u8();
        let lock_type = LockType::from_u8(t)
            .ok_or_else(|| RecordError::new("lock", format!("unknown lock type {t}")))?;
        let flags = data.get_u8();
        if flags & !(FLAG_HAS_VALUE | FLAG_ASYNC_COMMIT) != 0 {
            return Err(RecordError::new(
                "lock",
                format!("unknown flags {flags:#x}"),
            ));
        }
        let start_ts = data.get_u64_le();
        let ttl_ms = data.get_u64_le();
        let min_commit_ts = data.get_u64_le();
        let txn_size = data.get_u64_le();
        let primary = get_bytes(&mut data, "lock primary")?;
        let value = if flags & FLAG_HAS_VALUE != 0 {
            Some(get_bytes(&mut data, "lock value")?)
        } else {
            None
        };
        let secondaries = if flags & FLAG_ASYNC_COMMIT != 0 {
            if data.remaining() < 4 {
                return Err(RecordError::new(
                    "lock",
                    "secondary count truncated".to_string(),
                ));
            }
            let count = data.get_u32_le() as usize;
            // A secondary takes at least its 4-byte length.
            if count > data.remaining() / 4 {
                return Err(RecordError::new(
                    "lock",
                    format!(
                        "secondary count {count} exceeds the {} bytes left",
                        data.remaining()
                    ),
                ));
            }
            let mut keys = Vec::with_capacity(count);
            for _ in 0..count {
                keys.push(get_bytes(&mut data, "lock secondary")?);
            }
            Some(keys)
        } else {
            None
        };
        if data.has_remaining() {
            return Err(RecordError::new(
                "lock",
                format!("{} trailing bytes after the record", data.remaining()),
            ));
        }
        Ok(Lock {
            lock_type,
            primary,
            start_ts,
            ttl_ms,
            min_commit_ts,
            txn_size,
            value,
            secondaries,
        })
    }

    /// The lock as a reader reports it (no value, no secondaries).
    pub fn info(&self, key: &[u8]) -> LockInfo {
        LockInfo {
            key: key.to_vec(),
            primary: self.primary.clone(),
            lock_type: self.lock_type,
            start_ts: self.start_ts,
            ttl_ms: self.ttl_ms,
            min_commit_ts: self.min_commit_ts,
            txn_size: self.txn_size,
            use_async_commit: self.use_async_commit(),
        }
    }
}

/// What a reader that met a lock tells its caller: enough to resolve it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    pub key: Vec<u8>,
    pub primary: Vec<u8>,
    pub lock_type: LockType,
    pub start_ts: u64,
    pub ttl_ms: u64,
    pub min_commit_ts: u64,
    pub txn_size: u64,
    pub use_async_commit: bool,
}

/// What a WRITE-CF version records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteKind {
    /// The version's value is the key's value (an engine put).
    Put,
    /// The key was deleted (an engine tombstone).
    Delete,
    /// A Lock-type key committed: the value did not change; readers skip it.
    Lock,
    /// The transaction with this start_ts was rolled back (version = start_ts): a late prewrite
    /// of it must fail; readers skip it.
    Rollback,
}

impl WriteKind {
    fn to_u8(self) -> u8 {
        match self {
            WriteKind::Put => 0,
            WriteKind::Delete => 1,
            WriteKind::Lock => 2,
            WriteKind::Rollback => 3,
        }
    }

    fn from_u8(b: u8) -> Option<WriteKind> {
        Some(match b {
            0 => WriteKind::Put,
            1 => WriteKind::Delete,
            2 => WriteKind::Lock,
            3 => WriteKind::Rollback,
            _ => return None,
        })
    }

    /// Whether the record carries no data change, so a reader looks at the next older version.
    pub fn is_skipped_by_reads(self) -> bool {
        matches!(self, WriteKind::Lock | WriteKind::Rollback)
    }
}

/// The user meta of a WRITE-CF version (the version itself is the commit_ts).
///
/// Layout (17 bytes): `kind:u8 start_ts:u64le commit_ts:u64le`. A Rollback record has
/// `start_ts == commit_ts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteMeta {
    pub kind: WriteKind,
    pub start_ts: u64,
    pub commit_ts: u64,
}

pub const WRITE_META_LEN: usize = 17;

impl WriteMeta {
    pub fn encode(&self) -> [u8; WRITE_META_LEN] {
        let mut out = [0u8; WRITE_META_LEN];
        out[0] = self.kind.to_u8();
        out[1..9].copy_from_slice(&self.start_ts.to_le_bytes());
        out[9..17].copy_from_slice(&self.commit_ts.to_le_bytes());
        out
    }

    pub fn decode(data: &[u8]) -> Result<WriteMeta, RecordError> {
        if data.len() != WRITE_META_LEN {
            return Err(RecordError::new(
                "write meta",
                format!("expected {WRITE_META_LEN} bytes, found {}", data.len()),
            ));
        }
        let kind = WriteKind::from_u8(data[0]).ok_or_else(|| {
            RecordError::new("write meta", format!("unknown write kind {}", data[0]))
        })?;
        let start_ts = u64::from_le_bytes(data[1..9].try_into().expect("8 bytes"));
        let commit_ts = u64::from_le_bytes(data[9..17].try_into().expect("8 bytes"));
        Ok(WriteMeta {
            kind,
            start_ts,
            commit_ts,
        })
    }

    /// The kind alone, from the first byte: the check a scan makes per row.
    pub fn peek_kind(data: &[u8]) -> Result<WriteKind, RecordError> {
        match data.first() {
            Some(&b) if data.len() == WRITE_META_LEN => WriteKind::from_u8(b)
                .ok_or_else(|| RecordError::new("write meta", format!("unknown write kind {b}"))),
            _ => Err(RecordError::new(
                "write meta",
                format!("expected {WRITE_META_LEN} bytes, found {}", data.len()),
            )),
        }
    }
}

/// A transaction record did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt {what} record: {detail}")]
pub struct RecordError {
    pub what: &'static str,
    pub detail: String,
}

impl RecordError {
    fn new(what: &'static str, detail: String) -> RecordError {
        RecordError { what, detail }
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.put_u32_le(b.len() as u32);
    out.put_slice(b);
}

fn get_bytes(data: &mut &[u8], what: &'static str) -> Result<Vec<u8>, RecordError> {
    if data.remaining() < 4 {
        return Err(RecordError::new(
            "lock",
            format!("{what}: length truncated"),
        ));
    }
    let len = data.get_u32_le() as usize;
    if data.remaining() < len {
        return Err(RecordError::new(
            "lock",
            format!("{what}: expected {len} bytes, found {}", data.remaining()),
        ));
    }
    let v = data[..len].to_vec();
    data.advance(len);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lock_strategy() -> impl Strategy<Value = Lock> {
        (
            0u8..4,
            prop::collection::vec(any::<u8>(), 0..8),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..16)),
            prop::option::of(prop::collection::vec(
                prop::collection::vec(any::<u8>(), 0..6),
                0..4,
            )),
        )
            .prop_map(
                |(t, primary, start_ts, ttl_ms, min_commit_ts, txn_size, value, secondaries)| {
                    Lock {
                        lock_type: LockType::from_u8(t).expect("0..4"),
                        primary,
                        start_ts,
                        ttl_ms,
                        min_commit_ts,
                        txn_size,
                        value,
                        secondaries,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn lock_round_trips_and_every_truncation_fails(lock in lock_strategy()) {
            let enc = lock.encode();
            prop_assert_eq!(Lock::decode(&enc).unwrap(), lock);
            for len in 0..enc.len() {
                prop_assert!(Lock::decode(&enc[..len]).is_err());
            }
        }

        #[test]
        fn write_meta_round_trips(kind in 0u8..4, start_ts in any::<u64>(), commit_ts in any::<u64>()) {
            let m = WriteMeta { kind: WriteKind::from_u8(kind).unwrap(), start_ts, commit_ts };
            let enc = m.encode();
            prop_assert_eq!(WriteMeta::decode(&enc).unwrap(), m);
            prop_assert_eq!(WriteMeta::peek_kind(&enc).unwrap(), m.kind);
            prop_assert!(WriteMeta::decode(&enc[..16]).is_err());
        }

        #[test]
        fn lock_decoder_never_panics(data in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = Lock::decode(&data);
            let _ = WriteMeta::decode(&data);
        }
    }

    #[test]
    fn lock_layout_is_stable() {
        let lock = Lock {
            lock_type: LockType::Put,
            primary: b"pk".to_vec(),
            start_ts: 7,
            ttl_ms: 3000,
            min_commit_ts: 8,
            txn_size: 2,
            value: Some(b"v".to_vec()),
            secondaries: None,
        };
        let mut want = vec![1u8, 0, FLAG_HAS_VALUE];
        for n in [7u64, 3000, 8, 2] {
            want.extend_from_slice(&n.to_le_bytes());
        }
        want.extend_from_slice(&2u32.to_le_bytes());
        want.extend_from_slice(b"pk");
        want.extend_from_slice(&1u32.to_le_bytes());
        want.extend_from_slice(b"v");
        assert_eq!(lock.encode(), want);
    }

    #[test]
    fn unknown_write_kind_is_named() {
        let mut enc = WriteMeta {
            kind: WriteKind::Put,
            start_ts: 1,
            commit_ts: 2,
        }
        .encode();
        enc[0] = 9;
        let err = WriteMeta::decode(&enc).unwrap_err();
        assert!(err.to_string().contains("unknown write kind 9"), "{err}");
    }
}
