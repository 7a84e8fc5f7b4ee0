//! Which of DataFusion's filters go into the coprocessor DAG, and how.
//!
//! A filter DataFusion offers a table scan is written back as SQL (DataFusion's unparser,
//! MySQL dialect, columns unqualified) and planned by the same condition planner the client's
//! statements use (`client::sql::select::where_conditions`): what it accepts runs in every
//! region's Selection, exactly as DataFusion would have evaluated it (the comparisons, `AND`,
//! `OR`, `NOT`, `IS [NOT] NULL`, `IN`, `BETWEEN` and `LIKE` over columns and literals it
//! plans have the same meaning in both), so DataFusion is told the filter is exact and does
//! not evaluate it again (inexact when a transaction's rows are overlaid on the scan's, see
//! `crate::table`). What it refuses (a function, a cast, a comparison of a number with a
//! string) stays in DataFusion. Bounds on the primary key narrow the key ranges read
//! (`client::sql::handle_ranges`).

use client::sql::TableSchema;
use client::sql::handle_ranges::handle_ranges;
use client::sql::select::where_conditions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::logical_expr::Expr;
use datafusion::prelude::Column;
use datafusion::sql::unparser::Unparser;
use datafusion::sql::unparser::dialect::MySqlDialect as UnparseDialect;
use sqlparser::ast;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use wire::coprocessor::{self as proto, KeyRange};

