//! An explicit transaction (`BEGIN` ... `COMMIT`): one Percolator transaction over several
//! statements.
//!
//! * **Reads** happen at the transaction's `start_ts`, taken at `BEGIN`, and see the
//!   transaction's own writes: a front overlays the buffered rows of a table on what the
//!   regions return ([`overlay`]).
//! * **Writes** are buffered here, the last write of each key kept, in the order each key was
//!   first written (the first key is the primary, as for a single statement). Nothing reaches
//!   the servers before `COMMIT`, so an abandoned transaction leaves no locks behind.
//! * **`COMMIT`** writes the buffer with [`txn_write::write`] at the transaction's
//!   `start_ts`: 1PC in one region, else 2PC (or async commit when the session asks). A row
//!   another transaction committed after `start_ts` fails the prewrite: the transaction is
//!   rolled back and the error is [`SqlError::TxnConflict`] (MySQL's 1213), which is what makes
//!   a lost update impossible. A lock in the way (resolved by the refused attempt) or a busy
//!   server also rolls it back ([`SqlError::TxnAborted`], 1213 too): the prewrite's rollback
//!   leaves a rollback record at `start_ts`, so the same transaction cannot prewrite again;
//!   the client runs it again from `BEGIN`, as MySQL clients do after a deadlock.
//! * **`ROLLBACK`** drops the buffer.
//!
//! The buffer is bounded ([`MAX_KEYS`], [`MAX_BYTES`], TiDB's transaction size limit): a
//! statement that would pass either is refused and leaves the buffer as it was.

use std::collections::HashMap;

use wire::codec::row::{ColumnValue, RowView, decode_value};
use wire::codec::table::{decode_record_key, record_range};
use wire::datum::Datum;

use super::catalog::TableSchema;
use super::insert::InsertPlan;
use super::txn_write::{self, CommitOptions, RowWrite, WriteOutcome};
use super::{Result, SqlError};
use crate::paging::Client;

/// The most keys one transaction buffers.
pub const MAX_KEYS: usize = 300_000;
/// The most bytes (keys and values) one transaction buffers (TiDB's default
/// `txn-total-size-limit`, 100 MiB).
pub const MAX_BYTES: usize = 100 << 20;

/// The most keys a transaction commits under the schema lease ([`SchemaHold::CheckAtCommit`]):
/// a larger one could take longer than the lease to prewrite, so it locks its tables'
/// catalog rows instead.
pub const LEASE_COMMIT_MAX_KEYS: usize = 10_000;
/// The most bytes (keys and values) a transaction commits under the schema lease.
pub const LEASE_COMMIT_MAX_BYTES: usize = 8 << 20;

/// How `COMMIT` keeps the table schemas the transaction's writes were encoded with: a
/// `CREATE INDEX`, `TRUNCATE` or re-`CREATE` that committed meanwhile must not be passed by
/// rows written for the schema it replaced (an index entry missing, rows under an old table
/// id). Each choice is correct on its own; they differ in what they cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaHold {
    /// The schemas were read at `start_ts` and the writes commit within the schema lease of
    /// it (an autocommit statement's first try: it runs in well under the lease).
    LeaseFromStart,
    /// `COMMIT` reads every written table's schema again at a fresh timestamp `K` and rolls
    /// the transaction back if one changed since `start_ts` ([`SqlError::SchemaChanged`]);
    /// otherwise the writes commit within the lease of `K`. Concurrent transactions on one
    /// table do not conflict over the schema. (A transaction larger than
    /// [`LEASE_COMMIT_MAX_KEYS`] or [`LEASE_COMMIT_MAX_BYTES`] commits as
    /// [`SchemaHold::CatalogLock`].)
    CheckAtCommit,
    /// The tables' catalog rows are locked with the writes: a schema change committed after
    /// `start_ts` is a write conflict, and no time bound applies; but every two such
    /// transactions on one table conflict on the lock (an autocommit statement that overran
    /// the lease, a large transaction).
    CatalogLock,
}

