//! Block index: the first key and the address of every block of one kind (data or old-version).
//!
//! ```text
//! index := count:u32le (entry){count}
//! entry := key_len:varint key offset:u64le len:u32le
//! ```
//!
//! `offset` is relative to the start of the table section and `len` includes the block frame's
//! trailer. Blocks are listed in key order.

use bytes::Bytes;

use crate::error::Corrupt;
use crate::varint;

/// Where a block lives in its section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHandle {
    pub offset: u64,
    pub len: u32,
}

pub(crate) fn encode(entries: &[(Vec<u8>, BlockHandle)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (key, h) in entries {
        varint::put_len_prefixed(&mut out, key);
        out.extend_from_slice(&h.offset.to_le_bytes());
        out.extend_from_slice(&h.len.to_le_bytes());
    }
    out
}

/// A decoded index. Keys are zero-copy slices of the index block.
#[derive(Debug, Clone, Default)]
pub struct Index {
    keys: Vec<Bytes>,
    handles: Vec<BlockHandle>,
    /// `cumulative[i]` = total length of blocks `0..i`, for range size estimates.
    cumulative: Vec<u64>,
}

impl Index {
    pub fn decode(data: Bytes) -> Result<Index, Corrupt> {
        let mut pos = 0;
        let count = varint::get_fixed_u32(&data, &mut pos).ok_or(Corrupt("index count"))? as usize;
        // Each entry takes at least 13 bytes: never reserve more than the input can hold.
        if count > (data.len() - pos) / 13 {
            return Err(Corrupt("index count exceeds index size"));
        }
        let mut keys = Vec::with_capacity(count);
        let mut handles = Vec::with_capacity(count);
        let mut cumulative = Vec::with_capacity(count + 1);
        cumulative.push(0u64);
        let bad = Corrupt("index entry out of bounds");
        for _ in 0..count {
            let klen = varint::get_u32(&data, &mut pos).ok_or(bad)? as usize;
            let k0 = pos;
            varint::get_slice(&data, &mut pos, klen).ok_or(bad)?;
            let key = data.slice(k0..pos);
            let offset = varint::get_fixed_u64(&data, &mut pos).ok_or(bad)?;
            let len = varint::get_fixed_u32(&data, &mut pos).ok_or(bad)?;
            if let Some(prev) = keys.last()
                && *prev > key
            {
                return Err(Corrupt("index keys out of order"));
            }
            keys.push(key);
            handles.push(BlockHandle { offset, len });
            let last = *cumulative.last().unwrap_or(&0);
            cumulative.push(last + u64::from(len));
        }
        if pos != data.len() {
            return Err(Corrupt("trailing bytes after index"));
        }
        Ok(Index {
            keys,
            handles,
            cumulative,
        })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn handle(&self, i: usize) -> BlockHandle {
        self.handles[i]
    }

    pub fn first_key(&self, i: usize) -> &[u8] {
        &self.keys[i]
    }

    /// Index of the block that may hold `key`: the last block whose first key is <= `key`.
    /// `None` when `key` sorts before every block.
    pub fn find(&self, key: &[u8]) -> Option<usize> {
        let n = self.keys.partition_point(|k| k.as_ref() <= key);
        n.checked_sub(1)
    }

    /// Number of blocks whose first key is < `key`.
    pub fn count_before(&self, key: &[u8]) -> usize {
        self.keys.partition_point(|k| k.as_ref() < key)
    }

    /// Total length of blocks `from..to`.
    pub fn size_of(&self, from: usize, to: usize) -> u64 {
        self.cumulative[to] - self.cumulative[from]
    }

    pub fn handles(&self) -> &[BlockHandle] {
        &self.handles
    }
}
