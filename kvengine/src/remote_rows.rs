//! [`RemoteRows`]: the memtable rows a worker received with a remote snapshot, indexed.
//!
//! A snapshot rebuilt by [`crate::SnapAccess::from_remote`] never takes writes, so it does not
//! need a skiplist: the rows arrive sorted (key ascending, each key's versions oldest first, in
//! a layout of `changeset/src/memtable_data.rs`), and an index of where each row's parts sit is
//! enough to answer point reads (binary search) and to iterate in both directions. Building
//! that index is one pass over the rows with no copy of any value, where inserting every row
//! into a fresh skiplist cost several times the transfer itself.
//!
//! Values are always read in place from the received buffer. Keys and user metas are read in
//! place from a v1 buffer; a v2 buffer stores keys as shared prefixes and WRITE metas
//! compactly, so the index copies each distinct key and each meta into an arena of its own
//! (about 30 bytes a row, a fraction of the value bytes it does not copy).
//!
//! The index holds, per key, where the key sits and its first row; per row, its version and
//! where its user meta and value sit. A key's rows are adjacent and ascending by version, so a
//! read at `ts` lands on the last row of the key whose version is `<= ts`.
//!
//! Offsets are 32-bit: a buffer or an arena of 4 GiB or more is refused (a memtable is far
//! smaller).

use bytes::Bytes;
use changeset::ship_buffers::SHIP_BUFFERS;
use changeset::{ColumnFamily, MemtableDataFormat};

use crate::error::{Error, Result};
use crate::mvcc::records::WRITE_META_LEN;

/// `RowEntry::value_len` of a tombstone (whose value reads as empty whatever was shipped).
const TOMBSTONE: u32 = u32::MAX;

/// Where one key sits in the buffer, and its first row in [`RemoteRows::rows`].
#[derive(Clone, Copy, Debug)]
struct KeyEntry {
    off: u32,
    len: u32,
    first_row: u32,
}

/// One row: its version and where its user meta and value sit in the buffer.
#[derive(Clone, Copy, Debug)]
struct RowEntry {
    version: u64,
    meta_off: u32,
    meta_len: u32,
    value_off: u32,
    /// [`TOMBSTONE`] for a tombstone.
    value_len: u32,
}

/// The WRITE rows of a rebuilt snapshot, indexed over the received buffer (and the key and meta
/// arenas of a v2 buffer).
pub struct RemoteRows {
    data: Bytes,
    /// Where [`KeyEntry::off`] points: `data` for v1, the key arena for v2.
    key_bytes: Bytes,
    /// Where [`RowEntry::meta_off`] points: `data` for v1, the meta arena for v2.
    meta_bytes: Bytes,
    /// Ascending by key, no duplicates.
    keys: Vec<KeyEntry>,
    /// Key `i` owns `rows[keys[i].first_row..keys[i + 1].first_row]` (to the end for the last
    /// key), ascending by version.
    rows: Vec<RowEntry>,
    /// Highest version of any row (0 when empty).
    max_version: u64,
}

impl std::fmt::Debug for RemoteRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteRows")
            .field("keys", &self.keys.len())
            .field("rows", &self.rows.len())
            .field("bytes", &self.data.len())
            .field("max_version", &self.max_version)
            .finish()
    }
}

/// Appends `part` to `arena`; its offset, or `None` once the arena would reach 4 GiB.
fn arena_push(arena: &mut Vec<u8>, part: &[u8]) -> Option<u32> {
    let off = u32::try_from(arena.len()).ok()?;
    u32::try_from(arena.len() + part.len()).ok()?;
    match <&[u8; WRITE_META_LEN]>::try_from(part) {
        // A WRITE meta's length (nearly every meta is one): a copy of known length is a few
        // moves in line, where a length-varying one is a call to `memcpy`.
        Ok(meta) => arena.extend_from_slice(meta),
        Err(_) => arena.extend_from_slice(part),
    }
    Some(off)
}

/// Byte offset of `part` (a subslice of `base`) in `base`.
fn offset_in(base: &[u8], part: &[u8]) -> u32 {
    // Both pointers lie in the same allocation and `base` is shorter than 4 GiB (checked by
    // `RemoteRows::decode`), so the difference fits.
    (part.as_ptr() as usize - base.as_ptr() as usize) as u32
}

