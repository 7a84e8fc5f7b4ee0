//! Table properties: what a table holds, readable without touching its data blocks. The engine
//! uses them for compaction picking (sizes), newer-timestamp checks (`max_ts`) and range
//! pruning (`smallest`/`biggest`).
//!
//! ```text
//! properties := smallest:len_prefixed biggest:len_prefixed
//!               entries:u64le old_entries:u64le tombstones:u64le
//!               max_ts:u64le min_ts:u64le key_bytes:u64le value_bytes:u64le
//!               block_count:u32le old_block_count:u32le
//!               compression:u8 compression_level:i32le
//! ```
//!
//! `entries` counts distinct keys (main entries); `old_entries` the versions stored in
//! old-version blocks; `tombstones` every tombstone version; `key_bytes` and `value_bytes` sum
//! over all versions (value bytes include user meta). An empty table has empty keys and
//! `min_ts = u64::MAX`, `max_ts = 0`.

use crate::error::Corrupt;
use crate::varint;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Properties {
    pub smallest: Vec<u8>,
    pub biggest: Vec<u8>,
    pub entries: u64,
    pub old_entries: u64,
    pub tombstones: u64,
    pub max_ts: u64,
    pub min_ts: u64,
    pub key_bytes: u64,
    pub value_bytes: u64,
    pub block_count: u32,
    pub old_block_count: u32,
    /// Compression the table was written with (0 none, 1 zstd) and its level.
    pub compression: u8,
    pub compression_level: i32,
}

impl Default for Properties {
    fn default() -> Self {
        Properties {
            smallest: Vec::new(),
            biggest: Vec::new(),
            entries: 0,
            old_entries: 0,
            tombstones: 0,
            max_ts: 0,
            min_ts: u64::MAX,
            key_bytes: 0,
            value_bytes: 0,
            block_count: 0,
            old_block_count: 0,
            compression: 0,
            compression_level: 0,
        }
    }
}

impl Properties {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(80 + self.smallest.len() + self.biggest.len());
        varint::put_len_prefixed(&mut out, &self.smallest);
        varint::put_len_prefixed(&mut out, &self.biggest);
        for v in [
            self.entries,
            self.old_entries,
            self.tombstones,
            self.max_ts,
            self.min_ts,
            self.key_bytes,
            self.value_bytes,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.block_count.to_le_bytes());
        out.extend_from_slice(&self.old_block_count.to_le_bytes());
        out.push(self.compression);
        out.extend_from_slice(&self.compression_level.to_le_bytes());
        out
    }

    pub fn decode(data: &[u8]) -> Result<Properties, Corrupt> {
        let bad = Corrupt("properties truncated");
        let mut pos = 0;
        let smallest = varint::get_len_prefixed(data, &mut pos)
            .ok_or(bad)?
            .to_vec();
        let biggest = varint::get_len_prefixed(data, &mut pos)
            .ok_or(bad)?
            .to_vec();
        let mut u64s = [0u64; 7];
        for v in &mut u64s {
            *v = varint::get_fixed_u64(data, &mut pos).ok_or(bad)?;
        }
        let block_count = varint::get_fixed_u32(data, &mut pos).ok_or(bad)?;
        let old_block_count = varint::get_fixed_u32(data, &mut pos).ok_or(bad)?;
        let compression = *data.get(pos).ok_or(bad)?;
        pos += 1;
        let level = varint::get_fixed_u32(data, &mut pos).ok_or(bad)? as i32;
        if pos != data.len() {
            return Err(Corrupt("trailing bytes after properties"));
        }
        let [
            entries,
            old_entries,
            tombstones,
            max_ts,
            min_ts,
            key_bytes,
            value_bytes,
        ] = u64s;
        Ok(Properties {
            smallest,
            biggest,
            entries,
            old_entries,
            tombstones,
            max_ts,
            min_ts,
            key_bytes,
            value_bytes,
            block_count,
            old_block_count,
            compression,
            compression_level: level,
        })
    }
}
