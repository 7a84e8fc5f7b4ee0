//! A fault-injecting stand-in for a worker: a tiny HTTP/1.1 server that answers every request
//! with one fixed status and body, counts the requests and keeps their bodies.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// One request the fake worker received.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

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
                    if let Some(r) = serve(conn, status, &body) {
                        received.lock().unwrap_or_else(|p| p.into_inner()).push(r);
                    }
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

/// Reads one request (Content-Length or chunked body), answers, closes.
fn serve(conn: TcpStream, status: u16, body: &[u8]) -> Option<Received> {
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok()?;
    let mut reader = BufReader::new(conn.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut content_length = 0usize;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':')?;
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if name == "content-length" {
            content_length = value.parse().ok()?;
        } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let mut req_body = Vec::new();
    if chunked {
        req_body = crate::fake_server::read_chunked(&mut reader)?;
    } else {
        req_body.resize(content_length, 0);
        reader.read_exact(&mut req_body).ok()?;
    }
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
    Some(Received {
        method,
        path,
        body: req_body,
    })
}
