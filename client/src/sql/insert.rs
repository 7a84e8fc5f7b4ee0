//! `INSERT INTO t [(cols)] VALUES (...), ...`: literal rows encoded as record key
//! (`record_key(table_id, primary key)`) → row value (`encode_row` of every other given
//! column), written as one transaction through the txn API ([`write`], see
//! [`super::txn_write`]): 1PC when the rows fall in one region, else a two-phase commit
//! (Percolator: the first row's key is the primary).
//!
//! A primary key that already exists is refused, as in MySQL: a key visible at the insert's
//! start_ts is found by a scan of exactly the inserted keys, one committed later makes the
//! prewrite fail with a write conflict; duplicates inside one statement are refused while
//! planning. Omitted columns are NULL; there are no defaults.
//!
//! Not built yet: resolving a lock in the way of the prewrite (the insert fails with the
//! server's `Locked` error; retrying the statement after the lock TTL is safe).

use std::collections::HashSet;

use sqlparser::ast::{self, SetExpr, TableObject, UnaryOperator, Value};
use wire::codec::row::encode_row;
use wire::codec::table::record_key;
use wire::coprocessor::{self as proto, DagRequest, ExecType, Executor};
use wire::datum::Datum;

use super::catalog::{SqlType, TableSchema};
pub use super::txn_write::WriteOutcome;
use super::txn_write::{self, CommitOptions, RowWrite};
use super::{Result, SqlError, simple_name, unsupported};
use crate::paging::Client;

/// Encoded rows ready to write.
#[derive(Debug, Clone)]
pub struct InsertPlan {
    pub table: TableSchema,
    /// (record key, row value), in statement order.
    pub rows: Vec<(Vec<u8>, Vec<u8>)>,
}

impl InsertPlan {
    /// A put of each row, in statement order.
    pub fn writes(&self) -> Vec<RowWrite> {
        self.rows
            .iter()
            .map(|(key, value)| RowWrite::Put {
                key: key.clone(),
                value: value.clone(),
            })
            .collect()
    }
}

pub fn table_name(ins: &ast::Insert) -> Result<String> {
    match &ins.table {
        TableObject::TableName(n) => simple_name(n, "table"),
        other => Err(unsupported(format!(
            "INSERT into a table function: {other}"
        ))),
    }
}

/// Refuses the INSERT forms no front writes (shared with the SQL endpoint's writes, which
/// also take `ON DUPLICATE KEY UPDATE` and a `SELECT` source).
pub fn check_insert(ins: &ast::Insert) -> Result<()> {
    if ins.or.is_some() || ins.ignore || ins.overwrite || ins.replace_into {
        return Err(unsupported(
            "INSERT modifiers (IGNORE / OR / OVERWRITE / REPLACE)",
        ));
    }
    if ins.returning.is_some() || ins.partitioned.is_some() || !ins.assignments.is_empty() {
        return Err(unsupported("INSERT with RETURNING, PARTITION or SET"));
    }
    if ins.table_alias.is_some() {
        return Err(unsupported("a table alias in INSERT"));
    }
    Ok(())
}

pub fn plan_insert(ins: &ast::Insert, table: TableSchema) -> Result<InsertPlan> {
    check_insert(ins)?;
    super::modify::refuse_indexed(&table)?;
    if ins.on.is_some() {
        return Err(unsupported("INSERT ... ON DUPLICATE KEY / ON CONFLICT"));
    }
    let Some(source) = &ins.source else {
        return Err(unsupported("INSERT without VALUES"));
    };
    if source.with.is_some() || source.order_by.is_some() || source.limit_clause.is_some() {
        return Err(unsupported("WITH / ORDER BY / LIMIT in INSERT"));
    }
    let SetExpr::Values(values) = source.body.as_ref() else {
        return Err(unsupported("INSERT ... SELECT"));
    };
    let targets = insert_targets(ins, &table)?;
    let mut rows = Vec::with_capacity(values.rows.len());
    for row in &values.rows {
        if row.len() != targets.len() {
            return Err(SqlError::BadValue {
                column: "*".into(),
                reason: format!(
                    "a row has {} values for {} columns",
                    row.len(),
                    targets.len()
                ),
            });
        }
        let mut datums = Vec::with_capacity(targets.len());
        for (&ci, e) in targets.iter().zip(row.iter()) {
            let col = &table.columns[ci];
            datums.push(literal(e, col.ty, &col.name)?);
        }
        rows.push(datums);
    }
    let full = full_rows(&table, &targets, rows);
    plan_rows(table, full, Duplicates::Refuse)
}

