//! Ending calls early: the flag a running call awaits, and the one registry of a session's calls
//! in flight, through which `close()` stops them all and an AbortSignal stops one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Why a call is being torn down early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Aborted = 1,
    Closed = 2,
}

/// A cancellation flag a call can await.
#[derive(Default)]
pub struct Cancel {
    reason: AtomicU8,
    notify: Notify,
}

impl Cancel {
    pub fn fire(&self, why: StopReason) {
        let _ = self
            .reason
            .compare_exchange(0, why as u8, Ordering::AcqRel, Ordering::Acquire);
        self.notify.notify_waiters();
    }

    pub fn reason(&self) -> Option<StopReason> {
        match self.reason.load(Ordering::Acquire) {
            1 => Some(StopReason::Aborted),
            2 => Some(StopReason::Closed),
            _ => None,
        }
    }

    pub async fn fired(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.reason().is_some() {
                return;
            }
            notified.await;
        }
    }
}

/// A registered call: the id JS knows it by (when an AbortSignal is wired to it) and its flag.
type Entry = (Option<u32>, Arc<Cancel>);

/// A session's calls in flight.
#[derive(Default)]
pub struct Calls {
    live: Mutex<HashMap<u64, Entry>>,
}

impl Calls {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<u64, Entry>) -> T) -> T {
        f(&mut self.live.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Registers a new call (under `js_id` when JS may abort it) until the returned handle drops.
    pub fn register(self: &Arc<Self>, js_id: Option<u32>) -> Call {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let cancel = Arc::new(Cancel::default());
        self.with(|l| l.insert(id, (js_id, cancel.clone())));
        Call {
            calls: self.clone(),
            id,
            cancel,
        }
    }

    /// Aborts the call registered under `js_id`, if it is still in flight.
    pub fn abort(&self, js_id: u32) {
        let hit = self.with(|l| {
            l.values()
                .find(|(j, _)| *j == Some(js_id))
                .map(|(_, c)| c.clone())
        });
        if let Some(c) = hit {
            c.fire(StopReason::Aborted);
        }
    }

    /// Stops every call in flight: the session is closing.
    pub fn close_all(&self) {
        let all: Vec<Arc<Cancel>> = self.with(|l| l.values().map(|(_, c)| c.clone()).collect());
        for c in all {
            c.fire(StopReason::Closed);
        }
    }
}

/// One registered call; it leaves the registry when this drops.
pub struct Call {
    calls: Arc<Calls>,
    id: u64,
    pub cancel: Arc<Cancel>,
}

impl Call {
    /// Unique in the process, so it also names the call to the session's file index.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.calls.with(|l| l.remove(&self.id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abort_names_one_call_and_close_reaches_all() {
        let calls = Arc::new(Calls::default());
        let a = calls.register(Some(7));
        let b = calls.register(None);
        calls.abort(8);
        assert_eq!(a.cancel.reason(), None);
        calls.abort(7);
        assert_eq!(a.cancel.reason(), Some(StopReason::Aborted));
        calls.close_all();
        assert_eq!(b.cancel.reason(), Some(StopReason::Closed));
        assert_eq!(
            a.cancel.reason(),
            Some(StopReason::Aborted),
            "the first reason sticks"
        );
    }

    #[test]
    fn a_finished_call_leaves_the_registry() {
        let calls = Arc::new(Calls::default());
        let done = calls.register(Some(1));
        let cancel = done.cancel.clone();
        drop(done);
        calls.abort(1);
        calls.close_all();
        assert_eq!(cancel.reason(), None);
    }
}
