//! The front's errors and the MySQL error code of each (what a driver keys its handling on).

use client::sql::SqlError;
use client::variables::VariableError;
use datafusion::error::DataFusionError;

#[derive(Debug, thiserror::Error)]
pub enum FrontError {
    /// The client engine's error (a statement it ran, or a catalog read).
    #[error(transparent)]
    Sql(#[from] SqlError),
    /// DataFusion refused or failed the query.
    #[error("{0}")]
    DataFusion(#[from] DataFusionError),
    #[error("sql does not parse: message={message}")]
    Parse { message: String },
    #[error("unknown database: expected {expected:?}, found {found:?}")]
    UnknownDatabase {
        expected: &'static str,
        found: String,
    },
    #[error("not supported yet: {what}")]
    Unsupported { what: String },
    /// A write in a transaction started `READ ONLY`.
    #[error("cannot execute a write in a READ ONLY transaction: expected a read, found a write")]
    ReadOnlyTransaction,
    /// `DROP TABLE` of tables that do not exist (nothing was dropped).
    #[error("unknown table: expected existing tables, found no {}", names.join(", "))]
    UnknownTables { names: Vec<String> },
    /// A statement needing a privilege on a table its user lacks (MySQL's 1142).
    #[error("{command} command denied to user '{user}'@'%' for table '{table}'")]
    TableAccessDenied {
        command: &'static str,
        user: String,
        table: String,
    },
    /// A statement needing a global privilege its user lacks (MySQL's 1227).
    #[error(
        "Access denied; you need (at least one of) the {privilege} privilege(s) for this operation"
    )]
    SpecificAccessDenied { privilege: &'static str },
    /// `CREATE USER` of an existing user, `DROP USER` / `ALTER USER` / `GRANT` of a missing
    /// one (MySQL's 1396).
    #[error("Operation {operation} failed for '{user}'@'%': {reason}")]
    UserOperation {
        operation: &'static str,
        user: String,
        reason: &'static str,
    },
    /// A command on a connection that never logged in (a handshake without a user name).
    #[error("Access denied: expected a logged-in user, found a connection that named none")]
    NotLoggedIn,
    /// A fault of the front itself (a value of a type it did not expect).
    #[error("internal error: {what}")]
    Internal { what: String },
}

/// MySQL error codes the front answers with (the numbers every driver knows).
pub mod code {
    pub const BAD_DB: u16 = 1049;
    pub const TABLE_EXISTS: u16 = 1050;
    pub const BAD_TABLE: u16 = 1051;
    pub const BAD_FIELD: u16 = 1054;
    pub const DUP_KEYNAME: u16 = 1061;
    pub const DUP_ENTRY: u16 = 1062;
    /// A login refused: unknown user or wrong password.
    pub const ACCESS_DENIED: u16 = 1045;
    /// A client address blocked after too many failed logins.
    pub const HOST_IS_BLOCKED: u16 = 1129;
    pub const TABLE_ACCESS_DENIED: u16 = 1142;
    pub const SPECIFIC_ACCESS_DENIED: u16 = 1227;
    pub const CANNOT_USER: u16 = 1396;
    pub const PARSE: u16 = 1064;
    pub const UNKNOWN: u16 = 1105;
    /// MySQL's "Can't DROP 'x'; check that column/key exists".
    pub const CANT_DROP_FIELD_OR_KEY: u16 = 1091;
    pub const NO_SUCH_TABLE: u16 = 1146;
    pub const UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;
    /// MySQL's "multi-statement transaction required more than max_binlog_cache_size": a
    /// transaction past its buffer's limit.
    pub const TRANS_CACHE_FULL: u16 = 1197;
    pub const LOCK_WAIT_TIMEOUT: u16 = 1205;
    /// TiDB answers a write conflict with 9007; drivers retry on MySQL's deadlock code.
    pub const LOCK_DEADLOCK: u16 = 1213;
    pub const WRONG_VALUE_FOR_VAR: u16 = 1231;
    pub const NOT_SUPPORTED_YET: u16 = 1235;
    pub const READ_ONLY_TRANSACTION: u16 = 1792;
}

impl FrontError {
    pub fn unsupported(what: impl Into<String>) -> FrontError {
        FrontError::Unsupported { what: what.into() }
    }

