//! `stratus sql-server`: the MySQL protocol endpoint (`sqlfront::mysql`) over the cluster a
//! cluster file names, in the foreground; and the endpoint `stratus up` starts beside its
//! nodes.
//!
//! The endpoint runs in this process over one client (one region cache, one coprocessor
//! cache, shared by every connection); each connection has its own session. SIGINT or
//! SIGTERM stops it.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;

use client::{Client, ClientConfig};
use sqlfront::accounts::Bootstrap;
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// TiDB's port, the default of `--listen` and of `stratus up`'s endpoint.
pub const DEFAULT_SQL_PORT: u16 = 4000;

#[derive(Debug, thiserror::Error)]
pub enum SqlServerError {
    #[error(transparent)]
    ClusterFile(#[from] crate::cluster_file::ClusterFileError),
    #[error("cannot start the client: {0}")]
    Client(String),
    #[error("cannot listen for SQL connections: address={address} reason={reason}")]
    Listen { address: String, reason: String },
    #[error("the SQL endpoint stopped: {0}")]
    Serve(std::io::Error),
    #[error("cannot start the runtime or wait for signals: {0}")]
    Runtime(std::io::Error),
    #[error("bad SQL endpoint TLS: {0}")]
    Ssl(String),
    #[error("cannot read the root password: {0}")]
    RootPassword(#[from] node::tls::TlsError),
    #[error("cannot give the cluster its root user: {0}")]
    Bootstrap(sqlfront::FrontError),
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
}

/// The SQL endpoint's TLS as `sql-server` takes it (TiDB's `ssl-cert`, `ssl-key`,
/// `require-secure-transport`).
#[derive(Debug, Clone, Default)]
pub struct SslOptions {
    pub cert: Option<std::path::PathBuf>,
    pub key: Option<std::path::PathBuf>,
    pub require_secure_transport: bool,
}

impl SslOptions {
    /// The endpoint's TLS; `None` without a certificate. A certificate without its key (or
    /// the other way round), or TLS required without either, is refused.
    pub fn load(&self) -> Result<Option<sqlfront::mysql::MysqlTls>, SqlServerError> {
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Ok(Some(sqlfront::mysql::MysqlTls {
                identity: node::tls::ServerIdentity::load(cert, key)?,
                require_secure_transport: self.require_secure_transport,
            })),
            (None, None) if !self.require_secure_transport => Ok(None),
            _ => Err(SqlServerError::Ssl(
                "expected --ssl-cert and --ssl-key together (and both with \
                 --require-secure-transport), found only some of them"
                    .into(),
            )),
        }
    }
}

/// The root password of a fresh cluster: the first line of `file` (refused when every user
/// may read it), else a random one that is printed once.
pub fn root_password(file: Option<&Path>) -> Result<Option<String>, SqlServerError> {
    file.map(|f| {
        node::tls::read_secret_line("root password file", f, "a password on its first line")
    })
    .transpose()
    .map_err(SqlServerError::from)
}

/// What to print about `root` after the endpoint gave the cluster one (or did not need to).
pub fn bootstrap_lines(b: &Bootstrap) -> Vec<String> {
    match b {
        Bootstrap::Existing => Vec::new(),
        Bootstrap::Created => {
            vec!["created the SQL user root with the password of --root-password-file".into()]
        }
        Bootstrap::Generated(p) => vec![
            format!("created the SQL user root; its password (shown once): {p}"),
            "change it with: ALTER USER root IDENTIFIED BY '...'".into(),
        ],
    }
}

/// Binds the endpoint's address on `rt` (a port of 0 picks a free one): done first, so a
/// taken port fails before anything starts.
pub fn bind(rt: &Runtime, address: &str) -> Result<TcpListener, SqlServerError> {
    rt.block_on(TcpListener::bind(address))
        .map_err(|e| SqlServerError::Listen {
            address: address.to_string(),
            reason: e.to_string(),
        })
}

/// Serves SQL on `listener` from tasks of `rt`, over a client of `cfg` (kept for the life of
/// the process), after giving a fresh cluster its `root` user (with `root_password`, else a
/// random one); returns the address it listens on and what it did about `root`.
pub fn serve(
    rt: &Runtime,
    cfg: ClientConfig,
    listener: TcpListener,
    limits: sqlfront::mysql::MysqlLimits,
    tls: Option<sqlfront::mysql::MysqlTls>,
    root_password: Option<&str>,
) -> Result<(SocketAddr, Bootstrap), SqlServerError> {
    let bound = listener.local_addr().map_err(|e| SqlServerError::Listen {
        address: "the bound socket".to_string(),
        reason: e.to_string(),
    })?;
    let client = {
        let _guard = rt.enter();
        Client::new(cfg).map_err(|e| SqlServerError::Client(node::error_chain(&e)))?
    };
    // Every connection's session borrows the client; it serves until the process ends.
    let client: &'static Client = Box::leak(Box::new(client));
    let bootstrap = rt
        .block_on(sqlfront::accounts::bootstrap(client, root_password))
        .map_err(SqlServerError::Bootstrap)?;
    rt.spawn(sqlfront::mysql::serve(listener, client, limits, tls));
    Ok((bound, bootstrap))
}

/// A two-thread runtime (the SQL endpoint's connections run beside the caller's own work)
/// and its SIGINT and SIGTERM streams, installed before anything starts, so a signal during
/// the start is not lost.
pub fn runtime_with_stop_signals() -> std::io::Result<(Runtime, Signal, Signal)> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (interrupt, terminate) = {
        let _guard = rt.enter();
        (
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        )
    };
    Ok((rt, interrupt, terminate))
}

