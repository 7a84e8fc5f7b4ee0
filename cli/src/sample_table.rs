//! The sample table of `stratus load`, `stratus demo` and `stratus bench`: five columns whose
//! values follow from the row number, so every aggregate has an answer computed without the
//! cluster.
//!
//! ```sql
//! CREATE TABLE <name> (id BIGINT PRIMARY KEY, k INT, grp INT, v DOUBLE, s VARCHAR(16))
//! ```
//!
//! Row `i` of `rows` (`0 <= i < rows`) has the handle `id = i - rows/2` (centred on 0, so the
//! first table of a local cluster spreads over both servers, see
//! [`crate::local_cluster::split_key`]), `k = i % 1000`, `grp = i % 16`,
//! `v = (i % 10007) / 10` and `s = "s{i % 97}"`.
//!
//! Rows are encoded exactly as `INSERT` encodes them (`record_key` → `encode_row` of the
//! non-key columns by column id) and written through the SQL front's transactional writer,
//! `batch` rows per transaction. A batch refused with `Busy` (its region is splitting: the
//! local cluster splits regions above 2 MiB) was rolled back by the writer and is written
//! again after a backoff, for up to [`BUSY_RETRY_FOR`].

use std::time::Duration;

use wire::codec::row::encode_row;
use wire::codec::table::record_key;
use wire::datum::Datum;

use client::Client;
use client::sql::insert::{InsertPlan, write};
use client::sql::{CommitOptions, Engine, SqlError, SqlType, TableSchema};

/// How long a batch is retried while its region is busy (splitting).
pub const BUSY_RETRY_FOR: Duration = Duration::from_secs(60);

/// The columns, in order: name and type. The first is the primary key.
pub const COLUMNS: [(&str, SqlType); 5] = [
    ("id", SqlType::BigInt),
    ("k", SqlType::Int),
    ("grp", SqlType::Int),
    ("v", SqlType::Double),
    ("s", SqlType::Varchar),
];

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Sql(String),
    #[error(
        "table {table} exists with other columns: expected (id BIGINT PRIMARY KEY, k INT, grp INT, \
         v DOUBLE, s VARCHAR), found {found}"
    )]
    OtherColumns { table: String, found: String },
    #[error(
        "table {table} has secondary indexes ({indexes}): the loader writes rows only; \
         load it with INSERT through `stratus sql` or the SQL endpoint, or drop the indexes"
    )]
    Indexed { table: String, indexes: String },
    #[error("table {table} is missing right after it was created")]
    Vanished { table: String },
    #[error("expected a batch of at least one row, found 0")]
    EmptyBatch,
    #[error("row {row} does not encode: {reason}")]
    Encode { row: u64, reason: String },
}

impl From<SqlError> for LoadError {
    fn from(e: SqlError) -> LoadError {
        LoadError::Sql(node::error_chain(&e))
    }
}

/// The `CREATE TABLE` statement of the sample table `name`.
pub fn create_statement(name: &str) -> String {
    let cols: Vec<String> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, (col, ty))| {
            let ty = match ty {
                SqlType::Varchar => "VARCHAR(16)".to_string(),
                other => other.name().to_string(),
            };
            let pk = if i == 0 { " PRIMARY KEY" } else { "" };
            format!("{col} {ty}{pk}")
        })
        .collect();
    format!("CREATE TABLE {name} ({})", cols.join(", "))
}

