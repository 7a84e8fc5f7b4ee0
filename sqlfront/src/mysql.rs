//! The MySQL wire protocol endpoint (opensrv-mysql, Databend's): the handshake, `COM_QUERY`
//! with text result sets, prepared statements with binary result sets, `COM_INIT_DB`, and
//! errors with MySQL codes and SQLSTATEs ([`crate::error::code`]).
//!
//! Each connection logs in as one of the cluster's users (`mysql_native_password` against a
//! fresh random salt, [`crate::accounts`]) and gets its own [`FrontSession`] for that user
//! (variables, warnings, privilege checks). A refused login is answered with MySQL's 1045,
//! counted, and an address with too many is blocked for a while ([`crate::login`]).
//!
//! **Prepared statements** are bound on the server: `COM_STMT_PREPARE` counts the `?`
//! placeholders (outside quotes, backticks and comments), and `COM_STMT_EXECUTE` writes each
//! parameter into the statement as a SQL literal ([`bind`]: strings quoted and escaped,
//! numbers as written, NULL) and runs it like a query; the answer goes back as a binary
//! result set. The statement is parsed again at every execution (no plan cache yet).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock};

use client::paging::Client;
use opensrv_mysql::{
    AsyncMysqlIntermediary, AsyncMysqlShim, Column, ColumnFlags, ColumnType, ErrorKind, InitWriter,
    OkResponse, ParamParser, QueryResultWriter, StatementMetaWriter, StatusFlags, ValueInner,
};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::accounts::{self, Accounts};
use crate::error::FrontError;
use crate::login::{self, LoginFailure, LoginThrottle};
pub use crate::mysql_limits::MysqlLimits;
use crate::output::{Cell, ColumnKind, Output};
use crate::session::FrontSession;

/// The version string the handshake announces (drivers parse the leading `8.0`).
pub const SERVER_VERSION: &str = "8.0.11-Stratus";

/// Connection ids, as `CONNECTION_ID()` would number them.
static NEXT_CONNECTION: AtomicU32 = AtomicU32::new(1);

/// The endpoint's TLS (MySQL's `ssl-cert` / `ssl-key`): offered to every client, which
/// switches to it after the greeting if it wants to.
#[derive(Clone)]
pub struct MysqlTls {
    /// Re-read every `node::tls::RELOAD_INTERVAL` when its files change: a rotated
    /// certificate serves new connections without a restart.
    pub identity: Arc<node::tls::ServerIdentity>,
    /// Refuse a client that logs in without TLS (MySQL's `require_secure_transport`; error
    /// 3159).
    pub require_secure_transport: bool,
}

impl std::fmt::Debug for MysqlTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlTls")
            .field("require_secure_transport", &self.require_secure_transport)
            .finish_non_exhaustive()
    }
}

/// A task aborted when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// MySQL's `ER_SECURE_TRANSPORT_REQUIRED`.
const SECURE_TRANSPORT_REQUIRED: u16 = 3159;

/// Accepts connections on `listener` until the task is dropped, each served by its own
/// task and session over `client` (which lives as long as the process), within `limits`
/// ([`MysqlLimits`]: connections at once, silence while logging in and between statements),
/// offering `tls` when set.
pub async fn serve(
    listener: TcpListener,
    client: &'static Client,
    limits: MysqlLimits,
    tls: Option<MysqlTls>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let accounts = Arc::new(Accounts::new(client));
    let throttle = Arc::new(LoginThrottle::new(&limits));
    LazyLock::force(&login::LOGIN_FAILURES);
    // Ends with the endpoint (a task dropped stops reloading).
    let _reloader = tls.as_ref().map(|t| {
        AbortOnDrop(tokio::spawn(node::http::reload_periodically(
            t.identity.clone(),
            node::tls::RELOAD_INTERVAL,
        )))
    });
    loop {
        // A slot first: at the limit the next connection waits in the kernel's accept queue.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return; // never closed
        };
        // A failed accept is retried (`node::http::accept`), never the end of the endpoint.
        let (stream, peer) = node::http::accept(&listener).await;
        let id = NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed);
        let limits = limits.clone();
        let accounts = accounts.clone();
        let throttle = throttle.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            tracing::debug!(%peer, id, "sql connection opened");
            let (r, mut w) = stream.into_split();
            if let Some(left) = throttle.blocked_for(peer.ip()) {
                // Refused before the greeting, as MySQL refuses a blocked host.
                login::count_failure(LoginFailure::Blocked);
                let _ = w.write_all(&login::blocked_packet(peer.ip(), left)).await;
                drop(slot);
                return;
            }
            let (r, w, login_done) = crate::mysql_limits::bounded(r, w, &limits);
            let shim = Shim::new(accounts, throttle, peer, id, login_done);
            if let Err(e) = serve_connection(shim, r, w, tls.as_ref()).await {
                tracing::debug!(%peer, id, error = %e, "sql connection ended");
            }
            drop(slot);
        });
    }
}

