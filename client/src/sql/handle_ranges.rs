//! Key ranges from a `WHERE` clause: the handles (the integer primary key) a statement can
//! match, so a query over `id BETWEEN 0 AND 99` reads one small range of one region instead
//! of every region of the table.
//!
//! Only the top-level `AND` conjuncts that compare the primary key column with integer
//! literals narrow the ranges: `id = c`, `id < c`, `id <= c`, `id > c`, `id >= c` (either
//! side), `id BETWEEN a AND b` and `id IN (c, ...)`. Every other conjunct (an `OR`, a `<>`,
//! a condition on another column, a non-integer literal) leaves the ranges as they are. The
//! narrowing is only an optimisation: the Selection still evaluates the whole `WHERE`, so a
//! range that is wider than needed is never wrong, and the only claim made here is that no
//! matching handle falls outside the ranges (proved by the property test below).
//!
//! Ranges are handle intervals, inclusive at both ends, sorted and disjoint; a conjunction is
//! their intersection. An empty intersection still yields one range (of the single handle
//! `0`): the request stays well-formed, and the Selection rejects that row.

use sqlparser::ast::{self, BinaryOperator, InTarget, UnaryOperator, Value};
use wire::codec::table::{record_key, record_range};
use wire::coprocessor::KeyRange;

/// At most this many `IN` values become point ranges; a longer list does not narrow.
const MAX_IN_POINTS: usize = 1024;

/// Sorted, disjoint, inclusive handle intervals.
type Intervals = Vec<(i64, i64)>;

/// The record-key ranges of table `table_id` that can hold a row matching `selection`,
/// given the primary key column's (lowercase) name.
pub fn handle_ranges(table_id: i64, pk: &str, selection: Option<&ast::Expr>) -> Vec<KeyRange> {
    let mut set: Intervals = vec![(i64::MIN, i64::MAX)];
    if let Some(w) = selection {
        let mut conjuncts = Vec::new();
        split_and(w, &mut conjuncts);
        for c in conjuncts {
            if let Some(s) = conjunct_intervals(c, pk) {
                set = intersect(&set, &s);
            }
        }
    }
    if set.is_empty() {
        set = vec![(0, 0)];
    }
    set.into_iter()
        .map(|(lo, hi)| {
            let start = record_key(table_id, lo);
            let end = match hi.checked_add(1) {
                Some(next) => record_key(table_id, next),
                None => record_range(table_id).1,
            };
            KeyRange::new(start, end)
        })
        .collect()
}

fn split_and<'e>(e: &'e ast::Expr, out: &mut Vec<&'e ast::Expr>) {
    match e {
        ast::Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            split_and(left, out);
            split_and(right, out);
        }
        ast::Expr::Nested(inner) => split_and(inner, out),
        other => out.push(other),
    }
}

fn is_pk(e: &ast::Expr, pk: &str) -> bool {
    match e {
        ast::Expr::Identifier(id) => id.value.eq_ignore_ascii_case(pk),
        ast::Expr::Nested(inner) => is_pk(inner, pk),
        _ => false,
    }
}