/// One open transaction.
#[derive(Debug, Clone)]
pub struct Transaction {
    start_ts: u64,
    /// The schemas the writes were encoded with, one per table (kept for `COMMIT`).
    schemas: Vec<TableSchema>,
    /// The last write of each key, in the order keys were first written.
    writes: Vec<RowWrite>,
    /// Position of each key's write in `writes`.
    index: HashMap<Vec<u8>, usize>,
    /// Bytes of keys and values in `writes`.
    bytes: usize,
}

/// A buffered row of one table, for a read's overlay: its handle and its columns (in table
/// order), or `None` when the transaction deleted it.
pub type PendingRow = (i64, Option<Vec<Datum>>);

impl Transaction {
    pub fn new(start_ts: u64) -> Transaction {
        Transaction {
            start_ts,
            schemas: Vec::new(),
            writes: Vec::new(),
            index: HashMap::new(),
            bytes: 0,
        }
    }

    /// The timestamp every read of the transaction uses.
    pub fn start_ts(&self) -> u64 {
        self.start_ts
    }

    /// Whether the transaction wrote nothing yet.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// The buffered write of `key`, if any.
    pub fn buffered(&self, key: &[u8]) -> Option<&RowWrite> {
        self.index.get(key).map(|&i| &self.writes[i])
    }

    /// The buffered writes, in commit order (the first is the primary).
    pub fn writes(&self) -> &[RowWrite] {
        &self.writes
    }

    /// Adds `writes` to the buffer (a key written again keeps its place and takes the new
    /// write), or refuses them all when the buffer would pass its limits.
    pub fn buffer(&mut self, writes: Vec<RowWrite>) -> Result<()> {
        let size = |w: &RowWrite| {
            w.key().len()
                + match w {
                    RowWrite::Put { value, .. } => value.len(),
                    RowWrite::Delete { .. } | RowWrite::Lock { .. } => 0,
                }
        };
        let (mut keys, mut bytes) = (self.writes.len(), self.bytes);
        // The size each key of the statement has so far (`None`: not written yet).
        let mut current: HashMap<&[u8], Option<usize>> = HashMap::new();
        for w in &writes {
            let before = match current.get(w.key()) {
                Some(s) => *s,
                None => self.index.get(w.key()).map(|&i| size(&self.writes[i])),
            };
            match before {
                Some(b) => bytes = bytes - b + size(w),
                None => {
                    keys += 1;
                    bytes += size(w);
                }
            }
            current.insert(w.key(), Some(size(w)));
        }
        if keys > MAX_KEYS || bytes > MAX_BYTES {
            return Err(SqlError::TxnTooLarge {
                keys,
                bytes,
                max_keys: MAX_KEYS,
                max_bytes: MAX_BYTES,
            });
        }
        for w in writes {
            self.bytes += size(&w);
            match self.index.get(w.key()) {
                Some(&i) => {
                    self.bytes -= size(&self.writes[i]);
                    self.writes[i] = w;
                }
                None => {
                    self.index.insert(w.key().to_vec(), self.writes.len());
                    self.writes.push(w);
                }
            }
        }
        Ok(())
    }

    /// `INSERT` inside the transaction: refuses a key the transaction sees (buffered, or
    /// stored at its `start_ts` and not deleted by it), then buffers the rows. Returns the
    /// rows inserted.
    pub async fn insert(&mut self, client: &Client, plan: &InsertPlan) -> Result<u64> {
        super::modify::refuse_indexed(&plan.table)?;
        self.check_absent(client, &plan.table, plan.rows.iter().map(|(k, _)| k))
            .await?;
        self.buffer(plan.writes())?;
        self.note_schema(&plan.table);
        Ok(plan.rows.len() as u64)
    }

