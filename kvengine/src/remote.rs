//! Shipping a snapshot to another process for remote execution, and rebuilding it there.
//!
//! A storage server that offloads a read sends a worker two things, both built by
//! [`SnapAccess::to_remote`] for the ranges the read covers and its start_ts:
//!
//! * a **ChangeSet** holding a [`Change::Snapshot`] (protobuf, layout and compatibility rules in
//!   `changeset/src/messages.rs`) that names only the WRITE-CF files a read of the ranges can
//!   touch: the L0 files whose WRITE section overlaps a range and the WRITE-CF level files that
//!   overlap one. Its sequence is the shard's meta sequence, so a worker can tell two
//!   descriptions of the same shard apart.
//! * **memtable data** (the versioned, checksummed codec of `changeset/src/memtable_data.rs`,
//!   in the newest format the receiver reads: [`SnapAccess::to_remote_as`]): the WRITE rows of
//!   every memtable inside the ranges that a read at start_ts may land on, oldest first per key.
//!
//! [`SnapAccess::from_remote`] opens the files from the object store (a worker passes its
//! cache of open tables instead: [`SnapAccess::from_remote_cached`], `table_cache`), indexes
//! the rows (no skiplist is built: see `remote_rows`; every format is accepted; a v4 blob's
//! blocks are indexed when a read reaches them) and returns a
//! read-only [`SnapAccess`] on which every MVCC read at the start_ts it was shipped for returns
//! exactly what the origin returns.
//!
//! **Which memtable versions travel.** Per key, a read at `start_ts` lands on the first
//! version `<= start_ts` across all sources; a Put or a tombstone ends it, a Lock or Rollback
//! record sends it to the next older version. So the rows shipped for a key are its memtable
//! versions (merged over every memtable, the newer memtable winning a tie) from the first one
//! `<= start_ts` down to and including the first tombstone or Put. If the memtables hold no
//! such stopper, the read continues into the SSTs, which the worker has too. Versions newer
//! than start_ts stay behind; [`RemoteSnapshot::filtered_newer`] says whether there were any,
//! because a result computed from the rebuilt snapshot cannot see them (the coprocessor cache
//! must then treat the result as having met newer data).
//!
//! **Re-shipping a rebuilt snapshot** works like shipping the origin: its shipped rows take the
//! place of the memtables (a rebuilt snapshot's memtables are always empty), so a worker can
//! forward a snapshot it received, for the same or narrower ranges at the same start_ts.
//!
//! **Locks are never shipped**: the origin checks them for the ranges before it dispatches,
//! and a rebuilt snapshot reports no locks (L0 files travel whole, but their LOCK sections are
//! ignored there; see [`SnapAccess::may_have_locks`]).

use std::sync::Arc;

use bytes::Bytes;
use changeset::{
    Change, ChangeSet, ColumnFamily, L0Create, MemRowRef, MemtableDataFormat, MemtableDataWriter,
    ShardFiles, Snapshot, TableCreate,
};
use memtable::{AllVersionsIter, BorrowedVersion, CfTable, KeyVersions};

use crate::dfs::Dfs;
use crate::error::{Error, Result};
use crate::mvcc::reader::write_kind;
use crate::remote_rows::RemoteRows;
use crate::shard_data::{OpenTables, ShardData, TableSource};
use crate::snap_access::SnapAccess;
use crate::table_cache::TableCache;

/// What [`SnapAccess::to_remote`] produces: everything a worker needs besides the object
/// store to rebuild the snapshot for one read.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteSnapshot {
    /// A [`Change::Snapshot`] listing the WRITE-CF files that overlap the ranges.
    pub changeset: ChangeSet,
    /// The memtable rows, in the layout of `changeset::memtable_data` (oldest first per key).
    pub memtable_data: Bytes,
    /// Whether a memtable held a WRITE version newer than start_ts inside the ranges (it was
    /// left out, so the rebuilt snapshot cannot report it).
    pub filtered_newer: bool,
    /// Rows in `memtable_data`.
    pub rows: u64,
}

