//! Session statements on the system variables ([`crate::variables`]) and the warning list:
//!
//! * `SET [GLOBAL | SESSION | LOCAL] name = value`, `SET @@name = value`,
//!   `SET @@global.name = value`, `SET @@session.name = value` (a value is a word, a string or
//!   a number: `ON`, `'all_nodes'`, `256`);
//! * `SHOW [GLOBAL | SESSION] VARIABLES [LIKE 'pattern']`: columns `Variable_name`, `Value`,
//!   sorted by name; the pattern matches as SQL LIKE does (`%` any run, `_` one character,
//!   `\` escapes), ignoring case as MySQL does for variable names;
//! * `SHOW WARNINGS`: columns `Level`, `Code`, `Message`, the previous statement's warnings;
//! * `SELECT @@name, @@global.name, ...` (nothing else in the query).
//!
//! Planning is pure; [`super::Engine`] runs them on its session.

use sqlparser::ast::{self, ContextModifier, SelectItem, SetExpr, ShowStatementFilter, Statement};

use super::{Plan, Result, unsupported};
use crate::variables::Scope;

/// Plans a SET, SHOW or `SELECT @@` statement; `None` for any other statement.
/// The fixed values of the MySQL system variables that clients and drivers read when they
/// connect (`SELECT @@version_comment`, `@@max_allowed_packet`, ...): read-only here, and
/// never stored. `None` for any other name.
pub fn mysql_compat_value(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "version_comment" => "Stratus",
        "version" => "8.0.11-Stratus",
        "max_allowed_packet" => "67108864",
        "sql_mode" => "",
        "autocommit" => "1",
        "character_set_client"
        | "character_set_connection"
        | "character_set_results"
        | "character_set_server"
        | "character_set_database" => "utf8mb4",
        "collation_connection" | "collation_server" | "collation_database" => "utf8mb4_bin",
        "transaction_isolation" | "tx_isolation" => "REPEATABLE-READ",
        "time_zone" | "system_time_zone" => "UTC",
        "lower_case_table_names" => "1",
        "wait_timeout" | "interactive_timeout" => "28800",
        "net_write_timeout" => "60",
        "auto_increment_increment" => "1",
        "license" => "Apache-2.0",
        _ => return None,
    })
}

/// The plan of a `SET`, `SHOW VARIABLES`, `SHOW WARNINGS` or `SELECT @@var` statement;
/// `None` for any other statement.
pub fn plan(stmt: &Statement) -> Option<Result<Plan>> {
    match stmt {
        Statement::Set(set) => Some(plan_set(set)),
        Statement::ShowVariables {
            filter,
            global,
            session,
        } => Some(plan_show_variables(filter.as_ref(), *global, *session)),
        Statement::ShowVariable { variable } => Some(match variable.as_slice() {
            [w] if w.value.eq_ignore_ascii_case("warnings") => Ok(Plan::ShowWarnings),
            _ => Err(unsupported(format!("{stmt}"))),
        }),
        Statement::Query(q) => select_variables(q),
        _ => None,
    }
}

fn plan_set(set: &ast::Set) -> Result<Plan> {
    let ast::Set::SingleAssignment {
        scope,
        hivevar: false,
        variable,
        values,
    } = set
    else {
        return Err(unsupported(format!("this form of SET: {set}")));
    };
    let keyword = match scope {
        None => None,
        Some(ContextModifier::Global) => Some(Scope::Global),
        Some(ContextModifier::Session | ContextModifier::Local) => Some(Scope::Session),
    };
    let parts: Vec<&str> = variable
        .0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(id) => Ok(id.value.as_str()),
            other => Err(unsupported(format!("a variable name part in SET: {other}"))),
        })
        .collect::<Result<_>>()?;
    let (scope, name) = system_variable(&parts, keyword).ok_or_else(|| {
        unsupported(format!(
            "SET of something other than a system variable: {variable}"
        ))
    })??;
    let [value] = values.as_slice() else {
        return Err(unsupported(format!("SET with more than one value: {set}")));
    };
    Ok(Plan::Set {
        scope,
        name,
        value: set_value(value)?,
    })
}

/// `(scope, lowercase name)` of a system variable reference: `name` (with a SET scope
/// keyword), `@@name`, `@@global.name`, `@@session.name`, `@@local.name`; `None` when the
/// parts name no system variable (a user variable `@x`, a qualified name).
fn system_variable(parts: &[&str], keyword: Option<Scope>) -> Option<Result<(Scope, String)>> {
    let (at_scope, name) = match parts {
        [one] => match one.strip_prefix("@@") {
            Some(name) => (None, name),
            None if one.starts_with('@') => return None,
            None if keyword.is_some() || !one.is_empty() => (None, *one),
            None => return None,
        },
        [scope, name] => {
            let scope = match scope.to_ascii_lowercase().as_str() {
                "@@global" => Scope::Global,
                "@@session" | "@@local" => Scope::Session,
                _ => return None,
            };
            (Some(scope), *name)
        }
        _ => return None,
    };
    if name.is_empty() {
        return None;
    }
    let scope = match (keyword, at_scope) {
        (Some(k), Some(a)) if k != a => {
            return Some(Err(unsupported(format!(
                "a SET scope keyword that contradicts @@{}",
                parts.join(".")
            ))));
        }
        (Some(s), _) | (None, Some(s)) => s,
        (None, None) => Scope::Session,
    };
    Some(Ok((scope, name.to_ascii_lowercase())))
}

