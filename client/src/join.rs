//! Running a few futures of one request concurrently on the caller's task (the client has no
//! `futures` crate and no tokio runtime of its own: it runs on whatever runtime calls it).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// A boxed future of one request's share (region task, server asked for its regions).
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Waits for the first of `running` to finish, removes it and returns its output. Pending
/// forever when `running` is empty: callers check first.
pub(crate) async fn next_finished<T>(running: &mut Vec<BoxFuture<'_, T>>) -> T {
    std::future::poll_fn(|cx| {
        for i in 0..running.len() {
            if let Poll::Ready(out) = running[i].as_mut().poll(cx) {
                drop(running.swap_remove(i));
                return Poll::Ready(out);
            }
        }
        Poll::Pending
    })
    .await
}

/// Every output of `futures`, in the order they finished.
pub(crate) async fn join_all<T>(mut futures: Vec<BoxFuture<'_, T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(futures.len());
    while !futures.is_empty() {
        out.push(next_finished(&mut futures).await);
    }
    out
}