impl SnapAccess {
    /// Describes this snapshot for a read of `ranges` at `start_ts` on another process (see
    /// the module docs for what is shipped). Each range is `[start, end)` with an empty `end`
    /// meaning unbounded; ranges are clipped to the shard and may be unsorted or overlap.
    ///
    /// Fails with [`Error::Record`] if a memtable WRITE version's user meta does not decode
    /// (its kind decides whether older versions must travel too).
    pub fn to_remote<S: AsRef<[u8]>, E: AsRef<[u8]>>(
        &self,
        ranges: &[(S, E)],
        start_ts: u64,
    ) -> Result<RemoteSnapshot> {
        self.to_remote_as(ranges, start_ts, MemtableDataFormat::NEWEST)
    }

    /// [`SnapAccess::to_remote`] with the memtable rows in `format`: the newest format the
    /// receiving worker reads (a server learns it from the worker's answers; see
    /// `changeset::memtable_data` on the negotiation).
    pub fn to_remote_as<S: AsRef<[u8]>, E: AsRef<[u8]>>(
        &self,
        ranges: &[(S, E)],
        start_ts: u64,
        format: MemtableDataFormat,
    ) -> Result<RemoteSnapshot> {
        let d = &*self.data;
        let ranges = normalize_ranges(d, ranges);
        let (l0_creates, table_creates) = write_files(d, &ranges);
        let changeset = ChangeSet {
            shard_id: self.shard_id,
            shard_ver: d.ver(),
            sequence: d.meta_seq(),
            properties: Default::default(),
            change: Some(Change::Snapshot(Snapshot {
                start: d.start().clone(),
                end: d.end().clone(),
                base_version: d.base_version(),
                data_sequence: d.data_sequence(),
                l0_creates,
                table_creates,
            })),
        };
        let mut rows = MemRows::new(self.shard_id, d, start_ts, format);
        for &(lower, upper) in &ranges {
            match (&d.remote, &rows.tables[..]) {
                (Some(remote), _) => rows.collect_remote_range(remote, lower, upper)?,
                (None, []) => {}
                (None, [table]) => rows.collect_single_range(table, lower, upper)?,
                (None, _) => rows.collect_range(lower, upper)?,
            }
        }
        let filtered_newer = rows.filtered_newer;
        let count = rows.writer.rows();
        Ok(RemoteSnapshot {
            changeset,
            memtable_data: rows.writer.finish(),
            filtered_newer,
            rows: count,
        })
    }

    /// Rebuilds a read-only snapshot from what [`SnapAccess::to_remote`] produced: opens the
    /// listed files from `dfs` (through `block_cache` for compressed tables) and indexes the
    /// memtable rows in place (they are read from `memtable_data`, which the snapshot keeps).
    ///
    /// The result has the origin's shard id, version, range and base_version, and a
    /// `write_sequence` of 0: the worker never sees the origin's writes, so it has no sequence
    /// of its own, and [`SnapAccess::data_version`] is `None` (only the origin may vouch for a
    /// data version). It has no locks: reads on it skip the lock check the origin already
    /// made. Reads at the start_ts the description was made for match the origin's; other
    /// timestamps may see less.
    ///
    /// Errors: a ChangeSet that is not a snapshot, or memtable rows a sender following the
    /// protocol never produces (another column family, a key outside the shard, keys not
    /// ascending, 4 GiB of rows or more), are [`Error::RemoteSnapshot`]; an inconsistent file list is
    /// [`Error::ChangeSet`]; undecodable memtable data is [`Error::RemoteMemtableData`]; a
    /// missing or corrupt file is the object store's or the table's error. The rows of a v4
    /// blob are checked a block at a time when a read reaches them, so for one the row errors
    /// above (but those of its block index) are errors of the reads.
    pub fn from_remote(
        changeset: &ChangeSet,
        memtable_data: &Bytes,
        dfs: Arc<dyn Dfs>,
        block_cache: Option<Arc<dyn sst::BlockCache>>,
    ) -> Result<SnapAccess> {
        let source = TableSource::new(&dfs, block_cache.as_ref());
        Self::rebuild(changeset, memtable_data, |files| {
            ShardData::derive(files, &OpenTables::default(), source)
        })
    }

