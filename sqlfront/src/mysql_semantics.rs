//! Where MySQL and DataFusion give different answers to the same expression, MySQL's:
//! an analyzer rule ([`MySqlSemantics`]) that rewrites each plan's expressions before type
//! coercion, so the rewritten expressions are typed as any other.
//!
//! | expression | DataFusion | MySQL, and the rewrite |
//! |------------|------------|------------------------|
//! | `7 / 2` | `3` (integer division) | `3.5`: both sides as DOUBLE (MySQL's answer is a DECIMAL, `3.5000`; there is no DECIMAL yet) |
//! | `x / 0`, `x % 0` | an error (`Divide by zero`), or NaN for doubles | NULL: the divisor through `NULLIF(d, 0)` |
//! | `CONCAT(a, NULL)` | `a` (NULL skipped) | NULL when any argument is NULL |
//! | `GREATEST(1, NULL)`, `LEAST` | `1` (NULL skipped) | NULL when any argument is NULL |
//!
//! A pushed-down filter is unaffected: the coprocessor never sees `/` or these functions (the
//! condition planner refuses them, so they stay in DataFusion).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::functions::core::expr_fn::nullif;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{BinaryExpr, Cast, Expr, LogicalPlan, Operator, when};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::lit;

/// The rewrites of the module docs.
#[derive(Debug, Default)]
pub struct MySqlSemantics;

impl AnalyzerRule for MySqlSemantics {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            // A rewritten expression keeps its name: a parent node refers to it by name
            // (`GROUP BY units % 3` in the projection above the aggregation).
            let names = NamePreserver::new(&node);
            node.map_expressions(|e| {
                let saved = names.save(&e);
                Ok(e.transform_up(|x| Ok(rewrite(x)))?
                    .update_data(|e| saved.restore(e)))
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "mysql_semantics"
    }
}

/// One expression, rewritten if it is one of the module docs' table.
fn rewrite(e: Expr) -> Transformed<Expr> {
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Divide,
            right,
        }) => {
            let as_double = |x: Expr| Expr::Cast(Cast::new(Box::new(x), DataType::Float64));
            Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(as_double(*left)),
                Operator::Divide,
                Box::new(nullif(as_double(*right), lit(0.0f64))),
            )))
        }
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Modulo,
            right,
        }) => Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
            left,
            Operator::Modulo,
            Box::new(nullif(*right, lit(0i64))),
        ))),
        Expr::ScalarFunction(f) if null_if_any_null(&f) => {
            let any_null = f.args.iter().map(|a| a.clone().is_null()).reduce(Expr::or);
            let call = Expr::ScalarFunction(ScalarFunction::new_udf(f.func.clone(), f.args));
            match any_null {
                Some(cond) => match when(cond, lit(ScalarValue::Null)).otherwise(call.clone()) {
                    Ok(case) => Transformed::yes(case),
                    Err(_) => Transformed::no(call),
                },
                None => Transformed::no(call),
            }
        }
        other => Transformed::no(other),
    }
}

/// Whether `f` is a function MySQL answers NULL for when any argument is NULL, where
/// DataFusion skips NULL arguments. A call this rule already wrapped is not wrapped again:
/// the rule sees it inside the `CASE`, whose `ELSE` it is (`transform_up` visits it once).
fn null_if_any_null(f: &ScalarFunction) -> bool {
    matches!(f.func.name(), "concat" | "greatest" | "least") && !f.args.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{col, concat};

    #[test]
    fn division_is_by_doubles_and_by_zero_is_null() {
        let e = rewrite(col("a") / col("b")).data;
        assert_eq!(
            e.to_string(),
            "CAST(a AS Float64) / nullif(CAST(b AS Float64), Float64(0))"
        );
        let e = rewrite(col("a") % col("b")).data;
        assert_eq!(e.to_string(), "a % nullif(b, Int64(0))");
        assert!(!rewrite(col("a") + col("b")).transformed);
    }

    #[test]
    fn concat_of_a_null_is_null() {
        let e = rewrite(concat(vec![col("a"), lit("x")])).data;
        assert_eq!(
            e.to_string(),
            "CASE WHEN a IS NULL OR Utf8(\"x\") IS NULL THEN NULL ELSE concat(a, Utf8(\"x\")) END"
        );
    }
}