/// The text of a SET value: a word, a string, or a (negative) number.
fn set_value(e: &ast::Expr) -> Result<String> {
    match e {
        ast::Expr::Identifier(id) => Ok(id.value.clone()),
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => Ok(s.clone()),
            ast::Value::Number(n, _) => Ok(n.clone()),
            ast::Value::Boolean(b) => Ok(if *b { "ON" } else { "OFF" }.into()),
            other => Err(unsupported(format!("a SET value: {other}"))),
        },
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => match expr.as_ref() {
            ast::Expr::Value(ast::ValueWithSpan {
                value: ast::Value::Number(n, _),
                ..
            }) => Ok(format!("-{n}")),
            _ => Err(unsupported(format!(
                "a SET value that is an expression: {e}"
            ))),
        },
        other => Err(unsupported(format!(
            "a SET value that is an expression: {other}"
        ))),
    }
}

fn plan_show_variables(
    filter: Option<&ShowStatementFilter>,
    global: bool,
    session: bool,
) -> Result<Plan> {
    let like = match filter {
        None => None,
        Some(ShowStatementFilter::Like(p)) => Some(p.clone()),
        Some(other) => return Err(unsupported(format!("SHOW VARIABLES filter: {other}"))),
    };
    let scope = if global && !session {
        Scope::Global
    } else {
        Scope::Session
    };
    Ok(Plan::ShowVariables { scope, like })
}

/// `SELECT @@a, @@global.b`: a query without FROM whose select list is only system
/// variables. `None` when the query's first item is no system variable (an ordinary SELECT).
fn select_variables(q: &ast::Query) -> Option<Result<Plan>> {
    let SetExpr::Select(s) = q.body.as_ref() else {
        return None;
    };
    if !s.from.is_empty() {
        return None;
    }
    let first_is_variable = s.projection.first().is_some_and(|item| {
        let e = match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => return false,
        };
        matches!(e, ast::Expr::Identifier(id) if id.value.starts_with("@@"))
            || matches!(e, ast::Expr::CompoundIdentifier(p) if p.first().is_some_and(|i| i.value.starts_with("@@")))
    });
    if !first_is_variable {
        return None;
    }
    Some(plan_select_variables(q, s))
}

fn plan_select_variables(q: &ast::Query, s: &ast::Select) -> Result<Plan> {
    // A LIMIT is accepted (the mysql client sends `SELECT @@version_comment LIMIT 1`): the
    // answer is one row.
    if q.with.is_some()
        || q.order_by.is_some()
        || s.selection.is_some()
        || s.distinct.is_some()
        || s.having.is_some()
        || !matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
    {
        return Err(unsupported("clauses in a SELECT of system variables"));
    }
    let mut items = Vec::new();
    for item in &s.projection {
        let (e, label) = match item {
            SelectItem::UnnamedExpr(e) => (e, e.to_string()),
            SelectItem::ExprWithAlias { expr, alias } => (expr, alias.value.clone()),
            other => return Err(unsupported(format!("select item: {other}"))),
        };
        let parts: Vec<&str> = match e {
            ast::Expr::Identifier(id) if id.value.starts_with("@@") => vec![id.value.as_str()],
            ast::Expr::CompoundIdentifier(p)
                if p.first().is_some_and(|i| i.value.starts_with("@@")) =>
            {
                p.iter().map(|i| i.value.as_str()).collect()
            }
            other => {
                return Err(unsupported(format!(
                    "a SELECT mixing system variables with other items: {other}"
                )));
            }
        };
        let (scope, name) = system_variable(&parts, None)
            .ok_or_else(|| unsupported(format!("a system variable reference: {e}")))??;
        items.push((scope, name, label));
    }
    Ok(Plan::SelectVariables(items))
}

