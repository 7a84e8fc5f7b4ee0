//! Where MySQL and DataFusion give different answers to the same expression, MySQL's:
//! an analyzer rule ([`MySqlSemantics`]) that rewrites each plan's expressions before type
//! coercion, so the rewritten expressions are typed as any other.
//!
//! | expression | DataFusion | MySQL, and the rewrite |
//! |------------|------------|------------------------|
//! | `7 / 2` | `3` (integer division) | `3.5000`: integers and decimals divide as DECIMAL with the dividend's scale + 4 (MySQL's `div_precision_increment`); a DOUBLE on either side divides as DOUBLE |
//! | `FLOOR(1.5)`, `CEIL` | `1.0` (a DECIMAL of the argument's scale) | `1`: scale 0 |
//! | `2.5E-1` | a DECIMAL (with `parse_float_as_decimal`, set so that `0.1` is exact) | a DOUBLE: [`double_literals`] casts number literals with an exponent before planning |
//! | `x / 0`, `x % 0` | an error (`Divide by zero`), or NaN for doubles | NULL: the divisor through `NULLIF(d, 0)` |
//! | `CONCAT(a, NULL)` | `a` (NULL skipped) | NULL when any argument is NULL |
//! | `GREATEST(1, NULL)`, `LEAST` | `1` (NULL skipped) | NULL when any argument is NULL |
//!
//! A pushed-down filter is unaffected: the coprocessor never sees `/` or these functions (the
//! condition planner refuses them, so they stay in DataFusion).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::functions::core::expr_fn::nullif;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    BinaryExpr, Cast, Expr, ExprSchemable, LogicalPlan, LogicalPlanBuilder, Operator, when,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::lit;
use datafusion::sql::parser::Statement as DfStatement;

/// The rewrites of the module docs.
#[derive(Debug, Default)]
pub struct MySqlSemantics;

impl AnalyzerRule for MySqlSemantics {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            // A rewritten expression keeps its name: a parent node refers to it by name
            // (`GROUP BY units % 3` in the projection above the aggregation).
            let names = NamePreserver::new(&node);
            // What the node's expressions are evaluated over: its input's columns (a join's
            // own schema holds both sides'; a scan's filters are over its own).
            let inputs = node.inputs();
            let schema = match inputs.as_slice() {
                [one] => one.schema().clone(),
                _ => node.schema().clone(),
            };
            let rewritten = node.map_expressions(|e| {
                let saved = names.save(&e);
                Ok(e.transform_up(|x| Ok(rewrite(x, &schema)))?
                    .update_data(|e| saved.restore(e)))
            })?;
            // A VALUES list keeps the schema it was built with (DataFusion does not
            // recompute it): typed again from its rewritten rows (`7 / 2` is a DECIMAL now).
            match rewritten.data {
                LogicalPlan::Values(v) if rewritten.transformed => Ok(Transformed::yes(
                    LogicalPlanBuilder::values(v.values)?.build()?,
                )),
                other => Ok(Transformed::new(
                    other,
                    rewritten.transformed,
                    rewritten.tnr,
                )),
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "mysql_semantics"
    }
}

/// The scale of an exact number type (integers 0, a decimal its own); `None` for any other
/// type, or when the type is not known.
fn exact_scale(t: Option<DataType>) -> Option<i8> {
    match t? {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Null => Some(0),
        DataType::Decimal128(_, s) => Some(s),
        _ => None,
    }
}

/// MySQL's scale limit for a computed DECIMAL.
const MAX_DECIMAL_SCALE: i8 = 30;

/// One expression, rewritten if it is one of the module docs' table; `schema` types the
/// columns it reads.
fn rewrite(e: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let type_of = |x: &Expr| x.get_type(schema).ok();
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Divide,
            right,
        }) => {
            let cast = |x: Expr, t: DataType| Expr::Cast(Cast::new(Box::new(x), t));
            match (exact_scale(type_of(&left)), exact_scale(type_of(&right))) {
                (Some(ls), Some(rs)) => {
                    // Exact operands: a DECIMAL quotient at the dividend's scale + 4.
                    let as_decimal = |x: Expr, s: i8| cast(x, DataType::Decimal128(38, s));
                    let scale = (ls + 4).min(MAX_DECIMAL_SCALE);
                    let quotient = Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(as_decimal(*left, ls)),
                        Operator::Divide,
                        Box::new(nullif(as_decimal(*right, rs), lit(0i64))),
                    ));
                    Transformed::yes(cast(quotient, DataType::Decimal128(38, scale)))
                }
                _ => Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(cast(*left, DataType::Float64)),
                    Operator::Divide,
                    Box::new(nullif(cast(*right, DataType::Float64), lit(0.0f64))),
                ))),
            }
        }
        Expr::ScalarFunction(f)
            if matches!(f.func.name(), "floor" | "ceil")
                && let [arg] = f.args.as_slice()
                && let Some(DataType::Decimal128(p, s)) = type_of(arg)
                && s > 0 =>
        {
            let call = Expr::ScalarFunction(f);
            Transformed::yes(Expr::Cast(Cast::new(
                Box::new(call),
                DataType::Decimal128(p, 0),
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

/// Casts every number literal written with an exponent (`2.5E-1`) to DOUBLE, as MySQL types
/// it, in a statement DataFusion parsed (its parser reads every number with a point or an
/// exponent as a DECIMAL, so that `0.1` is exact as in MySQL).
pub fn double_literals(stmt: &mut DfStatement) {
    use datafusion::sql::sqlparser::ast::{self, CastKind, visit_expressions_mut};
    let is_exponent = |e: &ast::Expr| {
        matches!(e, ast::Expr::Value(v)
            if matches!(&v.value, ast::Value::Number(n, _) if n.contains(['e', 'E'])))
    };
    let inner: &mut ast::Statement = match stmt {
        DfStatement::Statement(s) => s,
        DfStatement::Explain(e) => return double_literals(&mut e.statement),
        _ => return,
    };
    let _ = visit_expressions_mut(inner, |e| {
        if is_exponent(e) {
            let number = std::mem::replace(e, ast::Expr::value(ast::Value::Null));
            *e = ast::Expr::Cast {
                kind: CastKind::Cast,
                expr: Box::new(number),
                data_type: ast::DataType::Double(ast::ExactNumberInfo::None),
                array: false,
                format: None,
            };
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{col, concat};

    #[test]
    fn division_is_by_doubles_and_by_zero_is_null() {
        let schema = DFSchema::empty();
        let e = rewrite(col("a") / col("b"), &schema).data;
        assert_eq!(
            e.to_string(),
            "CAST(a AS Float64) / nullif(CAST(b AS Float64), Float64(0))"
        );
        let e = rewrite(lit(7i64) / lit(2i64), &schema).data;
        assert_eq!(
            e.to_string(),
            "CAST(CAST(Int64(7) AS Decimal128(38, 0)) / nullif(CAST(Int64(2) AS Decimal128(38, 0)), Int64(0)) AS Decimal128(38, 4))"
        );
        let e = rewrite(col("a") % col("b"), &schema).data;
        assert_eq!(e.to_string(), "a % nullif(b, Int64(0))");
        assert!(!rewrite(col("a") + col("b"), &schema).transformed);
    }

    #[test]
    fn concat_of_a_null_is_null() {
        let e = rewrite(concat(vec![col("a"), lit("x")]), &DFSchema::empty()).data;
        assert_eq!(
            e.to_string(),
            "CASE WHEN a IS NULL OR Utf8(\"x\") IS NULL THEN NULL ELSE concat(a, Utf8(\"x\")) END"
        );
    }
}
