//! One connection's SQL session: routes each statement to DataFusion, to the catalog
//! statements of this front, or to the client's statement engine (crate docs), and keeps the
//! connection's variables and warnings (the engine holds both) and its open transaction.
//!
//! Transactions (`client::sql::transaction`): `BEGIN` / `START TRANSACTION` opens one, and so
//! does any statement run with `autocommit` off when none is open. Inside one, queries read at
//! its `start_ts` with its own writes overlaid (`crate::table`), and `INSERT`, `UPDATE` and
//! `DELETE` buffer their rows (with their index entries): DataFusion finds the rows and
//! evaluates the new values over the same overlay (`crate::write`). `COMMIT` writes the
//! buffer as one Percolator transaction; `ROLLBACK` drops it. As in MySQL, `BEGIN`, `CREATE
//! TABLE`, `CREATE`/`DROP INDEX`, `DROP TABLE`, `TRUNCATE` and `SET autocommit = 1` commit an
//! open transaction first, and a failed statement leaves the transaction open (only a failed
//! `COMMIT` ends it, rolled back).
//!
//! A write outside a transaction is a transaction of its own: it reads its table's schema at
//! its start_ts without locking it and commits under the schema lease
//! (`client::sql::txn_write::SCHEMA_LEASE_MS`), running again on a conflict at `COMMIT`.

use std::sync::Arc;

use client::paging::Client;
use client::sql::transaction::{SchemaHold, Transaction};
use client::sql::{Engine, SqlError, catalog};
use datafusion::arrow::datatypes::Schema;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::TableReference;
use datafusion::config::Dialect;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use sqlparser::ast::Spanned;
use sqlparser::ast::{self, ObjectType, Statement};

use crate::DATABASE;
use crate::account_sql::{self, Principal};
use crate::accounts::Accounts;
use crate::agg_pushdown::PushAggregates;
use crate::error::FrontError;
use crate::mysql_semantics::MySqlSemantics;
use crate::output::{Cell, Output};
use crate::show;
use crate::table::{ScanReport, StatementContext, StratusTable};
use crate::topn_pushdown::PushTopN;
use crate::write;
use datafusion::optimizer::AnalyzerRule;
use datafusion::optimizer::analyzer::Analyzer;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::display::DisplayableExecutionPlan;

/// DataFusion's catalog name for the cluster's tables (never shown to users).
const CATALOG: &str = "stratus";

/// Where a statement goes.
#[derive(Debug, PartialEq)]
enum Route {
    /// Planned and run by DataFusion.
    Query,
    /// Run by the client's statement engine.
    Engine,
    ShowTables,
    Describe(String),
    ShowCreate(String),
    Drop {
        names: Vec<String>,
        if_exists: bool,
    },
    Truncate(String),
    /// `CREATE [UNIQUE] INDEX ... ON t (...)` (`client::sql::index`).
    CreateIndex(client::sql::index::CreateIndex),
    /// `DROP INDEX name ON t`.
    DropIndex {
        table: String,
        index: String,
        if_exists: bool,
    },
    ShowDatabases,
    Use(String),
    /// `EXPLAIN ANALYZE <query>`: runs it with DataFusion and answers DataFusion's plan with
    /// its metrics, then what each Stratus scan pushed into its DAG and, per region, where its
    /// pages ran, why, its rows and time ([`explain_analyze`]).
    ExplainAnalyze,
    /// `EXPLAIN`: the client engine's (it runs a one-table query and says where each
    /// region ran); for a query it does not plan (a join, a subquery, a function),
    /// DataFusion's plan, with what each Stratus scan pushed into its DAG.
    Explain,
    /// `INSERT`, `UPDATE`, `DELETE`: the engine's own transaction per statement, or buffered
    /// in the open transaction.
    Write,
    /// `CREATE TABLE`: the engine's, after committing an open transaction.
    CreateTable,
    /// `BEGIN`, `START TRANSACTION [READ ONLY | READ WRITE]`.
    Begin {
        read_only: bool,
    },
    Commit,
    Rollback,
    /// `SET autocommit = 0 | 1`.
    Autocommit(bool),
    /// Accepted and answered OK with no effect (`SET NAMES`).
    NoOp,
}

/// One connection's session.
pub struct FrontSession {
    client: &'static Client,
    engine: Engine<'static>,
    df: SessionContext,
    /// The open transaction (module docs).
    txn: Option<Transaction>,
    /// MySQL's `autocommit`: off, a statement with no transaction open opens one.
    autocommit: bool,
    /// The open transaction was started `READ ONLY`: its writes are refused (1792).
    read_only: bool,
    /// The warnings of the queries the current write statement ran for its rows (node
    /// selection's), each once: the statement's warnings.
    write_warnings: Vec<String>,
    /// Who runs the statements: a user's are checked against its grants
    /// (`crate::privileges`) before they run.
    principal: Principal,
    /// The cluster's users (the endpoint's cache; a session of its own in process).
    accounts: Arc<Accounts>,
}

impl std::fmt::Debug for FrontSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrontSession").finish_non_exhaustive()
    }
}

impl FrontSession {
    /// An operator's session over `client`, which lives as long as the process: an
    /// in-process front (`stratus sql`, `demo`, `bench`) holds the cluster's own credentials,
    /// so its statements are not checked against SQL grants.
    pub fn new(client: &'static Client) -> FrontSession {
        FrontSession::with_principal(client, Arc::new(Accounts::new(client)), Principal::Operator)
    }

    /// The session of `user`, logged in to the endpoint whose users `accounts` caches: every
    /// statement is checked against the user's grants first.
    pub fn for_user(accounts: Arc<Accounts>, user: &str) -> FrontSession {
        FrontSession::with_principal(
            accounts.client(),
            accounts,
            Principal::User(user.to_string()),
        )
    }

    fn with_principal(
        client: &'static Client,
        accounts: Arc<Accounts>,
        principal: Principal,
    ) -> FrontSession {
        FrontSession {
            client,
            engine: Engine::new(client),
            df: datafusion_context(),
            txn: None,
            autocommit: true,
            read_only: false,
            write_warnings: Vec::new(),
            principal,
            accounts,
        }
    }