    /// The MySQL error code of this error.
    pub fn mysql_code(&self) -> u16 {
        match self {
            FrontError::Sql(e) => sql_code(e),
            FrontError::DataFusion(e) => datafusion_code(e),
            FrontError::Parse { .. } => code::PARSE,
            FrontError::UnknownDatabase { .. } => code::BAD_DB,
            FrontError::Unsupported { .. } => code::NOT_SUPPORTED_YET,
            FrontError::UnknownTables { .. } => code::BAD_TABLE,
            FrontError::ReadOnlyTransaction => code::READ_ONLY_TRANSACTION,
            FrontError::TableAccessDenied { .. } => code::TABLE_ACCESS_DENIED,
            FrontError::SpecificAccessDenied { .. } => code::SPECIFIC_ACCESS_DENIED,
            FrontError::UserOperation { .. } => code::CANNOT_USER,
            FrontError::NotLoggedIn => code::ACCESS_DENIED,
            FrontError::Internal { .. } => code::UNKNOWN,
        }
    }
}

fn sql_code(e: &SqlError) -> u16 {
    match e {
        SqlError::Parse { .. } => code::PARSE,
        SqlError::Unsupported { .. } => code::NOT_SUPPORTED_YET,
        SqlError::TableExists { .. } => code::TABLE_EXISTS,
        SqlError::UnknownTable { .. } => code::NO_SUCH_TABLE,
        SqlError::UnknownColumn { .. } => code::BAD_FIELD,
        SqlError::DuplicateKey { .. } | SqlError::DuplicateEntry { .. } => code::DUP_ENTRY,
        SqlError::IndexExists { .. } => code::DUP_KEYNAME,
        SqlError::UnknownIndex { .. } => code::CANT_DROP_FIELD_OR_KEY,
        // Retried by the front; if it still reaches a client, a retry is what cures it.
        SqlError::SchemaLeaseExpired { .. }
        | SqlError::SchemaChanged { .. }
        | SqlError::WriteConflict { .. }
        | SqlError::TxnConflict { .. }
        | SqlError::TxnAborted { .. } => code::LOCK_DEADLOCK,
        SqlError::TxnTooLarge { .. } => code::TRANS_CACHE_FULL,
        SqlError::BadUser { .. } => code::CANNOT_USER,
        SqlError::KeyLocked { .. } => code::LOCK_WAIT_TIMEOUT,
        SqlError::Client(client::Error::Variable(VariableError::Unknown { .. })) => {
            code::UNKNOWN_SYSTEM_VARIABLE
        }
        SqlError::Client(client::Error::Variable(VariableError::BadValue { .. })) => {
            code::WRONG_VALUE_FOR_VAR
        }
        _ => code::UNKNOWN,
    }
}

fn datafusion_code(e: &DataFusionError) -> u16 {
    match e.find_root() {
        DataFusionError::SQL(..) => code::PARSE,
        DataFusionError::NotImplemented(_) => code::NOT_SUPPORTED_YET,
        DataFusionError::SchemaError(inner, _) => {
            let text = inner.to_string();
            if text.contains("No field named") || text.contains("not found") {
                code::BAD_FIELD
            } else {
                code::UNKNOWN
            }
        }
        DataFusionError::Plan(text) if text.contains("table") && text.contains("not found") => {
            code::NO_SUCH_TABLE
        }
        DataFusionError::External(inner) => match inner.downcast_ref::<FrontError>() {
            Some(f) => f.mysql_code(),
            None => code::UNKNOWN,
        },
        _ => code::UNKNOWN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_faults_map_to_the_codes_drivers_know() {
        let cases: Vec<(FrontError, u16)> = vec![
            (
                SqlError::UnknownTable { table: "t".into() }.into(),
                code::NO_SUCH_TABLE,
            ),
            (
                SqlError::Parse {
                    message: "x".into(),
                }
                .into(),
                code::PARSE,
            ),
            (
                SqlError::DuplicateKey {
                    table: "t".into(),
                    key: 1,
                }
                .into(),
                code::DUP_ENTRY,
            ),
            (
                SqlError::WriteConflict {
                    statement: "UPDATE",
                    start_ts: 1,
                    conflict_commit_ts: 2,
                }
                .into(),
                code::LOCK_DEADLOCK,
            ),
            (
                SqlError::Client(client::Error::Variable(VariableError::Unknown {
                    name: "x".into(),
                }))
                .into(),
                code::UNKNOWN_SYSTEM_VARIABLE,
            ),
            (
                SqlError::Client(client::Error::Variable(VariableError::BadValue {
                    name: "x",
                    value: "y".into(),
                    allowed: "z".into(),
                }))
                .into(),
                code::WRONG_VALUE_FOR_VAR,
            ),
            (
                FrontError::UnknownDatabase {
                    expected: "test",
                    found: "x".into(),
                },
                code::BAD_DB,
            ),
            (
                DataFusionError::Plan("table 'datafusion.public.nope' not found".into()).into(),
                code::NO_SUCH_TABLE,
            ),
            (
                DataFusionError::External(Box::new(FrontError::Sql(SqlError::UnknownTable {
                    table: "t".into(),
                })))
                .into(),
                code::NO_SUCH_TABLE,
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.mysql_code(), want, "{e}");
        }
    }
}
