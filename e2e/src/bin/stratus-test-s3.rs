//! `stratus-test-s3`: an S3-compatible server (s3s + s3s-fs) over a local directory, for the
//! end-to-end tests. It accepts only the test credentials (`e2e::s3_proc::ACCESS_KEY` /
//! `SECRET_KEY`).
//!
//! ```text
//! stratus-test-s3 --dir D --addr 127.0.0.1:0 --bucket NAME [--fail-gets N] [--get-delay-ms MS]
//! ```
//!
//! * creates `D/NAME` (the bucket) if missing, binds, prints `s3 listening on http://ADDR`;
//! * `--fail-gets N`: the first N GetObject requests answer 500 InternalError (fault injection);
//! * `--get-delay-ms MS`: every GetObject waits MS before it is answered (a slow store);
//! * `GET /-/stats` (a path no bucket can have) answers `gets=G failed_gets=F`.
//!
//! Several processes may serve the same directory: objects are plain files, so a server and a
//! worker can reach one bucket through two endpoints with different faults.
//!
//! Accepted sockets get TCP_NODELAY: without it, small responses stall ~40 ms on delayed ACKs.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::{S3Service, S3ServiceBuilder};
use s3s::{Body, HttpError};

struct Args {
    dir: PathBuf,
    addr: String,
    bucket: String,
    fail_gets: u64,
    get_delay: Duration,
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "stratus-test-s3: {problem}\nusage: stratus-test-s3 --dir D --addr 127.0.0.1:0 --bucket NAME [--fail-gets N] [--get-delay-ms MS]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut dir = None;
    let mut addr = "127.0.0.1:0".to_string();
    let mut bucket = None;
    let mut fail_gets = 0;
    let mut get_delay = Duration::ZERO;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        let number = |v: &str| -> u64 {
            v.parse()
                .unwrap_or_else(|_| usage(&format!("{flag}: expected a number, found {v:?}")))
        };
        match flag.as_str() {
            "--dir" => dir = Some(PathBuf::from(value)),
            "--addr" => addr = value,
            "--bucket" => bucket = Some(value),
            "--fail-gets" => fail_gets = number(&value),
            "--get-delay-ms" => get_delay = Duration::from_millis(number(&value)),
            _ => usage(&format!("unknown argument {flag:?}")),
        }
    }
    Args {
        dir: dir.unwrap_or_else(|| usage("--dir is required")),
        addr,
        bucket: bucket.unwrap_or_else(|| usage("--bucket is required")),
        fail_gets,
        get_delay,
    }
}

/// Counters and the remaining injected failures.
struct Faults {
    fail_gets_left: AtomicU64,
    get_delay: Duration,
    gets: AtomicU64,
    failed_gets: AtomicU64,
}

/// A GetObject in path style: `GET /bucket/key...`.
fn is_object_get(req: &Request<Incoming>) -> bool {
    req.method() == Method::GET
        && req
            .uri()
            .path()
            .trim_start_matches('/')
            .split_once('/')
            .is_some_and(|(bucket, key)| !bucket.is_empty() && !key.is_empty())
}

fn internal_error() -> Response<Body> {
    let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
        <Error><Code>InternalError</Code><Message>injected GET failure</Message>\
        <RequestId>stratus-test-s3</RequestId></Error>";
    let mut resp = Response::new(Body::from(xml.to_string()));
    *resp.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/xml"),
    );
    resp
}

async fn handle(
    service: S3Service,
    faults: Arc<Faults>,
    req: Request<Incoming>,
) -> Result<Response<Body>, HttpError> {
    if req.method() == Method::GET && req.uri().path() == "/-/stats" {
        let text = format!(
            "gets={} failed_gets={}\n",
            faults.gets.load(Ordering::SeqCst),
            faults.failed_gets.load(Ordering::SeqCst)
        );
        return Ok(Response::new(Body::from(text)));
    }
    if is_object_get(&req) {
        faults.gets.fetch_add(1, Ordering::SeqCst);
        let fail = faults
            .fail_gets_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if fail {
            faults.failed_gets.fetch_add(1, Ordering::SeqCst);
            return Ok(internal_error());
        }
        if !faults.get_delay.is_zero() {
            tokio::time::sleep(faults.get_delay).await;
        }
    }
    service.call(req.map(Body::from)).await
}

fn main() {
    let args = parse_args();
    let bucket_dir = args.dir.join(&args.bucket);
    if let Err(e) = std::fs::create_dir_all(&bucket_dir) {
        eprintln!(
            "stratus-test-s3: cannot create {}: {e}",
            bucket_dir.display()
        );
        std::process::exit(1);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(&args.addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("stratus-test-s3: cannot bind {}: {e}", args.addr);
                std::process::exit(1);
            }
        };
        let local = listener.local_addr().expect("bound address");
        let fs = match s3s_fs::FileSystem::new(&args.dir) {
            Ok(fs) => fs,
            Err(e) => {
                eprintln!(
                    "stratus-test-s3: cannot serve {}: {e:?}",
                    args.dir.display()
                );
                std::process::exit(1);
            }
        };
        let service = {
            let mut b = S3ServiceBuilder::new(fs);
            b.set_auth(SimpleAuth::from_single(
                e2e::s3_proc::ACCESS_KEY,
                e2e::s3_proc::SECRET_KEY,
            ));
            b.build()
        };
        let faults = Arc::new(Faults {
            fail_gets_left: AtomicU64::new(args.fail_gets),
            get_delay: args.get_delay,
            gets: AtomicU64::new(0),
            failed_gets: AtomicU64::new(0),
        });
        println!("s3 listening on http://{local}");
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                continue;
            };
            let _ = socket.set_nodelay(true);
            let service = service.clone();
            let faults = faults.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| handle(service.clone(), faults.clone(), req));
                let _ = ConnBuilder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(socket), svc)
                    .await;
            });
        }
    });
}
