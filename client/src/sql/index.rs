//! Secondary indexes: their definitions in the catalog, their entries beside the rows, and
//! `CREATE INDEX` / `DROP INDEX`.
//!
//! **Entries** (TiDB's layout, `wire::codec::table::index_key`): a non-unique index keeps
//! one key per row, `t{table}_i{index}{values}{handle}` → `0`; a unique index keeps
//! `t{table}_i{index}{values}` → the handle (8 bytes), except for values holding a NULL,
//! which never collide and are keyed with the handle as a non-unique entry is. Values are
//! the row's stored datums (`super::value`), comparable-encoded, so an equality on the
//! index's leading columns is a key prefix.
//!
//! **Writes.** Every statement that changes rows of an indexed table writes the entries in
//! the same Percolator transaction ([`row_changes`]): a changed row deletes its old entries
//! and puts its new ones, all deletes before all puts so a statement that moves a value
//! from one row to another keeps it. A unique entry that already holds another row's handle
//! is refused with [`SqlError::DuplicateEntry`] (MySQL's 1062); two statements putting the
//! same unique entry at once conflict on its key, as on a row's.
//!
//! **Creation is online** (after F1's schema change, as TiDB runs it):
//!
//! 1. the index is stored `WriteOnly`: every writer that reads this schema maintains it,
//!    no reader uses it;
//! 2. `CREATE INDEX` waits out the schema lease (`txn_write::SCHEMA_LEASE_MS`): a statement
//!    that read the schema before the index existed has committed below the backfill's read
//!    timestamp by then, or never will (explicit transactions lock the catalog row instead,
//!    and conflict with step 1);
//! 3. the backfill reads the rows in batches, each at a fresh timestamp, and writes their
//!    entries in a transaction of its own: a row a writer changed meanwhile conflicts on the
//!    entry's key, and the batch runs again;
//! 4. the index is stored `Public`: readers use it from the next statement.
//!
//! A unique index whose backfill finds two rows with one value is removed again and the
//! statement fails with the duplicate. `DROP INDEX` removes the definition; its entries stay
//! in storage under an id no index gets again (as a truncated table's rows do).

use std::collections::{HashMap, HashSet};

use sqlparser::ast;
use wire::codec::table::{
    decode_unique_index_value, index_key, index_prefix, prefix_next, record_key, record_range,
    unique_index_value,
};
use wire::coprocessor::{self as proto, ColumnInfo, DagRequest, ExecType, Executor, KeyRange};
use wire::datum::Datum;

use super::catalog::{self, TableSchema};
use super::txn_write::{self, CommitOptions, RowWrite};
use super::{Result, SqlError, simple_name, unsupported};
use crate::paging::Client;

/// Where an index is in its creation (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexState {
    /// Maintained by writers, not read: being backfilled.
    WriteOnly,
    /// Complete: readers may use it.
    Public,
}

impl IndexState {
    pub(crate) fn tag(self) -> u8 {
        match self {
            IndexState::WriteOnly => 1,
            IndexState::Public => 2,
        }
    }

    pub(crate) fn from_tag(t: u8) -> Option<IndexState> {
        match t {
            1 => Some(IndexState::WriteOnly),
            2 => Some(IndexState::Public),
            _ => None,
        }
    }
}

/// A secondary index of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDef {
    /// Unique within the table, never reused.
    pub id: i64,
    /// Lowercase.
    pub name: String,
    /// Positions of the indexed columns in the table's columns, in index order.
    pub columns: Vec<usize>,
    pub unique: bool,
    pub state: IndexState,
}

/// The value a non-unique entry stores (readers take everything from the key).
const NON_UNIQUE_VALUE: &[u8] = b"0";

impl IndexDef {
    /// The entry of `row` (every column of `table`, stored datums) with primary key
    /// `handle`: its key, and its value (module docs).
    pub fn entry(&self, table: &TableSchema, row: &[Datum], handle: i64) -> (Vec<u8>, Vec<u8>) {
        let values: Vec<Datum> = self
            .columns
            .iter()
            .map(|&c| normalized(row.get(c).cloned().unwrap_or(Datum::Null)))
            .collect();
        if self.unique && !values.iter().any(Datum::is_null) {
            (
                index_key(table.id, self.id, &values, None),
                unique_index_value(handle),
            )
        } else {
            (
                index_key(table.id, self.id, &values, Some(handle)),
                NON_UNIQUE_VALUE.to_vec(),
            )
        }
    }

    /// Whether an entry of this index is keyed by its values alone (a unique entry without
    /// a NULL), so another row's entry can take the same key.
    fn keyed_by_values(&self, row: &[Datum]) -> bool {
        self.unique
            && !self
                .columns
                .iter()
                .any(|&c| row.get(c).is_none_or(Datum::is_null))
    }

