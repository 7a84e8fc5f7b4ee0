//! `stratus-pd --config pd.toml` (and `stratus pd --config pd.toml`): one placement-driver
//! instance (see [`crate::config`] for every key). Prints the effective config, listens,
//! campaigns, serves until SIGTERM or SIGINT, then gives up its leadership (another instance
//! takes over at once) and exits 0.
//!
//! Exit codes: 2 for a bad command line or config (the message names the key), 1 when the
//! embedded store cannot be opened or the address cannot be bound.

use std::process::ExitCode;
use std::sync::Arc;

use tokio::sync::watch;

use crate::config::PdConfig;
use crate::meta::MetaStore;
use crate::meta::embedded::EmbeddedStore;
use crate::meta::etcd::EtcdStore;
use crate::service::{Pd, PdOptions, router};

/// Runs an instance with the command line `args` (without the program name).
pub fn main(args: impl Iterator<Item = String>) -> ExitCode {
    node::logging::init();
    let config = match node::config::config_path_from_args(args)
        .and_then(|path| PdConfig::load(path.as_deref()))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("stratus-pd: {}", node::error_chain(&e));
            return ExitCode::from(2);
        }
    };
    // Before anything binds: a bad key file stops the start with its path.
    let (tls, admin_token) = match (config.security.load(), config.security.admin_token()) {
        (Ok(tls), Ok(token)) => (tls, token),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("stratus-pd: {}", node::error_chain(&e));
            return ExitCode::from(1);
        }
    };
    let config_text = config.render();
    println!("# stratus-pd effective config\n{config_text}");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("stratus-pd")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stratus-pd: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let grace = config.pd.shutdown_grace.duration();
    let served = runtime.block_on(async move {
        let shutdown = node::http::shutdown_signal();
        let (listener, bound) = node::http::bind("stratus-pd", &config.pd.addr, tls.as_deref())
            .await
            .map_err(|e| e.to_string())?;
        let p = &config.pd;
        let options = PdOptions {
            name: p.name.clone(),
            url: if p.advertise_url.is_empty() {
                format!("{}://{bound}", node::tls::scheme(tls.as_deref()))
            } else {
                p.advertise_url.trim_end_matches('/').to_string()
            },
            cluster_name: p.cluster_name.clone(),
            lease_ttl: p.lease_ttl.duration(),
            tso_window: p.tso_window.duration(),
            id_batch: p.id_batch,
            node_lease_ttl: p.node_lease_ttl.duration(),
            config_text,
            scheduler: p.scheduler(),
            schedule_interval: p.schedule_interval.duration(),
            gc_life_time: p.gc_life_time.duration(),
            admin_token,
        };
        if p.etcd_endpoints.is_empty() {
            let path = p.data_dir.join("meta");
            let store = EmbeddedStore::open(&path).map_err(|e| e.to_string())?;
            serve(store, options, listener, shutdown, grace, &config.http, tls).await
        } else {
            let store = EtcdStore::with_tls(
                p.etcd_endpoints.clone(),
                p.etcd_timeout.duration(),
                tls.as_deref(),
            );
            serve(store, options, listener, shutdown, grace, &config.http, tls).await
        }
    });
    runtime.shutdown_timeout(grace);
    match served {
        Ok(()) => {
            println!("stratus-pd stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("stratus-pd: {e}");
            ExitCode::from(1)
        }
    }
}

async fn serve<S: MetaStore>(
    store: S,
    options: PdOptions,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: std::time::Duration,
    limits: &node::http::HttpLimits,
    tls: Option<Arc<node::tls::Tls>>,
) -> Result<(), String> {
    tracing::info!(store = %store.describe(), url = %options.url, "placement driver starting");
    let pd = Arc::new(Pd::new(store, options));
    let (stop_tx, stop_rx) = watch::channel(false);
    let election = tokio::spawn(pd.clone().run_election(stop_rx));
    // Held watches would keep the drain (and the leader key) for their whole wait: answer
    // them as soon as the shutdown starts.
    let closing = pd.clone();
    let shutdown = async move {
        shutdown.await;
        closing.close_watches();
    };
    let served = node::http::serve_until(listener, router(pd), shutdown, grace, limits, tls).await;
    // Give up the leadership before exiting, so another instance takes over at once.
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(grace, election).await;
    served.map_err(|e| e.to_string())
}