/// The table's column index of each column an INSERT names, in its order (all of them,
/// in declaration order, when it names none); the primary key must be among them.
pub fn insert_targets(ins: &ast::Insert, table: &TableSchema) -> Result<Vec<usize>> {
    let targets: Vec<usize> = if ins.columns.is_empty() {
        (0..table.columns.len()).collect()
    } else {
        let mut t = Vec::with_capacity(ins.columns.len());
        for c in &ins.columns {
            let name = simple_name(c, "column")?;
            let i = table
                .column_index(&name)
                .ok_or_else(|| SqlError::UnknownColumn {
                    table: table.name.clone(),
                    column: name.clone(),
                })?;
            if t.contains(&i) {
                return Err(SqlError::BadValue {
                    column: name,
                    reason: "column listed twice".into(),
                });
            }
            t.push(i);
        }
        t
    };
    if !targets.contains(&table.pk) {
        return Err(SqlError::BadValue {
            column: table.columns[table.pk].name.clone(),
            reason: "the primary key needs a value".into(),
        });
    }
    Ok(targets)
}

/// Rows of `targets`' values as rows of every column in declaration order, NULL where a
/// column was not given (there are no defaults).
pub fn full_rows(table: &TableSchema, targets: &[usize], rows: Vec<Vec<Datum>>) -> Vec<Vec<Datum>> {
    rows.into_iter()
        .map(|row| {
            let mut full = vec![Datum::Null; table.columns.len()];
            for (&ci, d) in targets.iter().zip(row) {
                full[ci] = d;
            }
            full
        })
        .collect()
}

/// What [`plan_rows`] does with two rows of one primary key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duplicates {
    /// An error, as a plain INSERT's.
    Refuse,
    /// Allowed: the caller writes them in order (`ON DUPLICATE KEY UPDATE`).
    Allow,
}

/// Encodes `rows` (every column, in declaration order, of the column's stored kind) as an
/// insert: the primary key must be an integer, not NULL.
pub fn plan_rows(
    table: TableSchema,
    rows: Vec<Vec<Datum>>,
    duplicates: Duplicates,
) -> Result<InsertPlan> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let handle = row_handle(&table, &row)?;
        if duplicates == Duplicates::Refuse && !seen.insert(handle) {
            return Err(SqlError::DuplicateKey {
                table: table.name.clone(),
                key: handle,
            });
        }
        let value = row_value(&table, row)?;
        out.push((record_key(table.id, handle), value));
    }
    Ok(InsertPlan { table, rows: out })
}

/// The primary key of `row` (every column of `table`): an integer, never NULL.
pub fn row_handle(table: &TableSchema, row: &[Datum]) -> Result<i64> {
    match row.get(table.pk) {
        Some(Datum::Int(h)) => Ok(*h),
        _ => Err(SqlError::BadValue {
            column: table.columns[table.pk].name.clone(),
            reason: "the primary key can't be NULL".into(),
        }),
    }
}

/// The stored value of `row` (every column of `table`, in declaration order): every
/// column but the primary key (the handle, in the key) that is not NULL.
pub fn row_value(table: &TableSchema, row: Vec<Datum>) -> Result<Vec<u8>> {
    let cols: Vec<(i64, Datum)> = table
        .columns
        .iter()
        .zip(row)
        .enumerate()
        .filter(|(i, (_, d))| *i != table.pk && !d.is_null())
        .map(|(_, (c, d))| (c.id, d))
        .collect();
    encode_row(&cols).map_err(|e| SqlError::BadValue {
        column: "*".into(),
        reason: format!("row does not encode: {e}"),
    })
}

