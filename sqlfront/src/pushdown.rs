//! Which of DataFusion's filters go into the coprocessor DAG, and how.
//!
//! A filter DataFusion offers a table scan is written back as SQL (DataFusion's unparser,
//! MySQL dialect, columns unqualified) and planned by the same condition planner the client's
//! statements use (`client::sql::conditions::where_conditions`): what it accepts runs in every
//! region's Selection, exactly as DataFusion would have evaluated it (the comparisons, `AND`,
//! `OR`, `NOT`, `IS [NOT] NULL`, `IN`, `BETWEEN` and `LIKE` over columns and literals it
//! plans have the same meaning in both), so DataFusion is told the filter is exact and does
//! not evaluate it again (inexact when a transaction's rows are overlaid on the scan's, see
//! `crate::table`). What it refuses (a function, a cast, a comparison of a number with a
//! string) stays in DataFusion. Bounds on the primary key narrow the key ranges read
//! (`client::sql::handle_ranges`); an equality on a secondary index's leading columns makes
//! the scan look the handles up in the index first (`client::sql::index::choose`).

use client::sql::TableSchema;
use client::sql::conditions::where_conditions;
use client::sql::handle_ranges::handle_ranges;
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
    /// The index read first, when an equality on its leading columns makes it selective
    /// (`client::sql::index::choose`): the scan then reads only the rows of the handles
    /// its entries hold.
    pub index: Option<client::sql::index::IndexChoice>,
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
    out.index = client::sql::index::choose(table, &out.conditions);
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
    fn comparisons_of_encoded_columns_push_exact_literals_of_their_type_only() {
        use datafusion::common::ScalarValue;
        let t = crate::test_table(
            8,
            &[
                ("id", SqlType::BigInt),
                (
                    "price",
                    SqlType::Decimal {
                        precision: 10,
                        scale: 2,
                    },
                ),
                ("day", SqlType::Date),
                ("at", SqlType::DateTime { fsp: 0 }),
                ("paid", SqlType::Boolean),
            ],
        );
        let dec = |v: i128, p: u8, s: i8| lit(ScalarValue::Decimal128(Some(v), p, s));
        // 2024-02-29 is day 19782; 1970-01-01 00:00:01 is 1,000,000 µs.
        let day = lit(ScalarValue::Date32(Some(19_782)));
        let at = lit(ScalarValue::TimestampMicrosecond(Some(1_000_000), None));
        for (e, want) in [
            (col("price").gt(dec(2000, 10, 2)), 2000),
            (col("price").eq(dec(101, 4, 1)), 1010),
            (col("day").gt_eq(day.clone()), 19_782),
            (col("at").lt(at.clone()), 1_000_000),
            (col("paid").eq(lit(true)), 1),
        ] {
            let (pushed, left) = push_filters(&t, std::slice::from_ref(&e));
            assert!(left.is_empty(), "{e} should be pushed");
            let [cond] = pushed.conditions.as_slice() else {
                panic!("{e}: one condition expected, found {:?}", pushed.conditions);
            };
            // The literal became the column's stored integer.
            assert_eq!(cond.children[1], proto::Expr::int(want), "{e}");
        }
        for e in [
            // Not exact at the column's scale: `price > 10.105` is not `price > 10.11`.
            col("price").gt(dec(10105, 10, 3)),
            // Another type, or a column of another type.
            col("day").eq(lit(5)),
            col("price").eq(col("day")),
            col("day").like(lit("2024%")),
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
