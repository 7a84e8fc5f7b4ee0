//! Where MySQL and DataFusion give different answers to the same expression, MySQL's:
//! an analyzer rule ([`MySqlSemantics`]) that rewrites each plan's expressions before type
//! coercion, so the rewritten expressions are typed as any other.
//!
//! | expression | DataFusion | MySQL, and the rewrite |
//! |------------|------------|------------------------|
//! | `7 / 2` | `3` (integer division) | `3.5000`: integers and decimals divide as DECIMAL with the dividend's scale + 4 (MySQL's `div_precision_increment`); a DOUBLE on either side divides as DOUBLE |
//! | `FLOOR(1.5)`, `CEIL` | `1.0` (a DECIMAL of the argument's scale) | `1`: scale 0 |
//! | `'10' = 10`, `'9' < 10`, `'10' + 5` | compared as strings (`'9' < 10` is false), or an error | both sides as DOUBLE: true, true, `15` |
//! | `d > 900.0` with `d` a DOUBLE | `d` cast to DECIMAL(30,15): not pushed down, and an error once `d` reaches 1e15 | the DECIMAL side as DOUBLE |
//! | `x / 0`, `x % 0` | an error (`Divide by zero`), or NaN for doubles | NULL: the divisor through `NULLIF(d, 0)` |
//! | `CONCAT(a, NULL)` | `a` (NULL skipped) | NULL when any argument is NULL |
//! | `GREATEST(1, NULL)`, `LEAST` | `1` (NULL skipped) | NULL when any argument is NULL |
//!
//! Spellings DataFusion lacks or reads otherwise (`IF`, `MOD`, `LOCATE`, `CAST AS SIGNED`,
//! MySQL's byte-counting `LENGTH`, a number with an exponent as a DOUBLE, a number as a
//! condition in `NOT`/`AND`/`OR`, a string literal in arithmetic) are rewritten in the parsed
//! statement before planning: [`mysql_statement`].
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

/// Whether `t` is a number type (integers, floats, decimals).
fn is_number(t: Option<DataType>) -> bool {
    t.is_some_and(|t| t.is_numeric())
}

/// Whether `t` is a floating-point type.
fn is_float(t: Option<DataType>) -> bool {
    matches!(
        t,
        Some(DataType::Float16 | DataType::Float32 | DataType::Float64)
    )
}

/// Whether `t` is a DECIMAL.
fn is_decimal(t: Option<DataType>) -> bool {
    matches!(t, Some(DataType::Decimal128(..)))
}

/// Whether `t` is a string type.
fn is_text(t: Option<DataType>) -> bool {
    matches!(
        t,
        Some(DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
    )
}

fn is_comparison(op: Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
    )
}

fn is_arithmetic(op: Operator) -> bool {
    matches!(
        op,
        Operator::Plus | Operator::Minus | Operator::Multiply | Operator::Divide | Operator::Modulo
    )
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
        // A string beside a number, compared or in arithmetic: both as DOUBLE, as MySQL
        // converts them (DataFusion would compare them as strings, or refuse `'10' + 5`).
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if (is_comparison(op) || is_arithmetic(op))
                && ((is_text(type_of(&left)) && is_number(type_of(&right)))
                    || (is_number(type_of(&left)) && is_text(type_of(&right)))) =>
        {
            let as_double = |x: Expr| Expr::Cast(Cast::new(Box::new(x), DataType::Float64));
            Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(as_double(*left)),
                op,
                Box::new(as_double(*right)),
            )))
        }
        // A DOUBLE beside a DECIMAL, compared or in arithmetic: MySQL computes in DOUBLE.
        // DataFusion would cast the DOUBLE to DECIMAL(30,15), which keeps the comparison
        // from being pushed down and overflows for values from 1e15.
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if (is_comparison(op) || is_arithmetic(op))
                && ((is_float(type_of(&left)) && is_decimal(type_of(&right)))
                    || (is_decimal(type_of(&left)) && is_float(type_of(&right)))) =>
        {
            let as_double = |x: Expr| match type_of(&x) {
                Some(DataType::Decimal128(..)) => {
                    Expr::Cast(Cast::new(Box::new(x), DataType::Float64))
                }
                _ => x,
            };
            Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(as_double(*left)),
                op,
                Box::new(as_double(*right)),
            )))
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

