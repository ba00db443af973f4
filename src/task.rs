//! One task type for tokio. Every future is boxed before it is spawned, so tokio's task machinery
//! (harness, vtable, join handle) is built once per output type instead of once per spawn site;
//! the addon was ~0.4 MB larger with a copy per site. A spawn pays one allocation.

use std::future::Future;
use std::pin::Pin;

use tokio::task::JoinHandle;

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// `tokio::spawn`, boxed.
pub fn spawn<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> JoinHandle<T> {
    tokio::spawn(Box::pin(fut) as Boxed<T>)
}

/// `tokio::task::spawn_blocking`, boxed likewise.
pub fn spawn_blocking(f: Box<dyn FnOnce() + Send>) -> JoinHandle<()> {
    tokio::task::spawn_blocking(f)
}
