//! `INSERT`, `UPDATE` and `DELETE` in the front: DataFusion finds the rows and evaluates every
//! value (so `SET price = price * 1.1`, `SET day = day + INTERVAL 1 DAY`, `INSERT ... VALUES
//! (1, NOW())`, `INSERT ... SELECT` and `ON DUPLICATE KEY UPDATE` work as queries do), then
//! each value is stored as its column's type ([`crate::arrow_rows::assigned_datums`]), and
//! the rows are buffered in the statement's transaction.
//!
//! * `UPDATE t SET c1 = e1, ... [WHERE w]` reads `SELECT *, (e1) AS __set_1, ... FROM t
//!   [WHERE w]`. MySQL applies a single-table UPDATE's assignments left to right, each seeing
//!   the ones before it (`SET a = a + 1, b = a` gives b the new a): each `ei` is written with
//!   the columns assigned before it replaced by their (already replaced) expressions, token
//!   by token over the expression as printed from its syntax tree ([`sql_text`], every
//!   string literal's quotes and backslashes escaped), so literals keep their exact values.
//! * `DELETE FROM t [WHERE w]` reads `SELECT * FROM t [WHERE w]`.
//! * `INSERT ... ON DUPLICATE KEY UPDATE c = e, ...`: the rows are evaluated, then
//!   joined with the rows already stored (`SELECT t.*, (e) AS __set_1, ... FROM (VALUES
//!   <the rows, as typed literals>) AS __new(__new_c, ...) LEFT JOIN t ON t.pk =
//!   __new.__new_pk`), where `VALUES(c)` is `__new.__new_c` and a bare column the stored
//!   row's. A row whose key is not stored is inserted (1 affected row), one whose key is has
//!   its assignments applied (2 when that changed it, 0 when not), as in MySQL. Rows of one
//!   statement that repeat a key are processed in order: the statement is cut into runs of
//!   distinct keys, each run seeing the ones before it (they are buffered in the
//!   transaction, whose rows every read overlays); a run that fails takes the earlier
//!   ones back with it.
//!
//! The changed rows reach the transaction as (handle, old row, new row), so their secondary
//! index entries move with them (`client::sql::index`).

use std::collections::{HashMap, HashSet};

use client::sql::insert;
use client::sql::value::{format_date, format_datetime, format_decimal};
use client::sql::{SqlError, SqlType, TableSchema};
use datafusion::arrow::record_batch::RecordBatch;
use sqlparser::ast;
use sqlparser::dialect::MySqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};
use wire::datum::Datum;

use crate::arrow_rows;
use crate::error::FrontError;

/// The prefix of the names the front gives its own columns in a write's query.
const SET_PREFIX: &str = "__set_";
const NEW_ALIAS: &str = "__new";

/// `'text'` as a MySQL string literal DataFusion's MySQL dialect reads back as `text`.
pub(crate) fn quote_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for ch in s.chars() {
        match ch {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// `name` quoted as an identifier.
fn ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// One `SET c = e` of an UPDATE or an ON DUPLICATE KEY UPDATE, ready for DataFusion.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Assignment {
    /// The table's column index.
    pub column: usize,
    /// The expression's text, with earlier assignments (and `VALUES(c)`) replaced.
    pub text: String,
}

/// A column reference [`substitute`] meets in an expression's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ref {
    /// `c` or `t.c`.
    Column(usize),
    /// `VALUES(c)` (ON DUPLICATE KEY UPDATE: the value the row would have been inserted with).
    Values(usize),
}