impl RemoteRows {
    /// Decodes and indexes `data` (memtable data as `SnapAccess::to_remote` produces it) for a
    /// shard covering `[start, end)` (empty `end` = unbounded).
    ///
    /// Errors: undecodable data is [`Error::RemoteMemtableData`]; rows a sender following the
    /// protocol never produces (another column family, a key outside the shard, keys not
    /// ascending, a buffer of 4 GiB or more) are [`Error::RemoteSnapshot`].
    pub(crate) fn decode(shard_id: u64, start: &[u8], end: &[u8], data: &Bytes) -> Result<Self> {
        let bad = |detail: String| Error::RemoteSnapshot { shard_id, detail };
        if data.len() >= u32::MAX as usize {
            return Err(bad(format!(
                "expected memtable data under 4 GiB, found len={}",
                data.len()
            )));
        }
        let outside = |key: &[u8], row: u64| {
            bad(format!(
                "expected keys inside the shard range, found key={key:?} row={row}"
            ))
        };
        let corrupt = |source| Error::RemoteMemtableData { shard_id, source };
        let mut iter = changeset::memtable_data::rows(data).map_err(corrupt)?;
        let in_place = iter.format() == MemtableDataFormat::V1;
        // The count is bounded by the body length, so the input justifies the allocations.
        // Every vector is sized up front: growing one by doubling copied it into fresh pages
        // at every step (a tenth of the decode in `stratus-bench txn-snapshot`). There are at
        // most as many keys as rows, and a v2 row's WRITE meta is 17 bytes (others are rare);
        // capacity never written costs no memory.
        let row_count = iter.row_count() as usize;
        let mut rows: Vec<RowEntry> = Vec::with_capacity(row_count);
        let mut keys: Vec<KeyEntry> = Vec::with_capacity(row_count);
        // The arenas come from the pool of shipping buffers, and go back to it with the
        // snapshot: a worker rebuilds snapshots again and again, and a fresh arena faulted in
        // every page it wrote.
        let mut key_arena = SHIP_BUFFERS.take(0);
        let mut meta_arena = if in_place {
            SHIP_BUFFERS.take(0)
        } else {
            SHIP_BUFFERS.take(row_count.saturating_mul(WRITE_META_LEN).min(data.len()))
        };
        let mut max_version = 0;
        let base: &[u8] = data;
        let key_range = |e: &KeyEntry| e.off as usize..e.off as usize + e.len as usize;
        let mut i = 0u64;
        while let Some(row) = iter.next_row_ordered() {
            // The cursor orders each key against the one before (for v2 and v3 from the
            // shared prefix it decoded, with no second comparison of the keys).
            let (row, order) = row.map_err(corrupt)?;
            if row.cf != ColumnFamily::Write {
                return Err(bad(format!(
                    "expected only write rows, found cf={} row={i}",
                    row.cf
                )));
            }
            // The decoder already refused a repeated key whose version does not ascend.
            if order.is_lt() {
                let source: &[u8] = if in_place { base } else { &key_arena };
                let last = keys.last().map_or(&[][..], |e| &source[key_range(e)]);
                return Err(bad(format!(
                    "expected keys in ascending order, found key={:?} after key={:?} row={i}",
                    row.key, last
                )));
            }
            if order.is_gt() {
                // Keys ascend, so only the first can fall below the range; the end is checked
                // once, on the last key, after the loop.
                if keys.is_empty() && row.key < start {
                    return Err(outside(row.key, i));
                }
                let off = if in_place {
                    offset_in(base, row.key)
                } else {
                    if keys.is_empty() {
                        // Keys of one range tend to share a length: a guess at the arena's
                        // size, bounded by the input.
                        let guess = row_count.saturating_mul(row.key.len()).min(data.len());
                        key_arena = SHIP_BUFFERS.take(guess);
                    }
                    arena_push(&mut key_arena, row.key).ok_or_else(|| {
                        bad("expected the keys to fit in 4 GiB, found more".to_owned())
                    })?
                };
                keys.push(KeyEntry {
                    off,
                    len: row.key.len() as u32,
                    first_row: rows.len() as u32,
                });
            }
            let meta_off = if in_place {
                offset_in(base, row.user_meta)
            } else {
                arena_push(&mut meta_arena, row.user_meta).ok_or_else(|| {
                    bad("expected the user metas to fit in 4 GiB, found more".to_owned())
                })?
            };
            max_version = max_version.max(row.version);
            rows.push(RowEntry {
                version: row.version,
                meta_off,
                meta_len: row.user_meta.len() as u32,
                value_off: offset_in(base, row.value),
                value_len: if row.tombstone {
                    TOMBSTONE
                } else {
                    row.value.len() as u32
                },
            });
            i += 1;
        }
        let (key_bytes, meta_bytes) = if in_place {
            (data.clone(), data.clone())
        } else {
            (key_arena.into_bytes(0), meta_arena.into_bytes(0))
        };
        let indexed = RemoteRows {
            data: data.clone(),
            key_bytes,
            meta_bytes,
            keys,
            rows,
            max_version,
        };
        let n = indexed.keys.len();
        if !end.is_empty() && n > 0 && indexed.key_at(n - 1) >= end {
            // The first key at or past the end is the row to report.
            let k = indexed.keys.partition_point(|e| indexed.key_of(e) < end);
            let row = u64::from(indexed.keys[k].first_row);
            return Err(outside(indexed.key_at(k), row));
        }
        Ok(indexed)
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Bytes of the received memtable data the rows are read from.
    pub fn encoded_len(&self) -> usize {
        self.data.len()
    }

    /// Highest version of any row (0 when empty): lets "is anything newer than ts here?" skip
    /// the rows without walking them.
    pub fn max_version(&self) -> u64 {
        self.max_version
    }

    fn key_of(&self, e: &KeyEntry) -> &[u8] {
        &self.key_bytes[e.off as usize..e.off as usize + e.len as usize]
    }

    fn key_at(&self, k: usize) -> &[u8] {
        self.key_of(&self.keys[k])
    }

    /// The rows of key `k`, as indexes into `rows`.
    fn rows_of(&self, k: usize) -> std::ops::Range<usize> {
        let first = self.keys[k].first_row as usize;
        let end = self
            .keys
            .get(k + 1)
            .map_or(self.rows.len(), |e| e.first_row as usize);
        first..end
    }

    /// The row of key `k` a read at `ts` lands on: its newest version `<= ts`.
    fn visible_row(&self, k: usize, ts: u64) -> Option<usize> {
        let range = self.rows_of(k);
        let below = self.rows[range.clone()].partition_point(|r| r.version <= ts);
        (below > 0).then(|| range.start + below - 1)
    }

    /// Index of the first key `>= key`.
    fn lower_bound(&self, key: &[u8]) -> usize {
        self.keys.partition_point(|e| self.key_of(e) < key)
    }

    fn version_at(&self, row: usize) -> RemoteVersion<'_> {
        RemoteVersion { rows: self, row }
    }

