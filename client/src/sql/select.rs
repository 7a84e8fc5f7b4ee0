//! `SELECT` over one table, planned into a DAG and a client-side finish.
//!
//! The DAG scans every column of the table (scan column `i` = the table's column `i`), then:
//!
//! * `WHERE` → a Selection (top-level `AND`s become separate conditions);
//! * with aggregates or `GROUP BY` → an Aggregation (SimpleAgg without `GROUP BY`, HashAgg
//!   with it) whose output is the partial aggregates followed by the group-by columns; the
//!   client's final merge combines regions, then [`super::finish`] computes AVG, sorts by
//!   `ORDER BY` and cuts at `LIMIT`;
//! * without aggregates, `ORDER BY` + `LIMIT` → a TopN; `LIMIT` alone → a Limit; `ORDER BY`
//!   alone sorts in the client.
//!
//! Results are described as *slots*: the scan columns for a plain query, or the aggregates
//! then the group-by columns for an aggregate query. `ORDER BY` and the output columns refer
//! to slots.

use sqlparser::ast::{
    self, BinaryOperator, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, InTarget,
    LimitClause, OrderByKind, OrderBySort, SelectItem, SetExpr, TableFactor, UnaryOperator, Value,
};
use wire::coprocessor::{
    self as proto, ByItem, DagRequest, ExecType, Executor, Expr, ExprType, KeyRange, ScalarFuncSig,
};

use wire::datum::Datum;

use super::catalog::{SqlType, TableSchema};
use super::handle_ranges::handle_ranges;
use super::{Result, SqlError, simple_name, unsupported};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggKind {
    Count,
    Sum,
    Min,
    Max,
    Avg,
}

/// One aggregate function: its kind and its argument (a scan column, `None` for `COUNT(*)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AggFunc {
    pub kind: AggKind,
    pub arg: Option<usize>,
}

/// How the DAG's rows become slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slots {
    /// A slot per scan column.
    Scan,
    /// Slots `0..aggs.len()` are the aggregates (AVG computed from its count and sum), then
    /// `groups` group-by columns.
    Aggregate { aggs: Vec<AggFunc>, groups: usize },
}

#[derive(Debug, Clone)]
pub struct SelectPlan {
    pub table: TableSchema,
    pub dag: DagRequest,
    /// Output column names (alias, column name, or the aggregate's SQL text).
    pub columns: Vec<String>,
    pub slots: Slots,
    /// (slot, descending), applied in the client after the final merge.
    pub order_by: Vec<(usize, bool)>,
    pub limit: Option<u64>,
    /// The slot of each output column.
    pub outputs: Vec<usize>,
    /// The record-key ranges to read: the table's, narrowed by `WHERE` bounds on the
    /// primary key ([`super::handle_ranges`]).
    pub ranges: Vec<KeyRange>,
}

pub(crate) fn table_name(q: &ast::Query) -> Result<String> {
    let SetExpr::Select(s) = q.body.as_ref() else {
        return Err(unsupported(format!(
            "a query that is not a plain SELECT: {}",
            q.body
        )));
    };
    match s.from.as_slice() {
        [one] => {
            if !one.joins.is_empty() {
                return Err(unsupported("JOIN"));
            }
            match &one.relation {
                TableFactor::Table {
                    name, args: None, ..
                } => simple_name(name, "table"),
                other => Err(unsupported(format!("FROM {other}"))),
            }
        }
        [] => Err(unsupported("SELECT without FROM")),
        _ => Err(unsupported("more than one table in FROM")),
    }
}

/// An item of the select list or ORDER BY, before slots are numbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Column(usize),
    Agg(usize),
}

struct Planner<'a> {
    table: &'a TableSchema,
    aggs: Vec<AggFunc>,
}

