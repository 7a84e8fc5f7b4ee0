//! `UPDATE t SET c = <expr>, ... [WHERE ...]` and `DELETE FROM t [WHERE ...]`: the rows to
//! change are read at the statement's start_ts through the coprocessor (a TableScan of every
//! column, then a Selection of the `WHERE` planned exactly as SELECT plans it), then written
//! as one transaction at that same start_ts ([`super::txn_write`]): a row another statement
//! committed after the read makes the prewrite fail with a write conflict, so no change is
//! lost. Each row's record key comes from its handle (the primary key column).
//!
//! An assigned value is a literal, a column, or `+ - *` and unary `-` over those (`v = v + 1`),
//! type-checked as INSERT checks literals: an integer column takes integers, a DOUBLE column
//! numbers, a VARCHAR column strings; NULL fits anything, and arithmetic with NULL is NULL.
//! Assignments apply left to right, each seeing the ones before it (as MySQL's single-table
//! UPDATE). Only rows whose values change are written and counted (`affected_rows`).
//! Changing the primary key (moving a row to another key) is not supported.

use sqlparser::ast::{
    self, AssignmentTarget, BinaryOperator, FromTable, TableFactor, UnaryOperator,
};
use wire::codec::row::encode_row;
use wire::codec::table::record_key;
use wire::coprocessor::{DagRequest, KeyRange};
use wire::datum::Datum;

use super::catalog::{SqlType, TableSchema};
use super::handle_ranges::handle_ranges;
use super::txn_write::{self, RowWrite};
use super::{QueryResult, Result, SqlError, conditions, insert, simple_name, unsupported};
use crate::variables::Session;

/// What an UPDATE or DELETE does to each row the DAG finds.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Delete,
    /// Assignments in statement order.
    Update(Vec<Assignment>),
}

/// `column = value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    /// The table's column index.
    pub column: usize,
    pub value: ValueExpr,
}

