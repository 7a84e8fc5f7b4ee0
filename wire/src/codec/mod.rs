//! Byte formats of the coprocessor: memcomparable numbers and bytes ([`number`], [`bytes`]),
//! datums ([`datum`]), record and index keys ([`table`]), and row values ([`row`]).
//!
//! Every decoder takes bytes that came from disk or the network: it returns a
//! [`CodecError`](crate::codec::CodecError) instead of panicking, and never allocates more than
//! the input it has already read justifies.

pub mod bytes;
pub mod datum;
pub mod fuzzing;
pub mod number;
pub mod row;
pub mod table;