/// SQL LIKE over characters, ignoring ASCII case: `%` any run, `_` one character, `\`
/// escapes the next character.
pub fn like_match(pattern: &str, text: &str) -> bool {
    #[derive(Clone, Copy)]
    enum Tok {
        Any,
        One,
        Lit(char),
    }
    let mut toks = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        toks.push(match c {
            '%' => Tok::Any,
            '_' => Tok::One,
            '\\' => Tok::Lit(chars.next().unwrap_or('\\')),
            c => Tok::Lit(c),
        });
    }
    let text: Vec<char> = text.chars().collect();
    // matched[j]: the tokens so far match text[..j].
    let mut matched = vec![false; text.len() + 1];
    matched[0] = true;
    for t in toks {
        let mut next = vec![false; text.len() + 1];
        match t {
            Tok::Any => {
                let mut any = false;
                for j in 0..=text.len() {
                    any |= matched[j];
                    next[j] = any;
                }
            }
            Tok::One => {
                next[1..].copy_from_slice(&matched[..text.len()]);
            }
            Tok::Lit(c) => {
                for j in 1..=text.len() {
                    next[j] = matched[j - 1] && text[j - 1].eq_ignore_ascii_case(&c);
                }
            }
        }
        matched = next;
    }
    matched[text.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::parse;

    fn planned(sql: &str) -> Result<Plan> {
        plan(&parse(sql)?).expect("a session statement")
    }

    fn set(sql: &str) -> (Scope, String, String) {
        match planned(sql).unwrap() {
            Plan::Set { scope, name, value } => (scope, name, value),
            other => panic!("{sql}: {other:?}"),
        }
    }

    #[test]
    fn every_set_form_names_its_scope_variable_and_value() {
        let s = |scope, name: &str, value: &str| (scope, name.to_string(), value.to_string());
        assert_eq!(
            set("SET GLOBAL stratus_cop_cache = OFF"),
            s(Scope::Global, "stratus_cop_cache", "OFF")
        );
        assert_eq!(
            set("set session Stratus_Paging_Max_Size = 512"),
            s(Scope::Session, "stratus_paging_max_size", "512")
        );
        assert_eq!(
            set("set x = 'all_nodes'"),
            s(Scope::Session, "x", "all_nodes")
        );
        assert_eq!(set("set @@x = on"), s(Scope::Session, "x", "on"));
        assert_eq!(set("set @@global.x = 1"), s(Scope::Global, "x", "1"));
        assert_eq!(set("set @@session.x = -1"), s(Scope::Session, "x", "-1"));
        assert_eq!(set("set local x = true"), s(Scope::Session, "x", "ON"));
    }

    #[test]
    fn set_forms_that_are_not_one_system_variable_are_unsupported() {
        for (sql, part) in [
            ("set @x = 1", "other than a system variable"),
            ("set x = 1 + 1", "an expression"),
            ("set global @@session.x = 1", "contradicts"),
            ("set names utf8", "this form of SET"),
        ] {
            let e = planned(sql).unwrap_err();
            assert!(e.to_string().contains(part), "{sql}: {e}");
        }
    }

    #[test]
    fn show_variables_and_warnings_plan_with_scope_and_pattern() {
        assert!(matches!(
            planned("show global variables like 'stratus%'").unwrap(),
            Plan::ShowVariables { scope: Scope::Global, like: Some(p) } if p == "stratus%"
        ));
        assert!(matches!(
            planned("SHOW VARIABLES").unwrap(),
            Plan::ShowVariables {
                scope: Scope::Session,
                like: None
            }
        ));
        assert!(matches!(
            planned("show warnings").unwrap(),
            Plan::ShowWarnings
        ));
        let e = planned("show variables where value = 1").unwrap_err();
        assert!(e.to_string().contains("SHOW VARIABLES filter"), "{e}");
    }

    #[test]
    fn select_of_system_variables_keeps_labels_and_scopes() {
        let Plan::SelectVariables(items) =
            planned("select @@stratus_cop_cache, @@global.Stratus_Remote_Coprocessor as r")
                .unwrap()
        else {
            panic!()
        };
        assert_eq!(
            items,
            vec![
                (
                    Scope::Session,
                    "stratus_cop_cache".into(),
                    "@@stratus_cop_cache".into()
                ),
                (
                    Scope::Global,
                    "stratus_remote_coprocessor".into(),
                    "r".into()
                ),
            ]
        );
        assert!(plan(&parse("select * from t").unwrap()).is_none());
        let e = planned("select @@x, g").unwrap_err();
        assert!(e.to_string().contains("mixing system variables"), "{e}");
    }

    #[test]
    fn like_matches_percent_underscore_and_escapes_ignoring_case() {
        assert!(like_match("stratus%", "stratus_cop_cache"));
        assert!(like_match("STRATUS_%", "stratus_cop_cache"));
        assert!(like_match("%cache", "stratus_cop_cache"));
        assert!(like_match("%", ""));
        assert!(like_match("a_c", "abc"));
        assert!(!like_match("a_c", "ac"));
        assert!(!like_match("stratus", "stratus_cop_cache"));
        assert!(like_match("stratus\\_cop%", "stratus_cop_cache"));
        assert!(!like_match("stratus\\_cop%", "stratusxcop_cache"));
        assert!(like_match("%o%o%", "tidb_tiflash_node_selection_policy"));
        assert!(!like_match("%z%", "tidb_tiflash_node_selection_policy"));
    }
}