pub fn plan_select(q: &ast::Query, table: TableSchema) -> Result<SelectPlan> {
    if q.with.is_some() {
        return Err(unsupported("WITH"));
    }
    if q.fetch.is_some() || !q.locks.is_empty() || q.for_clause.is_some() {
        return Err(unsupported("FETCH / FOR UPDATE / FOR clauses"));
    }
    if q.settings.is_some() || q.format_clause.is_some() || !q.pipe_operators.is_empty() {
        return Err(unsupported("SETTINGS / FORMAT / pipe operators"));
    }
    let SetExpr::Select(s) = q.body.as_ref() else {
        return Err(unsupported(format!(
            "a query that is not a plain SELECT: {}",
            q.body
        )));
    };
    if s.distinct.is_some() {
        return Err(unsupported("DISTINCT"));
    }
    if s.top.is_some() || s.into.is_some() || s.exclude.is_some() {
        return Err(unsupported("TOP / INTO / EXCLUDE"));
    }
    if s.having.is_some() {
        return Err(unsupported("HAVING"));
    }
    if s.prewhere.is_some() || s.qualify.is_some() || !s.named_window.is_empty() {
        return Err(unsupported("PREWHERE / QUALIFY / WINDOW"));
    }
    if !s.lateral_views.is_empty() || !s.connect_by.is_empty() {
        return Err(unsupported("LATERAL VIEW / CONNECT BY"));
    }
    if !s.cluster_by.is_empty() || !s.distribute_by.is_empty() || !s.sort_by.is_empty() {
        return Err(unsupported("CLUSTER BY / DISTRIBUTE BY / SORT BY"));
    }
    if let [one] = s.from.as_slice()
        && let TableFactor::Table { alias: Some(_), .. } = &one.relation
    {
        return Err(unsupported("a table alias"));
    }
    let mut p = Planner {
        table: &table,
        aggs: Vec::new(),
    };

    // Select list.
    let mut items: Vec<(Item, String)> = Vec::new();
    for si in &s.projection {
        match si {
            SelectItem::UnnamedExpr(e) => {
                let it = p.item(e, "the select list")?;
                items.push((it, p.default_name(it, e)));
            }
            SelectItem::ExprWithAlias { expr, alias } => {
                items.push((p.item(expr, "the select list")?, alias.value.clone()));
            }
            SelectItem::Wildcard(opts) => {
                if opts.opt_exclude.is_some()
                    || opts.opt_except.is_some()
                    || opts.opt_replace.is_some()
                    || opts.opt_rename.is_some()
                    || opts.opt_ilike.is_some()
                {
                    return Err(unsupported(format!("wildcard options: {si}")));
                }
                for (i, c) in table.columns.iter().enumerate() {
                    items.push((Item::Column(i), c.name.clone()));
                }
            }
            other => return Err(unsupported(format!("select item: {other}"))),
        }
    }

    // GROUP BY.
    let mut groups: Vec<usize> = Vec::new();
    match &s.group_by {
        GroupByExpr::Expressions(exprs, modifiers) => {
            if !modifiers.is_empty() {
                return Err(unsupported("GROUP BY modifiers (ROLLUP / CUBE / ...)"));
            }
            for e in exprs {
                match p.item(e, "GROUP BY")? {
                    Item::Column(c) => {
                        if !groups.contains(&c) {
                            groups.push(c);
                        }
                    }
                    Item::Agg(_) => {
                        return Err(unsupported(format!("an aggregate in GROUP BY: {e}")));
                    }
                }
            }
        }
        GroupByExpr::All(_) => return Err(unsupported("GROUP BY ALL")),
    }

    // ORDER BY.
    let mut order: Vec<(Item, bool)> = Vec::new();
    if let Some(ob) = &q.order_by {
        if ob.interpolate.is_some() {
            return Err(unsupported("INTERPOLATE"));
        }
        let OrderByKind::Expressions(exprs) = &ob.kind else {
            return Err(unsupported("ORDER BY ALL"));
        };
        for o in exprs {
            if o.with_fill.is_some() || o.options.nulls_first.is_some() {
                return Err(unsupported(format!("ORDER BY options: {o}")));
            }
            let desc = match &o.options.sort {
                None | Some(OrderBySort::Asc) => false,
                Some(OrderBySort::Desc) => true,
                Some(OrderBySort::Using(_)) => return Err(unsupported("ORDER BY ... USING")),
            };
            order.push((p.order_item(&o.expr, s, &items)?, desc));
        }
    }

    let limit = match &q.limit_clause {
        None => None,
        Some(LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) => {
            if offset.is_some() {
                return Err(unsupported("OFFSET"));
            }
            if !limit_by.is_empty() {
                return Err(unsupported("LIMIT BY"));
            }
            match limit {
                Some(e) => Some(limit_value(e)?),
                None => None,
            }
        }
        Some(LimitClause::OffsetCommaLimit { .. }) => {
            return Err(unsupported("LIMIT offset, count"));
        }
    };

    let conditions = p.where_conditions(s.selection.as_ref())?;
    let ranges = handle_ranges(
        table.id,
        &table.columns[table.pk].name,
        s.selection.as_ref(),
    );

    let aggregate = !groups.is_empty() || !p.aggs.is_empty();
    let n_aggs = p.aggs.len();
    let slot = |it: Item| -> Result<usize> {
        match it {
            Item::Agg(a) => Ok(a),
            Item::Column(c) if !aggregate => Ok(c),
            Item::Column(c) => groups
                .iter()
                .position(|&g| g == c)
                .map(|g| n_aggs + g)
                .ok_or_else(|| SqlError::NotGrouped {
                    column: table.columns[c].name.clone(),
                }),
        }
    };
    let outputs = items
        .iter()
        .map(|(it, _)| slot(*it))
        .collect::<Result<Vec<_>>>()?;
    let order_by = order
        .iter()
        .map(|(it, d)| Ok((slot(*it)?, *d)))
        .collect::<Result<Vec<_>>>()?;

    let mut executors = scan_executors(&table, conditions);
    if aggregate {
        let tp = if groups.is_empty() {
            ExecType::SimpleAgg
        } else {
            ExecType::HashAgg
        };
        executors.push(Executor {
            tp: tp as i32,
            aggregation: Some(proto::Aggregation {
                group_by: groups.iter().map(|&g| Expr::column(g as u32)).collect(),
                agg_func: p.aggs.iter().map(agg_expr).collect(),
            }),
            ..Executor::default()
        });
    } else if let Some(n) = limit {
        if order_by.is_empty() {
            executors.push(Executor {
                tp: ExecType::Limit as i32,
                limit: Some(proto::Limit { limit: n }),
                ..Executor::default()
            });
        } else {
            executors.push(Executor {
                tp: ExecType::TopN as i32,
                top_n: Some(proto::TopN {
                    order_by: order_by
                        .iter()
                        .map(|&(c, desc)| ByItem {
                            expr: Some(Expr::column(c as u32)),
                            desc,
                        })
                        .collect(),
                    limit: n,
                }),
                ..Executor::default()
            });
        }
    }
    let slots = if aggregate {
        Slots::Aggregate {
            aggs: p.aggs.clone(),
            groups: groups.len(),
        }
    } else {
        Slots::Scan
    };
    Ok(SelectPlan {
        dag: DagRequest {
            executors,
            ..DagRequest::default()
        },
        columns: items.into_iter().map(|(_, n)| n).collect(),
        slots,
        order_by,
        limit,
        outputs,
        ranges,
        table,
    })
}

