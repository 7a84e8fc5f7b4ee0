//! Column families: the three key spaces a shard keeps apart (see ARCHITECTURE.md, "Data
//! model"). The number of a family is what the WAL, memtable data, L0 files and ChangeSets
//! store, so it never changes.
//!
//! An L0 file holds one section per column family; files of level 1 and below belong to one
//! column family each, so level files carry the number in their ChangeSet entry and memtable
//! rows carry it in their first byte.

use std::fmt;

/// One of the engine's column families. The discriminant is the number on disk and on the
/// wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ColumnFamily {
    /// Committed versions: version = commit_ts, user meta = start_ts + commit_ts, value inline.
    Write = 0,
    /// Percolator locks: at most one live lock per key.
    Lock = 1,
    /// Transaction status records.
    Extra = 2,
}

impl ColumnFamily {
    /// Number of column families; per-CF arrays are indexed by [`ColumnFamily::index`].
    pub const COUNT: usize = 3;

    /// Every column family, in number order (the order of [`ColumnFamily::index`]).
    pub const ALL: [ColumnFamily; Self::COUNT] = [Self::Write, Self::Lock, Self::Extra];

    /// Position of this family in per-CF arrays; equal to its number.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Lowercase name, as used in metrics labels, logs and error messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Lock => "lock",
            Self::Extra => "extra",
        }
    }

    /// The number as protobuf messages store it (`TableCreate.cf`, `Compaction.cf`).
    pub const fn as_u32(self) -> u32 {
        self as u32
    }

    /// The number as byte formats store it (WAL batches, memtable data).
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// The family with protobuf number `cf`, or `None` for an unknown number.
    pub const fn from_u32(cf: u32) -> Option<Self> {
        match cf {
            0 => Some(Self::Write),
            1 => Some(Self::Lock),
            2 => Some(Self::Extra),
            _ => None,
        }
    }
}

impl fmt::Display for ColumnFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A column family number read from bytes (WAL, snapshot data) that names no known family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown column family id={0}")]
pub struct UnknownColumnFamily(pub u8);

impl TryFrom<u8> for ColumnFamily {
    type Error = UnknownColumnFamily;

    fn try_from(id: u8) -> Result<Self, Self::Error> {
        Self::from_u32(u32::from(id)).ok_or(UnknownColumnFamily(id))
    }
}

impl From<ColumnFamily> for u8 {
    fn from(cf: ColumnFamily) -> Self {
        cf.as_u8()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_match_index() {
        for (i, cf) in ColumnFamily::ALL.into_iter().enumerate() {
            assert_eq!(cf.index(), i);
            assert_eq!(ColumnFamily::try_from(cf.as_u8()), Ok(cf));
            assert_eq!(ColumnFamily::from_u32(cf.as_u32()), Some(cf));
        }
    }

    #[test]
    fn unknown_numbers_are_rejected_naming_the_number() {
        assert_eq!(ColumnFamily::from_u32(3), None);
        assert_eq!(ColumnFamily::from_u32(u32::MAX), None);
        let err = ColumnFamily::try_from(3).expect_err("3 is not a column family");
        assert_eq!(err, UnknownColumnFamily(3));
        assert_eq!(err.to_string(), "unknown column family id=3");
    }

    #[test]
    fn names_are_distinct_and_lowercase() {
        let names: Vec<_> = ColumnFamily::ALL.iter().map(|cf| cf.as_str()).collect();
        assert_eq!(names, ["write", "lock", "extra"]);
    }
}
