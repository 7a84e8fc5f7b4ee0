//! What a statement needs of its user ([`required`]) and the check against a user's grants
//! ([`check`]), as MySQL decides it:
//!
//! * a query needs `SELECT` on every table it reads (CTE names are not tables);
//! * `INSERT` needs `INSERT` on its table (and `UPDATE` with `ON DUPLICATE KEY UPDATE`),
//!   `UPDATE` and `DELETE` their own privilege, and `SELECT` on the table when a `WHERE`
//!   reads it; every other table they read needs `SELECT`;
//! * `CREATE TABLE` needs `CREATE`, `DROP TABLE` and `TRUNCATE` need `DROP`, `CREATE` /
//!   `DROP INDEX` need `INDEX`, `DESCRIBE` / `SHOW CREATE TABLE` need `SELECT`; `EXPLAIN`
//!   needs what its statement needs;
//! * `SET GLOBAL` needs `SUPER` and the account statements `CREATE USER` (global);
//! * `SHOW TABLES`, `USE`, transactions, session variables need nothing.
//!
//! The check runs before the statement does anything, so a refused statement changes nothing
//! (and, inside a transaction, leaves it open as any failed statement does).

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use client::sql::users::{Account, Privilege};
use sqlparser::ast::{self, Statement, Visit, Visitor};

use crate::DATABASE;
use crate::error::FrontError;

/// One privilege a statement needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Need {
    /// On one table (lowercase name), granted on it, the database or globally.
    Table(Privilege, String),
    /// Granted globally.
    Global(Privilege),
}

/// What `stmt` needs, in a stable order (the first one missing is the one reported).
pub fn required(stmt: &Statement) -> Vec<Need> {
    let mut needs = BTreeSet::new();
    match stmt {
        Statement::Query(_) => select_all(stmt, None, &mut needs),
        Statement::Explain { statement, .. } => return required(statement),
        Statement::Insert(ins) => {
            if let Ok(t) = client::sql::insert::table_name(ins) {
                needs.insert(Need::Table(Privilege::Insert, t.clone()));
                if ins.on.is_some() {
                    needs.insert(Need::Table(Privilege::Update, t.clone()));
                }
                select_all(stmt, Some(&t), &mut needs);
            }
        }
        Statement::Update(u) => {
            if let Ok(t) = client::sql::modify::update_table(u) {
                needs.insert(Need::Table(Privilege::Update, t.clone()));
                if u.selection.is_some() {
                    needs.insert(Need::Table(Privilege::Select, t.clone()));
                }
                select_all(stmt, Some(&t), &mut needs);
            }
        }
        Statement::Delete(d) => {
            if let Ok(t) = client::sql::modify::delete_table(d) {
                needs.insert(Need::Table(Privilege::Delete, t.clone()));
                if d.selection.is_some() {
                    needs.insert(Need::Table(Privilege::Select, t.clone()));
                }
                select_all(stmt, Some(&t), &mut needs);
            }
        }
        Statement::CreateTable(ct) => {
            needs.insert(Need::Table(Privilege::Create, table(&ct.name)));
        }
        Statement::Drop {
            object_type: ast::ObjectType::Table,
            names,
            ..
        } => {
            for n in names {
                needs.insert(Need::Table(Privilege::Drop, table(n)));
            }
        }
        Statement::Drop {
            object_type: ast::ObjectType::Index,
            table: Some(t),
            ..
        } => {
            needs.insert(Need::Table(Privilege::Index, table(t)));
        }
        Statement::CreateIndex(ci) => {
            needs.insert(Need::Table(Privilege::Index, table(&ci.table_name)));
        }
        Statement::Truncate(t) => {
            for n in &t.table_names {
                needs.insert(Need::Table(Privilege::Drop, table(&n.name)));
            }
        }
        Statement::ExplainTable { table_name, .. } => {
            needs.insert(Need::Table(Privilege::Select, table(table_name)));
        }
        Statement::ShowColumns { show_options, .. } => {
            if let Some(name) = show_options
                .show_in
                .as_ref()
                .and_then(|i| i.parent_name.as_ref())
            {
                needs.insert(Need::Table(Privilege::Select, table(name)));
            }
        }
        Statement::ShowCreate { obj_name, .. } => {
            needs.insert(Need::Table(Privilege::Select, table(obj_name)));
        }
        Statement::AlterTable(at) => {
            needs.insert(Need::Table(Privilege::Alter, table(&at.name)));
        }
        s => {
            if let Some(Ok(client::sql::Plan::Set {
                scope: client::variables::Scope::Global,
                ..
            })) = client::sql::set_show::plan(s)
            {
                needs.insert(Need::Global(Privilege::Super));
            }
        }
    }
    needs.into_iter().collect()
}

/// Refuses `needs` that `account` (user `user`; `None`: the user was dropped) does not hold,
/// naming the first one missing.
pub fn check(user: &str, account: Option<&Account>, needs: &[Need]) -> Result<(), FrontError> {
    for need in needs {
        let held = account.is_some_and(|a| match need {
            Need::Table(p, t) => a.allows(*p, Some(t)),
            Need::Global(p) => a.allows_globally(*p),
        });
        if !held {
            return Err(match need {
                Need::Table(p, t) => FrontError::TableAccessDenied {
                    command: p.name(),
                    user: user.to_string(),
                    table: t.clone(),
                },
                Need::Global(p) => FrontError::SpecificAccessDenied {
                    privilege: p.name(),
                },
            });
        }
    }
    Ok(())
}

