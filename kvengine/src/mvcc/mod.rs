//! Multi-version concurrency control on the engine's own structures: what the transaction
//! records mean ([`records`]) and how a read at a start_ts interprets them ([`reader`] for
//! point gets and lock checks, [`scanner`] for range scans with newer-timestamp tracking).
//!
//! Rules a read at `start_ts` follows:
//! * the LOCK CF is read at the snapshot's SnapVersion (exact for the snapshot); a lock blocks
//!   the read only if `lock.start_ts <= start_ts`, its type is Put or Delete, its
//!   `min_commit_ts <= start_ts`, and its start_ts is not in the caller's bypass set;
//! * in the WRITE CF the first version `<= start_ts` decides: a Put is the value, a Delete
//!   (an engine tombstone) hides the key, and Lock and Rollback records are skipped (the
//!   read continues at the next older version).

pub mod fuzzing;
pub mod reader;
pub mod records;
pub mod scanner;

pub use reader::lock_blocks_read;
pub use records::{Lock, LockInfo, LockType, RecordError, WRITE_META_LEN, WriteKind, WriteMeta};
pub use scanner::MvccScanner;