/// One connection: the protocol over `r` and `w`, switching to TLS when the client asks for
/// it and `tls` is set.
async fn serve_connection<R, W>(
    mut shim: Shim,
    r: R,
    mut w: W,
    tls: Option<&MysqlTls>,
) -> io::Result<()>
where
    R: tokio::io::AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin,
{
    let Some(tls) = tls else {
        return AsyncMysqlIntermediary::run_on(shim, r, w).await;
    };
    let config = tls.identity.config();
    let offered = Some(config.clone());
    let (secure, params) =
        AsyncMysqlIntermediary::init_before_ssl(&mut shim, r, &mut w, &offered).await?;
    let opts = opensrv_mysql::IntermediaryOptions::default();
    if secure {
        return opensrv_mysql::secure_run_with_options(shim, w, opts, config, params).await;
    }
    if tls.require_secure_transport {
        let seq = params.1.wrapping_add(1);
        let refusal = login::error_packet(
            seq,
            SECURE_TRANSPORT_REQUIRED,
            b"HY000",
            "Connections using insecure transport are prohibited while \
             --require_secure_transport=ON.",
        );
        w.write_all(&refusal).await?;
        w.flush().await?;
        return Ok(());
    }
    opensrv_mysql::plain_run_with_options(shim, w, opts, params).await
}

/// A prepared statement: its text and how many parameters it takes.
struct Prepared {
    sql: String,
    params: usize,
}

struct Shim {
    accounts: Arc<Accounts>,
    throttle: Arc<LoginThrottle>,
    peer: SocketAddr,
    /// This connection's salt (opensrv asks for it twice: the greeting and the check).
    salt: [u8; accounts::SCRAMBLE_LEN],
    /// The user who logged in (set by `authenticate`, which opensrv calls through `&self`).
    user: parking_lot::Mutex<Option<String>>,
    /// Why the login was refused (MySQL's words), for `on_auth_failure`.
    denial: parking_lot::Mutex<Option<String>>,
    /// The logged-in user's session, made at its first command.
    session: Option<FrontSession>,
    /// Ends the login deadline once the user is authenticated.
    login_done: crate::mysql_limits::LoginDone,
    id: u32,
    prepared: HashMap<u32, Prepared>,
    next_statement: u32,
}

impl Shim {
    fn new(
        accounts: Arc<Accounts>,
        throttle: Arc<LoginThrottle>,
        peer: SocketAddr,
        id: u32,
        login_done: crate::mysql_limits::LoginDone,
    ) -> Shim {
        Shim {
            accounts,
            throttle,
            peer,
            salt: accounts::new_salt(),
            user: parking_lot::Mutex::new(None),
            denial: parking_lot::Mutex::new(None),
            session: None,
            login_done,
            id,
            prepared: HashMap::new(),
            next_statement: 1,
        }
    }

    /// The session of the user who logged in. opensrv skips `authenticate` for a handshake
    /// that names no user at all: such a connection runs nothing.
    fn session(&mut self) -> Result<&mut FrontSession, FrontError> {
        if self.session.is_none() {
            let Some(user) = self.user.lock().clone() else {
                return Err(FrontError::NotLoggedIn);
            };
            self.session = Some(FrontSession::for_user(self.accounts.clone(), &user));
        }
        self.session.as_mut().ok_or(FrontError::NotLoggedIn)
    }

