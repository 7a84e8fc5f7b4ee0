//! A shard's file list and the pure function that applies a ChangeSet to it.
//!
//! [`ShardFiles::apply`] is what the engine runs after recording a ChangeSet, what manifest
//! recovery runs for each logged ChangeSet, and what a worker runs to rebuild a snapshot. It does
//! no I/O and leaves the file list untouched when it returns an error, so the rules below can be
//! tested exhaustively:
//!
//! * a ChangeSet for another shard, or (when not yet applied) for another shard version, is
//!   rejected;
//! * a ChangeSet whose sequence is not above `meta_seq` was already applied and is skipped, so
//!   replaying a log twice, or receiving a ChangeSet twice, changes nothing;
//! * a compaction whose inputs are no longer all present changes no file: it is reported
//!   conflicted and only advances `meta_seq`;
//! * every level of every column family stays sorted by smallest key with no two files
//!   overlapping, and no file id is referenced twice.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::error::{ApplyError, MalformedReason};
use crate::messages::{
    Change, ChangeSet, Compaction, Flush, Ingest, L0Create, ShardSplitInfo, Snapshot, Split,
    TableCreate,
};
use types::ColumnFamily;

/// Deepest level a file may live at (levels are 1..=MAX_LEVEL below L0). RocksDB's default of
/// seven levels holds far more data than one shard ever will; the bound keeps a corrupt level
/// number from indexing past the per-CF level arrays.
pub const MAX_LEVEL: u32 = 7;

const LEVELS: usize = MAX_LEVEL as usize;

/// What a file list needs to know about one SST file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMeta {
    /// Globally unique file id.
    pub id: u64,
    /// Smallest user key, inclusive.
    pub smallest: Bytes,
    /// Biggest user key, inclusive.
    pub biggest: Bytes,
    /// File size in bytes.
    pub size: u64,
}

impl FileMeta {
    /// Whether the file holds keys of the range `[start, end)` (empty `end` = unbounded).
    pub fn overlaps_range(&self, start: &[u8], end: &[u8]) -> bool {
        self.biggest.as_ref() >= start && (end.is_empty() || self.smallest.as_ref() < end)
    }

    fn from_l0(l0: &L0Create) -> Result<Self, MalformedReason> {
        Self::checked(l0.id, &l0.smallest, &l0.biggest, l0.size)
    }

    fn checked(
        id: u64,
        smallest: &Bytes,
        biggest: &Bytes,
        size: u64,
    ) -> Result<Self, MalformedReason> {
        if smallest > biggest {
            return Err(MalformedReason::InvertedKeyRange { id });
        }
        Ok(Self {
            id,
            smallest: smallest.clone(),
            biggest: biggest.clone(),
            size,
        })
    }

    fn to_l0(&self) -> L0Create {
        L0Create {
            id: self.id,
            smallest: self.smallest.clone(),
            biggest: self.biggest.clone(),
            size: self.size,
        }
    }

    fn to_table(&self, cf: ColumnFamily, level: u32) -> TableCreate {
        TableCreate {
            id: self.id,
            level,
            cf: cf.as_u32(),
            smallest: self.smallest.clone(),
            biggest: self.biggest.clone(),
            size: self.size,
        }
    }
}

/// A level file taken from a [`TableCreate`] after checking its column family, level and keys.
struct PlacedTable {
    cf: ColumnFamily,
    level: u32,
    file: FileMeta,
}

impl PlacedTable {
    fn from_table(table: &TableCreate) -> Result<Self, MalformedReason> {
        let cf = ColumnFamily::from_u32(table.cf)
            .ok_or(MalformedReason::UnknownColumnFamily { cf: table.cf })?;
        if !(1..=MAX_LEVEL).contains(&table.level) {
            return Err(MalformedReason::LevelOutOfRange {
                level: table.level,
                min: 1,
                max: MAX_LEVEL,
            });
        }
        let file = FileMeta::checked(table.id, &table.smallest, &table.biggest, table.size)?;
        Ok(Self {
            cf,
            level: table.level,
            file,
        })
    }
}

