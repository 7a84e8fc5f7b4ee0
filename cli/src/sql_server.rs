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
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
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
/// the process); returns the address it listens on.
pub fn serve(
    rt: &Runtime,
    cfg: ClientConfig,
    listener: TcpListener,
) -> Result<SocketAddr, SqlServerError> {
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
    rt.spawn(sqlfront::mysql::serve(
        listener,
        client,
        sqlfront::mysql::MysqlLimits::default(),
    ));
    Ok(bound)
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

/// `stratus sql-server`: serves until SIGINT or SIGTERM.
pub fn run(cluster_file: &Path, address: &str, out: &mut dyn Write) -> Result<(), SqlServerError> {
    let cfg = crate::cluster_file::load(cluster_file)?;
    let (rt, mut interrupt, mut terminate) =
        runtime_with_stop_signals().map_err(SqlServerError::Runtime)?;
    let listener = bind(&rt, address)?;
    let bound = serve(&rt, cfg, listener)?;
    writeln!(
        out,
        "sql endpoint (MySQL protocol) listening on {bound}\ntry: mysql -h {} -P {} -u root",
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
