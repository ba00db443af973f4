//! One task type for tokio. Every future is boxed before it is spawned, so tokio's task machinery
//! (harness, vtable, join handle) is built once per output type instead of once per spawn site;
//! the addon was ~0.4 MB larger with a copy per site. A spawn pays one allocation. Blocking work
//! is boxed the same way, so the blocking pool's task machinery is also built once per output
//! type.

use std::cell::RefCell;
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

tokio::task_local! {
    /// What a call's task lets go of once its result is on its way (see [`drop_later`]).
    static LATER: RefCell<Vec<Box<dyn std::any::Any + Send>>>;
}

/// Runs a call's task `fut` so that what it hands [`drop_later`] is dropped when it is done.
pub fn dropping_later<T>(fut: impl Future<Output = T>) -> impl Future<Output = T> {
    LATER.scope(RefCell::new(Vec::new()), fut)
}

/// Drops `x` when the current call's task is done, after its result went to JS, not now: closing
/// a finished box's pidfd and pipes is a few syscalls each, which its result need not wait for.
/// Outside such a task (see [`dropping_later`]) it is dropped now.
pub fn drop_later<T: Send + 'static>(x: T) {
    let mut x = Some(x);
    let _ = LATER.try_with(|later| {
        if let Some(x) = x.take() {
            later.borrow_mut().push(Box::new(x));
        }
    });
}
