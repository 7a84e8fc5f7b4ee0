//! Values and their types: plain data, no engine and no execution, so that a client reads and
//! writes the same values the coprocessor computes with.
//!
//! A [`Datum`] is one SQL value, NULL included. The coprocessor's executors work on columns of
//! one [`EvalType`]; a datum is the row-at-a-time form used at the edges (rows a client writes
//! and reads, row decode defaults, constants, results, reference evaluators).

use std::cmp::Ordering;

/// The column types a table may declare. Wire value of `ColumnInfo.tp` and `Expr.field_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum FieldType {
    Int64 = 1,
    UInt64 = 2,
    Float64 = 3,
    /// Byte strings and UTF-8 strings (compared bytewise).
    Bytes = 4,
    /// A date-time packed into a u64 (year..microsecond bit fields), compared as the u64.
    DateTime = 5,
}

impl FieldType {
    pub fn from_i32(v: i32) -> Option<FieldType> {
        Some(match v {
            1 => FieldType::Int64,
            2 => FieldType::UInt64,
            3 => FieldType::Float64,
            4 => FieldType::Bytes,
            5 => FieldType::DateTime,
            _ => return None,
        })
    }

    /// How values of this type are held in a column.
    pub fn eval_type(self) -> EvalType {
        match self {
            FieldType::Int64 => EvalType::Int,
            FieldType::UInt64 | FieldType::DateTime => EvalType::UInt,
            FieldType::Float64 => EvalType::Real,
            FieldType::Bytes => EvalType::Bytes,
        }
    }
}

/// The in-memory representation of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EvalType {
    Int,
    UInt,
    Real,
    Bytes,
}

/// One SQL value.
#[derive(Debug, Clone, PartialEq)]
pub enum Datum {
    Null,
    Int(i64),
    UInt(u64),
    Real(f64),
    Bytes(Vec<u8>),
}

impl Datum {
    pub fn is_null(&self) -> bool {
        matches!(self, Datum::Null)
    }

    /// SQL ordering for ORDER BY / MIN / MAX: NULL first, then values; values of different
    /// types compare by numeric value where both are numbers (ints, uints and reals), bytes
    /// after numbers. NaN never occurs in stored data (the row codec rejects it); if it shows up
    /// it sorts after every other real.
    pub fn sql_cmp(&self, other: &Datum) -> Ordering {
        use Datum::*;
        match (self, other) {
            (Null, Null) => Ordering::Equal,
            (Null, _) => Ordering::Less,
            (_, Null) => Ordering::Greater,
            (Int(a), Int(b)) => a.cmp(b),
            (UInt(a), UInt(b)) => a.cmp(b),
            (Int(a), UInt(b)) => cmp_i64_u64(*a, *b),
            (UInt(a), Int(b)) => cmp_i64_u64(*b, *a).reverse(),
            (Real(a), Real(b)) => a.total_cmp(b),
            (Real(a), Int(b)) => a.total_cmp(&(*b as f64)),
            (Int(a), Real(b)) => (*a as f64).total_cmp(b),
            (Real(a), UInt(b)) => a.total_cmp(&(*b as f64)),
            (UInt(a), Real(b)) => (*a as f64).total_cmp(b),
            (Bytes(a), Bytes(b)) => a.cmp(b),
            (Bytes(_), _) => Ordering::Greater,
            (_, Bytes(_)) => Ordering::Less,
        }
    }
}

fn cmp_i64_u64(a: i64, b: u64) -> Ordering {
    if a < 0 {
        Ordering::Less
    } else {
        (a as u64).cmp(&b)
    }
}