    /// The version of `key` a read at `ts` lands on (it may be a tombstone).
    pub fn get(&self, key: &[u8], ts: u64) -> Option<RemoteVersion<'_>> {
        let k = self.lower_bound(key);
        if k == self.keys.len() || self.key_at(k) != key {
            return None;
        }
        self.visible_row(k, ts).map(|row| self.version_at(row))
    }

    /// A cursor over the keys visible at `ts`; it starts unpositioned (seek first).
    pub fn iter(&self, ts: u64) -> RemoteRowsIter<'_> {
        RemoteRowsIter {
            rows: self,
            ts,
            pos: None,
        }
    }

    /// Every key `>= lower` in ascending order with all its versions.
    pub fn keys_from(&self, lower: &[u8]) -> impl Iterator<Item = RemoteKey<'_>> {
        (self.lower_bound(lower)..self.keys.len()).map(move |k| RemoteKey { rows: self, k })
    }
}

/// One key of [`RemoteRows`] and its versions.
#[derive(Clone, Copy)]
pub struct RemoteKey<'a> {
    rows: &'a RemoteRows,
    k: usize,
}

impl<'a> RemoteKey<'a> {
    /// The user key.
    pub fn key(&self) -> &'a [u8] {
        self.rows.key_at(self.k)
    }

    /// The key's versions, newest first. Never empty.
    pub fn versions_newest_first(
        &self,
    ) -> impl ExactSizeIterator<Item = RemoteVersion<'a>> + DoubleEndedIterator + use<'a> {
        let rows = self.rows;
        rows.rows_of(self.k)
            .rev()
            .map(move |row| rows.version_at(row))
    }
}

/// One version in [`RemoteRows`].
#[derive(Clone, Copy)]
pub struct RemoteVersion<'a> {
    rows: &'a RemoteRows,
    row: usize,
}

impl<'a> RemoteVersion<'a> {
    fn entry(&self) -> RowEntry {
        self.rows.rows[self.row]
    }

    pub fn version(&self) -> u64 {
        self.entry().version
    }

