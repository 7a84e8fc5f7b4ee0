//! The generator of the coprocessor differential tests: random tables (schema, secondary
//! indexes, a history of puts, deletes and rollbacks with their commit timestamps) and random
//! DAGs over them (a table or index scan, an optional selection, then none / simple aggregation
//! / hash aggregation / TopN / limit / projection), plus the executors and key ranges of a DAG.
//!
//! Shared by `cop/tests/differential.rs` (against a reference evaluator, on one engine) and the
//! end-to-end differential test in `e2e/` (local against remote execution, through real
//! processes). Include it with `#[path = ".../cop/tests/common/dag_gen.rs"] mod dag_gen;`. It
//! depends only on `cop` and `rand`.

#![allow(dead_code)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use wire::codec::datum::encode_datum;
use wire::codec::table::{index_key, index_range, record_key, record_range, unique_index_value};
use wire::coprocessor::{
    self as proto, ColumnInfo, DagRequest, ExecType, Executor, Expr, ExprType, KeyRange,
    ScalarFuncSig,
};
use wire::datum::{Datum, EvalType, FieldType};

// ---------------------------------------------------------------------------------------------
// The generated case.

#[derive(Debug, Clone)]
pub struct TableCol {
    pub id: i64,
    pub ft: FieldType,
    pub pk: bool,
    /// What a row that lacks the column reads.
    pub default: Datum,
}

pub struct TableCase {
    pub id: i64,
    pub cols: Vec<TableCol>,
    /// Secondary indexes, written alongside the rows.
    pub indexes: Vec<Index>,
    pub history: History,
}

/// A secondary index over some non-pk columns.
#[derive(Debug, Clone)]
pub struct Index {
    pub id: i64,
    /// Indexes into the table's columns, in index order.
    pub cols: Vec<usize>,
    /// Unique: the key holds no handle (the value does), unless a value is NULL. The history
    /// generator keeps the values of a unique index's column distinct across handles.
    pub unique: bool,
}

/// An index scan in place of the table scan.
#[derive(Debug, Clone)]
pub struct IndexScanCase {
    /// Into the table's indexes.
    pub index: usize,
    /// A trailing pk_handle column.
    pub handle: bool,
}

#[derive(Debug, Clone)]
pub enum Op {
    /// Values per table column; `None` = the row lacks the column (written before it existed).
    Put(i64, Vec<Option<Datum>>),
    Delete(i64),
    Rollback(i64),
}

/// An operation and its commit ts, in commit order.
pub type History = Vec<(u64, Op)>;

#[derive(Debug, Clone)]
pub enum Tail {
    None,
    SimpleAgg(Vec<Expr>),
    HashAgg(Vec<Expr>, Vec<Expr>),
    TopN(Vec<(Expr, bool)>, u64),
    Limit(u64),
    Projection(Vec<Expr>),
}

#[derive(Debug, Clone)]
pub struct DagCase {
    pub start_ts: u64,
    pub desc: bool,
    /// Indexes into the table's columns, in scan output order (table scans).
    pub scan_cols: Vec<usize>,
    /// Some: an index scan over the whole index instead of a table scan.
    pub index: Option<IndexScanCase>,
    /// Handle ranges `[lo, hi)`; `hi == lo + 1` is sent as a point range.
    pub ranges: Vec<(i64, i64)>,
    pub selection: Vec<Expr>,
    pub tail: Tail,
}

// ---------------------------------------------------------------------------------------------
// Generation.

pub struct Gen {
    pub rng: StdRng,
    pub max_depth: u32,
}

pub const FIELD_TYPES: [FieldType; 5] = [
    FieldType::Int64,
    FieldType::UInt64,
    FieldType::Float64,
    FieldType::Bytes,
    FieldType::DateTime,
];
pub const REALS: [f64; 9] = [-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.25, 1e300, -1e300];
pub const BYTES: [&[u8]; 9] = [b"", b"a", b"ab", b"abc", b"b", b"ba", b"a%", b"_", b"\\"];
pub const PATTERNS: [&[u8]; 9] = [b"a%", b"%b", b"_", b"%", b"a\\%", b"ab", b"", b"%a_", b"\\"];

impl Gen {
    pub fn new(seed: u64, max_depth: u32) -> Gen {
        Gen {
            rng: StdRng::seed_from_u64(seed),
            max_depth,
        }
    }

