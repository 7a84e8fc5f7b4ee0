//! Logging for the node binaries: `tracing` events to stderr, filtered by `STRATUS_LOG`
//! (an `EnvFilter` directive such as `info` or `server=debug`; default `info`).

/// Installs the stderr subscriber. Idempotent: a second call (a second node started in the
/// same process) keeps the first subscriber.
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("STRATUS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
