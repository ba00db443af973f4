//! A test host: listens on a unix socket in a temp dir, starts the built agent on it, and speaks
//! the protocol (frames, request ids, answers) so the tests can read like the host would use it.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Long enough for any healthy answer on a loaded machine; a hang fails instead of stalling.
const PATIENCE: Duration = Duration::from_secs(30);

pub type Frame = (Value, Vec<u8>);

pub struct Host {
    pub stream: UnixStream,
    pub child: Child,
    pub hello: Value,
    next_id: u32,
    /// Frames read while waiting for something else.
    stash: VecDeque<Frame>,
    pub dir: tempfile::TempDir,
}

/// What a process produced, in the order it arrived.
#[derive(Debug, Default)]
pub struct Output {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub code: i64,
    pub signal: Value,
}

impl Output {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

impl Host {
    /// Starts an agent connected to a fresh listener and reads its hello.
    pub fn start() -> Host {
        Host::start_with(tempfile::tempdir().unwrap(), &[])
    }

    /// Starts an agent with `extra` arguments after its socket, in `dir`.
    pub fn start_with(dir: tempfile::TempDir, extra: &[&std::ffi::OsStr]) -> Host {
        let sock = dir.path().join("sock");
        let listener = UnixListener::bind(&sock).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_kern-sandbox-agent"))
            .arg(&sock)
            .args(extra)
            .spawn()
            .unwrap();
        listener.set_nonblocking(true).unwrap();
        let started = Instant::now();
        let stream = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(_) if started.elapsed() < PATIENCE => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => panic!("the agent never connected: {e}"),
            }
        };
        stream.set_nonblocking(false).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut host = Host {
            stream,
            child,
            hello: Value::Null,
            next_id: 1,
            stash: VecDeque::new(),
            dir,
        };
        let (hello, _) = host.read_frame();
        host.hello = hello;
        host
    }

    pub fn send(&mut self, header: &Value, payload: &[u8]) {
        let json = serde_json::to_vec(header).unwrap();
        let mut frame = Vec::new();
        frame.extend_from_slice(&(json.len() as u32).to_be_bytes());
        frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        frame.extend_from_slice(&json);
        frame.extend_from_slice(payload);
        self.stream.write_all(&frame).unwrap();
    }

    fn read_frame(&mut self) -> Frame {
        let mut lens = [0u8; 8];
        self.stream
            .read_exact(&mut lens)
            .expect("a frame from the agent in time");
        let hlen = u32::from_be_bytes(lens[..4].try_into().unwrap()) as usize;
        let plen = u32::from_be_bytes(lens[4..].try_into().unwrap()) as usize;
        let mut header = vec![0u8; hlen];
        self.stream.read_exact(&mut header).unwrap();
        let mut payload = vec![0u8; plen];
        self.stream.read_exact(&mut payload).unwrap();
        (serde_json::from_slice(&header).unwrap(), payload)
    }

    /// The next frame matching `pred` (stashed ones first); the others stay stashed, in order.
    pub fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Frame {
        if let Some(i) = self.stash.iter().position(|(h, _)| pred(h)) {
            return self.stash.remove(i).unwrap();
        }
        loop {
            let frame = self.read_frame();
            if pred(&frame.0) {
                return frame;
            }
            self.stash.push_back(frame);
        }
    }

    /// Takes every stashed frame matching `pred`.
    pub fn take_stashed(&mut self, pred: impl Fn(&Value) -> bool) -> Vec<Frame> {
        let (hit, keep): (Vec<Frame>, Vec<Frame>) =
            self.stash.drain(..).partition(|(h, _)| pred(h));
        self.stash = keep.into();
        hit
    }

    /// Sends a request (`req` has "t" and its fields) and returns its id.
    pub fn request(&mut self, req: Value, payload: &[u8]) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        let mut req = req;
        req["id"] = id.into();
        self.send(&req, payload);
        id
    }

    /// The answer to request `id`: Ok(ok frame) or Err(error code).
    pub fn answer(&mut self, id: u32) -> Result<Frame, (String, String)> {
        let (h, p) = self.wait_for(|h| (h["t"] == "ok" || h["t"] == "error") && h["id"] == id);
        if h["t"] == "ok" {
            Ok((h, p))
        } else {
            Err((
                h["code"].as_str().unwrap().to_owned(),
                h["message"].as_str().unwrap_or("").to_owned(),
            ))
        }
    }

    pub fn call(&mut self, req: Value, payload: &[u8]) -> Result<Frame, (String, String)> {
        let id = self.request(req, payload);
        self.answer(id)
    }

    /// A request that must succeed.
    pub fn ok(&mut self, req: Value, payload: &[u8]) -> Frame {
        let what = req.to_string();
        self.call(req, payload)
            .unwrap_or_else(|e| panic!("{what} failed: {e:?}"))
    }

    /// A request that must fail: its error code.
    pub fn err(&mut self, req: Value) -> String {
        let what = req.to_string();
        match self.call(req, b"") {
            Ok(frame) => panic!("{what} succeeded: {:?}", frame.0),
            Err((code, _)) => code,
        }
    }

    pub fn spawn(&mut self, req: Value, payload: &[u8]) -> i64 {
        let mut req = req;
        req["t"] = "spawn".into();
        self.ok(req, payload).0["pid"].as_i64().unwrap()
    }

    /// Collects a process's output until its exit frame, asserting that nothing of it comes
    /// after the exit (checked up to the answer of a later request).
    pub fn collect(&mut self, pid: i64) -> Output {
        let mut out = Output::default();
        loop {
            let (h, p) =
                self.wait_for(|h| h["pid"] == pid && (h["t"] == "out" || h["t"] == "exit"));
            if h["t"] == "exit" {
                out.code = h["code"].as_i64().unwrap();
                out.signal = h["signal"].clone();
                break;
            }
            match h["fd"].as_i64() {
                Some(1) => out.stdout.extend_from_slice(&p),
                Some(2) => out.stderr.extend_from_slice(&p),
                fd => panic!("out frame with fd {fd:?}"),
            }
        }
        self.ok(json!({"t": "ps"}), b"");
        let late = self.take_stashed(|h| h["pid"] == pid && h["t"] == "out");
        assert!(late.is_empty(), "out frames after exit: {late:?}");
        out
    }

    pub fn run(&mut self, argv: &[&str]) -> Output {
        let pid = self.spawn(json!({"argv": argv}), b"");
        self.collect(pid)
    }

    /// Waits for the agent to exit.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(started.elapsed() < PATIENCE, "the agent did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `pid` is gone (or a zombie nobody has reaped yet is not counted as gone).
pub fn process_gone(pid: i64) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Polls until `pid` is gone; false if it is still there after the patience runs out.
pub fn wait_gone(pid: i64) -> bool {
    let started = Instant::now();
    while started.elapsed() < PATIENCE {
        if process_gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}
