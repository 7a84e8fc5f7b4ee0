//! The catalog: table schemas, planned from `CREATE TABLE` and stored in the cluster itself.
//!
//! One committed row per table under the reserved key prefix [`CATALOG_PREFIX`]
//! (`m_catalog_<lowercase name>`; table data lives under `t` and never collides), value = the
//! schema encoded by [`TableSchema::encode`]. Column ids are 1, 2, ... in declaration order;
//! the primary key column is the row handle (`ColumnInfo.pk_handle`) and is not stored in the
//! row value.
//!
//! Table ids are sequential from 1, as in TiDB: the counter row [`NEXT_TABLE_ID_KEY`] (value =
//! the next id, u64 little-endian; absent = 1) is read with the existence check at one
//! `start_ts` and written with the catalog row in one transaction at that `start_ts`. Two
//! clients creating tables at the same moment conflict on the counter (Percolator's write
//! conflict): the loser retries from a fresh timestamp, so ids are never given twice and a
//! name is never stored twice. Sequential ids make key placement predictable: `stratus up`
//! splits the key space between its two servers inside table 1.

use sqlparser::ast::{self, ColumnOption, DataType, TableConstraint};
use wire::coprocessor::ColumnInfo;
use wire::datum::FieldType;

use super::index::{IndexDef, IndexState};
use super::txn_write::{self, RowWrite};
use super::{Result, SqlError, simple_name, unsupported};
use crate::error::Error;
use crate::paging::Client;

/// Key prefix of catalog rows in the cluster.
pub const CATALOG_PREFIX: &[u8] = b"m_catalog_";
/// The table id counter (outside [`CATALOG_PREFIX`], so no table name can collide with it).
pub const NEXT_TABLE_ID_KEY: &[u8] = b"m_next_table_id";
/// How many times `CREATE TABLE` retries after losing the counter to a concurrent create.
const CREATE_ATTEMPTS: usize = 8;
/// Version byte of [`TableSchema::encode`]'s layout without secondary indexes.
pub const FORMAT_VERSION: u8 = 1;
/// Version byte of the layout with the secondary-index section (written only by a table
/// that has or had an index, so a table without one keeps its version-1 bytes).
pub const FORMAT_VERSION_INDEXES: u8 = 2;

/// A column's SQL type. The four after `Varchar` are stored as integers (`super::value`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlType {
    /// 32-bit range, held as Int64.
    Int,
    BigInt,
    Double,
    /// Bytes; the declared length is not enforced in this slice.
    Varchar,
    /// Exact: the value × 10^scale in an i64 (precision at most 18).
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// Days since 1970-01-01.
    Date,
    /// Microseconds since 1970-01-01 UTC; `fsp` fractional digits kept (0..=6). `TIMESTAMP`
    /// is stored the same way (no time zone conversion: the session zone is UTC).
    DateTime {
        fsp: u8,
    },
    /// 0 or 1 (MySQL's `BOOLEAN` is `TINYINT(1)`; a value other than 0 is stored as 1).
    Boolean,
}

impl SqlType {
    /// The type's tag in [`TableSchema::encode`]; `DECIMAL` is followed by its precision and
    /// scale bytes, `DATETIME` by its fsp byte.
    fn tag(self) -> u8 {
        match self {
            SqlType::Int => 1,
            SqlType::BigInt => 2,
            SqlType::Double => 3,
            SqlType::Varchar => 4,
            SqlType::Decimal { .. } => 5,
            SqlType::Date => 6,
            SqlType::DateTime { .. } => 7,
            SqlType::Boolean => 8,
        }
    }

    /// The bytes after the tag.
    fn params(self) -> Vec<u8> {
        match self {
            SqlType::Decimal { precision, scale } => vec![precision, scale],
            SqlType::DateTime { fsp } => vec![fsp],
            _ => Vec::new(),
        }
    }

    /// The type of `tag`, taking its parameter bytes from `params`; `None` for an unknown
    /// tag or parameters out of range.
    fn from_tag(t: u8, params: &mut dyn FnMut(usize) -> Option<Vec<u8>>) -> Option<SqlType> {
        Some(match t {
            1 => SqlType::Int,
            2 => SqlType::BigInt,
            3 => SqlType::Double,
            4 => SqlType::Varchar,
            5 => {
                let p = params(2)?;
                SqlType::decimal(p[0], p[1]).ok()?
            }
            6 => SqlType::Date,
            7 => {
                let fsp = params(1)?[0];
                (fsp <= 6).then_some(SqlType::DateTime { fsp })?
            }
            8 => SqlType::Boolean,
            _ => return None,
        })
    }

    /// `DECIMAL(precision, scale)`, checked as MySQL checks it (scale ≤ precision), within
    /// what an i64 holds.
    pub fn decimal(precision: u8, scale: u8) -> std::result::Result<SqlType, String> {
        if precision == 0 || precision > super::value::MAX_DECIMAL_PRECISION {
            return Err(format!(
                "DECIMAL precision must be 1..={}, found {precision}",
                super::value::MAX_DECIMAL_PRECISION
            ));
        }
        if scale > precision {
            return Err(format!(
                "DECIMAL scale must be at most its precision {precision}, found {scale}"
            ));
        }
        Ok(SqlType::Decimal { precision, scale })
    }

