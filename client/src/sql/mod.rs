//! The client's statement engine: statements parsed with `sqlparser` (MySQL dialect), planned
//! without I/O ([`plan`]), and executed against the cluster by an [`Engine`], which holds one
//! entry session ([`Session`]: its system variables, loaded from the GLOBAL values on the
//! first statement) and the previous statement's warnings. Queries are not planned here: the
//! SQL front (`sqlfront`) plans and runs them with DataFusion, and serves the statements below
//! through this engine, with the pieces it shares ([`conditions`] for the filters it pushes
//! into each region's DAG, [`explain`] for `EXPLAIN ANALYZE`, [`transaction`], [`index`],
//! [`catalog`]).
//!
//! Supported:
//!
//! * `CREATE TABLE t (c TYPE [PRIMARY KEY], ... [, PRIMARY KEY (c)])` with the types of
//!   [`SqlType`]; exactly one primary key column of an integer type (the row handle). The
//!   schema is stored in the cluster ([`catalog`]).
//! * `INSERT INTO t [(cols)] VALUES (...), ...` with literal values ([`insert`]); rows are
//!   written as one transaction (1PC in one region, else 2PC, or async commit with
//!   `tidb_enable_async_commit` ON, [`txn_write`]).
//! * `UPDATE t SET c = <literal | column | + - * over those>, ... [WHERE ...]` and
//!   `DELETE FROM t [WHERE ...]` ([`modify`]): the rows are read at the statement's start_ts
//!   through the coprocessor with the `WHERE` as [`conditions`] plans it, and written as one
//!   transaction at that start_ts (a concurrent change is a write conflict, not a lost
//!   update). The primary key can't be updated.
//! * `SET [GLOBAL | SESSION] var = value`, `SET @@[global. | session.]var = value`,
//!   `SHOW [GLOBAL | SESSION] VARIABLES [LIKE 'pattern']`, `SELECT @@[global.]var, ...` and
//!   `SHOW WARNINGS` ([`set_show`]). Every statement but `SHOW WARNINGS` replaces the warning
//!   list (an error leaves one `Error` row), as in MySQL.
//!
//! Anything else is an [`SqlError::Unsupported`] naming the part that is not supported.

pub mod catalog;
pub mod conditions;
pub mod explain;
pub mod handle_ranges;
pub mod index;
pub mod insert;
pub mod modify;
pub mod set_show;
pub mod transaction;
pub mod txn_write;
pub mod users;
pub mod value;

use sqlparser::ast::Statement;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use wire::datum::Datum;

use crate::paging::Client;
use crate::variables::{Scope, Session};

pub use catalog::{Column, SqlType, TableSchema};
pub use explain::RegionExplain;
pub use insert::InsertPlan;
pub use modify::ModifyPlan;
pub use txn_write::{CommitMode, CommitOptions, RowWrite, WriteOutcome};

