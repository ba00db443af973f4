//! One task type for tokio. Every future is boxed before it is spawned, so tokio's task machinery
//! (harness, vtable, join handle) is built once per output type instead of once per spawn site;
//! the addon was ~0.4 MB larger with a copy per site. A spawn pays one allocation. Blocking work
//! is boxed the same way, so the blocking pool's task machinery is also built once per output
//! type.

use std::future::Future;
use std::pin::Pin;

use tokio::task::JoinHandle;

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type BoxedJob<T> = Box<dyn FnOnce() -> T + Send>;

/// `tokio::spawn`, boxed.
pub fn spawn<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> JoinHandle<T> {
    tokio::spawn(Box::pin(fut) as Boxed<T>)
}

/// `tokio::task::spawn_blocking`, boxed.
pub fn spawn_blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    tokio::task::spawn_blocking(Box::new(f) as BoxedJob<T>)
}

/// `JoinSet::spawn`, boxed.
pub fn spawn_in<T: Send + 'static>(
    set: &mut tokio::task::JoinSet<T>,
    fut: impl Future<Output = T> + Send + 'static,
) {
    set.spawn(Box::pin(fut) as Boxed<T>);
}