/// The outcome of [`ShardFiles::apply`] when it did not fail.
#[derive(Clone, Debug, PartialEq)]
pub enum Applied {
    /// The change was applied and `meta_seq` advanced to its sequence.
    Applied,
    /// The change's sequence is not above `meta_seq`: it was already applied. Nothing changed.
    Skipped {
        /// The shard's meta_seq, which the sequence did not exceed.
        meta_seq: u64,
    },
    /// A compaction whose inputs are no longer all present: no file changed, `meta_seq`
    /// advanced. Holds the ChangeSet with `conflicted` set, which is what the manifest should
    /// record so that replay reaches the same decision without looking at files.
    Conflicted(Box<ChangeSet>),
    /// The shard split. The children hold the files they overlap; the parent only advanced its
    /// `meta_seq` and is retired: the caller replaces it with the children.
    Split(Vec<ShardFiles>),
}

/// The file list of one shard, with the metadata that versions it.
///
/// Invariants, kept by every constructor and by [`ShardFiles::apply`]: no file id appears twice;
/// every level of every column family is sorted by smallest key and its files do not overlap;
/// every file's smallest key is at most its biggest key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardFiles {
    id: u64,
    ver: u64,
    start: Bytes,
    end: Bytes,
    base_version: u64,
    meta_seq: u64,
    data_sequence: u64,
    properties: BTreeMap<String, Vec<u8>>,
    /// Newest first.
    l0s: Vec<FileMeta>,
    /// `levels[cf][level - 1]`, each sorted by smallest key.
    levels: [[Vec<FileMeta>; LEVELS]; ColumnFamily::COUNT],
}

impl ShardFiles {
    /// A shard without files. `end` empty means unbounded; the caller guarantees `start < end`
    /// otherwise (a split of a shard with an inverted range is rejected).
    pub fn new(id: u64, ver: u64, start: Bytes, end: Bytes, base_version: u64) -> Self {
        Self {
            id,
            ver,
            start,
            end,
            base_version,
            meta_seq: 0,
            data_sequence: 0,
            properties: BTreeMap::new(),
            l0s: Vec::new(),
            levels: Default::default(),
        }
    }

    /// Builds the file list a snapshot describes, as of ChangeSet sequence `meta_seq`.
    pub fn from_snapshot(
        shard_id: u64,
        shard_ver: u64,
        meta_seq: u64,
        snapshot: &Snapshot,
    ) -> Result<Self, ApplyError> {
        Self::build(shard_id, shard_ver, meta_seq, snapshot).map_err(|reason| {
            ApplyError::Malformed {
                shard_id,
                sequence: meta_seq,
                reason,
            }
        })
    }

    /// Builds the file list from a ChangeSet holding a [`Change::Snapshot`], as produced by
    /// [`ShardFiles::to_changeset`]: `meta_seq` is the ChangeSet's sequence.
    pub fn from_changeset(changeset: &ChangeSet) -> Result<Self, ApplyError> {
        let malformed = |reason| ApplyError::Malformed {
            shard_id: changeset.shard_id,
            sequence: changeset.sequence,
            reason,
        };
        let snapshot = match &changeset.change {
            Some(Change::Snapshot(snapshot)) => snapshot,
            Some(_) => return Err(malformed(MalformedReason::NotASnapshot)),
            None => return Err(malformed(MalformedReason::MissingChange)),
        };
        let mut files = Self::build(
            changeset.shard_id,
            changeset.shard_ver,
            changeset.sequence,
            snapshot,
        )
        .map_err(malformed)?;
        files.properties = changeset.properties.clone();
        Ok(files)
    }

    fn build(
        id: u64,
        ver: u64,
        meta_seq: u64,
        snapshot: &Snapshot,
    ) -> Result<Self, MalformedReason> {
        if !snapshot.end.is_empty() && snapshot.start >= snapshot.end {
            return Err(MalformedReason::InvalidShardRange);
        }
        let mut ids = BTreeSet::new();
        let mut l0s = Vec::with_capacity(snapshot.l0_creates.len());
        for l0 in &snapshot.l0_creates {
            let file = FileMeta::from_l0(l0)?;
            claim_id(&mut ids, file.id)?;
            l0s.push(file);
        }
        let mut levels: [[Vec<FileMeta>; LEVELS]; ColumnFamily::COUNT] = Default::default();
        for table in &snapshot.table_creates {
            let placed = PlacedTable::from_table(table)?;
            claim_id(&mut ids, placed.file.id)?;
            levels[placed.cf.index()][level_index(placed.level)].push(placed.file);
        }
        for cf in ColumnFamily::ALL {
            for (index, level) in levels[cf.index()].iter_mut().enumerate() {
                sort_and_check_level(level, cf, index as u32 + 1)?;
            }
        }
        Ok(Self {
            id,
            ver,
            start: snapshot.start.clone(),
            end: snapshot.end.clone(),
            base_version: snapshot.base_version,
            meta_seq,
            data_sequence: snapshot.data_sequence,
            properties: BTreeMap::new(),
            l0s,
            levels,
        })
    }

