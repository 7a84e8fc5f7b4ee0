//! A scripted stand-in for a storage server: a tiny HTTP/1.1 server that answers each path
//! from a queue of scripted answers and keeps every request it received (path, headers, body).
//!
//! Client routing tests put several of these behind one client, script who leads which region
//! and who answers `NotLeader`, and then assert what each fake received: a retry sent to the
//! wrong place shows up as a request on the wrong fake. A queue's last answer repeats; a path
//! with no script answers 404.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use prost::Message;

/// One request a fake received.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Received {
    /// The body decoded as `M` (panics when it does not decode: the client sent garbage).
    pub fn decode<M: Message + Default>(&self) -> M {
        M::decode(self.body.as_slice())
            .unwrap_or_else(|e| panic!("request to {} does not decode: {e}", self.path))
    }
}

/// What a fake does with one request.
#[derive(Clone, Debug)]
pub enum Answer {
    /// A status and a body.
    Reply { status: u16, body: Vec<u8> },
    /// Close the connection without answering (the client sees a broken connection).
    Hangup,
}

impl Answer {
    /// 200 with `msg` encoded.
    pub fn ok<M: Message>(msg: &M) -> Answer {
        Answer::Reply {
            status: 200,
            body: msg.encode_to_vec(),
        }
    }
}

type Scripts = Arc<Mutex<HashMap<String, VecDeque<Answer>>>>;

pub struct FakeServer {
    addr: std::net::SocketAddr,
    scripts: Scripts,
    received: Arc<Mutex<Vec<Received>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FakeServer {
    /// A fake with nothing scripted, listening on an ephemeral port of 127.0.0.1.
    pub fn start() -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake server");
        let addr = listener.local_addr().expect("fake server address");
        let scripts: Scripts = Arc::new(Mutex::new(HashMap::new()));
        let received = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (scripts, received, stop) = (scripts.clone(), received.clone(), stop.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let _ = conn.set_nodelay(true);
                    serve(conn, &scripts, &received);
                }
            })
        };
        FakeServer {
            addr,
            scripts,
            received,
            stop,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:port`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Appends `answers` to `path`'s queue.
    pub fn script(&self, path: &str, answers: impl IntoIterator<Item = Answer>) -> &FakeServer {
        locked(&self.scripts)
            .entry(path.to_string())
            .or_default()
            .extend(answers);
        self
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        locked(&self.received).clone()
    }

    /// The requests received at `path`.
    pub fn received_at(&self, path: &str) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A base URL nothing listens on (a port bound, then freed): connections are refused.
pub fn refused_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a port to free");
    let addr = l.local_addr().expect("address");
    drop(l);
    format!("http://{addr}")
}

/// Reads one request, answers it from the scripts, closes.
fn serve(conn: TcpStream, scripts: &Scripts, received: &Mutex<Vec<Received>>) {
    let Some(req) = read_request(&conn) else {
        return;
    };
    let answer = {
        let mut scripts = locked(scripts);
        match scripts.get_mut(&req.path) {
            Some(q) if q.len() > 1 => q.pop_front(),
            Some(q) => q.front().cloned(),
            None => None,
        }
    };
    locked(received).push(req);
    let (status, body) = match answer {
        Some(Answer::Hangup) => return,
        Some(Answer::Reply { status, body }) => (status, body),
        None => (404, b"not scripted".to_vec()),
    };
    let mut conn = conn;
    let head = format!(
        "HTTP/1.1 {status} Status\r\nContent-Length: {}\r\nContent-Type: application/x-protobuf\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(&body);
    let _ = conn.flush();
}

pub(crate) fn read_request(conn: &TcpStream) -> Option<Received> {
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok()?;
    let mut reader = BufReader::new(conn.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = BTreeMap::new();
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
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let mut body = Vec::new();
    if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        body = read_chunked(&mut reader)?;
    } else {
        let len: usize = headers
            .get("content-length")
            .map_or(Some(0), |v| v.parse().ok())?;
        body.resize(len, 0);
        reader.read_exact(&mut body).ok()?;
    }
    Some(Received {
        method,
        path,
        headers,
        body,
    })
}

/// A `Transfer-Encoding: chunked` request body; `None` when the framing is broken.
fn read_chunked(reader: &mut impl std::io::BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).ok()?;
        let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk).ok()?;
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}