    /// [`SnapAccess::from_remote`] taking the tables from `tables`, which keeps what it opens
    /// for the next rebuild (a worker's: see `table_cache`), and opening only what it lacks
    /// from its object store and block cache. The same result and errors.
    pub fn from_remote_cached(
        changeset: &ChangeSet,
        memtable_data: &Bytes,
        tables: &TableCache,
    ) -> Result<SnapAccess> {
        Self::rebuild(changeset, memtable_data, |files| {
            ShardData::derive_with(files, |id| tables.l0(id), |id| tables.table(id))
        })
    }

    /// Heap bytes a rebuilt snapshot holds beside its received memtable rows to read them (see
    /// `RemoteRows::index_memory`); 0 for a snapshot that was not rebuilt.
    pub fn remote_index_memory(&self) -> usize {
        self.data
            .remote
            .as_ref()
            .map_or(0, |rows| rows.index_memory())
    }

    /// Drops from this process's RSS the pages its mapped tables' reads made resident (L0
    /// files and uncompressed level tables: `sst::Table::release_pages`); the bytes released.
    /// What a worker calls when a request is done with a rebuilt snapshot whose tables stay
    /// open in its cache: reads stay correct, a page read again comes back from the page
    /// cache.
    pub fn release_pages(&self) -> usize {
        self.data
            .table_sections()
            .map(sst::Table::release_pages)
            .sum()
    }

    /// The checks and the row index of a rebuild, with the file list's tables from `derive`.
    fn rebuild(
        changeset: &ChangeSet,
        memtable_data: &Bytes,
        derive: impl FnOnce(ShardFiles) -> Result<ShardData>,
    ) -> Result<SnapAccess> {
        let shard_id = changeset.shard_id;
        if !matches!(changeset.change, Some(Change::Snapshot(_))) {
            return Err(Error::RemoteSnapshot {
                shard_id,
                detail: format!(
                    "expected change=snapshot, found change={}",
                    change_name(changeset.change.as_ref())
                ),
            });
        }
        let files = ShardFiles::from_changeset(changeset)?;
        // The rows first: a corrupt transfer (or a v4 blob's corrupt block index) fails before
        // any object store read.
        let rows = RemoteRows::decode(shard_id, files.start(), files.end(), memtable_data)?;
        let mut data = derive(files)?;
        data.remote = Some(Arc::new(rows));
        Ok(SnapAccess {
            shard_id,
            data: Arc::new(data),
            write_sequence: 0,
            is_origin: false,
        })
    }
}

fn change_name(change: Option<&Change>) -> &'static str {
    match change {
        None => "none",
        Some(Change::Snapshot(_)) => "snapshot",
        Some(Change::Flush(_)) => "flush",
        Some(Change::Compaction(_)) => "compaction",
        Some(Change::Split(_)) => "split",
        Some(Change::InitialFlush(_)) => "initial_flush",
        Some(Change::Ingest(_)) => "ingest",
        Some(Change::Destroy(_)) => "destroy",
    }
}

