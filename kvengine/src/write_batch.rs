//! Write batches: the unit a writer submits, the WAL persists and the memtable applies.
//!
//! A batch **is** its encoding (as RocksDB's `WriteBatch` is its `rep_`): `put` and `delete`
//! append an op to one byte buffer, the WAL writes that buffer as it is, and `ops` walks it.
//! A batch of a thousand ops is one growing allocation, not three per op, and encoding it for
//! the WAL or a Raft proposal is no work at all. Layout (the WAL record payload), format
//! version 1:
//!
//! ```text
//! batch := version:u8 (=1) count:u32le op{count}
//! op    := cf:u8 kind:u8 (0 put, 1 delete) version:u64le
//!          key_len:u32le key meta_len:u32le meta [value_len:u32le value  if put]
//! ```
//!
//! `count` is rewritten in place on every append, so the buffer is a whole encoding at every
//! moment. The buffer is only ever built by the appends or accepted by [`WriteBatch::decode`],
//! which checks every op, so walking it cannot meet a malformed op.
//!
//! LOCK-CF ops carry version 0 in the batch: the engine gives them the shard's SnapVersion
//! when the batch is applied (base_version + the batch's sequence), so replay assigns the same
//! versions again and, in a memtable, the newest lock of a key is the one written last.

use memtable::ColumnFamily;

pub const BATCH_FORMAT_VERSION: u8 = 1;

/// Bytes before the first op: the version byte and the op count.
const HEADER_LEN: usize = 5;
/// Bytes of an op's fixed part: cf, kind, version.
const OP_FIXED_LEN: usize = 1 + 1 + 8;
/// The smallest op: the fixed part and two empty length-prefixed fields (a delete).
const MIN_OP_LEN: usize = OP_FIXED_LEN + 4 + 4;

const KIND_PUT: u8 = 0;
const KIND_DELETE: u8 = 1;

/// One op of a batch, borrowed from its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op<'a> {
    pub cf: ColumnFamily,
    pub key: &'a [u8],
    pub version: u64,
    pub user_meta: &'a [u8],
    /// `None` is a delete (a tombstone version).
    pub value: Option<&'a [u8]>,
}

#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    /// The encoding, header included (layout in the module docs).
    data: Vec<u8>,
    count: u32,
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch::with_capacity(0)
    }
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.ops()).finish()
    }
}

impl WriteBatch {
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch whose buffer holds `bytes` of ops before it grows.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut data = Vec::with_capacity(HEADER_LEN + bytes);
        data.push(BATCH_FORMAT_VERSION);
        data.extend_from_slice(&0u32.to_le_bytes());
        WriteBatch { data, count: 0 }
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
        self.push(cf, key, version, user_meta, Some(value))
    }

    /// A versioned delete: a tombstone that hides older versions.
    pub fn delete(
        &mut self,
        cf: ColumnFamily,
        key: &[u8],
        version: u64,
        user_meta: &[u8],
    ) -> &mut Self {
        self.push(cf, key, version, user_meta, None)
    }

    /// Writes a lock record (LOCK CF); its version is assigned when the batch is applied.
    pub fn put_lock(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.put(ColumnFamily::Lock, key, 0, b"", value)
    }

    /// Removes a lock (LOCK CF tombstone).
    pub fn delete_lock(&mut self, key: &[u8]) -> &mut Self {
        self.delete(ColumnFamily::Lock, key, 0, b"")
    }

    /// Appends one op and rewrites the count.
    ///
    /// Panics if a key, meta or value reaches 4 GiB, or the batch 2^32 ops: the layout's u32
    /// fields cannot say so, and no caller builds such a batch (a request that large is refused
    /// long before it becomes one).
    fn push(
        &mut self,
        cf: ColumnFamily,
        key: &[u8],
        version: u64,
        user_meta: &[u8],
        value: Option<&[u8]>,
    ) -> &mut Self {
        let kind = if value.is_some() {
            KIND_PUT
        } else {
            KIND_DELETE
        };
        let len = OP_FIXED_LEN + 8 + key.len() + user_meta.len() + value.map_or(0, |v| 4 + v.len());
        self.data.reserve(len);
        self.data.push(cf.index() as u8);
        self.data.push(kind);
        self.data.extend_from_slice(&version.to_le_bytes());
        put_bytes(&mut self.data, key);
        put_bytes(&mut self.data, user_meta);
        if let Some(v) = value {
            put_bytes(&mut self.data, v);
        }
        self.count = self
            .count
            .checked_add(1)
            .expect("a write batch holds under 2^32 ops");
        self.data[1..HEADER_LEN].copy_from_slice(&self.count.to_le_bytes());
        self
    }

    /// The ops in the order they were added.
    pub fn ops(&self) -> Ops<'_> {
        Ops {
            rest: &self.data[HEADER_LEN..],
        }
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size in bytes.
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// The encoding: what the WAL record or a Raft proposal carries.
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }

    /// The encoding as an owned buffer (a copy; [`WriteBatch::into_bytes`] takes it instead).
    pub fn encode(&self) -> Vec<u8> {
        self.data.clone()
    }

    /// The encoding, without a copy.
    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }

    /// Decodes a batch; `Err` names what is wrong. Every op is checked here, so walking the
    /// result never meets a malformed one. Never allocates more than the input holds.
    pub fn decode(data: &[u8]) -> Result<WriteBatch, String> {
        let count = check(data)?;
        Ok(WriteBatch {
            data: data.to_vec(),
            count,
        })
    }

    /// [`WriteBatch::decode`] of a buffer the caller owns (a Raft entry's command): the batch
    /// takes it instead of a copy.
    pub fn from_vec(data: Vec<u8>) -> Result<WriteBatch, String> {
        let count = check(&data)?;
        Ok(WriteBatch { data, count })
    }
}