/// The errors of the SQL front. [`SqlError::Client`] carries a cluster error (its
/// [`crate::Error::kind`] says what the caller can do); every other variant is a fault of the
/// statement.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    #[error("sql does not parse: message={message}")]
    Parse { message: String },
    #[error("unsupported sql: {what}")]
    Unsupported { what: String },
    #[error("table already exists: table={table}")]
    TableExists { table: String },
    #[error("unknown table: table={table}")]
    UnknownTable { table: String },
    #[error("unknown column: table={table} column={column}")]
    UnknownColumn { table: String, column: String },
    #[error("unsupported column type: column={column} type={ty}")]
    UnknownType { column: String, ty: String },
    #[error("bad primary key: {reason}")]
    BadPrimaryKey { reason: String },
    #[error("invalid table definition: {reason}")]
    BadTable { reason: String },
    #[error("type mismatch: {reason}")]
    Type { reason: String },
    #[error("bad value: column={column} reason={reason}")]
    BadValue { column: String, reason: String },
    #[error("duplicate primary key: table={table} key={key}")]
    DuplicateKey { table: String, key: i64 },
    /// Another transaction committed one of the statement's rows after the statement read
    /// it: nothing was written; run the statement again.
    #[error(
        "write conflict, nothing written; retry the statement: statement={statement} \
         start_ts={start_ts} conflict_commit_ts={conflict_commit_ts}"
    )]
    WriteConflict {
        statement: &'static str,
        start_ts: u64,
        conflict_commit_ts: u64,
    },
    /// Another transaction committed a row this transaction writes after this one started
    /// (`BEGIN` ... `COMMIT`): the transaction was rolled back and nothing it wrote is
    /// stored. Its reads may be stale, so the whole transaction must run again, not the
    /// `COMMIT` alone (MySQL's 1213).
    #[error(
        "write conflict: another transaction committed a row this transaction writes after it \
         started; the transaction was rolled back, run it again: start_ts={start_ts} \
         conflict_commit_ts={conflict_commit_ts}"
    )]
    TxnConflict {
        start_ts: u64,
        conflict_commit_ts: u64,
    },
    /// `COMMIT` met another transaction's lock, or a busy server, and rolled this one back:
    /// nothing it wrote is stored; run it again (MySQL's 1213, as for a conflict).
    #[error("transaction rolled back at COMMIT, run it again: start_ts={start_ts} reason={reason}")]
    TxnAborted { start_ts: u64, reason: String },
    /// A statement would take the transaction's buffered writes past their limit: the
    /// statement was refused, the transaction keeps what it had.
    #[error(
        "transaction too large: expected at most {max_keys} keys and {max_bytes} bytes, \
         found {keys} keys and {bytes} bytes; commit in smaller transactions"
    )]
    TxnTooLarge {
        keys: usize,
        bytes: usize,
        max_keys: usize,
        max_bytes: usize,
    },
    /// Another transaction's lock was in the way: nothing was written, the lock was resolved
    /// if it could be (`resolution`: `resolved`, `alive` — its transaction may still commit —
    /// or why not); run the statement again.
    #[error(
        "a lock is in the way, nothing written; retry the statement: statement={statement} \
         lock_ts={lock_ts} resolution={resolution}"
    )]
    KeyLocked {
        statement: &'static str,
        lock_ts: u64,
        resolution: String,
    },
    /// A server refused the prewrite for now (e.g. the region is splitting): every key was
    /// rolled back and nothing was written; run the statement again shortly.
    #[error(
        "server busy, nothing written; retry the statement: statement={statement} reason={reason}"
    )]
    ServerBusy {
        statement: &'static str,
        reason: String,
    },
    /// The commit of the statement's primary key got no answer, and neither did the rollback
    /// that would have decided (or, with async commit, a prewrite's outcome was unknown and
    /// the check of its locks that would have decided failed too): the statement may or may
    /// not have committed. Read before running it again.
    #[error(
        "commit outcome unknown, the statement may have committed: statement={statement} \
         start_ts={start_ts}"
    )]
    Undetermined {
        statement: &'static str,
        start_ts: u64,
    },
    /// An autocommit statement could not commit within the schema lease of its start
    /// (`txn_write::SCHEMA_LEASE_MS`): it was rolled back, nothing written; run it again.
    #[error(
        "the statement ran past the schema lease and was rolled back, nothing written; \
         retry it: statement={statement} start_ts={start_ts}"
    )]
    SchemaLeaseExpired {
        statement: &'static str,
        start_ts: u64,
    },
    /// The table's schema changed between planning the statement and writing it: nothing
    /// was written; run the statement again (TiDB's "Information schema is changed").
    #[error(
        "the table's schema changed while the statement ran, nothing written; run it again: table={table}"
    )]
    SchemaChanged { table: String },
    /// A unique index already holds the value (MySQL's 1062).
    #[error("duplicate entry for a unique index: table={table} index={index} entry={entry}")]
    DuplicateEntry {
        table: String,
        index: String,
        entry: String,
    },
    /// `CREATE INDEX` of a name the table already has (MySQL's 1061).
    #[error("duplicate index name: table={table} index={index}")]
    IndexExists { table: String, index: String },
    /// `DROP INDEX` of a name the table does not have (MySQL's 1091).
    #[error("unknown index: table={table} index={index}")]
    UnknownIndex { table: String, index: String },
    #[error("column must appear in GROUP BY or in an aggregate: column={column}")]
    NotGrouped { column: String },
    /// A catalog row that does not decode (written by something else, or a newer format).
    #[error("catalog entry is corrupt: table={table} reason={reason}")]
    CorruptCatalog { table: String, reason: String },
    /// A user row that does not decode (`users`).
    #[error("user entry is corrupt: user={user} reason={reason}")]
    CorruptAccount { user: String, reason: String },
    /// A user name or password `CREATE USER` / `ALTER USER` cannot take.
    #[error("bad user: {reason}")]
    BadUser { reason: String },
    #[error(transparent)]
    Client(#[from] crate::error::Error),
}

