//! `S3Dfs` against a real S3-compatible server on 127.0.0.1 (s3s-fs in process), and against
//! scripted HTTP servers for retries and timeouts.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

#[path = "common/s3_server.rs"]
mod s3_server;

use kvengine::FileId;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kvengine::{Dfs, Error, ErrorKind, S3Dfs};
use s3_server::{S3Server, credentials};

fn source_text(e: &Error) -> String {
    let mut out = e.to_string();
    let mut cur: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

#[test]
fn s3_dfs_round_trips_files_ranges_lists_and_deletes() {
    let server = S3Server::start();
    let dfs = server.dfs("rt/");
    dfs.put(FileId(7), Bytes::from_static(b"hello world"))
        .unwrap();
    dfs.put(FileId(0xabcdef), Bytes::from(vec![9u8; 100_000]))
        .unwrap();
    assert_eq!(
        dfs.get(FileId(7)).unwrap(),
        Bytes::from_static(b"hello world")
    );
    assert_eq!(
        dfs.get(FileId(0xabcdef)).unwrap(),
        Bytes::from(vec![9u8; 100_000])
    );
    assert_eq!(
        dfs.get_range(FileId(7), 6, 5).unwrap(),
        Bytes::from_static(b"world")
    );
    assert_eq!(
        dfs.get_range(FileId(7), 0, 1).unwrap(),
        Bytes::from_static(b"h")
    );
    assert_eq!(dfs.get_range(FileId(7), 3, 0).unwrap(), Bytes::new());
    assert_eq!(dfs.list().unwrap(), vec![FileId(7), FileId(0xabcdef)]);
    // The object key is the documented one.
    assert!(
        server
            .root()
            .join(s3_server::BUCKET)
            .join("rt/0000000000000007.sst")
            .exists()
    );
    dfs.delete(FileId(7)).unwrap();
    dfs.delete(FileId(7)).unwrap();
    assert_eq!(dfs.list().unwrap(), vec![FileId(0xabcdef)]);
    assert!(matches!(
        dfs.get(FileId(7)),
        Err(Error::FileNotFound { file_id: FileId(7) })
    ));
}

#[test]
fn range_past_the_end_of_a_file_is_an_error_not_short_data() {
    let server = S3Server::start();
    let dfs = server.dfs("");
    dfs.put(FileId(1), Bytes::from_static(b"0123456789"))
        .unwrap();
    for (offset, len) in [(6, 5), (10, 1), (100, 4)] {
        match dfs.get_range(FileId(1), offset, len) {
            Err(Error::Dfs {
                op: "get_range",
                file_id: FileId(1),
                source,
            }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::UnexpectedEof, "{source}")
            }
            other => panic!("offset={offset} len={len}: {other:?}"),
        }
    }
}