/// `text` with each column reference that `replace` maps replaced, token by token (string
/// literals, quoted or not, are single tokens, so nothing inside one is touched).
fn substitute(
    text: &str,
    table: &TableSchema,
    replace: &dyn Fn(Ref) -> Option<String>,
) -> Result<String, FrontError> {
    let tokens = Tokenizer::new(&MySqlDialect {}, text)
        .tokenize_with_location()
        .map_err(|e| FrontError::Parse {
            message: e.to_string(),
        })?;
    let starts: Vec<usize> = tokens
        .iter()
        .map(|t| crate::session::source_offset(text, t.span.start).unwrap_or(text.len()))
        .collect();
    let end_of = |i: usize| starts.get(i + 1).copied().unwrap_or(text.len());
    // The indexes of the tokens that are not whitespace.
    let solid: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let tok = |k: usize| solid.get(k).map(|&i| &tokens[i].token);
    let column = |w: &sqlparser::tokenizer::Word| table.column_index(&w.value);
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut k = 0;
    while k < solid.len() {
        let mut found: Option<(Ref, usize)> = None;
        if let Some(Token::Word(w)) = tok(k) {
            let next_is = |d: usize, t: &Token| tok(k + d) == Some(t);
            if w.quote_style.is_none()
                && w.value.eq_ignore_ascii_case("values")
                && next_is(1, &Token::LParen)
                && next_is(3, &Token::RParen)
                && let Some(Token::Word(c)) = tok(k + 2)
                && let Some(ci) = column(c)
            {
                found = Some((Ref::Values(ci), 3));
            } else if next_is(1, &Token::Period)
                && w.value.eq_ignore_ascii_case(&table.name)
                && let Some(Token::Word(c)) = tok(k + 2)
                && let Some(ci) = column(c)
            {
                found = Some((Ref::Column(ci), 2));
            } else if (k == 0 || tok(k - 1) != Some(&Token::Period))
                && !next_is(1, &Token::LParen)
                && !next_is(1, &Token::Period)
                && let Some(ci) = column(w)
            {
                found = Some((Ref::Column(ci), 0));
            }
        }
        match found.and_then(|(r, extra)| replace(r).map(|s| (s, extra))) {
            Some((with, extra)) => {
                let (from, to) = (starts[solid[k]], end_of(solid[k + extra]));
                out.push_str(&text[copied..from]);
                out.push_str(&with);
                copied = to;
                k += extra + 1;
            }
            None => k += 1,
        }
    }
    out.push_str(&text[copied..]);
    Ok(out)
}