/// Serves the endpoint's metrics (`GET /metrics`: the failed-login counter, the client's
/// cache and topology counters) on `address`, TiDB's status port; returns where.
pub fn serve_status(rt: &Runtime, address: &str) -> Result<SocketAddr, SqlServerError> {
    let listener = bind(rt, address)?;
    let bound = listener.local_addr().map_err(|e| SqlServerError::Listen {
        address: address.to_string(),
        reason: e.to_string(),
    })?;
    rt.spawn(async move {
        let served = node::http::serve_until(
            listener,
            node::http::metrics_router(),
            std::future::pending(),
            std::time::Duration::from_secs(1),
            &node::http_limits::HttpLimits::default(),
            None,
        )
        .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the status listener stopped");
        }
    });
    Ok(bound)
}

/// `stratus sql-server`: serves until SIGINT or SIGTERM.
pub fn run(
    cluster_file: &Path,
    address: &str,
    status_address: Option<&str>,
    limits: sqlfront::mysql::MysqlLimits,
    ssl: &SslOptions,
    root_password_file: Option<&Path>,
    out: &mut dyn Write,
) -> Result<(), SqlServerError> {
    let cfg = crate::cluster_file::load(cluster_file)?;
    let password = root_password(root_password_file)?;
    let tls = ssl.load()?;
    let (rt, mut interrupt, mut terminate) =
        runtime_with_stop_signals().map_err(SqlServerError::Runtime)?;
    let listener = bind(&rt, address)?;
    if let Some(status) = status_address {
        let bound = serve_status(&rt, status)?;
        writeln!(out, "status (metrics) listening on http://{bound}")?;
    }
    let secure = tls.as_ref().map(|t| t.require_secure_transport);
    let (bound, bootstrap) = serve(&rt, cfg, listener, limits, tls, password.as_deref())?;
    for line in bootstrap_lines(&bootstrap) {
        writeln!(out, "{line}")?;
    }
    match secure {
        Some(true) => writeln!(
            out,
            "sql endpoint: TLS required (--require-secure-transport)"
        )?,
        Some(false) => writeln!(out, "sql endpoint: TLS offered")?,
        None => {}
    }
    writeln!(
        out,
        "sql endpoint (MySQL protocol) listening on {bound}\ntry: mysql -h {} -P {} -u root -p",
        bound.ip(),
        bound.port()
    )?;
    out.flush()?;
    rt.block_on(async {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    });
    writeln!(out, "stopped")?;
    Ok(())
}