    /// Whether a transaction is open (the protocol's `SERVER_STATUS_IN_TRANS`).
    pub fn in_transaction(&self) -> bool {
        self.txn.is_some()
    }

    /// MySQL's `autocommit` (the protocol's `SERVER_STATUS_AUTOCOMMIT`).
    pub fn autocommit(&self) -> bool {
        self.autocommit
    }

    /// `EXPLAIN ANALYZE` for a program: runs the query `sql` and returns what each Stratus
    /// scan did, typed (the rows `EXPLAIN ANALYZE` prints are rendered from the same
    /// reports). Replaces the warning list as [`FrontSession::execute`] does.
    pub async fn analyze(&mut self, sql: &str) -> Result<Analyzed, FrontError> {
        let out = match client::sql::parse(sql).map_err(FrontError::from) {
            Ok(Statement::Query(_)) => self.collect(sql, true).await,
            Ok(_) => Err(FrontError::unsupported(
                "analyzing a statement other than a query",
            )),
            Err(e) => Err(e),
        };
        match out {
            Ok(ran) => {
                self.engine.set_warnings(&ran.warnings);
                Ok(Analyzed {
                    rows: ran.batches.iter().map(RecordBatch::num_rows).sum(),
                    scans: ran.scans,
                    warnings: ran.warnings,
                })
            }
            Err(e) => {
                self.keep_error(&e);
                Err(e)
            }
        }
    }

    /// Runs one statement. Every statement but `SHOW WARNINGS` replaces the warning list
    /// (with its warnings, or its error), as in MySQL.
    pub async fn execute(&mut self, sql: &str) -> Result<Output, FrontError> {
        if let Some(parsed) = account_sql::parse(sql) {
            let out = self.account_statement(parsed).await;
            match &out {
                Ok(o) => self.engine.set_warnings(&o.warnings),
                Err(e) => self.keep_error(e),
            }
            return out;
        }
        let parsed = client::sql::parse(sql)
            .map_err(FrontError::from)
            .and_then(|stmt| route(&stmt).map(|route| (route, stmt)));
        let (route, stmt) = match parsed {
            Ok(parsed) => parsed,
            Err(e) => {
                self.keep_error(&e);
                return Err(e);
            }
        };
        if let Err(e) = self.authorize(&stmt).await {
            self.keep_error(&e);
            return Err(e);
        }
        let by_engine = match route {
            Route::Engine => true,
            Route::CreateTable => {
                if let Err(e) = self.commit().await {
                    self.keep_error(&e);
                    return Err(e);
                }
                true
            }
            // A literal INSERT outside a transaction: the engine writes it at once (1PC when
            // its rows share a region), with no catalog lock and no query.
            Route::Write => {
                self.txn.is_none() && self.autocommit && matches!(stmt, Statement::Insert(_))
            }
            _ => false,
        };
        if by_engine {
            // The engine keeps its own warnings; an error's row takes its MySQL code.
            self.engine.forget_schemas();
            match self.engine.execute(sql).await {
                Ok(r) => return Ok(self.session_values(Output::from_engine(r))),
                // An INSERT of expressions, of a SELECT, with ON DUPLICATE KEY UPDATE or
                // into a table with indexes: refused while planning (nothing written); or
                // the table's schema changed since the engine read it: run below as a
                // transaction, which reads the schema at its own start_ts.
                Err(SqlError::Unsupported { .. } | SqlError::SchemaChanged { .. })
                    if route == Route::Write => {}
                Err(e) => {
                    let e = FrontError::from(e);
                    self.keep_error(&e);
                    return Err(e);
                }
            }
        }
        if route == Route::Write && self.txn.is_none() && self.autocommit {
            let out = self.autocommit_write(&stmt).await;
            match &out {
                Ok(o) => self.engine.set_warnings(&o.warnings),
                Err(e) => self.keep_error(e),
            }
            return out;
        }
        let out = self.run(route, sql, &stmt).await;
        match &out {
            Ok(o) => self.engine.set_warnings(&o.warnings),
            Err(e) => self.keep_error(e),
        }
        out
    }

    /// Refuses `stmt` when the session's user lacks a privilege it needs
    /// (`crate::privileges`); an operator's statements are not checked.
    async fn authorize(&self, stmt: &Statement) -> Result<(), FrontError> {
        let Principal::User(user) = &self.principal else {
            return Ok(());
        };
        let needs = crate::privileges::required(stmt);
        if needs.is_empty() {
            return Ok(());
        }
        let account = self.accounts.get(user).await?;
        crate::privileges::check(user, account.as_deref(), &needs)
    }

    /// An account statement (`crate::account_sql`): like DDL in MySQL, it commits an open
    /// transaction first.
    async fn account_statement(
        &mut self,
        parsed: Result<account_sql::AccountStatement, FrontError>,
    ) -> Result<Output, FrontError> {
        let stmt = parsed?;
        self.commit().await?;
        account_sql::execute(&self.accounts, &self.principal, stmt).await
    }

