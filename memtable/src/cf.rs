//! Column families: the three key spaces a shard keeps apart (see ARCHITECTURE.md, "Data model").

use std::fmt;

/// Number of column families; [`crate::Memtable`] holds one [`crate::CfTable`] per family.
pub const CF_COUNT: usize = 3;

/// A column family. The discriminant is the id used on disk and on the wire, so it never changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Cf {
    /// Committed versions: version = commit_ts, user meta = start_ts + commit_ts, value inline.
    Write = 0,
    /// Percolator locks: at most one live lock per key.
    Lock = 1,
    /// Transaction status records.
    Extra = 2,
}

impl Cf {
    /// Every column family, in id order (the order of [`Cf::index`]).
    pub const ALL: [Cf; CF_COUNT] = [Cf::Write, Cf::Lock, Cf::Extra];

    /// Position of this family in per-CF arrays; equal to its id.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Lowercase name, as used in metrics labels and logs.
    pub const fn name(self) -> &'static str {
        match self {
            Cf::Write => "write",
            Cf::Lock => "lock",
            Cf::Extra => "extra",
        }
    }
}

impl fmt::Display for Cf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A column family id read from bytes (WAL, snapshot data) that names no known family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown column family id={0}")]
pub struct UnknownCf(pub u8);

impl TryFrom<u8> for Cf {
    type Error = UnknownCf;

    fn try_from(id: u8) -> Result<Self, Self::Error> {
        match id {
            0 => Ok(Cf::Write),
            1 => Ok(Cf::Lock),
            2 => Ok(Cf::Extra),
            other => Err(UnknownCf(other)),
        }
    }
}

impl From<Cf> for u8 {
    fn from(cf: Cf) -> Self {
        cf as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_round_trips_and_matches_index() {
        for (i, cf) in Cf::ALL.into_iter().enumerate() {
            assert_eq!(cf.index(), i);
            assert_eq!(Cf::try_from(u8::from(cf)), Ok(cf));
        }
    }

    #[test]
    fn unknown_id_is_an_error_naming_the_id() {
        let err = Cf::try_from(3).expect_err("3 is not a column family");
        assert_eq!(err, UnknownCf(3));
        assert_eq!(err.to_string(), "unknown column family id=3");
    }

    #[test]
    fn names_are_distinct_and_lowercase() {
        let names: Vec<_> = Cf::ALL.iter().map(|cf| cf.name()).collect();
        assert_eq!(names, ["write", "lock", "extra"]);
    }
}