#[test]
fn missing_file_is_file_not_found_for_get_and_get_range() {
    let server = S3Server::start();
    let dfs = server.dfs("p/");
    assert!(matches!(
        dfs.get(FileId(42)),
        Err(Error::FileNotFound {
            file_id: FileId(42)
        })
    ));
    assert!(matches!(
        dfs.get_range(FileId(42), 0, 10),
        Err(Error::FileNotFound {
            file_id: FileId(42)
        })
    ));
    assert_eq!(dfs.get(FileId(42)).unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn put_again_with_the_same_bytes_succeeds() {
    let server = S3Server::start();
    let dfs = server.dfs("");
    let data = Bytes::from_static(b"same bytes");
    dfs.put(FileId(3), data.clone()).unwrap();
    dfs.put(FileId(3), data.clone()).unwrap();
    assert_eq!(dfs.get(FileId(3)).unwrap(), data);
    assert_eq!(dfs.list().unwrap(), vec![FileId(3)]);
}

#[test]
fn list_pages_through_every_file_under_its_prefix_only() {
    let server = S3Server::start();
    let mut opts = server.options("a/");
    opts.list_page_size = 2;
    let dfs = S3Dfs::open_with_credentials(opts, credentials()).unwrap();
    let other = server.dfs("b/");
    let ids: Vec<FileId> = [1, 2, 3, 0x10, 0xffff_0000_0000_0001]
        .into_iter()
        .map(FileId)
        .collect();
    for id in &ids {
        dfs.put(*id, Bytes::from_static(b"x")).unwrap();
    }
    other.put(FileId(99), Bytes::from_static(b"y")).unwrap();
    // A foreign object under the prefix that is not a file of ours.
    std::fs::write(
        server.root().join(s3_server::BUCKET).join("a/notes.txt"),
        b"z",
    )
    .unwrap();
    assert_eq!(dfs.list().unwrap(), ids);
    assert_eq!(other.list().unwrap(), vec![FileId(99)]);
}

#[test]
fn wrong_bucket_is_an_error_naming_the_operation_and_file() {
    let server = S3Server::start();
    let mut opts = server.options("");
    opts.bucket = "no-such-bucket".into();
    let dfs = S3Dfs::open_with_credentials(opts, credentials()).unwrap();
    // (s3s-fs answers a GET in a missing bucket with NoSuchKey, unlike S3; DELETE and LIST
    // report NoSuchBucket as S3 does.)
    let e = dfs.delete(FileId(42)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Dfs {
                op: "delete",
                file_id: FileId(42),
                ..
            }
        ),
        "a missing bucket is an error, even for a delete: {e:?}"
    );
    let text = source_text(&e);
    assert!(
        text.contains("object store delete failed: file_id=42"),
        "{text}"
    );
    assert!(text.contains("code=NoSuchBucket"), "{text}");
    assert!(text.contains("bucket=no-such-bucket"), "{text}");
    let e = dfs.list().unwrap_err();
    assert!(matches!(e, Error::Dfs { op: "list", .. }), "{e:?}");
    assert!(source_text(&e).contains("code=NoSuchBucket"), "{e:?}");
}

#[test]
fn wrong_credentials_are_an_error_not_a_missing_file() {
    let server = S3Server::start();
    let mut creds = credentials();
    creds.secret_access_key = "wrong".into();
    let dfs = S3Dfs::open_with_credentials(server.options(""), creds).unwrap();
    let e = dfs.get(FileId(1)).unwrap_err();
    match &e {
        Error::Dfs {
            op: "get",
            file_id: FileId(1),
            source,
        } => {
            assert_eq!(
                source.kind(),
                std::io::ErrorKind::PermissionDenied,
                "{source}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unreachable_endpoint_fails_fast_naming_the_operation_and_file() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = S3Server::start();
    let mut opts = server.options("");
    opts.endpoint = Some(format!("http://127.0.0.1:{port}"));
    let dfs = S3Dfs::open_with_credentials(opts, credentials()).unwrap();
    let start = Instant::now();
    let e = dfs
        .put(FileId(0x1234), Bytes::from_static(b"x"))
        .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
    assert!(
        matches!(
            e,
            Error::Dfs {
                op: "put",
                file_id: FileId(0x1234),
                ..
            }
        ),
        "{e:?}"
    );
    let text = source_text(&e);
    assert!(text.contains("key=0000000000001234.sst"), "{text}");
    let e = dfs.list().unwrap_err();
    assert!(matches!(e, Error::Dfs { op: "list", .. }), "{e:?}");
}

/// A scripted HTTP/1.1 server: the n-th request gets `script[n]` (the last entry repeats).
/// `Some(status)` answers with an empty body and closes; `None` reads the request and never
/// answers. Counts requests.
#[derive(Clone, Copy)]
enum Reply {
    Status(u16),
    Hang,
}

struct ScriptedServer {
    port: u16,
    requests: Arc<AtomicUsize>,
}

fn scripted_server(script: Vec<Reply>) -> ScriptedServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let count = requests.clone();
    std::thread::spawn(move || {
        let mut held: Vec<TcpStream> = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let Some(()) = read_request(&stream) else {
                continue;
            };
            let n = count.fetch_add(1, Ordering::SeqCst);
            match script[n.min(script.len() - 1)] {
                Reply::Status(code) => {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 {code} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    );
                }
                Reply::Hang => held.push(stream),
            }
        }
    });
    ScriptedServer { port, requests }
}

/// Reads one request's head and body (by content-length).
fn read_request(stream: &TcpStream) -> Option<()> {
    let mut r = BufReader::new(stream);
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let l = line.to_ascii_lowercase();
        if let Some(v) = l.strip_prefix("content-length:") {
            len = v.trim().parse().ok()?;
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    Some(())
}

fn dfs_on(port: u16, timeout: Duration, max_attempts: u32) -> S3Dfs {
    let server_opts = {
        let mut o = kvengine::S3Options::new("stratus-test");
        o.endpoint = Some(format!("http://127.0.0.1:{port}"));
        o.path_style = true;
        o.timeout = timeout;
        o.max_attempts = max_attempts;
        o.initial_backoff = Duration::from_millis(10);
        o
    };
    S3Dfs::open_with_credentials(server_opts, credentials()).unwrap()
}

#[test]
fn server_errors_are_retried_until_a_put_succeeds() {
    let server = scripted_server(vec![
        Reply::Status(503),
        Reply::Status(500),
        Reply::Status(200),
    ]);
    let dfs = dfs_on(server.port, Duration::from_secs(2), 3);
    dfs.put(FileId(1), Bytes::from_static(b"data")).unwrap();
    assert_eq!(server.requests.load(Ordering::SeqCst), 3);
}

#[test]
fn server_errors_past_max_attempts_fail_the_put() {
    let server = scripted_server(vec![Reply::Status(503)]);
    let dfs = dfs_on(server.port, Duration::from_secs(2), 2);
    let e = dfs.put(FileId(1), Bytes::from_static(b"data")).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Dfs {
                op: "put",
                file_id: FileId(1),
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(server.requests.load(Ordering::SeqCst), 2);
}

#[test]
fn a_hung_attempt_times_out_and_is_retried() {
    let server = scripted_server(vec![Reply::Hang, Reply::Status(200)]);
    let dfs = dfs_on(server.port, Duration::from_millis(300), 3);
    let start = Instant::now();
    dfs.put(FileId(1), Bytes::from_static(b"data")).unwrap();
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert_eq!(server.requests.load(Ordering::SeqCst), 2);
}

#[test]
fn an_unresponsive_server_times_out_instead_of_hanging() {
    let server = scripted_server(vec![Reply::Hang]);
    let dfs = dfs_on(server.port, Duration::from_millis(200), 2);
    let start = Instant::now();
    let e = dfs.get(FileId(9)).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
    match &e {
        Error::Dfs {
            op: "get",
            file_id: FileId(9),
            source,
        } => {
            assert_eq!(source.kind(), std::io::ErrorKind::TimedOut, "{source}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn s3_dfs_can_be_called_and_dropped_inside_a_tokio_runtime() {
    let server = S3Server::start();
    let dfs = server.dfs("");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        dfs.put(FileId(1), Bytes::from_static(b"x")).unwrap();
        assert_eq!(dfs.get(FileId(1)).unwrap(), Bytes::from_static(b"x"));
        drop(dfs);
    });
}