    pub fn field_type(self) -> FieldType {
        match self {
            SqlType::Double => FieldType::Float64,
            SqlType::Varchar => FieldType::Bytes,
            SqlType::Int
            | SqlType::BigInt
            | SqlType::Decimal { .. }
            | SqlType::Date
            | SqlType::DateTime { .. }
            | SqlType::Boolean => FieldType::Int64,
        }
    }

    /// `INT` or `BIGINT`: the types a primary key may have.
    pub fn is_integer(self) -> bool {
        matches!(self, SqlType::Int | SqlType::BigInt)
    }

    /// Whether the stored datum is the value itself and a number (so the coprocessor's
    /// arithmetic, SUM and AVG over it are the value's): not for text, nor for the types
    /// stored as integers with another meaning (a DECIMAL's scaled integer, a date's days).
    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            SqlType::Int | SqlType::BigInt | SqlType::Double | SqlType::Boolean
        )
    }

    /// Whether values are stored as integers that mean something else (`super::value`):
    /// comparisons with them need literals converted by the column's type.
    pub fn is_encoded(self) -> bool {
        matches!(
            self,
            SqlType::Decimal { .. } | SqlType::Date | SqlType::DateTime { .. } | SqlType::Boolean
        )
    }

    /// The type's name, as errors and `EXPLAIN` print it.
    pub fn name(self) -> &'static str {
        match self {
            SqlType::Int => "INT",
            SqlType::BigInt => "BIGINT",
            SqlType::Double => "DOUBLE",
            SqlType::Varchar => "VARCHAR",
            SqlType::Decimal { .. } => "DECIMAL",
            SqlType::Date => "DATE",
            SqlType::DateTime { .. } => "DATETIME",
            SqlType::Boolean => "BOOLEAN",
        }
    }

    /// The type as MySQL writes it in `SHOW CREATE TABLE` and `DESCRIBE`.
    pub fn mysql_text(self) -> String {
        match self {
            SqlType::Int => "int".into(),
            SqlType::BigInt => "bigint".into(),
            SqlType::Double => "double".into(),
            SqlType::Varchar => "varchar(255)".into(),
            SqlType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            SqlType::Date => "date".into(),
            SqlType::DateTime { fsp: 0 } => "datetime".into(),
            SqlType::DateTime { fsp } => format!("datetime({fsp})"),
            SqlType::Boolean => "tinyint(1)".into(),
        }
    }

    fn from_sql(dt: &DataType, column: &str) -> Result<SqlType> {
        let bad = |reason: String| SqlError::BadTable {
            reason: format!("column {column}: {reason}"),
        };
        let fsp = |p: &Option<u64>| match p {
            None => Ok(0),
            Some(p @ 0..=6) => Ok(*p as u8),
            Some(p) => Err(bad(format!(
                "fractional seconds precision must be 0..=6, found {p}"
            ))),
        };
        Ok(match dt {
            DataType::Int(_) | DataType::Integer(_) | DataType::Int4(_) => SqlType::Int,
            DataType::BigInt(_) | DataType::Int8(_) | DataType::Int64 => SqlType::BigInt,
            DataType::Double(_) | DataType::DoublePrecision | DataType::Float64 => SqlType::Double,
            DataType::Varchar(_) => SqlType::Varchar,
            DataType::Decimal(info) | DataType::Numeric(info) | DataType::Dec(info) => {
                use ast::ExactNumberInfo;
                // MySQL's defaults: DECIMAL is DECIMAL(10,0), DECIMAL(p) is DECIMAL(p,0).
                let (p, s) = match info {
                    ExactNumberInfo::None => (10, 0),
                    ExactNumberInfo::Precision(p) => (*p, 0),
                    ExactNumberInfo::PrecisionAndScale(p, s) => {
                        (*p, u64::try_from(*s).unwrap_or(u64::MAX))
                    }
                };
                let narrow = |v: u64| u8::try_from(v).unwrap_or(u8::MAX);
                SqlType::decimal(narrow(p), narrow(s)).map_err(bad)?
            }
            DataType::Date => SqlType::Date,
            DataType::Datetime(p) => SqlType::DateTime { fsp: fsp(p)? },
            DataType::Timestamp(p, ast::TimezoneInfo::None) => SqlType::DateTime { fsp: fsp(p)? },
            DataType::Boolean | DataType::Bool => SqlType::Boolean,
            DataType::TinyInt(Some(1)) => SqlType::Boolean,
            other => {
                return Err(SqlError::UnknownType {
                    column: column.to_string(),
                    ty: other.to_string(),
                });
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Lowercase.
    pub name: String,
    pub id: i64,
    pub ty: SqlType,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    pub id: i64,
    /// Lowercase.
    pub name: String,
    pub columns: Vec<Column>,
    /// Index of the primary key column (the handle) in `columns`.
    pub pk: usize,
    /// Secondary indexes, in creation order (`super::index`).
    pub indexes: Vec<IndexDef>,
    /// The id the next index gets: ids are never reused, so a dropped index's entries
    /// (left in storage, as a truncated table's rows) are never read as another's.
    pub next_index_id: i64,
}

/// The cluster key of `name`'s catalog row.
pub fn catalog_key(name: &str) -> Vec<u8> {
    let mut k = CATALOG_PREFIX.to_vec();
    k.extend_from_slice(name.to_ascii_lowercase().as_bytes());
    k
}

fn corrupt(table: &str, reason: &str) -> SqlError {
    SqlError::CorruptCatalog {
        table: table.to_string(),
        reason: reason.to_string(),
    }
}

impl TableSchema {
    /// The index of column `name` (case-insensitive).
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// The indexes readers may use: backfilled and published (`super::index`).
    pub fn public_indexes(&self) -> impl Iterator<Item = &IndexDef> {
        self.indexes
            .iter()
            .filter(|i| i.state == IndexState::Public)
    }

    /// The index named `name` (case-insensitive).
    pub fn index(&self, name: &str) -> Option<&IndexDef> {
        self.indexes
            .iter()
            .find(|i| i.name.eq_ignore_ascii_case(name))
    }

    /// What a TableScan reads: every column, in declaration order.
    pub fn column_infos(&self) -> Vec<ColumnInfo> {
        self.columns
            .iter()
            .enumerate()
            .map(|(i, c)| ColumnInfo {
                column_id: c.id,
                tp: c.ty.field_type() as i32,
                pk_handle: i == self.pk,
                default_val: Vec::new(),
            })
            .collect()
    }

    /// Encodes the schema (the table name is in the key, not here). Layout, version 1, all
    /// integers big-endian:
    ///
    /// ```text
    /// u8  version = 1
    /// i64 table id
    /// u16 primary key column index
    /// u16 column count N
    /// N × { u8 type tag (1 INT, 2 BIGINT, 3 DOUBLE, 4 VARCHAR, 5 DECIMAL, 6 DATE,
    ///       7 DATETIME, 8 BOOLEAN) | type parameters (DECIMAL: u8 precision, u8 scale;
    ///       DATETIME: u8 fsp; others: none) | i64 column id | u16 name length L
    ///       | L bytes UTF-8 name }
    ///
    /// Tags 5..=8 were added without a version bump: a schema of the first four types
    /// encodes exactly as before.
    ///
    /// Version 2 (a table that has or had a secondary index) appends:
    ///
    /// i64 next index id
    /// u16 index count M
    /// M × { i64 index id | u8 flags (bit 0: unique) | u8 state (1 write-only, 2 public)
    ///       | u16 name length L | L bytes UTF-8 name | u16 column count K (1..)
    ///       | K × u16 column position }
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let v2 = !self.indexes.is_empty() || self.next_index_id != 1;
        let mut b = vec![if v2 {
            FORMAT_VERSION_INDEXES
        } else {
            FORMAT_VERSION
        }];
        b.extend_from_slice(&self.id.to_be_bytes());
        b.extend_from_slice(&(self.pk as u16).to_be_bytes());
        b.extend_from_slice(&(self.columns.len() as u16).to_be_bytes());
        for c in &self.columns {
            b.push(c.ty.tag());
            b.extend_from_slice(&c.ty.params());
            b.extend_from_slice(&c.id.to_be_bytes());
            b.extend_from_slice(&(c.name.len() as u16).to_be_bytes());
            b.extend_from_slice(c.name.as_bytes());
        }
        if v2 {
            b.extend_from_slice(&self.next_index_id.to_be_bytes());
            b.extend_from_slice(&(self.indexes.len() as u16).to_be_bytes());
            for i in &self.indexes {
                b.extend_from_slice(&i.id.to_be_bytes());
                b.push(u8::from(i.unique));
                b.push(i.state.tag());
                b.extend_from_slice(&(i.name.len() as u16).to_be_bytes());
                b.extend_from_slice(i.name.as_bytes());
                b.extend_from_slice(&(i.columns.len() as u16).to_be_bytes());
                for c in &i.columns {
                    b.extend_from_slice(&(*c as u16).to_be_bytes());
                }
            }
        }
        b
    }

    /// Decodes what [`TableSchema::encode`] wrote for table `name`.
    pub fn decode(name: &str, mut b: &[u8]) -> Result<TableSchema> {
        fn take<'b>(b: &mut &'b [u8], n: usize, name: &str) -> Result<&'b [u8]> {
            if b.len() < n {
                return Err(corrupt(name, "truncated"));
            }
            let (head, rest) = b.split_at(n);
            *b = rest;
            Ok(head)
        }
        let u16_of = |s: &[u8]| u16::from_be_bytes([s[0], s[1]]) as usize;
        let i64_of = |s: &[u8]| i64::from_be_bytes(s.try_into().expect("8 bytes"));
        let version = take(&mut b, 1, name)?[0];
        if version != FORMAT_VERSION && version != FORMAT_VERSION_INDEXES {
            return Err(corrupt(name, &format!("unknown format version {version}")));
        }
        let id = i64_of(take(&mut b, 8, name)?);
        let pk = u16_of(take(&mut b, 2, name)?);
        let n = u16_of(take(&mut b, 2, name)?);
        let mut columns = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let tag = take(&mut b, 1, name)?[0];
            let mut params = |n: usize| take(&mut b, n, name).ok().map(<[u8]>::to_vec);
            let ty = SqlType::from_tag(tag, &mut params)
                .ok_or_else(|| corrupt(name, &format!("unknown type tag {tag}")))?;
            let cid = i64_of(take(&mut b, 8, name)?);
            let len = u16_of(take(&mut b, 2, name)?);
            let cname = std::str::from_utf8(take(&mut b, len, name)?)
                .map_err(|_| corrupt(name, "column name is not UTF-8"))?;
            columns.push(Column {
                name: cname.to_string(),
                id: cid,
                ty,
            });
        }
        let (mut indexes, mut next_index_id) = (Vec::new(), 1);
        if version == FORMAT_VERSION_INDEXES {
            next_index_id = i64_of(take(&mut b, 8, name)?);
            let m = u16_of(take(&mut b, 2, name)?);
            for _ in 0..m {
                let iid = i64_of(take(&mut b, 8, name)?);
                let unique = match take(&mut b, 1, name)?[0] {
                    0 => false,
                    1 => true,
                    f => return Err(corrupt(name, &format!("unknown index flags {f}"))),
                };
                let state = IndexState::from_tag(take(&mut b, 1, name)?[0])
                    .ok_or_else(|| corrupt(name, "unknown index state"))?;
                let len = u16_of(take(&mut b, 2, name)?);
                let iname = std::str::from_utf8(take(&mut b, len, name)?)
                    .map_err(|_| corrupt(name, "index name is not UTF-8"))?
                    .to_string();
                let k = u16_of(take(&mut b, 2, name)?);
                let mut cols = Vec::with_capacity(k.min(64));
                for _ in 0..k {
                    cols.push(u16_of(take(&mut b, 2, name)?));
                }
                if cols.is_empty() || cols.iter().any(|&c| c >= columns.len()) {
                    return Err(corrupt(name, &format!("index {iname} has bad columns")));
                }
                let previous = indexes.last().map_or(0, |i: &IndexDef| i.id);
                if iid <= previous || iid >= next_index_id {
                    return Err(corrupt(name, &format!("index {iname} has id {iid}")));
                }
                indexes.push(IndexDef {
                    id: iid,
                    name: iname,
                    columns: cols,
                    unique,
                    state,
                });
            }
            if indexes.is_empty() && next_index_id == 1 {
                return Err(corrupt(name, "version 2 without an index section"));
            }
            if next_index_id < 1 {
                return Err(corrupt(name, &format!("next index id {next_index_id}")));
            }
            for (i, x) in indexes.iter().enumerate() {
                let mut cols = x.columns.clone();
                cols.sort_unstable();
                cols.dedup();
                if x.name.is_empty()
                    || cols.len() != x.columns.len()
                    || indexes[..i]
                        .iter()
                        .any(|y| y.name.eq_ignore_ascii_case(&x.name))
                {
                    return Err(corrupt(name, &format!("index {} is malformed", x.name)));
                }
            }
        }
        if !b.is_empty() {
            return Err(corrupt(name, "trailing bytes"));
        }
        if pk >= columns.len() || !columns[pk].ty.is_integer() {
            return Err(corrupt(name, "primary key is not an integer column"));
        }
        Ok(TableSchema {
            id,
            name: name.to_ascii_lowercase(),
            columns,
            pk,
            indexes,
            next_index_id,
        })
    }
}