/// The conditions of a `WHERE` over `table`'s scan columns (top-level `AND`s split), as
/// [`plan_select`] plans them: UPDATE and DELETE find their rows with them, and the
/// DataFusion front pushes the filters it can express this way into each region's DAG.
pub fn where_conditions(table: &TableSchema, selection: Option<&ast::Expr>) -> Result<Vec<Expr>> {
    Planner {
        table,
        aggs: Vec::new(),
    }
    .where_conditions(selection)
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

fn limit_value(e: &ast::Expr) -> Result<u64> {
    if let ast::Expr::Value(v) = e
        && let Value::Number(n, _) = &v.value
        && let Ok(x) = n.parse::<u64>()
    {
        return Ok(x);
    }
    Err(unsupported(format!(
        "LIMIT that is not a non-negative integer: {e}"
    )))
}

fn agg_expr(a: &AggFunc) -> Expr {
    let tp = match a.kind {
        AggKind::Count => ExprType::Count,
        AggKind::Sum => ExprType::Sum,
        AggKind::Min => ExprType::Min,
        AggKind::Max => ExprType::Max,
        AggKind::Avg => ExprType::Avg,
    };
    let arg = match a.arg {
        Some(c) => Expr::column(c as u32),
        None => Expr::int(1),
    };
    Expr::agg(tp, arg)
}

/// The type class of a WHERE sub-expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Num,
    Bytes,
    Null,
}