/// An assigned value, evaluated over the row being changed.
#[derive(Debug, Clone, PartialEq)]
pub enum ValueExpr {
    Literal(Datum),
    /// The row's value of the table's column `i`.
    Column(usize),
    Neg(Box<ValueExpr>),
    Arith(ArithOp, Box<ValueExpr>, Box<ValueExpr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
}

/// A planned UPDATE or DELETE.
#[derive(Debug, Clone)]
pub struct ModifyPlan {
    pub table: TableSchema,
    /// TableScan of every column (scan column `i` = the table's column `i`) [→ Selection].
    pub dag: DagRequest,
    pub change: Change,
    /// The record-key ranges to read ([`super::handle_ranges`]).
    pub ranges: Vec<KeyRange>,
}

fn single_table(t: &ast::TableWithJoins, statement: &str) -> Result<String> {
    if !t.joins.is_empty() {
        return Err(unsupported(format!("JOIN in {statement}")));
    }
    match &t.relation {
        TableFactor::Table {
            name,
            alias: None,
            args: None,
            ..
        } => simple_name(name, "table"),
        TableFactor::Table { alias: Some(_), .. } => {
            Err(unsupported(format!("a table alias in {statement}")))
        }
        other => Err(unsupported(format!("{statement} of {other}"))),
    }
}

pub fn update_table(u: &ast::Update) -> Result<String> {
    single_table(&u.table, "UPDATE")
}

pub fn delete_table(d: &ast::Delete) -> Result<String> {
    if !d.tables.is_empty() {
        return Err(unsupported("a multi-table DELETE"));
    }
    let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = &d.from;
    match from.as_slice() {
        [one] => single_table(one, "DELETE"),
        _ => Err(unsupported("a multi-table DELETE")),
    }
}

/// Refuses the parts of a DELETE no front plans (shared with the SQL endpoint's writes).
pub fn check_delete(d: &ast::Delete) -> Result<()> {
    if d.using.is_some() || d.returning.is_some() || d.output.is_some() {
        return Err(unsupported("DELETE with USING / RETURNING / OUTPUT"));
    }
    if !d.order_by.is_empty() || d.limit.is_some() {
        return Err(unsupported("ORDER BY / LIMIT in DELETE"));
    }
    if !d.optimizer_hints.is_empty() || d.on_cluster.is_some() || d.settings.is_some() {
        return Err(unsupported("DELETE hints / ON CLUSTER / SETTINGS"));
    }
    Ok(())
}

/// This planner writes rows only: a table with secondary indexes is written by the SQL
/// front, which keeps the entries in the same transaction (`super::index`).
pub(crate) fn refuse_indexed(table: &TableSchema) -> Result<()> {
    if table.indexes.is_empty() {
        Ok(())
    } else {
        Err(unsupported(format!(
            "a write to {}, a table with secondary indexes, outside the SQL front",
            table.name
        )))
    }
}

pub fn plan_delete(d: &ast::Delete, table: TableSchema) -> Result<ModifyPlan> {
    refuse_indexed(&table)?;
    check_delete(d)?;
    reading(table, d.selection.as_ref(), Change::Delete)
}

/// The plan that reads the rows `selection` matches (the `WHERE` as SELECT plans it, over the
/// key ranges its primary-key bounds allow) and applies `change` to them.
fn reading(
    table: TableSchema,
    selection: Option<&ast::Expr>,
    change: Change,
) -> Result<ModifyPlan> {
    let conditions = conditions::where_conditions(&table, selection)?;
    let ranges = handle_ranges(table.id, &table.columns[table.pk].name, selection);
    Ok(ModifyPlan {
        ranges,
        dag: DagRequest {
            executors: conditions::scan_executors(&table, conditions),
            ..DagRequest::default()
        },
        table,
        change,
    })
}

/// Refuses the parts of an UPDATE no front plans (shared with the SQL endpoint's writes).
pub fn check_update(u: &ast::Update) -> Result<()> {
    if u.from.is_some() || u.returning.is_some() || u.output.is_some() || u.or.is_some() {
        return Err(unsupported("UPDATE with FROM / RETURNING / OUTPUT / OR"));
    }
    if !u.order_by.is_empty() || u.limit.is_some() {
        return Err(unsupported("ORDER BY / LIMIT in UPDATE"));
    }
    if !u.optimizer_hints.is_empty() || u.on_cluster.is_some() || u.settings.is_some() {
        return Err(unsupported("UPDATE hints / ON CLUSTER / SETTINGS"));
    }
    Ok(())
}

pub fn plan_update(u: &ast::Update, table: TableSchema) -> Result<ModifyPlan> {
    refuse_indexed(&table)?;
    check_update(u)?;
    let mut assignments: Vec<Assignment> = Vec::with_capacity(u.assignments.len());
    for a in &u.assignments {
        let AssignmentTarget::ColumnName(name) = &a.target else {
            return Err(unsupported(format!("a tuple assignment in UPDATE: {a}")));
        };
        let column = column_of(&table, name)?;
        let col = &table.columns[column];
        if column == table.pk {
            return Err(unsupported(format!(
                "updating the primary key column: column={}",
                col.name
            )));
        }
        if assignments.iter().any(|x| x.column == column) {
            return Err(SqlError::BadValue {
                column: col.name.clone(),
                reason: "column assigned twice".into(),
            });
        }
        let value = value_expr(&table, &a.value, col.ty, &col.name)?;
        assignments.push(Assignment { column, value });
    }
    reading(table, u.selection.as_ref(), Change::Update(assignments))
}

/// The table's index of column `name` (`c`, or `t.c` naming this table).
pub fn column_of(table: &TableSchema, name: &ast::ObjectName) -> Result<usize> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(id) => Ok(id.value.to_ascii_lowercase()),
            other => Err(unsupported(format!("a column name part: {other}"))),
        })
        .collect::<Result<_>>()?;
    let column = match parts.as_slice() {
        [c] => c,
        [t, c] if *t == table.name => c,
        _ => return Err(unsupported(format!("a qualified column: {name}"))),
    };
    table
        .column_index(column)
        .ok_or_else(|| SqlError::UnknownColumn {
            table: table.name.clone(),
            column: column.clone(),
        })
}

/// The type class of an assigned value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Real,
    Bytes,
    Null,
    /// A column stored as an integer of another meaning (`super::value`): only assigned to
    /// a column of the same type, never an operand of arithmetic.
    Encoded(SqlType),
}