/// Plans `CREATE TABLE` into a schema with id 0 (allocated when it is stored).
pub fn plan_create(ct: &ast::CreateTable) -> Result<TableSchema> {
    if ct.or_replace {
        return Err(unsupported("CREATE OR REPLACE"));
    }
    if ct.if_not_exists {
        return Err(unsupported("CREATE TABLE IF NOT EXISTS"));
    }
    if ct.temporary || ct.external || ct.transient || ct.volatile {
        return Err(unsupported(
            "a temporary, external, transient or volatile table",
        ));
    }
    if ct.query.is_some() {
        return Err(unsupported("CREATE TABLE ... AS SELECT"));
    }
    if ct.like.is_some() || ct.clone.is_some() {
        return Err(unsupported("CREATE TABLE ... LIKE / CLONE"));
    }
    let name = simple_name(&ct.name, "table")?;
    if ct.columns.is_empty() {
        return Err(SqlError::BadTable {
            reason: format!("a table needs at least one column: table={name}"),
        });
    }
    let mut columns: Vec<Column> = Vec::with_capacity(ct.columns.len());
    let mut pk: Vec<usize> = Vec::new();
    for (i, c) in ct.columns.iter().enumerate() {
        let cname = c.name.value.to_ascii_lowercase();
        if columns.iter().any(|x| x.name == cname) {
            return Err(SqlError::BadTable {
                reason: format!("duplicate column: column={cname}"),
            });
        }
        let ty = SqlType::from_sql(&c.data_type, &cname)?;
        for opt in &c.options {
            match &opt.option {
                ColumnOption::PrimaryKey(_) => pk.push(i),
                ColumnOption::Null | ColumnOption::NotNull => {}
                other => {
                    return Err(unsupported(format!(
                        "column option: column={cname} option={other}"
                    )));
                }
            }
        }
        columns.push(Column {
            name: cname,
            id: i as i64 + 1,
            ty,
        });
    }
    // `INDEX name (cols)` / `UNIQUE KEY name (cols)` in the table's definition: public at
    // once (the table is empty).
    let mut inline_indexes: Vec<super::index::CreateIndex> = Vec::new();
    for constraint in &ct.constraints {
        match constraint {
            TableConstraint::Index(ic) if ic.index_type.is_none() => {
                let columns = super::index::index_columns(&ic.columns)?;
                inline_indexes.push(super::index::CreateIndex {
                    table: name.clone(),
                    name: ic
                        .name
                        .as_ref()
                        .map(|n| n.value.to_ascii_lowercase())
                        .unwrap_or_else(|| columns[0].clone()),
                    named: ic.name.is_some(),
                    columns,
                    unique: false,
                });
            }
            TableConstraint::Unique(uc) if uc.index_type.is_none() && uc.include.is_empty() => {
                let columns = super::index::index_columns(&uc.columns)?;
                inline_indexes.push(super::index::CreateIndex {
                    table: name.clone(),
                    name: uc
                        .index_name
                        .as_ref()
                        .or(uc.name.as_ref())
                        .map(|n| n.value.to_ascii_lowercase())
                        .unwrap_or_else(|| columns[0].clone()),
                    named: uc.index_name.is_some() || uc.name.is_some(),
                    columns,
                    unique: true,
                });
            }
            TableConstraint::PrimaryKey(p) => {
                for ic in &p.columns {
                    let col = match &ic.column.expr {
                        ast::Expr::Identifier(id) => id.value.to_ascii_lowercase(),
                        other => {
                            return Err(SqlError::BadPrimaryKey {
                                reason: format!("not a column: {other}"),
                            });
                        }
                    };
                    let idx = columns.iter().position(|c| c.name == col).ok_or_else(|| {
                        SqlError::UnknownColumn {
                            table: name.clone(),
                            column: col.clone(),
                        }
                    })?;
                    pk.push(idx);
                }
            }
            other => return Err(unsupported(format!("table constraint: {other}"))),
        }
    }
    let pk = match pk.as_slice() {
        [] => {
            return Err(SqlError::BadPrimaryKey {
                reason: format!("a table needs an integer primary key: table={name}"),
            });
        }
        [one] => *one,
        _ => {
            return Err(SqlError::BadPrimaryKey {
                reason: format!("only a single-column primary key is supported: table={name}"),
            });
        }
    };
    if !columns[pk].ty.is_integer() {
        return Err(SqlError::BadPrimaryKey {
            reason: format!(
                "the primary key must be INT or BIGINT: column={} type={}",
                columns[pk].name,
                columns[pk].ty.name()
            ),
        });
    }
    let mut schema = TableSchema {
        id: 0,
        name,
        columns,
        pk,
        indexes: Vec::new(),
        next_index_id: 1,
    };
    for plan in &mut inline_indexes {
        // An index without a name takes its first column's, with `_2`, `_3`, ... when that
        // is taken (as MySQL names them).
        if !plan.named {
            let base = plan.name.clone();
            let mut n = 1;
            while schema.index(&plan.name).is_some() {
                n += 1;
                plan.name = format!("{base}_{n}");
            }
        }
        let def = super::index::define(&schema, plan, IndexState::Public)?;
        schema.next_index_id += 1;
        schema.indexes.push(def);
    }
    Ok(schema)
}

