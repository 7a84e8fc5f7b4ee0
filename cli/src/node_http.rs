//! Blocking `GET` and `POST` to a node of the local cluster (`/status`, `/metrics`,
//! `/admin/flush`), over one fresh HTTP/1.1 connection each.
//!
//! [`crate::local_cluster::LocalCluster`]'s methods are synchronous and may be called from a
//! thread that is already inside a Tokio runtime, where starting another runtime to use the
//! async client would panic; these few plain-text calls do not need one.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// An answer: status code and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `GET base_url + path`.
pub fn get(base_url: &str, path: &str, timeout: Duration) -> Result<Reply, String> {
    call("GET", base_url, path, timeout)
}

/// `POST base_url + path` with an empty body.
pub fn post_empty(base_url: &str, path: &str, timeout: Duration) -> Result<Reply, String> {
    call("POST", base_url, path, timeout)
}

fn call(method: &str, base_url: &str, path: &str, timeout: Duration) -> Result<Reply, String> {
    let host = base_url
        .strip_prefix("http://")
        .ok_or_else(|| format!("expected an http:// URL, found {base_url:?}"))?
        .trim_end_matches('/');
    let addr = host
        .to_socket_addrs()
        .map_err(|e| format!("bad address {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("no address for {host}"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect {host}: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| format!("set timeouts: {e}"))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {host}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
    stream
        .write_all(head.as_bytes())
        .map_err(|e| format!("send {method} {path} to {host}: {e}"))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|e| format!("read the answer of {method} {path} from {host}: {e}"))?;
    parse_reply(&raw).map_err(|e| format!("{method} {path} from {host}: {e}"))
}

/// Parses an HTTP/1.1 answer read until the connection closed.
fn parse_reply(raw: &[u8]) -> Result<Reply, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| {
            format!(
                "expected an HTTP head, found {} bytes without one",
                raw.len()
            )
        })?;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("expected a status line, found {:?}", head.lines().next()))?;
    let body = &raw[split + 4..];
    let body = if head.contains("transfer-encoding: chunked") {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Ok(Reply { status, body })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("expected a chunk size line, found the end")?;
        let line = String::from_utf8_lossy(&data[..line_end]);
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("expected a hex chunk size, found {size_text:?}"))?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size {
            return Err(format!(
                "expected a chunk of {size} bytes, found {}",
                data.len()
            ));
        }
        out.extend_from_slice(&data[..size]);
        data = data.get(size + 2..).unwrap_or(&[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_and_a_chunked_answer_parse_to_the_same_body() {
        let plain = parse_reply(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello").unwrap();
        let chunked = parse_reply(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(plain, chunked);
        assert_eq!(plain.text(), "hello");
    }

    #[test]
    fn an_answer_without_a_head_is_an_error() {
        assert!(parse_reply(b"garbage").is_err());
    }
}