/// `node` printed as SQL that DataFusion's MySQL dialect reads back as the same tree.
///
/// The parser's spans can't be trusted to cut an expression's text out of the statement (a
/// unary minus, a parenthesized operand and an INTERVAL's unit lie outside their
/// expression's span), so the tree is printed instead. Printing writes a string literal's
/// quotes doubled but its backslashes bare, and the MySQL dialect reads a backslash as an
/// escape: each is doubled first, so `'a\\b'` (the string `a\b`) comes back as itself.
pub(crate) fn sql_text<T>(node: &T) -> String
where
    T: Clone + std::fmt::Display + ast::VisitMut,
{
    let mut copy = node.clone();
    let _ = ast::visit_expressions_mut(&mut copy, |e| {
        if let ast::Expr::Value(v) = e
            && let ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) =
                &mut v.value
        {
            // Every backslash and quote escaped with a backslash: the printer leaves a
            // quote after a backslash alone (and a doubled quote as it is), so none is left
            // for it to double or skip, and the text can't end the literal early.
            *s = s
                .replace('\\', "\\\\")
                .replace('\'', "\\'")
                .replace('"', "\\\"");
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    copy.to_string()
}

/// The column an assignment sets (`c` or `t.c`, as the client's UPDATE reads it), not the
/// primary key.
fn target(table: &TableSchema, a: &ast::Assignment) -> Result<usize, FrontError> {
    let ast::AssignmentTarget::ColumnName(name) = &a.target else {
        return Err(FrontError::unsupported("a tuple assignment"));
    };
    let ci = client::sql::modify::column_of(table, name).map_err(|e| match e {
        SqlError::Unsupported { .. } => FrontError::unsupported(format!("an assignment to {name}")),
        other => other.into(),
    })?;
    if ci == table.pk {
        return Err(FrontError::unsupported(
            "changing the primary key (moving a row to another key)",
        ));
    }
    Ok(ci)
}

/// The assignments of an UPDATE (or, with `values`, an ON DUPLICATE KEY UPDATE) as texts
/// DataFusion evaluates over the row before the statement (module docs).
pub(crate) fn assignments(
    table: &TableSchema,
    set: &[ast::Assignment],
    values: bool,
) -> Result<Vec<Assignment>, FrontError> {
    let mut out: Vec<Assignment> = Vec::with_capacity(set.len());
    for a in set {
        let column = target(table, a)?;
        let earlier = |r: Ref| match r {
            Ref::Column(c) => out
                .iter()
                .rev()
                .find(|x| x.column == c)
                .map(|x| format!("({})", x.text)),
            Ref::Values(c) if values => Some(format!(
                "{NEW_ALIAS}.{}",
                ident(&new_name(&table.columns[c].name))
            )),
            Ref::Values(_) => None,
        };
        let text = substitute(&sql_text(&a.value), table, &earlier)?;
        out.push(Assignment { column, text });
    }
    Ok(out)
}

fn new_name(column: &str) -> String {
    format!("{NEW_ALIAS}_{column}")
}

/// `SELECT *, (e1) AS __set_1, ... FROM t [WHERE <the condition>]`.
pub(crate) fn update_query(
    table: &TableSchema,
    sets: &[Assignment],
    selection: Option<&ast::Expr>,
) -> Result<String, FrontError> {
    let mut q = String::from("SELECT *");
    for (i, a) in sets.iter().enumerate() {
        q.push_str(&format!(", ({}) AS {SET_PREFIX}{}", a.text, i + 1));
    }
    q.push_str(&format!(" FROM {}", ident(&table.name)));
    if let Some(cond) = selection {
        q.push_str(&format!(" WHERE {}", sql_text(cond)));
    }
    Ok(q)
}

/// A row as stored, and as a statement's assignments leave it.
pub(crate) type RowChange = (Vec<Datum>, Vec<Datum>);

/// The rows of an update query's answer: each row as stored, and as the assignments leave it.
pub(crate) fn updated_rows(
    table: &TableSchema,
    sets: &[Assignment],
    batches: &[RecordBatch],
) -> Result<Vec<RowChange>, FrontError> {
    let n = table.columns.len();
    let mut out = Vec::new();
    for b in batches {
        if b.num_columns() != n + sets.len() {
            return Err(FrontError::Internal {
                what: format!(
                    "update of {}: expected {} columns, found {}",
                    table.name,
                    n + sets.len(),
                    b.num_columns()
                ),
            });
        }
        let old = arrow_rows::batch_rows(table, &b.columns()[..n])?;
        let mut new = old.clone();
        for (k, a) in sets.iter().enumerate() {
            let col = &table.columns[a.column];
            let values = arrow_rows::assigned_datums(col, b.column(n + k))?;
            for (row, v) in new.iter_mut().zip(values) {
                row[a.column] = v;
            }
        }
        out.extend(old.into_iter().zip(new));
    }
    Ok(out)
}

/// The query whose answer is the rows an INSERT inserts, in its columns' order: its
/// `VALUES` rows or its `SELECT`.
pub(crate) fn insert_source(ins: &ast::Insert) -> Result<String, FrontError> {
    let Some(source) = &ins.source else {
        return Err(FrontError::unsupported("INSERT without VALUES or SELECT"));
    };
    if ins.on.is_some() && !matches!(source.body.as_ref(), ast::SetExpr::Values(_)) {
        return Err(FrontError::unsupported(
            "INSERT ... SELECT ... ON DUPLICATE KEY UPDATE",
        ));
    }
    Ok(sql_text(source.as_ref()))
}

/// The rows of an insert source's answer (one column per target), each as every column of
/// the table in declaration order, stored as its column's type.
pub(crate) fn inserted_rows(
    table: &TableSchema,
    targets: &[usize],
    batches: &[RecordBatch],
) -> Result<Vec<Vec<Datum>>, FrontError> {
    let mut rows = Vec::new();
    for b in batches {
        if b.num_columns() != targets.len() {
            return Err(SqlError::BadValue {
                column: "*".into(),
                reason: format!(
                    "the rows have {} values for {} columns",
                    b.num_columns(),
                    targets.len()
                ),
            }
            .into());
        }
        let mut part: Vec<Vec<Datum>> = vec![Vec::with_capacity(targets.len()); b.num_rows()];
        for (&ci, a) in targets.iter().zip(b.columns()) {
            for (row, v) in part
                .iter_mut()
                .zip(arrow_rows::assigned_datums(&table.columns[ci], a)?)
            {
                row.push(v);
            }
        }
        rows.extend(part);
    }
    Ok(insert::full_rows(table, targets, rows))
}

/// The SQL type DataFusion reads a column as.
fn sql_type(ty: SqlType) -> String {
    match ty {
        SqlType::Int | SqlType::BigInt => "BIGINT".into(),
        SqlType::Double => "DOUBLE".into(),
        SqlType::Varchar => "VARCHAR".into(),
        SqlType::Decimal { precision, scale } => format!("DECIMAL({precision},{scale})"),
        SqlType::Date => "DATE".into(),
        SqlType::DateTime { .. } => "TIMESTAMP".into(),
        SqlType::Boolean => "BOOLEAN".into(),
    }
}

/// A stored datum of a column of type `ty` as a SQL literal of that type.
fn sql_literal(ty: SqlType, d: &Datum) -> Result<String, FrontError> {
    let bad = || FrontError::Internal {
        what: format!("a {} value stored as {d:?}", ty.name()),
    };
    Ok(match (ty, d) {
        (_, Datum::Null) => format!("CAST(NULL AS {})", sql_type(ty)),
        (SqlType::Int | SqlType::BigInt, Datum::Int(v)) => format!("CAST({v} AS BIGINT)"),
        (SqlType::Double, Datum::Real(v)) => format!("CAST('{v:?}' AS DOUBLE)"),
        (SqlType::Double, Datum::Int(v)) => format!("CAST({v} AS DOUBLE)"),
        (SqlType::Varchar, Datum::Bytes(b)) => {
            quote_string(std::str::from_utf8(b).map_err(|_| bad())?)
        }
        (SqlType::Decimal { scale, .. }, Datum::Int(v)) => format!(
            "CAST('{}' AS {})",
            format_decimal(i128::from(*v), scale),
            sql_type(ty)
        ),
        (SqlType::Date, Datum::Int(v)) => format!("CAST('{}' AS DATE)", format_date(*v)),
        (SqlType::DateTime { .. }, Datum::Int(v)) => {
            // Microseconds, as stored: DataFusion's plain TIMESTAMP is nanoseconds, which end
            // in 2262.
            format!("CAST('{}' AS TIMESTAMP(6))", format_datetime(*v))
        }
        (SqlType::Boolean, Datum::Int(v)) => (if *v != 0 { "TRUE" } else { "FALSE" }).into(),
        _ => return Err(bad()),
    })
}

/// The handle of a full row.
pub(crate) fn handle(table: &TableSchema, row: &[Datum]) -> Result<i64, FrontError> {
    match row.get(table.pk) {
        Some(Datum::Int(h)) => Ok(*h),
        _ => Err(SqlError::BadValue {
            column: table.columns[table.pk].name.clone(),
            reason: "the primary key can't be NULL".into(),
        }
        .into()),
    }
}

/// `rows` cut into runs in which no primary key repeats (module docs).
pub(crate) fn runs_of_distinct_keys(
    table: &TableSchema,
    rows: Vec<Vec<Datum>>,
) -> Result<Vec<Vec<Vec<Datum>>>, FrontError> {
    let mut runs: Vec<Vec<Vec<Datum>>> = Vec::new();
    let mut seen = HashSet::new();
    for row in rows {
        let h = handle(table, &row)?;
        if !seen.insert(h) || runs.is_empty() {
            seen.clear();
            seen.insert(h);
            runs.push(Vec::new());
        }
        if let Some(run) = runs.last_mut() {
            run.push(row);
        }
    }
    Ok(runs)
}

/// The query that joins one run of rows to the stored ones and evaluates the ON DUPLICATE
/// KEY UPDATE assignments over each pair (module docs).
pub(crate) fn upsert_query(
    table: &TableSchema,
    sets: &[Assignment],
    run: &[Vec<Datum>],
) -> Result<String, FrontError> {
    let mut values = Vec::with_capacity(run.len());
    for row in run {
        let items = table
            .columns
            .iter()
            .zip(row)
            .map(|(c, d)| sql_literal(c.ty, d))
            .collect::<Result<Vec<_>, _>>()?;
        values.push(format!("({})", items.join(", ")));
    }
    let names: Vec<String> = table
        .columns
        .iter()
        .map(|c| ident(&new_name(&c.name)))
        .collect();
    let t = ident(&table.name);
    let pk = &table.columns[table.pk].name;
    let mut q = format!("SELECT {t}.*, {NEW_ALIAS}.{}", ident(&new_name(pk)));
    for (i, a) in sets.iter().enumerate() {
        q.push_str(&format!(", ({}) AS {SET_PREFIX}{}", a.text, i + 1));
    }
    q.push_str(&format!(
        " FROM (VALUES {}) AS {NEW_ALIAS}({}) LEFT JOIN {t} ON {t}.{} = {NEW_ALIAS}.{}",
        values.join(", "),
        names.join(", "),
        ident(pk),
        ident(&new_name(pk)),
    ));
    Ok(q)
}

/// What one run of an ON DUPLICATE KEY UPDATE writes: the rows it inserts or changes (handle,
/// stored row if any, new row) and MySQL's affected-row count.
pub(crate) fn upsert_rows(
    table: &TableSchema,
    sets: &[Assignment],
    run: Vec<Vec<Datum>>,
    batches: &[RecordBatch],
) -> Result<(Vec<client::sql::index::RowChange>, u64), FrontError> {
    let n = table.columns.len();
    // handle → (stored row, row after the assignments), for the keys that are stored.
    let mut stored: HashMap<i64, RowChange> = HashMap::new();
    for b in batches {
        if b.num_columns() != n + 1 + sets.len() {
            return Err(FrontError::Internal {
                what: format!(
                    "upsert into {}: expected {} columns, found {}",
                    table.name,
                    n + 1 + sets.len(),
                    b.num_columns()
                ),
            });
        }
        let old = arrow_rows::batch_rows(table, &b.columns()[..n])?;
        let mut new = old.clone();
        for (k, a) in sets.iter().enumerate() {
            let values =
                arrow_rows::assigned_datums(&table.columns[a.column], b.column(n + 1 + k))?;
            for (row, v) in new.iter_mut().zip(values) {
                row[a.column] = v;
            }
        }
        for (old, new) in old.into_iter().zip(new) {
            // A row with no stored match has a NULL key on the table's side.
            if let Some(Datum::Int(h)) = old.get(table.pk) {
                stored.insert(*h, (old.clone(), new));
            }
        }
    }
    let mut puts = Vec::with_capacity(run.len());
    let mut affected = 0;
    for row in run {
        let h = handle(table, &row)?;
        match stored.remove(&h) {
            None => {
                affected += 1;
                puts.push((h, None, Some(row)));
            }
            Some((old, new)) if old != new => {
                affected += 2;
                puts.push((h, Some(old), Some(new)));
            }
            Some(_) => {}
        }
    }
    Ok((puts, affected))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::parser::Parser;

    fn table() -> TableSchema {
        crate::test_table(
            3,
            &[
                ("id", SqlType::BigInt),
                ("a", SqlType::Int),
                ("b", SqlType::Int),
                ("s", SqlType::Varchar),
            ],
        )
    }

    fn sets(sql: &str, values: bool) -> Vec<(usize, String)> {
        let stmt = Parser::parse_sql(&MySqlDialect {}, sql).unwrap().remove(0);
        let set = match &stmt {
            ast::Statement::Update(u) => u.assignments.clone(),
            ast::Statement::Insert(i) => match &i.on {
                Some(ast::OnInsert::DuplicateKeyUpdate(a)) => a.clone(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        assignments(&table(), &set, values)
            .unwrap()
            .into_iter()
            .map(|a| (a.column, a.text))
            .collect()
    }

    #[test]
    fn later_assignments_see_earlier_ones_and_literals_stay_as_written() {
        assert_eq!(
            sets(
                "UPDATE t SET a = a + 1, b = a * 2, s = 'a\\'b' WHERE id = 1",
                false
            ),
            [
                (1, "a + 1".to_string()),
                (2, "(a + 1) * 2".to_string()),
                (3, "'a\\'b'".to_string()),
            ]
        );
        // A string, a function named like a column, another table's column: untouched.
        assert_eq!(
            sets("UPDATE t SET a = 5, b = a + LENGTH('a') + t.a + x.a", false),
            [
                (1, "5".to_string()),
                (2, "(5) + LENGTH('a') + (5) + x.a".to_string()),
            ]
        );
    }

    #[test]
    fn printed_expressions_keep_their_operators_parentheses_and_backslashes() {
        assert_eq!(
            sets(
                "UPDATE t SET a = -a, b = (a + 1) * 2, s = CONCAT('C:\\\\x', s) WHERE id = 1",
                false
            ),
            [
                (1, "-a".to_string()),
                (2, "((-a) + 1) * 2".to_string()),
                (3, "CONCAT('C:\\\\x', s)".to_string()),
            ]
        );
    }

    /// A string that ends in a backslash then a quote stays one literal (it once printed as
    /// `'\\' OR 1=1 -- '`: a condition true for every row).
    #[test]
    fn a_string_literal_cannot_end_early_or_lose_its_quotes() {
        use datafusion::sql::sqlparser::dialect::MySqlDialect as DfMySql;
        use datafusion::sql::sqlparser::parser::Parser as DfParser;
        for value in ["\\' OR 1=1 -- ", "a''b", "C:\\temp", "it's", "\"q\"", "\\"] {
            let sql = format!("DELETE FROM t WHERE s = {}", quote_string(value));
            let stmt = Parser::parse_sql(&MySqlDialect {}, &sql).unwrap().remove(0);
            let ast::Statement::Delete(d) = stmt else {
                panic!()
            };
            let text = sql_text(d.selection.as_ref().unwrap());
            let back = DfParser::new(&DfMySql {})
                .try_with_sql(&text)
                .unwrap()
                .parse_expr()
                .unwrap();
            let datafusion::sql::sqlparser::ast::Expr::BinaryOp { right, .. } = back else {
                panic!("{text}: not one comparison")
            };
            let datafusion::sql::sqlparser::ast::Expr::Value(v) = *right else {
                panic!("{text}: not a literal")
            };
            assert_eq!(v.value.into_string().as_deref(), Some(value), "{text}");
        }
    }

    #[test]
    fn values_of_a_column_is_the_row_that_was_to_be_inserted() {
        assert_eq!(
            sets(
                "INSERT INTO t VALUES (1, 2, 3, 'x') ON DUPLICATE KEY UPDATE a = a + VALUES(a), b = values( b ) + a",
                true
            ),
            [
                (1, "a + __new.`__new_a`".to_string()),
                (2, "__new.`__new_b` + (a + __new.`__new_a`)".to_string()),
            ]
        );
    }

    #[test]
    fn the_primary_key_and_unknown_columns_are_refused() {
        let t = table();
        for (sql, want) in [
            ("UPDATE t SET id = 2", "primary key"),
            ("UPDATE t SET nope = 2", "nope"),
            ("UPDATE t SET x.a = 2", "assignment"),
        ] {
            let stmt = Parser::parse_sql(&MySqlDialect {}, sql).unwrap().remove(0);
            let ast::Statement::Update(u) = stmt else {
                panic!()
            };
            let e = assignments(&t, &u.assignments, false).unwrap_err();
            assert!(e.to_string().contains(want), "{sql}: {e}");
        }
    }

    #[test]
    fn runs_break_where_a_key_repeats() {
        let t = table();
        let row = |h: i64| vec![Datum::Int(h), Datum::Null, Datum::Null, Datum::Null];
        let runs = runs_of_distinct_keys(&t, vec![row(1), row(2), row(1), row(3), row(3)]).unwrap();
        let keys: Vec<Vec<i64>> = runs
            .iter()
            .map(|r| r.iter().map(|x| handle(&t, x).unwrap()).collect())
            .collect();
        assert_eq!(keys, [vec![1, 2], vec![1, 3], vec![3]]);
    }

    #[test]
    fn stored_values_print_as_literals_of_their_type() {
        let d = SqlType::Decimal {
            precision: 5,
            scale: 2,
        };
        assert_eq!(
            sql_literal(d, &Datum::Int(-5)).unwrap(),
            "CAST('-0.05' AS DECIMAL(5,2))"
        );
        assert_eq!(
            sql_literal(SqlType::Date, &Datum::Int(0)).unwrap(),
            "CAST('1970-01-01' AS DATE)"
        );
        assert_eq!(
            sql_literal(SqlType::Varchar, &Datum::Bytes(b"it's \\".to_vec())).unwrap(),
            "'it''s \\\\'"
        );
        assert_eq!(
            sql_literal(SqlType::Double, &Datum::Real(0.1)).unwrap(),
            "CAST('0.1' AS DOUBLE)"
        );
        assert!(sql_literal(SqlType::Date, &Datum::Real(1.0)).is_err());
    }
}