fn txn_error(command: &'static str, kind: i32, message: &str) -> SqlError {
    SqlError::Client(Error::TxnCommand {
        command,
        message: format!("kind={kind} {message}"),
    })
}

/// The value of `key` committed at `start_ts`, if any.
///
/// A lock of another transaction on the key (a transaction committing with the catalog row
/// locked, a DDL) is resolved as any reader resolves one, and the read runs again: while
/// its transaction is alive the read waits, as long as [`LOCKED_READ_ATTEMPTS`] allow.
pub(crate) async fn get_at(client: &Client, key: &[u8], start_ts: u64) -> Result<Option<Vec<u8>>> {
    let mut attempt = 0;
    loop {
        let resp = client.get_at(key.to_vec(), start_ts).await?;
        let Some(e) = resp.error else {
            return Ok(resp.found.then_some(resp.value));
        };
        match &e.locked {
            Some(lock)
                if e.kind == wire::txn::ErrorKind::Locked as i32
                    && attempt + 1 < LOCKED_READ_ATTEMPTS =>
            {
                attempt += 1;
                if client.lock_resolver().resolve(lock, start_ts).await?
                    == crate::lock_resolver::ResolveOutcome::Alive
                {
                    tokio::time::sleep(super::write_backoff(attempt)).await;
                }
            }
            _ => return Err(txn_error("get", e.kind, &e.message)),
        }
    }
}