    /// Refuses a row of `plan` whose primary key the transaction sees: buffered, or stored
    /// at its `start_ts` and not deleted by it.
    async fn check_absent<'k>(
        &self,
        client: &Client,
        table: &TableSchema,
        keys: impl Iterator<Item = &'k Vec<u8>>,
    ) -> Result<()> {
        let mut unseen = Vec::new();
        for key in keys {
            match self.buffered(key) {
                Some(RowWrite::Put { .. }) => return Err(duplicate(table, key)),
                Some(RowWrite::Delete { .. }) => {}
                Some(RowWrite::Lock { .. }) | None => unseen.push(key),
            }
        }
        super::insert::check_no_stored_duplicate(client, table, &unseen, self.start_ts).await
    }

    /// `INSERT` of `rows` (every column, stored datums) inside the transaction, with their
    /// index entries: refuses a primary key the transaction sees, as [`Transaction::insert`]
    /// does, and a unique entry another row holds ([`super::index::check_unique`]).
    pub async fn insert_rows(
        &mut self,
        client: &Client,
        table: &TableSchema,
        rows: Vec<Vec<Datum>>,
    ) -> Result<u64> {
        let mut seen = std::collections::HashSet::new();
        let mut changes = Vec::with_capacity(rows.len());
        for row in rows {
            let handle = super::insert::row_handle(table, &row)?;
            if !seen.insert(handle) {
                return Err(SqlError::DuplicateKey {
                    table: table.name.clone(),
                    key: handle,
                });
            }
            changes.push((handle, None, Some(row)));
        }
        let keys: Vec<Vec<u8>> = changes
            .iter()
            .map(|(h, _, _)| wire::codec::table::record_key(table.id, *h))
            .collect();
        self.check_absent(client, table, keys.iter()).await?;
        self.apply(client, table, &changes).await
    }

    /// Buffers `changes` to rows of `table` with their index entries (`super::index`),
    /// refusing a unique entry another row holds; returns the rows changed. The buffer is
    /// unchanged when it fails.
    pub async fn apply(
        &mut self,
        client: &Client,
        table: &TableSchema,
        changes: &[super::index::RowChange],
    ) -> Result<u64> {
        let (writes, unique) = super::index::row_changes(table, changes)?;
        let deleted: std::collections::HashSet<Vec<u8>> = writes
            .iter()
            .filter_map(|w| match w {
                RowWrite::Delete { key } => Some(key.clone()),
                _ => None,
            })
            .collect();
        super::index::check_unique(
            client,
            table,
            &unique,
            &deleted,
            &|k| self.buffered(k).cloned(),
            self.start_ts,
        )
        .await?;
        self.buffer(writes)?;
        self.note_schema(table);
        Ok(changes.len() as u64)
    }

    /// Remembers that writes were encoded with `schema` (a table written before keeps the
    /// schema of its first write: every statement of the transaction reads the schemas at
    /// `start_ts`, so they are the same).
    fn note_schema(&mut self, schema: &TableSchema) {
        if !self.schemas.iter().any(|s| s.name == schema.name) {
            self.schemas.push(schema.clone());
        }
    }

    /// The buffered rows of `table`, decoded, by handle.
    pub fn pending_rows(&self, table: &TableSchema) -> Result<Vec<PendingRow>> {
        let (start, end) = record_range(table.id);
        let mut rows = Vec::new();
        for w in &self.writes {
            let key = w.key();
            if key < start.as_slice() || key >= end.as_slice() {
                continue;
            }
            let (_, handle) = decode_record_key(key).map_err(|e| corrupt_row(table, e))?;
            match w {
                RowWrite::Put { value, .. } => {
                    rows.push((handle, Some(decode_row(table, handle, value)?)));
                }
                RowWrite::Delete { .. } => rows.push((handle, None)),
                RowWrite::Lock { .. } => {}
            }
        }
        Ok(rows)
    }

    /// `COMMIT` (module docs), keeping the schemas as `hold` says.
    pub async fn commit(
        mut self,
        client: &Client,
        opts: CommitOptions,
        hold: SchemaHold,
    ) -> Result<WriteOutcome> {
        let large =
            self.writes.len() > LEASE_COMMIT_MAX_KEYS || self.bytes > LEASE_COMMIT_MAX_BYTES;
        let hold = match hold {
            SchemaHold::CheckAtCommit if large => SchemaHold::CatalogLock,
            h => h,
        };
        let schema_lease = match hold {
            SchemaHold::LeaseFromStart => Some(self.start_ts),
            SchemaHold::CheckAtCommit => {
                let checked_at = client.current_ts().await?;
                for schema in &self.schemas {
                    super::catalog::check_unchanged(client, schema, checked_at).await?;
                }
                Some(checked_at)
            }
            SchemaHold::CatalogLock => {
                let locks = self
                    .schemas
                    .iter()
                    .map(|s| RowWrite::Lock {
                        key: super::catalog::catalog_key(&s.name),
                    })
                    .collect();
                self.buffer(locks)?;
                None
            }
        };
        let opts = CommitOptions {
            schema_lease,
            ..opts
        };
        match txn_write::write(client, &self.writes, self.start_ts, "commit", opts).await {
            Err(SqlError::WriteConflict {
                start_ts,
                conflict_commit_ts,
                ..
            }) => Err(SqlError::TxnConflict {
                start_ts,
                conflict_commit_ts,
            }),
            // `SchemaLeaseExpired` stays itself: an autocommit statement runs again locking
            // its catalog row on it (an explicit transaction reports it as 1213 too).
            Err(e @ (SqlError::KeyLocked { .. } | SqlError::ServerBusy { .. })) => {
                Err(SqlError::TxnAborted {
                    start_ts: self.start_ts,
                    reason: e.to_string(),
                })
            }
            other => other,
        }
    }
}