    pub fn is_tombstone(&self) -> bool {
        self.entry().value_len == TOMBSTONE
    }

    pub fn user_meta(&self) -> &'a [u8] {
        let e = self.entry();
        &self.rows.meta_bytes[e.meta_off as usize..e.meta_off as usize + e.meta_len as usize]
    }

    /// The value; empty for a tombstone.
    pub fn value(&self) -> &'a [u8] {
        let e = self.entry();
        match e.value_len {
            TOMBSTONE => &[],
            len => &self.rows.data[e.value_off as usize..e.value_off as usize + len as usize],
        }
    }

    /// The user meta as a zero-copy `Bytes` of the received buffer (or of the meta arena).
    pub fn user_meta_bytes(&self) -> Bytes {
        self.rows.meta_bytes.slice_ref(self.user_meta())
    }

    /// The value as a zero-copy `Bytes` of the received buffer.
    pub fn value_bytes(&self) -> Bytes {
        match self.entry().value_len {
            TOMBSTONE => Bytes::new(),
            _ => self.rows.data.slice_ref(self.value()),
        }
    }
}

/// A cursor over the keys of [`RemoteRows`] visible at a read ts, each positioned on its newest
/// version `<= ts`; keys with no such version are skipped in both directions. Tombstones are
/// yielded (flagged): the merge with SSTs needs them. Moving an unpositioned cursor leaves it
/// unpositioned.
pub struct RemoteRowsIter<'a> {
    rows: &'a RemoteRows,
    ts: u64,
    /// (key index, row index) of the current position.
    pos: Option<(usize, usize)>,
}

impl<'a> RemoteRowsIter<'a> {
    /// The first visible key at index `>= k`.
    fn settle_forward(&mut self, mut k: usize) {
        self.pos = None;
        while k < self.rows.keys.len() {
            if let Some(row) = self.rows.visible_row(k, self.ts) {
                self.pos = Some((k, row));
                return;
            }
            k += 1;
        }
    }

    /// The last visible key at index `< end`.
    fn settle_backward(&mut self, mut end: usize) {
        self.pos = None;
        while end > 0 {
            end -= 1;
            if let Some(row) = self.rows.visible_row(end, self.ts) {
                self.pos = Some((end, row));
                return;
            }
        }
    }

    /// Positions on the first visible key `>= key`.
    pub fn seek(&mut self, key: &[u8]) {
        let k = self.rows.lower_bound(key);
        self.settle_forward(k);
    }