fn kind_of_column(ty: SqlType) -> Kind {
    match ty {
        SqlType::Int | SqlType::BigInt => Kind::Int,
        SqlType::Double => Kind::Real,
        SqlType::Varchar => Kind::Bytes,
        SqlType::Decimal { .. } | SqlType::Date | SqlType::DateTime { .. } | SqlType::Boolean => {
            Kind::Encoded(ty)
        }
    }
}

/// Plans the value assigned to a column of type `ty`.
fn value_expr(table: &TableSchema, e: &ast::Expr, ty: SqlType, column: &str) -> Result<ValueExpr> {
    let is_literal = match e {
        ast::Expr::Value(_) => true,
        ast::Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => matches!(expr.as_ref(), ast::Expr::Value(_)),
        _ => false,
    };
    let encoded_literal =
        ty.is_encoded() && insert::encoded_literal(e, ty, insert::Rounding::Store).is_some();
    if is_literal || encoded_literal {
        // Exactly INSERT's literal rules and messages.
        return insert::literal(e, ty, column).map(ValueExpr::Literal);
    }
    let (v, kind) = expr(table, e)?;
    let fits = match (ty, kind) {
        (_, Kind::Null) => true,
        (SqlType::Int | SqlType::BigInt, k) => k == Kind::Int,
        (SqlType::Double, k) => k == Kind::Int || k == Kind::Real,
        (SqlType::Varchar, k) => k == Kind::Bytes,
        (ty, k) => k == Kind::Encoded(ty),
    };
    if !fits {
        return Err(SqlError::Type {
            reason: format!(
                "value does not fit the column: column={column} type={} value={e}",
                ty.name()
            ),
        });
    }
    Ok(v)
}

fn expr(table: &TableSchema, e: &ast::Expr) -> Result<(ValueExpr, Kind)> {
    match e {
        ast::Expr::Identifier(id) => {
            let name = ast::ObjectName::from(vec![id.clone()]);
            let c = column_of(table, &name)?;
            Ok((ValueExpr::Column(c), kind_of_column(table.columns[c].ty)))
        }
        ast::Expr::CompoundIdentifier(parts) => {
            let name = ast::ObjectName::from(parts.clone());
            let c = column_of(table, &name)?;
            Ok((ValueExpr::Column(c), kind_of_column(table.columns[c].ty)))
        }
        ast::Expr::Nested(inner) => expr(table, inner),
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => {
                if let Ok(i) = n.parse::<i64>() {
                    Ok((ValueExpr::Literal(Datum::Int(i)), Kind::Int))
                } else {
                    match n.parse::<f64>() {
                        Ok(f) if f.is_finite() => {
                            Ok((ValueExpr::Literal(Datum::Real(f)), Kind::Real))
                        }
                        _ => Err(unsupported(format!("number literal in UPDATE SET: {e}"))),
                    }
                }
            }
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => Ok((
                ValueExpr::Literal(Datum::Bytes(s.clone().into_bytes())),
                Kind::Bytes,
            )),
            ast::Value::Null => Ok((ValueExpr::Literal(Datum::Null), Kind::Null)),
            _ => Err(unsupported(format!("literal in UPDATE SET: {e}"))),
        },
        ast::Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr: inner,
        } => {
            let (x, k) = expr(table, inner)?;
            need_number(k, e)?;
            Ok((ValueExpr::Neg(Box::new(x)), k))
        }
        ast::Expr::BinaryOp { left, op, right } => {
            let op = match op {
                BinaryOperator::Plus => ArithOp::Add,
                BinaryOperator::Minus => ArithOp::Sub,
                BinaryOperator::Multiply => ArithOp::Mul,
                other => return Err(unsupported(format!("operator {other} in UPDATE SET"))),
            };
            let (l, lk) = expr(table, left)?;
            let (r, rk) = expr(table, right)?;
            need_number(lk, e)?;
            need_number(rk, e)?;
            let kind = if lk == Kind::Real || rk == Kind::Real {
                Kind::Real
            } else if lk == Kind::Null && rk == Kind::Null {
                Kind::Null
            } else {
                Kind::Int
            };
            Ok((ValueExpr::Arith(op, Box::new(l), Box::new(r)), kind))
        }
        other => Err(unsupported(format!(
            "an UPDATE value that is not a literal or arithmetic of columns and literals: {other}"
        ))),
    }
}