/// `CREATE TABLE <name> (id BIGINT PRIMARY KEY, k INT, grp INT, v DOUBLE, s VARCHAR(16))`; existing
/// table with the same columns is reused, a different one is an error.
pub async fn ensure_table(client: &Client, name: &str) -> Result<TableSchema, LoadError> {
    // A `&mut` binding: `Engine::execute` takes `&mut self` (the session's variables).
    let engine = &mut Engine::new(client);
    if let Some(schema) = engine.table(name).await? {
        return check_columns(schema);
    }
    match engine.execute(&create_statement(name)).await {
        Ok(_) | Err(SqlError::TableExists { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    match engine.table(name).await? {
        Some(schema) => check_columns(schema),
        None => Err(LoadError::Vanished { table: name.into() }),
    }
}

fn check_columns(schema: TableSchema) -> Result<TableSchema, LoadError> {
    if !schema.indexes.is_empty() {
        let names: Vec<&str> = schema.indexes.iter().map(|i| i.name.as_str()).collect();
        return Err(LoadError::Indexed {
            table: schema.name.clone(),
            indexes: names.join(", "),
        });
    }
    let found: Vec<(&str, SqlType)> = schema
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.ty))
        .collect();
    if found == COLUMNS && schema.pk == 0 {
        return Ok(schema);
    }
    let found = schema
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let pk = if i == schema.pk { " PRIMARY KEY" } else { "" };
            format!("{} {}{pk}", c.name, c.ty.name())
        })
        .collect::<Vec<_>>()
        .join(", ");
    Err(LoadError::OtherColumns {
        table: schema.name,
        found: format!("({found})"),
    })
}

/// The handle of row `i` of `rows`: centred on 0.
pub fn handle(i: u64, rows: u64) -> i64 {
    i as i64 - (rows / 2) as i64
}

/// The values of row `i` (`k`, `grp`, `v`, `s`), in column order after the key.
pub fn values(i: u64) -> [Datum; 4] {
    [
        Datum::Int((i % 1000) as i64),
        Datum::Int((i % 16) as i64),
        Datum::Real((i % 10007) as f64 / 10.0),
        Datum::Bytes(format!("s{}", i % 97).into_bytes()),
    ]
}

/// Row i (handle = i - rows/2): k = i % 1000, grp = i % 16, v = (i % 10007) as f64 / 10.0, s = "s{i % 97}";
/// written in transactions of `batch` rows; `progress(rows_done)` after each batch.
pub async fn load(
    client: &Client,
    schema: &TableSchema,
    rows: u64,
    batch: usize,
    progress: &mut dyn FnMut(u64),
) -> Result<(), LoadError> {
    if batch == 0 {
        return Err(LoadError::EmptyBatch);
    }
    let mut done = 0;
    while done < rows {
        let end = rows.min(done + batch as u64);
        let plan = InsertPlan {
            table: schema.clone(),
            rows: (done..end)
                .map(|i| encode(schema, i, rows))
                .collect::<Result<_, _>>()?,
        };
        write_retrying_busy(client, &plan).await?;
        done = end;
        progress(done);
    }
    Ok(())
}

