//! The immutable state of a shard at one moment, and how it is derived from the shard's file
//! list.
//!
//! The state a reader needs is one [`ShardData`] behind an `ArcSwap` (see `shard`): memtables
//! (active, then frozen ones newest first), L0 files newest first, and per-CF levels sorted by
//! key. Every change builds a new `ShardData` and swaps it in, so a snapshot is one `Arc` clone
//! plus the write sequence, taken in O(1).
//!
//! **The file part is derived, never edited.** A `ShardData` holds the shard's
//! [`ShardFiles`] (what the manifest says, as returned by [`ShardFiles::apply`]) and the opened
//! tables *that list names, in its order*: [`ShardData::derive`] walks the list and takes each
//! table from a map of tables already open ([`OpenTables`]: the previous state's, plus the
//! outputs a flush or compaction just wrote), opening from the object store only what is not
//! there. Engine open, shard creation, every ChangeSet (flush, compaction, split, one that a
//! follower receives) and a snapshot rebuilt on a worker all go through it, so the live tables
//! can only ever be the ones the file list names.
//!
//! Memtables are not in the file list: a derived state carries the previous state's memtables
//! over, minus the frozen ones whose writes the file list's `data_sequence` covers (a flush's
//! ChangeSet raises it to the last sequence of the memtable it wrote).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use changeset::ShardFiles;
use memtable::{ColumnFamily, Memtable};
use sst::{L0Table, Table};
use types::FileId;

use crate::dfs::Dfs;
use crate::error::Result;
use crate::remote_rows::RemoteRows;

/// A memtable waiting for flush.
#[derive(Clone)]
pub struct FrozenMem {
    pub mem: Arc<Memtable>,
    /// Sequence of the last write batch the memtable holds: the shard's data_sequence once the
    /// memtable is flushed.
    pub last_sequence: u64,
}

/// The immutable state of a shard at one moment.
#[derive(Clone)]
pub struct ShardData {
    /// The file list this state was derived from: range, version, sequences and files.
    pub(crate) files: Arc<ShardFiles>,
    /// The memtable writes go to.
    pub mem: Arc<Memtable>,
    /// Frozen memtables, newest first; the last one is flushed next.
    pub frozen: Vec<FrozenMem>,
    /// L0 files, newest first: the tables of `files.l0s()`, in its order.
    pub l0s: Vec<L0Table>,
    /// `levels[cf][level - 1]`: the tables of `files.level(cf, level)`, sorted by smallest key,
    /// not overlapping. Trailing empty levels are left out.
    pub levels: [Vec<Vec<Table>>; ColumnFamily::COUNT],
    /// Only on a snapshot rebuilt by `SnapAccess::from_remote` (or `from_remote_cached`): the
    /// shipped WRITE rows, read in place. They take the place of the origin's memtables (the
    /// rebuilt snapshot's memtable stays empty) and are the newest source of its WRITE CF.
    pub(crate) remote: Option<Arc<RemoteRows>>,
}

/// Where tables that are not open yet come from: the object store, read through the engine's
/// block cache for compressed tables.
#[derive(Clone, Copy)]
pub(crate) struct TableSource<'a> {
    pub(crate) dfs: &'a dyn Dfs,
    pub(crate) block_cache: Option<&'a Arc<dyn sst::BlockCache>>,
}

impl<'a> TableSource<'a> {
    pub(crate) fn new(
        dfs: &'a Arc<dyn Dfs>,
        block_cache: Option<&'a Arc<dyn sst::BlockCache>>,
    ) -> TableSource<'a> {
        TableSource {
            dfs: dfs.as_ref(),
            block_cache,
        }
    }

    pub(crate) fn open_l0(&self, id: u64) -> Result<L0Table> {
        Ok(L0Table::open_with(
            id,
            self.dfs.get(FileId(id))?,
            self.block_cache.cloned(),
        )?)
    }

    /// Opens a level table: from a local file with positioned reads into the block cache when
    /// the store keeps files locally and the table is compressed (`Table::open_local`), else
    /// from the bytes `get` returns (a memory map or a download).
    pub(crate) fn open_table(&self, id: u64) -> Result<Table> {
        if let Some(cache) = self.block_cache
            && let Some(file) = self.dfs.open_local(FileId(id))?
        {
            return Ok(Table::open_local(id, file, Some(cache.clone()))?);
        }
        let data = self.dfs.get(FileId(id))?;
        Ok(match self.block_cache {
            Some(c) => Table::open_with_cache(id, data, c.clone())?,
            None => Table::open(id, data)?,
        })
    }
}

/// Tables already open, by file id: what [`ShardData::derive`] reuses instead of reading the
/// object store again. Holding a table keeps its reader count up, which is what file GC checks.
#[derive(Default)]
pub(crate) struct OpenTables {
    l0s: HashMap<u64, L0Table>,
    tables: HashMap<u64, Table>,
}

impl OpenTables {
    /// Adds every table of `data`.
    pub(crate) fn extend_from(&mut self, data: &ShardData) {
        for t in &data.l0s {
            self.add_l0(t.clone());
        }
        for t in data.levels.iter().flatten().flatten() {
            self.add_table(t.clone());
        }
    }

    pub(crate) fn add_l0(&mut self, table: L0Table) {
        self.l0s.insert(table.file_id(), table);
    }

    pub(crate) fn add_table(&mut self, table: Table) {
        self.tables.insert(table.file_id(), table);
    }