    /// The indexed columns' names, for messages and `SHOW CREATE TABLE`.
    pub fn column_names<'t>(&self, table: &'t TableSchema) -> Vec<&'t str> {
        self.columns
            .iter()
            .map(|&c| table.columns[c].name.as_str())
            .collect()
    }

    /// What an IndexScan of this index reads: every indexed column (the scan decodes the
    /// whole key), then the handle.
    fn scan_columns(&self, table: &TableSchema) -> Vec<ColumnInfo> {
        let infos = table.column_infos();
        // The primary key may be an indexed column too: there it is a value of the key,
        // and only the trailing column is the handle.
        let mut columns: Vec<ColumnInfo> = self
            .columns
            .iter()
            .map(|&c| ColumnInfo {
                pk_handle: false,
                ..infos[c].clone()
            })
            .collect();
        columns.push(infos[table.pk].clone());
        columns
    }
}

/// `d` as an entry keeps it: `-0.0` as `0.0` (they compare equal, and a lookup of either
/// must find both).
fn normalized(d: Datum) -> Datum {
    match d {
        Datum::Real(f) => Datum::Real(f + 0.0),
        other => other,
    }
}

/// A unique entry a statement puts: its key and the handle it holds.
pub type UniquePut = (Vec<u8>, i64);

/// One row a statement changes: its primary key, the row before (`None`: inserted) and
/// after (`None`: deleted), every column as stored datums.
pub type RowChange = (i64, Option<Vec<Datum>>, Option<Vec<Datum>>);

/// The writes of `changes` to `table`: every row's put or delete, then every index entry
/// delete, then every entry put (module docs), and the unique entries the statement puts
/// (key, handle), which [`check_unique`] must find free.
pub fn row_changes(
    table: &TableSchema,
    changes: &[RowChange],
) -> Result<(Vec<RowWrite>, Vec<UniquePut>)> {
    let mut rows = Vec::with_capacity(changes.len());
    let mut deletes = Vec::new();
    let mut puts = Vec::new();
    let mut unique = Vec::new();
    for (handle, old, new) in changes {
        let key = record_key(table.id, *handle);
        match new {
            Some(row) => {
                let value = super::insert::row_value(table, row.clone())?;
                rows.push(RowWrite::Put { key, value });
            }
            None => rows.push(RowWrite::Delete { key }),
        }
        for index in &table.indexes {
            let before = old.as_ref().map(|r| index.entry(table, r, *handle));
            let after = new.as_ref().map(|r| index.entry(table, r, *handle));
            if before == after {
                continue;
            }
            if let Some((k, _)) = &before
                && after.as_ref().is_none_or(|(a, _)| a != k)
            {
                deletes.push(RowWrite::Delete { key: k.clone() });
            }
            if let (Some((k, v)), Some(row)) = (after, new) {
                if index.keyed_by_values(row) {
                    unique.push((k.clone(), *handle));
                }
                puts.push(RowWrite::Put { key: k, value: v });
            }
        }
    }
    rows.extend(deletes);
    rows.extend(puts);
    Ok((rows, unique))
}

/// Refuses `puts` (unique entries a statement writes, with the handle each holds) when
/// another row holds one: two of them with one key, or a key whose current holder (the
/// caller's `buffered` write of it, if any; else the entry stored at `start_ts`) is another
/// row that the statement does not move off it (`deleted`: the keys it deletes).
pub async fn check_unique(
    client: &Client,
    table: &TableSchema,
    puts: &[(Vec<u8>, i64)],
    deleted: &HashSet<Vec<u8>>,
    buffered: &(dyn Fn(&[u8]) -> Option<RowWrite> + Sync),
    start_ts: u64,
) -> Result<()> {
    if puts.is_empty() {
        return Ok(());
    }
    let mut mine: HashMap<&[u8], i64> = HashMap::new();
    for (k, h) in puts {
        if let Some(other) = mine.insert(k, *h)
            && other != *h
        {
            return Err(duplicate_entry(table, k));
        }
    }
    let mut unseen = Vec::new();
    for (k, h) in puts {
        if deleted.contains(k) {
            continue;
        }
        match buffered(k) {
            Some(RowWrite::Put { value, .. }) => {
                if decode_unique_index_value(&value).ok() != Some(*h) {
                    return Err(duplicate_entry(table, k));
                }
            }
            Some(RowWrite::Delete { .. }) => {}
            Some(RowWrite::Lock { .. }) | None => unseen.push((k.clone(), *h)),
        }
    }
    for (k, holder) in stored_unique_entries(client, table, &unseen, start_ts).await? {
        if mine.get(k.as_slice()) != Some(&holder) {
            return Err(duplicate_entry(table, &k));
        }
    }
    Ok(())
}

/// The stored unique entries among `keys` at `start_ts`, with the handle each holds.
async fn stored_unique_entries(
    client: &Client,
    table: &TableSchema,
    keys: &[(Vec<u8>, i64)],
    start_ts: u64,
) -> Result<Vec<(Vec<u8>, i64)>> {
    let mut out = Vec::new();
    // One request per index: an IndexScan decodes one index's keys.
    for index in table.indexes.iter().filter(|i| i.unique) {
        let prefix = index_prefix(table.id, index.id);
        let mut ranges: Vec<KeyRange> = keys
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| point_range(k.clone()))
            .collect();
        if ranges.is_empty() {
            continue;
        }
        ranges.sort_by(|a, b| a.start.cmp(&b.start));
        ranges.dedup_by(|a, b| a.start == b.start);
        let dag = index_dag(table, index);
        for row in client.coprocessor(&dag, ranges, start_ts).await?.rows {
            let Some(Datum::Int(h)) = row.last() else {
                return Err(corrupt_entry(table, index, "no handle"));
            };
            let values = &row[..row.len() - 1];
            out.push((index_key(table.id, index.id, values, None), *h));
        }
    }
    Ok(out)
}