impl Planner<'_> {
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

    fn default_name(&self, it: Item, e: &ast::Expr) -> String {
        match it {
            Item::Column(c) => self.table.columns[c].name.clone(),
            Item::Agg(_) => e.to_string(),
        }
    }

    /// A column or an aggregate (of the select list, GROUP BY or ORDER BY).
    fn item(&mut self, e: &ast::Expr, place: &str) -> Result<Item> {
        if let Some(c) = self.column(e)? {
            return Ok(Item::Column(c));
        }
        match e {
            ast::Expr::Nested(inner) => self.item(inner, place),
            ast::Expr::Function(f) => {
                let a = self.aggregate(f)?;
                let i = match self.aggs.iter().position(|x| *x == a) {
                    Some(i) => i,
                    None => {
                        self.aggs.push(a);
                        self.aggs.len() - 1
                    }
                };
                Ok(Item::Agg(i))
            }
            other => Err(unsupported(format!(
                "an expression in {place} that is not a column or an aggregate: {other}"
            ))),
        }
    }

    /// An ORDER BY item: a select-list alias, a 1-based output position, a column or an
    /// aggregate.
    fn order_item(
        &mut self,
        e: &ast::Expr,
        s: &ast::Select,
        items: &[(Item, String)],
    ) -> Result<Item> {
        if let ast::Expr::Identifier(id) = e {
            for (si, (it, _)) in s.projection.iter().zip(items) {
                if let SelectItem::ExprWithAlias { alias, .. } = si
                    && alias.value.eq_ignore_ascii_case(&id.value)
                {
                    return Ok(*it);
                }
            }
        }
        if let ast::Expr::Value(v) = e {
            if let Value::Number(n, _) = &v.value
                && let Ok(pos) = n.parse::<usize>()
                && pos >= 1
                && pos <= items.len()
            {
                return Ok(items[pos - 1].0);
            }
            return Err(unsupported(format!("ORDER BY a constant: {e}")));
        }
        self.item(e, "ORDER BY")
    }

    fn aggregate(&self, f: &ast::Function) -> Result<AggFunc> {
        let fname = match f.name.0.as_slice() {
            [ast::ObjectNamePart::Identifier(id)] => id.value.to_ascii_lowercase(),
            _ => return Err(unsupported(format!("function {}", f.name))),
        };
        let kind = match fname.as_str() {
            "count" => AggKind::Count,
            "sum" => AggKind::Sum,
            "min" => AggKind::Min,
            "max" => AggKind::Max,
            "avg" => AggKind::Avg,
            _ => return Err(unsupported(format!("function {}", f.name))),
        };
        if f.filter.is_some()
            || f.over.is_some()
            || f.null_treatment.is_some()
            || !f.within_group.is_empty()
            || !matches!(f.parameters, FunctionArguments::None)
        {
            return Err(unsupported(format!(
                "FILTER / OVER / WITHIN GROUP on an aggregate: {f}"
            )));
        }
        let FunctionArguments::List(list) = &f.args else {
            return Err(unsupported(format!("aggregate arguments: {f}")));
        };
        if list.duplicate_treatment.is_some() {
            return Err(unsupported(format!("DISTINCT / ALL in an aggregate: {f}")));
        }
        if !list.clauses.is_empty() {
            return Err(unsupported(format!("clauses inside an aggregate: {f}")));
        }
        let [FunctionArg::Unnamed(arg)] = list.args.as_slice() else {
            return Err(unsupported(format!(
                "an aggregate without exactly one argument: {f}"
            )));
        };
        let arg = match arg {
            FunctionArgExpr::Wildcard if kind == AggKind::Count => None,
            FunctionArgExpr::Expr(e) => match self.column(e)? {
                Some(c) => Some(c),
                None => {
                    return Err(unsupported(format!(
                        "an aggregate over an expression that is not a column: {f}"
                    )));
                }
            },
            _ => return Err(unsupported(format!("aggregate argument: {f}"))),
        };
        if let Some(c) = arg
            && matches!(kind, AggKind::Sum | AggKind::Avg)
            && !self.table.columns[c].ty.is_numeric()
        {
            return Err(SqlError::Type {
                reason: format!("SUM and AVG need a numeric column: {f}"),
            });
        }
        Ok(AggFunc { kind, arg })
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

impl Planner<'_> {
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

    pub(crate) fn select(sql: &str) -> Result<SelectPlan> {
        let s = schema();
        match plan(&parse(sql)?, &|n| (n == "t").then(|| s.clone()))? {
            Plan::Select(p) => Ok(p),
            other => panic!("not a select: {other:?}"),
        }
    }

    fn shape(p: &SelectPlan) -> Vec<ExecType> {
        p.dag
            .executors
            .iter()
            .map(|e| ExecType::from_i32(e.tp).unwrap())
            .collect()
    }

    #[test]
    fn plain_select_is_a_scan_of_every_column_projected_in_the_client() {
        let p = select("select s, id from t").unwrap();
        assert_eq!(shape(&p), vec![ExecType::TableScan]);
        let scan = p.dag.executors[0].tbl_scan.as_ref().unwrap();
        assert_eq!(scan.table_id, 77);
        assert_eq!(scan.columns.len(), 4);
        assert!(scan.columns[0].pk_handle);
        assert_eq!(p.outputs, vec![3, 0]);
        assert_eq!(p.columns, vec!["s", "id"]);
    }

    #[test]
    fn between_is_a_pair_of_bounds_and_narrows_the_key_ranges() {
        let p = select("select id from t where id between 10 and 19").unwrap();
        let conds = &p.dag.executors[1].selection.as_ref().unwrap().conditions;
        let sigs: Vec<i32> = conds.iter().map(|c| c.sig).collect();
        assert_eq!(sigs, [ScalarFuncSig::Ge as i32, ScalarFuncSig::Le as i32]);
        assert_eq!(p.ranges.len(), 1);
        assert_eq!(
            p.ranges[0].start,
            wire::codec::table::record_key(p.table.id, 10)
        );
        let p = select("select id from t where id not between 10 and 19").unwrap();
        let conds = &p.dag.executors[1].selection.as_ref().unwrap().conditions;
        assert_eq!(conds[0].sig, ScalarFuncSig::Not as i32);
        assert_eq!(
            p.ranges[0].start,
            wire::codec::table::record_key(p.table.id, i64::MIN),
            "NOT BETWEEN does not narrow"
        );
    }

    #[test]
    fn where_becomes_a_selection_split_at_top_level_ands() {
        let p =
            select("select * from t where g > 3 and (v <= 1.5 or s = 'x') and id <> -2").unwrap();
        assert_eq!(shape(&p), vec![ExecType::TableScan, ExecType::Selection]);
        let conds = &p.dag.executors[1].selection.as_ref().unwrap().conditions;
        assert_eq!(conds.len(), 3);
        assert_eq!(conds[0].sig, ScalarFuncSig::Gt as i32);
        assert_eq!(conds[1].sig, ScalarFuncSig::Or as i32);
        assert_eq!(conds[2].children[1], Expr::int(-2));
        assert_eq!(p.columns, vec!["id", "g", "v", "s"]);
    }

    #[test]
    fn in_lists_and_like_are_pushed_down_with_not() {
        let p = select("select id from t where g not in (1, -2, null) and s like 'k%'").unwrap();
        let conds = &p.dag.executors[1].selection.as_ref().unwrap().conditions;
        assert_eq!(conds[0].sig, ScalarFuncSig::Not as i32);
        let inner = &conds[0].children[0];
        assert_eq!(inner.sig, ScalarFuncSig::In as i32);
        assert_eq!(inner.children.len(), 4);
        assert_eq!(conds[1].sig, ScalarFuncSig::Like as i32);
        assert_eq!(conds[1].children[1], Expr::bytes(b"k%".to_vec()));
        assert!(matches!(
            select("select id from t where g in (1, 'x')").unwrap_err(),
            SqlError::Type { .. }
        ));
    }

    #[test]
    fn order_by_with_limit_is_a_top_n_and_limit_alone_a_limit() {
        let p = select("select id from t order by v desc, id limit 5").unwrap();
        assert_eq!(shape(&p), vec![ExecType::TableScan, ExecType::TopN]);
        let top = p.dag.executors[1].top_n.as_ref().unwrap();
        assert_eq!(top.limit, 5);
        assert_eq!(top.order_by[0].expr, Some(Expr::column(2)));
        assert!(top.order_by[0].desc && !top.order_by[1].desc);
        assert_eq!(p.order_by, vec![(2, true), (0, false)]);

        let p = select("select id from t limit 7").unwrap();
        assert_eq!(shape(&p), vec![ExecType::TableScan, ExecType::Limit]);
        let p = select("select id from t order by s").unwrap();
        assert_eq!(shape(&p), vec![ExecType::TableScan]);
        assert_eq!(p.order_by, vec![(3, false)]);
    }

    #[test]
    fn aggregates_with_group_by_are_a_hash_agg_with_slots_for_aggs_then_groups() {
        let p = select(
            "select g, count(*), sum(v) as total, avg(v) from t where id > 0 \
             group by g order by total desc, max(v) limit 3",
        )
        .unwrap();
        assert_eq!(
            shape(&p),
            vec![ExecType::TableScan, ExecType::Selection, ExecType::HashAgg]
        );
        let agg = p.dag.executors[2].aggregation.as_ref().unwrap();
        assert_eq!(agg.group_by, vec![Expr::column(1)]);
        assert_eq!(
            agg.agg_func.len(),
            4,
            "count, sum, avg, and max from ORDER BY"
        );
        assert_eq!(agg.agg_func[3], Expr::agg(ExprType::Max, Expr::column(2)));
        assert_eq!(p.outputs, vec![4, 0, 1, 2]);
        assert_eq!(p.order_by, vec![(1, true), (3, false)]);
        assert_eq!(p.limit, Some(3));
        assert_eq!(
            p.columns,
            vec!["g", "count(*)", "total", "avg(v)"],
            "as written"
        );
    }

    #[test]
    fn aggregates_without_group_by_are_a_simple_agg() {
        let p = select("select count(s), min(s), max(id) from t").unwrap();
        assert_eq!(shape(&p), vec![ExecType::TableScan, ExecType::SimpleAgg]);
        assert_eq!(
            p.slots,
            Slots::Aggregate {
                aggs: vec![
                    AggFunc {
                        kind: AggKind::Count,
                        arg: Some(3)
                    },
                    AggFunc {
                        kind: AggKind::Min,
                        arg: Some(3)
                    },
                    AggFunc {
                        kind: AggKind::Max,
                        arg: Some(0)
                    },
                ],
                groups: 0
            }
        );
    }

    #[test]
    fn order_by_position_and_alias_name_the_output() {
        let p = select("select v as x, id from t order by 2 desc, x").unwrap();
        assert_eq!(p.order_by, vec![(0, true), (2, false)]);
    }

    #[test]
    fn unsupported_parts_are_named() {
        let cases = [
            ("select distinct g from t", "DISTINCT"),
            ("select g from t group by g having count(*) > 1", "HAVING"),
            ("select * from t join t as u on t.id = u.id", "JOIN"),
            ("select * from t limit 3 offset 2", "OFFSET"),
            ("select g + 1 from t", "g + 1"),
            ("select upper(s) from t", "function upper"),
            (
                "select count(distinct g) from t",
                "DISTINCT / ALL in an aggregate",
            ),
            ("select * from t where g in (select g from t)", "in WHERE"),
            ("select * from t where g in (1, id)", "not a literal"),
            ("select * from t where s like g", "LIKE other than"),
            ("select * from t where s like 'a' escape '!'", "in WHERE"),
            ("select * from t where g + 1 > 2", "operator + in WHERE"),
            ("select 1", "SELECT without FROM"),
            (
                "select * from t union select * from t",
                "not a plain SELECT",
            ),
            ("with x as (select 1) select * from t", "WITH"),
            ("drop table t", "statement kind: DROP TABLE"),
            (
                "select * from t; select * from t",
                "more than one statement",
            ),
            ("select sum(g * 2) from t", "not a column"),
        ];
        for (sql, part) in cases {
            let e = select(sql).unwrap_err();
            assert!(
                matches!(e, SqlError::Unsupported { .. }),
                "{sql}: not an unsupported error: {e}"
            );
            assert!(e.to_string().contains(part), "{sql}: {e}");
        }
    }

    #[test]
    fn semantic_errors_are_typed() {
        assert!(matches!(
            select("select g, count(*) from t").unwrap_err(),
            SqlError::NotGrouped { .. }
        ));
        assert!(matches!(
            select("select nope from t").unwrap_err(),
            SqlError::UnknownColumn { .. }
        ));
        assert!(matches!(
            select("select * from t where s > 3").unwrap_err(),
            SqlError::Type { .. }
        ));
        assert!(matches!(
            select("select sum(s) from t").unwrap_err(),
            SqlError::Type { .. }
        ));
        assert!(matches!(
            select("select * from t where g").unwrap_err(),
            SqlError::Type { .. }
        ));
        assert!(matches!(
            select("select * from u").unwrap_err(),
            SqlError::UnknownTable { .. }
        ));
        assert!(matches!(
            select("selec * from t").unwrap_err(),
            SqlError::Parse { .. }
        ));
    }
}