    /// The tables held here that `data` does not use: what a state change removed.
    pub(crate) fn without(mut self, data: &ShardData) -> OpenTables {
        for t in &data.l0s {
            self.l0s.remove(&t.file_id());
        }
        for t in data.levels.iter().flatten().flatten() {
            self.tables.remove(&t.file_id());
        }
        self
    }

    /// The tables, L0 files first.
    pub(crate) fn into_tables(self) -> (Vec<L0Table>, Vec<Table>) {
        (
            self.l0s.into_values().collect(),
            self.tables.into_values().collect(),
        )
    }

    fn l0(&self, id: u64, source: TableSource<'_>) -> Result<L0Table> {
        match self.l0s.get(&id) {
            Some(t) => Ok(t.clone()),
            None => source.open_l0(id),
        }
    }

    fn table(&self, id: u64, source: TableSource<'_>) -> Result<Table> {
        match self.tables.get(&id) {
            Some(t) => Ok(t.clone()),
            None => source.open_table(id),
        }
    }
}

impl ShardData {
    /// The state `files` describes: its tables, in its order, taken from `open` or opened
    /// from `source`, and an empty memtable (engine open replays the WAL into it; a split's
    /// children start empty). A state that replaces a live one takes the live memtables with
    /// [`ShardData::with_memtables`].
    ///
    /// Fails only when a table that is not open cannot be read or opened.
    pub(crate) fn derive(
        files: ShardFiles,
        open: &OpenTables,
        source: TableSource<'_>,
    ) -> Result<ShardData> {
        Self::derive_with(files, |id| open.l0(id, source), |id| open.table(id, source))
    }

    /// [`ShardData::derive`] taking each table from `l0` and `table` (by file id): a worker's
    /// cache of open tables (`crate::table_cache`) instead of a map and the object store.
    pub(crate) fn derive_with(
        files: ShardFiles,
        l0: impl Fn(u64) -> Result<L0Table>,
        table: impl Fn(u64) -> Result<Table>,
    ) -> Result<ShardData> {
        let l0s = files
            .l0s()
            .iter()
            .map(|f| l0(f.id))
            .collect::<Result<Vec<_>>>()?;
        let mut levels: [Vec<Vec<Table>>; ColumnFamily::COUNT] = Default::default();
        for cf in ColumnFamily::ALL {
            for level in 1..=changeset::MAX_LEVEL {
                let metas = files.level(cf, level);
                if metas.is_empty() {
                    continue;
                }
                let tables = metas
                    .iter()
                    .map(|f| table(f.id))
                    .collect::<Result<Vec<_>>>()?;
                let per_cf = &mut levels[cf.index()];
                per_cf.resize_with(level as usize, Vec::new);
                per_cf[level as usize - 1] = tables;
            }
        }
        Ok(ShardData {
            files: Arc::new(files),
            mem: Arc::new(Memtable::new()),
            frozen: Vec::new(),
            l0s,
            levels,
            remote: None,
        })
    }

    /// This state with the memtables `mem` and `frozen` (newest first), minus the frozen ones
    /// whose writes the file list's `data_sequence` covers: a flush's ChangeSet raises it to
    /// the last sequence of the memtable it wrote, so that memtable leaves with it.
    pub(crate) fn with_memtables(
        mut self,
        mem: Arc<Memtable>,
        mut frozen: Vec<FrozenMem>,
    ) -> ShardData {
        let covered = self.data_sequence();
        frozen.retain(|f| f.last_sequence > covered);
        self.mem = mem;
        self.frozen = frozen;
        self
    }

    /// Every table of the state: the sections of its L0 files, then its level tables.
    pub(crate) fn table_sections(&self) -> impl Iterator<Item = &Table> {
        let l0_sections = self.l0s.iter().flat_map(L0Table::sections);
        l0_sections.chain(self.levels.iter().flatten().flatten())
    }

    /// The file list this state was derived from.
    pub fn files(&self) -> &ShardFiles {
        &self.files
    }

    /// The shard version (epoch): raised by every split.
    pub fn ver(&self) -> u64 {
        self.files.ver()
    }

    /// First key of the range, inclusive.
    pub fn start(&self) -> &Bytes {
        self.files.start()
    }

    /// End of the range, exclusive; empty means unbounded.
    pub fn end(&self) -> &Bytes {
        self.files.end()
    }

    /// Offset of the shard's write sequence in its SnapVersion.
    pub fn base_version(&self) -> u64 {
        self.files.base_version()
    }

    /// Sequence of the last ChangeSet applied to the shard's file list.
    pub fn meta_seq(&self) -> u64 {
        self.files.meta_seq()
    }

    /// Highest write sequence persisted in the shard's SST files.
    pub fn data_sequence(&self) -> u64 {
        self.files.data_sequence()
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        let (start, end) = (self.start(), self.end());
        key >= start.as_ref() && (end.is_empty() || key < end.as_ref())
    }

    /// Memtables newest first: the active one, then the frozen ones.
    pub fn memtables(&self) -> impl Iterator<Item = &Arc<Memtable>> {
        std::iter::once(&self.mem).chain(self.frozen.iter().map(|f| &f.mem))
    }

    /// Every table id of this state, L0 and level files: equal to `files().file_ids()`.
    pub fn table_ids(&self) -> std::collections::BTreeSet<u64> {
        let levels = self.levels.iter().flatten().flatten().map(Table::file_id);
        self.l0s
            .iter()
            .map(L0Table::file_id)
            .chain(levels)
            .collect()
    }
}