    /// Checks a login (`mysql_native_password`), counting and throttling failures.
    async fn login(&self, username: &[u8], answer: &[u8]) -> Result<String, LoginFailure> {
        let name = std::str::from_utf8(username).map_err(|_| LoginFailure::UnknownUser)?;
        let account = match self.accounts.get(name).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(user = name, error = %e, "cannot read the user to log it in");
                return Err(LoginFailure::Unavailable);
            }
        };
        let account = account.ok_or(LoginFailure::UnknownUser)?;
        if !accounts::native_login_ok(account.auth.as_ref(), &self.salt, answer) {
            return Err(LoginFailure::WrongPassword);
        }
        Ok(name.to_string())
    }

    /// The session's state as the protocol's status flags: autocommit on, a transaction
    /// open. (The handshake, written by opensrv, always says neither: a driver that trusts it
    /// and wants autocommit off may not send `SET autocommit = 0`; `BEGIN` always works.)
    fn status(&self) -> StatusFlags {
        let mut s = StatusFlags::empty();
        if let Some(session) = &self.session {
            s.set(StatusFlags::SERVER_STATUS_AUTOCOMMIT, session.autocommit());
            s.set(
                StatusFlags::SERVER_STATUS_IN_TRANS,
                session.in_transaction(),
            );
        }
        s
    }
}

#[async_trait::async_trait]
impl<W: AsyncWrite + Send + Unpin> AsyncMysqlShim<W> for Shim {
    type Error = io::Error;

    fn version(&self) -> String {
        SERVER_VERSION.to_string()
    }

    fn connect_id(&self) -> u32 {
        self.id
    }

    fn salt(&self) -> [u8; accounts::SCRAMBLE_LEN] {
        self.salt
    }

    async fn on_auth_failure(&self, username: &[u8], _auth_plugin: &str) -> (ErrorKind, String) {
        let message = self.denial.lock().take().unwrap_or_else(|| {
            login::access_denied_message(&String::from_utf8_lossy(username), self.peer.ip(), true)
        });
        (ErrorKind::ER_ACCESS_DENIED_ERROR, message)
    }

    async fn authenticate(
        &self,
        _auth_plugin: &str,
        username: &[u8],
        _salt: &[u8],
        auth_data: &[u8],
    ) -> bool {
        match self.login(username, auth_data).await {
            Ok(name) => {
                self.throttle.succeeded(self.peer.ip());
                *self.user.lock() = Some(name);
                self.login_done.mark();
                true
            }
            Err(reason) => {
                login::count_failure(reason);
                self.throttle.failed(self.peer.ip());
                let user = String::from_utf8_lossy(username);
                tracing::info!(peer = %self.peer, %user, %reason, "sql login refused");
                *self.denial.lock() = Some(login::access_denied_message(
                    &user,
                    self.peer.ip(),
                    !auth_data.is_empty(),
                ));
                false
            }
        }
    }

    async fn on_prepare<'a>(
        &'a mut self,
        query: &'a str,
        info: StatementMetaWriter<'a, W>,
    ) -> io::Result<()> {
        let params = placeholders(query);
        let id = self.next_statement;
        self.next_statement = self.next_statement.wrapping_add(1).max(1);
        self.prepared.insert(
            id,
            Prepared {
                sql: query.to_string(),
                params: params.len(),
            },
        );
        let param_columns: Vec<Column> = (0..params.len())
            .map(|_| column("?", ColumnKind::Text))
            .collect();
        info.reply(id, &param_columns, &[]).await
    }

    async fn on_execute<'a>(
        &'a mut self,
        id: u32,
        params: ParamParser<'a>,
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        let Some(p) = self.prepared.get(&id) else {
            return write_error(
                FrontError::Parse {
                    message: format!("unknown prepared statement: id={id}"),
                },
                results,
            )
            .await;
        };
        let values: Vec<Param> = params
            .into_iter()
            .map(|v| Param::from_value(v.value.into_inner()))
            .collect();
        let sql = match bind(&p.sql, p.params, &values) {
            Ok(sql) => sql,
            Err(e) => return write_error(e, results).await,
        };
        let out = match self.session() {
            Ok(session) => session.execute(&sql).await,
            Err(e) => Err(e),
        };
        write_output(out, self.status(), results).await
    }

    async fn on_close<'a>(&'a mut self, stmt: u32)
    where
        W: 'async_trait,
    {
        self.prepared.remove(&stmt);
    }

    async fn on_query<'a>(
        &'a mut self,
        query: &'a str,
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        let out = match self.session() {
            Ok(session) => session.execute(query).await,
            Err(e) => Err(e),
        };
        write_output(out, self.status(), results).await
    }

    async fn on_init<'a>(&'a mut self, db: &'a str, writer: InitWriter<'a, W>) -> io::Result<()> {
        match self.session().and_then(|s| s.use_database(db)) {
            Ok(()) => writer.ok().await,
            Err(e) => {
                writer
                    .error(ErrorKind::from(e.mysql_code()), e.to_string().as_bytes())
                    .await
            }
        }
    }
}