impl SqlError {
    /// What a caller can do: a cluster error's own kind; a write conflict is
    /// [`crate::ErrorKind::Locked`] (retry the statement), a busy server
    /// [`crate::ErrorKind::Busy`] (retry shortly); every other statement fault is
    /// [`crate::ErrorKind::Invalid`] (fix the statement, retrying does not help).
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            SqlError::Client(e) => e.kind(),
            SqlError::WriteConflict { .. }
            | SqlError::KeyLocked { .. }
            | SqlError::TxnConflict { .. }
            | SqlError::TxnAborted { .. }
            | SqlError::SchemaLeaseExpired { .. } => crate::ErrorKind::Locked,
            SqlError::ServerBusy { .. } => crate::ErrorKind::Busy,
            // Not retried by the statement loop: a re-run could write the rows twice.
            SqlError::Undetermined { .. } => crate::ErrorKind::Transport,
            _ => crate::ErrorKind::Invalid,
        }
    }
}

pub type Result<T, E = SqlError> = std::result::Result<T, E>;

pub(crate) fn unsupported(what: impl Into<String>) -> SqlError {
    SqlError::Unsupported { what: what.into() }
}

/// The answer of one statement: column names and rows (empty for DDL and writes),
/// `affected_rows` for INSERT, UPDATE and DELETE, and the warnings of the cluster (e.g. node
/// selection).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueryResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Datum>>,
    pub affected_rows: u64,
    pub warnings: Vec<String>,
}

/// A planned statement (no I/O has happened yet).
#[derive(Debug, Clone)]
pub enum Plan {
    /// The new table's schema; its id is 0 until [`Engine::execute`] allocates one.
    CreateTable(TableSchema),
    Insert(InsertPlan),
    Update(ModifyPlan),
    Delete(ModifyPlan),
    /// `SET`: the variable's lowercase name and the value's text (validated when run).
    Set {
        scope: Scope,
        name: String,
        value: String,
    },
    ShowVariables {
        scope: Scope,
        like: Option<String>,
    },
    ShowWarnings,
    /// `SELECT @@...`: (scope, lowercase name, column label) per item.
    SelectVariables(Vec<(Scope, String, String)>),
}

/// Parses exactly one statement.
pub fn parse(sql: &str) -> Result<Statement> {
    let mut stmts = Parser::parse_sql(&MySqlDialect {}, sql).map_err(|e| SqlError::Parse {
        message: e.to_string(),
    })?;
    match stmts.len() {
        1 => Ok(stmts.remove(0)),
        0 => Err(SqlError::Parse {
            message: "no statement".into(),
        }),
        n => Err(unsupported(format!("more than one statement: count={n}"))),
    }
}

/// The table a statement reads or writes (to load its schema before planning), if any.
pub fn table_of(stmt: &Statement) -> Result<Option<String>> {
    if set_show::plan(stmt).is_some() {
        return Ok(None);
    }
    match stmt {
        Statement::Insert(ins) => insert::table_name(ins).map(Some),
        Statement::Update(u) => modify::update_table(u).map(Some),
        Statement::Delete(d) => modify::delete_table(d).map(Some),
        _ => Ok(None),
    }
}

