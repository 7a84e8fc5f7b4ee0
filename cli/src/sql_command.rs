//! `stratus sql`: runs statements through the SQL front (`sqlfront`, in this process: the same
//! session the MySQL endpoint gives each connection) and prints their results.

use std::io::Write;
use std::path::Path;

use client::Client;
use sqlfront::FrontSession;
use tokio::runtime::Runtime;

use crate::output_format::{Format, render};

/// Why `stratus sql` failed (printed as `Error: ...`; the process exits with 1).
#[derive(Debug, thiserror::Error)]
pub enum SqlCommandError {
    #[error(transparent)]
    ClusterFile(#[from] crate::cluster_file::ClusterFileError),
    #[error("cannot start the client: {0}")]
    Client(String),
    #[error("{0}")]
    Statement(String),
    #[error("cannot read statements from stdin: {0}")]
    Stdin(std::io::Error),
    #[error("cannot write output: {0}")]
    Output(std::io::Error),
    #[error(transparent)]
    NoCluster(#[from] crate::state_dir::StateDirError),
    #[error("interactive prompt: {0}")]
    Prompt(String),
}

/// Runs `statements` in order against the cluster of `cluster_file`, printing each result to
/// `out` and each warning to `err`; stops at the first failing statement.
pub fn run(
    cluster_file: &Path,
    statements: &[String],
    format: Format,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), SqlCommandError> {
    let (rt, client) = connect(cluster_file)?;
    let session = &mut FrontSession::new(client);
    for sql in statements {
        execute(&rt, session, sql, format, out, err)?;
    }
    Ok(())
}

/// A runtime and a client of the cluster of `cluster_file` (the client lives on the runtime,
/// and as long as the process: the SQL front's sessions borrow it).
pub fn connect(cluster_file: &Path) -> Result<(Runtime, &'static Client), SqlCommandError> {
    let cfg = crate::cluster_file::load(cluster_file)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| SqlCommandError::Client(format!("tokio runtime: {e}")))?;
    let client = {
        let _guard = rt.enter();
        Client::new(cfg).map_err(|e| SqlCommandError::Client(node::error_chain(&e)))?
    };
    Ok((rt, Box::leak(Box::new(client))))
}

/// Runs one statement in `session`, printing its result to `out` and its warnings to `err`.
pub fn execute(
    rt: &Runtime,
    session: &mut FrontSession,
    sql: &str,
    format: Format,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), SqlCommandError> {
    let result = rt
        .block_on(session.execute(sql))
        .map_err(|e| SqlCommandError::Statement(node::error_chain(&e)))?
        .into_query_result();
    for w in &result.warnings {
        writeln!(err, "Warning: {w}").map_err(SqlCommandError::Output)?;
    }
    out.write_all(render(&result, format).as_bytes())
        .and_then(|()| out.flush())
        .map_err(SqlCommandError::Output)
}