/// How many times a catalog read meets a lock before it gives up (with
/// `super::write_backoff` between them: about the TTL of an abandoned lock and more).
const LOCKED_READ_ATTEMPTS: u32 = 12;

/// Refuses a write planned with `schema` when the table's schema at `start_ts` is another
/// (an index added, the table truncated, dropped or created again since it was read):
/// [`SqlError::SchemaChanged`]. A statement that passes writes what the schema at its
/// `start_ts` asks for, and commits under the schema lease from there.
pub async fn check_unchanged(client: &Client, schema: &TableSchema, start_ts: u64) -> Result<()> {
    match load_at(client, &schema.name, start_ts).await? {
        Some(now) if now == *schema => Ok(()),
        _ => Err(SqlError::SchemaChanged {
            table: schema.name.clone(),
        }),
    }
}

/// The stored schema of table `name` at a fresh timestamp, if there is one.
pub async fn load(client: &Client, name: &str) -> Result<Option<TableSchema>> {
    let ts = client.current_ts().await?;
    load_at(client, name, ts).await
}

/// The schema of `name` as of `start_ts` (a statement reads its tables' schemas at its own
/// read timestamp).
pub async fn load_at(client: &Client, name: &str, start_ts: u64) -> Result<Option<TableSchema>> {
    match get_at(client, &catalog_key(name), start_ts).await? {
        Some(value) => TableSchema::decode(name, &value).map(Some),
        None => Ok(None),
    }
}