/// An integer literal (optionally negated, optionally parenthesised).
fn int_literal(e: &ast::Expr) -> Option<i64> {
    match e {
        ast::Expr::Nested(inner) => int_literal(inner),
        ast::Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match expr.as_ref() {
            ast::Expr::Value(v) => match &v.value {
                Value::Number(n, _) => format!("-{n}").parse().ok(),
                _ => None,
            },
            _ => None,
        },
        ast::Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// The handles one conjunct allows, or `None` when it does not constrain the handle in a
/// way understood here.
fn conjunct_intervals(e: &ast::Expr, pk: &str) -> Option<Intervals> {
    match e {
        ast::Expr::Nested(inner) => conjunct_intervals(inner, pk),
        ast::Expr::BinaryOp { left, op, right } => {
            let (c, op) = if is_pk(left, pk) {
                (int_literal(right)?, op.clone())
            } else if is_pk(right, pk) {
                (int_literal(left)?, flip(op)?)
            } else {
                return None;
            };
            let interval = match op {
                BinaryOperator::Eq => Some((c, c)),
                BinaryOperator::Lt => c.checked_sub(1).map(|hi| (i64::MIN, hi)),
                BinaryOperator::LtEq => Some((i64::MIN, c)),
                BinaryOperator::Gt => c.checked_add(1).map(|lo| (lo, i64::MAX)),
                BinaryOperator::GtEq => Some((c, i64::MAX)),
                _ => return None,
            };
            Some(interval.into_iter().collect())
        }
        ast::Expr::Between {
            expr,
            negated: false,
            low,
            high,
        } if is_pk(expr, pk) => {
            let (lo, hi) = (int_literal(low)?, int_literal(high)?);
            Some(if lo <= hi { vec![(lo, hi)] } else { Vec::new() })
        }
        ast::Expr::In {
            expr,
            target: InTarget::List(list),
            negated: false,
            global: false,
        } if is_pk(expr, pk) && list.len() <= MAX_IN_POINTS => {
            let mut points = list.iter().map(int_literal).collect::<Option<Vec<i64>>>()?;
            points.sort_unstable();
            points.dedup();
            let mut out: Intervals = Vec::new();
            for p in points {
                match out.last_mut() {
                    Some((_, hi)) if hi.checked_add(1) == Some(p) => *hi = p,
                    _ => out.push((p, p)),
                }
            }
            Some(out)
        }
        _ => None,
    }
}

/// `c op id` as `id op' c`.
fn flip(op: &BinaryOperator) -> Option<BinaryOperator> {
    Some(match op {
        BinaryOperator::Eq => BinaryOperator::Eq,
        BinaryOperator::Lt => BinaryOperator::Gt,
        BinaryOperator::LtEq => BinaryOperator::GtEq,
        BinaryOperator::Gt => BinaryOperator::Lt,
        BinaryOperator::GtEq => BinaryOperator::LtEq,
        _ => return None,
    })
}

fn intersect(a: &Intervals, b: &Intervals) -> Intervals {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if lo <= hi {
            out.push((lo, hi));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    use super::*;

    fn where_of(cond: &str) -> ast::Expr {
        let sql = format!("select * from t where {cond}");
        let stmt = Parser::parse_sql(&MySqlDialect {}, &sql).unwrap().remove(0);
        let ast::Statement::Query(q) = stmt else {
            unreachable!()
        };
        let ast::SetExpr::Select(s) = *q.body else {
            unreachable!()
        };
        s.selection.unwrap()
    }

    fn ranges(cond: &str) -> Vec<KeyRange> {
        handle_ranges(7, "id", Some(&where_of(cond)))
    }

    fn covers(ranges: &[KeyRange], handle: i64) -> bool {
        let k = record_key(7, handle);
        ranges
            .iter()
            .any(|r| r.start.as_slice() <= k.as_slice() && k.as_slice() < r.end.as_slice())
    }

    #[test]
    fn a_between_on_the_key_reads_exactly_its_handles() {
        let r = ranges("id between 10 and 19 and v > 3");
        assert_eq!(r, vec![KeyRange::new(record_key(7, 10), record_key(7, 20))]);
    }

    #[test]
    fn conditions_on_other_columns_or_disjunctions_read_the_whole_table() {
        let all = vec![KeyRange::new(record_key(7, i64::MIN), record_range(7).1)];
        for cond in [
            "v > 3",
            "id = 1 or id = 2",
            "id <> 4",
            "id > 1.5",
            "not id = 3",
        ] {
            assert_eq!(ranges(cond), all, "{cond}");
        }
        assert_eq!(handle_ranges(7, "id", None), all);
    }

    #[test]
    fn in_lists_become_merged_points_and_bounds_clip_them() {
        let r = ranges("id in (5, 3, 4, 9) and id < 9");
        assert_eq!(r, vec![KeyRange::new(record_key(7, 3), record_key(7, 6))]);
    }

    #[test]
    fn extreme_bounds_do_not_overflow() {
        assert_eq!(
            ranges(&format!("id > {}", i64::MAX)),
            vec![KeyRange::new(record_key(7, 0), record_key(7, 1))],
            "an empty set keeps one well-formed range"
        );
        let r = ranges(&format!("id >= {}", i64::MAX));
        assert_eq!(
            r,
            vec![KeyRange::new(record_key(7, i64::MAX), record_range(7).1)]
        );
        assert!(covers(
            &ranges(&format!("id <= -{}", i64::MAX)),
            i64::MIN + 1
        ));
    }

    /// A random condition on `id` (or on another column).
    #[derive(Debug, Clone)]
    enum Cond {
        /// `id OP c` (or `c OP' id` when flipped), OP indexing `OPS`.
        Cmp {
            op: usize,
            c: i64,
            flipped: bool,
        },
        Between(i64, i64),
        In(Vec<i64>),
        Either(i64, i64),
        OtherColumn,
    }

    const OPS: [&str; 6] = ["=", "<", "<=", ">", ">=", "<>"];

    impl Cond {
        fn sql(&self) -> String {
            match self {
                Cond::Cmp {
                    op,
                    c,
                    flipped: false,
                } => format!("id {} {c}", OPS[*op]),
                // `c OP' id` means `id OP c`: write the mirrored operator.
                Cond::Cmp {
                    op,
                    c,
                    flipped: true,
                } => {
                    format!("{c} {} id", OPS[[0, 3, 4, 1, 2, 5][*op]])
                }
                Cond::Between(a, b) => format!("id between {a} and {b}"),
                Cond::In(vs) => format!(
                    "id in ({})",
                    vs.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
                ),
                Cond::Either(a, b) => format!("(id = {a} or id = {b})"),
                Cond::OtherColumn => "g > 1".into(),
            }
        }

        fn holds(&self, h: i64) -> bool {
            match self {
                Cond::Cmp { op, c, .. } => match op {
                    0 => h == *c,
                    1 => h < *c,
                    2 => h <= *c,
                    3 => h > *c,
                    4 => h >= *c,
                    _ => h != *c,
                },
                Cond::Between(a, b) => *a <= h && h <= *b,
                Cond::In(vs) => vs.contains(&h),
                Cond::Either(a, b) => h == *a || h == *b,
                Cond::OtherColumn => true,
            }
        }

        /// Narrowed exactly (an `OR`, `<>` or another column's condition is not).
        fn exact(&self) -> bool {
            !matches!(
                self,
                Cond::Cmp { op: 5, .. } | Cond::Either(..) | Cond::OtherColumn
            )
        }
    }

    fn condition() -> impl Strategy<Value = Cond> {
        let c = -6i64..6;
        prop_oneof![
            (0usize..6, c.clone(), any::<bool>()).prop_map(|(op, c, flipped)| Cond::Cmp {
                op,
                c,
                flipped
            }),
            (c.clone(), c.clone()).prop_map(|(a, b)| Cond::Between(a, b)),
            proptest::collection::vec(c.clone(), 1..5).prop_map(Cond::In),
            (c.clone(), c).prop_map(|(a, b)| Cond::Either(a, b)),
            Just(Cond::OtherColumn),
        ]
    }

    proptest! {
        /// No handle that satisfies the WHERE falls outside the ranges; and when every
        /// conjunct is a plain bound, the ranges hold nothing else.
        #[test]
        fn ranges_hold_every_matching_handle(
            conds in proptest::collection::vec(condition(), 1..4)
        ) {
            let text = conds.iter().map(Cond::sql).collect::<Vec<_>>().join(" and ");
            let r = ranges(&text);
            let exact = conds.iter().all(Cond::exact);
            let mut any = false;
            for h in -10i64..10 {
                let matches = conds.iter().all(|c| c.holds(h));
                any |= matches;
                if matches {
                    prop_assert!(covers(&r, h), "{text}: handle {h} is outside {r:?}");
                } else if exact && h != 0 {
                    prop_assert!(!covers(&r, h), "{text}: handle {h} needlessly inside {r:?}");
                }
            }
            if exact && !any {
                prop_assert!(r.len() == 1, "{text}: {r:?}");
            }
        }
    }
}