/// Checks that `data` is a whole batch encoding; returns its op count.
fn check(data: &[u8]) -> Result<u32, String> {
    if data.len() < HEADER_LEN {
        return Err(format!("batch shorter than its header: len={}", data.len()));
    }
    let version = data[0];
    if version != BATCH_FORMAT_VERSION {
        return Err(format!(
            "unsupported batch format: expected={BATCH_FORMAT_VERSION} found={version}"
        ));
    }
    let count = u32::from_le_bytes([data[1], data[2], data[3], data[4]]);
    let mut rest = &data[HEADER_LEN..];
    if count as usize > rest.len() / MIN_OP_LEN {
        return Err(format!(
            "op count exceeds batch size: count={count} bytes={}",
            rest.len()
        ));
    }
    for i in 0..count {
        if rest.len() < OP_FIXED_LEN {
            return Err(format!("op truncated: op={i}"));
        }
        ColumnFamily::try_from(rest[0]).map_err(|e| format!("op={i}: {e}"))?;
        let kind = rest[1];
        if kind > KIND_DELETE {
            return Err(format!("unknown op kind: op={i} kind={kind}"));
        }
        rest = &rest[OP_FIXED_LEN..];
        skip_bytes(&mut rest).ok_or_else(|| format!("key truncated: op={i}"))?;
        skip_bytes(&mut rest).ok_or_else(|| format!("meta truncated: op={i}"))?;
        if kind == KIND_PUT {
            skip_bytes(&mut rest).ok_or_else(|| format!("value truncated: op={i}"))?;
        }
    }
    if !rest.is_empty() {
        return Err(format!("trailing bytes after batch: len={}", rest.len()));
    }
    Ok(count)
}

/// The ops of a [`WriteBatch`], in order. Cloning it is free: a clone walks the rest of the
/// batch from the same point.
#[derive(Clone)]
pub struct Ops<'a> {
    /// The ops not yet returned (well formed: see the module docs).
    rest: &'a [u8],
}

impl<'a> Iterator for Ops<'a> {
    type Item = Op<'a>;

    fn next(&mut self) -> Option<Op<'a>> {
        if self.rest.is_empty() {
            return None;
        }
        // The buffer was built by `push` or checked by `decode`: these reads stay inside it
        // and the cf byte names a column family.
        let r = self.rest;
        let cf = ColumnFamily::try_from(r[0]).ok()?;
        let kind = r[1];
        let version = u64::from_le_bytes(r[2..OP_FIXED_LEN].try_into().ok()?);
        let mut rest = &r[OP_FIXED_LEN..];
        let key = take_bytes(&mut rest)?;
        let user_meta = take_bytes(&mut rest)?;
        let value = if kind == KIND_PUT {
            Some(take_bytes(&mut rest)?)
        } else {
            None
        };
        self.rest = rest;
        Some(Op {
            cf,
            key,
            version,
            user_meta,
            value,
        })
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    let len = u32::try_from(b.len()).expect("a write batch field is under 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(b);
}

/// Takes one length-prefixed field off the front of `data`.
fn take_bytes<'a>(data: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (len, rest) = data.split_first_chunk::<4>()?;
    let len = u32::from_le_bytes(*len) as usize;
    if rest.len() < len {
        return None;
    }
    let (field, rest) = rest.split_at(len);
    *data = rest;
    Some(field)
}

fn skip_bytes(data: &mut &[u8]) -> Option<()> {
    take_bytes(data).map(|_| ())
}

