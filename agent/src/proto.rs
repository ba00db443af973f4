//! The wire protocol between the host (the napi addon) and this agent, version 1.
//!
//! One unix stream connection carries everything. The agent connects to the socket path it was
//! given (the host listens; a connect works through a read-only bind mount where a bind would not)
//! and first sends `hello` with its version, pid and working directory.
//!
//! Every frame, in both directions, is two big-endian `u32` lengths followed by the bytes they
//! count: `[header_len][payload_len][header][payload]`. The header is a UTF-8 JSON object whose
//! `"t"` names the message; the payload is raw bytes (process output, file contents, stdin, port
//! traffic) and is often empty. Payloads over 64 MiB are refused; the host splits larger data.
//! Headers the agent sends stay within 1 MiB: an answer that would not (a `list` of a huge tree)
//! is an `ERR_TOO_LARGE` error, and `ps` shortens very long argv strings.
//!
//! Requests from the host carry a numeric `"id"`, and each gets exactly one answer:
//! `{"t":"ok","id":N,...}` with the request's result fields, or
//! `{"t":"error","id":N,"code":"ERR_...","message":"..."}`. The codes name the failure class
//! (`ERR_NOT_FOUND`, `ERR_IS_A_DIRECTORY`, `ERR_PROCESS_EXITED`, ...; see [`crate::error`]).
//! Requests: `spawn`, `write`, `close_stdin`, `signal`, `resize`, `ps` (processes); `read`,
//! `write_file`, `list`, `stat`, `remove`, `rename`, `mkdir` (files, resolved in the box's own
//! mount namespace); `watch`, `unwatch` (inotify); `connect` (a TCP stream to the box's loopback);
//! `metrics`; `snap_walk`, `snap_read`, `snap_apply` (snapshots); `shutdown`.
//!
//! Unsolicited frames from the agent: `out` (a chunk of a process's stdout or stderr, in order per
//! fd), `exit` (after the process was reaped and its output drained, or after a 100 ms drain window
//! when a background grandchild keeps the pipes open; nothing of that pid follows it), `event` (a
//! file watch event), and for port streams `data`, `eof` (the box side shut its write half) and
//! `closed` (the stream is gone). The host drives port streams with id-less `data`, `eof` and
//! `close` frames that get no answer.
//!
//! All frames to the host go through one queue drained by one writer thread, so a frame is never
//! interleaved with another and the request reader never waits on a slow host.

use std::io::{self, Read};

use serde::Deserialize;
use serde_json::{Map, Value};

/// The protocol version `hello` announces.
pub const VERSION: u32 = 1;
/// The largest payload either side may send.
pub const MAX_PAYLOAD: usize = 64 << 20;
/// Headers are small JSON objects; anything this large is a broken peer.
const MAX_HEADER: usize = 16 << 20;
/// The largest header the agent sends (what the host accepts). An answer that would be larger
/// (a `list` of a huge tree) is an ERR_TOO_LARGE error instead.
pub const MAX_HEADER_OUT: usize = 1 << 20;

/// One frame read from the host.
pub enum Incoming {
    /// A frame within the limits: its header object and payload.
    Frame(Map<String, Value>, Vec<u8>),
    /// A frame whose payload was over [`MAX_PAYLOAD`]; the payload was read and dropped.
    TooLarge(Map<String, Value>),
    /// The host closed the connection.
    Eof,
}

/// Reads one frame. `Ok(Incoming::Eof)` only on a clean end between frames.
pub fn read_frame(r: &mut impl Read) -> io::Result<Incoming> {
    let mut lens = [0u8; 8];
    if !read_exact_or_eof(r, &mut lens)? {
        return Ok(Incoming::Eof);
    }
    let header_len = u32::from_be_bytes([lens[0], lens[1], lens[2], lens[3]]) as usize;
    let payload_len = u32::from_be_bytes([lens[4], lens[5], lens[6], lens[7]]) as usize;
    if header_len > MAX_HEADER {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame header too large",
        ));
    }
    let mut header = vec![0u8; header_len];
    r.read_exact(&mut header)?;
    let header = match serde_json::from_slice::<Value>(&header) {
        Ok(Value::Object(map)) => map,
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "frame header is not a JSON object",
            ))
        }
    };
    if payload_len > MAX_PAYLOAD {
        io::copy(&mut r.take(payload_len as u64), &mut io::sink())?;
        return Ok(Incoming::TooLarge(header));
    }
    let mut payload = vec![0u8; payload_len];
    r.read_exact(&mut payload)?;
    Ok(Incoming::Frame(header, payload))
}