    /// The snapshot description of this file list: L0 files newest first, then level files by
    /// column family, level and smallest key.
    pub fn to_snapshot(&self) -> Snapshot {
        let mut table_creates = Vec::new();
        for cf in ColumnFamily::ALL {
            for (index, files) in self.levels[cf.index()].iter().enumerate() {
                let level = index as u32 + 1;
                table_creates.extend(files.iter().map(|f| f.to_table(cf, level)));
            }
        }
        Snapshot {
            start: self.start.clone(),
            end: self.end.clone(),
            base_version: self.base_version,
            data_sequence: self.data_sequence,
            l0_creates: self.l0s.iter().map(FileMeta::to_l0).collect(),
            table_creates,
        }
    }

    /// A snapshot ChangeSet at sequence `meta_seq`, carrying the properties: what a manifest
    /// rewrite stores. [`ShardFiles::from_changeset`] rebuilds an equal value from it.
    pub fn to_changeset(&self) -> ChangeSet {
        ChangeSet {
            shard_id: self.id,
            shard_ver: self.ver,
            sequence: self.meta_seq,
            properties: self.properties.clone(),
            change: Some(Change::Snapshot(self.to_snapshot())),
        }
    }

    /// The shard id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The shard version (epoch).
    pub fn ver(&self) -> u64 {
        self.ver
    }

    /// First key of the range, inclusive.
    pub fn start(&self) -> &Bytes {
        &self.start
    }

    /// End of the range, exclusive; empty means unbounded.
    pub fn end(&self) -> &Bytes {
        &self.end
    }

    /// Offset of the shard's write sequence in its SnapVersion.
    pub fn base_version(&self) -> u64 {
        self.base_version
    }

    /// Sequence of the last applied ChangeSet.
    pub fn meta_seq(&self) -> u64 {
        self.meta_seq
    }

    /// Highest write sequence persisted in the SSTs.
    pub fn data_sequence(&self) -> u64 {
        self.data_sequence
    }

    /// Shard properties set by applied ChangeSets.
    pub fn properties(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.properties
    }

    /// L0 files, newest first.
    pub fn l0s(&self) -> &[FileMeta] {
        &self.l0s
    }

    /// Files of `cf` at `level`, sorted by smallest key; empty for a level outside
    /// 1..=[`MAX_LEVEL`].
    pub fn level(&self, cf: ColumnFamily, level: u32) -> &[FileMeta] {
        if (1..=MAX_LEVEL).contains(&level) {
            &self.levels[cf.index()][level_index(level)]
        } else {
            &[]
        }
    }

    /// Every file id referenced, L0 and level files, for garbage collection: a file may be
    /// deleted from the object store only when no shard (and no live snapshot) references it.
    /// The file `id` of this list, wherever it lives (L0 or any level of any column family).
    pub fn file_meta(&self, id: u64) -> Option<&FileMeta> {
        let levels = self.levels.iter().flatten().flatten();
        self.l0s.iter().chain(levels).find(|f| f.id == id)
    }

    pub fn file_ids(&self) -> BTreeSet<u64> {
        let levels = self.levels.iter().flatten().flatten();
        self.l0s.iter().chain(levels).map(|f| f.id).collect()
    }