/// The rows a read returns inside a transaction: `stored` (every column in table order, as
/// the regions returned them at the transaction's `start_ts`) without the rows the
/// transaction wrote, then the rows it put. `pk` is the handle's column.
pub fn overlay(stored: Vec<Vec<Datum>>, pk: usize, pending: &[PendingRow]) -> Vec<Vec<Datum>> {
    let written: std::collections::HashSet<i64> = pending.iter().map(|(h, _)| *h).collect();
    let mut rows: Vec<Vec<Datum>> = stored
        .into_iter()
        .filter(|r| !matches!(r.get(pk), Some(Datum::Int(h)) if written.contains(h)))
        .collect();
    rows.extend(pending.iter().filter_map(|(_, row)| row.clone()));
    rows
}

/// A row value of `table` decoded into every column (the handle in the primary key's place).
fn decode_row(table: &TableSchema, handle: i64, value: &[u8]) -> Result<Vec<Datum>> {
    let view = RowView::parse(value).map_err(|e| corrupt_row(table, e))?;
    table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i == table.pk {
                return Ok(Datum::Int(handle));
            }
            match view.find(c.id) {
                ColumnValue::Absent | ColumnValue::Null => Ok(Datum::Null),
                ColumnValue::Value(b) => {
                    decode_value(b, c.ty.field_type()).map_err(|e| corrupt_row(table, e))
                }
            }
        })
        .collect()
}

fn corrupt_row(table: &TableSchema, e: impl std::fmt::Display) -> SqlError {
    SqlError::CorruptCatalog {
        table: table.name.clone(),
        reason: format!("a buffered row does not decode: {e}"),
    }
}