/// Like `read_exact`, but a clean EOF before the first byte is `Ok(false)`.
fn read_exact_or_eof(r: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// The 8-byte length prefix and JSON header of an outgoing frame (the payload is written after it
/// without being copied).
pub fn encode_head(header: &Value, payload_len: usize) -> Vec<u8> {
    let json = serde_json::to_vec(header).expect("a JSON value always serializes");
    let mut head = Vec::with_capacity(8 + json.len());
    head.extend_from_slice(&(json.len() as u32).to_be_bytes());
    head.extend_from_slice(&(payload_len as u32).to_be_bytes());
    head.extend_from_slice(&json);
    head
}

/// How a spawned process's stdin is fed.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug, Default)]
#[serde(rename_all = "snake_case")]
pub enum StdinMode {
    /// `/dev/null` (a pty gets no input).
    #[default]
    None,
    /// The request's payload, then end of input.
    Data,
    /// Kept open for `write` and `close_stdin`.
    Open,
}

/// A terminal size.
#[derive(Deserialize, Clone, Copy, Debug)]
pub struct WinSize {
    pub cols: u16,
    pub rows: u16,
}

/// The fields of a `spawn` request.
#[derive(Deserialize, Debug)]
pub struct SpawnReq {
    pub argv: Vec<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub stdin: StdinMode,
    #[serde(default)]
    pub pty: Option<WinSize>,
    #[serde(default)]
    pub user: Option<String>,
}

fn default_depth() -> u32 {
    1
}

/// Every message the host sends, by its `"t"`.
#[derive(Deserialize, Debug)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Request {
    Spawn(SpawnReq),
    Write {
        pid: i32,
    },
    CloseStdin {
        pid: i32,
    },
    Signal {
        pid: i32,
        signal: i32,
    },
    Resize {
        pid: i32,
        cols: u16,
        rows: u16,
    },
    Ps,
    Read {
        path: String,
        #[serde(default)]
        max: Option<u64>,
    },
    WriteFile {
        path: String,
        #[serde(default)]
        mode: Option<u32>,
        /// A user (name or uid) to own the file and the parents the write creates.
        #[serde(default)]
        owner: Option<String>,
        /// `user.*` extended attributes to set on the file.
        #[serde(default)]
        xattrs: Option<std::collections::BTreeMap<String, String>>,
        /// Extended attributes with this prefix (in `user.`) are removed first.
        #[serde(default)]
        clear_xattrs: Option<String>,
    },
    List {
        path: String,
        #[serde(default = "default_depth")]
        depth: u32,
    },
    Stat {
        path: String,
    },
    Remove {
        path: String,
    },
    Rename {
        from: String,
        to: String,
    },
    Mkdir {
        path: String,
        /// A user (name or uid) to own the directories created.
        #[serde(default)]
        owner: Option<String>,
    },
    Watch {
        path: String,
        #[serde(default)]
        recursive: bool,
    },
    Unwatch {
        watch: u32,
    },
    Connect {
        port: u16,
    },
    Metrics,
    /// Snapshots (see [`crate::snapshot`]): the root filesystem's walk, pieces of its files, and
    /// a snapshot's changes written back.
    SnapWalk,
    SnapRead {
        items: Vec<(String, u64, u64)>,
    },
    SnapApply {
        ops: Vec<SnapOp>,
    },
    Shutdown,
    /// Port-stream traffic: no id, no answer.
    Data {
        stream: u32,
    },
    Eof {
        stream: u32,
    },
    Close {
        stream: u32,
    },
}

/// One change `snap_apply` makes.
#[derive(Deserialize, Debug)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum SnapOp {
    /// Removes whatever is at `path` (a tree too); nothing there is fine.
    Rm { path: String },
    /// A directory (what was there first, if not a directory, is removed).
    Dir {
        path: String,
        mode: u32,
        uid: u32,
        gid: u32,
    },
    /// `len` bytes of the payload written at `off`; `off == 0` starts the file afresh. `last`
    /// sets its owner, mode and mtime.
    File {
        path: String,
        off: u64,
        len: u64,
        mode: u32,
        uid: u32,
        gid: u32,
        mtime: (i64, i64),
        last: bool,
    },
    /// A symlink to `target`.
    Link {
        path: String,
        target: String,
        uid: u32,
        gid: u32,
        mtime: (i64, i64),
    },
    /// A directory's mtime, set after its content was written.
    Times { path: String, mtime: (i64, i64) },
}
