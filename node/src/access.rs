//! Each request's caller against what its path requires ([`wire::access`]): the check every
//! node program's router runs when TLS names its peers ([`crate::tls`]).
//!
//! The caller comes from the connection ([`crate::http::serve_until`] puts the peer's
//! [`Caller`] into each request's extensions); a request without one came over plain HTTP,
//! where nothing is checked (TLS off is the explicit choice of an open cluster) but the admin
//! token: with `security.admin-token-path` set, an admin path also answers a request carrying
//! `Authorization: Bearer <token>`, and only such a request when the caller has no admin's or
//! node's certificate. A refused request is answered 403 with what the path requires and who
//! called, before its body is read, and counted in `stratus_access_denied_total{required}`.

use std::sync::{Arc, LazyLock};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus::{IntCounterVec, Opts};
use wire::access::{Access, Caller, required};
use wire::traffic::Role;

use crate::tls::AdminToken;

/// `router` with every request's caller checked against its path, for a process of `role`
/// whose admin paths also accept `token`.
pub fn guarded(router: Router, role: Role, token: Option<AdminToken>) -> Router {
    LazyLock::force(&DENIED);
    router.layer(axum::middleware::from_fn_with_state(
        Arc::new((role, token)),
        check,
    ))
}

async fn check(
    State(guard): State<Arc<(Role, Option<AdminToken>)>>,
    req: Request,
    next: Next,
) -> Response {
    let (role, token) = (guard.0, &guard.1);
    let access = required(role, req.uri().path());
    let caller = req.extensions().get::<Caller>().copied();
    let has_token = access == Access::Admin
        && token.as_ref().is_some_and(|t| {
            req.headers()
                .get(axum::http::header::AUTHORIZATION)
                .is_some_and(|v| t.matches(v.as_bytes()))
        });
    let allowed = match caller {
        Some(c) if c.may(access) => true,
        _ if has_token => true,
        // Plain HTTP: open, but for admin paths once a token is configured.
        None => access != Access::Admin || token.is_none(),
        Some(_) => false,
    };
    if allowed {
        return next.run(req).await;
    }
    let caller = caller.map_or("plain-HTTP caller without the admin token", Caller::as_str);
    DENIED.with_label_values(&[access.as_str()]).inc();
    tracing::warn!(
        "refused {} from a {caller}: it needs a {access} caller",
        req.uri().path()
    );
    (
        StatusCode::FORBIDDEN,
        format!(
            "{} on a {role}: expected a {access} certificate (security.{}){}, found a {caller}\n",
            req.uri().path(),
            match access {
                Access::Node => "node-cn",
                Access::Admin => "admin-cn",
                Access::Client => "cert-allowed-cn",
            },
            if access == Access::Admin && token.is_some() {
                " or the admin token (Authorization: Bearer)"
            } else {
                ""
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