/// Whether `expr`'s text round trip is faithful and its meaning the coprocessor's. Refused:
/// a string literal with a quote or a backslash (the unparser and the MySQL dialect escape
/// them differently, so the text could mean another string, or more than a literal);
/// `SIMILAR TO` (unparsed as `LIKE`); `ILIKE`, `LIKE ... ESCAPE` and a `LIKE` pattern with `_`
/// (the coprocessor's `_` matches a byte, DataFusion's a character).
fn round_trips(expr: &Expr) -> bool {
    use datafusion::common::ScalarValue;
    use datafusion::common::tree_node::TreeNodeRecursion;
    let mut ok = true;
    let _ = expr.apply(|e| {
        let bad = match e {
            Expr::Literal(
                ScalarValue::Utf8(Some(s))
                | ScalarValue::LargeUtf8(Some(s))
                | ScalarValue::Utf8View(Some(s)),
                _,
            ) => s.contains(['\\', '\'']),
            Expr::SimilarTo(_) => true,
            Expr::Like(l) => {
                l.case_insensitive
                    || l.escape_char.is_some()
                    || !matches!(
                        l.pattern.as_ref(),
                        Expr::Literal(ScalarValue::Utf8(Some(p)), _) if !p.contains('_')
                    )
            }
            _ => false,
        };
        if bad {
            ok = false;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    ok
}

/// `expr` as a `WHERE` condition of the client's planner, when it can be written as one
/// faithfully ([`round_trips`]).
pub fn filter_ast(expr: &Expr) -> Option<ast::Expr> {
    if !round_trips(expr) {
        return None;
    }
    let unqualified = expr
        .clone()
        .transform(|e| {
            Ok(match e {
                Expr::Column(c) if c.relation.is_some() => {
                    Transformed::yes(Expr::Column(Column::new_unqualified(c.name)))
                }
                other => Transformed::no(other),
            })
        })
        .ok()?
        .data;
    let text = Unparser::new(&UnparseDialect {})
        .expr_to_sql(&unqualified)
        .ok()?
        .to_string();
    let mut parser = Parser::new(&MySqlDialect {}).try_with_sql(&text).ok()?;
    let parsed = parser.parse_expr().ok()?;
    // All of the text, or it said more than one expression.
    (parser.peek_token().token == sqlparser::tokenizer::Token::EOF).then_some(parsed)
}

/// Whether the coprocessor evaluates `expr` over `table` exactly as DataFusion would.
pub fn pushable(table: &TableSchema, expr: &Expr) -> bool {
    filter_ast(expr).is_some_and(|w| where_conditions(table, Some(&w)).is_ok())
}

/// What the filters of one scan became.
#[derive(Debug, Clone, Default)]
pub struct PushedFilters {
    /// The Selection's conditions, over the table's columns.
    pub conditions: Vec<proto::Expr>,
    /// The record-key ranges that can hold a matching row.
    pub ranges: Vec<KeyRange>,
    /// Each pushed filter's SQL (for EXPLAIN).
    pub texts: Vec<String>,
}

/// Plans the pushable `filters` of a scan of `table`, and returns the others: filters
/// DataFusion was told are exact but that no longer plan as it passes them (its simplifier
/// ran in between), which the scan must evaluate itself.
pub fn push_filters(table: &TableSchema, filters: &[Expr]) -> (PushedFilters, Vec<Expr>) {
    let mut wheres: Vec<ast::Expr> = Vec::new();
    let mut out = PushedFilters::default();
    let mut left = Vec::new();
    for f in filters {
        let planned = filter_ast(f).and_then(|w| {
            let conditions = where_conditions(table, Some(&w)).ok()?;
            Some((w, conditions))
        });
        let Some((w, conditions)) = planned else {
            left.push(f.clone());
            continue;
        };
        out.conditions.extend(conditions);
        out.texts.push(w.to_string());
        wheres.push(w);
    }
    let combined = wheres.into_iter().reduce(|a, b| ast::Expr::BinaryOp {
        left: Box::new(a),
        op: ast::BinaryOperator::And,
        right: Box::new(b),
    });
    let pk = &table.columns[table.pk].name;
    out.ranges = handle_ranges(table.id, pk, combined.as_ref());
    (out, left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::sql::SqlType;
    use datafusion::prelude::{col, lit};
    use wire::codec::table::record_range;

    fn table() -> TableSchema {
        crate::test_table(
            7,
            &[
                ("id", SqlType::BigInt),
                ("n", SqlType::Int),
                ("s", SqlType::Varchar),
            ],
        )
    }

    #[test]
    fn comparisons_of_columns_with_literals_are_pushed_and_functions_are_not() {
        let t = table();
        let qualified = Expr::Column(Column::new(Some("t"), "n"));
        for e in [
            col("n").gt(lit(5)),
            qualified.lt_eq(lit(3)),
            col("s").like(lit("a%")),
            col("n").is_null().or(col("id").eq(lit(2i64))),
            col("n").in_list(vec![lit(1), lit(2)], false),
            col("n").between(lit(1), lit(9)),
        ] {
            assert!(pushable(&t, &e), "{e} should be pushed");
        }
        for e in [
            datafusion::functions::expr_fn::abs(col("n")).gt(lit(1)),
            col("s").gt(lit(1)),
            Expr::Column(Column::new_unqualified("nope")).eq(lit(1)),
            // Text that would not come back as the same literal, or as one expression.
            col("s").eq(lit("C:\\temp")),
            col("s").eq(lit("\\') OR (1=1) -- ")),
            col("s").eq(lit("it's")),
            // Byte and character wildcards differ; SIMILAR TO is not LIKE.
            col("s").like(lit("a_")),
            col("s").ilike(lit("a%")),
            Expr::SimilarTo(datafusion::logical_expr::Like::new(
                false,
                Box::new(col("s")),
                Box::new(lit("a%")),
                None,
                false,
            )),
        ] {
            assert!(!pushable(&t, &e), "{e} must stay in DataFusion");
        }
    }

    #[test]
    fn primary_key_bounds_narrow_the_ranges_and_others_keep_the_whole_table() {
        let t = table();
        let (all, _) = push_filters(&t, &[col("n").gt(lit(5))]);
        assert_eq!(all.ranges, handle_ranges(7, "id", None));
        let (start, end) = (all.ranges[0].start.clone(), all.ranges[0].end.clone());
        assert_eq!(end, record_range(7).1);
        let (narrow, _) =
            push_filters(&t, &[col("id").gt_eq(lit(10i64)), col("id").lt(lit(20i64))]);
        assert_eq!(narrow.conditions.len(), 2);
        assert_eq!(narrow.ranges.len(), 1);
        assert!(narrow.ranges[0].start > start && narrow.ranges[0].end < end);
    }
}
