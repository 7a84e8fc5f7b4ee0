//! Each request's caller against what its path requires ([`wire::access`]): the check every
//! node program's router runs when TLS names its peers ([`crate::tls`]).
//!
//! The caller comes from the connection ([`crate::http::serve_until`] puts the peer's
//! [`Caller`] into each request's extensions); a request without one came over plain HTTP,
//! where nothing is checked (TLS off is the explicit choice of an open cluster). A refused
//! request is answered 403 with what the path requires and who called, before its body is
//! read, and counted in `stratus_access_denied_total{required}`.

use std::sync::LazyLock;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus::{IntCounterVec, Opts};
use wire::access::{Access, Caller, required};
use wire::traffic::Role;

/// `router` with every request's caller checked against its path, for a process of `role`.
pub fn guarded(router: Router, role: Role) -> Router {
    LazyLock::force(&DENIED);
    router.layer(axum::middleware::from_fn_with_state(role, check))
}

async fn check(State(role): State<Role>, req: Request, next: Next) -> Response {
    let Some(caller) = req.extensions().get::<Caller>().copied() else {
        return next.run(req).await;
    };
    let access = required(role, req.uri().path());
    if caller.may(access) {
        return next.run(req).await;
    }
    DENIED.with_label_values(&[access.as_str()]).inc();
    tracing::warn!(
        "refused {} from a {caller} certificate: it needs a {access} caller",
        req.uri().path()
    );
    (
        StatusCode::FORBIDDEN,
        format!(
            "{} on a {role}: expected a {access} certificate (security.{}), found a {caller} one\n",
            req.uri().path(),
            match access {
                Access::Node => "node-cn",
                Access::Admin => "admin-cn",
                Access::Client => "cert-allowed-cn",
            }
        ),
    )
        .into_response()
}

static DENIED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = IntCounterVec::new(
        Opts::new(
            "stratus_access_denied_total",
            "Requests refused 403 because the caller's certificate is not of the tier the path \
             requires (node: node-only paths, admin: state changes outside SQL).",
        ),
        &["required"],
    )
    .expect("valid metric");
    let _ = prometheus::register(Box::new(c.clone()));
    for a in Access::ALL {
        c.with_label_values(&[a.as_str()]);
    }
    c
});
