//! A fault-injecting stand-in for a worker: a tiny HTTP/1.1 server that answers every request
//! with one fixed status and body, counts the requests and keeps their bodies.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

pub use crate::fake_server::Received;

pub struct FakeWorker {
    addr: std::net::SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeWorker {
    /// Answers every request with `status` and `body`.
    pub fn start(status: u16, body: &[u8]) -> FakeWorker {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake worker");
        let addr = listener.local_addr().expect("fake worker address");
        let received = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let received = received.clone();
            let stop = stop.clone();
            let body = body.to_vec();
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let _ = conn.set_nodelay(true);
                    serve(conn, status, &body, &received);
                }
            })
        };
        FakeWorker {
            addr,
            received,
            stop,
            thread: Some(thread),
        }
    }

    /// The URL a server offloads to.
    pub fn coprocessor_url(&self) -> String {
        format!("http://{}/coprocessor", self.addr)
    }

    /// Requests received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn count(&self) -> usize {
        self.received
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

impl Drop for FakeWorker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request, records it, answers, closes.
///
/// The request is recorded before the answer is written: a test that got its answer must
/// find the request in `received()`.
fn serve(conn: TcpStream, status: u16, body: &[u8], received: &Mutex<Vec<Received>>) {
    let Some(req) = crate::fake_server::read_request(&conn) else {
        return;
    };
    received.lock().unwrap_or_else(|p| p.into_inner()).push(req);
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut conn = conn;
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\nContent-Type: application/x-protobuf\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body);
    let _ = conn.flush();
}
