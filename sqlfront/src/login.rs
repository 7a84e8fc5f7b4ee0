//! What the endpoint does around a login: counts failures (`stratus_sql_login_failures_total
//! {reason}`), blocks an address after too many ([`LoginThrottle`], MySQL's
//! `max_connect_errors` with a time window), and answers a refused login with MySQL's 1045
//! ([`DenialWriter`]).
//!
//! **Throttle.** An address that failed [`MysqlLimits::max_failed_logins`] logins within
//! [`MysqlLimits::failed_login_window`] is refused at connect, before the greeting, with
//! error 1129 until the window that began with its first failure ends; a successful login
//! clears its count (as MySQL's host cache does). At most [`MAX_TRACKED`] addresses are
//! tracked: when full, expired entries go first, then the oldest window.
//!
//! **Error 1045.** opensrv-mysql answers a refused login with 1698
//! (`ER_ACCESS_DENIED_NO_PASSWORD_ERROR`) and its own text; drivers key on 1045
//! (`ER_ACCESS_DENIED_ERROR`, SQLSTATE 28000). [`DenialWriter`] sits under the protocol
//! writer until the login ends: when the shim recorded a denial, the error packet going out
//! is replaced by MySQL's, with the same sequence id.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use prometheus::{IntCounterVec, Opts};
use tokio::io::AsyncWrite;

use crate::error::code;
use crate::mysql_limits::MysqlLimits;

/// Addresses tracked at most (each entry is a few dozen bytes).
pub const MAX_TRACKED: usize = 65_536;

types::label_enum! {
    /// Why a login failed (the `reason` label).
    pub enum LoginFailure: "login failure" {
        /// No user of that name.
        UnknownUser = "unknown_user",
        /// The answer does not prove the user's password.
        WrongPassword = "wrong_password",
        /// The address is blocked after too many failures (refused before the greeting).
        Blocked = "blocked",
        /// The users could not be read from the cluster.
        Unavailable = "unavailable",
    }
}

/// `stratus_sql_login_failures_total{reason}`, every series created at start.
pub static LOGIN_FAILURES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = IntCounterVec::new(
        Opts::new(
            "stratus_sql_login_failures_total",
            "Logins the SQL endpoint refused, by reason.",
        ),
        &["reason"],
    )
    .expect("valid metric");
    // A second endpoint in one process (tests) shares the registered counter.
    if let Err(e) = prometheus::register(Box::new(c.clone())) {
        tracing::debug!(error = %e, "login failure metric already registered");
    }
    for r in LoginFailure::ALL {
        c.with_label_values(&[r.as_str()]);
    }
    c
});

/// Counts one failed login.
pub fn count_failure(reason: LoginFailure) {
    LOGIN_FAILURES.with_label_values(&[reason.as_str()]).inc();
}

