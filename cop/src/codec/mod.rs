//! Byte formats of the coprocessor: memcomparable numbers and bytes ([`number`], [`bytes`]),
//! datums ([`datum`]), record and index keys ([`table`]), and row values ([`row`]).
