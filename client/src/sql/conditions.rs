//! The conditions of a `WHERE` as coprocessor expressions over a table's scan columns: what
//! UPDATE and DELETE find their rows with, and what the DataFusion front (`sqlfront`) pushes
//! into each region's DAG (DataFusion's filters, unparsed to SQL, are planned here). A
//! condition this planner refuses is not pushed down: DataFusion evaluates it above the scan.
//! (The hand-written SELECT planner that once surrounded it is gone: DataFusion plans queries.)
//!
//! Supported: `= <> != < <= > >=`, `AND`, `OR`, `NOT`, `IS [NOT] NULL`, `[NOT] IN (literals)`,
//! `[NOT] BETWEEN`, `[NOT] LIKE 'pattern'` over columns and literals; a column stored encoded
//! (DECIMAL, DATE, DATETIME, BOOLEAN: `super::value`) compares with a column of its type or a
//! literal converted exactly to its stored integer.

use sqlparser::ast::{self, BinaryOperator, InTarget, UnaryOperator, Value};
use wire::coprocessor::{self as proto, ExecType, Executor, Expr, ExprType, ScalarFuncSig};
use wire::datum::Datum;

use super::catalog::{SqlType, TableSchema};
use super::{Result, SqlError, unsupported};

/// The conditions of a `WHERE` over `table`'s scan columns (top-level `AND`s split).
pub fn where_conditions(table: &TableSchema, selection: Option<&ast::Expr>) -> Result<Vec<Expr>> {
    Conditions { table }.where_conditions(selection)
}

/// A TableScan of every column of `table` (scan column `i` = column `i`), then a Selection of
/// `conditions` unless there are none.
pub fn scan_executors(table: &TableSchema, conditions: Vec<Expr>) -> Vec<Executor> {
    let mut executors = vec![Executor {
        tp: ExecType::TableScan as i32,
        tbl_scan: Some(proto::TableScan {
            table_id: table.id,
            columns: table.column_infos(),
            desc: false,
        }),
        ..Executor::default()
    }];
    if !conditions.is_empty() {
        executors.push(Executor {
            tp: ExecType::Selection as i32,
            selection: Some(proto::Selection { conditions }),
            ..Executor::default()
        });
    }
    executors
}

fn split_and(e: Expr, out: &mut Vec<Expr>) {
    if e.tp == ExprType::ScalarFunc as i32 && e.sig == ScalarFuncSig::And as i32 {
        for c in e.children {
            split_and(c, out);
        }
    } else {
        out.push(e);
    }
}

/// Plans conditions over one table's columns.
struct Conditions<'a> {
    table: &'a TableSchema,
}

/// The type class of a WHERE sub-expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Num,
    Bytes,
    Null,
}