fn need_number(k: Kind, e: &ast::Expr) -> Result<()> {
    match k {
        Kind::Bytes => Err(SqlError::Type {
            reason: format!("arithmetic on a string: {e}"),
        }),
        Kind::Encoded(ty) => Err(unsupported(format!(
            "arithmetic on a {} column in UPDATE SET: {e}",
            ty.name()
        ))),
        _ => Ok(()),
    }
}

/// A number operand: an integer, or a real.
enum Num {
    Int(i64),
    Real(f64),
}

fn num(d: Datum) -> Option<Num> {
    match d {
        Datum::Int(i) => Some(Num::Int(i)),
        Datum::UInt(u) => Some(match i64::try_from(u) {
            Ok(i) => Num::Int(i),
            Err(_) => Num::Real(u as f64),
        }),
        Datum::Real(f) => Some(Num::Real(f)),
        Datum::Null | Datum::Bytes(_) => None,
    }
}

impl ValueExpr {
    /// The value over `row` (the table's columns in order); `column` names the target in
    /// errors (integer overflow).
    pub fn eval(&self, row: &[Datum], column: &str) -> Result<Datum> {
        let overflow = || SqlError::BadValue {
            column: column.to_string(),
            reason: "integer overflow in the assigned value".into(),
        };
        Ok(match self {
            ValueExpr::Literal(d) => d.clone(),
            ValueExpr::Column(c) => row.get(*c).cloned().unwrap_or(Datum::Null),
            ValueExpr::Neg(x) => match num(x.eval(row, column)?) {
                None => Datum::Null,
                Some(Num::Int(i)) => Datum::Int(i.checked_neg().ok_or_else(overflow)?),
                Some(Num::Real(f)) => Datum::Real(-f),
            },
            ValueExpr::Arith(op, l, r) => {
                let (Some(a), Some(b)) = (num(l.eval(row, column)?), num(r.eval(row, column)?))
                else {
                    return Ok(Datum::Null);
                };
                match (a, b) {
                    (Num::Int(a), Num::Int(b)) => Datum::Int(
                        match op {
                            ArithOp::Add => a.checked_add(b),
                            ArithOp::Sub => a.checked_sub(b),
                            ArithOp::Mul => a.checked_mul(b),
                        }
                        .ok_or_else(overflow)?,
                    ),
                    (a, b) => {
                        let f = |n: Num| match n {
                            Num::Int(i) => i as f64,
                            Num::Real(x) => x,
                        };
                        let (a, b) = (f(a), f(b));
                        Datum::Real(match op {
                            ArithOp::Add => a + b,
                            ArithOp::Sub => a - b,
                            ArithOp::Mul => a * b,
                        })
                    }
                }
            }
        })
    }
}

/// A computed value as column `ty` stores it: integers checked against INT's range, numbers
/// into a DOUBLE column as reals, reals finite.
fn fit(d: Datum, ty: SqlType, column: &str) -> Result<Datum> {
    let bad = |reason: String| SqlError::BadValue {
        column: column.to_string(),
        reason,
    };
    Ok(match (d, ty) {
        (Datum::Int(x), SqlType::Int) if i32::try_from(x).is_err() => {
            return Err(bad(format!("out of INT range: {x}")));
        }
        (Datum::Int(x), SqlType::Double) => Datum::Real(x as f64),
        (Datum::Real(x), _) if !x.is_finite() => {
            return Err(bad(format!("not a finite number: {x}")));
        }
        (d, _) => d,
    })
}

