//! Serving HTTP: bind, announce the bound address, serve until SIGTERM/SIGINT (then stop
//! accepting, let in-flight requests finish within a grace period), and the small helpers
//! every handler uses: protobuf bodies in and out, errors as status + text, metrics text.

use std::future::Future;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts};
use prost::Message;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

pub use crate::http_limits::HttpLimits;
use crate::tls::Tls;
use wire::access::Caller;

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

/// A status listener's routes: `GET /metrics` only (an entry node's, such as the SQL
/// endpoint's: it serves no node API).
pub fn metrics_router() -> Router {
    Router::new().route("/metrics", axum::routing::get(metrics_handler))
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
/// http://<addr>` (`https://` with `tls`) on stdout: scripts and tests read the node's base URL
/// from that line.
pub async fn bind(
    name: &str,
    addr: &str,
    tls: Option<&Tls>,
) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    let local = listener.local_addr()?;
    println!("{name} listening on {}://{local}", crate::tls::scheme(tls));
    let _ = std::io::stdout().flush();
    Ok((listener, local))
}

/// Serves `router` until `shutdown` resolves; then stops accepting and waits up to `grace`
/// for in-flight requests (those still running after it are cut off).
///
/// HTTP/1.1, every connection within `limits` ([`HttpLimits`]): at most `max-connections` open
/// at once (the listener stops accepting at the limit), each request head whole within
/// `header-read-timeout` and no larger than `max-header-size`. The nodes' clients speak
/// HTTP/1.1 only, so there is no HTTP/2 to bound.
///
/// With `tls` ([`crate::tls`]), every connection must first complete a TLS handshake within
/// `header-read-timeout`, presenting a client certificate the cluster CA signed and, when
/// `cert-allowed-cn` is set, one of those names; anything else is closed before a request is
/// read (a plain-HTTP client included).
pub async fn serve_until(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
    limits: &HttpLimits,
    tls: Option<Arc<Tls>>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout.duration())
        .max_header_size(usize::try_from(limits.max_header_size.bytes()).unwrap_or(usize::MAX));
    let graceful = GracefulShutdown::new();
    let metrics = &*CONNECTION_METRICS;
    let handshake_within = limits.header_read_timeout.duration();
    // Rotated certificate files take effect on new connections without a restart.
    let reloader = tls
        .clone()
        .map(|tls| tokio::spawn(reload_periodically(tls, crate::tls::RELOAD_INTERVAL)));
    tokio::pin!(shutdown);
    loop {
        // A slot first: at the limit the next connection waits in the kernel's accept queue.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break, // never closed; stop serving if it were
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            (stream, _peer) = accept(&listener) => stream,
            () = &mut shutdown => break,
        };
        let (builder, router, watcher, tls) = (
            builder.clone(),
            router.clone(),
            graceful.watcher(),
            tls.clone(),
        );
        metrics.open.inc();
        tokio::spawn(async move {
            let served = match tls {
                None => serve_connection(&builder, watcher, router, None, stream).await,
                Some(tls) => {
                    // The handshake counts against the same deadline as a request head: a
                    // client that connects and never finishes it is cut off the same way.
                    let acceptor = tokio_rustls::TlsAcceptor::from(tls.server_config());
                    match tokio::time::timeout(handshake_within, acceptor.accept(stream)).await {
                        Err(_) => Err(ClosedReason::TlsHandshake),
                        Ok(Err(e)) => {
                            tracing::debug!("TLS handshake failed: {e}");
                            Err(ClosedReason::TlsHandshake)
                        }
                        Ok(Ok(stream)) => {
                            metrics.handshakes.inc();
                            match tls.check_peer(stream.get_ref().1.peer_certificates()) {
                                Err(why) => {
                                    tracing::warn!("refused a peer: {why}");
                                    Err(ClosedReason::PeerNotAllowed)
                                }
                                Ok(caller) => {
                                    let caller = Some(caller);
                                    serve_connection(&builder, watcher, router, caller, stream)
                                        .await
                                }
                            }
                        }
                    }
                }
            };
            if let Err(reason) = served {
                metrics.closed[reason as usize].inc();
            }
            metrics.open.dec();
            drop(slot);
        });
    }
    drop(listener);
    if let Some(r) = reloader {
        r.abort();
    }
    // In-flight requests finish; idle connections close now.
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("in-flight requests still running after {grace:?}; closing them");
    }
    Ok(())
}

/// Reloads `tls` from its files every `every` when they changed
/// ([`crate::tls::Reload`]: a node's `[security]`, the SQL endpoint's identity); a change that does not load is logged and keeps the settings
/// in use. Counted in `stratus_tls_reloads_total{result}`.
pub async fn reload_periodically<T: crate::tls::Reload + ?Sized>(tls: Arc<T>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is immediate: the files were just loaded
    loop {
        tick.tick().await;
        match tls.reload_if_changed() {
            Ok(false) => {}
            Ok(true) => {
                tracing::info!("TLS certificate files changed: new connections use them");
                CONNECTION_METRICS.reloads[0].inc();
            }
            Err(e) => {
                tracing::warn!(
                    "TLS certificate files changed but do not load; keeping the ones in use: {}",
                    crate::error_chain(&e)
                );
                CONNECTION_METRICS.reloads[1].inc();
            }
        }
    }
}

