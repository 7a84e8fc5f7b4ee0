//! Stratus memtable: a concurrent skiplist per column family, one node per user key, the key's
//! versions chained newest first.
//!
//! Keys carry no timestamp. A version is a `u64` (a commit ts in the WRITE CF, a sequence
//! elsewhere); a read at `ts` sees a key's first version `<= ts`, which may be a tombstone.
//! A put is accepted only if its version is newer than the key's newest one.
//!
//! Modules, in the order data flows:
//! * the column families are `types::ColumnFamily`, re-exported here;
//! * `arena_skiplist` (private, the only `unsafe` code): the arena, nodes and version records;
//! * [`version_chain`]: one key's versions and the [`VersionRef`] handles readers get;
//! * [`size_estimate`]: what each put is charged, for the memtable switch threshold;
//! * [`cf_table`]: one column family's skiplist, and why it is built this way;
//! * [`iter`] and [`all_versions_iter`]: reading at a ts, and walking everything for a flush;
//! * [`memtable`]: the per-shard set of tables.

// `unsafe` is denied everywhere (workspace lints) but in `arena_skiplist`, whose every block
// carries a proof.
#![warn(missing_docs)]

pub mod all_versions_iter;
#[allow(unsafe_code)]
mod arena_skiplist;
pub mod cf_table;
pub mod iter;
pub mod memtable;
pub mod size_estimate;
pub mod version_chain;

pub use all_versions_iter::{AllVersionsIter, KeyVersions};
pub use cf_table::CfTable;
pub use iter::CfIter;
pub use memtable::Memtable;
pub use size_estimate::{KEY_OVERHEAD, VERSION_OVERHEAD};
pub use types::{ColumnFamily, UnknownColumnFamily};
pub use version_chain::{BorrowedVersion, BorrowedVersions, VersionRef, Versions};