fn column(name: &str, kind: ColumnKind) -> Column {
    let (coltype, colflags) = match kind {
        ColumnKind::Int => (ColumnType::MYSQL_TYPE_LONGLONG, ColumnFlags::empty()),
        ColumnKind::UInt => (ColumnType::MYSQL_TYPE_LONGLONG, ColumnFlags::UNSIGNED_FLAG),
        ColumnKind::Float => (ColumnType::MYSQL_TYPE_DOUBLE, ColumnFlags::empty()),
        ColumnKind::Decimal => (ColumnType::MYSQL_TYPE_NEWDECIMAL, ColumnFlags::empty()),
        ColumnKind::Text => (ColumnType::MYSQL_TYPE_VAR_STRING, ColumnFlags::empty()),
        ColumnKind::Bytes => (ColumnType::MYSQL_TYPE_BLOB, ColumnFlags::BINARY_FLAG),
        ColumnKind::Date => (ColumnType::MYSQL_TYPE_DATE, ColumnFlags::empty()),
        ColumnKind::DateTime => (ColumnType::MYSQL_TYPE_DATETIME, ColumnFlags::empty()),
    };
    Column {
        table: String::new(),
        column: name.to_string(),
        coltype,
        colflags,
    }
}

async fn write_error<W: AsyncWrite + Send + Unpin>(
    e: FrontError,
    results: QueryResultWriter<'_, W>,
) -> io::Result<()> {
    results
        .error(ErrorKind::from(e.mysql_code()), e.to_string().as_bytes())
        .await
}

/// Writes a statement's answer; `status` goes in its OK packet (a driver tracks the
/// session's autocommit and transaction state from it).
async fn write_output<W: AsyncWrite + Send + Unpin>(
    out: Result<Output, FrontError>,
    status: StatusFlags,
    results: QueryResultWriter<'_, W>,
) -> io::Result<()> {
    let out = match out {
        Ok(out) => out,
        Err(e) => return write_error(e, results).await,
    };
    let warnings = u16::try_from(out.warnings.len()).unwrap_or(u16::MAX);
    if out.columns.is_empty() {
        return results
            .completed(OkResponse {
                affected_rows: out.affected_rows,
                warnings,
                status_flags: status,
                ..OkResponse::default()
            })
            .await;
    }
    let columns: Vec<Column> = out
        .columns
        .iter()
        .map(|c| column(&c.name, c.kind))
        .collect();
    let mut w = results.start(&columns).await?;
    for row in &out.rows {
        for (cell, c) in row.iter().zip(&out.columns) {
            match (cell, c.kind) {
                (Cell::Null, _) => w.write_col(None::<i64>)?,
                (Cell::Int(v), ColumnKind::Int) => w.write_col(*v)?,
                (Cell::UInt(v), ColumnKind::UInt) => w.write_col(*v)?,
                (Cell::Float(v), ColumnKind::Float) => w.write_col(*v)?,
                (Cell::Date(d), ColumnKind::Date) => w.write_col(*d)?,
                (Cell::DateTime(t), ColumnKind::DateTime) => w.write_col(*t)?,
                (Cell::Bytes(b), _) => w.write_col(b.as_slice())?,
                // A value whose kind differs from its column's (rows from the engine, where
                // the first value chose the kind) goes as text, which every kind accepts in
                // the text protocol and strings accept in the binary one.
                (other, _) => w.write_col(other.to_text().unwrap_or_default().as_str())?,
            }
        }
        w.end_row().await?;
    }
    w.finish().await
}