/// MySQL's spellings DataFusion lacks, rewritten in a statement DataFusion parsed (before it
/// is planned):
///
/// | written | becomes |
/// |---------|---------|
/// | `2.5E-1` (a number with an exponent) | `CAST(2.5E-1 AS DOUBLE)`: MySQL's type for it (DataFusion's parser reads every number with a point or an exponent as a DECIMAL, set so that `0.1` is exact) |
/// | `IF(c, a, b)` | `CASE WHEN c THEN a ELSE b END` |
/// | `MOD(a, b)` | `a % b` (then NULL for a zero divisor, as `%`) |
/// | `LENGTH(s)` | `OCTET_LENGTH(s)`: MySQL's LENGTH counts bytes (`CHAR_LENGTH` counts characters) |
/// | `LOCATE(sub, s)` | `STRPOS(s, sub)` |
/// | `CAST(x AS SIGNED)`, `AS UNSIGNED` | `CAST(x AS BIGINT)`, `AS BIGINT UNSIGNED` |
/// | `NOT 5`, `1 AND 0` (operands that are not conditions) | `NOT CAST(5 AS BOOLEAN)`, ...: true when not zero |
/// | `'10' + 5` (a string literal in arithmetic) | `CAST('10' AS DOUBLE) + 5` |
pub fn mysql_statement(stmt: &mut DfStatement) {
    /// `e` cast to BOOLEAN unless it is written as a condition.
    fn as_condition(e: &mut Box<ast::Expr>) {
        if is_condition(e) {
            return;
        }
        let inner = std::mem::replace(e.as_mut(), ast::Expr::value(ast::Value::Null));
        **e = ast::Expr::Cast {
            kind: ast::CastKind::Cast,
            expr: Box::new(inner),
            data_type: ast::DataType::Boolean,
            array: false,
            format: None,
        };
    }

    /// Whether `e` is written as a condition (its value is a boolean whatever its operands).
    fn is_condition(e: &ast::Expr) -> bool {
        use ast::BinaryOperator as B;
        match e {
            ast::Expr::Nested(inner) => is_condition(inner),
            ast::Expr::BinaryOp { op, .. } => matches!(
                op,
                B::Eq
                    | B::NotEq
                    | B::Lt
                    | B::LtEq
                    | B::Gt
                    | B::GtEq
                    | B::And
                    | B::Or
                    | B::Xor
                    | B::Spaceship
            ),
            ast::Expr::UnaryOp {
                op: ast::UnaryOperator::Not,
                ..
            }
            | ast::Expr::IsNull(_)
            | ast::Expr::IsNotNull(_)
            | ast::Expr::IsTrue(_)
            | ast::Expr::IsFalse(_)
            | ast::Expr::IsNotTrue(_)
            | ast::Expr::IsNotFalse(_)
            | ast::Expr::IsUnknown(_)
            | ast::Expr::IsNotUnknown(_)
            | ast::Expr::IsDistinctFrom(..)
            | ast::Expr::IsNotDistinctFrom(..)
            | ast::Expr::InList { .. }
            | ast::Expr::InSubquery { .. }
            | ast::Expr::Between { .. }
            | ast::Expr::Like { .. }
            | ast::Expr::ILike { .. }
            | ast::Expr::SimilarTo { .. }
            | ast::Expr::RLike { .. }
            | ast::Expr::Exists { .. } => true,
            ast::Expr::Value(v) => matches!(v.value, ast::Value::Boolean(_)),
            _ => false,
        }
    }
    use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
    use datafusion::sql::sqlparser::ast::{
        self, BinaryOperator, CaseWhen, CastKind, FunctionArg, FunctionArgExpr, FunctionArguments,
        visit_expressions_mut,
    };
    let inner: &mut ast::Statement = match stmt {
        DfStatement::Statement(s) => s,
        DfStatement::Explain(e) => return mysql_statement(&mut e.statement),
        _ => return,
    };
    /// The plain positional arguments of a call (`None` when any is named or a wildcard, or
    /// the call has clauses such as ORDER BY).
    fn plain_args(f: &ast::Function) -> Option<Vec<ast::Expr>> {
        let FunctionArguments::List(list) = &f.args else {
            return None;
        };
        if !list.clauses.is_empty()
            || list.duplicate_treatment.is_some()
            || f.filter.is_some()
            || f.over.is_some()
        {
            return None;
        }
        list.args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }
    let _ = visit_expressions_mut(inner, |e| {
        let replacement = match e {
            ast::Expr::Value(v) if matches!(&v.value, ast::Value::Number(n, _) if n.contains(['e', 'E'])) => {
                Some(ast::Expr::Cast {
                    kind: CastKind::Cast,
                    expr: Box::new(e.clone()),
                    data_type: ast::DataType::Double(ast::ExactNumberInfo::None),
                    array: false,
                    format: None,
                })
            }
            // `NOT x`, `x AND y`, `x OR y` of values that are not conditions (`NOT 5`, `1 AND
            // 0`): DataFusion's planner refuses numbers there before any rule runs, so each is
            // made a condition here, true when not zero (a boolean column or parameter is
            // unchanged by the cast, which the optimizer then drops).
            ast::Expr::UnaryOp {
                op: ast::UnaryOperator::Not,
                expr,
            } => {
                as_condition(expr);
                None
            }
            ast::Expr::BinaryOp {
                left,
                op: BinaryOperator::And | BinaryOperator::Or,
                right,
            } => {
                as_condition(left);
                as_condition(right);
                None
            }
            // A string literal in arithmetic (`'10' + 5`): a DOUBLE, as MySQL reads it
            // (DataFusion's planner refuses the mix before any rule runs).
            ast::Expr::BinaryOp {
                left,
                op:
                    BinaryOperator::Plus
                    | BinaryOperator::Minus
                    | BinaryOperator::Multiply
                    | BinaryOperator::Divide
                    | BinaryOperator::Modulo,
                right,
            } => {
                for side in [left, right] {
                    if matches!(side.as_ref(), ast::Expr::Value(v) if matches!(
                        v.value,
                        ast::Value::SingleQuotedString(_) | ast::Value::DoubleQuotedString(_)
                    )) {
                        let text =
                            std::mem::replace(side.as_mut(), ast::Expr::value(ast::Value::Null));
                        **side = ast::Expr::Cast {
                            kind: CastKind::Cast,
                            expr: Box::new(text),
                            data_type: ast::DataType::Double(ast::ExactNumberInfo::None),
                            array: false,
                            format: None,
                        };
                    }
                }
                None
            }
            ast::Expr::Cast { data_type, .. }
                if matches!(
                    data_type,
                    ast::DataType::Signed
                        | ast::DataType::SignedInteger
                        | ast::DataType::Unsigned
                        | ast::DataType::UnsignedInteger
                ) =>
            {
                let signed = matches!(
                    data_type,
                    ast::DataType::Signed | ast::DataType::SignedInteger
                );
                *data_type = if signed {
                    ast::DataType::BigInt(None)
                } else {
                    ast::DataType::BigIntUnsigned(None)
                };
                None
            }
            ast::Expr::Function(f) => {
                let name = f.name.to_string().to_ascii_lowercase();
                match (name.as_str(), plain_args(f).as_deref()) {
                    ("if", Some([c, a, b])) => Some(ast::Expr::Case {
                        case_token: AttachedToken::empty(),
                        end_token: AttachedToken::empty(),
                        operand: None,
                        conditions: vec![CaseWhen {
                            condition: c.clone(),
                            result: a.clone(),
                        }],
                        else_result: Some(Box::new(b.clone())),
                    }),
                    ("mod", Some([a, b])) => Some(ast::Expr::BinaryOp {
                        left: Box::new(ast::Expr::Nested(Box::new(a.clone()))),
                        op: BinaryOperator::Modulo,
                        right: Box::new(ast::Expr::Nested(Box::new(b.clone()))),
                    }),
                    ("length", Some([_])) => {
                        f.name = ast::ObjectName::from(vec![ast::Ident::new("octet_length")]);
                        None
                    }
                    ("locate", Some([sub, s])) => {
                        let mut call = f.clone();
                        call.name = ast::ObjectName::from(vec![ast::Ident::new("strpos")]);
                        if let FunctionArguments::List(list) = &mut call.args {
                            list.args = vec![
                                FunctionArg::Unnamed(FunctionArgExpr::Expr(s.clone())),
                                FunctionArg::Unnamed(FunctionArgExpr::Expr(sub.clone())),
                            ];
                        }
                        Some(ast::Expr::Function(call))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(r) = replacement {
            *e = r;
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