/// The write-batch part of the `wal_record` fuzz check (a WAL record's payload is a batch):
/// an accepted batch walks to as many ops as it counts, and appending them to a new batch gives
/// back the same bytes (one encoding per content, and `ops` reads what `decode` checked).
pub(crate) fn fuzz_check(payload: &[u8]) {
    let Ok(batch) = WriteBatch::decode(payload) else {
        return;
    };
    let mut again = WriteBatch::new();
    for op in batch.ops() {
        again.push(op.cf, op.key, op.version, op.user_meta, op.value);
    }
    assert_eq!(
        again.len(),
        batch.len(),
        "the ops walked differ from the count"
    );
    assert!(
        again.as_bytes() == payload,
        "re-encoding a decoded batch changed the bytes"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type ModelOp = (ColumnFamily, Vec<u8>, u64, Vec<u8>, Option<Vec<u8>>);

    fn op_strategy() -> impl Strategy<Value = ModelOp> {
        (
            0u8..3,
            prop::collection::vec(any::<u8>(), 0..8),
            any::<u64>(),
            prop::collection::vec(any::<u8>(), 0..4),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..16)),
        )
            .prop_map(|(cf, k, v, m, val)| {
                let cf = ColumnFamily::try_from(cf).expect("0..3 names a column family");
                (cf, k, v, m, val)
            })
    }

    fn build(ops: &[ModelOp]) -> WriteBatch {
        let mut b = WriteBatch::new();
        for (cf, k, v, m, val) in ops {
            match val {
                Some(val) => b.put(*cf, k, *v, m, val),
                None => b.delete(*cf, k, *v, m),
            };
        }
        b
    }

    fn model_of(b: &WriteBatch) -> Vec<ModelOp> {
        b.ops()
            .map(|o| {
                let value = o.value.map(<[u8]>::to_vec);
                (o.cf, o.key.to_vec(), o.version, o.user_meta.to_vec(), value)
            })
            .collect()
    }

    proptest! {
        #[test]
        fn ops_return_what_was_appended_in_order(ops in prop::collection::vec(op_strategy(), 0..8)) {
            let b = build(&ops);
            prop_assert_eq!(b.len(), ops.len());
            prop_assert_eq!(b.is_empty(), ops.is_empty());
            prop_assert_eq!(model_of(&b), ops);
        }

        #[test]
        fn batch_round_trips_and_every_truncation_fails(ops in prop::collection::vec(op_strategy(), 0..8)) {
            let b = build(&ops);
            let enc = b.encode();
            prop_assert_eq!(enc.len(), b.size());
            let decoded = WriteBatch::decode(&enc).unwrap();
            prop_assert_eq!(model_of(&decoded), ops);
            prop_assert_eq!(&decoded, &b);
            prop_assert_eq!(WriteBatch::from_vec(enc.clone()).unwrap(), b);
            for len in 0..enc.len() {
                prop_assert!(WriteBatch::decode(&enc[..len]).is_err());
                prop_assert!(WriteBatch::from_vec(enc[..len].to_vec()).is_err());
            }
        }

        #[test]
        fn a_decoded_batch_takes_more_ops(
            first in prop::collection::vec(op_strategy(), 0..6),
            second in prop::collection::vec(op_strategy(), 0..6),
        ) {
            let mut b = WriteBatch::decode(&build(&first).encode()).unwrap();
            for (cf, k, v, m, val) in &second {
                match val {
                    Some(val) => b.put(*cf, k, *v, m, val),
                    None => b.delete(*cf, k, *v, m),
                };
            }
            let all: Vec<ModelOp> = first.into_iter().chain(second).collect();
            prop_assert_eq!(&b, &build(&all));
            prop_assert_eq!(model_of(&b), all);
        }
    }

    #[test]
    fn the_encoding_of_an_empty_batch_is_its_header() {
        let b = WriteBatch::new();
        assert_eq!(b.as_bytes(), &[BATCH_FORMAT_VERSION, 0, 0, 0, 0]);
        assert_eq!(WriteBatch::decode(b.as_bytes()).unwrap(), b);
    }

    #[test]
    fn the_layout_matches_the_documented_one_byte_for_byte() {
        let mut b = WriteBatch::new();
        b.put(ColumnFamily::Write, b"k", 7, b"m", b"vv");
        b.delete(ColumnFamily::Lock, b"", 0, b"");
        let mut want = vec![BATCH_FORMAT_VERSION, 2, 0, 0, 0];
        want.extend([ColumnFamily::Write.index() as u8, KIND_PUT]);
        want.extend(7u64.to_le_bytes());
        want.extend([1, 0, 0, 0, b'k', 1, 0, 0, 0, b'm', 2, 0, 0, 0, b'v', b'v']);
        want.extend([ColumnFamily::Lock.index() as u8, KIND_DELETE]);
        want.extend(0u64.to_le_bytes());
        want.extend([0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(b.as_bytes(), &want[..]);
    }

    #[test]
    fn decode_names_what_is_wrong() {
        let mut b = WriteBatch::new();
        b.put(ColumnFamily::Write, b"k", 1, b"", b"v");
        let good = b.encode();
        let mut bad_cf = good.clone();
        bad_cf[HEADER_LEN] = 9;
        assert!(WriteBatch::decode(&bad_cf).unwrap_err().contains("op=0"));
        let mut bad_kind = good.clone();
        bad_kind[HEADER_LEN + 1] = 2;
        assert!(
            WriteBatch::decode(&bad_kind)
                .unwrap_err()
                .contains("unknown op kind")
        );
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(
            WriteBatch::decode(&trailing)
                .unwrap_err()
                .contains("trailing bytes")
        );
        let mut big_count = good;
        big_count[1..HEADER_LEN].copy_from_slice(&1000u32.to_le_bytes());
        assert!(
            WriteBatch::decode(&big_count)
                .unwrap_err()
                .contains("op count exceeds")
        );
    }
}