/// The writes of `plan` over the rows its DAG found: a delete per row, or for an UPDATE a put
/// of each row whose values change.
pub fn writes(plan: &ModifyPlan, rows: Vec<Vec<Datum>>) -> Result<Vec<RowWrite>> {
    let table = &plan.table;
    let mut out = Vec::new();
    for row in rows {
        let handle = match row.get(table.pk) {
            Some(Datum::Int(h)) => *h,
            other => {
                return Err(SqlError::CorruptCatalog {
                    table: table.name.clone(),
                    reason: format!("a row whose primary key is not an integer: {other:?}"),
                });
            }
        };
        let key = record_key(table.id, handle);
        match &plan.change {
            Change::Delete => out.push(RowWrite::Delete { key }),
            Change::Update(assignments) => {
                let mut new = row.clone();
                for a in assignments {
                    let col = &table.columns[a.column];
                    let v = a.value.eval(&new, &col.name)?;
                    new[a.column] = fit(v, col.ty, &col.name)?;
                }
                if new == row {
                    continue;
                }
                let cols: Vec<(i64, Datum)> = table
                    .columns
                    .iter()
                    .zip(new)
                    .enumerate()
                    .filter(|(i, _)| *i != table.pk)
                    .map(|(_, (c, d))| (c.id, d))
                    .collect();
                let value = encode_row(&cols).map_err(|e| SqlError::BadValue {
                    column: "*".into(),
                    reason: format!("row does not encode: {e}"),
                })?;
                out.push(RowWrite::Put { key, value });
            }
        }
    }
    Ok(out)
}