fn duplicate_entry(table: &TableSchema, key: &[u8]) -> SqlError {
    let index = table
        .indexes
        .iter()
        .find(|i| key.starts_with(&index_prefix(table.id, i.id)));
    let (name, entry) = match index {
        Some(i) => {
            let entry = wire::codec::table::decode_index_key(key, i.columns.len())
                .map(|(_, _, values, _)| {
                    values
                        .iter()
                        .zip(&i.columns)
                        .map(|(v, &c)| entry_text(table.columns[c].ty, v))
                        .collect::<Vec<_>>()
                        .join("-")
                })
                .unwrap_or_else(|_| "?".into());
            (i.name.clone(), entry)
        }
        None => ("?".into(), "?".into()),
    };
    SqlError::DuplicateEntry {
        table: table.name.clone(),
        index: name,
        entry,
    }
}

/// A stored value as MySQL prints it in a duplicate-entry message.
fn entry_text(ty: super::catalog::SqlType, d: &Datum) -> String {
    use super::catalog::SqlType;
    use super::value::{format_date, format_datetime, format_decimal};
    match (ty, d) {
        (_, Datum::Null) => "NULL".into(),
        (SqlType::Decimal { scale, .. }, Datum::Int(v)) => format_decimal(i128::from(*v), scale),
        (SqlType::Date, Datum::Int(v)) => format_date(*v),
        (SqlType::DateTime { .. }, Datum::Int(v)) => format_datetime(*v),
        (_, Datum::Int(v)) => v.to_string(),
        (_, Datum::Real(v)) => v.to_string(),
        (_, Datum::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
        (_, other) => format!("{other:?}"),
    }
}

fn corrupt_entry(table: &TableSchema, index: &IndexDef, what: &str) -> SqlError {
    SqlError::CorruptCatalog {
        table: table.name.clone(),
        reason: format!("an entry of index {} is corrupt: {what}", index.name),
    }
}

/// `IndexScan` of `index` answering every indexed column and the handle.
fn index_dag(table: &TableSchema, index: &IndexDef) -> DagRequest {
    DagRequest {
        executors: vec![Executor {
            tp: ExecType::IndexScan as i32,
            idx_scan: Some(proto::IndexScan {
                table_id: table.id,
                index_id: index.id,
                columns: index.scan_columns(table),
                desc: false,
                unique: index.unique,
            }),
            ..Executor::default()
        }],
        ..DagRequest::default()
    }
}

/// The key ranges of `index` holding the entries whose leading columns equal one of
/// `prefixes` (each a list of stored datums for the first columns of the index, in order).
pub fn prefix_ranges(
    table: &TableSchema,
    index: &IndexDef,
    prefixes: &[Vec<Datum>],
) -> Vec<KeyRange> {
    let mut ranges: Vec<KeyRange> = prefixes
        .iter()
        .map(|values| {
            let start = index_key(table.id, index.id, values, None);
            let end = prefix_next(&start);
            KeyRange::new(start, end)
        })
        .collect();
    ranges.sort_by(|a, b| a.start.cmp(&b.start));
    ranges.dedup_by(|a, b| a.start == b.start);
    ranges
}

/// The handles of the entries of `index` in `ranges` at `start_ts`, sorted, each once.
pub async fn lookup_handles(
    session: &crate::Session<'_>,
    table: &TableSchema,
    index: &IndexDef,
    ranges: Vec<KeyRange>,
    start_ts: u64,
) -> Result<(Vec<i64>, crate::paging::CopResult)> {
    let result = session
        .coprocessor(&index_dag(table, index), ranges, start_ts)
        .await?;
    let mut handles = Vec::with_capacity(result.rows.len());
    for r in &result.rows {
        match r.last() {
            Some(Datum::Int(h)) => handles.push(*h),
            _ => return Err(corrupt_entry(table, index, "no integer handle")),
        }
    }
    handles.sort_unstable();
    handles.dedup();
    Ok((handles, result))
}

/// The record-key ranges of `handles` (sorted), one point range each.
pub fn handle_point_ranges(table: &TableSchema, handles: &[i64]) -> Vec<KeyRange> {
    handles
        .iter()
        .map(|&h| point_range(record_key(table.id, h)))
        .collect()
}

/// The range holding exactly `key`.
pub fn point_range(key: Vec<u8>) -> KeyRange {
    let mut end = key.clone();
    end.push(0);
    KeyRange::new(key, end)
}

/// A planned `CREATE [UNIQUE] INDEX name ON table (columns)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateIndex {
    pub table: String,
    pub name: String,
    /// Whether the statement named the index (an inline `KEY (a)` may not).
    pub named: bool,
    pub columns: Vec<String>,
    pub unique: bool,
}

