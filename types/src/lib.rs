//! The vocabulary every Stratus crate shares, at the bottom of the crate graph: nothing here
//! depends on another Stratus crate, performs I/O, or knows a wire format beyond the numbers a
//! type is written as.
//!
//! * [`column_family`]: the three key spaces of a shard, defined once for the table format,
//!   the memtable, the ChangeSets and the wire.
//! * [`ids`]: region (shard) ids, file ids and timestamps as distinct types, so that a file id
//!   cannot be passed where a region id is expected.
//! * [`label_enum`]: closed sets of label values (metric labels, wire strings) as enums,
//!   declared with [`label_enum!`];
//! * [`zone`]: zone labels ([`Zone`], never empty: "no zone" is `None`) and how two zones
//!   relate ([`ZoneRelation`]);
//! * [`units`]: sizes (`"32MiB"`) and durations (`"100ms"`) as people write them in config
//!   files, for every process's settings: the engine's `[dfs]` section, the server's, the
//!   worker's and the client's (serde is the only dependency they bring).

pub mod column_family;
pub mod ids;
pub mod label_enum;
pub mod units;
pub mod zone;

pub use column_family::{ColumnFamily, UnknownColumnFamily};
pub use ids::{FileId, RegionId, Ts};
pub use label_enum::UnknownLabel;
pub use units::{ReadableDuration, ReadableSize};
pub use zone::{Zone, ZoneRelation};
