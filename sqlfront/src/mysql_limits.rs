//! Bounds on the SQL endpoint's clients, as `[http]` bounds a node's listener
//! (`node::http_limits`): connections at once, and how long a connection may stay silent:
//! briefly while it logs in (MySQL's `connect_timeout`), longer between statements once it has
//! (`wait_timeout`). A client that connects and never answers the greeting, or answers it a
//! byte at a time (slowloris), is cut off after `connect-timeout` without holding a slot for
//! longer.
//!
//! The login is over when the user is authenticated ([`LoginDone::mark`], called by the
//! endpoint): from then on the idle deadline applies. Bytes exchanged before that (a TLS
//! handshake, an auth switch) do not end it, so a client that stalls after TLS is set up is
//! cut off at the login deadline too. The login deadline counts from
//! the connection's start, whatever trickles in; the idle one from the last byte exchanged
//! either way, so a statement that runs or answers for longer never times its client out (as
//! MySQL counts `wait_timeout` from the end of the command).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The endpoint's bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MysqlLimits {
    /// Connections open at once; at the limit the endpoint stops accepting and the next one
    /// waits in the kernel's accept queue. MySQL's default `max_connections` is 151.
    pub max_connections: usize,
    /// Silence allowed before the login completes (MySQL's `connect_timeout`, 10 s).
    pub connect_timeout: Duration,
    /// Silence allowed between statements once logged in (MySQL's `wait_timeout`, 8 h).
    pub wait_timeout: Duration,
    /// Failed logins from one address before it is refused at connect (`crate::login`;
    /// MySQL's `max_connect_errors`, counted per window here).
    pub max_failed_logins: u32,
    /// How long a blocked address stays blocked, counted from its first failure.
    pub failed_login_window: Duration,
}

impl Default for MysqlLimits {
    fn default() -> Self {
        MysqlLimits {
            max_connections: 151,
            connect_timeout: Duration::from_secs(10),
            wait_timeout: Duration::from_secs(8 * 3600),
            max_failed_logins: 10,
            failed_login_window: Duration::from_secs(60),
        }
    }
}

/// A bound the endpoint cannot run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad SQL endpoint limit {name}: expected {expected}, found {found}")]
pub struct BadLimit {
    pub name: &'static str,
    pub expected: &'static str,
    pub found: String,
}

impl MysqlLimits {
    /// Refuses bounds that would make the endpoint serve nobody or never cut anyone off.
    pub fn validate(&self) -> Result<(), BadLimit> {
        let positive = |name: &'static str, zero: bool, found: String| {
            if zero {
                Err(BadLimit {
                    name,
                    expected: "a value above 0",
                    found,
                })
            } else {
                Ok(())
            }
        };
        positive(
            "max-connections",
            self.max_connections == 0,
            self.max_connections.to_string(),
        )?;
        positive(
            "connect-timeout",
            self.connect_timeout.is_zero(),
            format!("{:?}", self.connect_timeout),
        )?;
        positive(
            "wait-timeout",
            self.wait_timeout.is_zero(),
            format!("{:?}", self.wait_timeout),
        )?;
        positive(
            "max-failed-logins",
            self.max_failed_logins == 0,
            self.max_failed_logins.to_string(),
        )?;
        positive(
            "failed-login-window",
            self.failed_login_window.is_zero(),
            format!("{:?}", self.failed_login_window),
        )
    }
}

/// Where a connection is: nothing read yet, the client's handshake read, logged in; and, once
/// logged in, whether the endpoint wrote since the last read (its answer: idle counts anew).
const GREETED: u8 = 0;
const READ_HANDSHAKE: u8 = 1;
const LOGGED_IN: u8 = 2;
const ANSWERED: u8 = 3;

/// Ends a connection's login (module docs): the handle the endpoint keeps to say its user
/// was authenticated.
#[derive(Debug, Clone)]
pub struct LoginDone(Arc<AtomicU8>);

impl LoginDone {
    /// The user is authenticated: the idle deadline applies from the next read.
    pub fn mark(&self) {
        let phase = self.0.load(Ordering::Relaxed);
        if phase < LOGGED_IN {
            self.0.store(ANSWERED, Ordering::Relaxed);
        }
    }
}

/// The two halves of a connection with the deadlines of `limits`, and the handle that ends
/// its login.
pub fn bounded<R, W>(
    read: R,
    write: W,
    limits: &MysqlLimits,
) -> (Deadlined<R>, Phased<W>, LoginDone) {
    let phase = Arc::new(AtomicU8::new(GREETED));
    let done = LoginDone(phase.clone());
    (
        Deadlined {
            inner: read,
            phase: phase.clone(),
            connect_timeout: limits.connect_timeout,
            wait_timeout: limits.wait_timeout,
            sleep: Box::pin(tokio::time::sleep(limits.connect_timeout)),
            armed_for_login: true,
        },
        Phased {
            inner: write,
            phase,
        },
        done,
    )
}

/// The read half: a read that waits longer than the phase's deadline fails with
/// `TimedOut`.
pub struct Deadlined<R> {
    inner: R,
    phase: Arc<AtomicU8>,
    connect_timeout: Duration,
    wait_timeout: Duration,
    sleep: Pin<Box<Sleep>>,
    /// Whether `sleep` runs out at the login deadline (else at the idle one).
    armed_for_login: bool,
}

impl<R> Deadlined<R> {
    /// Sets the deadline of the phase the connection is in, counted from now.
    fn arm(&mut self) {
        let login = self.phase.load(Ordering::Relaxed) < LOGGED_IN;
        let after = if login {
            self.connect_timeout
        } else {
            self.wait_timeout
        };
        self.armed_for_login = login;
        self.sleep.as_mut().reset(Instant::now() + after);
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Deadlined<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    let _ = self.phase.compare_exchange(
                        GREETED,
                        READ_HANDSHAKE,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                    // Logged in: idle counts from the last byte received. Logging in: from
                    // the start, however many bytes trickle in.
                    if self.phase.load(Ordering::Relaxed) >= LOGGED_IN {
                        self.arm();
                    }
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                // Answered since the deadline was set (the login, or a statement): the idle
                // deadline counts from now.
                if self
                    .phase
                    .compare_exchange(ANSWERED, LOGGED_IN, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    self.arm();
                }
                match self.sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        if self.armed_for_login {
                            "no login within connect-timeout"
                        } else {
                            "idle past wait-timeout"
                        },
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

/// The write half: once logged in, every write marks an answer (the idle deadline restarts at
/// the next read).
pub struct Phased<W> {
    inner: W,
    phase: Arc<AtomicU8>,
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Phased<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        // After a statement once logged in: an answer.
        if self.phase.load(Ordering::Relaxed) == LOGGED_IN {
            self.phase.store(ANSWERED, Ordering::Relaxed);
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