/// [`write`], again after a backoff while the answer is `Busy`. Safe: a write that fails has
/// rolled back every key it prewrote, so the retry starts from nothing.
async fn write_retrying_busy(client: &Client, plan: &InsertPlan) -> Result<(), LoadError> {
    let started = std::time::Instant::now();
    let mut backoff = Duration::from_millis(50);
    loop {
        match write(client, plan, CommitOptions::default()).await {
            Ok(_) => return Ok(()),
            Err(e) if is_busy(&e) && started.elapsed() + backoff < BUSY_RETRY_FOR => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// A write a server refused for now ([`SqlError::ServerBusy`]: rolled back, retry).
fn is_busy(e: &SqlError) -> bool {
    e.kind() == client::ErrorKind::Busy
}

/// (record key, row value) of row `i`, as `INSERT` encodes it.
fn encode(schema: &TableSchema, i: u64, rows: u64) -> Result<(Vec<u8>, Vec<u8>), LoadError> {
    let cols: Vec<(i64, Datum)> = schema.columns[1..]
        .iter()
        .map(|c| c.id)
        .zip(values(i))
        .collect();
    let value = encode_row(&cols).map_err(|e| LoadError::Encode {
        row: i,
        reason: e.to_string(),
    })?;
    Ok((record_key(schema.id, handle(i, rows)), value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::sql::Column;

    #[test]
    fn handles_are_centred_on_zero() {
        let handles: Vec<i64> = (0..5).map(|i| handle(i, 5)).collect();
        assert_eq!(handles, [-2, -1, 0, 1, 2]);
        let handles: Vec<i64> = (0..4).map(|i| handle(i, 4)).collect();
        assert_eq!(handles, [-2, -1, 0, 1]);
        assert_eq!(handle(0, 1), 0);
    }

    #[test]
    fn values_follow_the_row_number() {
        assert_eq!(
            values(12345),
            [
                Datum::Int(345),
                Datum::Int(9),
                Datum::Real(233.8),
                Datum::Bytes(b"s26".to_vec())
            ]
        );
        assert_eq!(values(0)[2], Datum::Real(0.0));
    }

    #[test]
    fn the_create_statement_plans_to_the_expected_columns() {
        let stmt = client::sql::parse(&create_statement("t")).unwrap();
        let client::sql::Plan::CreateTable(schema) = client::sql::plan(&stmt, &|_| None).unwrap()
        else {
            panic!("not a CREATE TABLE");
        };
        assert_eq!(check_columns(schema).unwrap().columns.len(), 5);
    }

    /// The loader writes rows without index entries: a sample table given an index is
    /// refused, naming the index, instead of loaded into an index that misses its rows.
    #[test]
    fn a_table_with_secondary_indexes_is_refused_naming_them() {
        let create = create_statement("t");
        let sql = format!("{}, KEY by_k (k))", create.strip_suffix(')').unwrap());
        let stmt = client::sql::parse(&sql).unwrap();
        let client::sql::Plan::CreateTable(schema) = client::sql::plan(&stmt, &|_| None).unwrap()
        else {
            panic!("not a CREATE TABLE");
        };
        let e = check_columns(schema).unwrap_err().to_string();
        assert!(e.contains("secondary indexes (by_k)"), "{e}");
    }

    #[test]
    fn a_table_with_other_columns_is_refused_naming_them() {
        let schema = TableSchema {
            id: 1,
            name: "t".into(),
            columns: vec![
                Column {
                    name: "id".into(),
                    id: 1,
                    ty: SqlType::BigInt,
                },
                Column {
                    name: "x".into(),
                    id: 2,
                    ty: SqlType::Int,
                },
            ],
            pk: 0,
            indexes: Vec::new(),
            next_index_id: 1,
        };
        let e = check_columns(schema).unwrap_err().to_string();
        assert!(e.contains("found (id BIGINT PRIMARY KEY, x INT)"), "{e}");
    }

    #[test]
    fn only_a_busy_server_is_retried() {
        assert!(is_busy(&SqlError::ServerBusy {
            statement: "insert",
            reason: "shard busy: splitting".into(),
        }));
        let conflict = SqlError::WriteConflict {
            statement: "insert",
            start_ts: 1,
            conflict_commit_ts: 2,
        };
        assert!(!is_busy(&conflict));
        assert!(!is_busy(&SqlError::UnknownTable { table: "t".into() }));
    }

    #[test]
    fn rows_encode_as_insert_encodes_them() {
        let stmt = client::sql::parse(&create_statement("t")).unwrap();
        let client::sql::Plan::CreateTable(mut schema) =
            client::sql::plan(&stmt, &|_| None).unwrap()
        else {
            panic!("not a CREATE TABLE");
        };
        schema.id = 7;
        let insert = client::sql::parse("INSERT INTO t VALUES (-1, 1, 1, 0.1, 's1')").unwrap();
        let client::sql::Plan::Insert(plan) =
            client::sql::plan(&insert, &|_| Some(schema.clone())).unwrap()
        else {
            panic!("not an INSERT");
        };
        assert_eq!(encode(&schema, 1, 4).unwrap(), plan.rows[0]);
    }
}
