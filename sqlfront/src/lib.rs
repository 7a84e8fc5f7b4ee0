//! The SQL front (issue 19): Apache DataFusion plans and runs SQL over Stratus tables, and a
//! MySQL wire protocol endpoint serves it to any MySQL client or driver.
//!
//! The layers, in the order a statement goes through them:
//!
//! * [`mysql`]: the endpoint. One [`FrontSession`] per connection (its variables, its
//!   warnings, its database), `COM_QUERY`, prepared statements (`COM_STMT_PREPARE` /
//!   `EXECUTE`: parameters are bound as SQL literals into the statement text), `USE`, and
//!   MySQL error codes with their SQLSTATEs ([`error`]); [`mysql_limits`]: connections at
//!   once and the login and idle deadlines (`connect_timeout`, `wait_timeout`).
//! * [`session`]: routes a statement. Queries (`SELECT`, with joins, subqueries, `HAVING`,
//!   `DISTINCT`, window and scalar functions, `SELECT` without `FROM`) are planned and run by
//!   DataFusion; the catalog statements (`SHOW TABLES`, `DESCRIBE`, `SHOW COLUMNS`,
//!   `SHOW CREATE TABLE`, `DROP TABLE`, `TRUNCATE TABLE`, [`show`]) and transactions
//!   (`BEGIN` ... `COMMIT`, `autocommit = 0`; writes inside one are buffered here) here;
//!   autocommit writes, DDL, `SET`, `SHOW VARIABLES`, `SHOW WARNINGS` and `EXPLAIN` (not
//!   `EXPLAIN ANALYZE`) by the client's statement engine (`client::sql`), which this front
//!   wraps. [`mysql_semantics`] gives MySQL's answers where DataFusion's differ.
//! * [`table`]: a Stratus table as a DataFusion `TableProvider`. Its scan is one
//!   coprocessor request over the table's regions: the filters DataFusion offers that the
//!   coprocessor can evaluate go into each region's DAG as a Selection (and narrow the key
//!   ranges when they bound the primary key), the projection as a Projection, a limit as a
//!   Limit ([`pushdown`]); DataFusion's partial aggregation over a scan goes into the DAG too
//!   ([`agg_pushdown`]), so each region returns partial aggregates, and a sort with a limit
//!   gives the DAG a TopN ([`topn_pushdown`]). The paging driver, the coprocessor cache, lock resolution, region
//!   retries and node selection run that request as they run every other.
//! * [`arrow_rows`]: coprocessor rows into Arrow record batches; [`output`]: record
//!   batches and the engine's rows into what the endpoint writes.
//!
//! Every scan of one statement reads at one timestamp, taken when the statement starts (or
//! the transaction's, inside one), and the catalog is read at that timestamp too, so a
//! statement sees one snapshot of the schema and the data.

pub mod account_sql;
pub mod accounts;
pub mod agg_pushdown;
pub mod arrow_rows;
pub mod error;
pub mod login;
pub mod mysql;
pub mod mysql_limits;
pub mod mysql_semantics;
pub mod output;
pub mod privileges;
pub mod pushdown;
pub mod session;
pub mod show;
pub mod table;
pub mod topn_pushdown;
pub mod write;

pub use error::FrontError;
pub use output::{Cell, ColumnKind, Output, ResultColumn};
pub use session::{Analyzed, FrontSession};

/// The one database of a Stratus cluster, as TiDB names its default one: `USE test` works,
/// and tables may be qualified with it.
pub const DATABASE: &str = "test";

/// A table `t` for the unit tests: id `table_id`, `columns` with ids 1, 2, ... and the first
/// one the primary key.
#[cfg(test)]
pub(crate) fn test_table(
    table_id: i64,
    columns: &[(&str, client::sql::SqlType)],
) -> client::sql::TableSchema {
    client::sql::TableSchema {
        id: table_id,
        name: "t".into(),
        columns: columns
            .iter()
            .zip(1..)
            .map(|((name, ty), id)| client::sql::Column {
                name: (*name).into(),
                id,
                ty: *ty,
            })
            .collect(),
        pk: 0,
        indexes: Vec::new(),
        next_index_id: 1,
    }
}