fn duplicate(table: &TableSchema, key: &[u8]) -> SqlError {
    match decode_record_key(key) {
        Ok((_, handle)) => SqlError::DuplicateKey {
            table: table.name.clone(),
            key: handle,
        },
        Err(e) => corrupt_row(table, e),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use wire::codec::row::encode_row;
    use wire::codec::table::record_key;

    use super::*;
    use crate::sql::{Plan, parse, plan};

    fn schema() -> TableSchema {
        let Plan::CreateTable(mut s) = plan(
            &parse("create table t (id bigint primary key, a int, s varchar(10))").unwrap(),
            &|_| None,
        )
        .unwrap() else {
            unreachable!()
        };
        s.id = 5;
        s
    }

    fn put(handle: i64, a: i64) -> RowWrite {
        RowWrite::Put {
            key: record_key(5, handle),
            value: encode_row(&[(2, Datum::Int(a)), (3, Datum::Null)]).unwrap(),
        }
    }

    fn delete(handle: i64) -> RowWrite {
        RowWrite::Delete {
            key: record_key(5, handle),
        }
    }

    #[test]
    fn buffered_rows_decode_with_the_handle_in_the_primary_keys_place() {
        let mut t = Transaction::new(9);
        t.buffer(vec![put(3, -1), delete(4)]).unwrap();
        t.buffer(vec![RowWrite::Put {
            key: b"m_catalog_other".to_vec(),
            value: Vec::new(),
        }])
        .unwrap();
        let rows = t.pending_rows(&schema()).unwrap();
        assert_eq!(
            rows,
            vec![
                (3, Some(vec![Datum::Int(3), Datum::Int(-1), Datum::Null])),
                (4, None)
            ]
        );
    }

    #[test]
    fn a_statement_past_the_size_limit_is_refused_and_leaves_the_buffer_as_it_was() {
        let mut t = Transaction::new(1);
        t.buffer(vec![put(1, 1)]).unwrap();
        let big = RowWrite::Put {
            key: record_key(5, 2),
            value: vec![0; MAX_BYTES],
        };
        let e = t.buffer(vec![put(3, 3), big]).unwrap_err();
        assert!(matches!(e, SqlError::TxnTooLarge { keys: 3, .. }), "{e}");
        assert_eq!(t.writes(), &[put(1, 1)]);
    }

    #[test]
    fn the_overlay_replaces_written_rows_and_drops_deleted_ones() {
        let row = |h: i64, a: i64| vec![Datum::Int(h), Datum::Int(a)];
        let stored = vec![row(1, 10), row(2, 20), row(3, 30)];
        let pending = vec![(2, Some(row(2, 21))), (3, None), (7, Some(row(7, 70)))];
        let mut got = overlay(stored, 0, &pending);
        got.sort_by_key(|r| match r[0] {
            Datum::Int(h) => h,
            _ => unreachable!(),
        });
        assert_eq!(got, vec![row(1, 10), row(2, 21), row(7, 70)]);
    }

    proptest! {
        /// The buffer against a model: the last write of each key wins, keys keep the place
        /// of their first write, and the byte count is the sum over what is kept.
        #[test]
        fn the_buffer_keeps_the_last_write_of_each_key_in_first_write_order(
            ops in proptest::collection::vec(
                proptest::collection::vec((0i64..8, proptest::option::of(0i64..100)), 0..6),
                0..10,
            )
        ) {
            let mut t = Transaction::new(1);
            let mut order: Vec<i64> = Vec::new();
            let mut last: BTreeMap<i64, RowWrite> = BTreeMap::new();
            for statement in ops {
                let writes: Vec<RowWrite> = statement
                    .iter()
                    .map(|(h, a)| a.map_or_else(|| delete(*h), |a| put(*h, a)))
                    .collect();
                for (h, w) in statement.iter().map(|(h, _)| *h).zip(&writes) {
                    if !order.contains(&h) {
                        order.push(h);
                    }
                    last.insert(h, w.clone());
                }
                t.buffer(writes).unwrap();
            }
            let want: Vec<RowWrite> = order.iter().map(|h| last[h].clone()).collect();
            prop_assert_eq!(t.writes(), want.as_slice());
            let bytes: usize = want
                .iter()
                .map(|w| w.key().len() + match w {
                    RowWrite::Put { value, .. } => value.len(),
                    _ => 0,
                })
                .sum();
            prop_assert_eq!(t.bytes, bytes);
            for (h, w) in &last {
                prop_assert_eq!(t.buffered(&record_key(5, *h)), Some(w));
            }
        }

        /// The overlay against a model: a map from handle to row, stored rows first, then the
        /// transaction's writes applied in order.
        #[test]
        fn the_overlay_is_the_stored_rows_with_the_writes_applied(
            stored in proptest::collection::btree_map(0i64..20, 0i64..100, 0..10),
            pending in proptest::collection::btree_map(0i64..20, proptest::option::of(0i64..100), 0..10),
        ) {
            let row = |h: i64, a: i64| vec![Datum::Int(a), Datum::Int(h)];
            let mut model: BTreeMap<i64, i64> = stored.clone();
            for (h, a) in &pending {
                match a {
                    Some(a) => { model.insert(*h, *a); }
                    None => { model.remove(h); }
                }
            }
            let stored_rows = stored.iter().map(|(h, a)| row(*h, *a)).collect();
            let pending_rows: Vec<PendingRow> =
                pending.iter().map(|(h, a)| (*h, a.map(|a| row(*h, a)))).collect();
            let mut got = overlay(stored_rows, 1, &pending_rows);
            got.sort_by_key(|r| match r[1] { Datum::Int(h) => h, _ => unreachable!() });
            let want: Vec<Vec<Datum>> = model.iter().map(|(h, a)| row(*h, *a)).collect();
            prop_assert_eq!(got, want);
        }
    }
}
