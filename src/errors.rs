//! The binding's error type and its one mapping onto napi errors.
//!
//! JS sees two classes, `SandboxError` and its subclass `MountRefused`, and an aborted call rejects
//! with its AbortSignal's reason. Native code marks each error with a stable code in the reason
//! (`[ERR_…] message`); `lib/errors.js` turns that code into the right class (or the abort reason)
//! in one place. A tag in the reason works the same for sync and async methods, which napi-rs does
//! not allow to carry custom error statuses alike.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Everything else the caller is told: a bad argument or option, missing kern, failed I/O, an
    /// internal error (a caught panic).
    #[error("{0}")]
    Sandbox(String),
    /// A host mount (or the workspace) was refused as unsafe.
    #[error("{0}")]
    MountRefused(String),
    /// A workspace path that does not exist (JS: a SandboxError with code `ERR_NOT_FOUND`).
    #[error("{0}")]
    NotFound(String),
    /// The call was cancelled through its AbortSignal; JS rejects with `signal.reason`.
    #[error("the call was aborted")]
    Aborted,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn sandbox(msg: impl Into<String>) -> Self {
        Error::Sandbox(msg.into())
    }

    pub fn mount(msg: impl Into<String>) -> Self {
        Error::MountRefused(msg.into())
    }

    /// An I/O failure on `what`, worded for the caller.
    pub fn io(what: impl std::fmt::Display, err: io::Error) -> Self {
        Error::Sandbox(format!("{what}: {err}"))
    }

    pub fn code(&self) -> &'static str {
        match self {
            Error::Sandbox(_) => "ERR_SANDBOX",
            Error::MountRefused(_) => "ERR_MOUNT_REFUSED",
            Error::NotFound(_) => "ERR_NOT_FOUND",
            Error::Aborted => "ERR_ABORTED",
        }
    }
}

impl From<Error> for napi::Error {
    fn from(e: Error) -> Self {
        napi::Error::new(
            napi::Status::GenericFailure,
            format!("[{}] {}", e.code(), e),
        )
    }
}

/// Runs `f`, turning a Rust panic into a SandboxError instead of letting it unwind into napi.
pub fn guard<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(Error::sandbox(format!(
            "internal error: {}",
            panic_message(&p)
        ))),
    }
}

/// A future whose panic becomes a SandboxError instead of an unresolved promise.
pub struct Guarded<F>(pub F);

impl<T, F: std::future::Future<Output = Result<T>>> std::future::Future for Guarded<F> {
    type Output = Result<T>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<T>> {
        // SAFETY: structural pinning of the only field; it is never moved out.
        let inner = unsafe { self.map_unchecked_mut(|g| &mut g.0) };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(p) => p,
            Err(p) => std::task::Poll::Ready(Err(Error::sandbox(format!(
                "internal error: {}",
                panic_message(&p)
            )))),
        }
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_tagged() {
        let e: napi::Error = Error::mount("no").into();
        assert_eq!(e.reason, "[ERR_MOUNT_REFUSED] no");
        let e: napi::Error = Error::sandbox("bad").into();
        assert_eq!(e.reason, "[ERR_SANDBOX] bad");
        let e: napi::Error = Error::NotFound("gone".into()).into();
        assert_eq!(e.reason, "[ERR_NOT_FOUND] gone");
    }

    #[tokio::test]
    async fn guarded_futures_turn_panics_into_errors() {
        let r: Result<()> = Guarded(async { panic!("late boom") }).await;
        assert!(matches!(r, Err(Error::Sandbox(m)) if m.contains("late boom")));
    }

    #[test]
    fn guard_turns_panics_into_errors() {
        let r: Result<()> = guard(|| panic!("boom"));
        assert!(matches!(r, Err(Error::Sandbox(m)) if m.contains("boom")));
    }
}