/// Decodes the counter row's value (see the module docs).
fn decode_next_id(value: &[u8]) -> Result<i64> {
    let bytes: [u8; 8] = value.try_into().map_err(|_| SqlError::CorruptCatalog {
        table: "(table id counter)".into(),
        reason: format!("expected 8 bytes, found {}", value.len()),
    })?;
    i64::try_from(u64::from_le_bytes(bytes))
        .ok()
        .filter(|id| *id >= 1)
        .ok_or_else(|| SqlError::CorruptCatalog {
            table: "(table id counter)".into(),
            reason: format!(
                "expected an id in 1..=i64::MAX, found {}",
                u64::from_le_bytes(bytes)
            ),
        })
}

/// Stores a new table: refuses an existing name, takes the next sequential id, writes the
/// catalog row and the counter in one transaction (see the module docs). Returns the stored
/// schema.
/// What `store_with_new_id` expects to find under the table's name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Existing {
    /// CREATE TABLE: nothing.
    Absent,
    /// TRUNCATE TABLE: the table, whose stored columns the new id keeps.
    Present,
}

pub async fn create(client: &Client, schema: TableSchema) -> Result<TableSchema> {
    store_with_new_id(client, schema, Existing::Absent, "CREATE TABLE").await
}

/// `TRUNCATE TABLE name`: the table gets a new id, so its rows (under the old id's key
/// prefix) are no longer read, and no later table reuses that id. As in TiDB, truncation is
/// a catalog change: the old rows stay in storage (no delete-range GC yet).
pub async fn truncate(client: &Client, name: &str) -> Result<TableSchema> {
    let schema = TableSchema {
        id: 0,
        name: name.to_ascii_lowercase(),
        columns: Vec::new(),
        pk: 0,
        indexes: Vec::new(),
        next_index_id: 1,
    };
    store_with_new_id(client, schema, Existing::Present, "TRUNCATE TABLE").await
}

