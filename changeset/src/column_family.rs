//! Column families and their numbers on the wire.
//!
//! An L0 file holds one section per column family; files of level 1 and below belong to one
//! column family each, so level files carry the number in [`crate::TableCreate::cf`] and memtable
//! rows carry it in their first byte.

use std::fmt;

/// One of the engine's three column families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ColumnFamily {
    /// Committed versions: version = commit_ts, user meta = start_ts + commit_ts.
    Write = 0,
    /// At most one live Percolator lock per key.
    Lock = 1,
    /// Transaction status records.
    Extra = 2,
}

impl ColumnFamily {
    /// Number of column families; per-CF arrays are indexed by [`ColumnFamily::index`].
    pub const COUNT: usize = 3;

    /// Every column family, in wire-number order.
    pub const ALL: [ColumnFamily; Self::COUNT] = [Self::Write, Self::Lock, Self::Extra];

    /// The column family with wire number `cf`, or `None` for an unknown number.
    pub fn from_u32(cf: u32) -> Option<Self> {
        match cf {
            0 => Some(Self::Write),
            1 => Some(Self::Lock),
            2 => Some(Self::Extra),
            _ => None,
        }
    }

    /// The wire number, as stored in protobuf messages.
    pub fn as_u32(self) -> u32 {
        self as u32
    }

    /// The wire number, as stored in memtable data.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// Position in per-CF arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ColumnFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Write => "write",
            Self::Lock => "lock",
            Self::Extra => "extra",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_numbers_round_trip_and_unknown_numbers_are_rejected() {
        for cf in ColumnFamily::ALL {
            assert_eq!(ColumnFamily::from_u32(cf.as_u32()), Some(cf));
            assert_eq!(ColumnFamily::ALL[cf.index()], cf);
        }
        assert_eq!(ColumnFamily::from_u32(3), None);
        assert_eq!(ColumnFamily::from_u32(u32::MAX), None);
    }
}
