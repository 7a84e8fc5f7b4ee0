//! What the endpoint does around a login: counts failures (`stratus_sql_login_failures_total
//! {reason}`), blocks an address after too many ([`LoginThrottle`], MySQL's
//! `max_connect_errors` with a time window), and words a refusal as MySQL does (1045, through
//! the `on_auth_failure` hook of the vendored opensrv-mysql: `vendor/opensrv-mysql`).
//!
//! **Throttle.** An address that failed [`MysqlLimits::max_failed_logins`] logins within
//! [`MysqlLimits::failed_login_window`] is refused at connect, before the greeting, with
//! error 1129 until the window that began with its first failure ends; a successful login
//! clears its count (as MySQL's host cache does). At most [`MAX_TRACKED`] addresses are
//! tracked: when full, expired entries go first, then the oldest window.
//!
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use prometheus::{IntCounterVec, Opts};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