/// Plans `CREATE INDEX`: a name, plain columns (no expressions or prefixes; a `DESC` is
/// read as ascending, as MySQL before 8.0 did).
pub fn plan_create_index(ci: &ast::CreateIndex) -> Result<CreateIndex> {
    if ci.if_not_exists || ci.concurrently || ci.using.is_some() {
        return Err(unsupported(
            "CREATE INDEX with IF NOT EXISTS, CONCURRENTLY or USING",
        ));
    }
    if ci.predicate.is_some() || !ci.include.is_empty() || !ci.with.is_empty() {
        return Err(unsupported("a partial index, INCLUDE or WITH"));
    }
    let name = match &ci.name {
        Some(n) => simple_name(n, "index")?,
        None => return Err(unsupported("CREATE INDEX without a name")),
    };
    let table = simple_name(&ci.table_name, "table")?;
    let columns = index_columns(&ci.columns)?;
    Ok(CreateIndex {
        table,
        name,
        named: true,
        columns,
        unique: ci.unique,
    })
}

/// The column names of an index's column list (plain columns only).
pub(crate) fn index_columns(columns: &[ast::IndexColumn]) -> Result<Vec<String>> {
    let mut out = Vec::with_capacity(columns.len());
    for c in columns {
        match &c.column.expr {
            ast::Expr::Identifier(id) => out.push(id.value.to_ascii_lowercase()),
            other => return Err(unsupported(format!("an index on an expression: {other}"))),
        }
    }
    if out.is_empty() {
        return Err(unsupported("an index without columns"));
    }
    Ok(out)
}

/// The definition of `plan` on `table`, with the table's next index id: its columns exist
/// (each once), its name is new and 1 to 64 bytes (MySQL's limit).
pub fn define(table: &TableSchema, plan: &CreateIndex, state: IndexState) -> Result<IndexDef> {
    if plan.name.is_empty() || plan.name.len() > 64 {
        return Err(SqlError::BadTable {
            reason: format!(
                "an index name must be 1 to 64 bytes, found {} bytes",
                plan.name.len()
            ),
        });
    }
    if table.next_index_id == i64::MAX {
        return Err(SqlError::BadTable {
            reason: format!("no index id left in table {}", table.name),
        });
    }
    if table.index(&plan.name).is_some() || plan.name.eq_ignore_ascii_case("primary") {
        return Err(SqlError::IndexExists {
            table: table.name.clone(),
            index: plan.name.to_ascii_lowercase(),
        });
    }
    let mut columns = Vec::with_capacity(plan.columns.len());
    for c in &plan.columns {
        let i = table
            .column_index(c)
            .ok_or_else(|| SqlError::UnknownColumn {
                table: table.name.clone(),
                column: c.clone(),
            })?;
        if columns.contains(&i) {
            return Err(SqlError::BadTable {
                reason: format!("column {c} is listed twice in index {}", plan.name),
            });
        }
        columns.push(i);
    }
    Ok(IndexDef {
        id: table.next_index_id,
        name: plan.name.to_ascii_lowercase(),
        columns,
        unique: plan.unique,
        state,
    })
}

/// Rows read per backfill transaction, at most: a batch that meets a write conflict (a
/// writer changed one of its rows' entries after the batch read them) runs again with a
/// quarter of the rows, down to one, and a batch that commits doubles the next one back up,
/// so the backfill makes progress however busy the table's writers are.
const BACKFILL_BATCH: u64 = 1_000;
/// How many times a backfill batch or a catalog change runs again after a conflict.
const ATTEMPTS: usize = 20;

/// `CREATE INDEX` (module docs): returns the rows backfilled. `progress` is told the rows
/// done so far after each batch.
pub async fn create(
    client: &Client,
    plan: &CreateIndex,
    progress: &mut (dyn FnMut(u64) + Send),
) -> Result<u64> {
    // 1. WriteOnly. The index is known by table id and index id from here on: a table
    // truncated, or dropped and created again, meanwhile is another table (whose index ids
    // start at 1 again), and the statement fails instead of touching it.
    let (table_id, index) = change_schema(client, &plan.table, "CREATE INDEX", |schema| {
        let def = define(schema, plan, IndexState::WriteOnly)?;
        schema.next_index_id += 1;
        schema.indexes.push(def.clone());
        Ok((schema.id, def))
    })
    .await?;
    let same_table = |schema: &TableSchema| {
        if schema.id == table_id {
            Ok(())
        } else {
            Err(SqlError::SchemaChanged {
                table: schema.name.clone(),
            })
        }
    };
    // 2. The lease.
    let published = client.current_ts().await?;
    let done = async {
        wait_until_past(client, txn_write::schema_lease_end(published)).await?;
        // 3. Backfill.
        backfill(client, &plan.table, table_id, &index, progress).await
    }
    .await;
    let done = match done {
        Ok(n) => n,
        Err(e) => {
            // Best effort: a crash here leaves the write-only index, which writers keep
            // maintaining; DROP INDEX removes it.
            let _ = change_schema(client, &plan.table, "CREATE INDEX", |schema| {
                same_table(schema)?;
                schema.indexes.retain(|i| i.id != index.id);
                Ok(())
            })
            .await;
            return Err(e);
        }
    };
    // 4. Public.
    change_schema(client, &plan.table, "CREATE INDEX", |schema| {
        same_table(schema)?;
        match schema.indexes.iter_mut().find(|i| i.id == index.id) {
            Some(i) => {
                i.state = IndexState::Public;
                Ok(())
            }
            None => Err(SqlError::SchemaChanged {
                table: schema.name.clone(),
            }),
        }
    })
    .await?;
    Ok(done)
}

