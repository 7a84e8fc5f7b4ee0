//! Byte formats of the coprocessor's data: memcomparable numbers and bytes ([`number`],
//! [`bytes`]), datums ([`datum`]), record and index keys ([`table`]), and row values
//! ([`row`]). The client encodes keys and rows with them when it writes and decodes result
//! rows when it reads; the coprocessor decodes the stored rows it scans. They are pure
//! functions over bytes and [`crate::datum`] values, with no engine and no I/O.
//!
//! Every decoder takes bytes that came from disk or the network: it returns a [`CodecError`]
//! instead of panicking, and never allocates more than the input it has already read
//! justifies. Each layout is documented beside its encoder, with its version; golden files
//! under `wire/tests/data/` keep the formats from drifting.

pub mod bytes;
pub mod datum;
mod error;
pub mod number;
pub mod row;
pub mod table;

pub use error::CodecError;