    /// Positions on the last visible key `<= key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) {
        let k = self
            .rows
            .keys
            .partition_point(|e| self.rows.key_of(e) <= key);
        self.settle_backward(k);
    }

    /// Positions on the last visible key.
    pub fn seek_to_last(&mut self) {
        self.settle_backward(self.rows.keys.len());
    }

    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) {
        if let Some((k, _)) = self.pos {
            self.settle_forward(k + 1);
        }
    }

    pub fn prev(&mut self) {
        if let Some((k, _)) = self.pos {
            self.settle_backward(k);
        }
    }

    pub fn valid(&self) -> bool {
        self.pos.is_some()
    }

    fn current(&self) -> RemoteVersion<'a> {
        let (_, row) = self.pos.expect("iterator is not valid");
        self.rows.version_at(row)
    }

    pub fn key(&self) -> &'a [u8] {
        let (k, _) = self.pos.expect("iterator is not valid");
        self.rows.key_at(k)
    }

    pub fn version(&self) -> u64 {
        self.current().version()
    }

    pub fn is_tombstone(&self) -> bool {
        self.current().is_tombstone()
    }

    pub fn user_meta(&self) -> &'a [u8] {
        self.current().user_meta()
    }

    pub fn value(&self) -> &'a [u8] {
        self.current().value()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use changeset::{MemRowRef, MemtableDataWriter};
    use proptest::prelude::*;

    use super::*;

    /// key -> version -> (tombstone, meta, value): the model.
    type Model = BTreeMap<Vec<u8>, BTreeMap<u64, (bool, Vec<u8>, Vec<u8>)>>;
    /// What a read sees: (key, version, tombstone, meta, value).
    type Seen = (Vec<u8>, u64, bool, Vec<u8>, Vec<u8>);

    fn encode(model: &Model, format: MemtableDataFormat) -> Bytes {
        let mut w = MemtableDataWriter::with_format(format, 0);
        for (key, versions) in model {
            for (&version, (tombstone, meta, value)) in versions {
                w.push(MemRowRef {
                    cf: ColumnFamily::Write,
                    key,
                    version,
                    user_meta: meta,
                    value: if *tombstone { &[] } else { value },
                    tombstone: *tombstone,
                })
                .expect("model rows are ordered");
            }
        }
        w.finish()
    }

    fn model_at(model: &Model, key: &[u8], ts: u64) -> Option<Seen> {
        let (&version, (tombstone, meta, value)) = model.get(key)?.range(..=ts).next_back()?;
        Some((
            key.to_vec(),
            version,
            *tombstone,
            meta.clone(),
            if *tombstone {
                Vec::new()
            } else {
                value.clone()
            },
        ))
    }

    /// The model's visible keys at `ts`, ascending.
    fn model_scan(model: &Model, ts: u64) -> Vec<Seen> {
        model
            .keys()
            .filter_map(|k| model_at(model, k, ts))
            .collect()
    }

    fn seen(it: &RemoteRowsIter<'_>) -> Seen {
        (
            it.key().to_vec(),
            it.version(),
            it.is_tombstone(),
            it.user_meta().to_vec(),
            it.value().to_vec(),
        )
    }

    fn model() -> impl Strategy<Value = Model> {
        let key = prop::collection::vec(b'a'..b'e', 0..3);
        let version = (
            any::<bool>(),
            prop::collection::vec(any::<u8>(), 0..3),
            prop::collection::vec(any::<u8>(), 0..4),
        );
        let versions = prop::collection::btree_map(1u64..20, version, 1..5);
        prop::collection::btree_map(key, versions, 0..12).prop_map(|mut model| {
            // Two-byte metas become WRITE metas (kind, start_ts, commit_ts = version), which
            // v2 ships compactly and the receiver rebuilds.
            for versions in model.values_mut() {
                for (&version, (_, meta, _)) in versions.iter_mut() {
                    if meta.len() == 2 {
                        let start_ts = version - u64::from(meta[1] % 2);
                        *meta = [
                            &[meta[0]][..],
                            &start_ts.to_le_bytes(),
                            &version.to_le_bytes(),
                        ]
                        .concat();
                    }
                }
            }
            model
        })
    }

    fn format() -> impl Strategy<Value = MemtableDataFormat> {
        prop::sample::select(MemtableDataFormat::ALL.to_vec())
    }

    fn probe_key() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(b'a'..b'f', 0..4)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn point_reads_land_on_the_newest_version_at_or_below_ts(
            model in model(),
            format in format(),
            probes in prop::collection::vec((probe_key(), 0u64..22), 1..20),
        ) {
            let rows = RemoteRows::decode(1, b"", b"", &encode(&model, format)).unwrap();
            for (key, ts) in probes {
                let got = rows.get(&key, ts).map(|v| {
                    (key.clone(), v.version(), v.is_tombstone(), v.user_meta().to_vec(), v.value().to_vec())
                });
                prop_assert_eq!(&got, &model_at(&model, &key, ts), "key={:?} ts={}", key, ts);
                if let Some(v) = rows.get(&key, ts) {
                    prop_assert_eq!(&v.value_bytes()[..], v.value());
                    prop_assert_eq!(&v.user_meta_bytes()[..], v.user_meta());
                }
            }
        }

        #[test]
        fn iteration_at_ts_visits_the_visible_keys_in_both_directions(
            model in model(),
            format in format(),
            ts in 0u64..22,
        ) {
            let rows = RemoteRows::decode(1, b"", b"", &encode(&model, format)).unwrap();
            let expected = model_scan(&model, ts);
            let mut it = rows.iter(ts);
            it.seek(b"");
            let mut forward = Vec::new();
            while it.valid() {
                forward.push(seen(&it));
                it.next();
            }
            prop_assert_eq!(&forward, &expected);
            it.seek_to_last();
            let mut backward = Vec::new();
            while it.valid() {
                backward.push(seen(&it));
                it.prev();
            }
            backward.reverse();
            prop_assert_eq!(&backward, &expected);
        }

        #[test]
        fn seeks_then_steps_match_the_model(
            model in model(),
            format in format(),
            ts in 0u64..22,
            probes in prop::collection::vec((probe_key(), any::<bool>(), 0usize..4, any::<bool>()), 1..10),
        ) {
            let rows = RemoteRows::decode(1, b"", b"", &encode(&model, format)).unwrap();
            let expected = model_scan(&model, ts);
            let mut it = rows.iter(ts);
            for (key, for_prev, steps, forward) in probes {
                // Index in `expected` of the position the seek must land on.
                let mut at: Option<usize> = if for_prev {
                    expected.iter().rposition(|s| s.0 <= key)
                } else {
                    expected.iter().position(|s| s.0 >= key)
                };
                if for_prev { it.seek_for_prev(&key) } else { it.seek(&key) }
                for step in 0..=steps {
                    prop_assert_eq!(
                        it.valid().then(|| seen(&it)),
                        at.map(|i| expected[i].clone()),
                        "key={:?} for_prev={} step={}", key, for_prev, step
                    );
                    if !it.valid() {
                        break;
                    }
                    if forward {
                        it.next();
                        at = at.and_then(|i| (i + 1 < expected.len()).then_some(i + 1));
                    } else {
                        it.prev();
                        at = at.and_then(|i| i.checked_sub(1));
                    }
                }
            }
        }
    }

    #[test]
    fn keys_out_of_order_are_refused_in_every_format() {
        // A later key that sorts first, one that is a prefix of the key before it, and one
        // that differs after a shared prefix (v2 and v3 ship only the suffix).
        for pair in [[&b"b"[..], b"a"], [b"ab", b"a"], [b"ab", b"aa"]] {
            for format in MemtableDataFormat::ALL {
                let mut w = MemtableDataWriter::with_format(format, 0);
                for key in pair {
                    w.push(MemRowRef {
                        cf: ColumnFamily::Write,
                        key,
                        version: 1,
                        user_meta: b"",
                        value: b"v",
                        tombstone: false,
                    })
                    .unwrap();
                }
                let err = RemoteRows::decode(1, b"", b"", &w.finish()).unwrap_err();
                assert!(
                    err.to_string().contains("ascending"),
                    "{format} {pair:?}: {err}"
                );
            }
        }
    }

    #[test]
    fn keys_outside_the_shard_are_refused_naming_the_first_such_row() {
        /// The row and key the error names, or `None` for rows the shard accepts.
        type Refused = Option<(u64, &'static [u8])>;
        /// The rows' keys, the shard's start and end, and what is refused.
        type Case = (
            &'static [&'static [u8]],
            &'static [u8],
            &'static [u8],
            Refused,
        );
        let cases: [Case; 6] = [
            (&[b"z"], b"a", b"m", Some((0, b"z"))),
            (&[b"0", b"b"], b"a", b"m", Some((0, b"0"))),
            (&[b"b", b"c", b"c", b"m", b"n"], b"a", b"m", Some((3, b"m"))),
            (&[b"b", b"l", b"l"], b"a", b"m", None),
            (&[b"a", b"zz"], b"a", b"", None),
            (&[b"a", b"zz"], b"b", b"", Some((0, b"a"))),
        ];
        for format in MemtableDataFormat::ALL {
            for (keys, start, end, want) in cases {
                let mut w = MemtableDataWriter::with_format(format, 0);
                for (n, key) in keys.iter().enumerate() {
                    w.push(MemRowRef {
                        cf: ColumnFamily::Write,
                        key,
                        version: n as u64 + 1,
                        user_meta: b"",
                        value: b"v",
                        tombstone: false,
                    })
                    .unwrap();
                }
                let got = RemoteRows::decode(1, start, end, &w.finish());
                match (want, got) {
                    (None, Ok(rows)) => assert_eq!(rows.rows.len(), keys.len()),
                    (Some((row, key)), Err(err @ Error::RemoteSnapshot { .. })) => {
                        let want = format!("found key={key:?} row={row}");
                        assert!(err.to_string().contains(&want), "{format} {keys:?}: {err}");
                    }
                    (want, got) => panic!("{format} {keys:?}: expected {want:?}, found {got:?}"),
                }
            }
        }
    }

    #[test]
    fn tombstone_reads_as_empty_value_whatever_was_shipped() {
        let mut w = MemtableDataWriter::new();
        w.push(MemRowRef {
            cf: ColumnFamily::Write,
            key: b"k",
            version: 3,
            user_meta: b"m",
            value: b"ignored",
            tombstone: true,
        })
        .unwrap();
        let rows = RemoteRows::decode(1, b"", b"", &w.finish()).unwrap();
        let v = rows.get(b"k", 5).unwrap();
        assert!(v.is_tombstone());
        assert_eq!((v.user_meta(), v.value()), (&b"m"[..], &b""[..]));
        assert!(v.value_bytes().is_empty());
    }
}