    /// Tables `1..=count`, each with 2..=`columns` columns, its indexes and a history of `ops`
    /// operations over handles `-3..handles` (see [`handles_for`]).
    pub fn tables(&mut self, count: i64, columns: usize, ops: usize) -> Vec<TableCase> {
        let handles = handles_for(ops);
        (1..=count)
            .map(|id| {
                let n = self.rng.random_range(2..=columns);
                let cols = self.schema(n);
                let indexes = self.indexes(&cols);
                let unique_col = indexes.iter().find(|i| i.unique).map(|i| i.cols[0]);
                let history = self.history(&cols, unique_col, ops, handles);
                TableCase {
                    id,
                    cols,
                    indexes,
                    history,
                }
            })
            .collect()
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.rng.random_range(0..items.len())].clone()
    }

    pub fn int(&mut self) -> i64 {
        if self.chance(0.08) {
            self.pick(&[i64::MAX, i64::MIN, 1 << 40, -(1 << 40)])
        } else {
            self.rng.random_range(-3..=3)
        }
    }

    pub fn uint(&mut self) -> u64 {
        if self.chance(0.08) {
            self.pick(&[u64::MAX, 1 << 63, 1 << 40])
        } else {
            self.rng.random_range(0..=5)
        }
    }

    pub fn value(&mut self, ft: FieldType) -> Datum {
        match ft {
            FieldType::Int64 => Datum::Int(self.int()),
            FieldType::UInt64 | FieldType::DateTime => Datum::UInt(self.uint()),
            FieldType::Float64 => Datum::Real(self.pick(&REALS)),
            FieldType::Bytes => Datum::Bytes(self.pick(&BYTES).to_vec()),
        }
    }

    pub fn nullable_value(&mut self, ft: FieldType) -> Datum {
        if self.chance(0.2) {
            Datum::Null
        } else {
            self.value(ft)
        }
    }

    pub fn schema(&mut self, n: usize) -> Vec<TableCol> {
        let mut ids: Vec<i64> = Vec::new();
        while ids.len() < n {
            // Ids above 255 force the row format's large layout.
            let id = if self.chance(0.15) {
                self.rng.random_range(256..400)
            } else {
                self.rng.random_range(1..40)
            };
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        let pk = self.chance(0.3);
        ids.into_iter()
            .enumerate()
            .map(|(i, id)| {
                let pk = pk && i == 0;
                let ft = if pk {
                    FieldType::Int64
                } else {
                    self.pick(&FIELD_TYPES)
                };
                let default = if !pk && self.chance(0.5) {
                    self.value(ft)
                } else {
                    Datum::Null
                };
                TableCol {
                    id,
                    ft,
                    pk,
                    default,
                }
            })
            .collect()
    }

    /// Two secondary indexes at most: a non-unique one on one or two columns, and sometimes a
    /// unique one on one column.
    pub fn indexes(&mut self, cols: &[TableCol]) -> Vec<Index> {
        let candidates: Vec<usize> = (0..cols.len()).filter(|&i| !cols[i].pk).collect();
        let mut index_cols = vec![self.pick(&candidates)];
        if candidates.len() > 1 && self.chance(0.5) {
            let second = self.pick(&candidates);
            if !index_cols.contains(&second) {
                index_cols.push(second);
            }
        }
        let mut out = vec![Index {
            id: 1,
            cols: index_cols,
            unique: false,
        }];
        if self.chance(0.5) {
            out.push(Index {
                id: 2,
                cols: vec![self.pick(&candidates)],
                unique: true,
            });
        }
        out
    }

    /// A value of a unique index's column: distinct across handles (or NULL).
    pub fn unique_value(&mut self, ft: FieldType, h: i64) -> Datum {
        if self.chance(0.15) {
            return Datum::Null;
        }
        let v = h * 4 + self.rng.random_range(0..4);
        match ft {
            FieldType::Int64 => Datum::Int(v),
            FieldType::UInt64 | FieldType::DateTime => Datum::UInt((v + 100) as u64),
            FieldType::Float64 => Datum::Real(v as f64 * 0.5),
            FieldType::Bytes => Datum::Bytes(format!("{v}").into_bytes()),
        }
    }

    pub fn history(
        &mut self,
        cols: &[TableCol],
        unique_col: Option<usize>,
        ops: usize,
        handles: i64,
    ) -> History {
        let mut ts = 1;
        let mut out = Vec::new();
        for _ in 0..ops {
            ts += self.rng.random_range(1..=3);
            let h = self.rng.random_range(-3..handles);
            let op = match self.rng.random_range(0..10) {
                0..=6 => Op::Put(
                    h,
                    cols.iter()
                        .enumerate()
                        .map(|(i, c)| {
                            if c.pk {
                                Some(Datum::Int(h))
                            } else if unique_col == Some(i) {
                                Some(self.unique_value(c.ft, h))
                            } else if self.chance(0.1) {
                                None
                            } else {
                                Some(self.nullable_value(c.ft))
                            }
                        })
                        .collect(),
                ),
                7 | 8 => Op::Delete(h),
                _ => Op::Rollback(h),
            };
            out.push((ts, op));
        }
        out
    }

    pub fn dag(
        &mut self,
        cols: &[TableCol],
        indexes: &[Index],
        max_ts: u64,
        handles: i64,
    ) -> DagCase {
        let index = (!indexes.is_empty() && self.chance(0.3)).then(|| IndexScanCase {
            index: self.rng.random_range(0..indexes.len()),
            handle: self.chance(0.5),
        });
        let mut scan_cols: Vec<usize> = (0..cols.len()).filter(|_| self.chance(0.7)).collect();
        if scan_cols.is_empty() {
            scan_cols.push(self.rng.random_range(0..cols.len()));
        }
        // Random order.
        for i in (1..scan_cols.len()).rev() {
            let j = self.rng.random_range(0..=i);
            scan_cols.swap(i, j);
        }
        let input = scan_types(cols, indexes, &scan_cols, index.as_ref());
        let ranges = if self.chance(0.4) {
            vec![(i64::MIN, i64::MAX)]
        } else {
            let mut cuts: Vec<i64> = (0..self.rng.random_range(2..7))
                .map(|_| self.rng.random_range(-4..handles + 2))
                .collect();
            cuts.sort();
            cuts.dedup();
            cuts.chunks(2)
                .filter(|c| c.len() == 2)
                .map(|c| (c[0], c[1]))
                .collect()
        };
        let selection = if self.chance(0.6) {
            (0..self.rng.random_range(1..=2))
                .map(|_| self.expr(&input, Want::Bool, 0))
                .collect()
        } else {
            Vec::new()
        };
        let tail = match self.rng.random_range(0..6) {
            0 => Tail::None,
            1 => Tail::SimpleAgg(self.aggs(&input)),
            2 => {
                let group_by = (0..self.rng.random_range(1..=2))
                    .map(|_| {
                        if self.chance(0.7) {
                            Expr::column(self.rng.random_range(0..input.len()) as u32)
                        } else {
                            self.expr(&input, Want::Any, 1)
                        }
                    })
                    .collect();
                Tail::HashAgg(group_by, self.aggs(&input))
            }
            3 => Tail::TopN(
                (0..self.rng.random_range(1..=2))
                    .map(|_| (self.expr(&input, Want::Any, 1), self.chance(0.5)))
                    .collect(),
                self.rng.random_range(0..8),
            ),
            4 => Tail::Limit(self.rng.random_range(0..12)),
            _ => Tail::Projection(
                (0..self.rng.random_range(1..=3))
                    .map(|_| self.expr(&input, Want::Any, 0))
                    .collect(),
            ),
        };
        DagCase {
            // Mostly late enough to see most rows; sometimes any time at all.
            start_ts: if self.chance(0.2) {
                self.rng.random_range(0..=max_ts + 2)
            } else {
                self.rng.random_range(max_ts / 2..=max_ts + 2)
            },
            desc: self.chance(0.5),
            scan_cols,
            index,
            ranges,
            selection,
            tail,
        }
    }

    pub fn aggs(&mut self, input: &[EvalType]) -> Vec<Expr> {
        (0..self.rng.random_range(1..=3))
            .map(|_| {
                let (tp, want) = self.pick(&[
                    (ExprType::Count, Want::Any),
                    (ExprType::Sum, Want::Num),
                    (ExprType::Min, Want::Any),
                    (ExprType::Max, Want::Any),
                    (ExprType::Avg, Want::Num),
                ]);
                if tp == ExprType::Count && self.chance(0.3) {
                    return Expr::agg(tp, Expr::int(1));
                }
                // Rarely a sum of bytes: a type error.
                let want = if tp == ExprType::Sum && self.chance(0.03) {
                    Want::Bytes
                } else {
                    want
                };
                Expr::agg(tp, self.expr(input, want, 1))
            })
            .collect()
    }

    pub fn column_of(
        &mut self,
        input: &[EvalType],
        pred: impl Fn(EvalType) -> bool,
    ) -> Option<Expr> {
        let candidates: Vec<usize> = (0..input.len()).filter(|&i| pred(input[i])).collect();
        (!candidates.is_empty()).then(|| Expr::column(self.pick(&candidates) as u32))
    }

    pub fn constant(&mut self, t: EvalType) -> Expr {
        match t {
            EvalType::Int => Expr::int(self.int()),
            EvalType::UInt => Expr::uint(self.uint()),
            EvalType::Real => Expr::real(self.pick(&REALS)),
            EvalType::Bytes => Expr::bytes(self.pick(&BYTES).to_vec()),
        }
    }

    /// A leaf or a (possibly NULL) operand of the wanted kind.
    pub fn operand(&mut self, input: &[EvalType], want: Want, depth: u32) -> Expr {
        if self.chance(0.07) {
            return Expr::null();
        }
        self.expr(input, want, depth)
    }

    pub fn expr(&mut self, input: &[EvalType], want: Want, depth: u32) -> Expr {
        let leaf = depth >= self.max_depth || self.chance(0.35);
        let num = |t: EvalType| t != EvalType::Bytes;
        match want {
            Want::Any => {
                let w = self.pick(&[Want::Num, Want::Num, Want::Bytes, Want::Bool]);
                self.expr(input, w, depth)
            }
            Want::Bytes => {
                if !leaf && self.chance(0.1) {
                    // Rarely ill-typed: arithmetic on bytes.
                    return Expr::func(
                        ScalarFuncSig::Plus,
                        vec![self.expr(input, Want::Bytes, depth + 1), Expr::int(1)],
                    );
                }
                match self.column_of(input, |t| t == EvalType::Bytes) {
                    Some(c) if self.chance(0.7) => c,
                    _ => self.constant(EvalType::Bytes),
                }
            }
            Want::Num => {
                if leaf {
                    return match self.column_of(input, num) {
                        Some(c) if self.chance(0.7) => c,
                        _ => {
                            let t = self.pick(&[EvalType::Int, EvalType::UInt, EvalType::Real]);
                            self.constant(t)
                        }
                    };
                }
                match self.rng.random_range(0..10) {
                    0..=5 => {
                        let sig = self.pick(&[
                            ScalarFuncSig::Plus,
                            ScalarFuncSig::Minus,
                            ScalarFuncSig::Multiply,
                            ScalarFuncSig::Divide,
                            ScalarFuncSig::IntDiv,
                            ScalarFuncSig::Mod,
                        ]);
                        let a = self.operand(input, Want::Num, depth + 1);
                        let b = if is_null(&a) {
                            self.expr(input, Want::Num, depth + 1)
                        } else {
                            self.operand(input, Want::Num, depth + 1)
                        };
                        Expr::func(sig, vec![a, b])
                    }
                    6 => Expr::func(
                        ScalarFuncSig::UnaryMinus,
                        vec![self.expr(input, Want::Num, depth + 1)],
                    ),
                    _ => self.expr(input, Want::Bool, depth),
                }
            }
            Want::Bool => {
                if leaf {
                    return self.comparison(input, depth);
                }
                match self.rng.random_range(0..12) {
                    0..=3 => self.comparison(input, depth),
                    4 | 5 => {
                        let sig = self.pick(&[ScalarFuncSig::And, ScalarFuncSig::Or]);
                        let a = self.operand(input, Want::Bool, depth + 1);
                        let b = if is_null(&a) {
                            self.expr(input, Want::Bool, depth + 1)
                        } else {
                            self.operand(input, Want::Bool, depth + 1)
                        };
                        Expr::func(sig, vec![a, b])
                    }
                    6 => Expr::func(
                        ScalarFuncSig::Not,
                        vec![self.expr(input, Want::Bool, depth + 1)],
                    ),
                    7 => {
                        let w = self.pick(&[Want::Num, Want::Bytes]);
                        Expr::func(ScalarFuncSig::IsNull, vec![self.expr(input, w, depth + 1)])
                    }
                    8 | 9 => {
                        let w = self.pick(&[Want::Num, Want::Bytes]);
                        let mut children = vec![self.expr(input, w, depth + 1)];
                        for _ in 0..self.rng.random_range(1..=3) {
                            children.push(self.operand(input, w, depth + 1));
                        }
                        Expr::func(ScalarFuncSig::In, children)
                    }
                    10 => {
                        let v = self.operand(input, Want::Bytes, depth + 1);
                        let p = if self.chance(0.8) {
                            Expr::bytes(self.pick(&PATTERNS).to_vec())
                        } else {
                            self.expr(input, Want::Bytes, depth + 1)
                        };
                        Expr::func(ScalarFuncSig::Like, vec![v, p])
                    }
                    _ => self.expr(input, Want::Num, depth),
                }
            }
        }
    }

    pub fn comparison(&mut self, input: &[EvalType], depth: u32) -> Expr {
        let sig = self.pick(&[
            ScalarFuncSig::Lt,
            ScalarFuncSig::Le,
            ScalarFuncSig::Gt,
            ScalarFuncSig::Ge,
            ScalarFuncSig::Eq,
            ScalarFuncSig::Ne,
        ]);
        let (wa, wb) = if self.chance(0.03) {
            // Rarely ill-typed: a number against bytes.
            (Want::Num, Want::Bytes)
        } else {
            let w = self.pick(&[Want::Num, Want::Num, Want::Bytes]);
            (w, w)
        };
        let a = self.expr(input, wa, depth + 1);
        let b = self.operand(input, wb, depth + 1);
        Expr::func(sig, vec![a, b])
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Want {
    Num,
    Bytes,
    Bool,
    Any,
}

pub fn is_null(e: &Expr) -> bool {
    e.tp == ExprType::Null as i32
}

// ---------------------------------------------------------------------------------------------
// Index writes, executors and key ranges of a case.

/// An index key and its value (`None`: a delete, or a rollback under a rollback).
pub type IndexWrite = (Vec<u8>, Option<Vec<u8>>);

/// The key and value of a row's entry in an index.
pub fn index_entry(
    t: &TableCase,
    index: &Index,
    h: i64,
    values: &[Option<Datum>],
) -> (Vec<u8>, Vec<u8>) {
    let datums: Vec<Datum> = index
        .cols
        .iter()
        .map(|&i| {
            values[i]
                .clone()
                .unwrap_or_else(|| t.cols[i].default.clone())
        })
        .collect();
    if index.unique && !datums.iter().any(|d| d.is_null()) {
        (
            index_key(t.id, index.id, &datums, None),
            unique_index_value(h),
        )
    } else {
        (index_key(t.id, index.id, &datums, Some(h)), b"0".to_vec())
    }
}

/// The index writes of each history operation, at its commit ts: a put writes the row's new
/// entries and deletes the old ones whose key changed; a delete deletes the row's entries; a
/// rollback writes a rollback record on them.
pub fn index_writes(t: &TableCase) -> Vec<Vec<IndexWrite>> {
    let mut current: std::collections::HashMap<i64, &Vec<Option<Datum>>> = Default::default();
    let mut out = Vec::new();
    for (_, op) in &t.history {
        let mut writes = Vec::new();
        match op {
            Op::Put(h, values) => {
                for index in &t.indexes {
                    let (key, value) = index_entry(t, index, *h, values);
                    if let Some(old) = current.get(h) {
                        let (old_key, _) = index_entry(t, index, *h, old);
                        if old_key != key {
                            writes.push((old_key, None));
                        }
                    }
                    writes.push((key, Some(value)));
                }
                current.insert(*h, values);
            }
            Op::Delete(h) | Op::Rollback(h) => {
                if let Some(old) = current.get(h) {
                    for index in &t.indexes {
                        writes.push((index_entry(t, index, *h, old).0, None));
                    }
                }
                if matches!(op, Op::Delete(_)) {
                    current.remove(h);
                }
            }
        }
        out.push(writes);
    }
    out
}

/// The scan's output types: the table scan's columns, or the index columns and the handle.
pub fn scan_types(
    cols: &[TableCol],
    indexes: &[Index],
    scan_cols: &[usize],
    index: Option<&IndexScanCase>,
) -> Vec<EvalType> {
    match index {
        None => scan_cols.iter().map(|&i| cols[i].ft.eval_type()).collect(),
        Some(s) => {
            let mut out: Vec<EvalType> = indexes[s.index]
                .cols
                .iter()
                .map(|&i| cols[i].ft.eval_type())
                .collect();
            if s.handle {
                out.push(EvalType::Int);
            }
            out
        }
    }
}

pub fn op_handle(op: &Op) -> i64 {
    match op {
        Op::Put(h, _) | Op::Delete(h) | Op::Rollback(h) => *h,
    }
}

pub fn column_info(c: &TableCol) -> ColumnInfo {
    let mut default_val = Vec::new();
    if !c.default.is_null() {
        encode_datum(&mut default_val, &c.default, false);
    }
    ColumnInfo {
        column_id: c.id,
        tp: c.ft as i32,
        pk_handle: c.pk,
        default_val,
    }
}

/// The key ranges of handle ranges `[lo, hi)` of a table: `(i64::MIN, i64::MAX)` is the whole
/// table, `hi == lo + 1` a point range.
pub fn key_ranges(table_id: i64, ranges: &[(i64, i64)]) -> Vec<KeyRange> {
    ranges
        .iter()
        .map(|&(lo, hi)| {
            if (lo, hi) == (i64::MIN, i64::MAX) {
                let (s, e) = record_range(table_id);
                KeyRange::new(s, e)
            } else if hi == lo + 1 {
                let k = record_key(table_id, lo);
                let mut end = k.clone();
                end.push(0);
                KeyRange::new(k, end)
            } else {
                KeyRange::new(record_key(table_id, lo), record_key(table_id, hi))
            }
        })
        .collect()
}

/// The ranges a DAG case reads: its handle ranges, or the whole index it scans.
pub fn request_ranges(t: &TableCase, case: &DagCase) -> Vec<KeyRange> {
    match &case.index {
        None => key_ranges(t.id, &case.ranges),
        Some(s) => {
            let (start, end) = index_range(t.id, t.indexes[s.index].id);
            vec![KeyRange::new(start, end)]
        }
    }
}

fn executor(tp: ExecType, fill: impl FnOnce(&mut Executor)) -> Executor {
    let mut e = Executor {
        tp: tp as i32,
        ..Executor::default()
    };
    fill(&mut e);
    e
}

/// The DAG's executors: the scan, the selection if any, the tail.
pub fn executors(t: &TableCase, case: &DagCase) -> Vec<Executor> {
    let scan = match &case.index {
        None => {
            let columns = case
                .scan_cols
                .iter()
                .map(|&i| column_info(&t.cols[i]))
                .collect();
            executor(ExecType::TableScan, |e| {
                e.tbl_scan = Some(proto::TableScan {
                    table_id: t.id,
                    columns,
                    desc: case.desc,
                })
            })
        }
        Some(s) => {
            let index = &t.indexes[s.index];
            let mut columns: Vec<ColumnInfo> = index
                .cols
                .iter()
                .map(|&i| column_info(&t.cols[i]))
                .collect();
            if s.handle {
                let id = t.cols.iter().find(|c| c.pk).map_or(1000, |c| c.id);
                columns.push(ColumnInfo {
                    column_id: id,
                    tp: FieldType::Int64 as i32,
                    pk_handle: true,
                    default_val: Vec::new(),
                });
            }
            executor(ExecType::IndexScan, |e| {
                e.idx_scan = Some(proto::IndexScan {
                    table_id: t.id,
                    index_id: index.id,
                    columns,
                    desc: case.desc,
                    unique: index.unique,
                })
            })
        }
    };
    let mut out = vec![scan];
    if !case.selection.is_empty() {
        let conditions = case.selection.clone();
        out.push(executor(ExecType::Selection, |e| {
            e.selection = Some(proto::Selection { conditions })
        }));
    }
    let aggregation = |tp: ExecType, group_by: &[Expr], agg_func: &[Expr]| {
        executor(tp, |e| {
            e.aggregation = Some(proto::Aggregation {
                group_by: group_by.to_vec(),
                agg_func: agg_func.to_vec(),
            })
        })
    };
    match &case.tail {
        Tail::None => {}
        Tail::SimpleAgg(a) => out.push(aggregation(ExecType::SimpleAgg, &[], a)),
        Tail::HashAgg(g, a) => out.push(aggregation(ExecType::HashAgg, g, a)),
        Tail::TopN(o, n) => out.push(executor(ExecType::TopN, |e| {
            e.top_n = Some(proto::TopN {
                order_by: o
                    .iter()
                    .map(|(expr, desc)| proto::ByItem {
                        expr: Some(expr.clone()),
                        desc: *desc,
                    })
                    .collect(),
                limit: *n,
            })
        })),
        Tail::Limit(n) => out.push(executor(ExecType::Limit, |e| {
            e.limit = Some(proto::Limit { limit: *n })
        })),
        Tail::Projection(p) => out.push(executor(ExecType::Projection, |e| {
            e.projection = Some(proto::Projection { exprs: p.clone() })
        })),
    }
    out
}

/// The encoded-ready DAG request of a case.
pub fn dag_request(t: &TableCase, case: &DagCase) -> DagRequest {
    DagRequest {
        executors: executors(t, case),
        ..DagRequest::default()
    }
}

/// A case's aggregation results are partial (one row per group, in no defined order): compare
/// them as multisets.
pub fn is_partial(case: &DagCase) -> bool {
    matches!(case.tail, Tail::SimpleAgg(_) | Tail::HashAgg(..))
}

/// The DAG case in SQL-like form (without the rows), for failure messages.
pub fn show_dag(t: &TableCase, case: &DagCase) -> String {
    let list = |v: &[Expr]| v.iter().map(show_expr).collect::<Vec<_>>().join(", ");
    let scan = match &case.index {
        None => format!(
            "table scan of table {} columns {:?} handles {:?}",
            t.id,
            case.scan_cols
                .iter()
                .map(|&i| (t.cols[i].id, t.cols[i].ft, t.cols[i].pk))
                .collect::<Vec<_>>(),
            case.ranges
        ),
        Some(s) => format!(
            "index scan of table {} index {:?} handle={}",
            t.id, t.indexes[s.index], s.handle
        ),
    };
    let tail = match &case.tail {
        Tail::None => "(no tail)".to_string(),
        Tail::SimpleAgg(a) => format!("SELECT {}", list(a)),
        Tail::HashAgg(g, a) => format!("SELECT {} GROUP BY {}", list(a), list(g)),
        Tail::TopN(o, n) => format!(
            "ORDER BY {} LIMIT {n}",
            o.iter()
                .map(|(e, d)| format!("{}{}", show_expr(e), if *d { " DESC" } else { "" }))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Tail::Limit(n) => format!("LIMIT {n}"),
        Tail::Projection(p) => format!("SELECT {}", list(p)),
    };
    format!(
        "{scan} desc={} start_ts={} WHERE [{}] {tail}",
        case.desc,
        case.start_ts,
        list(&case.selection)
    )
}

pub fn sig(e: &Expr) -> ScalarFuncSig {
    ScalarFuncSig::from_i32(e.sig).expect("generated signatures are known")
}

/// An expression in SQL-like form, for failure messages.
pub fn show_expr(e: &Expr) -> String {
    let word = |e: &Expr| <[u8; 8]>::try_from(e.val.as_slice()).unwrap_or_default();
    match ExprType::from_i32(e.tp) {
        Some(ExprType::Null) => "NULL".into(),
        Some(ExprType::Int64) => i64::from_le_bytes(word(e)).to_string(),
        Some(ExprType::UInt64) => format!("{}u", u64::from_le_bytes(word(e))),
        Some(ExprType::Float64) => format!("{:?}", f64::from_bits(u64::from_le_bytes(word(e)))),
        Some(ExprType::Bytes) => format!("{:?}", String::from_utf8_lossy(&e.val)),
        Some(ExprType::ColumnRef) => format!("c{}", e.column_offset),
        Some(ExprType::ScalarFunc) => {
            let args: Vec<String> = e.children.iter().map(show_expr).collect();
            format!("{:?}({})", sig(e), args.join(", "))
        }
        Some(agg) => format!("{agg:?}({})", show_expr(&e.children[0])),
        None => format!("?{}", e.tp),
    }
}

/// The handles of a history of `ops` operations: `-3..handles_for(ops)`.
pub fn handles_for(ops: usize) -> i64 {
    (ops as i64 / 2).max(2)
}
