//! The error kinds kern reports, with kern's wording.
//!
//! kern prints every failure as `error: <Display>` plus an optional `hint: <hint>` line and exits 1
//! (its parser is hand-rolled, not clap, so usage errors are 1 as well, never 2). The binding's tests
//! match on those lines, so each variant reproduces kern's prefix and hint for the same situation.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("unknown command '{0}'")]
    UnknownCommand(String),
    #[error("invalid box name: {0}")]
    InvalidBox(&'static str),
    /// Bad input discovered while building the box (a `-v` spec, an env file, a capability name).
    #[error("sandbox: {0}")]
    Sandbox(String),
    /// The box itself could not be created here (namespaces, caps policy); carries kern's setup hint.
    #[error("sandbox: {0}")]
    Setup(String),
    #[error("{0}")]
    NotRunning(String),
    #[error("{0}")]
    AlreadyRunning(String),
    #[error("{0}")]
    Volume(String),
    /// An image that is not available; kern's OCI errors carry their own prefix.
    #[error("{msg}")]
    Oci { msg: String, hint: &'static str },
    #[error("config: {0}")]
    Config(String),
    /// A flag a verb does not take; the message already names the verb.
    #[error("{0}")]
    Cli(String),
    #[error("usage: kern {0}")]
    Usage(&'static str),
}

impl Error {
    /// The `hint:` line kern prints under the error, if any.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Error::UnknownCommand(_) => Some("run `kern --help` for the list of commands"),
            Error::InvalidBox(_) => {
                Some("box names: letters/digits/_/./- only, no leading '-' or '.', max 64 chars")
            }
            Error::Sandbox(_) => None,
            Error::Setup(_) => {
                Some("needs unprivileged user namespaces and a valid --rootfs directory")
            }
            Error::NotRunning(_) => Some("run `kern ps` to see running boxes"),
            Error::AlreadyRunning(_) => {
                Some("run `kern ps` to see running boxes; `kern stop <name>` frees the name")
            }
            Error::Volume(_) => Some("run `kern volume ls` to see existing volumes"),
            Error::Oci { hint, .. } => Some(hint),
            Error::Config(_) => {
                Some("profiles live in ~/.config/kern/kern.toml - see docs/CONFIG.md")
            }
            Error::Cli(_) | Error::Usage(_) => Some("run `kern --help` for full usage"),
        }
    }
}