/// The next connection on `listener`, with Nagle's delay off (requests and answers are
/// small and latency-bound). A failed accept (out of file descriptors and the like) leaves the
/// listener itself fine, so it is logged and retried after a short pause, never spun on and
/// never the end of serving: what every listener of a node does, the SQL endpoint's too.
pub async fn accept(listener: &TcpListener) -> (tokio::net::TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                return (stream, peer);
            }
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Serves HTTP/1.1 on one accepted (and, with TLS, handshaken) connection until it closes;
/// every request carries the connection's `caller` (the peer's certificate tier, with TLS) as
/// an extension, which [`crate::access::guarded`] routers check.
async fn serve_connection<IO>(
    builder: &hyper::server::conn::http1::Builder,
    watcher: hyper_util::server::graceful::Watcher,
    router: Router,
    caller: Option<Caller>,
    io: IO,
) -> Result<(), ClosedReason>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = WithCaller { router, caller };
    let conn = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
    watcher.watch(conn).await.map_err(|e| {
        let reason = ClosedReason::of(&e);
        tracing::debug!("connection closed ({}): {e}", reason.as_str());
        reason
    })
}

/// A router whose requests carry their connection's caller.
#[derive(Clone)]
struct WithCaller {
    router: Router,
    caller: Option<Caller>,
}

impl<B> tower_service::Service<axum::http::Request<B>> for WithCaller
where
    Router: tower_service::Service<axum::http::Request<B>>,
{
    type Response = <Router as tower_service::Service<axum::http::Request<B>>>::Response;
    type Error = <Router as tower_service::Service<axum::http::Request<B>>>::Error;
    type Future = <Router as tower_service::Service<axum::http::Request<B>>>::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        tower_service::Service::<axum::http::Request<B>>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, mut req: axum::http::Request<B>) -> Self::Future {
        if let Some(caller) = self.caller {
            req.extensions_mut().insert(caller);
        }
        self.router.call(req)
    }
}

/// Why a connection ended in an error, as the `reason` label of
/// `stratus_http_connection_errors_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClosedReason {
    /// No whole request head within `header-read-timeout` (an idle or slow client).
    HeaderTimeout,
    /// A request head above `max-header-size` (answered 431).
    HeaderTooLarge,
    /// Anything else: a reset, a malformed request, an I/O error.
    Other,
    /// No TLS handshake within `header-read-timeout`, or a failed one (no certificate, one
    /// the CA did not sign, a plain-HTTP client).
    TlsHandshake,
    /// A certificate the CA signed without a name in `security.cert-allowed-cn`.
    PeerNotAllowed,
}

impl ClosedReason {
    const ALL: [ClosedReason; 5] = [
        ClosedReason::HeaderTimeout,
        ClosedReason::HeaderTooLarge,
        ClosedReason::Other,
        ClosedReason::TlsHandshake,
        ClosedReason::PeerNotAllowed,
    ];

    fn of(e: &hyper::Error) -> ClosedReason {
        if e.is_timeout() {
            ClosedReason::HeaderTimeout
        } else if e.is_parse_too_large() {
            ClosedReason::HeaderTooLarge
        } else {
            ClosedReason::Other
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            ClosedReason::HeaderTimeout => "header_timeout",
            ClosedReason::HeaderTooLarge => "header_too_large",
            ClosedReason::Other => "other",
            ClosedReason::TlsHandshake => "tls_handshake",
            ClosedReason::PeerNotAllowed => "peer_not_allowed",
        }
    }
}

struct ConnectionMetrics {
    open: IntGauge,
    /// TLS handshakes completed: one per connection, so against the requests served it says
    /// how well clients reuse connections.
    handshakes: IntCounter,
    /// `[ok, failed]` reloads of changed certificate files.
    reloads: [IntCounter; 2],
    /// Indexed by `ClosedReason as usize`.
    closed: [IntCounter; ClosedReason::ALL.len()],
}

static CONNECTION_METRICS: LazyLock<ConnectionMetrics> = LazyLock::new(|| {
    let open = IntGauge::new(
        "stratus_http_connections",
        "HTTP connections open on this node's listener.",
    )
    .expect("valid metric");
    let errors = IntCounterVec::new(
        Opts::new(
            "stratus_http_connection_errors_total",
            "HTTP connections that ended in an error, by reason (header_timeout: no whole \
             request head within http.header-read-timeout; header_too_large: a head above \
             http.max-header-size; tls_handshake: no or a failed TLS handshake; \
             peer_not_allowed: a certificate without a name in security.cert-allowed-cn).",
        ),
        &["reason"],
    )
    .expect("valid metric");
    let handshakes = IntCounter::new(
        "stratus_tls_handshakes_total",
        "TLS handshakes this node's listener completed (one per connection: clients pool \
         their connections, so far fewer than the requests).",
    )
    .expect("valid metric");
    // A second registration (a test serving twice in one process) keeps the first.
    let _ = prometheus::register(Box::new(open.clone()));
    let _ = prometheus::register(Box::new(handshakes.clone()));
    let reloads = IntCounterVec::new(
        Opts::new(
            "stratus_tls_reloads_total",
            "Changes of the [security] certificate files seen by a listener, by result (ok: \
             new connections use them; failed: they did not load and the ones in use stay).",
        ),
        &["result"],
    )
    .expect("valid metric");
    let _ = prometheus::register(Box::new(reloads.clone()));
    let reloads = ["ok", "failed"].map(|r| reloads.with_label_values(&[r]));
    let _ = prometheus::register(Box::new(errors.clone()));
    let closed = ClosedReason::ALL.map(|r| errors.with_label_values(&[r.as_str()]));
    ConnectionMetrics {
        open,
        handshakes,
        reloads,
        closed,
    }
});