impl Conditions<'_> {
    fn where_conditions(&self, selection: Option<&ast::Expr>) -> Result<Vec<Expr>> {
        let Some(w) = selection else {
            return Ok(Vec::new());
        };
        let (e, kind) = self.cond(w)?;
        if kind != Kind::Bool {
            return Err(SqlError::Type {
                reason: format!("WHERE needs a condition: found={w}"),
            });
        }
        let mut out = Vec::new();
        split_and(e, &mut out);
        Ok(out)
    }

    fn column(&self, e: &ast::Expr) -> Result<Option<usize>> {
        let name = match e {
            ast::Expr::Identifier(id) => &id.value,
            ast::Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [t, c] if t.value.eq_ignore_ascii_case(&self.table.name) => &c.value,
                _ => return Err(unsupported(format!("a qualified column: {e}"))),
            },
            _ => return Ok(None),
        };
        self.table
            .column_index(name)
            .map(Some)
            .ok_or_else(|| SqlError::UnknownColumn {
                table: self.table.name.clone(),
                column: name.to_ascii_lowercase(),
            })
    }

    /// A WHERE expression and its type class.
    fn cond(&self, e: &ast::Expr) -> Result<(Expr, Kind)> {
        if let Some(c) = self.column(e)? {
            let kind = if self.table.columns[c].ty == SqlType::Varchar {
                Kind::Bytes
            } else {
                Kind::Num
            };
            return Ok((Expr::column(c as u32), kind));
        }
        match e {
            ast::Expr::Nested(inner) => self.cond(inner),
            ast::Expr::Value(v) => literal(&v.value, false, e),
            ast::Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr,
            } => match expr.as_ref() {
                ast::Expr::Value(v) => literal(&v.value, true, e),
                _ => Err(unsupported(format!("arithmetic in WHERE: {e}"))),
            },
            ast::Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr,
            } => {
                let (x, k) = self.cond(expr)?;
                need_bool(k, e)?;
                Ok((Expr::func(ScalarFuncSig::Not, vec![x]), Kind::Bool))
            }
            ast::Expr::IsNull(inner) | ast::Expr::IsNotNull(inner) => {
                let (x, k) = self.cond(inner)?;
                if k == Kind::Bool {
                    return Err(unsupported(format!("IS NULL over a condition: {e}")));
                }
                let is_null = Expr::func(ScalarFuncSig::IsNull, vec![x]);
                Ok(if matches!(e, ast::Expr::IsNull(_)) {
                    (is_null, Kind::Bool)
                } else {
                    (Expr::func(ScalarFuncSig::Not, vec![is_null]), Kind::Bool)
                })
            }
            // `x [NOT] BETWEEN a AND b` is `[NOT] (x >= a AND x <= b)`, as in SQL.
            ast::Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let bound = |op, b: &ast::Expr| ast::Expr::BinaryOp {
                    left: expr.clone(),
                    op,
                    right: Box::new(b.clone()),
                };
                let both = ast::Expr::BinaryOp {
                    left: Box::new(bound(BinaryOperator::GtEq, low)),
                    op: BinaryOperator::And,
                    right: Box::new(bound(BinaryOperator::LtEq, high)),
                };
                let (x, k) = self.cond(&both)?;
                Ok(if *negated {
                    (Expr::func(ScalarFuncSig::Not, vec![x]), k)
                } else {
                    (x, k)
                })
            }
            ast::Expr::BinaryOp { left, op, right } => {
                let sig = match op {
                    BinaryOperator::Eq => ScalarFuncSig::Eq,
                    BinaryOperator::NotEq => ScalarFuncSig::Ne,
                    BinaryOperator::Lt => ScalarFuncSig::Lt,
                    BinaryOperator::LtEq => ScalarFuncSig::Le,
                    BinaryOperator::Gt => ScalarFuncSig::Gt,
                    BinaryOperator::GtEq => ScalarFuncSig::Ge,
                    BinaryOperator::And => ScalarFuncSig::And,
                    BinaryOperator::Or => ScalarFuncSig::Or,
                    other => return Err(unsupported(format!("operator {other} in WHERE"))),
                };
                if !matches!(sig, ScalarFuncSig::And | ScalarFuncSig::Or)
                    && let Some((l, r)) = self.encoded_operands(left, right, e)?
                {
                    return Ok((Expr::func(sig, vec![l, r]), Kind::Bool));
                }
                let (l, lk) = self.cond(left)?;
                let (r, rk) = self.cond(right)?;
                if matches!(sig, ScalarFuncSig::And | ScalarFuncSig::Or) {
                    need_bool(lk, left)?;
                    need_bool(rk, right)?;
                } else {
                    if lk == Kind::Bool || rk == Kind::Bool {
                        return Err(unsupported(format!("comparing conditions: {e}")));
                    }
                    if lk != rk && lk != Kind::Null && rk != Kind::Null {
                        return Err(SqlError::Type {
                            reason: format!("comparing a number with a string: {e}"),
                        });
                    }
                }
                Ok((Expr::func(sig, vec![l, r]), Kind::Bool))
            }
            ast::Expr::In {
                expr,
                target: InTarget::List(list),
                negated,
                global: false,
            } => {
                if let Some(c) = self.column(expr)?
                    && self.table.columns[c].ty.is_encoded()
                {
                    let ty = self.table.columns[c].ty;
                    let mut children = vec![Expr::column(c as u32)];
                    for item in list {
                        children.push(encoded_constant(item, ty, e)?);
                    }
                    return Ok((
                        negate(Expr::func(ScalarFuncSig::In, children), *negated),
                        Kind::Bool,
                    ));
                }
                let (x, k) = self.cond(expr)?;
                if k == Kind::Bool {
                    return Err(unsupported(format!("IN over a condition: {e}")));
                }
                let mut children = vec![x];
                for item in list {
                    let (y, yk) = self.cond(item)?;
                    if y.tp == ExprType::ColumnRef as i32 || y.tp == ExprType::ScalarFunc as i32 {
                        return Err(unsupported(format!(
                            "an IN list item that is not a literal: {e}"
                        )));
                    }
                    if yk != k && yk != Kind::Null && k != Kind::Null {
                        return Err(SqlError::Type {
                            reason: format!("IN mixes numbers and strings: {e}"),
                        });
                    }
                    children.push(y);
                }
                Ok((
                    negate(Expr::func(ScalarFuncSig::In, children), *negated),
                    Kind::Bool,
                ))
            }
            ast::Expr::Like {
                negated,
                any: false,
                expr,
                pattern,
                escape_char: None,
            } => {
                let (x, k) = self.cond(expr)?;
                let (p, pk) = self.cond(pattern)?;
                if k != Kind::Bytes || pk != Kind::Bytes || p.tp != ExprType::Bytes as i32 {
                    return Err(unsupported(format!(
                        "LIKE other than a VARCHAR column against a string literal: {e}"
                    )));
                }
                Ok((
                    negate(Expr::func(ScalarFuncSig::Like, vec![x, p]), *negated),
                    Kind::Bool,
                ))
            }
            ast::Expr::Function(_) => Err(unsupported(format!("a function in WHERE: {e}"))),
            other => Err(unsupported(format!("{other} in WHERE"))),
        }
    }
}

