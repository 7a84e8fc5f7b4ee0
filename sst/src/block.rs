//! Data blocks: the logical (uncompressed) layout of a run of entries.
//!
//! Two layouts, chosen by the table's format version (in its footer, see
//! [`crate::footer::FormatVersion`]); a [`Block`] knows which one it holds.
//!
//! Format version 1:
//!
//! ```text
//! block   := entry{n} offsets count
//! entry   := shared:varint unshared:varint suffix:[u8; unshared]
//!            version:u64le flags:u8 [old_block:varint if flags & HAS_OLD]
//!            meta_len:varint meta:[u8; meta_len] value_len:varint value:[u8; value_len]
//! offsets := n × u32le, the byte offset of each entry from the block start
//! count   := n:u32le   (n >= 1)
//! ```
//!
//! Format version 2 spends ~8 bytes less per entry where version 1 wasted them: a version is a
//! zigzag varint of its difference from the block's base version (the first entry's: versions
//! in one block are usually close, so 1-3 bytes instead of 8), an empty user meta is a flag
//! instead of a length byte, and the offsets are u16 when the entries fit in 64 KiB:
//!
//! ```text
//! block   := entry{n} offsets base_version:u64le count
//! entry   := shared:varint unshared:varint suffix:[u8; unshared]
//!            flags:u8 version_delta:varint [old_block:varint if flags & HAS_OLD]
//!            [meta_len:varint meta:[u8; meta_len]  unless flags & NO_META]
//!            value_len:varint value:[u8; value_len]
//! version_delta := zigzag(version - base_version), the difference wrapping in 64 bits
//! offsets := n × u16le, or n × u32le if count has bit 31 (WIDE) set
//! count   := n | WIDE?:u32le   (1 <= n < 2^31)
//! ```
//!
//! In both, keys are prefix-compressed against the block's **first key** (not the previous
//! key), so every entry decodes on its own and a lookup binary-searches the offset array
//! directly, with no restart points. The first entry has `shared = 0`. Record keys of one table
//! share long prefixes (`t{table_id}_r`), which is where the saving comes from.
//!
//! `flags`: bit 0 = tombstone, bit 1 = the key has older versions in the old-version blocks and
//! `old_block` is the index (in the old-version index) of the block holding the newest of them,
//! bit 2 (version 2 only) = the user meta is empty and not stored. Old-version blocks use the
//! same layout with entries ordered by (key asc, version desc) and never set `HAS_OLD`.

use bytes::Bytes;

use crate::error::Corrupt;
use crate::footer::FormatVersion;
use crate::varint;

pub(crate) const FLAG_TOMBSTONE: u8 = 1;
pub(crate) const FLAG_HAS_OLD: u8 = 2;
/// Version 2: the entry's user meta is empty, and no meta length follows.
const FLAG_NO_META: u8 = 4;
const KNOWN_FLAGS_V1: u8 = FLAG_TOMBSTONE | FLAG_HAS_OLD;
const KNOWN_FLAGS_V2: u8 = FLAG_TOMBSTONE | FLAG_HAS_OLD | FLAG_NO_META;
/// Version 2: bit 31 of the count says the offsets are u32 (the entries exceed 64 KiB).
const WIDE_OFFSETS: u32 = 1 << 31;

/// One version of a key as stored in a table. Byte fields are zero-copy slices of the block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub version: u64,
    pub user_meta: Bytes,
    pub value: Bytes,
    pub tombstone: bool,
}

fn zigzag(delta: u64) -> u64 {
    (delta << 1) ^ ((delta as i64 >> 63) as u64)
}

fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// Accumulates entries into one logical block.
pub(crate) struct BlockBuilder {
    format: FormatVersion,
    buf: Vec<u8>,
    offsets: Vec<u32>,
    first_key: Vec<u8>,
    /// Version 2: the first entry's version, which the others are stored against.
    base_version: u64,
}

