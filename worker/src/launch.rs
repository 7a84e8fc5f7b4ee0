//! `stratus-worker [--config path]` (and `stratus worker [--config path]`): prints the effective
//! config, listens, serves until SIGTERM or SIGINT, lets in-flight requests finish within
//! `worker.shutdown-grace`, exits 0. The `stratus-worker` binary and the `stratus` command line
//! both call [`main`], so the two behave exactly alike.
//!
//! Exit codes: 2 for a bad command line or config (the message names the key), 1 when the
//! object store cannot be opened or the address cannot be bound.
//!
//! Logs go to stderr, filtered by `STRATUS_LOG` (default `info`), as the server's do.

use std::process::ExitCode;
use std::sync::Arc;

use crate::{WorkerConfig, WorkerState, error_chain};

/// Runs a worker with the command line `args` (without the program name) until SIGTERM or
/// SIGINT; the exit code of `stratus-worker`.
pub fn main(args: impl Iterator<Item = String>) -> ExitCode {
    node::logging::init();
    let config = match ::node::config::config_path_from_args(args)
        .and_then(|path| WorkerConfig::load(path.as_deref()))
    {
        Ok(config) => config,
        Err(e) => {
            eprintln!("stratus-worker: {}", error_chain(&e));
            return ExitCode::from(2);
        }
    };
    println!("# stratus-worker effective config");
    print!("{}", config.render());
    let addr = config.worker.addr.clone();
    let grace = config.worker.shutdown_grace.duration();
    let state = match WorkerState::open(config) {
        Ok(state) => Arc::new(state),
        Err(e) => {
            eprintln!("stratus-worker: {}", error_chain(&e));
            return ExitCode::from(if e.is_config() { 2 } else { 1 });
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("stratus-worker")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stratus-worker: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let served = runtime.block_on(async move {
        // Handlers first: the "listening" line tells supervisors they may signal us.
        let shutdown = ::node::http::shutdown_signal();
        let tls = state.tls().map(|t| t.as_ref());
        let (listener, _) = ::node::http::bind("stratus-worker", &addr, tls).await?;
        crate::service::serve(state, listener, shutdown).await
    });
    // A request still executing on a blocking thread after the grace period is abandoned
    // rather than waited for (dropping the runtime would wait).
    runtime.shutdown_timeout(grace);
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stratus-worker: {}", error_chain(&e));
            ExitCode::from(1)
        }
    }
}
