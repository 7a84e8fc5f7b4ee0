//! Ids and timestamps that cross crate boundaries, each its own type.
//!
//! A region id, a file id and a timestamp are all `u64` on the wire and on disk, and all three
//! appear side by side in the same calls (a flush names a region and the file it made; a read
//! names a region and a timestamp). As newtypes, passing one where another is expected does
//! not compile. Each converts to and from `u64` explicitly at the edges (protobuf fields, byte
//! formats) and prints as its number, so log lines and errors read as before.

use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub u64);

        impl $name {
            /// The number, as the wire and byte formats store it.
            pub const fn get(self) -> u64 {
                self.0
            }
        }

        impl From<u64> for $name {
            fn from(v: u64) -> Self {
                Self(v)
            }
        }

        impl From<$name> for u64 {
            fn from(v: $name) -> u64 {
                v.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::LowerHex for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::LowerHex::fmt(&self.0, f)
            }
        }
    };
}

id_type!(
    /// A region: a range of the key space with its own file list, memtables and (later) its
    /// own consensus group. The engine calls it a shard; the id is the same number.
    RegionId
);

id_type!(
    /// An SST file in the object store. Unique across the cluster (the allocating node's id
    /// sits in the high bits), never reused.
    FileId
);

id_type!(
    /// A timestamp from the TSO: physical milliseconds shifted left by 18 bits, plus a logical
    /// counter. Start and commit timestamps of transactions, read timestamps, the GC safe
    /// point.
    Ts
);

impl Ts {
    /// Bits of the logical counter below the physical milliseconds.
    pub const LOGICAL_BITS: u32 = 18;

    /// The largest timestamp: a read at it sees every committed version.
    pub const MAX: Ts = Ts(u64::MAX);

    /// Timestamps one physical millisecond holds.
    pub const LOGICAL_PER_MS: u64 = 1 << Self::LOGICAL_BITS;

    /// The largest physical part (46 bits of milliseconds: about 2200 years).
    pub const MAX_PHYSICAL_MS: u64 = u64::MAX >> Self::LOGICAL_BITS;

    /// The rule every timestamp oracle applies: after the last batch handed out ended at
    /// (`physical`, `next_logical`), with the clock at `now_ms`, where the next `count`
    /// timestamps go, as (physical, first logical). Physical time never goes backwards,
    /// whatever the clock says; a full millisecond runs ahead of the clock by one. The caller
    /// checks `count <= LOGICAL_PER_MS` and that the result lies below its persisted mark.
    pub const fn next_batch(
        physical: u64,
        next_logical: u64,
        now_ms: u64,
        count: u64,
    ) -> (u64, u64) {
        let (mut physical, mut logical) = (physical, next_logical);
        if now_ms > physical {
            physical = now_ms;
            logical = 0;
        }
        if logical + count > Self::LOGICAL_PER_MS {
            physical += 1;
            logical = 0;
        }
        (physical, logical)
    }

    /// The timestamp of physical time `millis` with logical counter `logical`.
    pub const fn compose(millis: u64, logical: u64) -> Ts {
        Ts((millis << Self::LOGICAL_BITS) | (logical & ((1 << Self::LOGICAL_BITS) - 1)))
    }

    /// The physical part, in milliseconds since the Unix epoch.
    pub const fn physical_millis(self) -> u64 {
        self.0 >> Self::LOGICAL_BITS
    }

    /// The logical counter within its millisecond.
    pub const fn logical(self) -> u64 {
        self.0 & ((1 << Self::LOGICAL_BITS) - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_print_and_convert_as_their_number() {
        assert_eq!(RegionId(14).to_string(), "14");
        assert_eq!(u64::from(FileId::from(7)), 7);
        assert_eq!(Ts(3).get(), 3);
    }

    #[test]
    fn a_batch_follows_the_clock_never_goes_back_and_a_full_millisecond_runs_ahead() {
        assert_eq!(Ts::next_batch(10, 5, 12, 3), (12, 0), "the clock moved on");
        assert_eq!(Ts::next_batch(10, 5, 8, 3), (10, 5), "the clock went back");
        assert_eq!(
            Ts::next_batch(10, Ts::LOGICAL_PER_MS - 2, 10, 3),
            (11, 0),
            "the millisecond is full"
        );
    }

    #[test]
    fn ts_composes_physical_and_logical_parts() {
        let ts = Ts::compose(1_000, 5);
        assert_eq!(ts.physical_millis(), 1_000);
        assert_eq!(ts.logical(), 5);
        assert_eq!(ts.get(), (1_000 << 18) | 5);
        assert!(Ts::compose(1_000, 0) < Ts::compose(1_001, 0));
    }
}