/// Plans `stmt`; `resolve` gives the schema of a table by its (lowercase) name.
pub fn plan(stmt: &Statement, resolve: &dyn Fn(&str) -> Option<TableSchema>) -> Result<Plan> {
    let lookup = |name: &str| {
        resolve(name).ok_or_else(|| SqlError::UnknownTable {
            table: name.to_string(),
        })
    };
    if let Some(p) = set_show::plan(stmt) {
        return p;
    }
    match stmt {
        Statement::CreateTable(ct) => catalog::plan_create(ct).map(Plan::CreateTable),
        Statement::Update(u) => {
            let schema = lookup(&modify::update_table(u)?)?;
            modify::plan_update(u, schema).map(Plan::Update)
        }
        Statement::Delete(d) => {
            let schema = lookup(&modify::delete_table(d)?)?;
            modify::plan_delete(d, schema).map(Plan::Delete)
        }
        Statement::Insert(ins) => {
            let schema = lookup(&insert::table_name(ins)?)?;
            insert::plan_insert(ins, schema).map(Plan::Insert)
        }
        // Queries are DataFusion's (`sqlfront`): this engine plans none.
        Statement::Query(_) | Statement::Explain { .. } => Err(unsupported(
            "queries in the client's statement engine: the SQL front (sqlfront, DataFusion) \
             plans and runs them",
        )),
        other => Err(unsupported(format!(
            "statement kind: {}",
            statement_kind(other)
        ))),
    }
}