/// The lowercase table an object name names (`t`, `test.t`; another database's name is kept
/// whole, so its check fails on a name no grant holds, before the statement says the
/// database is unknown).
fn table(name: &ast::ObjectName) -> String {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(id) => id.value.to_ascii_lowercase(),
            other => other.to_string().to_ascii_lowercase(),
        })
        .collect();
    match parts.as_slice() {
        [db, t] if db.eq_ignore_ascii_case(DATABASE) => t.clone(),
        _ => parts.join("."),
    }
}

/// Adds `SELECT` on every table `stmt` reads, except `target` (the written table, whose own
/// needs the caller states) and the names of common table expressions.
fn select_all(stmt: &Statement, target: Option<&str>, needs: &mut BTreeSet<Need>) {
    let mut v = Relations::default();
    let _ = stmt.visit(&mut v);
    for name in v.tables {
        if Some(name.as_str()) != target && !v.ctes.contains(&name) {
            needs.insert(Need::Table(Privilege::Select, name));
        }
    }
}

/// Every relation a statement names, and every CTE name it defines.
#[derive(Default)]
struct Relations {
    tables: BTreeSet<String>,
    ctes: BTreeSet<String>,
}

impl Visitor for Relations {
    type Break = ();

    fn pre_visit_relation(&mut self, relation: &ast::ObjectName) -> ControlFlow<()> {
        self.tables.insert(table(relation));
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &ast::Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.insert(cte.alias.name.value.to_ascii_lowercase());
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::sql::users::{GrantLevel, Privileges};

    fn needs(sql: &str) -> Vec<Need> {
        required(&client::sql::parse(sql).unwrap())
    }

    fn t(p: Privilege, name: &str) -> Need {
        Need::Table(p, name.into())
    }

    #[test]
    fn statements_need_what_mysql_asks_of_them() {
        use Privilege::*;
        let cases: Vec<(&str, Vec<Need>)> = vec![
            ("SELECT 1", vec![]),
            (
                "SELECT * FROM a JOIN test.B ON a.x = b.x",
                vec![t(Select, "a"), t(Select, "b")],
            ),
            (
                "WITH c AS (SELECT * FROM a) SELECT * FROM c WHERE x IN (SELECT y FROM d)",
                vec![t(Select, "a"), t(Select, "d")],
            ),
            ("INSERT INTO t VALUES (1)", vec![t(Insert, "t")]),
            (
                "INSERT INTO t SELECT * FROM s",
                vec![t(Select, "s"), t(Insert, "t")],
            ),
            (
                "INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE v = 2",
                vec![t(Insert, "t"), t(Update, "t")],
            ),
            ("UPDATE t SET v = 1", vec![t(Update, "t")]),
            (
                "UPDATE t SET v = 1 WHERE id = 2",
                vec![t(Select, "t"), t(Update, "t")],
            ),
            (
                "DELETE FROM t WHERE id IN (SELECT id FROM s)",
                vec![t(Select, "s"), t(Select, "t"), t(Delete, "t")],
            ),
            ("CREATE TABLE n (id INT PRIMARY KEY)", vec![t(Create, "n")]),
            ("DROP TABLE a, b", vec![t(Drop, "a"), t(Drop, "b")]),
            ("TRUNCATE TABLE a", vec![t(Drop, "a")]),
            ("CREATE INDEX i ON t (v)", vec![t(Index, "t")]),
            ("DROP INDEX i ON t", vec![t(Index, "t")]),
            ("DESCRIBE t", vec![t(Select, "t")]),
            ("SHOW CREATE TABLE t", vec![t(Select, "t")]),
            ("EXPLAIN SELECT * FROM t", vec![t(Select, "t")]),
            (
                "SET GLOBAL stratus_cop_cache = OFF",
                vec![Need::Global(Super)],
            ),
            ("SET stratus_cop_cache = OFF", vec![]),
            ("SHOW TABLES", vec![]),
            ("BEGIN", vec![]),
        ];
        for (sql, want) in cases {
            assert_eq!(needs(sql), want, "{sql}");
        }
    }

    #[test]
    fn a_missing_privilege_is_refused_naming_it_and_the_table() {
        let mut a = Account::new("alice", None);
        a.grant(
            GrantLevel::Table("t".into()),
            Privileges::NONE.with(Privilege::Select),
        );
        let n = needs("SELECT * FROM t");
        assert!(check("alice", Some(&a), &n).is_ok());
        let e = check("alice", Some(&a), &needs("INSERT INTO t VALUES (1)")).unwrap_err();
        assert_eq!(e.mysql_code(), crate::error::code::TABLE_ACCESS_DENIED);
        assert_eq!(
            e.to_string(),
            "INSERT command denied to user 'alice'@'%' for table 't'"
        );
        let e = check("alice", None, &n).unwrap_err();
        assert_eq!(e.mysql_code(), crate::error::code::TABLE_ACCESS_DENIED);
        let e = check(
            "alice",
            Some(&a),
            &needs("SET GLOBAL stratus_cop_cache = OFF"),
        )
        .unwrap_err();
        assert_eq!(e.mysql_code(), crate::error::code::SPECIFIC_ACCESS_DENIED);
    }
}
