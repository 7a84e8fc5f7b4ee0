//! The SQL front (issue 10, item 1, first slice): statements parsed with `sqlparser` (MySQL
//! dialect), planned without I/O ([`plan`]), and executed against the cluster ([`Engine`]).
//!
//! Supported in this slice:
//!
//! * `CREATE TABLE t (c TYPE [PRIMARY KEY], ... [, PRIMARY KEY (c)])` with types `INT`,
//!   `INTEGER`, `BIGINT`, `DOUBLE` (also `DOUBLE PRECISION`, `FLOAT64`) and `VARCHAR(n)`; exactly
//!   one primary key column of an integer type (the row handle). The schema is stored in the
//!   cluster ([`catalog`]).
//! * `INSERT INTO t [(cols)] VALUES (...), ...` with literal values ([`insert`]); rows are
//!   written as one transaction (1PC in one region, else 2PC).
//! * `SELECT` over one table ([`select`]): columns, `*`, `COUNT(*)`, `COUNT(col)`, `SUM`,
//!   `MIN`, `MAX`, `AVG` (with `AS` aliases), `WHERE` with `= <> != < <= > >=`, `AND`, `OR`,
//!   `NOT`, `IS [NOT] NULL`, `[NOT] IN (literals)`, `[NOT] LIKE 'pattern'` over columns and
//!   literals, `GROUP BY` columns, `ORDER BY` columns,
//!   aliases, output positions or aggregates (`ASC`/`DESC`, NULL first ascending), `LIMIT n`.
//!   Planned into a DAG (`TableScan → [Selection] → [Aggregation | TopN | Limit]`) run by
//!   [`Client::coprocessor`] over the table's record range, finished in the client
//!   ([`finish`]: AVG, ORDER BY over aggregates, projection order).
//!
//! Anything else is an [`SqlError::Unsupported`] naming the part that is not supported.

pub mod catalog;
pub mod finish;
pub mod insert;
pub mod select;

use cop::datum::Datum;
use sqlparser::ast::Statement;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use crate::paging::Client;

pub use catalog::{Column, SqlType, TableSchema};
pub use insert::{InsertPlan, WriteOutcome};
pub use select::SelectPlan;

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
    #[error("column must appear in GROUP BY or in an aggregate: column={column}")]
    NotGrouped { column: String },
    /// A catalog row that does not decode (written by something else, or a newer format).
    #[error("catalog entry is corrupt: table={table} reason={reason}")]
    CorruptCatalog { table: String, reason: String },
    #[error(transparent)]
    Client(#[from] crate::error::Error),
}

impl SqlError {
    /// What a caller can do: a cluster error's own kind; every statement fault is
    /// [`crate::ErrorKind::Invalid`] (fix the statement, retrying does not help).
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            SqlError::Client(e) => e.kind(),
            _ => crate::ErrorKind::Invalid,
        }
    }
}

pub type Result<T, E = SqlError> = std::result::Result<T, E>;

pub(crate) fn unsupported(what: impl Into<String>) -> SqlError {
    SqlError::Unsupported { what: what.into() }
}

/// The answer of one statement: column names and rows (empty for DDL and INSERT),
/// `affected_rows` for INSERT, and the warnings of the cluster (e.g. node selection).
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
    Select(SelectPlan),
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
    match stmt {
        Statement::Insert(ins) => insert::table_name(ins).map(Some),
        Statement::Query(q) => select::table_name(q).map(Some),
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
    match stmt {
        Statement::CreateTable(ct) => catalog::plan_create(ct).map(Plan::CreateTable),
        Statement::Insert(ins) => {
            let schema = lookup(&insert::table_name(ins)?)?;
            insert::plan_insert(ins, schema).map(Plan::Insert)
        }
        Statement::Query(q) => {
            let schema = lookup(&select::table_name(q)?)?;
            select::plan_select(q, schema).map(Plan::Select)
        }
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

/// Executes SQL statements against the cluster through a [`Client`].
#[derive(Debug, Clone, Copy)]
pub struct Engine<'a> {
    client: &'a Client,
}

impl<'a> Engine<'a> {
    pub fn new(client: &'a Client) -> Engine<'a> {
        Engine { client }
    }

    /// The stored schema of `name`, if the table exists.
    pub async fn table(&self, name: &str) -> Result<Option<TableSchema>> {
        catalog::load(self.client, name).await
    }

    /// Parses, plans and runs one statement.
    pub async fn execute(&self, sql: &str) -> Result<QueryResult> {
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
        match plan(&stmt, &resolve)? {
            Plan::CreateTable(schema) => {
                catalog::create(self.client, schema).await?;
                Ok(QueryResult::default())
            }
            Plan::Insert(p) => {
                let out = insert::write(self.client, &p).await?;
                Ok(QueryResult {
                    affected_rows: out.rows,
                    warnings: out.warnings,
                    ..QueryResult::default()
                })
            }
            Plan::Select(p) => finish::run(self.client, &p).await,
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
    fn a_parse_error_carries_the_parser_message() {
        let e = front("select from where").unwrap_err();
        assert!(matches!(e, SqlError::Parse { .. }), "{e}");
        assert!(front("").is_err());
    }
}