impl Conditions<'_> {
    /// The operands of a comparison where a side is a column stored encoded
    /// (`super::value`): the other side is a column of the same type, or a literal converted
    /// exactly to the column's stored integer; anything else can't be compared as stored
    /// integers. `None` when neither side is such a column.
    fn encoded_operands(
        &self,
        left: &ast::Expr,
        right: &ast::Expr,
        e: &ast::Expr,
    ) -> Result<Option<(Expr, Expr)>> {
        let type_of = |c: Option<usize>| c.map(|c| self.table.columns[c].ty);
        let (lc, rc) = (self.column(left)?, self.column(right)?);
        let (lt, rt) = (type_of(lc), type_of(rc));
        let encoded = |t: Option<SqlType>| t.is_some_and(SqlType::is_encoded);
        if !encoded(lt) && !encoded(rt) {
            return Ok(None);
        }
        Ok(Some(match (lc, rc) {
            (Some(l), Some(r)) if lt == rt => (Expr::column(l as u32), Expr::column(r as u32)),
            (Some(_), Some(_)) => {
                return Err(unsupported(format!(
                    "comparing columns of different types: {e}"
                )));
            }
            (Some(l), None) => (
                Expr::column(l as u32),
                encoded_constant(right, self.table.columns[l].ty, e)?,
            ),
            (None, Some(r)) => (
                encoded_constant(left, self.table.columns[r].ty, e)?,
                Expr::column(r as u32),
            ),
            (None, None) => return Ok(None),
        }))
    }
}

/// Literal `item` as the stored integer of a column of encoded type `ty`, exactly.
fn encoded_constant(item: &ast::Expr, ty: SqlType, e: &ast::Expr) -> Result<Expr> {
    match super::insert::encoded_literal(item, ty, super::insert::Rounding::Exact) {
        Some(Ok(Datum::Int(v))) => Ok(Expr::int(v)),
        Some(Ok(_)) => Ok(Expr::null()),
        _ => Err(unsupported(format!(
            "a {} column compared with something other than a {} literal: {e}",
            ty.name(),
            ty.name()
        ))),
    }
}

fn negate(e: Expr, negated: bool) -> Expr {
    if negated {
        Expr::func(ScalarFuncSig::Not, vec![e])
    } else {
        e
    }
}

fn need_bool(k: Kind, e: &ast::Expr) -> Result<()> {
    if k == Kind::Bool {
        Ok(())
    } else {
        Err(SqlError::Type {
            reason: format!("expected a condition: found={e}"),
        })
    }
}