    /// Applies one ChangeSet. On error nothing changed.
    ///
    /// Checks run in this order: the shard id must match; then a sequence not above `meta_seq`
    /// is skipped (a stale duplicate, possibly from before a version change, is harmless); then
    /// the shard version must match; then the content is checked and applied.
    pub fn apply(&mut self, changeset: &ChangeSet) -> Result<Applied, ApplyError> {
        if changeset.shard_id != self.id {
            return Err(ApplyError::ShardIdMismatch {
                expected: self.id,
                found: changeset.shard_id,
            });
        }
        if changeset.sequence <= self.meta_seq {
            return Ok(Applied::Skipped {
                meta_seq: self.meta_seq,
            });
        }
        if changeset.shard_ver != self.ver {
            return Err(ApplyError::ShardVerMismatch {
                shard_id: self.id,
                expected: self.ver,
                found: changeset.shard_ver,
            });
        }
        let (shard_id, sequence) = (self.id, changeset.sequence);
        let malformed = move |reason| ApplyError::Malformed {
            shard_id,
            sequence,
            reason,
        };
        let change = changeset
            .change
            .as_ref()
            .ok_or(malformed(MalformedReason::MissingChange))?;
        let applied = match change {
            Change::Snapshot(snapshot) | Change::InitialFlush(snapshot) => {
                self.apply_snapshot(snapshot).map_err(malformed)?;
                Applied::Applied
            }
            Change::Flush(flush) => {
                self.apply_flush(flush).map_err(malformed)?;
                Applied::Applied
            }
            Change::Compaction(compaction) => {
                if self.apply_compaction(compaction).map_err(malformed)? {
                    Applied::Applied
                } else {
                    let mut marked = changeset.clone();
                    if let Some(Change::Compaction(c)) = &mut marked.change {
                        c.conflicted = true;
                    }
                    Applied::Conflicted(Box::new(marked))
                }
            }
            Change::Split(split) => {
                let mut children = self.split_children(split, sequence).map_err(malformed)?;
                for child in &mut children {
                    merge_properties(&mut child.properties, &changeset.properties);
                }
                Applied::Split(children)
            }
            Change::Destroy(_) => return Err(malformed(MalformedReason::DestroyNotAFileChange)),
            Change::Ingest(ingest) => {
                self.apply_ingest(ingest).map_err(malformed)?;
                Applied::Applied
            }
        };
        self.meta_seq = sequence;
        merge_properties(&mut self.properties, &changeset.properties);
        Ok(applied)
    }