/// Stores `schema` under a newly allocated table id, in one transaction with the id counter
/// (see the module docs), retrying after a concurrent catalog change.
async fn store_with_new_id(
    client: &Client,
    mut schema: TableSchema,
    existing: Existing,
    statement: &'static str,
) -> Result<TableSchema> {
    let key = catalog_key(&schema.name);
    let mut last_conflict = None;
    for _ in 0..CREATE_ATTEMPTS {
        let start_ts = client.current_ts().await?;
        match (get_at(client, &key, start_ts).await?, existing) {
            (Some(_), Existing::Absent) => {
                return Err(SqlError::TableExists { table: schema.name });
            }
            (None, Existing::Present) => {
                return Err(SqlError::UnknownTable { table: schema.name });
            }
            (Some(stored), Existing::Present) => {
                schema = TableSchema::decode(&schema.name, &stored)?;
            }
            (None, Existing::Absent) => {}
        }
        schema.id = match get_at(client, NEXT_TABLE_ID_KEY, start_ts).await? {
            Some(v) => decode_next_id(&v)?,
            None => 1,
        };
        let next = u64::try_from(schema.id)
            .ok()
            .and_then(|id| id.checked_add(1))
            .ok_or_else(|| SqlError::BadTable {
                reason: format!("no table id left after {}", schema.id),
            })?;
        let writes = [
            RowWrite::Put {
                key: key.clone(),
                value: schema.encode(),
            },
            RowWrite::Put {
                key: NEXT_TABLE_ID_KEY.to_vec(),
                value: next.to_le_bytes().to_vec(),
            },
        ];
        match txn_write::write(
            client,
            &writes,
            start_ts,
            statement,
            txn_write::CommitOptions::default(),
        )
        .await
        {
            Ok(_) => return Ok(schema),
            Err(e @ SqlError::WriteConflict { .. }) => last_conflict = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_conflict.unwrap_or_else(|| SqlError::BadTable {
        reason: format!("{statement} made no attempt"),
    }))
}

/// `DROP TABLE name`: removes its catalog row (the rows stay in storage under an id no
/// table gets again, as after TRUNCATE). An unknown table is an error.
pub async fn drop_table(client: &Client, name: &str) -> Result<()> {
    let key = catalog_key(name);
    let start_ts = client.current_ts().await?;
    if get_at(client, &key, start_ts).await?.is_none() {
        return Err(SqlError::UnknownTable {
            table: name.to_ascii_lowercase(),
        });
    }
    txn_write::write(
        client,
        &[RowWrite::Delete { key }],
        start_ts,
        "DROP TABLE",
        txn_write::CommitOptions::default(),
    )
    .await
    .map(|_| ())
}

/// Every table's schema, in name order (one scan of the catalog's key range).
pub async fn list(client: &Client) -> Result<Vec<TableSchema>> {
    let start_ts = client.current_ts().await?;
    let mut end = CATALOG_PREFIX.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    let entries = client
        .scan_at(CATALOG_PREFIX.to_vec(), end, start_ts)
        .await?;
    entries
        .iter()
        .map(|e| {
            let raw = &e.key[CATALOG_PREFIX.len().min(e.key.len())..];
            let name = std::str::from_utf8(raw).map_err(|_| {
                corrupt(
                    &String::from_utf8_lossy(raw),
                    "the table name in the key is not UTF-8",
                )
            })?;
            TableSchema::decode(name, &e.value)
        })
        .collect()
}

/// The entry point of the `catalog_schema` fuzz target (and of the proptest below): decodes
/// `data` as a catalog row. Must return normally for every input; an accepted input has
/// exactly one encoding, so a schema read and written again (a TRUNCATE's new id) keeps
/// every other byte.
pub fn schema_decode_check(data: &[u8]) {
    if let Ok(s) = TableSchema::decode("fuzz", data) {
        assert!(
            s.encode() == data,
            "re-encoding a decoded schema changed the bytes"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::{Plan, parse, plan};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_bytes_decode_or_fail_and_accepted_ones_reencode_to_themselves(
            data in proptest::collection::vec(any::<u8>(), 0..96),
        ) {
            schema_decode_check(&data);
        }

        /// Valid encodings with one byte changed or cut: near misses reach deeper than noise.
        #[test]
        fn mutated_schemas_decode_or_fail_cleanly(
            at in 0usize..300,
            byte: u8,
            cut: bool,
            indexed: bool,
        ) {
            let s = create(if indexed {
                "create table x (id bigint primary key, p decimal(12,3), v varchar(3), \
                 f double, unique key pv (p, v), key f (f))"
            } else {
                "create table x (id bigint primary key, p decimal(12,3), d date, \
                 t datetime(6), b boolean, v varchar(3), f double, i int)"
            })
            .unwrap();
            let mut b = s.encode();
            let at = at % b.len();
            if cut {
                b.truncate(at);
            } else {
                b[at] = byte;
            }
            schema_decode_check(&b);
        }
    }

    fn create(sql: &str) -> Result<TableSchema> {
        match plan(&parse(sql)?, &|_| None)? {
            Plan::CreateTable(s) => Ok(s),
            other => panic!("not a create: {other:?}"),
        }
    }

    #[test]
    fn the_table_id_counter_decodes_only_eight_byte_positive_ids() {
        assert_eq!(decode_next_id(&7u64.to_le_bytes()).unwrap(), 7);
        for bad in [
            &b""[..],
            &b"\x01\x00"[..],
            &0u64.to_le_bytes()[..],
            &u64::MAX.to_le_bytes()[..],
        ] {
            let e = decode_next_id(bad).unwrap_err();
            assert!(matches!(e, SqlError::CorruptCatalog { .. }), "{e}");
        }
        assert!(!NEXT_TABLE_ID_KEY.starts_with(CATALOG_PREFIX));
    }

    #[test]
    fn create_table_assigns_column_ids_in_order_and_finds_the_key() {
        let s = create(
            "CREATE TABLE T (a INT, id BIGINT NOT NULL, d DOUBLE, s VARCHAR(20), PRIMARY KEY (id))",
        )
        .unwrap();
        assert_eq!(s.name, "t");
        assert_eq!(s.pk, 1);
        let ids: Vec<i64> = s.columns.iter().map(|c| c.id).collect();
        assert_eq!(ids, vec![1, 2, 3, 4]);
        let infos = s.column_infos();
        assert!(infos[1].pk_handle && !infos[0].pk_handle);
        assert_eq!(infos[3].tp, FieldType::Bytes as i32);
    }

    /// A table that has or had an index is stored in the version-2 layout, with its index
    /// states and the next index id; one that never had one keeps the version-1 bytes.
    #[test]
    fn indexes_round_trip_through_the_v2_layout_and_ids_are_not_reused() {
        let mut s = create(
            "create table x (id bigint primary key, a int, b varchar(4), key ab (a, b), \
             unique index b (b))",
        )
        .unwrap();
        assert_eq!(s.next_index_id, 3);
        s.indexes[1].state = IndexState::WriteOnly;
        let b = s.encode();
        assert_eq!(b[0], FORMAT_VERSION_INDEXES);
        assert_eq!(TableSchema::decode("x", &b).unwrap(), s);
        // Every index dropped: still version 2, the next id kept.
        s.indexes.clear();
        let b = s.encode();
        assert_eq!(b[0], FORMAT_VERSION_INDEXES);
        assert_eq!(TableSchema::decode("x", &b).unwrap().next_index_id, 3);
        // An index id at or past the next id, or out of order, is corrupt.
        let mut bad = create("create table x (id bigint primary key, a int, key a (a))").unwrap();
        bad.next_index_id = 1;
        assert!(TableSchema::decode("x", &bad.encode()).is_err());
        let plain = create("create table x (id bigint primary key, a int)").unwrap();
        assert_eq!(plain.encode()[0], FORMAT_VERSION);
    }

    #[test]
    fn schema_round_trips_through_the_v1_layout() {
        let mut s =
            create("create table x (id int primary key, name varchar(8), v double)").unwrap();
        s.id = 4242;
        let b = s.encode();
        assert_eq!(b[0], FORMAT_VERSION);
        assert_eq!(TableSchema::decode("x", &b).unwrap(), s);
        assert!(TableSchema::decode("x", &b[..b.len() - 1]).is_err());
    }

    #[test]
    fn every_type_round_trips_with_its_parameters_and_bad_parameters_are_corrupt() {
        let mut s = create(
            "create table x (id bigint primary key, p decimal(12,3), q numeric, d date, \
             t datetime(6), u timestamp, b boolean, c bool, k tinyint(1))",
        )
        .unwrap();
        s.id = 9;
        let types: Vec<SqlType> = s.columns.iter().map(|c| c.ty).collect();
        assert_eq!(
            types,
            [
                SqlType::BigInt,
                SqlType::Decimal {
                    precision: 12,
                    scale: 3
                },
                SqlType::Decimal {
                    precision: 10,
                    scale: 0
                },
                SqlType::Date,
                SqlType::DateTime { fsp: 6 },
                SqlType::DateTime { fsp: 0 },
                SqlType::Boolean,
                SqlType::Boolean,
                SqlType::Boolean,
            ]
        );
        let b = s.encode();
        assert_eq!(TableSchema::decode("x", &b).unwrap(), s);
        // A DECIMAL's precision byte above 18, a DATETIME's fsp above 6: corrupt, not a type.
        let one = |tag: u8, params: &[u8]| {
            let mut b = vec![1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2];
            b.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, b'i', b'd']);
            b.push(tag);
            b.extend_from_slice(params);
            b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 2, 0, 1, b'v']);
            TableSchema::decode("f", &b)
        };
        assert!(one(5, &[18, 2]).is_ok());
        assert!(one(7, &[6]).is_ok());
        for (tag, params) in [(5u8, &[19u8, 2][..]), (5, &[4, 5]), (7, &[7]), (5, &[])] {
            let e = one(tag, params).unwrap_err();
            assert!(
                matches!(e, SqlError::CorruptCatalog { .. }),
                "{tag} {params:?}: {e}"
            );
        }
        let e = create("create table t (id int primary key, d decimal(19,2))").unwrap_err();
        assert!(e.to_string().contains("precision must be 1..=18"), "{e}");
        let e = create("create table t (id int primary key, d datetime(7))").unwrap_err();
        assert!(e.to_string().contains("0..=6"), "{e}");
    }

    /// A fixture of the v1 bytes: a format change must keep decoding it.
    #[test]
    fn v1_fixture_still_decodes() {
        let fixture: &[u8] = &[
            1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2, // version, id 7, pk 0, 2 columns
            2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, b'i', b'd', // BIGINT id
            4, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1, b's', // VARCHAR s
        ];
        let s = TableSchema::decode("f", fixture).unwrap();
        assert_eq!(s.id, 7);
        assert_eq!(s.columns[0].ty, SqlType::BigInt);
        assert_eq!(s.columns[1].name, "s");
    }

    #[test]
    fn bad_definitions_are_named() {
        let e = create("create table t (a int, b int)").unwrap_err();
        assert!(matches!(e, SqlError::BadPrimaryKey { .. }), "{e}");
        let e = create("create table t (a varchar(3) primary key)").unwrap_err();
        assert!(e.to_string().contains("must be INT or BIGINT"), "{e}");
        let e = create("create table t (a int primary key, b text)").unwrap_err();
        assert_eq!(e.to_string(), "unsupported column type: column=b type=TEXT");
        let e = create("create table t (a int primary key, b int primary key)").unwrap_err();
        assert!(e.to_string().contains("single-column"), "{e}");
        let e = create("create table t (a int primary key, b int default 3)").unwrap_err();
        assert!(e.to_string().contains("column option"), "{e}");
    }

    #[test]
    fn catalog_keys_sit_under_the_reserved_prefix_outside_table_data() {
        let k = catalog_key("Orders");
        assert_eq!(k, b"m_catalog_orders".to_vec());
        assert!(k.as_slice() < b"t".as_slice());
    }
}