fn literal(v: &Value, negative: bool, e: &ast::Expr) -> Result<(Expr, Kind)> {
    match v {
        Value::Number(n, _) => {
            let text = if negative { format!("-{n}") } else { n.clone() };
            if let Ok(i) = text.parse::<i64>() {
                return Ok((Expr::int(i), Kind::Num));
            }
            match text.parse::<f64>() {
                Ok(f) if f.is_finite() => Ok((Expr::real(f), Kind::Num)),
                _ => Err(unsupported(format!("number literal: {e}"))),
            }
        }
        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) if !negative => {
            Ok((Expr::bytes(s.clone().into_bytes()), Kind::Bytes))
        }
        Value::Null if !negative => Ok((Expr::null(), Kind::Null)),
        Value::Boolean(b) if !negative => Ok((Expr::int(i64::from(*b)), Kind::Bool)),
        _ => Err(unsupported(format!("literal in WHERE: {e}"))),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sql::{Plan, parse, plan};

    /// `t (id BIGINT PRIMARY KEY, g INT, v DOUBLE, s VARCHAR(10))`, id 77.
    pub(crate) fn schema() -> TableSchema {
        let Plan::CreateTable(mut s) = plan(
            &parse("create table t (id bigint primary key, g int, v double, s varchar(10))")
                .unwrap(),
            &|_| None,
        )
        .unwrap() else {
            unreachable!()
        };
        s.id = 77;
        s
    }

    /// The conditions of `DELETE FROM t WHERE <w>`.
    fn conds(w: &str) -> Result<Vec<Expr>> {
        let stmt = parse(&format!("delete from t where {w}"))?;
        let sqlparser::ast::Statement::Delete(d) = stmt else {
            unreachable!()
        };
        where_conditions(&schema(), d.selection.as_ref())
    }

    #[test]
    fn between_is_a_pair_of_bounds_and_not_between_their_negation() {
        let c = conds("id between 10 and 19").unwrap();
        let sigs: Vec<i32> = c.iter().map(|c| c.sig).collect();
        assert_eq!(sigs, [ScalarFuncSig::Ge as i32, ScalarFuncSig::Le as i32]);
        let c = conds("id not between 10 and 19").unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].sig, ScalarFuncSig::Not as i32);
    }

    #[test]
    fn a_where_is_split_at_top_level_ands() {
        let c = conds("g > 3 and (v <= 1.5 or s = 'x') and id <> -2").unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].sig, ScalarFuncSig::Gt as i32);
        assert_eq!(c[1].sig, ScalarFuncSig::Or as i32);
        assert_eq!(c[2].children[1], Expr::int(-2));
        assert!(conds("true").is_ok());
        assert_eq!(
            scan_executors(&schema(), c).len(),
            2,
            "a scan, then a selection"
        );
        assert_eq!(scan_executors(&schema(), Vec::new()).len(), 1);
    }

    #[test]
    fn in_lists_and_like_are_planned_with_not() {
        let c = conds("g not in (1, -2, null) and s like 'k%'").unwrap();
        assert_eq!(c[0].sig, ScalarFuncSig::Not as i32);
        let inner = &c[0].children[0];
        assert_eq!(inner.sig, ScalarFuncSig::In as i32);
        assert_eq!(inner.children.len(), 4);
        assert_eq!(c[1].sig, ScalarFuncSig::Like as i32);
        assert_eq!(c[1].children[1], Expr::bytes(b"k%".to_vec()));
    }

    #[test]
    fn what_cannot_be_planned_is_refused_by_name() {
        for (w, part) in [
            ("g in (select g from t)", "in WHERE"),
            ("g in (1, id)", "not a literal"),
            ("s like g", "LIKE other than"),
            ("s like 'a' escape '!'", "in WHERE"),
            ("g + 1 > 2", "operator + in WHERE"),
            ("upper(s) = 'A'", "a function in WHERE"),
        ] {
            let e = conds(w).unwrap_err();
            assert!(
                matches!(e, SqlError::Unsupported { .. }),
                "{w}: not an unsupported error: {e}"
            );
            assert!(e.to_string().contains(part), "{w}: {e}");
        }
    }

    #[test]
    fn wrong_types_and_columns_are_typed_errors() {
        assert!(matches!(conds("s > 3"), Err(SqlError::Type { .. })));
        assert!(matches!(conds("g"), Err(SqlError::Type { .. })));
        assert!(matches!(conds("g in (1, 'x')"), Err(SqlError::Type { .. })));
        assert!(matches!(
            conds("nope = 1"),
            Err(SqlError::UnknownColumn { .. })
        ));
    }
}
