//! A main data block decoded whole: the block-at-a-time form long scans read.
//!
//! A row-at-a-time cursor decodes one entry, materialises its key and checks its version each
//! time the caller asks for the next row, through the state machine of [`crate::TableIter`].
//! A scan that reads the whole block anyway does better decoding every entry in one tight loop
//! into arrays (full keys back to back, versions, flags, meta and value positions) and then
//! walking the arrays: no per-entry cursor state, no per-entry `Result` from a cursor, keys
//! copied once. [`crate::TableIter::next_run`] is the API over it; point reads and seeks keep
//! the row-at-a-time path, which decodes only the entries they touch.

use crate::block::{Block, FLAG_TOMBSTONE};
use crate::error::Corrupt;

/// The decoded entries of one block. Reused across blocks: decoding clears the arrays and
/// keeps their capacity, so a scan allocates only while the arrays grow.
#[derive(Default)]
pub(crate) struct BlockRows {
    /// Every full key, back to back; key `i` ends at `rows[i].key_end` and starts where key
    /// `i - 1` ends.
    keys: Vec<u8>,
    /// One record per entry rather than one array per field: the decode loop does one push
    /// (one capacity check) per entry, and a row's fields share a cache line when it is read.
    rows: Vec<RowPos>,
}

/// Where entry `i`'s fields are: its key's end in [`BlockRows::keys`], and `(start, end)` of
/// the user meta and the value inside the block's bytes.
#[derive(Clone, Copy)]
struct RowPos {
    version: u64,
    key_end: u32,
    meta: (u32, u32),
    value: (u32, u32),
    flags: u8,
}

impl BlockRows {
    /// Decodes every entry of `block`, checking every bound as the row-at-a-time path does (the
    /// same [`Block::entry`] validation, so a corrupt entry is reported the same way).
    pub fn decode(&mut self, block: &Block) -> Result<(), Corrupt> {
        let n = block.len();
        self.keys.clear();
        self.rows.clear();
        self.rows.reserve(n);
        let first = block.first_key();
        let data = block.data();
        for i in 0..n {
            let e = block.entry(i)?;
            self.keys.extend_from_slice(&first[..e.shared]);
            self.keys.extend_from_slice(&data[e.suffix.0..e.suffix.1]);
            self.rows.push(RowPos {
                version: e.version,
                key_end: self.keys.len() as u32,
                meta: (e.meta.0 as u32, e.meta.1 as u32),
                value: (e.value.0 as u32, e.value.1 as u32),
                flags: e.flags,
            });
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    #[inline(always)]
    pub fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 {
            0
        } else {
            self.rows[i - 1].key_end as usize
        };
        &self.keys[start..self.rows[i].key_end as usize]
    }

    #[inline(always)]
    pub fn version(&self, i: usize) -> u64 {
        self.rows[i].version
    }

    #[inline(always)]
    pub fn is_tombstone(&self, i: usize) -> bool {
        self.rows[i].flags & FLAG_TOMBSTONE != 0
    }

    /// The user meta of entry `i`, a slice of `data` (the block's bytes).
    #[inline(always)]
    pub fn user_meta<'d>(&self, data: &'d [u8], i: usize) -> &'d [u8] {
        let (s, e) = self.rows[i].meta;
        &data[s as usize..e as usize]
    }

    #[inline(always)]
    pub fn value<'d>(&self, data: &'d [u8], i: usize) -> &'d [u8] {
        let (s, e) = self.rows[i].value;
        &data[s as usize..e as usize]
    }
}

/// Where a run of rows must stop: a key the run may not reach (or pass, in reverse). A merging
/// reader passes the nearest key of its other sources, so a run never overtakes a row another
/// source must be merged with, or its scan's bound.
#[derive(Debug, Clone, Copy)]
pub struct RunBound<'a> {
    pub key: &'a [u8],
    /// Whether a row whose key equals `key` may still be part of the run (a scan's inclusive
    /// lower bound in reverse); otherwise the run stops before it.
    pub inclusive: bool,
}

impl RunBound<'_> {
    /// Whether `key` lies before the bound in the run's direction.
    #[inline(always)]
    pub fn admits(&self, key: &[u8], reverse: bool) -> bool {
        let ord = key.cmp(self.key);
        if ord.is_eq() {
            return self.inclusive;
        }
        if reverse { ord.is_gt() } else { ord.is_lt() }
    }
}

/// One row of a run, handed to the visitor of [`crate::TableIter::next_run`]. Slices borrow the
/// decoded block; they are valid for the call only.
#[derive(Debug, Clone, Copy)]
pub struct RunRow<'a> {
    pub key: &'a [u8],
    pub version: u64,
    pub user_meta: &'a [u8],
    pub value: &'a [u8],
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::block::BlockBuilder;
    use crate::footer::FormatVersion;

    #[test]
    fn decoded_rows_equal_the_entries_read_one_at_a_time() {
        let keys: Vec<Vec<u8>> = (0..50u32)
            .map(|i| format!("t1_r{:06}", i * 7).into_bytes())
            .chain([b"t2".to_vec(), b"u".to_vec()])
            .collect();
        // Versions above and below the first (negative and wrapping deltas in version 2),
        // empty and non-empty metas (a flag in version 2).
        let version = |i: usize| match i % 4 {
            0 => 100 + i as u64,
            1 => u64::MAX - i as u64,
            2 => 3,
            _ => 100 - i as u64,
        };
        let meta = |i: usize| -> &'static [u8] { if i.is_multiple_of(2) { b"meta" } else { b"" } };
        for format in FormatVersion::ALL {
            let mut b = BlockBuilder::new(format);
            for (i, k) in keys.iter().enumerate() {
                let value = vec![i as u8; i % 5];
                b.add(k, version(i), i % 3 == 0, None, meta(i), &value);
            }
            let mut out = Vec::new();
            b.finish_into(&mut out);
            let block = Block::decode(Bytes::from(out), format).unwrap();
            let mut rows = BlockRows::default();
            // Decoding twice reuses the arrays and gives the same rows.
            rows.decode(&block).unwrap();
            rows.decode(&block).unwrap();
            assert_eq!(rows.len(), keys.len());
            let mut buf = Vec::new();
            for (i, want_key) in keys.iter().enumerate() {
                let e = block.entry(i).unwrap();
                block.key_into(&e, &mut buf);
                assert_eq!(rows.key(i), want_key.as_slice());
                assert_eq!(rows.key(i), buf.as_slice());
                assert_eq!(rows.version(i), version(i), "{format:?} entry {i}");
                assert_eq!(e.version, version(i));
                assert_eq!(rows.is_tombstone(i), i % 3 == 0);
                assert_eq!(rows.user_meta(block.data(), i), meta(i));
                assert_eq!(rows.value(block.data(), i), vec![i as u8; i % 5].as_slice());
            }
        }
    }

    #[test]
    fn a_bound_admits_keys_before_it_in_the_run_direction() {
        let b = RunBound {
            key: b"m",
            inclusive: false,
        };
        assert!(b.admits(b"a", false));
        assert!(!b.admits(b"m", false));
        assert!(!b.admits(b"z", false));
        assert!(b.admits(b"z", true));
        assert!(!b.admits(b"a", true));
        let incl = RunBound {
            key: b"m",
            inclusive: true,
        };
        assert!(incl.admits(b"m", true));
        assert!(incl.admits(b"m", false));
    }
}
