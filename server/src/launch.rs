//! `stratus-server --config server.toml` (and `stratus server --config server.toml`): a storage
//! server (see [`crate::config`] for every key). The `stratus-server` binary and the `stratus`
//! command line both call [`main`], so the two behave exactly alike.
//!
//! Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT), 1 when the server fails at start or
//! while running, 2 for a bad command line or config.

use std::process::ExitCode;
use std::sync::Arc;

use crate::api::{AppState, router, split_checker};
use crate::config::ServerConfig;
use crate::node::Node;
use node::config::{config_path_from_args, load, render};

/// Runs a server with the command line `args` (without the program name) until SIGTERM or
/// SIGINT; the exit code of `stratus-server`.
pub fn main(args: impl Iterator<Item = String>) -> ExitCode {
    node::logging::init();
    let config: ServerConfig = match config_path_from_args(args)
        .and_then(|p| load(p.as_deref()))
        .and_then(|c: ServerConfig| c.validate().map(|()| c))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("stratus-server: {e}");
            return ExitCode::from(2);
        }
    };
    let config_text = render(&config);
    println!("# stratus-server effective config\n{config_text}");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("stratus-server")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stratus-server: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(config, config_text)) {
        Ok(()) => {
            println!("stratus-server stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("stratus-server: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run(config: ServerConfig, config_text: String) -> Result<(), String> {
    let handle = tokio::runtime::Handle::current();
    let grace = config.server.shutdown_grace.duration();
    let limits = config.http.clone();
    let split_every = config.server.split_check_interval.duration();
    let addr = config.server.addr.clone();
    let node = tokio::task::spawn_blocking(move || Node::open(config, handle))
        .await
        .map_err(|e| format!("start-up task failed: {e}"))?
        .map_err(|e| crate::api::error_chain(&e))?;
    let node = Arc::new(node);
    // Handlers first: the "listening" line tells supervisors they may signal us.
    let shutdown = node::http::shutdown_signal();
    let (listener, local) = node::http::bind("stratus-server", &addr, node.tls.as_deref())
        .await
        .map_err(|e| e.to_string())?;
    let state = Arc::new(AppState {
        node: node.clone(),
        addr: local.to_string(),
        config_text,
    });
    let checker = tokio::spawn(split_checker(node.clone(), split_every));
    let heartbeat = (!node.config.server.pd_endpoints.is_empty()).then(|| {
        // The URL the other servers know this one by (its `[raft] peers` entry), else the
        // bound address: what clients and workers are told to reach.
        let own = node.config.store_id();
        let url = node.config.raft.peer(own).map_or_else(
            || format!("{}://{local}", node::tls::scheme(node.tls.as_deref())),
            |p| p.addr.trim_end_matches('/').to_string(),
        );
        // A server with an allocated id is in no `[raft] peers` list, its own neither: the
        // regions it leads must still name its address among their replicas.
        let zone = types::zone::label(node.config.zone().as_ref()).to_string();
        node.members.learn(own, &url, &zone);
        tokio::spawn(crate::pd_heartbeat::run(
            node.clone(),
            url,
            node.config.server.pd_endpoints.clone(),
            node.config.server.pd_heartbeat_interval.duration(),
        ))
    });
    let served = node::http::serve_until(
        listener,
        router(state),
        shutdown,
        grace,
        &limits,
        node.tls.clone(),
    )
    .await;
    checker.abort();
    if let Some(h) = heartbeat {
        h.abort();
    }
    // Flush memtables and stop background threads whether or not serving ended cleanly.
    let closing = node.clone();
    let closed = tokio::task::spawn_blocking(move || closing.close())
        .await
        .map_err(|e| format!("shutdown task failed: {e}"))?;
    served.map_err(|e| format!("serving failed: {e}"))?;
    closed.map_err(|e| format!("closing the engine failed: {}", crate::api::error_chain(&e)))
}