    /// A write statement outside a transaction, as MySQL's autocommit runs it: in a
    /// transaction of its own, committed at its end. A commit that met a conflict or a lock
    /// rolled everything back, so the statement runs again from a fresh timestamp (it was
    /// not acknowledged), up to [`AUTOCOMMIT_ATTEMPTS`] times.
    async fn autocommit_write(&mut self, stmt: &Statement) -> Result<Output, FrontError> {
        let mut attempt = 0;
        // Without a catalog lock the statement commits under the schema lease; one that
        // overran it runs again locking the catalog row instead, with no time bound.
        let mut hold = SchemaHold::LeaseFromStart;
        loop {
            let start_ts = self.client.current_ts().await.map_err(SqlError::from)?;
            self.txn = Some(Transaction::new(start_ts));
            self.read_only = false;
            let out = self.write_in_transaction(stmt).await;
            let txn = self.txn.take();
            let out = out?;
            let Some(txn) = txn else {
                return Err(FrontError::Internal {
                    what: "an autocommit write lost its transaction".into(),
                });
            };
            if txn.is_empty() {
                return Ok(out);
            }
            let opts = self.engine.session().await?.variables().commit_options();
            match txn.commit(self.client, opts, hold).await {
                Ok(_) => return Ok(out),
                Err(SqlError::SchemaLeaseExpired { .. }) if attempt + 1 < AUTOCOMMIT_ATTEMPTS => {
                    attempt += 1;
                    hold = SchemaHold::CatalogLock;
                }
                Err(SqlError::TxnConflict { .. } | SqlError::TxnAborted { .. })
                    if attempt + 1 < AUTOCOMMIT_ATTEMPTS =>
                {
                    attempt += 1;
                    tokio::time::sleep(client::sql::write_backoff(attempt)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// `out` (an engine answer) with the variables this session keeps itself answered from
    /// it: `SELECT @@autocommit` says what `SET autocommit` set here, not the engine's
    /// constant 1.
    fn session_values(&self, mut out: Output) -> Output {
        let autocommit = |name: &str| {
            let n = name.to_ascii_lowercase();
            let n = n.trim_start_matches("@@");
            let n = n
                .strip_prefix("session.")
                .or_else(|| n.strip_prefix("local."))
                .unwrap_or(n);
            n == "autocommit"
        };
        let value = Cell::Int(i64::from(self.autocommit));
        for (i, c) in out.columns.iter().enumerate() {
            if c.name.starts_with("@@") && autocommit(&c.name) {
                for row in &mut out.rows {
                    if let Some(cell) = row.get_mut(i) {
                        *cell = value.clone();
                    }
                }
            }
        }
        out
    }

    /// `SHOW WARNINGS` after a failed statement: one `Error` row with its MySQL code.
    fn keep_error(&mut self, e: &FrontError) {
        self.engine
            .set_error(i64::from(e.mysql_code()), e.to_string());
    }

    async fn run(
        &mut self,
        route: Route,
        sql: &str,
        stmt: &Statement,
    ) -> Result<Output, FrontError> {
        match route {
            Route::Query => self.query(sql, stmt).await,
            Route::ExplainAnalyze => {
                let Statement::Explain { statement, .. } = stmt else {
                    return Err(FrontError::Internal {
                        what: "EXPLAIN ANALYZE routed for another statement".into(),
                    });
                };
                if !matches!(statement.as_ref(), Statement::Query(_)) {
                    return Err(FrontError::unsupported(
                        "EXPLAIN ANALYZE of a statement other than a query",
                    ));
                }
                // The query as written (module docs of `write_in_transaction`).
                let inner = source_from(sql, statement.span().start).ok_or_else(|| {
                    FrontError::Internal {
                        what: "no source text for the explained query".into(),
                    }
                })?;
                let ran = self.collect(&inner, true).await?;
                let mut out = explain_analyze(&ran);
                out.warnings = ran.warnings;
                Ok(out)
            }
            Route::Engine | Route::CreateTable => Err(FrontError::Internal {
                what: "an engine statement routed to the front".into(),
            }),
            Route::Write => self.write_in_transaction(stmt).await,
            Route::Begin { read_only } => {
                self.commit().await?;
                let start_ts = self.client.current_ts().await.map_err(SqlError::from)?;
                self.txn = Some(Transaction::new(start_ts));
                self.read_only = read_only;
                Ok(Output::ok(0))
            }
            Route::Commit => {
                self.commit().await?;
                Ok(Output::ok(0))
            }
            Route::Rollback => {
                self.txn = None;
                Ok(Output::ok(0))
            }
            Route::Autocommit(on) => {
                // Turning it on (from off) commits the open transaction, as in MySQL.
                if on && !self.autocommit {
                    self.commit().await?;
                }
                self.autocommit = on;
                Ok(Output::ok(0))
            }
            Route::ShowTables => Ok(show::tables(&catalog::list(self.client).await?)),
            Route::Describe(name) => Ok(show::columns(&self.schema(&name).await?)),
            Route::ShowCreate(name) => Ok(show::create_table(&self.schema(&name).await?)),
            Route::Drop { names, if_exists } => {
                self.commit().await?;
                // As MySQL 8: a missing table drops nothing (unless IF EXISTS).
                let mut missing = Vec::new();
                for name in &names {
                    if catalog::load(self.client, name).await?.is_none() {
                        missing.push(format!("{DATABASE}.{name}"));
                    }
                }
                if !missing.is_empty() && !if_exists {
                    return Err(FrontError::UnknownTables { names: missing });
                }
                for name in names {
                    match catalog::drop_table(self.client, &name).await {
                        Err(SqlError::UnknownTable { .. }) if if_exists => {}
                        other => other?,
                    }
                }
                Ok(Output::ok(0))
            }
            Route::Truncate(name) => {
                self.commit().await?;
                catalog::truncate(self.client, &name).await?;
                Ok(Output::ok(0))
            }
            Route::CreateIndex(plan) => {
                self.commit().await?;
                let table = plan.table.clone();
                let mut progress = |rows: u64| {
                    tracing::info!(table = %table, rows, "CREATE INDEX backfill");
                };
                client::sql::index::create(self.client, &plan, &mut progress).await?;
                Ok(Output::ok(0))
            }
            Route::DropIndex {
                table,
                index,
                if_exists,
            } => {
                self.commit().await?;
                match client::sql::index::drop(self.client, &table, &index).await {
                    Err(SqlError::UnknownIndex { .. }) if if_exists => {}
                    other => other?,
                }
                Ok(Output::ok(0))
            }
            Route::ShowDatabases => Ok(Output::text(
                &["Database"],
                vec![vec![Cell::Text(DATABASE.to_string())]],
            )),
            Route::Use(db) => {
                use_database(&db)?;
                Ok(Output::ok(0))
            }
            Route::NoOp => Ok(Output::ok(0)),
            // DataFusion's plans, each Stratus scan with the DAG it pushes (read at the open
            // transaction's timestamp, with its rows overlaid, inside one).
            Route::Explain => self.query(sql, stmt).await,
        }
    }

    /// `USE db` sent as a protocol command (`COM_INIT_DB`).
    pub fn use_database(&mut self, db: &str) -> Result<(), FrontError> {
        use_database(db)
    }

    /// The warnings of the previous statement (what `SHOW WARNINGS` answers).
    pub fn warnings(&self) -> &[client::sql::Warning] {
        self.engine.warnings()
    }

    async fn schema(&self, name: &str) -> Result<client::sql::TableSchema, FrontError> {
        catalog::load(self.client, name)
            .await?
            .ok_or_else(|| SqlError::UnknownTable {
                table: name.to_ascii_lowercase(),
            })
            .map_err(FrontError::from)
    }

    /// Commits the open transaction, if any (a failed commit rolled it back: it is closed
    /// either way).
    async fn commit(&mut self) -> Result<(), FrontError> {
        let Some(txn) = self.txn.take() else {
            return Ok(());
        };
        if txn.is_empty() {
            return Ok(());
        }
        let opts = self.engine.session().await?.variables().commit_options();
        txn.commit(self.client, opts, SchemaHold::CheckAtCommit)
            .await?;
        Ok(())
    }

    /// Opens a transaction when `autocommit` is off and none is open (module docs).
    async fn open_implicit_transaction(&mut self) -> Result<(), FrontError> {
        if self.txn.is_none() && !self.autocommit {
            let start_ts = self.client.current_ts().await.map_err(SqlError::from)?;
            self.txn = Some(Transaction::new(start_ts));
            self.read_only = false;
        }
        Ok(())
    }

    /// `INSERT`, `UPDATE` or `DELETE` buffered in the open transaction (opened here when
    /// `autocommit` is off).
    ///
    /// The table's schema is the one at the transaction's `start_ts` (its reads see that
    /// one); `COMMIT` makes sure it is still the table's schema
    /// (`client::sql::transaction::SchemaHold`): a `CREATE INDEX`, `DROP`, `TRUNCATE` or
    /// re-`CREATE` committed after it started fails the `COMMIT`, instead of rows written
    /// under an old table id or without an index's entries.
    async fn write_in_transaction(&mut self, stmt: &Statement) -> Result<Output, FrontError> {
        self.write_warnings.clear();
        self.open_implicit_transaction().await?;
        if self.read_only {
            return Err(FrontError::ReadOnlyTransaction);
        }
        let name = client::sql::table_of(stmt)?.ok_or_else(|| FrontError::Internal {
            what: "a write statement that names no table".into(),
        })?;
        let start_ts = self.open_txn()?.start_ts();
        let schema = catalog::load_at(self.client, &name, start_ts)
            .await?
            .ok_or_else(|| SqlError::UnknownTable {
                table: name.clone(),
            })?;
        let changed = match stmt {
            Statement::Insert(ins) => self.insert(ins, &schema).await?,
            Statement::Update(u) => {
                client::sql::modify::check_update(u)?;
                let sets = write::assignments(&schema, &u.assignments, false)?;
                let query = write::update_query(&schema, &sets, u.selection.as_ref())?;
                let ran = self.collect_rows(&query).await?;
                let changed = write::updated_rows(&schema, &sets, &ran.batches)?
                    .into_iter()
                    .filter(|(old, new)| old != new)
                    .map(|(old, new)| Ok((write::handle(&schema, &old)?, Some(old), Some(new))))
                    .collect::<Result<Vec<_>, FrontError>>()?;
                let client = self.client;
                self.open_txn()?.apply(client, &schema, &changed).await?
            }
            Statement::Delete(d) => {
                client::sql::modify::check_delete(d)?;
                let query = write::update_query(&schema, &[], d.selection.as_ref())?;
                let ran = self.collect_rows(&query).await?;
                let deleted = crate::arrow_rows::batches_to_rows(&schema, &ran.batches)?
                    .into_iter()
                    .map(|old| Ok((write::handle(&schema, &old)?, Some(old), None)))
                    .collect::<Result<Vec<_>, FrontError>>()?;
                let client = self.client;
                self.open_txn()?.apply(client, &schema, &deleted).await?
            }
            _ => {
                return Err(FrontError::Internal {
                    what: "a write statement planned as something else".into(),
                });
            }
        };
        let mut out = Output::ok(changed);
        out.warnings = std::mem::take(&mut self.write_warnings);
        Ok(out)
    }

    /// An INSERT in the open transaction: literal rows as the client plans them (no query
    /// needed), anything else (expressions, `INSERT ... SELECT`, `ON DUPLICATE KEY UPDATE`)
    /// evaluated by DataFusion (`crate::write`). Returns MySQL's affected rows.
    async fn insert(
        &mut self,
        ins: &ast::Insert,
        schema: &client::sql::TableSchema,
    ) -> Result<u64, FrontError> {
        let client = self.client;
        if ins.on.is_none() {
            match client::sql::insert::plan_insert(ins, schema.clone()) {
                Ok(plan) => return Ok(self.open_txn()?.insert(client, &plan).await?),
                Err(SqlError::Unsupported { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        client::sql::insert::check_insert(ins)?;
        let targets = client::sql::insert::insert_targets(ins, schema)?;
        let source = write::insert_source(ins)?;
        let ran = self.collect_rows(&source).await?;
        let rows = write::inserted_rows(schema, &targets, &ran.batches)?;
        let set = match &ins.on {
            None => return Ok(self.open_txn()?.insert_rows(client, schema, rows).await?),
            // MySQL updates the row that holds a taken unique value; this front finds the
            // row by primary key only, so it refuses rather than answer 1062 where MySQL
            // would update.
            Some(ast::OnInsert::DuplicateKeyUpdate(_))
                if schema.indexes.iter().any(|i| i.unique) =>
            {
                return Err(FrontError::unsupported(format!(
                    "INSERT ... ON DUPLICATE KEY UPDATE into {}, a table with a unique \
                     secondary index",
                    schema.name
                )));
            }
            Some(ast::OnInsert::DuplicateKeyUpdate(set)) => set,
            Some(other) => {
                return Err(FrontError::unsupported(format!("INSERT ... {other}")));
            }
        };
        let sets = write::assignments(schema, set, true)?;
        let runs = write::runs_of_distinct_keys(schema, rows)?;
        // Several runs are buffered one by one: a failing one must take the earlier ones
        // back with it (a statement is all or nothing, in a transaction too).
        let before = (runs.len() > 1).then(|| self.txn.clone());
        let mut affected = 0;
        for run in runs {
            let done = async {
                let query = write::upsert_query(schema, &sets, &run)?;
                let ran = self.collect_rows(&query).await?;
                let (changes, n) = write::upsert_rows(schema, &sets, run, &ran.batches)?;
                self.open_txn()?.apply(client, schema, &changes).await?;
                Ok::<u64, FrontError>(n)
            }
            .await;
            match done {
                Ok(n) => affected += n,
                Err(e) => {
                    if let Some(txn) = before {
                        self.txn = txn;
                    }
                    return Err(e);
                }
            }
        }
        Ok(affected)
    }

    fn open_txn(&mut self) -> Result<&mut Transaction, FrontError> {
        self.txn.as_mut().ok_or_else(|| FrontError::Internal {
            what: "a transaction statement with no transaction open".into(),
        })
    }

    /// A query a write statement runs for its rows: its scans' warnings become the
    /// statement's.
    async fn collect_rows(&mut self, sql: &str) -> Result<Ran, FrontError> {
        let ran = self.collect(sql, false).await?;
        for w in &ran.warnings {
            if !self.write_warnings.contains(w) {
                self.write_warnings.push(w.clone());
            }
        }
        Ok(ran)
    }

    /// A query planned and run by DataFusion over the tables it names (crate docs).
    async fn query(&mut self, sql: &str, stmt: &Statement) -> Result<Output, FrontError> {
        let ran = self.collect(sql, false).await?;
        let mut out = Output::from_batches(&ran.schema, &ran.batches)?;
        out.warnings = ran.warnings;
        if let Some(labels) = select_labels(sql, stmt)
            && labels.len() == out.columns.len()
        {
            for (c, label) in out.columns.iter_mut().zip(labels) {
                if let Some(label) = label {
                    c.name = label;
                }
            }
        }
        Ok(out)
    }

    /// Plans and runs `sql` with DataFusion, read at one timestamp: the open transaction's
    /// (with its writes overlaid), else a fresh one.
    /// `analyze`: the scans report what they did (`EXPLAIN ANALYZE`).
    async fn collect(&mut self, sql: &str, analyze: bool) -> Result<Ran, FrontError> {
        self.open_implicit_transaction().await?;
        let vars = *self.engine.session().await?.variables();
        let start_ts = match &self.txn {
            Some(txn) => txn.start_ts(),
            None => self.client.current_ts().await.map_err(SqlError::from)?,
        };
        // DataFusion parses with its own sqlparser version, into its own statement.
        let state = self.df.state();
        let mut df_stmt = state.sql_to_statement(sql, &Dialect::MySQL)?;
        crate::mysql_semantics::mysql_statement(&mut df_stmt);
        let references = state.resolve_table_references(&df_stmt)?;
        let mut tables = Vec::new();
        for r in references {
            if let Some(schema) = r.schema()
                && !schema.eq_ignore_ascii_case(DATABASE)
            {
                return Err(FrontError::UnknownDatabase {
                    expected: DATABASE,
                    found: schema.to_string(),
                });
            }
            let name = r.table().to_ascii_lowercase();
            let Some(table) = catalog::load_at(self.client, &name, start_ts).await? else {
                return Err(SqlError::UnknownTable { table: name }.into());
            };
            tables.push(table);
        }
        let mut ctx = StatementContext::new(self.client, vars, start_ts);
        if analyze {
            ctx = ctx.reporting_scans();
        }
        if let Some(txn) = &self.txn {
            for t in &tables {
                ctx = ctx.with_pending(t.id, txn.pending_rows(t)?);
            }
        }
        let ctx = Arc::new(ctx);
        let mut registered = Vec::new();
        for table in tables {
            let reference = TableReference::bare(table.name.clone());
            registered.push(reference.clone());
            let provider = Arc::new(StratusTable::new(table, ctx.clone()));
            self.df.deregister_table(reference.clone())?;
            self.df.register_table(reference, provider)?;
        }
        let result = async {
            // A fresh state: it holds the tables registered above.
            let plan = self.df.state().statement_to_plan(df_stmt).await?;
            let frame = self.df.execute_logical_plan(plan).await?;
            let schema = frame.schema().as_arrow().clone();
            let task = Arc::new(frame.task_ctx());
            let physical = frame.create_physical_plan().await?;
            let batches = datafusion::physical_plan::collect(physical.clone(), task).await?;
            Ok::<_, FrontError>((schema, batches, physical))
        }
        .await;
        // Providers hold this statement's timestamp: none outlives it.
        for reference in registered {
            self.df.deregister_table(reference)?;
        }
        let (schema, batches, physical) = result?;
        Ok(Ran {
            schema,
            batches,
            warnings: ctx.take_warnings(),
            physical,
            scans: ctx.take_scans(),
        })
    }
}

/// What [`FrontSession::analyze`] found: each Stratus scan's report, the rows of the answer
/// and the statement's warnings.
#[derive(Debug, Clone)]
pub struct Analyzed {
    pub scans: Vec<ScanReport>,
    pub rows: usize,
    pub warnings: Vec<String>,
}

impl Analyzed {
    /// Every region row of every scan, in the order the scans finished.
    pub fn regions(&self) -> impl Iterator<Item = &client::sql::RegionExplain> {
        self.scans.iter().flat_map(|s| s.regions.iter())
    }

    /// Body bytes the statement's scans moved between zones.
    pub fn cross_zone_bytes(&self) -> u64 {
        self.scans.iter().map(|s| s.cross_zone_bytes).sum()
    }
}

/// A statement DataFusion ran: its answer, the plan it ran (with its metrics), and what the
/// Stratus scans did.
struct Ran {
    schema: Schema,
    batches: Vec<RecordBatch>,
    warnings: Vec<String>,
    physical: Arc<dyn ExecutionPlan>,
    scans: Vec<ScanReport>,
}

/// `EXPLAIN ANALYZE`'s answer, in the columns of the engine's `EXPLAIN` (`id`, `task`,
/// `detail`):
///
/// * a row per line of DataFusion's physical plan with its metrics (`id` = the line's number,
///   `task` = `datafusion`);
/// * per Stratus scan, a row per DAG executor (`id` = `<table> <n>`, `task` = `dag`) and a
///   row per region (`id` = `<table> region <id>`, `task` = where its pages ran, `detail` =
///   `reason=... pages=... rows=... cache_hit=... cross_zone_bytes=... time_ms=...`);
/// * a last row `query` / `total` / `rows=<answer rows> cross_zone_bytes=<n>`.
fn explain_analyze(ran: &Ran) -> Output {
    let row = |id: String, task: String, detail: String| {
        vec![Cell::Text(id), Cell::Text(task), Cell::Text(detail)]
    };
    let plan = DisplayableExecutionPlan::with_metrics(ran.physical.as_ref())
        .indent(true)
        .to_string();
    let mut rows: Vec<Vec<Cell>> = plan
        .lines()
        .enumerate()
        .map(|(i, line)| row(i.to_string(), "datafusion".into(), line.trim_end().into()))
        .collect();
    for scan in &ran.scans {
        for (i, e) in scan.executors.iter().enumerate() {
            rows.push(row(format!("{} {i}", scan.table), "dag".into(), e.clone()));
        }
        for r in &scan.regions {
            rows.push(row(
                format!("{} {}", scan.table, r.id_text()),
                r.task(),
                format!(
                    "{} time_ms={:.1}",
                    r.detail(),
                    r.elapsed.as_secs_f64() * 1e3
                ),
            ));
        }
    }
    let answer_rows: usize = ran.batches.iter().map(RecordBatch::num_rows).sum();
    let cross_zone: u64 = ran.scans.iter().map(|s| s.cross_zone_bytes).sum();
    rows.push(row(
        "query".into(),
        "total".into(),
        format!("rows={answer_rows} cross_zone_bytes={cross_zone}"),
    ));
    Output::text(&client::sql::explain::COLUMNS, rows)
}

/// The byte offset in `sql` of a parser location (lines and columns count from 1, columns
/// in characters).
pub(crate) fn source_offset(sql: &str, loc: sqlparser::tokenizer::Location) -> Option<usize> {
    if loc.line == 0 || loc.column == 0 {
        return None;
    }
    let mut line_start = 0;
    for _ in 1..loc.line {
        line_start += sql[line_start..].find('\n')? + 1;
    }
    let line = &sql[line_start..];
    let col = loc.column as usize - 1;
    let within = line.char_indices().nth(col).map_or(line.len(), |(i, _)| i);
    Some(line_start + within)
}

/// The text of `sql` from `start` to its end, without a trailing `;`.
fn source_from(sql: &str, start: sqlparser::tokenizer::Location) -> Option<String> {
    let text = sql.get(source_offset(sql, start)?..)?;
    Some(text.trim_end().trim_end_matches(';').to_string())
}

/// MySQL's names for the result columns of a plain `SELECT`: an expression that is not a
/// column is named by its text as written (`COUNT(*)`, `1+1`), where DataFusion would say
/// `count(*)` or `Int64(1) + Int64(1)`. `None` for an item whose name DataFusion's already
/// is (a column, an alias); `None` overall when a wildcard makes the items and the columns
/// differ.
fn select_labels(sql: &str, stmt: &Statement) -> Option<Vec<Option<String>>> {
    use sqlparser::ast::{SelectItem, SetExpr, Spanned};
    let Statement::Query(q) = stmt else {
        return None;
    };
    let SetExpr::Select(select) = q.body.as_ref() else {
        return None;
    };
    select
        .projection
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(
                ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_),
            ) => Some(None),
            SelectItem::UnnamedExpr(e) => Some(Some(
                source_text(sql, e.span()).unwrap_or_else(|| e.to_string()),
            )),
            SelectItem::ExprWithAlias { .. } => Some(None),
            _ => None,
        })
        .collect()
}

/// The text of `sql` a span covers (lines and columns count from 1, columns in characters).
fn source_text(sql: &str, span: sqlparser::tokenizer::Span) -> Option<String> {
    let offset = |loc| source_offset(sql, loc);
    let (start, end) = (offset(span.start)?, offset(span.end)?);
    if start >= end {
        return None;
    }
    // A function's span ends at its last argument (`SUM(pay`), or at its name when the
    // argument has none (`COUNT`): take in the parentheses that close it.
    let mut depth: i64 = sql[start..end]
        .chars()
        .map(|c| match c {
            '(' => 1,
            ')' => -1,
            _ => 0,
        })
        .sum();
    let mut stop = end;
    let rest = &sql[end..];
    if depth < 0 || (depth == 0 && !rest.starts_with('(')) {
        return Some(sql[start..end].to_string());
    }
    for (i, ch) in rest.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            stop = end + i + ch.len_utf8();
            break;
        }
    }
    Some(sql[start..stop].to_string())
}

/// How many times an autocommit write runs when its commit meets a conflict or a lock (the
/// client engine's count: its pauses outlast an abandoned lock's TTL).
const AUTOCOMMIT_ATTEMPTS: u32 = client::sql::WRITE_ATTEMPTS;

/// A DataFusion session as the front uses it: the cluster's tables in `stratus.test`, and
/// partial aggregation pushed into the coprocessor ([`PushAggregates`]).
pub(crate) fn datafusion_context() -> SessionContext {
    let mut config = SessionConfig::new()
        .with_default_catalog_and_schema(CATALOG, DATABASE)
        .with_information_schema(false);
    // MySQL's order: NULL is the smallest value (first ascending, last descending), as the
    // coprocessor orders too (DataFusion's default is Postgres's, the other way round).
    config.options_mut().sql_parser.default_null_ordering = "nulls_min".to_string();
    // MySQL's `0.1` is an exact DECIMAL, not a double: `0.1 + 0.2` is `0.3`, and a DECIMAL
    // column compared with it keeps its type (the comparison is pushed to the coprocessor).
    config.options_mut().sql_parser.parse_float_as_decimal = true;
    // MySQL's answers where DataFusion's differ, before type coercion types them.
    let mut analyzer: Vec<Arc<dyn AnalyzerRule + Send + Sync>> = vec![Arc::new(MySqlSemantics)];
    analyzer.extend(Analyzer::new().rules);
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_analyzer_rules(analyzer)
        .with_physical_optimizer_rule(Arc::new(PushAggregates))
        .with_physical_optimizer_rule(Arc::new(PushTopN))
        .build();
    SessionContext::new_with_state(state)
}

fn use_database(db: &str) -> Result<(), FrontError> {
    if db.eq_ignore_ascii_case(DATABASE) {
        Ok(())
    } else {
        Err(FrontError::UnknownDatabase {
            expected: DATABASE,
            found: db.to_string(),
        })
    }
}

/// The one table an object name names (`t` or `test.t`), lowercase.
fn table_name(name: &ast::ObjectName) -> Result<String, FrontError> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(id) => Ok(id.value.to_ascii_lowercase()),
            other => Err(FrontError::unsupported(format!("a name part: {other}"))),
        })
        .collect::<Result<_, _>>()?;
    match parts.as_slice() {
        [t] => Ok(t.clone()),
        [db, t] if db.eq_ignore_ascii_case(DATABASE) => Ok(t.clone()),
        [db, _] => Err(FrontError::UnknownDatabase {
            expected: DATABASE,
            found: db.clone(),
        }),
        _ => Err(FrontError::unsupported(format!("the name {name}"))),
    }
}

/// `autocommit`, `@@autocommit`, `@@session.autocommit` (any case).
fn is_autocommit(variable: &ast::ObjectName) -> bool {
    let text = variable.to_string().to_ascii_lowercase();
    let name = text.trim_start_matches("@@");
    let name = ["session.", "local.", "global."]
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .unwrap_or(name);
    name == "autocommit"
}

/// Where `stmt` goes (see [`Route`]).
fn route(stmt: &Statement) -> Result<Route, FrontError> {
    Ok(match stmt {
        // `SELECT @@var`, SET, SHOW VARIABLES / WARNINGS: the engine's variables.
        s if client::sql::set_show::plan(s).is_some() => match s {
            Statement::Set(ast::Set::SetNames { .. }) => Route::NoOp,
            Statement::Set(ast::Set::SingleAssignment {
                variable, values, ..
            }) if is_autocommit(variable) => {
                let text = match values.as_slice() {
                    [v] => v.to_string().to_ascii_lowercase(),
                    _ => String::new(),
                };
                match text.trim_matches(|c| c == '\'' || c == '"') {
                    "1" | "on" | "true" => Route::Autocommit(true),
                    "0" | "off" | "false" => Route::Autocommit(false),
                    _ => {
                        return Err(SqlError::Client(client::Error::Variable(
                            client::variables::VariableError::BadValue {
                                name: "autocommit",
                                value: text,
                                allowed: "ON,OFF".into(),
                            },
                        ))
                        .into());
                    }
                }
            }
            _ => Route::Engine,
        },
        Statement::Query(q) if !q.locks.is_empty() || q.for_clause.is_some() => {
            return Err(FrontError::unsupported(
                "SELECT ... FOR UPDATE / LOCK IN SHARE MODE / FOR clauses (locking reads \
                 are not built: inside a transaction the read would lock nothing)",
            ));
        }
        Statement::Query(_) => Route::Query,
        Statement::ShowTables { .. } => Route::ShowTables,
        Statement::ShowDatabases { .. } => Route::ShowDatabases,
        Statement::ExplainTable { table_name: t, .. } => Route::Describe(table_name(t)?),
        Statement::Explain { analyze: true, .. } => Route::ExplainAnalyze,
        Statement::Explain { .. } => Route::Explain,
        Statement::ShowColumns { show_options, .. } => {
            let name = show_options
                .show_in
                .as_ref()
                .and_then(|i| i.parent_name.as_ref())
                .ok_or_else(|| FrontError::Parse {
                    message: "SHOW COLUMNS needs FROM <table>".into(),
                })?;
            Route::Describe(table_name(name)?)
        }
        Statement::ShowCreate { obj_type, obj_name } => {
            if *obj_type != ast::ShowCreateObject::Table {
                return Err(FrontError::unsupported(format!("SHOW CREATE {obj_type}")));
            }
            Route::ShowCreate(table_name(obj_name)?)
        }
        Statement::Drop {
            object_type: ObjectType::Table,
            if_exists,
            names,
            ..
        } => Route::Drop {
            names: names.iter().map(table_name).collect::<Result<_, _>>()?,
            if_exists: *if_exists,
        },
        Statement::CreateIndex(ci) => {
            Route::CreateIndex(client::sql::index::plan_create_index(ci)?)
        }
        Statement::Drop {
            object_type: ObjectType::Index,
            names,
            table,
            if_exists,
            ..
        } => match (names.as_slice(), table) {
            ([index], Some(t)) => Route::DropIndex {
                table: table_name(t)?,
                index: table_name(index)?,
                if_exists: *if_exists,
            },
            _ => {
                return Err(FrontError::unsupported(
                    "DROP INDEX other than DROP INDEX <name> ON <table>",
                ));
            }
        },
        Statement::Truncate(t) => match t.table_names.as_slice() {
            [one] => Route::Truncate(table_name(&one.name)?),
            _ => return Err(FrontError::unsupported("TRUNCATE of several tables")),
        },
        Statement::Use(u) => match u {
            ast::Use::Object(name) | ast::Use::Database(name) | ast::Use::Schema(name) => {
                Route::Use(name.to_string().trim_matches('`').to_string())
            }
            other => return Err(FrontError::unsupported(format!("{other}"))),
        },
        Statement::StartTransaction { modes, .. } => Route::Begin {
            read_only: modes.contains(&ast::TransactionMode::AccessMode(
                ast::TransactionAccessMode::ReadOnly,
            )),
        },
        Statement::Commit { chain: true, .. } | Statement::Rollback { chain: true, .. } => {
            return Err(FrontError::unsupported("COMMIT / ROLLBACK AND CHAIN"));
        }
        Statement::Commit { .. } => Route::Commit,
        Statement::Rollback {
            savepoint: Some(_), ..
        } => return Err(FrontError::unsupported("savepoints")),
        Statement::Rollback { .. } => Route::Rollback,
        Statement::Savepoint { .. } | Statement::ReleaseSavepoint { .. } => {
            return Err(FrontError::unsupported("savepoints"));
        }
        Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => Route::Write,
        Statement::CreateTable(_) => Route::CreateTable,
        _ => Route::Engine,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::sql::parse;

    fn routed(sql: &str) -> Result<Route, FrontError> {
        route(&parse(sql)?)
    }

    #[test]
    fn statements_go_where_they_are_served() {
        let cases: Vec<(&str, Route)> = vec![
            ("SELECT 1 + 1", Route::Query),
            (
                "SELECT a, COUNT(DISTINCT b) FROM t JOIN u ON t.a = u.a GROUP BY a HAVING COUNT(*) > 1",
                Route::Query,
            ),
            ("SELECT @@version_comment LIMIT 1", Route::Engine),
            ("INSERT INTO t VALUES (1)", Route::Write),
            ("UPDATE t SET a = 1 WHERE id = 2", Route::Write),
            ("DELETE FROM t", Route::Write),
            ("CREATE TABLE t (id INT PRIMARY KEY)", Route::CreateTable),
            ("SET tidb_replica_read = 'follower'", Route::Engine),
            ("SHOW WARNINGS", Route::Engine),
            ("SHOW TABLES", Route::ShowTables),
            (
                "EXPLAIN SELECT a FROM t JOIN u ON t.a = u.a",
                Route::Explain,
            ),
            ("DESCRIBE t", Route::Describe("t".into())),
            ("SHOW COLUMNS FROM test.T", Route::Describe("t".into())),
            ("SHOW CREATE TABLE t", Route::ShowCreate("t".into())),
            (
                "DROP TABLE IF EXISTS a, b",
                Route::Drop {
                    names: vec!["a".into(), "b".into()],
                    if_exists: true,
                },
            ),
            ("TRUNCATE TABLE t", Route::Truncate("t".into())),
            ("USE test", Route::Use("test".into())),
            ("SET NAMES utf8mb4", Route::NoOp),
            ("SET autocommit = 1", Route::Autocommit(true)),
            ("SET @@session.autocommit = ON", Route::Autocommit(true)),
            ("SET @@SESSION.autocommit = OFF", Route::Autocommit(false)),
            ("set autocommit=0", Route::Autocommit(false)),
            ("BEGIN", Route::Begin { read_only: false }),
            ("START TRANSACTION", Route::Begin { read_only: false }),
            (
                "START TRANSACTION READ ONLY",
                Route::Begin { read_only: true },
            ),
            ("COMMIT", Route::Commit),
            ("ROLLBACK", Route::Rollback),
        ];
        for (sql, want) in cases {
            assert_eq!(routed(sql).unwrap(), want, "{sql}");
        }
    }

    #[test]
    fn expressions_are_named_by_their_text_as_mysql_names_them() {
        let sql = "SELECT id, COUNT(*),\n  SUM(v)  + 1, x AS y, t.s, SUM(pay), f(g(a), 1) FROM t";
        let labels = select_labels(sql, &parse(sql).unwrap()).unwrap();
        assert_eq!(
            labels,
            [
                None,
                Some("COUNT(*)".to_string()),
                Some("SUM(v)  + 1".to_string()),
                None,
                None,
                Some("SUM(pay)".to_string()),
                Some("f(g(a), 1)".to_string()),
            ]
        );
        assert_eq!(
            select_labels("SELECT * FROM t", &parse("SELECT * FROM t").unwrap()),
            None
        );
        let one = "SELECT 1+1";
        assert_eq!(
            select_labels(one, &parse(one).unwrap()).unwrap(),
            [Some("1+1".to_string())]
        );
    }

    #[tokio::test]
    async fn a_statement_that_does_not_parse_leaves_its_error_for_show_warnings() {
        let client: &'static Client = Box::leak(Box::new(
            Client::new(client::ClientConfig::new(
                ["http://127.0.0.1:1".to_string()],
            ))
            .unwrap(),
        ));
        let mut session = FrontSession::new(client);
        let e = session.execute("SELEC 1").await.unwrap_err();
        assert_eq!(e.mysql_code(), crate::error::code::PARSE);
        let w = session.warnings();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].level, "Error");
        assert!(w[0].message.contains("SELEC"), "{}", w[0].message);
    }

    #[test]
    fn what_is_not_built_is_refused_with_its_reason() {
        for sql in [
            "SAVEPOINT a",
            "ROLLBACK TO SAVEPOINT a",
            "COMMIT AND CHAIN",
            "SELECT 1; SELECT 2",
        ] {
            let e = routed(sql).unwrap_err();
            assert_eq!(
                e.mysql_code(),
                crate::error::code::NOT_SUPPORTED_YET,
                "{sql}: {e}"
            );
        }
        let e = routed("SET autocommit = 2").unwrap_err();
        assert_eq!(e.mysql_code(), crate::error::code::WRONG_VALUE_FOR_VAR);
        let e = routed("SHOW COLUMNS FROM other.t").unwrap_err();
        assert_eq!(e.mysql_code(), crate::error::code::BAD_DB);
        let e = routed("SELEC 1").unwrap_err();
        assert_eq!(e.mysql_code(), crate::error::code::PARSE);
    }
}
