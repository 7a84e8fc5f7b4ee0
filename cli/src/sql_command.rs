//! `stratus sql`: runs statements through the client's SQL front and prints their results.

use std::io::Write;
use std::path::Path;

use client::Client;
use client::sql::Engine;
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
    let engine = &mut Engine::new(&client);
    for sql in statements {
        execute(&rt, engine, sql, format, out, err)?;
    }
    Ok(())
}

/// A runtime and a client of the cluster of `cluster_file` (the client lives on the runtime).
pub fn connect(cluster_file: &Path) -> Result<(Runtime, Client), SqlCommandError> {
    let cfg = crate::cluster_file::load(cluster_file)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| SqlCommandError::Client(format!("tokio runtime: {e}")))?;
    let client = {
        let _guard = rt.enter();
        Client::new(cfg).map_err(|e| SqlCommandError::Client(node::error_chain(&e)))?
    };
    Ok((rt, client))
}

/// Runs one statement on `engine`, printing its result to `out` and its warnings to `err`.
pub fn execute(
    rt: &Runtime,
    engine: &mut Engine<'_>,
    sql: &str,
    format: Format,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), SqlCommandError> {
    let result = rt
        .block_on(engine.execute(sql))
        .map_err(|e| SqlCommandError::Statement(node::error_chain(&e)))?;
    for w in &result.warnings {
        writeln!(err, "Warning: {w}").map_err(SqlCommandError::Output)?;
    }
    out.write_all(render(&result, format).as_bytes())
        .and_then(|()| out.flush())
        .map_err(SqlCommandError::Output)
}