/// The first words of a statement, to name it in an error without echoing all of it.
fn statement_kind(stmt: &Statement) -> String {
    let text = stmt.to_string();
    text.split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One row of `SHOW WARNINGS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// `Warning` or `Error`.
    pub level: &'static str,
    /// MySQL's generic code (1105, "unknown error"): the cluster's warnings carry none.
    pub code: i64,
    pub message: String,
}

/// The code of every warning and error in `SHOW WARNINGS` (TiDB's `ErrUnknown`).
const WARNING_CODE: i64 = 1105;

/// Executes SQL statements against the cluster as one entry session: its system variables
/// steer every read ([`Session::coprocessor`]), and it keeps the previous statement's
/// warnings for `SHOW WARNINGS`.
#[derive(Debug)]
pub struct Engine<'a> {
    client: &'a Client,
    /// Started on the first statement (from the GLOBAL values at that time).
    session: Option<Session<'a>>,
    warnings: Vec<Warning>,
    /// Schemas read or created by this engine, by lowercase name, so a statement does not
    /// read a table's catalog row again (a TSO call and a GET). A table not found is asked
    /// for again, since another client may create it; a front that serves DROP and TRUNCATE
    /// calls [`Engine::forget_schemas`] before each statement.
    schemas: parking_lot::Mutex<std::collections::HashMap<String, TableSchema>>,
}

impl<'a> Engine<'a> {
    pub fn new(client: &'a Client) -> Engine<'a> {
        Engine {
            client,
            session: None,
            warnings: Vec::new(),
            schemas: Default::default(),
        }
    }

    /// The stored schema of `name`, if the table exists.
    pub async fn table(&self, name: &str) -> Result<Option<TableSchema>> {
        let key = name.to_ascii_lowercase();
        if let Some(s) = self.schemas.lock().get(&key) {
            return Ok(Some(s.clone()));
        }
        let found = catalog::load(self.client, name).await?;
        if let Some(s) = &found {
            self.schemas.lock().insert(key, s.clone());
        }
        Ok(found)
    }

    /// The previous statement's warnings (what `SHOW WARNINGS` returns).
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The engine's session, started from the GLOBAL values on first use.
    pub async fn session(&mut self) -> Result<&mut Session<'a>> {
        let session = match self.session.take() {
            Some(s) => s,
            None => self.client.session().await?,
        };
        Ok(self.session.insert(session))
    }

    /// Parses, plans and runs one statement. Every statement but `SHOW WARNINGS` replaces the
    /// warning list: with the result's warnings, or with the error.
    pub async fn execute(&mut self, sql: &str) -> Result<QueryResult> {
        let out = self.run(sql).await;
        match &out {
            Ok((_, true)) => {}
            Ok((r, false)) => self.keep_warnings(Ok(&r.warnings)),
            Err(e) => self.keep_warnings(Err(e)),
        }
        out.map(|(r, _)| r)
    }

    /// Replaces the warning list after a statement another front ran on this engine's
    /// behalf (its warnings), as [`Engine::execute`] does for its own.
    pub fn set_warnings(&mut self, warnings: &[String]) {
        self.keep_warnings(Ok(warnings));
    }

    /// Replaces the warning list with one `Error` row after a statement another front ran
    /// failed (or this engine ran, when that front knows a more precise `code` for it).
    pub fn set_error(&mut self, code: i64, message: String) {
        self.warnings = vec![Warning {
            level: "Error",
            code,
            message,
        }];
    }

    /// Forgets the schemas read so far: another connection may have dropped or truncated a
    /// table since (the next statement reads the catalog again).
    pub fn forget_schemas(&self) {
        self.schemas.lock().clear();
    }

    /// The warning list after a statement: its warnings, or its error.
    fn keep_warnings(&mut self, out: std::result::Result<&[String], &SqlError>) {
        self.warnings = match out {
            Ok(warnings) => warnings
                .iter()
                .map(|m| Warning {
                    level: "Warning",
                    code: WARNING_CODE,
                    message: m.clone(),
                })
                .collect(),
            Err(e) => vec![Warning {
                level: "Error",
                code: WARNING_CODE,
                message: e.to_string(),
            }],
        };
    }

    /// Parses and plans one statement, loading the schema of the table it names.
    async fn plan_of(&mut self, sql: &str) -> Result<Plan> {
        let stmt = parse(sql)?;
        let schema = match table_of(&stmt)? {
            Some(name) => Some(
                self.table(&name)
                    .await?
                    .ok_or(SqlError::UnknownTable { table: name })?,
            ),
            None => None,
        };
        let resolve = |name: &str| schema.clone().filter(|s| s.name == name);
        plan(&stmt, &resolve)
    }

    /// Runs one statement; `true` when it was `SHOW WARNINGS` (which keeps the list).
    async fn run(&mut self, sql: &str) -> Result<(QueryResult, bool)> {
        let plan = self.plan_of(sql).await?;
        if let Plan::ShowWarnings = plan {
            return Ok((self.show_warnings(), true));
        }
        let client = self.client;
        let session = self.session().await?;
        let r = match plan {
            Plan::CreateTable(schema) => {
                catalog::create(client, schema).await?;
                QueryResult::default()
            }
            Plan::Insert(p) => {
                // `insert::write` chooses how the commit keeps the schema.
                let opts = session.variables().commit_options();
                let out = retrying_write(|| insert::write(client, &p, opts)).await?;
                QueryResult {
                    affected_rows: out.rows,
                    warnings: out.warnings,
                    ..QueryResult::default()
                }
            }
            Plan::Update(p) | Plan::Delete(p) => {
                let session = &*session;
                retrying_write(|| modify::run(session, &p)).await?
            }
            Plan::Set { scope, name, value } => {
                session.set(scope, &name, &value).await?;
                QueryResult::default()
            }
            Plan::ShowVariables { scope, like } => {
                let vars = match scope {
                    Scope::Session => *session.variables(),
                    Scope::Global => client.global_variables().await?,
                };
                let mut rows: Vec<(&str, String)> = vars
                    .settings()
                    .iter()
                    .map(|s| (s.name(), s.value_text()))
                    .filter(|(n, _)| like.as_ref().is_none_or(|p| set_show::like_match(p, n)))
                    .collect();
                rows.sort();
                QueryResult {
                    columns: vec!["Variable_name".into(), "Value".into()],
                    rows: rows
                        .into_iter()
                        .map(|(n, v)| vec![text(n), text(&v)])
                        .collect(),
                    ..QueryResult::default()
                }
            }
            Plan::SelectVariables(items) => {
                let mut row = Vec::with_capacity(items.len());
                for (scope, name, _) in &items {
                    let value = match session.get(*scope, name).await {
                        Ok(v) => v,
                        Err(crate::Error::Variable(crate::variables::VariableError::Unknown {
                            ..
                        })) if set_show::mysql_compat_value(name).is_some() => {
                            set_show::mysql_compat_value(name)
                                .unwrap_or_default()
                                .to_string()
                        }
                        Err(e) => return Err(e.into()),
                    };
                    row.push(text(&value));
                }
                QueryResult {
                    columns: items.into_iter().map(|(_, _, label)| label).collect(),
                    rows: vec![row],
                    ..QueryResult::default()
                }
            }
            Plan::ShowWarnings => QueryResult::default(),
        };
        Ok((r, false))
    }

    fn show_warnings(&self) -> QueryResult {
        QueryResult {
            columns: vec!["Level".into(), "Code".into(), "Message".into()],
            rows: self
                .warnings
                .iter()
                .map(|w| vec![text(w.level), Datum::Int(w.code), text(&w.message)])
                .collect(),
            ..QueryResult::default()
        }
    }
}

fn text(s: &str) -> Datum {
    Datum::Bytes(s.as_bytes().to_vec())
}

/// How many times a write statement runs before a retryable refusal is returned.
pub const WRITE_ATTEMPTS: u32 = 10;

/// The pause before attempt `n` (1-based) of a write statement: 20 ms doubling up to 1 s, so
/// ten attempts wait about 4 s in all, past an abandoned lock's TTL (3 s).
pub fn write_backoff(attempt: u32) -> std::time::Duration {
    std::time::Duration::from_millis((20u64 << attempt.min(7).saturating_sub(1)).min(1000))
}

/// Runs a write statement (INSERT, UPDATE, DELETE) again from the start while it is refused
/// in a way a rerun can cure: a write conflict, a lock in the way (resolved by the refused
/// attempt), a busy server. Each attempt is a whole statement: it reads (UPDATE, DELETE) and
/// checks duplicates (INSERT) at its own fresh timestamp, so a rerun sees what the conflicting
/// transaction did, as an autocommit statement that had waited for it would.
async fn retrying_write<T, F, Fut>(mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut n = 1;
    loop {
        match attempt().await {
            Err(e)
                if n < WRITE_ATTEMPTS
                    && matches!(e.kind(), crate::ErrorKind::Locked | crate::ErrorKind::Busy) =>
            {
                tokio::time::sleep(write_backoff(n)).await;
                n += 1;
            }
            other => return other,
        }
    }
}

/// Lowercase name of a one-part object name (`t`, not `db.t`).
pub(crate) fn simple_name(name: &sqlparser::ast::ObjectName, what: &str) -> Result<String> {
    match name.0.as_slice() {
        [sqlparser::ast::ObjectNamePart::Identifier(id)] => Ok(id.value.to_ascii_lowercase()),
        _ => Err(unsupported(format!("a qualified {what} name: {name}"))),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn schema() -> TableSchema {
        let Ok(Plan::CreateTable(s)) = plan(
            &parse("create table t (id bigint primary key, g int, v double, s varchar(10))")
                .unwrap(),
            &|_| None,
        ) else {
            unreachable!()
        };
        s
    }

    /// Parses and plans `sql` against table `t`; only errors may come out.
    fn front(sql: &str) -> Result<Plan> {
        let s = schema();
        plan(&parse(sql)?, &|n| (n == "t").then(|| s.clone()))
    }

    const WORDS: &[&str] = &[
        "select",
        "from",
        "t",
        "where",
        "group",
        "by",
        "order",
        "limit",
        "insert",
        "into",
        "values",
        "create",
        "table",
        "primary",
        "key",
        "int",
        "bigint",
        "double",
        "varchar(3)",
        "count(*)",
        "sum(v)",
        "avg(g)",
        "min(s)",
        "max(id)",
        "id",
        "g",
        "v",
        "s",
        "and",
        "or",
        "not",
        "is",
        "null",
        "=",
        "<>",
        "<",
        ">=",
        "(",
        ")",
        ",",
        "*",
        "1",
        "-2",
        "1.5",
        "'x'",
        "desc",
        "asc",
        "as",
        "x",
        ";",
        "+",
        "having",
        "distinct",
        "offset",
        "join",
        "on",
        "update",
        "set",
        "delete",
        "show",
        "variables",
        "warnings",
        "global",
        "session",
        "like",
        "'str%'",
        "explain",
        "analyze",
        "@@stratus_cop_cache",
        "@@global.stratus_paging_max_size",
        "stratus_remote_coprocessor",
        "v = v + 1",
        "g = g * -2",
        "off",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn arbitrary_text_never_panics_the_front(sql in "\\PC{0,80}") {
            let _ = front(&sql);
        }

        #[test]
        fn sql_like_token_soup_never_panics_the_front(
            words in proptest::collection::vec(proptest::sample::select(WORDS), 0..24)
        ) {
            let _ = front(&words.join(" "));
        }

        #[test]
        fn mutated_valid_writes_and_session_statements_never_panic_the_front(
            cut in 0usize..100, word in proptest::sample::select(WORDS), which in 0usize..5
        ) {
            let base = [
                "update t set v = v + 1, s = 'q' where id > 3 and g is not null",
                "delete from t where s like 'k%' or id in (1, 2)",
                "set @@global.stratus_paging_initial_size = 64",
                "show session variables like 'stratus%'",
                "explain select g, count(*) from t group by g order by g limit 3",
            ][which];
            let cut = cut.min(base.len());
            let _ = front(&format!("{} {word} {}", &base[..cut], &base[cut..]));
        }

        #[test]
        fn mutated_valid_queries_never_panic_the_front(
            cut in 0usize..120, word in proptest::sample::select(WORDS)
        ) {
            let base = "select g, count(*), avg(v) as a from t where id > 3 and s <> 'q' \
                        group by g order by a desc limit 10";
            let cut = cut.min(base.len());
            let _ = front(&format!("{} {word} {}", &base[..cut], &base[cut..]));
        }
    }

    #[test]
    fn statement_faults_are_invalid_and_cluster_errors_keep_their_kind() {
        assert_eq!(
            front("select * from u").unwrap_err().kind(),
            crate::ErrorKind::Invalid
        );
        let e = SqlError::from(crate::Error::NoRegion { key: vec![1] });
        assert_eq!(e.kind(), crate::ErrorKind::Region);
    }

    #[test]
    fn write_backoff_doubles_from_20_ms_to_a_1_s_cap() {
        let ms: Vec<u128> = (1..=WRITE_ATTEMPTS)
            .map(|n| write_backoff(n).as_millis())
            .collect();
        assert_eq!(ms, [20, 40, 80, 160, 320, 640, 1000, 1000, 1000, 1000]);
        let waited: u128 = ms[..ms.len() - 1].iter().sum();
        assert!(waited > 3000, "past an abandoned lock's TTL: {waited} ms");
    }

    fn locked() -> SqlError {
        SqlError::KeyLocked {
            statement: "update",
            lock_ts: 1,
            resolution: "alive".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_statement_reruns_while_locked_or_busy_and_stops_on_anything_else() {
        let mut runs = 0;
        let r = retrying_write(|| {
            runs += 1;
            let n = runs;
            async move {
                match n {
                    1 => Err(locked()),
                    2 => Err(SqlError::ServerBusy {
                        statement: "update",
                        reason: "splitting".into(),
                    }),
                    _ => Ok(n),
                }
            }
        })
        .await;
        assert_eq!(r.unwrap(), 3);

        let mut runs = 0;
        let r: Result<()> = retrying_write(|| {
            runs += 1;
            async { Err(SqlError::UnknownTable { table: "t".into() }) }
        })
        .await;
        assert!(matches!(r, Err(SqlError::UnknownTable { .. })));
        assert_eq!(runs, 1, "a statement fault is not retried");

        let mut runs = 0;
        let r: Result<()> = retrying_write(|| {
            runs += 1;
            async { Err(locked()) }
        })
        .await;
        assert!(matches!(r, Err(SqlError::KeyLocked { .. })));
        assert_eq!(runs, WRITE_ATTEMPTS, "gives up after the last attempt");
    }

    #[test]
    fn a_parse_error_carries_the_parser_message() {
        let e = front("select from where").unwrap_err();
        assert!(matches!(e, SqlError::Parse { .. }), "{e}");
        assert!(front("").is_err());
    }
}