/// One parameter of `COM_STMT_EXECUTE`, owned.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    Null,
    Int(i64),
    UInt(u64),
    Double(f64),
    Bytes(Vec<u8>),
    /// A date or datetime, as its text (`2024-02-29`, `2024-02-29 10:00:00.000500`).
    Temporal(String),
    /// A value no column type holds (a `MYSQL_TYPE_TIME`), or a malformed date.
    Unsupported(&'static str),
}

/// The text of a binary `MYSQL_TYPE_DATE`/`DATETIME`/`TIMESTAMP` parameter: 0, 4, 7 or 11
/// bytes (year u16 LE, month, day, then hour, minute, second, then microseconds u32 LE).
fn temporal_text(b: &[u8]) -> Option<String> {
    let date = |b: &[u8]| {
        format!(
            "{:04}-{:02}-{:02}",
            u16::from_le_bytes([b[0], b[1]]),
            b[2],
            b[3]
        )
    };
    Some(match b.len() {
        0 => "0000-00-00".to_string(),
        4 => date(b),
        7 => format!("{} {:02}:{:02}:{:02}", date(b), b[4], b[5], b[6]),
        11 => {
            // Microseconds: a value of seven digits would print as another time.
            let micros = u32::from_le_bytes([b[7], b[8], b[9], b[10]]);
            if micros >= 1_000_000 {
                return None;
            }
            format!(
                "{} {:02}:{:02}:{:02}.{micros:06}",
                date(b),
                b[4],
                b[5],
                b[6],
            )
        }
        _ => return None,
    })
}

impl Param {
    fn from_value(v: ValueInner<'_>) -> Param {
        match v {
            ValueInner::NULL => Param::Null,
            ValueInner::Int(v) => Param::Int(v),
            ValueInner::UInt(v) => Param::UInt(v),
            ValueInner::Double(v) => Param::Double(v),
            ValueInner::Bytes(b) => Param::Bytes(b.to_vec()),
            ValueInner::Date(b) | ValueInner::Datetime(b) => match temporal_text(b) {
                Some(t) => Param::Temporal(t),
                None => Param::Unsupported(
                    "a date parameter of a length other than 0, 4, 7 or 11, or with a fraction \
                     of a million microseconds or more",
                ),
            },
            ValueInner::Time(_) => Param::Unsupported("TIME parameters (there is no TIME type)"),
        }
    }

    /// The SQL literal of this value.
    fn literal(&self) -> Result<String, FrontError> {
        Ok(match self {
            Param::Null => "NULL".to_string(),
            Param::Int(v) => v.to_string(),
            Param::UInt(v) => v.to_string(),
            Param::Double(v) if v.is_finite() => format!("{v:?}"),
            Param::Double(v) => {
                return Err(FrontError::Parse {
                    message: format!("a parameter that is not a finite number: {v}"),
                });
            }
            Param::Bytes(b) => {
                let s = std::str::from_utf8(b).map_err(|_| FrontError::Parse {
                    message: "a string parameter that is not UTF-8".into(),
                })?;
                crate::write::quote_string(s)
            }
            // Digits, `-`, `:`, `.` and a space only: no quoting needed.
            Param::Temporal(t) => format!("'{t}'"),
            Param::Unsupported(what) => return Err(FrontError::unsupported(*what)),
        })
    }
}

/// The byte offsets of the `?` placeholders of `sql`: outside string literals, quoted
/// identifiers and comments.
pub fn placeholders(sql: &str) -> Vec<usize> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"' | b'`') => {
                i += 1;
                while i < b.len() {
                    if b[i] == b'\\' && q != b'`' {
                        i += 2;
                        continue;
                    }
                    if b[i] == q {
                        // A doubled quote is one quote character.
                        if b.get(i + 1) == Some(&q) {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b'?' => out.push(i),
            _ => {}
        }
        i += 1;
    }
    out
}