/// Reads the rows `plan` changes at a fresh start_ts through the session (its variables
/// choose the server or the delegate path), then writes the changes as one transaction at
/// that start_ts.
pub async fn run(session: &Session<'_>, plan: &ModifyPlan) -> Result<QueryResult> {
    let client = session.client;
    txn_write::locked_catalog(|guard| async move {
        let start_ts = client.current_ts().await?;
        super::catalog::check_unchanged(client, &plan.table, start_ts).await?;
        let found = session
            .coprocessor(&plan.dag, plan.ranges.clone(), start_ts)
            .await?;
        let mut writes = writes(plan, found.rows)?;
        let statement = match plan.change {
            Change::Delete => "delete",
            Change::Update(_) => "update",
        };
        // The schema (checked at start_ts) is not locked: the lease bounds the commit, or
        // the catalog row is locked after a try that overran it.
        let opts = guard.options(session.variables().commit_options(), start_ts);
        let rows = writes.len() as u64;
        if rows > 0 {
            writes.extend(guard.write(&plan.table.name));
        }
        let out = txn_write::write(client, &writes, start_ts, statement, opts).await?;
        let mut warnings = found.warnings;
        warnings.extend(out.warnings);
        Ok(QueryResult {
            affected_rows: rows,
            warnings,
            ..QueryResult::default()
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::conditions::tests::schema;
    use crate::sql::{Plan, parse, plan};
    use wire::coprocessor::{ExecType, ScalarFuncSig};

    fn modify(sql: &str) -> Result<ModifyPlan> {
        let s = schema();
        match plan(&parse(sql)?, &|n| (n == "t").then(|| s.clone()))? {
            Plan::Update(p) | Plan::Delete(p) => Ok(p),
            other => panic!("not an update or delete: {other:?}"),
        }
    }

    fn shape(p: &ModifyPlan) -> Vec<ExecType> {
        p.dag
            .executors
            .iter()
            .map(|e| ExecType::from_i32(e.tp).unwrap())
            .collect()
    }

    fn row(id: i64, g: Datum, v: Datum, s: Datum) -> Vec<Datum> {
        vec![Datum::Int(id), g, v, s]
    }

    #[test]
    fn delete_reads_its_rows_with_the_where_as_a_selection() {
        let p = modify("delete from t where g > 3 and s = 'x'").unwrap();
        assert_eq!(shape(&p), vec![ExecType::TableScan, ExecType::Selection]);
        let conds = &p.dag.executors[1].selection.as_ref().unwrap().conditions;
        assert_eq!(conds.len(), 2);
        assert_eq!(conds[0].sig, ScalarFuncSig::Gt as i32);
        assert_eq!(p.change, Change::Delete);
        let p = modify("DELETE FROM t").unwrap();
        assert_eq!(shape(&p), vec![ExecType::TableScan]);
        let w = writes(&p, vec![row(4, Datum::Null, Datum::Null, Datum::Null)]).unwrap();
        assert_eq!(
            w,
            vec![RowWrite::Delete {
                key: record_key(77, 4)
            }]
        );
    }

    #[test]
    fn update_evaluates_assignments_left_to_right_and_skips_unchanged_rows() {
        let p = modify("update t set g = g + 1, v = g * 2 - 0.5 where id < 10").unwrap();
        assert_eq!(shape(&p), vec![ExecType::TableScan, ExecType::Selection]);
        let rows = vec![
            row(1, Datum::Int(4), Datum::Null, Datum::Bytes(b"a".to_vec())),
            row(2, Datum::Null, Datum::Real(1.0), Datum::Null),
        ];
        let w = writes(&p, rows).unwrap();
        assert_eq!(w.len(), 2);
        assert_eq!(
            w[0],
            RowWrite::Put {
                key: record_key(77, 1),
                value: encode_row(&[
                    (2, Datum::Int(5)),
                    (3, Datum::Real(9.5)),
                    (4, Datum::Bytes(b"a".to_vec()))
                ])
                .unwrap()
            }
        );
        // NULL arithmetic is NULL.
        assert_eq!(
            w[1],
            RowWrite::Put {
                key: record_key(77, 2),
                value: encode_row(&[(2, Datum::Null), (3, Datum::Null), (4, Datum::Null)]).unwrap()
            }
        );
        let p = modify("update t set s = 'x', v = -v").unwrap();
        let same = row(
            3,
            Datum::Int(1),
            Datum::Real(0.0),
            Datum::Bytes(b"x".to_vec()),
        );
        assert_eq!(
            writes(&p, vec![same]).unwrap(),
            Vec::new(),
            "nothing changes"
        );
    }

    #[test]
    fn update_values_are_type_checked_as_insert_checks_them() {
        let e = modify("update t set g = 'x'").unwrap_err();
        assert!(matches!(e, SqlError::Type { .. }), "{e}");
        let e = modify("update t set g = v + 1").unwrap_err();
        assert!(e.to_string().contains("column=g type=INT"), "{e}");
        let e = modify("update t set s = s + 1").unwrap_err();
        assert!(e.to_string().contains("arithmetic on a string"), "{e}");
        let e = modify("update t set g = 3000000000").unwrap_err();
        assert!(e.to_string().contains("out of INT range"), "{e}");
        let e = modify("update t set g = 1, g = 2").unwrap_err();
        assert!(e.to_string().contains("column assigned twice"), "{e}");
        let e = modify("update t set nope = 1").unwrap_err();
        assert!(matches!(e, SqlError::UnknownColumn { .. }), "{e}");
        let p = modify("update t set v = g + 1").unwrap();
        let w = writes(
            &p,
            vec![row(1, Datum::Int(2147483647), Datum::Null, Datum::Null)],
        );
        assert!(
            w.is_ok(),
            "an INT column's value + 1 is computed in 64 bits"
        );
        let p = modify("update t set g = g * 2").unwrap();
        let e = writes(
            &p,
            vec![row(1, Datum::Int(2147483647), Datum::Null, Datum::Null)],
        )
        .unwrap_err();
        assert!(e.to_string().contains("out of INT range"), "{e}");
    }

    #[test]
    fn unsupported_update_and_delete_parts_are_named() {
        let cases = [
            (
                "update t set id = 5",
                "updating the primary key column: column=id",
            ),
            ("update t set g = g / 2", "operator / in UPDATE SET"),
            ("update t set g = abs(g)", "not a literal or arithmetic"),
            ("update t set g = 1 limit 3", "ORDER BY / LIMIT in UPDATE"),
            ("update t as u set g = 1", "a table alias in UPDATE"),
            (
                "delete from t order by id limit 1",
                "ORDER BY / LIMIT in DELETE",
            ),
            (
                "delete t, u from t join u on t.id = u.id",
                "multi-table DELETE",
            ),
            ("delete from t where g + 1 > 2", "operator + in WHERE"),
        ];
        for (sql, part) in cases {
            let e = modify(sql).unwrap_err();
            assert!(
                matches!(e, SqlError::Unsupported { .. }),
                "{sql}: not an unsupported error: {e}"
            );
            assert!(e.to_string().contains(part), "{sql}: {e}");
        }
    }
}