/// A literal for a column of type `ty`.
pub(crate) fn literal(e: &ast::Expr, ty: SqlType, column: &str) -> Result<Datum> {
    let bad = |reason: String| SqlError::BadValue {
        column: column.to_string(),
        reason,
    };
    let (negative, inner) = match e {
        ast::Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => (true, expr.as_ref()),
        other => (false, other),
    };
    if ty.is_encoded() {
        return match encoded_literal(e, ty, Rounding::Store) {
            Some(Ok(d)) => Ok(d),
            Some(Err(reason)) => Err(bad(reason)),
            None if matches!(inner, ast::Expr::Value(_)) => Err(SqlError::Type {
                reason: format!(
                    "value does not fit the column: column={column} type={} value={e}",
                    ty.name()
                ),
            }),
            None => Err(unsupported(format!(
                "a non-literal value in INSERT: column={column} value={e}"
            ))),
        };
    }
    let ast::Expr::Value(v) = inner else {
        return Err(unsupported(format!(
            "a non-literal value in INSERT: column={column} value={e}"
        )));
    };
    match (&v.value, ty) {
        (Value::Null, _) if !negative => Ok(Datum::Null),
        (Value::Number(n, _), SqlType::Int | SqlType::BigInt) => {
            let text = if negative { format!("-{n}") } else { n.clone() };
            let x: i64 = text
                .parse()
                .map_err(|_| bad(format!("not a 64-bit integer: {text}")))?;
            if ty == SqlType::Int && i32::try_from(x).is_err() {
                return Err(bad(format!("out of INT range: {x}")));
            }
            Ok(Datum::Int(x))
        }
        (Value::Number(n, _), SqlType::Double) => {
            let x: f64 = n.parse().map_err(|_| bad(format!("not a number: {n}")))?;
            if !x.is_finite() {
                return Err(bad(format!("not a finite number: {n}")));
            }
            Ok(Datum::Real(if negative { -x } else { x }))
        }
        (Value::SingleQuotedString(s) | Value::DoubleQuotedString(s), SqlType::Varchar)
            if !negative =>
        {
            Ok(Datum::Bytes(s.clone().into_bytes()))
        }
        (other, ty) => Err(SqlError::Type {
            reason: format!(
                "value does not fit the column: column={column} type={} value={}{other}",
                ty.name(),
                if negative { "-" } else { "" }
            ),
        }),
    }
}

/// How a literal with more digits than its column keeps becomes the column's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// Rounded as MySQL stores it (`12.345` into `DECIMAL(5,2)` is `12.35`).
    Store,
    /// Only an exact conversion (a condition compares with the literal as written: `d >
    /// 0.055` is not `d > 0.06`); anything else is not converted.
    Exact,
}

