//! Write batches: the unit a writer submits, the WAL persists and the memtable applies.
//!
//! Encoding (the WAL record payload), format version 1:
//!
//! ```text
//! batch := version:u8 (=1) count:u32le op{count}
//! op    := cf:u8 kind:u8 (0 put, 1 delete) version:u64le
//!          key_len:u32le key meta_len:u32le meta [value_len:u32le value  if put]
//! ```
//!
//! LOCK-CF ops carry version 0 in the batch: the engine gives them the shard's SnapVersion
//! when the batch is applied (base_version + the batch's sequence), so replay assigns the same
//! versions again and, in a memtable, the newest lock of a key is the one written last.

use bytes::{Buf, BufMut};
use memtable::ColumnFamily;

pub const BATCH_FORMAT_VERSION: u8 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub cf: ColumnFamily,
    pub key: Vec<u8>,
    pub version: u64,
    pub user_meta: Vec<u8>,
    /// `None` is a delete (a tombstone version).
    pub value: Option<Vec<u8>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<Op>,
    bytes: usize,
}

impl WriteBatch {
    pub fn new() -> Self {
        Self::default()
    }

    /// A versioned put (WRITE and EXTRA CFs).
    pub fn put(
        &mut self,
        cf: ColumnFamily,
        key: &[u8],
        version: u64,
        user_meta: &[u8],
        value: &[u8],
    ) -> &mut Self {
        self.push(Op {
            cf,
            key: key.to_vec(),
            version,
            user_meta: user_meta.to_vec(),
            value: Some(value.to_vec()),
        })
    }

    /// A versioned delete: a tombstone that hides older versions.
    pub fn delete(
        &mut self,
        cf: ColumnFamily,
        key: &[u8],
        version: u64,
        user_meta: &[u8],
    ) -> &mut Self {
        self.push(Op {
            cf,
            key: key.to_vec(),
            version,
            user_meta: user_meta.to_vec(),
            value: None,
        })
    }

    /// Writes a lock record (LOCK CF); its version is assigned when the batch is applied.
    pub fn put_lock(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.put(ColumnFamily::Lock, key, 0, b"", value)
    }

    /// Removes a lock (LOCK CF tombstone).
    pub fn delete_lock(&mut self, key: &[u8]) -> &mut Self {
        self.delete(ColumnFamily::Lock, key, 0, b"")
    }

    fn push(&mut self, op: Op) -> &mut Self {
        self.bytes +=
            op.key.len() + op.user_meta.len() + op.value.as_ref().map_or(0, |v| v.len()) + 26;
        self.ops.push(op);
        self
    }

    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Approximate encoded size.
    pub fn size(&self) -> usize {
        self.bytes
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes + 5);
        out.put_u8(BATCH_FORMAT_VERSION);
        out.put_u32_le(self.ops.len() as u32);
        for op in &self.ops {
            out.put_u8(op.cf.index() as u8);
            out.put_u8(u8::from(op.value.is_none()));
            out.put_u64_le(op.version);
            put_bytes(&mut out, &op.key);
            put_bytes(&mut out, &op.user_meta);
            if let Some(v) = &op.value {
                put_bytes(&mut out, v);
            }
        }
        out
    }

    /// Decodes a batch; `Err` names what is wrong. Never allocates more than the input holds.
    pub fn decode(mut data: &[u8]) -> Result<WriteBatch, String> {
        if data.remaining() < 5 {
            return Err(format!("batch shorter than its header: len={}", data.len()));
        }
        let version = data.get_u8();
        if version != BATCH_FORMAT_VERSION {
            return Err(format!(
                "unsupported batch format: expected={BATCH_FORMAT_VERSION} found={version}"
            ));
        }
        let count = data.get_u32_le() as usize;
        // An op takes at least 18 bytes (a delete with an empty key and meta).
        if count > data.remaining() / 18 {
            return Err(format!(
                "op count exceeds batch size: count={count} bytes={}",
                data.remaining()
            ));
        }
        let mut batch = WriteBatch {
            ops: Vec::with_capacity(count),
            bytes: 0,
        };
        for i in 0..count {
            if data.remaining() < 10 {
                return Err(format!("op truncated: op={i}"));
            }
            let cf = ColumnFamily::try_from(data.get_u8()).map_err(|e| format!("op={i}: {e}"))?;
            let kind = data.get_u8();
            if kind > 1 {
                return Err(format!("unknown op kind: op={i} kind={kind}"));
            }
            if data.remaining() < 8 {
                return Err(format!("op truncated: op={i}"));
            }
            let version = data.get_u64_le();
            let key = get_bytes(&mut data).ok_or_else(|| format!("key truncated: op={i}"))?;
            let user_meta =
                get_bytes(&mut data).ok_or_else(|| format!("meta truncated: op={i}"))?;
            let value = if kind == 0 {
                Some(get_bytes(&mut data).ok_or_else(|| format!("value truncated: op={i}"))?)
            } else {
                None
            };
            batch.push(Op {
                cf,
                key,
                version,
                user_meta,
                value,
            });
        }
        if data.has_remaining() {
            return Err(format!(
                "trailing bytes after batch: len={}",
                data.remaining()
            ));
        }
        Ok(batch)
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.put_u32_le(b.len() as u32);
    out.put_slice(b);
}

fn get_bytes(data: &mut &[u8]) -> Option<Vec<u8>> {
    if data.remaining() < 4 {
        return None;
    }
    let len = data.get_u32_le() as usize;
    if data.remaining() < len {
        return None;
    }
    let v = data[..len].to_vec();
    data.advance(len);
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn op_strategy() -> impl Strategy<Value = (u8, Vec<u8>, u64, Vec<u8>, Option<Vec<u8>>)> {
        (
            0u8..3,
            prop::collection::vec(any::<u8>(), 0..8),
            any::<u64>(),
            prop::collection::vec(any::<u8>(), 0..4),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..16)),
        )
    }

    proptest! {
        #[test]
        fn batch_round_trips_and_every_truncation_fails(ops in prop::collection::vec(op_strategy(), 0..8)) {
            let mut b = WriteBatch::new();
            for (cf, k, v, m, val) in ops {
                let cf = ColumnFamily::try_from(cf).unwrap();
                match val {
                    Some(val) => b.put(cf, &k, v, &m, &val),
                    None => b.delete(cf, &k, v, &m),
                };
            }
            let enc = b.encode();
            prop_assert_eq!(WriteBatch::decode(&enc).unwrap(), b);
            for len in 0..enc.len() {
                prop_assert!(WriteBatch::decode(&enc[..len]).is_err());
            }
        }
    }
}
