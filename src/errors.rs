//! The binding's error type and its one mapping onto napi errors.
//!
//! Every error carries a stable code (`ERR_…`) that JS branches on; its message is for people and
//! may be reworded. Native code puts the code in the reason (`[ERR_…] message`) and
//! `lib/errors.js` turns it into the right class (or the abort reason) through one table. A tag in
//! the reason works the same for sync and async methods, which napi-rs does not allow to carry
//! custom error statuses alike.

use std::io;

/// Declares the error variants next to their codes, so adding a code is one line here (and one in
/// lib/errors.js's table, which a test holds to `errorCodes()`).
macro_rules! coded_errors {
    ($($(#[$doc:meta])* $variant:ident => $code:literal,)*) => {
        #[derive(Debug, thiserror::Error)]
        pub enum Error {
            $($(#[$doc])* #[error("{0}")] $variant(String),)*
            /// The call was cancelled through its AbortSignal; JS rejects with `signal.reason`.
            #[error("the call was aborted")]
            Aborted,
        }

        impl Error {
            /// Every code, for JS's check that its table covers them all.
            pub const CODES: &'static [&'static str] = &[$($code,)* "ERR_ABORTED"];

            pub fn code(&self) -> &'static str {
                match self {
                    $(Error::$variant(_) => $code,)*
                    Error::Aborted => "ERR_ABORTED",
                }
            }
        }
    };
}

coded_errors! {
    /// Everything no caller tells apart: failed I/O, a failed setup, an internal error (a
    /// caught panic).
    Sandbox => "ERR_SANDBOX",
    /// A host mount (or the workspace) was refused as unsafe.
    MountRefused => "ERR_MOUNT_REFUSED",
    /// A workspace path that does not exist.
    NotFound => "ERR_NOT_FOUND",
    /// A workspace path that leads outside the workspace.
    PathEscapes => "ERR_PATH_ESCAPES",
    /// A file or archive over the size limit the call was given.
    TooLarge => "ERR_TOO_LARGE",
    /// An argument or option the binding does not accept.
    InvalidOption => "ERR_INVALID_OPTION",
    /// A language name no entry point runs.
    UnsupportedLanguage => "ERR_UNSUPPORTED_LANGUAGE",
    /// A JavaScript kernel in an image with no node on PATH.
    NoNode => "ERR_NO_NODE",
    /// No kern binary to run.
    NoKern => "ERR_NO_KERN",
    /// A session method called before open().
    NotOpen => "ERR_NOT_OPEN",
    /// The sandbox was closed under the call.
    Closed => "ERR_CLOSED",
    /// The kernel is closed, or went away under the cell: it will not run cells any more.
    KernelGone => "ERR_KERNEL_GONE",
    /// A machine's path is not a directory where one is needed.
    NotADirectory => "ERR_NOT_A_DIRECTORY",
    /// A machine's path is a directory where a file is needed.
    IsADirectory => "ERR_IS_A_DIRECTORY",
    /// Something is already at a machine's path.
    Exists => "ERR_EXISTS",
    /// The machine refused the access (its file modes, its user).
    PermissionDenied => "ERR_PERMISSION_DENIED",
    /// The machine's filesystem is full.
    NoSpace => "ERR_NO_SPACE",
    /// No process of that pid was started in the machine.
    ProcessNotFound => "ERR_PROCESS_NOT_FOUND",
    /// The process has exited.
    ProcessExited => "ERR_PROCESS_EXITED",
    /// The process's stdin is closed (or was never open).
    StdinClosed => "ERR_STDIN_CLOSED",
    /// Nothing listens on that port in the machine.
    ConnectionRefused => "ERR_CONNECTION_REFUSED",
    /// The machine is closed, or its box died.
    MachineGone => "ERR_MACHINE_GONE",
    /// A network (egress) policy entry that is malformed; the message names the entry.
    BadNetworkPolicy => "ERR_BAD_NETWORK_POLICY",
    /// The machine was opened with `network: false` or `true`: it has no policy to update.
    NetworkFixed => "ERR_NETWORK_FIXED",
    /// The machine is paused: resume() it first.
    MachinePaused => "ERR_MACHINE_PAUSED",
    /// No machine snapshot has that id or name in the store.
    SnapshotNotFound => "ERR_SNAPSHOT_NOT_FOUND",
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
        let e: napi::Error = Error::Aborted.into();
        assert_eq!(e.reason, "[ERR_ABORTED] the call was aborted");
    }

    #[test]
    fn codes_are_distinct_and_shaped_for_js() {
        let mut seen = std::collections::HashSet::new();
        for c in Error::CODES {
            assert!(seen.insert(c), "{c} twice");
            let tail = c.strip_prefix("ERR_").expect(c);
            assert!(!tail.is_empty() && tail.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'));
        }
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