/// Failed logins per client address (module docs).
#[derive(Debug)]
pub struct LoginThrottle {
    max_failures: u32,
    window: Duration,
    failures: parking_lot::Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl LoginThrottle {
    pub fn new(limits: &MysqlLimits) -> LoginThrottle {
        LoginThrottle {
            max_failures: limits.max_failed_logins,
            window: limits.failed_login_window,
            failures: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    /// How long `addr` stays blocked, if it is.
    pub fn blocked_for(&self, addr: IpAddr) -> Option<Duration> {
        let failures = self.failures.lock();
        let (since, count) = failures.get(&addr)?;
        let left = self.window.checked_sub(since.elapsed())?;
        (*count >= self.max_failures).then_some(left)
    }

    /// Records a failed login from `addr`.
    pub fn failed(&self, addr: IpAddr) {
        let mut failures = self.failures.lock();
        let now = Instant::now();
        if failures.len() >= MAX_TRACKED && !failures.contains_key(&addr) {
            failures.retain(|_, (since, _)| now.duration_since(*since) < self.window);
            if failures.len() >= MAX_TRACKED {
                let oldest = failures
                    .iter()
                    .min_by_key(|(_, (since, _))| *since)
                    .map(|(a, _)| *a);
                if let Some(a) = oldest {
                    failures.remove(&a);
                }
            }
        }
        let entry = failures.entry(addr).or_insert((now, 0));
        if now.duration_since(entry.0) >= self.window {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }

    /// Clears `addr`'s failures (it logged in).
    pub fn succeeded(&self, addr: IpAddr) {
        self.failures.lock().remove(&addr);
    }
}

/// A MySQL error packet (header and payload) with sequence id `seq`.
///
/// ```text
/// length u24 LE | seq u8 | 0xFF | code u16 LE | '#' | sqlstate [5] | message
/// ```
pub fn error_packet(seq: u8, code: u16, sqlstate: &[u8; 5], message: &str) -> Vec<u8> {
    let mut payload = vec![0xFF];
    payload.extend_from_slice(&code.to_le_bytes());
    payload.push(b'#');
    payload.extend_from_slice(sqlstate);
    payload.extend_from_slice(message.as_bytes());
    // A message is a line of text: far below a packet's 16 MiB.
    let len = u32::try_from(payload.len())
        .unwrap_or(u32::MAX)
        .min(0xFF_FFFF);
    let mut p = len.to_le_bytes()[..3].to_vec();
    p.push(seq);
    p.extend_from_slice(&payload[..len as usize]);
    p
}

/// The packet refusing a blocked address (sent instead of the greeting).
pub fn blocked_packet(addr: IpAddr, for_how_long: Duration) -> Vec<u8> {
    error_packet(
        0,
        code::HOST_IS_BLOCKED,
        b"HY000",
        &format!(
            "Host '{addr}' is blocked because of many failed logins; retry in {} s",
            for_how_long.as_secs().max(1)
        ),
    )
}

/// The message of a refused login, as MySQL words it.
pub fn access_denied_message(user: &str, addr: IpAddr, with_password: bool) -> String {
    format!(
        "Access denied for user '{user}'@'{addr}' (using password: {})",
        if with_password { "YES" } else { "NO" }
    )
}

/// The denial a shim records for its [`DenialWriter`] (shared by the two).
pub type Denial = Arc<parking_lot::Mutex<Option<String>>>;

/// The writer under the protocol during the login (module docs): it holds what is written
/// until a flush, rewrites an error packet when a denial was recorded, and after the first OK
/// or error packet passes everything through.
pub struct DenialWriter<W> {
    inner: W,
    denial: Denial,
    /// Written by the protocol, not yet looked at (login only).
    pending: Vec<u8>,
    /// Looked at, not yet accepted by `inner`.
    out: Vec<u8>,
    logged_in: bool,
}

impl<W> DenialWriter<W> {
    pub fn new(inner: W, denial: Denial) -> DenialWriter<W> {
        DenialWriter {
            inner,
            denial,
            pending: Vec::new(),
            out: Vec::new(),
            logged_in: false,
        }
    }

    /// Moves the complete packets of `pending` to `out`, replacing an error packet by the
    /// recorded denial. The first OK or error packet ends the login.
    fn sort_packets(&mut self) {
        while !self.logged_in && self.pending.len() >= 4 {
            let len = usize::from(self.pending[0])
                | usize::from(self.pending[1]) << 8
                | usize::from(self.pending[2]) << 16;
            if self.pending.len() < 4 + len {
                return;
            }
            let packet: Vec<u8> = self.pending.drain(..4 + len).collect();
            let kind = packet.get(4).copied();
            let denial = self.denial.lock().take();
            match (kind, denial) {
                (Some(0xFF), Some(message)) => {
                    self.out.extend_from_slice(&error_packet(
                        packet[3],
                        code::ACCESS_DENIED,
                        b"28000",
                        &message,
                    ));
                }
                (_, denial) => {
                    *self.denial.lock() = denial;
                    self.out.extend_from_slice(&packet);
                }
            }
            if matches!(kind, Some(0x00 | 0xFF)) {
                self.logged_in = true;
            }
        }
        if self.logged_in {
            self.out.append(&mut self.pending);
        }
    }
}

impl<W: AsyncWrite + Unpin> DenialWriter<W> {
    /// Writes `out` to `inner` until it is empty.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while !self.out.is_empty() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.out) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => {
                    self.out.drain(..n);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for DenialWriter<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if !this.logged_in {
            this.pending.extend_from_slice(buf);
            return Poll::Ready(Ok(buf.len()));
        }
        match this.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_write(cx, buf),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        this.sort_packets();
        match this.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        this.sort_packets();
        // A partial packet left at shutdown goes out as written.
        this.out.append(&mut this.pending);
        match this.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn limits(max: u32, window: Duration) -> MysqlLimits {
        MysqlLimits {
            max_failed_logins: max,
            failed_login_window: window,
            ..MysqlLimits::default()
        }
    }

    #[test]
    fn an_address_is_blocked_after_its_failures_until_the_window_ends() {
        let t = LoginThrottle::new(&limits(3, Duration::from_millis(300)));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        t.failed(a);
        t.failed(a);
        assert!(t.blocked_for(a).is_none());
        t.failed(a);
        assert!(t.blocked_for(a).is_some(), "three failures block");
        assert!(t.blocked_for(b).is_none(), "another address is not blocked");
        std::thread::sleep(Duration::from_millis(350));
        assert!(t.blocked_for(a).is_none(), "the window ended");
        t.failed(a);
        assert!(t.blocked_for(a).is_none(), "a new window counts from one");
        t.succeeded(a);
        t.failed(a);
        t.failed(a);
        assert!(t.blocked_for(a).is_none(), "a login cleared the count");
    }

    #[test]
    fn tracked_addresses_stay_bounded() {
        let t = LoginThrottle::new(&limits(2, Duration::from_secs(60)));
        for i in 0..(MAX_TRACKED as u32 + 100) {
            t.failed(IpAddr::from(i.to_be_bytes()));
        }
        assert!(t.failures.lock().len() <= MAX_TRACKED);
    }

    /// Writes `packets` through a writer (split at `split` bytes per write), flushing after
    /// each, with `denial` recorded; what came out.
    async fn through(packets: &[Vec<u8>], denial: Option<&str>, split: usize) -> Vec<u8> {
        let d: Denial = Arc::new(parking_lot::Mutex::new(denial.map(str::to_string)));
        let mut w = DenialWriter::new(Vec::new(), d);
        for p in packets {
            for chunk in p.chunks(split.max(1)) {
                w.write_all(chunk).await.unwrap();
            }
            w.flush().await.unwrap();
        }
        w.inner
    }

    fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = (payload.len() as u32).to_le_bytes()[..3].to_vec();
        p.push(seq);
        p.extend_from_slice(payload);
        p
    }

    #[tokio::test]
    async fn a_recorded_denial_replaces_the_login_error_with_1045() {
        let greeting = packet(0, b"\x0a8.0.11\0rest");
        let theirs = error_packet(2, 1698, b"28000", "Authenticate failed");
        for split in [1, 3, 1000] {
            let out = through(
                &[greeting.clone(), theirs.clone()],
                Some("Access denied for user 'a'@'127.0.0.1' (using password: YES)"),
                split,
            )
            .await;
            let want = [
                greeting.clone(),
                error_packet(
                    2,
                    1045,
                    b"28000",
                    "Access denied for user 'a'@'127.0.0.1' (using password: YES)",
                ),
            ]
            .concat();
            assert_eq!(out, want, "split {split}");
        }
    }

    #[tokio::test]
    async fn without_a_denial_and_after_the_login_everything_passes_unchanged() {
        let greeting = packet(0, b"\x0a8.0.11\0rest");
        let ok = packet(2, b"\x00\x00\x00\x02\x00");
        let later_error = error_packet(1, 1146, b"42S02", "no table");
        let packets = [greeting, ok, later_error];
        let out = through(&packets, None, 2).await;
        assert_eq!(out, packets.concat());
        // A denial recorded after the login (never: the shim records one only when refusing)
        // leaves later errors alone.
        let out = through(&packets, Some("x"), 1000).await;
        assert_eq!(out, packets.concat());
    }
}