/// `DROP INDEX name ON table`.
pub async fn drop(client: &Client, table: &str, name: &str) -> Result<()> {
    change_schema(client, table, "DROP INDEX", |schema| {
        let before = schema.indexes.len();
        schema
            .indexes
            .retain(|i| !i.name.eq_ignore_ascii_case(name));
        if schema.indexes.len() == before {
            return Err(SqlError::UnknownIndex {
                table: schema.name.clone(),
                index: name.to_ascii_lowercase(),
            });
        }
        Ok(())
    })
    .await
}

/// Reads `table`'s schema, applies `change` and stores it, in one transaction at a fresh
/// timestamp; runs again after a conflict (another DDL, or a transaction that locked the
/// catalog row).
async fn change_schema<T>(
    client: &Client,
    table: &str,
    statement: &'static str,
    mut change: impl FnMut(&mut TableSchema) -> Result<T>,
) -> Result<T> {
    let key = catalog::catalog_key(table);
    let mut attempt = 0;
    loop {
        let start_ts = client.current_ts().await?;
        let mut schema = catalog::load_at(client, table, start_ts)
            .await?
            .ok_or_else(|| SqlError::UnknownTable {
                table: table.to_ascii_lowercase(),
            })?;
        let out = change(&mut schema)?;
        let writes = [RowWrite::Put {
            key: key.clone(),
            value: schema.encode(),
        }];
        match txn_write::write(
            client,
            &writes,
            start_ts,
            statement,
            CommitOptions::default(),
        )
        .await
        {
            Ok(_) => return Ok(out),
            Err(e) if attempt + 1 < ATTEMPTS && e.kind() == crate::ErrorKind::Locked => {
                attempt += 1;
                tokio::time::sleep(super::write_backoff(attempt as u32)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Returns once the TSO has passed `ts`.
async fn wait_until_past(client: &Client, ts: u64) -> Result<()> {
    loop {
        let now = client.current_ts().await?;
        if now > ts {
            return Ok(());
        }
        let ms = (ts - now) >> types::Ts::LOGICAL_BITS;
        tokio::time::sleep(std::time::Duration::from_millis(ms.clamp(1, 1_000))).await;
    }
}

/// Writes the entries of `index` for every row of `table` (module docs, step 3).
async fn backfill(
    client: &Client,
    table: &str,
    table_id: i64,
    index: &IndexDef,
    progress: &mut (dyn FnMut(u64) + Send),
) -> Result<u64> {
    let mut done = 0u64;
    let mut cursor: Option<Vec<u8>> = None;
    let mut limit = BACKFILL_BATCH;
    loop {
        let mut attempt = 0;
        let next = loop {
            match backfill_batch(client, table, table_id, index, cursor.as_deref(), limit).await {
                Err(e) if attempt + 1 < ATTEMPTS && e.kind() == crate::ErrorKind::Locked => {
                    attempt += 1;
                    limit = (limit / 4).max(1);
                    tokio::time::sleep(super::write_backoff(attempt as u32)).await;
                }
                other => break other?,
            }
        };
        match next {
            Some((n, after)) => {
                done += n;
                progress(done);
                cursor = Some(after);
                limit = (limit * 2).min(BACKFILL_BATCH);
            }
            None => return Ok(done),
        }
    }
}

/// One batch of at most `limit` rows per region of the backfill from `cursor` (the first
/// record key not yet done; `None`: the table's first): the rows read and the cursor after them, or `None` when no row is left.
async fn backfill_batch(
    client: &Client,
    table: &str,
    table_id: i64,
    index: &IndexDef,
    cursor: Option<&[u8]>,
    limit: u64,
) -> Result<Option<(u64, Vec<u8>)>> {
    let start_ts = client.current_ts().await?;
    let schema = catalog::load_at(client, table, start_ts)
        .await?
        .ok_or_else(|| SqlError::UnknownTable {
            table: table.to_ascii_lowercase(),
        })?;
    // The index as this schema has it: a concurrent DROP INDEX, TRUNCATE or DROP TABLE
    // ends the backfill.
    let index = match schema.indexes.iter().find(|i| i.id == index.id) {
        Some(i) if schema.id == table_id => i.clone(),
        _ => {
            return Err(SqlError::SchemaChanged {
                table: table.to_ascii_lowercase(),
            });
        }
    };
    let (start, end) = record_range(schema.id);
    let from = cursor.map(<[u8]>::to_vec).unwrap_or(start);
    let dag = DagRequest {
        executors: vec![
            Executor {
                tp: ExecType::TableScan as i32,
                tbl_scan: Some(proto::TableScan {
                    table_id: schema.id,
                    columns: schema.column_infos(),
                    desc: false,
                }),
                ..Executor::default()
            },
            Executor {
                tp: ExecType::Limit as i32,
                limit: Some(proto::Limit { limit }),
                ..Executor::default()
            },
        ],
        ..DagRequest::default()
    };
    let found = client
        .coprocessor(&dag, vec![KeyRange::new(from, end)], start_ts)
        .await?;
    // Each region answers up to the limit, in key order. Every row up to the first region
    // that stopped at its limit is read whole: those are this batch's (the rows after it in
    // other regions are read again by the next batch, no row is read by more than two).
    let pk = schema.pk;
    let handle_of = |r: &Vec<Datum>| match r.get(pk) {
        Some(Datum::Int(h)) => Some(*h),
        _ => None,
    };
    let mut per_region: HashMap<types::RegionId, (u64, i64)> = HashMap::new();
    let mut rows = Vec::new();
    for page in found.pages {
        for row in page.rows {
            let h = handle_of(&row)
                .ok_or_else(|| corrupt_entry(&schema, &index, "a row without a key"))?;
            let seen = per_region.entry(page.region_id).or_insert((0, h));
            seen.0 += 1;
            seen.1 = seen.1.max(h);
            rows.push(row);
        }
    }
    let cutoff = per_region
        .values()
        .filter(|(n, _)| *n >= limit)
        .map(|(_, last)| *last)
        .min();
    rows.retain(|r| cutoff.is_none_or(|c| handle_of(r).is_some_and(|h| h <= c)));
    rows.sort_by_key(|r| handle_of(r));
    let Some(last) = rows.last().and_then(handle_of) else {
        return Ok(None);
    };
    let only = TableSchema {
        indexes: vec![index.clone()],
        ..schema.clone()
    };
    let mut writes = Vec::with_capacity(rows.len());
    let mut unique = Vec::new();
    for row in &rows {
        let h =
            handle_of(row).ok_or_else(|| corrupt_entry(&schema, &index, "a row without key"))?;
        let (k, v) = index.entry(&only, row, h);
        if index.keyed_by_values(row) {
            unique.push((k.clone(), h));
        }
        writes.push(RowWrite::Put { key: k, value: v });
    }
    check_unique(client, &only, &unique, &HashSet::new(), &|_| None, start_ts).await?;
    txn_write::write(
        client,
        &writes,
        start_ts,
        "CREATE INDEX",
        CommitOptions::default(),
    )
    .await?;
    let mut after = record_key(schema.id, last);
    after.push(0);
    Ok(Some((rows.len() as u64, after)))
}

/// An index a scan reads first: the handles of the entries in `ranges` are the only rows
/// that can match the scan's conditions.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexChoice {
    pub index: IndexDef,
    pub ranges: Vec<KeyRange>,
    /// For EXPLAIN: `index=name(a, b) lookups=N`.
    pub text: String,
}

/// The most values one lookup takes from an `IN` list.
const MAX_LOOKUPS: usize = 10_000;

/// The index a scan of `table` with `conditions` (its Selection, over the table's columns)
/// reads first, if one is selective: an equality (or an `IN` list) on a public index's
/// leading columns, as many as are bound in order. Among several, a unique index bound on
/// every column wins, then the one with the most columns bound. Ranges and other
/// comparisons do not choose an index (without statistics a range may be most of the table).
pub fn choose(table: &TableSchema, conditions: &[proto::Expr]) -> Option<IndexChoice> {
    let mut conjuncts = Vec::new();
    for c in conditions {
        flatten_and(c, &mut conjuncts);
    }
    // Column → the values an equality or IN binds it to.
    let mut bound: HashMap<usize, Vec<Datum>> = HashMap::new();
    for c in conjuncts {
        if let Some((col, values)) = equality(table, c) {
            bound.entry(col).or_insert(values);
        }
    }
    // An equality on the primary key is a point read of the row already.
    if bound.contains_key(&table.pk) {
        return None;
    }
    let mut best: Option<(bool, usize, IndexChoice)> = None;
    for index in table.public_indexes() {
        let mut prefixes: Vec<Vec<Datum>> = vec![Vec::new()];
        let mut n = 0;
        for &c in &index.columns {
            let Some(values) = bound.get(&c) else { break };
            if prefixes.len() * values.len() > MAX_LOOKUPS {
                break;
            }
            prefixes = prefixes
                .iter()
                .flat_map(|p| {
                    values.iter().map(move |v| {
                        let mut p = p.clone();
                        p.push(v.clone());
                        p
                    })
                })
                .collect();
            n += 1;
        }
        if n == 0 {
            continue;
        }
        let whole_unique = index.unique && n == index.columns.len();
        let better = match &best {
            None => true,
            Some((u, m, _)) => (whole_unique, n) > (*u, *m),
        };
        if better {
            let ranges = prefix_ranges(table, index, &prefixes);
            let text = format!(
                "index={}({}) lookups={}",
                index.name,
                index.column_names(table)[..n].join(", "),
                ranges.len()
            );
            best = Some((
                whole_unique,
                n,
                IndexChoice {
                    index: index.clone(),
                    ranges,
                    text,
                },
            ));
        }
    }
    best.map(|(_, _, c)| c)
}

fn flatten_and<'e>(e: &'e proto::Expr, out: &mut Vec<&'e proto::Expr>) {
    if e.tp == proto::ExprType::ScalarFunc as i32 && e.sig == proto::ScalarFuncSig::And as i32 {
        for c in &e.children {
            flatten_and(c, out);
        }
    } else {
        out.push(e);
    }
}

/// `col = constant` (either way round) or `col IN (constants)`: the column and the stored
/// datums it must equal; `None` for any other condition, or a constant no stored value of
/// the column equals exactly.
fn equality(table: &TableSchema, e: &proto::Expr) -> Option<(usize, Vec<Datum>)> {
    use proto::{ExprType, ScalarFuncSig};
    if e.tp != ExprType::ScalarFunc as i32 {
        return None;
    }
    let column =
        |x: &proto::Expr| (x.tp == ExprType::ColumnRef as i32).then_some(x.column_offset as usize);
    let (col, constants): (usize, Vec<&proto::Expr>) = match ScalarFuncSig::from_i32(e.sig)? {
        ScalarFuncSig::Eq => match e.children.as_slice() {
            [a, b] => match (column(a), column(b)) {
                (Some(c), None) => (c, vec![b]),
                (None, Some(c)) => (c, vec![a]),
                _ => return None,
            },
            _ => return None,
        },
        ScalarFuncSig::In => {
            let (first, rest) = e.children.split_first()?;
            (column(first)?, rest.iter().collect())
        }
        _ => return None,
    };
    let ty = table.columns.get(col)?.ty;
    let mut values = Vec::with_capacity(constants.len());
    for c in constants {
        values.push(stored_constant(ty, c)?);
    }
    values.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    values.dedup();
    Some((col, values))
}

/// The stored datum of a column of type `ty` equal to constant `c`, if exactly one is.
fn stored_constant(ty: super::catalog::SqlType, c: &proto::Expr) -> Option<Datum> {
    use super::catalog::SqlType;
    use proto::ExprType;
    let int = |v: &[u8]| v.try_into().ok().map(i64::from_le_bytes);
    let real = |v: &[u8]| {
        v.try_into()
            .ok()
            .map(|b| f64::from_bits(u64::from_le_bytes(b)))
    };
    match (ExprType::from_i32(c.tp)?, ty) {
        (ExprType::Int64, SqlType::Double) => {
            let x = int(&c.val)?;
            let f = x as f64;
            (f as i64 == x && f.abs() < 9.0e15).then_some(Datum::Real(f + 0.0))
        }
        (ExprType::Int64, _) if ty != SqlType::Varchar => Some(Datum::Int(int(&c.val)?)),
        (ExprType::Float64, SqlType::Double) => {
            let f = real(&c.val)?;
            // -0.0 and 0.0 are equal: entries store 0.0 (`normalized`).
            f.is_finite().then_some(Datum::Real(f + 0.0))
        }
        (ExprType::Float64, SqlType::Int | SqlType::BigInt) => {
            let f = real(&c.val)?;
            // Within 2^53, where every integer is a double and no two share one: the
            // coprocessor compares an integer with a double as doubles.
            (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(Datum::Int(f as i64))
        }
        (ExprType::Bytes, SqlType::Varchar) => Some(Datum::Bytes(c.val.clone())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::sql::{Plan, parse, plan};

    fn table(sql: &str) -> TableSchema {
        match plan(&parse(sql).unwrap(), &|_| None).unwrap() {
            Plan::CreateTable(mut s) => {
                s.id = 5;
                s
            }
            other => panic!("not a create: {other:?}"),
        }
    }

    fn indexed() -> TableSchema {
        table(
            "create table t (id bigint primary key, a int, b varchar(4), d double, \
             key a (a), unique key ub (b, a), key d (d))",
        )
    }

    fn apply(store: &mut BTreeMap<Vec<u8>, Vec<u8>>, writes: &[RowWrite]) {
        for w in writes {
            match w {
                RowWrite::Put { key, value } => {
                    store.insert(key.clone(), value.clone());
                }
                RowWrite::Delete { key } => {
                    store.remove(key);
                }
                RowWrite::Lock { .. } => {}
            }
        }
    }

    proptest! {
        /// Statements of random inserts, updates and deletes, each applied as `row_changes`
        /// writes it: the stored index entries are exactly the entries of the rows stored,
        /// whatever values moved between rows.
        #[test]
        fn index_entries_always_match_the_rows_they_index(
            statements in proptest::collection::vec(
                proptest::collection::vec(
                    (0i64..6, proptest::option::of((
                        proptest::option::of(0i64..3),
                        proptest::option::of("[ab]{0,1}"),
                        proptest::option::of(prop_oneof![Just(0.0), Just(-0.0), Just(1.5)]),
                    ))),
                    1..5,
                ),
                1..8,
            ),
        ) {
            let t = indexed();
            let mut rows: BTreeMap<i64, Vec<Datum>> = BTreeMap::new();
            let mut store = BTreeMap::new();
            for statement in statements {
                let mut changes: Vec<RowChange> = Vec::new();
                let mut touched = HashSet::new();
                for (h, new) in statement {
                    if !touched.insert(h) {
                        continue;
                    }
                    let new = new.map(|(a, b, d)| {
                        vec![
                            Datum::Int(h),
                            a.map_or(Datum::Null, Datum::Int),
                            b.map_or(Datum::Null, |s| Datum::Bytes(s.into_bytes())),
                            d.map_or(Datum::Null, Datum::Real),
                        ]
                    });
                    changes.push((h, rows.get(&h).cloned(), new));
                }
                let (writes, _) = row_changes(&t, &changes).unwrap();
                let mut next = rows.clone();
                for (h, _, new) in changes {
                    match new {
                        Some(r) => next.insert(h, r),
                        None => next.remove(&h),
                    };
                }
                // A statement that leaves two rows with one unique value is refused
                // (`check_unique`): the model skips it.
                let mut unique_keys = HashSet::new();
                let collides = next.iter().any(|(h, r)| {
                    let ub = &t.indexes[1];
                    ub.keyed_by_values(r) && !unique_keys.insert(ub.entry(&t, r, *h).0)
                });
                if collides {
                    continue;
                }
                apply(&mut store, &writes);
                rows = next;
                let mut want: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
                for (h, r) in &rows {
                    want.insert(record_key(t.id, *h), Vec::new());
                    for i in &t.indexes {
                        let (k, v) = i.entry(&t, r, *h);
                        want.insert(k, v);
                    }
                }
                // Rows' values are checked elsewhere: compare keys, and the entries' values.
                let got_keys: Vec<&Vec<u8>> = store.keys().collect();
                let want_keys: Vec<&Vec<u8>> = want.keys().collect();
                prop_assert_eq!(got_keys, want_keys);
                for (k, v) in &want {
                    if !k.starts_with(&record_key(t.id, 0)[..10]) || v.is_empty() {
                        continue;
                    }
                    prop_assert_eq!(store.get(k), Some(v));
                }
            }
        }
    }

    #[test]
    fn a_unique_entry_with_a_null_is_keyed_by_its_handle_and_never_collides() {
        let t = indexed();
        let ub = &t.indexes[1];
        let row = |h: i64, a: Option<i64>| {
            vec![
                Datum::Int(h),
                a.map_or(Datum::Null, Datum::Int),
                Datum::Bytes(b"x".to_vec()),
                Datum::Null,
            ]
        };
        let (k1, v1) = ub.entry(&t, &row(1, Some(2)), 1);
        let (k2, _) = ub.entry(&t, &row(2, Some(2)), 2);
        assert_eq!(k1, k2, "one value, one key");
        assert_eq!(v1, unique_index_value(1));
        let (n1, _) = ub.entry(&t, &row(1, None), 1);
        let (n2, _) = ub.entry(&t, &row(2, None), 2);
        assert_ne!(n1, n2);
        let (_, unique) = row_changes(&t, &[(1, None, Some(row(1, Some(2))))]).unwrap();
        assert_eq!(unique, [(k1, 1)]);
        let (_, unique) = row_changes(&t, &[(1, None, Some(row(1, None)))]).unwrap();
        assert!(unique.is_empty());
    }

    fn eq(col: u32, c: proto::Expr) -> proto::Expr {
        proto::Expr::func(proto::ScalarFuncSig::Eq, vec![proto::Expr::column(col), c])
    }

    #[test]
    fn an_equality_on_leading_columns_chooses_an_index_and_a_range_does_not() {
        let t = indexed();
        // b = 'x' AND a = 1: the unique (b, a) bound whole beats `a`.
        let c = choose(
            &t,
            &[eq(2, proto::Expr::bytes("x")), eq(1, proto::Expr::int(1))],
        )
        .unwrap();
        assert_eq!(c.index.name, "ub");
        assert_eq!(c.ranges.len(), 1);
        // a IN (3, 1, 3): index a, two lookups.
        let inl = proto::Expr::func(
            proto::ScalarFuncSig::In,
            vec![
                proto::Expr::column(1),
                proto::Expr::int(3),
                proto::Expr::int(1),
                proto::Expr::int(3),
            ],
        );
        let c = choose(&t, &[inl]).unwrap();
        assert_eq!((c.index.name.as_str(), c.ranges.len()), ("a", 2));
        // d = 2 (an integer constant on a DOUBLE) looks up 2.0; d = -0.0 looks up 0.0.
        let c = choose(&t, &[eq(3, proto::Expr::int(2))]).unwrap();
        assert_eq!(c.index.name, "d");
        let zero = choose(&t, &[eq(3, proto::Expr::real(-0.0))]).unwrap();
        let row = vec![Datum::Int(1), Datum::Null, Datum::Null, Datum::Real(0.0)];
        let (k, _) = t.indexes[2].entry(&t, &row, 1);
        assert!(zero.ranges[0].start <= k && k < zero.ranges[0].end);
        // A range, a comparison with a column, a string on an INT: no index.
        let gt = proto::Expr::func(
            proto::ScalarFuncSig::Gt,
            vec![proto::Expr::column(1), proto::Expr::int(1)],
        );
        assert!(choose(&t, &[gt]).is_none());
        assert!(choose(&t, &[eq(1, proto::Expr::column(3))]).is_none());
        assert!(choose(&t, &[eq(1, proto::Expr::bytes("1"))]).is_none());
        // A write-only index is not read.
        let mut w = t.clone();
        w.indexes[0].state = IndexState::WriteOnly;
        assert!(choose(&w, &[eq(1, proto::Expr::int(1))]).is_none());
    }
}