/// The stored datum (`super::value`) of literal `e` for a column of encoded type `ty`:
/// numbers and text for `DECIMAL`; text, `DATE '...'`, `TIMESTAMP '...'` and `CAST('...' AS
/// DATE | DATETIME | TIMESTAMP)` (DataFusion's unparser writes date literals so) for the
/// dates; `TRUE`/`FALSE` and numbers for `BOOLEAN`; `NULL` for all. `None` when `e` is not
/// a literal of such a form; `Some(Err)` says why a literal of the right form is refused.
pub(crate) fn encoded_literal(
    e: &ast::Expr,
    ty: SqlType,
    rounding: Rounding,
) -> Option<std::result::Result<Datum, String>> {
    use super::value::{parse_date, parse_datetime, parse_decimal};
    let (negative, inner) = match e {
        ast::Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => (true, expr.as_ref()),
        ast::Expr::Nested(inner) => return encoded_literal(inner, ty, rounding),
        other => (false, other),
    };
    // The text of the literal, and whether it was a number.
    let (text, number) = match inner {
        ast::Expr::Value(v) => match &v.value {
            Value::Null if !negative => return Some(Ok(Datum::Null)),
            Value::Boolean(b) if !negative && ty == SqlType::Boolean => {
                return Some(Ok(Datum::Int(i64::from(*b))));
            }
            Value::Number(n, _) => (n.clone(), true),
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) if !negative => {
                (s.clone(), false)
            }
            _ => return None,
        },
        ast::Expr::TypedString(ts) if !negative => {
            let s = ts.value.clone().value.into_string()?;
            match (&ts.data_type, ty) {
                (ast::DataType::Date, SqlType::Date)
                | (
                    ast::DataType::Timestamp(..) | ast::DataType::Datetime(_),
                    SqlType::DateTime { .. },
                ) => (s, false),
                _ => return None,
            }
        }
        ast::Expr::Cast {
            expr, data_type, ..
        } if !negative => {
            let ast::Expr::Value(v) = expr.as_ref() else {
                return None;
            };
            let (Value::SingleQuotedString(s) | Value::DoubleQuotedString(s)) = &v.value else {
                return None;
            };
            match (data_type, ty) {
                (ast::DataType::Date, SqlType::Date)
                | (
                    ast::DataType::Timestamp(..) | ast::DataType::Datetime(_),
                    SqlType::DateTime { .. },
                ) => (s.clone(), false),
                _ => return None,
            }
        }
        _ => return None,
    };
    let text = if negative { format!("-{text}") } else { text };
    Some(match ty {
        SqlType::Decimal { precision, scale } => match rounding {
            Rounding::Store => parse_decimal(&text, precision, scale),
            Rounding::Exact => super::value::parse_decimal_exact(&text, precision, scale),
        }
        .map(Datum::Int),
        SqlType::Date if !number => {
            let days = parse_date(&text);
            // A time of day other than midnight is not a date: keep it out of conditions.
            if rounding == Rounding::Exact
                && let (Ok(d), Ok(micros)) = (&days, parse_datetime(&text, 6))
                && micros != d * 86_400_000_000
            {
                return None;
            }
            days.map(Datum::Int)
        }
        SqlType::DateTime { fsp } if !number => {
            let fsp = if rounding == Rounding::Exact { 6 } else { fsp };
            parse_datetime(&text, fsp).map(Datum::Int)
        }
        SqlType::Boolean if number => match text.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(Datum::Int(i64::from(x != 0.0))),
            _ => Err(format!("not a number: {text}")),
        },
        _ => return None,
    })
}

/// Writes the rows as one transaction ([`txn_write::write`]) at a fresh start_ts, after
/// checking that none of their keys is visible at it and that the table's schema at it is
/// still the plan's (`super::catalog::check_unchanged`). The schema is not locked, so the
/// write commits under the schema lease (`txn_write::SCHEMA_LEASE_MS`); one that overran
/// it runs again from a fresh start_ts locking the table's catalog row instead, with no
/// time bound ([`txn_write::locked_catalog`]).
pub async fn write(
    client: &Client,
    plan: &InsertPlan,
    opts: CommitOptions,
) -> Result<WriteOutcome> {
    if plan.rows.is_empty() {
        return Ok(WriteOutcome::empty());
    }
    txn_write::locked_catalog(|lock| async move {
        let start_ts = client.current_ts().await?;
        super::catalog::check_unchanged(client, &plan.table, start_ts).await?;
        let keys: Vec<&Vec<u8>> = plan.rows.iter().map(|(k, _)| k).collect();
        check_no_stored_duplicate(client, &plan.table, &keys, start_ts).await?;
        let mut writes = plan.writes();
        writes.extend(lock.write(&plan.table.name));
        let mut out = txn_write::write(
            client,
            &writes,
            start_ts,
            "insert",
            lock.options(opts, start_ts),
        )
        .await?;
        out.rows = plan.rows.len() as u64;
        Ok(out)
    })
    .await
}