/// `sql` with its `expected` placeholders replaced by `params` as literals.
pub fn bind(sql: &str, expected: usize, params: &[Param]) -> Result<String, FrontError> {
    if params.len() != expected {
        return Err(FrontError::Parse {
            message: format!("expected {expected} parameters, found {}", params.len()),
        });
    }
    let mut out = String::with_capacity(sql.len() + 16 * params.len());
    let mut last = 0;
    for (pos, p) in placeholders(sql).into_iter().zip(params) {
        out.push_str(&sql[last..pos]);
        out.push_str(&p.literal()?);
        last = pos + 1;
    }
    out.push_str(&sql[last..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The binary protocol's date layouts (length 0, 4, 7, 11) as text; a fraction of a
    /// million microseconds or more is refused, not printed as seven digits.
    #[test]
    fn binary_dates_read_as_their_text_and_bad_fractions_are_refused() {
        let day = [0xe8, 0x07, 2, 29];
        assert_eq!(temporal_text(&day).as_deref(), Some("2024-02-29"));
        let mut t = day.to_vec();
        t.extend_from_slice(&[13, 5, 9]);
        assert_eq!(temporal_text(&t).as_deref(), Some("2024-02-29 13:05:09"));
        let mut f = t.clone();
        f.extend_from_slice(&999_999u32.to_le_bytes());
        assert_eq!(
            temporal_text(&f).as_deref(),
            Some("2024-02-29 13:05:09.999999")
        );
        let mut bad = t.clone();
        bad.extend_from_slice(&1_000_000u32.to_le_bytes());
        assert_eq!(temporal_text(&bad), None);
        assert_eq!(temporal_text(&t[..5]), None);
    }

    #[test]
    fn placeholders_inside_quotes_and_comments_are_not_parameters() {
        let sql = "SELECT '?', \"a?\", `c?`, 'it''s ?', 'x\\'?' -- ?\n FROM t /* ? */ WHERE a = ? # ?\n AND b = ?";
        let found = placeholders(sql);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|&i| &sql[i..=i] == "?"));
    }

    #[test]
    fn bound_parameters_become_literals_and_a_wrong_count_is_refused() {
        let sql = bind(
            "INSERT INTO t VALUES (?, ?, ?, ?)",
            4,
            &[
                Param::Int(-3),
                Param::Bytes(b"it's a \\ test".to_vec()),
                Param::Null,
                Param::Double(0.5),
            ],
        )
        .unwrap();
        assert_eq!(
            sql,
            "INSERT INTO t VALUES (-3, 'it''s a \\\\ test', NULL, 0.5)"
        );
        assert!(bind("SELECT ?", 1, &[]).is_err());
        assert!(bind("SELECT ?", 1, &[Param::Double(f64::NAN)]).is_err());
        assert!(bind("SELECT ?", 1, &[Param::Unsupported("TIME")]).is_err());
        let day = Param::from_value(ValueInner::Date(&[0xe8, 0x07, 2, 29]));
        assert_eq!(bind("SELECT ?", 1, &[day]).unwrap(), "SELECT '2024-02-29'");
        let at = Param::from_value(ValueInner::Datetime(&[
            0xe8, 0x07, 2, 29, 10, 5, 9, 0xf4, 0x01, 0, 0,
        ]));
        assert_eq!(
            bind("SELECT ?", 1, &[at]).unwrap(),
            "SELECT '2024-02-29 10:05:09.000500'"
        );
    }

    proptest! {
        /// A bound string parameter parses back as exactly the string it was.
        #[test]
        fn a_bound_string_parses_back_as_the_same_string(s in "\\PC{0,24}") {
            let sql = bind("SELECT ?", 1, &[Param::Bytes(s.clone().into_bytes())]).unwrap();
            let stmts = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::MySqlDialect {}, &sql).unwrap();
            let sqlparser::ast::Statement::Query(q) = &stmts[0] else { panic!("{sql}") };
            let sqlparser::ast::SetExpr::Select(sel) = q.body.as_ref() else { panic!("{sql}") };
            let sqlparser::ast::SelectItem::UnnamedExpr(sqlparser::ast::Expr::Value(v)) = &sel.projection[0] else { panic!("{sql}") };
            prop_assert_eq!(v.value.clone(), sqlparser::ast::Value::SingleQuotedString(s));
        }
    }
}
