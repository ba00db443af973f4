//! What one box call or kernel cell produced, before the binding turns it into an
//! `ExecutionResult`.

use std::time::Duration;

use crate::lifecycle::fault::Fault;
use crate::workspace::track::FileInfo;

pub struct Outcome {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
    pub duration: Duration,
    pub fault: Option<Fault>,
    pub files: Vec<FileInfo>,
    pub truncated: bool,
    /// Rich results and an uncaught error of Python code, one JSON text each (see `rich`).
    pub rich: Vec<String>,
    /// The cell's number in its kernel.
    pub execution_count: Option<u32>,
}