/// `ranges` clipped to the shard's range, empty ones dropped, sorted by start and merged where
/// they overlap or touch. An empty end is unbounded (only the last range can have one).
fn normalize_ranges<'a, S: AsRef<[u8]>, E: AsRef<[u8]>>(
    d: &'a ShardData,
    ranges: &'a [(S, E)],
) -> Vec<(&'a [u8], &'a [u8])> {
    let mut clipped: Vec<(&[u8], &[u8])> = ranges
        .iter()
        .filter_map(|(s, e)| {
            let (s, e) = (s.as_ref(), e.as_ref());
            let s = s.max(d.start().as_ref());
            let e = match (e.is_empty(), d.end().is_empty()) {
                (true, _) => d.end().as_ref(),
                (false, true) => e,
                (false, false) => e.min(d.end().as_ref()),
            };
            (e.is_empty() || s < e).then_some((s, e))
        })
        .collect();
    if !clipped.is_sorted_by_key(|r| r.0) {
        clipped.sort_unstable_by_key(|r| r.0);
    }
    let mut merged: Vec<(&[u8], &[u8])> = Vec::with_capacity(clipped.len());
    for (s, e) in clipped {
        match merged.last_mut() {
            // Overlapping or touching the previous range (which is unbounded, or ends at or
            // after this start): extend it.
            Some(last) if last.1.is_empty() || s <= last.1 => {
                if last.1.is_empty() || e.is_empty() {
                    last.1 = &[];
                } else {
                    last.1 = last.1.max(e);
                }
            }
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// Whether `[smallest, biggest]` meets one of the sorted, disjoint `ranges`.
fn overlaps_any(ranges: &[(&[u8], &[u8])], smallest: &[u8], biggest: &[u8]) -> bool {
    // The first range ending after `smallest`; ends ascend because the ranges are disjoint.
    let i = ranges.partition_point(|(_, e)| !e.is_empty() && *e <= smallest);
    ranges.get(i).is_some_and(|(s, _)| *s <= biggest)
}

/// The L0 files whose WRITE section overlaps a range (newest first, bounds over every section,
/// as a flush records them) and the WRITE-CF level files that overlap one.
fn write_files(d: &ShardData, ranges: &[(&[u8], &[u8])]) -> (Vec<L0Create>, Vec<TableCreate>) {
    let write = ColumnFamily::Write.index();
    let mut l0s = Vec::new();
    for l0 in &d.l0s {
        let Some(t) = l0.cf(ColumnFamily::Write) else {
            continue;
        };
        let p = t.properties();
        if !overlaps_any(ranges, &p.smallest, &p.biggest) {
            continue;
        }
        let sections = l0.sections();
        let (mut smallest, mut biggest) = (p.smallest.as_slice(), p.biggest.as_slice());
        for s in sections {
            smallest = smallest.min(s.properties().smallest.as_slice());
            biggest = biggest.max(s.properties().biggest.as_slice());
        }
        l0s.push(L0Create {
            id: l0.file_id(),
            smallest: Bytes::copy_from_slice(smallest),
            biggest: Bytes::copy_from_slice(biggest),
            size: l0.size(),
        });
    }
    let mut tables = Vec::new();
    for (i, level) in d.levels[write].iter().enumerate() {
        for t in level {
            let p = t.properties();
            if overlaps_any(ranges, &p.smallest, &p.biggest) {
                tables.push(TableCreate {
                    id: t.file_id(),
                    level: i as u32 + 1,
                    cf: ColumnFamily::Write.as_u32(),
                    smallest: Bytes::copy_from_slice(&p.smallest),
                    biggest: Bytes::copy_from_slice(&p.biggest),
                    size: t.size(),
                });
            }
        }
    }
    (l0s, tables)
}

/// One memtable's WRITE table walked in key order within the current range.
struct MemCursor<'a> {
    iter: AllVersionsIter<'a>,
    cur: Option<KeyVersions<'a>>,
}

/// Collects the memtable rows of a snapshot for a read at `start_ts`, range by range in key
/// order, straight into the encoder: a k-way merge over the non-empty memtables (usually one),
/// with no intermediate map.
struct MemRows<'a> {
    shard_id: u64,
    /// Non-empty WRITE tables, newest memtable first (it wins a version tie).
    tables: Vec<&'a CfTable>,
    start_ts: u64,
    writer: MemtableDataWriter,
    filtered_newer: bool,
    /// Per key, reused: the versions to ship, newest first (borrowed from the memtables: the
    /// walk pays no reference count per version).
    picked: Vec<BorrowedVersion<'a>>,
    /// Per key, reused: (version, memtable index, version) of a key held by several memtables.
    merged: Vec<(u64, usize, BorrowedVersion<'a>)>,
    /// Per key, reused: the cursors positioned on the current key.
    on_key: Vec<usize>,
}

impl<'a> MemRows<'a> {
    fn new(
        shard_id: u64,
        d: &'a ShardData,
        start_ts: u64,
        format: MemtableDataFormat,
    ) -> MemRows<'a> {
        let tables: Vec<&CfTable> = d
            .memtables()
            .map(|m| m.cf(ColumnFamily::Write))
            .filter(|t| !t.is_empty())
            .collect();
        // The tables' charged size (or the size of the rows a rebuilt snapshot received)
        // bounds the rows' encoded size for a full-range transfer; reserving it avoids
        // regrowing the buffer (untouched capacity costs no memory).
        let capacity = tables.iter().map(|t| t.size()).sum::<usize>()
            + d.remote.as_ref().map_or(0, |r| r.encoded_len());
        MemRows {
            shard_id,
            tables,
            start_ts,
            writer: MemtableDataWriter::with_format(format, capacity),
            filtered_newer: false,
            picked: Vec::new(),
            merged: Vec::new(),
            on_key: Vec::new(),
        }
    }

    /// Emits the memtable version `v` of `key`.
    fn push(&mut self, key: &[u8], v: &BorrowedVersion<'_>) -> Result<()> {
        self.push_row(key, v.version(), v.is_tombstone(), v.user_meta(), v.value())
    }

    /// Emits one WRITE row.
    fn push_row(
        &mut self,
        key: &[u8],
        version: u64,
        tombstone: bool,
        user_meta: &[u8],
        value: &[u8],
    ) -> Result<()> {
        self.writer
            .push(MemRowRef {
                cf: ColumnFamily::Write,
                key,
                version,
                user_meta,
                value,
                tombstone,
            })
            .map_err(|source| Error::RemoteMemtableData {
                shard_id: self.shard_id,
                source,
            })
    }

    /// [`MemRows::collect_range`] for the common case of one non-empty memtable: its chains
    /// are already newest first and distinct, so each key is a walk of its chain with no merge.
    fn collect_single_range(
        &mut self,
        table: &'a CfTable,
        lower: &[u8],
        upper: &[u8],
    ) -> Result<()> {
        for kv in table.iter_all_from(lower) {
            let key = kv.key();
            if !upper.is_empty() && key >= upper {
                break;
            }
            let mut picked = std::mem::take(&mut self.picked);
            let newer = pick(key, kv.borrowed_versions(), self.start_ts, &mut picked);
            let pushed = newer.and_then(|newer| {
                self.filtered_newer |= newer;
                picked.iter().rev().try_for_each(|v| self.push(key, v))
            });
            picked.clear();
            self.picked = picked;
            pushed?;
        }
        Ok(())
    }

    /// [`MemRows::collect_range`] for a rebuilt snapshot, whose only in-memory source is the
    /// rows it received: per key, the rows a read at `start_ts` may land on are the versions
    /// `<= start_ts` from the newest down to the first tombstone or unskipped record, shipped
    /// again oldest first.
    fn collect_remote_range(
        &mut self,
        remote: &RemoteRows,
        lower: &[u8],
        upper: &[u8],
    ) -> Result<()> {
        remote.visit_keys_from(lower, |k| {
            let key = k.key();
            if !upper.is_empty() && key >= upper {
                return Ok(false);
            }
            // Newest first, the versions newer than start_ts are a prefix, and the versions to
            // ship the run right after it: count both, then push the run oldest first.
            let (mut newer, mut ship) = (0, 0);
            for v in k.versions_newest_first() {
                if v.version() > self.start_ts {
                    newer += 1;
                    continue;
                }
                ship += 1;
                if v.is_tombstone() || !write_kind(key, v.user_meta())?.is_skipped_by_reads() {
                    break;
                }
            }
            self.filtered_newer |= newer > 0;
            for v in k.versions_newest_first().skip(newer).take(ship).rev() {
                self.push_row(key, v.version(), v.is_tombstone(), v.user_meta(), v.value())?;
            }
            Ok(true)
        })
    }

    /// Emits the rows of every key in `[lower, upper)` (empty `upper` = unbounded).
    fn collect_range(&mut self, lower: &[u8], upper: &[u8]) -> Result<()> {
        let below_upper = |k: &[u8]| upper.is_empty() || k < upper;
        let mut cursors: Vec<MemCursor<'a>> = self
            .tables
            .iter()
            .map(|t| {
                let mut iter = t.iter_all_from(lower);
                let cur = iter.next();
                MemCursor { iter, cur }
            })
            .collect();
        loop {
            // The smallest current key below `upper`; cursors past it are done.
            let mut min: Option<usize> = None;
            for i in 0..cursors.len() {
                let Some(kv) = &cursors[i].cur else { continue };
                if !below_upper(kv.key()) {
                    cursors[i].cur = None;
                    continue;
                }
                let smaller = match min.and_then(|m| cursors[m].cur.as_ref()) {
                    None => true,
                    Some(best) => kv.key() < best.key(),
                };
                if smaller {
                    min = Some(i);
                }
            }
            let Some(kv) = min.and_then(|m| cursors[m].cur.as_ref()) else {
                return Ok(());
            };
            let key = kv.key();
            self.on_key.clear();
            for (i, c) in cursors.iter().enumerate() {
                if c.cur.as_ref().is_some_and(|o| o.key() == key) {
                    self.on_key.push(i);
                }
            }
            self.picked.clear();
            if let [only] = self.on_key[..] {
                // One memtable holds the key: its chain is already newest first and distinct.
                let versions = cursors[only]
                    .cur
                    .as_ref()
                    .map(KeyVersions::borrowed_versions);
                let newer = pick(
                    key,
                    versions.into_iter().flatten(),
                    self.start_ts,
                    &mut self.picked,
                )?;
                self.filtered_newer |= newer;
            } else {
                self.merged.clear();
                for &i in &self.on_key {
                    if let Some(o) = &cursors[i].cur {
                        self.merged
                            .extend(o.borrowed_versions().map(|v| (v.version(), i, v)));
                    }
                }
                // Newest first; on equal versions the newer memtable (lower index) first, and
                // only it is kept: it is the one a read of the origin sees.
                self.merged
                    .sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
                self.merged.dedup_by_key(|e| e.0);
                let versions = self.merged.drain(..).map(|e| e.2);
                let newer = pick(key, versions, self.start_ts, &mut self.picked)?;
                self.filtered_newer |= newer;
            }
            let picked = std::mem::take(&mut self.picked);
            let pushed = picked.iter().rev().try_for_each(|v| self.push(key, v));
            self.picked = picked;
            pushed?;
            for &i in &self.on_key {
                let c = &mut cursors[i];
                c.cur = c.iter.next();
            }
        }
    }
}

/// Moves into `picked` (newest first) the versions of `key` a read at `start_ts` may land on:
/// from the first version `<= start_ts` down to and including the first tombstone or record
/// that reads do not skip. `versions` are newest first and distinct. Returns whether a version
/// newer than `start_ts` was passed over.
fn pick<'a>(
    key: &[u8],
    versions: impl Iterator<Item = BorrowedVersion<'a>>,
    start_ts: u64,
    picked: &mut Vec<BorrowedVersion<'a>>,
) -> Result<bool> {
    let mut newer = false;
    for v in versions {
        if v.version() > start_ts {
            newer = true;
            continue;
        }
        let stops = v.is_tombstone() || !write_kind(key, v.user_meta())?.is_skipped_by_reads();
        picked.push(v);
        if stops {
            break;
        }
    }
    Ok(newer)
}