impl BlockBuilder {
    pub fn new(format: FormatVersion) -> BlockBuilder {
        BlockBuilder {
            format,
            buf: Vec::new(),
            offsets: Vec::new(),
            first_key: Vec::new(),
            base_version: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Bytes the block would take if finished now.
    pub fn estimated_size(&self) -> usize {
        match self.format {
            FormatVersion::V1 => self.buf.len() + self.offsets.len() * 4 + 4,
            FormatVersion::V2 => {
                let width = if self.buf.len() <= usize::from(u16::MAX) {
                    2
                } else {
                    4
                };
                self.buf.len() + self.offsets.len() * width + 8 + 4
            }
        }
    }

    pub fn first_key(&self) -> &[u8] {
        &self.first_key
    }

    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &mut self,
        key: &[u8],
        version: u64,
        tombstone: bool,
        old_block: Option<u32>,
        user_meta: &[u8],
        value: &[u8],
    ) {
        let shared = if self.offsets.is_empty() {
            self.first_key.clear();
            self.first_key.extend_from_slice(key);
            self.base_version = version;
            0
        } else {
            common_prefix(&self.first_key, key)
        };
        self.offsets.push(self.buf.len() as u32);
        varint::put_u32(&mut self.buf, shared as u32);
        varint::put_u32(&mut self.buf, (key.len() - shared) as u32);
        self.buf.extend_from_slice(&key[shared..]);
        let mut flags = 0;
        if tombstone {
            flags |= FLAG_TOMBSTONE;
        }
        if old_block.is_some() {
            flags |= FLAG_HAS_OLD;
        }
        match self.format {
            FormatVersion::V1 => {
                self.buf.extend_from_slice(&version.to_le_bytes());
                self.buf.push(flags);
            }
            FormatVersion::V2 => {
                if user_meta.is_empty() {
                    flags |= FLAG_NO_META;
                }
                self.buf.push(flags);
                varint::put_u64(
                    &mut self.buf,
                    zigzag(version.wrapping_sub(self.base_version)),
                );
            }
        }
        if let Some(b) = old_block {
            varint::put_u32(&mut self.buf, b);
        }
        if flags & FLAG_NO_META == 0 {
            varint::put_len_prefixed(&mut self.buf, user_meta);
        }
        varint::put_len_prefixed(&mut self.buf, value);
    }

    /// Finishes the block into `out` (cleared first) and resets the builder.
    pub fn finish_into(&mut self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&self.buf);
        let count = self.offsets.len() as u32;
        match self.format {
            FormatVersion::V1 => {
                for off in &self.offsets {
                    out.extend_from_slice(&off.to_le_bytes());
                }
                out.extend_from_slice(&count.to_le_bytes());
            }
            FormatVersion::V2 => {
                let wide = self.buf.len() > usize::from(u16::MAX);
                for &off in &self.offsets {
                    if wide {
                        out.extend_from_slice(&off.to_le_bytes());
                    } else {
                        out.extend_from_slice(&(off as u16).to_le_bytes());
                    }
                }
                out.extend_from_slice(&self.base_version.to_le_bytes());
                let flag = if wide { WIDE_OFFSETS } else { 0 };
                out.extend_from_slice(&(count | flag).to_le_bytes());
            }
        }
        self.buf.clear();
        self.offsets.clear();
    }
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A decoded entry: positions inside the block, resolved lazily into bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryPos {
    pub shared: usize,
    pub suffix: (usize, usize),
    pub version: u64,
    pub flags: u8,
    pub old_block: u32,
    pub meta: (usize, usize),
    pub value: (usize, usize),
}

const _: () = assert!(std::mem::size_of::<crate::error::Error>() <= 40);

impl EntryPos {
    pub fn tombstone(&self) -> bool {
        self.flags & FLAG_TOMBSTONE != 0
    }
    pub fn has_old(&self) -> bool {
        self.flags & FLAG_HAS_OLD != 0
    }
}

/// A verified logical block, ready for binary search. Cheap to clone (shares the bytes).
#[derive(Clone, Debug)]
pub struct Block {
    data: Bytes,
    /// Start of the offset array.
    offsets_at: usize,
    /// Bytes per offset: 4 (version 1, or version 2 wide) or 2.
    offset_width: usize,
    count: usize,
    first_key: (usize, usize),
    /// The layout's version: decides where the version and the meta are.
    format: FormatVersion,
    /// Version 2: what entries' versions are stored against (0 in version 1).
    base_version: u64,
}

impl Block {
    /// Parses the trailer of a logical block of a table of `format`. Entries are validated
    /// when they are read, so a corrupt entry is reported by the read that meets it.
    pub fn decode(data: Bytes, format: FormatVersion) -> Result<Block, Corrupt> {
        let len = data.len();
        if len < 4 {
            return Err(Corrupt("block shorter than its entry count"));
        }
        let mut pos = len - 4;
        let raw_count = varint::get_fixed_u32(&data, &mut pos).ok_or(Corrupt("block count"))?;
        let (count, offset_width, trailer, base_version) = match format {
            FormatVersion::V1 => (raw_count as usize, 4, 4, 0),
            FormatVersion::V2 => {
                if len < 12 {
                    return Err(Corrupt("block shorter than its trailer"));
                }
                let mut bpos = len - 12;
                let base =
                    varint::get_fixed_u64(&data, &mut bpos).ok_or(Corrupt("block base version"))?;
                let width = if raw_count & WIDE_OFFSETS != 0 { 4 } else { 2 };
                ((raw_count & !WIDE_OFFSETS) as usize, width, 12, base)
            }
        };
        if count == 0 {
            return Err(Corrupt("block has no entries"));
        }
        let offsets_bytes = count
            .checked_mul(offset_width)
            .filter(|b| *b <= len - trailer)
            .ok_or(Corrupt("block entry count exceeds block size"))?;
        let offsets_at = len - trailer - offsets_bytes;
        let mut block = Block {
            data,
            offsets_at,
            offset_width,
            count,
            first_key: (0, 0),
            format,
            base_version,
        };
        let first = block.entry(0)?;
        if first.shared != 0 {
            return Err(Corrupt("first entry of block shares a prefix"));
        }
        block.first_key = first.suffix;
        Ok(block)
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn data(&self) -> &Bytes {
        &self.data
    }

    pub fn first_key(&self) -> &[u8] {
        &self.data[self.first_key.0..self.first_key.1]
    }

    /// Decodes the entry at index `i`, checking every bound.
    #[inline(always)]
    pub(crate) fn entry(&self, i: usize) -> Result<EntryPos, Corrupt> {
        let d = &self.data[..self.offsets_at];
        let mut op = self.offsets_at + i * self.offset_width;
        let mut pos = if self.offset_width == 2 {
            let b = self.data.get(op..op + 2).ok_or(Corrupt("entry offset"))?;
            usize::from(u16::from_le_bytes([b[0], b[1]]))
        } else {
            varint::get_fixed_u32(&self.data, &mut op).ok_or(Corrupt("entry offset"))? as usize
        };
        let bad = Corrupt("entry out of bounds");
        let shared = varint::get_u32(d, &mut pos).ok_or(bad)? as usize;
        let unshared = varint::get_u32(d, &mut pos).ok_or(bad)? as usize;
        let s0 = pos;
        varint::get_slice(d, &mut pos, unshared).ok_or(bad)?;
        let suffix = (s0, pos);
        let (version, flags) = match self.format {
            FormatVersion::V1 => {
                let version = varint::get_fixed_u64(d, &mut pos).ok_or(bad)?;
                let flags = *d.get(pos).ok_or(bad)?;
                pos += 1;
                if flags & !KNOWN_FLAGS_V1 != 0 {
                    return Err(Corrupt("unknown entry flags"));
                }
                (version, flags)
            }
            FormatVersion::V2 => {
                let flags = *d.get(pos).ok_or(bad)?;
                pos += 1;
                if flags & !KNOWN_FLAGS_V2 != 0 {
                    return Err(Corrupt("unknown entry flags"));
                }
                let delta = unzigzag(varint::get_u64(d, &mut pos).ok_or(bad)?);
                (self.base_version.wrapping_add(delta), flags)
            }
        };
        let old_block = if flags & FLAG_HAS_OLD != 0 {
            varint::get_u32(d, &mut pos).ok_or(bad)?
        } else {
            0
        };
        let ml = if flags & FLAG_NO_META != 0 {
            0
        } else {
            varint::get_u32(d, &mut pos).ok_or(bad)? as usize
        };
        let m0 = pos;
        varint::get_slice(d, &mut pos, ml).ok_or(bad)?;
        let vl = varint::get_u32(d, &mut pos).ok_or(bad)? as usize;
        let v0 = pos;
        varint::get_slice(d, &mut pos, vl).ok_or(bad)?;
        if i > 0 && shared > self.first_key.1 - self.first_key.0 {
            return Err(Corrupt("entry shares more than the first key"));
        }
        Ok(EntryPos {
            shared,
            suffix,
            version,
            flags,
            old_block,
            meta: (m0, m0 + ml),
            value: (v0, v0 + vl),
        })
    }

    /// Writes the full key of `e` into `buf`.
    #[inline]
    pub(crate) fn key_into(&self, e: &EntryPos, buf: &mut Vec<u8>) {
        buf.clear();
        buf.extend_from_slice(&self.first_key()[..e.shared]);
        buf.extend_from_slice(&self.data[e.suffix.0..e.suffix.1]);
    }

    /// Like [`Self::key_into`] for a scan: `known` leading bytes of `buf` are already equal to
    /// this block's first key (the previous key of the same block), so only the part past the
    /// shared prefix is copied. Returns the new `known`.
    #[inline]
    pub(crate) fn key_into_after(&self, e: &EntryPos, buf: &mut Vec<u8>, known: usize) -> usize {
        if e.shared <= known {
            buf.truncate(e.shared);
        } else {
            buf.clear();
            buf.extend_from_slice(&self.first_key()[..e.shared]);
        }
        buf.extend_from_slice(&self.data[e.suffix.0..e.suffix.1]);
        e.shared
    }

    /// Compares the key of `e` with `target` without materialising it.
    #[inline]
    pub(crate) fn cmp_key(&self, e: &EntryPos, target: &[u8]) -> std::cmp::Ordering {
        let prefix = &self.first_key()[..e.shared];
        let suffix = &self.data[e.suffix.0..e.suffix.1];
        let n = prefix.len().min(target.len());
        match prefix.cmp(&target[..n]) {
            std::cmp::Ordering::Equal => {}
            other => return other,
        }
        if n < prefix.len() {
            return std::cmp::Ordering::Greater;
        }
        suffix.cmp(&target[n..])
    }

    pub(crate) fn version_of(&self, e: &EntryPos) -> Version {
        Version {
            version: e.version,
            user_meta: self.data.slice(e.meta.0..e.meta.1),
            value: self.data.slice(e.value.0..e.value.1),
            tombstone: e.tombstone(),
        }
    }

    /// Index of the first entry whose key is >= `key` (`len()` if none).
    pub(crate) fn lower_bound(&self, key: &[u8]) -> Result<usize, Corrupt> {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let e = self.entry(mid)?;
            if self.cmp_key(&e, key) == std::cmp::Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// Index of the first entry whose key is > `key`.
    pub(crate) fn upper_bound(&self, key: &[u8]) -> Result<usize, Corrupt> {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let e = self.entry(mid)?;
            if self.cmp_key(&e, key) == std::cmp::Ordering::Greater {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(entries: &[(&[u8], u64)]) -> Block {
        let mut b = BlockBuilder::new(FormatVersion::NEWEST);
        for (k, v) in entries {
            b.add(k, *v, false, None, b"m", b"value");
        }
        let mut out = Vec::new();
        b.finish_into(&mut out);
        Block::decode(Bytes::from(out), FormatVersion::NEWEST).expect("valid block")
    }

    #[test]
    fn keys_decode_with_prefix_from_first_key() {
        let block = build(&[(b"t1_r0001", 9), (b"t1_r0002", 8), (b"t2", 7)]);
        let mut buf = Vec::new();
        let keys: Vec<Vec<u8>> = (0..block.len())
            .map(|i| {
                let e = block.entry(i).unwrap();
                block.key_into(&e, &mut buf);
                buf.clone()
            })
            .collect();
        assert_eq!(
            keys,
            vec![b"t1_r0001".to_vec(), b"t1_r0002".to_vec(), b"t2".to_vec()]
        );
        assert_eq!(block.lower_bound(b"t1_r0002").unwrap(), 1);
        assert_eq!(block.lower_bound(b"t1_r00015").unwrap(), 1);
        assert_eq!(block.upper_bound(b"t1_r0002").unwrap(), 2);
        assert_eq!(block.lower_bound(b"t3").unwrap(), 3);
    }

    #[test]
    fn empty_and_short_blocks_are_corrupt() {
        for format in FormatVersion::ALL {
            let decode = |b: &'static [u8]| Block::decode(Bytes::from_static(b), format);
            assert!(decode(&[]).is_err());
            assert!(decode(&[0, 0, 0, 0]).is_err());
            assert!(decode(&[5, 0, 0, 0]).is_err());
            assert!(decode(&[0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0]).is_err());
        }
    }
}