    /// Replaces the file list with the snapshot's. The range and base_version cannot change
    /// this way: only a split changes them, and it creates new shards.
    fn apply_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), MalformedReason> {
        let mut next = Self::build(self.id, self.ver, self.meta_seq, snapshot)?;
        if next.start != self.start || next.end != self.end {
            return Err(MalformedReason::ShardRangeChanged);
        }
        if next.base_version != self.base_version {
            return Err(MalformedReason::BaseVersionChanged {
                expected: self.base_version,
                found: next.base_version,
            });
        }
        next.properties = std::mem::take(&mut self.properties);
        *self = next;
        Ok(())
    }

    fn apply_flush(&mut self, flush: &Flush) -> Result<(), MalformedReason> {
        if let Some(l0) = &flush.l0_create {
            let file = FileMeta::from_l0(l0)?;
            if self.contains_file(file.id) {
                return Err(MalformedReason::DuplicateFile { id: file.id });
            }
            self.l0s.insert(0, file);
        }
        self.data_sequence = self.data_sequence.max(flush.data_sequence);
        Ok(())
    }

    /// Applies a compaction; `Ok(false)` when it is conflicted and nothing changed.
    fn apply_compaction(&mut self, compaction: &Compaction) -> Result<bool, MalformedReason> {
        if compaction.level >= MAX_LEVEL {
            return Err(MalformedReason::LevelOutOfRange {
                level: compaction.level,
                min: 0,
                max: MAX_LEVEL - 1,
            });
        }
        let target = compaction.level + 1;
        // Level n > 0 compactions stay within one column family; level 0 ones span all.
        let top_cf = if compaction.level == 0 {
            None
        } else {
            Some(
                ColumnFamily::from_u32(compaction.cf)
                    .ok_or(MalformedReason::UnknownColumnFamily { cf: compaction.cf })?,
            )
        };
        let mut outputs: [Vec<FileMeta>; ColumnFamily::COUNT] = Default::default();
        for table in &compaction.table_creates {
            let placed = PlacedTable::from_table(table)?;
            if placed.level != target || top_cf.is_some_and(|cf| cf != placed.cf) {
                return Err(MalformedReason::CompactionOutputMisplaced {
                    id: table.id,
                    cf: table.cf,
                    level: table.level,
                    expected_cf: compaction.cf,
                    expected_level: target,
                });
            }
            outputs[placed.cf.index()].push(placed.file);
        }
        if compaction.conflicted {
            return Ok(false);
        }

        // Conflict check: every input must still be where the compaction found it.
        let top: &[FileMeta] = match top_cf {
            None => &self.l0s,
            Some(cf) => &self.levels[cf.index()][level_index(compaction.level)],
        };
        let bottom_cfs: Vec<ColumnFamily> = match top_cf {
            None => ColumnFamily::ALL.to_vec(),
            Some(cf) => vec![cf],
        };
        let tops_present = compaction
            .top_deletes
            .iter()
            .all(|id| top.iter().any(|f| f.id == *id));
        let bottoms_present = compaction.bottom_deletes.iter().all(|id| {
            bottom_cfs.iter().any(|cf| {
                self.levels[cf.index()][level_index(target)]
                    .iter()
                    .any(|f| f.id == *id)
            })
        });
        if !tops_present || !bottoms_present {
            return Ok(false);
        }

        // Compute the new lists, check them, then commit.
        let deleted: BTreeSet<u64> = compaction
            .top_deletes
            .iter()
            .chain(&compaction.bottom_deletes)
            .copied()
            .collect();
        let mut ids = self.file_ids();
        ids.retain(|id| !deleted.contains(id));
        for file in outputs.iter().flatten() {
            claim_id(&mut ids, file.id)?;
        }
        let new_top: Vec<FileMeta> = top
            .iter()
            .filter(|f| !deleted.contains(&f.id))
            .cloned()
            .collect();
        let mut new_bottoms = Vec::with_capacity(bottom_cfs.len());
        for cf in &bottom_cfs {
            let mut level: Vec<FileMeta> = self.levels[cf.index()][level_index(target)]
                .iter()
                .filter(|f| !deleted.contains(&f.id))
                .cloned()
                .chain(std::mem::take(&mut outputs[cf.index()]))
                .collect();
            sort_and_check_level(&mut level, *cf, target)?;
            new_bottoms.push((*cf, level));
        }
        match top_cf {
            None => self.l0s = new_top,
            Some(cf) => self.levels[cf.index()][level_index(compaction.level)] = new_top,
        }
        for (cf, level) in new_bottoms {
            self.levels[cf.index()][level_index(target)] = level;
        }
        Ok(true)
    }

    fn apply_ingest(&mut self, ingest: &Ingest) -> Result<(), MalformedReason> {
        let mut ids = self.file_ids();
        let mut new_l0s = Vec::with_capacity(ingest.l0_creates.len() + self.l0s.len());
        for l0 in &ingest.l0_creates {
            let file = FileMeta::from_l0(l0)?;
            claim_id(&mut ids, file.id)?;
            new_l0s.push(file);
        }
        let mut added: BTreeMap<(ColumnFamily, u32), Vec<FileMeta>> = BTreeMap::new();
        for table in &ingest.table_creates {
            let placed = PlacedTable::from_table(table)?;
            claim_id(&mut ids, placed.file.id)?;
            added
                .entry((placed.cf, placed.level))
                .or_default()
                .push(placed.file);
        }
        let mut new_levels = Vec::with_capacity(added.len());
        for ((cf, level), files) in added {
            let mut merged = self.levels[cf.index()][level_index(level)].clone();
            merged.extend(files);
            sort_and_check_level(&mut merged, cf, level)?;
            new_levels.push((cf, level, merged));
        }
        new_l0s.extend(std::mem::take(&mut self.l0s));
        self.l0s = new_l0s;
        for (cf, level, files) in new_levels {
            self.levels[cf.index()][level_index(level)] = files;
        }
        Ok(())
    }

    /// The children of a split, each keeping every file that overlaps its range (readers clip
    /// files to the shard range, so sharing is safe) and the data_sequence the split names
    /// (the parent's when it names none): the children's write sequences continue from it.
    fn split_children(
        &self,
        split: &Split,
        sequence: u64,
    ) -> Result<Vec<ShardFiles>, MalformedReason> {
        let shards = &split.new_shards;
        if shards.len() < 2 {
            return Err(MalformedReason::SplitTooFewShards {
                count: shards.len(),
            });
        }
        let ver = self
            .ver
            .checked_add(1)
            .ok_or(MalformedReason::ShardVerOverflow { ver: self.ver })?;
        let mut ids = BTreeSet::new();
        for (index, info) in shards.iter().enumerate() {
            let last = index + 1 == shards.len();
            let expected_start = if index == 0 {
                &self.start
            } else {
                &shards[index - 1].end
            };
            let tiles = info.start == *expected_start
                && (!last || info.end == self.end)
                && (!info.end.is_empty() || last)
                && (info.end.is_empty() || info.start < info.end);
            if !tiles {
                return Err(MalformedReason::SplitRangesDoNotTile { index });
            }
            if !ids.insert(info.id) {
                return Err(MalformedReason::SplitDuplicateShardId { id: info.id });
            }
            let data_sequence = self.child_data_sequence(info);
            if data_sequence < self.data_sequence {
                return Err(MalformedReason::SplitDataSequenceBehind {
                    id: info.id,
                    data_sequence,
                    parent: self.data_sequence,
                });
            }
            // The parent handed out SnapVersions up to base_version + its write sequence at
            // the split, which is the child's data_sequence.
            let min_exclusive = self.base_version.saturating_add(data_sequence);
            if info.base_version <= min_exclusive {
                return Err(MalformedReason::SplitBaseVersionTooLow {
                    id: info.id,
                    base_version: info.base_version,
                    min_exclusive,
                });
            }
        }
        let children = shards
            .iter()
            .map(|info| {
                let keep = |files: &[FileMeta]| -> Vec<FileMeta> {
                    files
                        .iter()
                        .filter(|f| f.overlaps_range(&info.start, &info.end))
                        .cloned()
                        .collect()
                };
                ShardFiles {
                    id: info.id,
                    ver,
                    start: info.start.clone(),
                    end: info.end.clone(),
                    base_version: info.base_version,
                    meta_seq: sequence,
                    data_sequence: self.child_data_sequence(info),
                    properties: self.properties.clone(),
                    l0s: keep(&self.l0s),
                    levels: std::array::from_fn(|cf| {
                        std::array::from_fn(|level| keep(&self.levels[cf][level]))
                    }),
                }
            })
            .collect();
        Ok(children)
    }

    /// The data_sequence a split child starts with: the one the split names, or the parent's
    /// when it names none (0, as in every split written before the field existed).
    fn child_data_sequence(&self, info: &ShardSplitInfo) -> u64 {
        if info.data_sequence == 0 {
            self.data_sequence
        } else {
            info.data_sequence
        }
    }

    fn contains_file(&self, id: u64) -> bool {
        let levels = self.levels.iter().flatten().flatten();
        self.l0s.iter().chain(levels).any(|f| f.id == id)
    }
}

fn level_index(level: u32) -> usize {
    level as usize - 1
}

fn claim_id(ids: &mut BTreeSet<u64>, id: u64) -> Result<(), MalformedReason> {
    if ids.insert(id) {
        Ok(())
    } else {
        Err(MalformedReason::DuplicateFile { id })
    }
}

/// Sorts a level by smallest key and checks that no two files overlap.
fn sort_and_check_level(
    files: &mut [FileMeta],
    cf: ColumnFamily,
    level: u32,
) -> Result<(), MalformedReason> {
    files.sort_by(|a, b| a.smallest.cmp(&b.smallest).then(a.id.cmp(&b.id)));
    for pair in files.windows(2) {
        if pair[0].biggest >= pair[1].smallest {
            return Err(MalformedReason::LevelOverlap {
                cf,
                level,
                id: pair[1].id,
                other: pair[0].id,
            });
        }
    }
    Ok(())
}

fn merge_properties(into: &mut BTreeMap<String, Vec<u8>>, from: &BTreeMap<String, Vec<u8>>) {
    for (key, value) in from {
        into.insert(key.clone(), value.clone());
    }
}
