//! The failure of one request, with the stable code the host maps to a JS error class.

use std::io;

/// A request's failure: `code` is one of the protocol's `ERR_*` names.
#[derive(Debug, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Fail {
    pub code: &'static str,
    pub message: String,
}

pub const NOT_FOUND: &str = "ERR_NOT_FOUND";
pub const NOT_A_DIRECTORY: &str = "ERR_NOT_A_DIRECTORY";
pub const IS_A_DIRECTORY: &str = "ERR_IS_A_DIRECTORY";
pub const EXISTS: &str = "ERR_EXISTS";
pub const PERMISSION_DENIED: &str = "ERR_PERMISSION_DENIED";
pub const NO_SPACE: &str = "ERR_NO_SPACE";
pub const TOO_LARGE: &str = "ERR_TOO_LARGE";
pub const INVALID_ARGUMENT: &str = "ERR_INVALID_ARGUMENT";
pub const PROCESS_NOT_FOUND: &str = "ERR_PROCESS_NOT_FOUND";
pub const PROCESS_EXITED: &str = "ERR_PROCESS_EXITED";
pub const STDIN_CLOSED: &str = "ERR_STDIN_CLOSED";
pub const CONNECTION_REFUSED: &str = "ERR_CONNECTION_REFUSED";
pub const IO: &str = "ERR_IO";

impl Fail {
    pub fn new(code: &'static str, message: impl Into<String>) -> Fail {
        Fail {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Fail {
        Fail::new(INVALID_ARGUMENT, message)
    }

    /// An OS error on `what` (usually a path): the code from its errno, the message
    /// "`what`: strerror".
    pub fn io(err: &io::Error, what: &str) -> Fail {
        Fail::new(code_of(err), format!("{what}: {}", strerror(err)))
    }
}

/// The protocol code for an OS error.
pub fn code_of(err: &io::Error) -> &'static str {
    match err.raw_os_error() {
        Some(libc::ENOENT) => NOT_FOUND,
        Some(libc::ENOTDIR) => NOT_A_DIRECTORY,
        Some(libc::EISDIR) => IS_A_DIRECTORY,
        Some(libc::EEXIST) | Some(libc::ENOTEMPTY) => EXISTS,
        Some(libc::EACCES) | Some(libc::EPERM) => PERMISSION_DENIED,
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => NO_SPACE,
        Some(libc::EFBIG) => TOO_LARGE,
        Some(libc::ECONNREFUSED) => CONNECTION_REFUSED,
        _ => match err.kind() {
            io::ErrorKind::NotFound => NOT_FOUND,
            io::ErrorKind::PermissionDenied => PERMISSION_DENIED,
            io::ErrorKind::ConnectionRefused => CONNECTION_REFUSED,
            io::ErrorKind::InvalidInput => INVALID_ARGUMENT,
            _ => IO,
        },
    }
}

/// The error's text without std's " (os error N)" suffix.
fn strerror(err: &io::Error) -> String {
    let text = err.to_string();
    match text.rfind(" (os error ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}
