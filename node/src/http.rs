//! Serving HTTP: bind, announce the bound address, serve until SIGTERM/SIGINT (then stop
//! accepting, let in-flight requests finish within a grace period), and the small helpers
//! every handler uses: protobuf bodies in and out, errors as status + text, metrics text.

use std::future::Future;
use std::io::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use prost::Message;
use tokio::net::TcpListener;

/// An HTTP error answer: a status and a one-line reason.
#[derive(Debug)]
pub struct HttpError {
    pub status: StatusCode,
    pub message: String,
}

impl HttpError {
    pub fn bad_request(message: impl Into<String>) -> HttpError {
        HttpError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }
    pub fn internal(message: impl Into<String>) -> HttpError {
        HttpError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
        }
    }
    /// The request is valid but this node's state refuses it (e.g. it does not lead the
    /// region the request names).
    pub fn conflict(message: impl Into<String>) -> HttpError {
        HttpError {
            status: StatusCode::CONFLICT,
            message: message.into(),
        }
    }
    pub fn unavailable(message: impl Into<String>) -> HttpError {
        HttpError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: message.into(),
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        (self.status, format!("{}\n", self.message)).into_response()
    }
}

/// Decodes a protobuf body, or a 400 that names the message type and the decode error.
pub fn decode_proto<M: Message + Default>(body: &[u8]) -> Result<M, HttpError> {
    M::decode(body).map_err(|e| {
        HttpError::bad_request(format!(
            "expected a protobuf {} body, found {} bytes that do not decode: {e}",
            short_type_name::<M>(),
            body.len()
        ))
    })
}

fn short_type_name<M>() -> &'static str {
    let full = std::any::type_name::<M>();
    full.rsplit("::").next().unwrap_or(full)
}

/// A 200 answer carrying `msg`.
pub fn proto_response<M: Message>(msg: &M) -> Response {
    (
        [(header::CONTENT_TYPE, wire::PROTOBUF_CONTENT_TYPE)],
        msg.encode_to_vec(),
    )
        .into_response()
}

/// Every metric of the default registry in the Prometheus text format.
pub fn metrics_text() -> String {
    let families = prometheus::gather();
    let mut out = String::new();
    if let Err(e) = prometheus::TextEncoder::new().encode_utf8(&families, &mut out) {
        out = format!("# metrics cannot be encoded: {e}\n");
    }
    out
}

/// `GET /metrics`.
pub async fn metrics_handler() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        metrics_text(),
    )
        .into_response()
}

/// Installs SIGTERM and SIGINT handlers now and returns a future that resolves on either.
///
/// The handlers are registered when this function is called, not when the future is first
/// polled: a caller installs them before it announces its address (see [`bind`]), so a
/// supervisor that sends SIGTERM right after reading that line gets a clean shutdown instead
/// of the default action (death by signal). Must be called inside a Tokio runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    async move {
        let wait = |s: std::io::Result<tokio::signal::unix::Signal>, name: &'static str| async move {
            match s {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(e) => {
                    tracing::warn!("cannot listen for {name}: {e}");
                    std::future::pending::<()>().await
                }
            }
        };
        tokio::select! {
            _ = wait(term, "SIGTERM") => {}
            _ = wait(int, "SIGINT") => {}
        }
    }
}

/// Binds `addr` ("127.0.0.1:0" picks a free port) and prints `<name> listening on
/// http://<addr>` on stdout: scripts and tests read the bound port from that line.
pub async fn bind(name: &str, addr: &str) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    let local = listener.local_addr()?;
    println!("{name} listening on http://{local}");
    let _ = std::io::stdout().flush();
    Ok((listener, local))
}

/// Serves `router` until `shutdown` resolves; then stops accepting and waits up to `grace`
/// for in-flight requests (those still running after it are cut off).
pub async fn serve_until(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut stop_wait = stop_rx.clone();
    let server = axum::serve(listener, router).with_graceful_shutdown(async move {
        let mut rx = stop_rx;
        let _ = rx.wait_for(|s| *s).await;
    });
    let mut server = tokio::spawn(async move { server.await });
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    tokio::select! {
        joined = &mut server => return joined.map_err(std::io::Error::other)?,
        _ = stop_wait.wait_for(|s| *s) => {}
    }
    // `server` finishes by itself once the in-flight requests are done.
    match tokio::time::timeout(grace, &mut server).await {
        Ok(joined) => joined.map_err(std::io::Error::other)?,
        Err(_) => {
            tracing::warn!("in-flight requests still running after {grace:?}; closing them");
            server.abort();
            Ok(())
        }
    }
}