/// Refuses the insert if a row with one of its keys is visible at `start_ts`: a scan of
/// exactly the inserted keys through the coprocessor. A row committed after `start_ts` is
/// caught by the prewrite instead (a write conflict), so together they make INSERT refuse an
/// existing primary key.
pub(super) async fn check_no_stored_duplicate(
    client: &Client,
    table: &TableSchema,
    keys: &[&Vec<u8>],
    start_ts: u64,
) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let mut keys = keys.to_vec();
    keys.sort();
    let ranges = keys
        .into_iter()
        .map(|k| super::index::point_range(k.clone()))
        .collect();
    let pk = table.column_infos().swap_remove(table.pk);
    let dag = DagRequest {
        executors: vec![
            Executor {
                tp: ExecType::TableScan as i32,
                tbl_scan: Some(proto::TableScan {
                    table_id: table.id,
                    columns: vec![pk],
                    desc: false,
                }),
                ..Executor::default()
            },
            Executor {
                tp: ExecType::Limit as i32,
                limit: Some(proto::Limit { limit: 1 }),
                ..Executor::default()
            },
        ],
        ..DagRequest::default()
    };
    let found = client.coprocessor(&dag, ranges, start_ts).await?;
    match found.rows.first().and_then(|r| r.first()) {
        Some(Datum::Int(handle)) => Err(SqlError::DuplicateKey {
            table: table.name.clone(),
            key: *handle,
        }),
        Some(other) => Err(SqlError::CorruptCatalog {
            table: table.name.clone(),
            reason: format!("a primary key that is not an integer: {other:?}"),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::{Plan, parse, plan};

    fn schema() -> TableSchema {
        let Plan::CreateTable(mut s) = plan(
            &parse("create table t (id bigint primary key, a int, d double, s varchar(10))")
                .unwrap(),
            &|_| None,
        )
        .unwrap() else {
            unreachable!()
        };
        s.id = 9;
        s
    }

    fn insert(sql: &str) -> Result<InsertPlan> {
        let s = schema();
        match plan(&parse(sql)?, &|n| (n == "t").then(|| s.clone()))? {
            Plan::Insert(p) => Ok(p),
            other => panic!("not an insert: {other:?}"),
        }
    }

    #[test]
    fn rows_are_keyed_by_the_primary_key() {
        let p = insert("insert into t values (1, -2, 1.5, 'x'), (2, null, 3, null)").unwrap();
        assert_eq!(p.rows.len(), 2);
        assert_eq!(p.rows[0].0, record_key(9, 1));
        assert_eq!(
            p.rows[0].1,
            encode_row(&[
                (2, Datum::Int(-2)),
                (3, Datum::Real(1.5)),
                (4, Datum::Bytes(b"x".to_vec()))
            ])
            .unwrap()
        );
        let p = insert("insert into t (s, id) values ('y', 5)").unwrap();
        assert_eq!(p.rows[0].0, record_key(9, 5));
    }

    #[test]
    fn bad_rows_are_refused_naming_the_column() {
        let e = insert("insert into t (a) values (1)").unwrap_err();
        assert!(e.to_string().contains("column=id"), "{e}");
        let e = insert("insert into t values (1, 'x', 1, 'y')").unwrap_err();
        assert!(matches!(e, SqlError::Type { .. }), "{e}");
        let e = insert("insert into t values (1, 3000000000, 1, 'y')").unwrap_err();
        assert!(e.to_string().contains("out of INT range"), "{e}");
        let e = insert("insert into t (id) values (1), (1)").unwrap_err();
        assert!(matches!(e, SqlError::DuplicateKey { key: 1, .. }), "{e}");
        let e = insert("insert into t (id, nope) values (1, 2)").unwrap_err();
        assert!(matches!(e, SqlError::UnknownColumn { .. }), "{e}");
        let e = insert("insert into t (id) values (1 + 1)").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unsupported sql: a non-literal value"),
            "{e}"
        );
        let e = insert("insert into t (id) select 1").unwrap_err();
        assert!(e.to_string().contains("INSERT ... SELECT"), "{e}");
        let e = insert("insert into u (id) values (1)").unwrap_err();
        assert!(matches!(e, SqlError::UnknownTable { .. }), "{e}");
    }
}
