//! The host connection: one writer thread behind a frame queue, the request reader, and dispatch.

use std::collections::VecDeque;
use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Condvar, Mutex};

use serde_json::{json, Map, Value};

use crate::error::{self, Fail};
use crate::proto::{self, Incoming, Request};
use crate::{files, metrics, ports, process, spawn_thread, watch};

/// Above this many queued bytes, output pumps, watch events and port readers wait (the host is
/// slow); answers to requests are queued regardless, so the request reader never waits.
const HIGH_WATER: usize = 4 << 20;

/// The successful result of a request: extra header fields and a payload.
#[derive(Default)]
pub struct Reply {
    pub fields: Map<String, Value>,
    pub payload: Vec<u8>,
}

impl Reply {
    /// A reply with the fields of `value` (a JSON object).
    pub fn with(value: Value) -> Reply {
        match value {
            Value::Object(fields) => Reply {
                fields,
                payload: Vec::new(),
            },
            _ => Reply::default(),
        }
    }
}

struct Queue {
    frames: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// Bytes queued or being written.
    bytes: usize,
    /// The socket failed: nothing more is written, nobody waits.
    dead: bool,
}

/// Every frame to the host goes through here, so frames are never interleaved.
pub struct Writer {
    queue: Mutex<Queue>,
    cv: Condvar,
}

impl Writer {
    /// Starts the writer thread on `stream`.
    pub fn start(stream: UnixStream) -> Arc<Writer> {
        let writer = Arc::new(Writer {
            queue: Mutex::new(Queue {
                frames: VecDeque::new(),
                bytes: 0,
                dead: false,
            }),
            cv: Condvar::new(),
        });
        let w = writer.clone();
        spawn_thread("writer", move || w.run(stream));
        writer
    }

    fn run(&self, mut stream: UnixStream) {
        loop {
            let (head, payload) = {
                let mut q = self.queue.lock().unwrap();
                while q.frames.is_empty() && !q.dead {
                    q = self.cv.wait(q).unwrap();
                }
                if q.dead {
                    return;
                }
                q.frames.pop_front().expect("checked non-empty")
            };
            let sent = stream
                .write_all(&head)
                .and_then(|()| stream.write_all(&payload));
            let mut q = self.queue.lock().unwrap();
            q.bytes -= head.len() + payload.len();
            if sent.is_err() {
                q.dead = true;
                q.frames.clear();
            }
            self.cv.notify_all();
        }
    }

    /// Queues a frame without waiting.
    pub fn push(&self, header: Value, payload: Vec<u8>) {
        self.push_encoded(proto::encode_head(&header, payload.len()), payload);
    }

    fn push_encoded(&self, head: Vec<u8>, payload: Vec<u8>) {
        let mut q = self.queue.lock().unwrap();
        if q.dead {
            return;
        }
        q.bytes += head.len() + payload.len();
        q.frames.push_back((head, payload));
        self.cv.notify_all();
    }

    /// Waits until the queue is below the high-water mark (or the connection is dead).
    pub fn wait_room(&self) {
        let mut q = self.queue.lock().unwrap();
        while q.bytes > HIGH_WATER && !q.dead {
            q = self.cv.wait(q).unwrap();
        }
    }

    /// Waits until everything queued was written (or the connection is dead).
    pub fn flush(&self) {
        let mut q = self.queue.lock().unwrap();
        while q.bytes > 0 && !q.dead {
            q = self.cv.wait(q).unwrap();
        }
    }

    /// Answers request `id` with `ok` or `error`.
    pub fn answer(&self, id: u32, result: Result<Reply, Fail>) {
        match result {
            Ok(reply) => {
                let mut header = reply.fields;
                header.insert("t".into(), "ok".into());
                header.insert("id".into(), id.into());
                let head = proto::encode_head(&Value::Object(header), reply.payload.len());
                if head.len() - 8 > proto::MAX_HEADER_OUT {
                    let size = head.len() - 8;
                    let fail = Fail::new(
                        error::TOO_LARGE,
                        format!("the answer is too large ({size} bytes of JSON): ask for less"),
                    );
                    return self.answer(id, Err(fail));
                }
                self.push_encoded(head, reply.payload);
            }
            Err(fail) => self.push(
                json!({"t": "error", "id": id, "code": fail.code, "message": fail.message}),
                Vec::new(),
            ),
        }
    }

    pub fn ok(&self, id: u32, fields: Value) {
        self.answer(id, Ok(Reply::with(fields)));
    }
}

/// One file request for the file worker.
type FileJob = (u32, Request, Vec<u8>);

/// Everything the request handlers share.
pub struct Agent {
    pub writer: Arc<Writer>,
    pub procs: Arc<process::Table>,
    pub cwd: PathBuf,
    watches: watch::Watches,
    ports: ports::Ports,
    files: mpsc::Sender<FileJob>,
}

/// Serves the host on `stream` until it closes the connection, then kills every process group
/// this agent started. Returns the process exit code.
pub fn serve(stream: UnixStream) -> i32 {
    let write_half = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kern-sandbox-agent: {e}");
            return 1;
        }
    };
    let writer = Writer::start(write_half);
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let procs = Arc::new(process::Table::default());
    process::start_reaper(procs.clone());
    writer.push(
        json!({"t": "hello", "version": proto::VERSION, "pid": std::process::id(), "cwd": cwd}),
        Vec::new(),
    );
    let agent = Arc::new(Agent {
        files: start_file_worker(writer.clone(), cwd.clone()),
        watches: watch::Watches::new(writer.clone()),
        ports: ports::Ports::new(writer.clone()),
        writer,
        procs,
        cwd,
    });
    let mut reader = BufReader::with_capacity(256 << 10, stream);
    loop {
        match proto::read_frame(&mut reader) {
            Ok(Incoming::Frame(header, payload)) => agent.handle(header, payload),
            Ok(Incoming::TooLarge(header)) => {
                if let Some(id) = request_id(&header) {
                    let limit = proto::MAX_PAYLOAD;
                    agent.writer.answer(
                        id,
                        Err(Fail::new(
                            error::TOO_LARGE,
                            format!("payload over {limit} bytes"),
                        )),
                    );
                }
            }
            Ok(Incoming::Eof) | Err(_) => break,
        }
    }
    agent.procs.kill_all();
    0
}

fn request_id(header: &Map<String, Value>) -> Option<u32> {
    header
        .get("id")
        .and_then(Value::as_u64)
        .and_then(|v| u32::try_from(v).ok())
}

fn start_file_worker(writer: Arc<Writer>, cwd: PathBuf) -> mpsc::Sender<FileJob> {
    let (tx, rx) = mpsc::channel::<FileJob>();
    // One worker, so file requests keep their order; never the reader, so a large read does not
    // hold up process input or port traffic.
    spawn_thread("files", move || {
        for (id, req, payload) in rx {
            writer.answer(id, files::handle(&cwd, req, payload));
        }
    });
    tx
}

impl Agent {
    fn handle(&self, header: Map<String, Value>, payload: Vec<u8>) {
        let id = request_id(&header);
        let req = match serde_json::from_value::<Request>(Value::Object(header)) {
            Ok(req) => req,
            Err(e) => {
                if let Some(id) = id {
                    self.writer
                        .answer(id, Err(Fail::invalid(format!("bad request: {e}"))));
                }
                return;
            }
        };
        match (req, id) {
            (Request::Data { stream }, _) => self.ports.data(stream, payload),
            (Request::Eof { stream }, _) => self.ports.eof(stream),
            (Request::Close { stream }, _) => self.ports.close(stream),
            (req, Some(id)) => {
                if let Err(fail) = self.request(id, req, payload) {
                    self.writer.answer(id, Err(fail));
                }
            }
            (_, None) => eprintln!("kern-sandbox-agent: a request without an id was ignored"),
        }
    }

    /// Handles request `id`. Handlers that answer later (or must order their answer before other
    /// frames) answer themselves; the rest return their reply here.
    fn request(&self, id: u32, req: Request, payload: Vec<u8>) -> Result<(), Fail> {
        let reply = match req {
            Request::Spawn(spawn) => return process::spawn(self, id, spawn, payload),
            Request::Write { pid } => return self.procs.write(id, pid, payload),
            Request::CloseStdin { pid } => return self.procs.close_stdin(&self.writer, id, pid),
            Request::Signal { pid, signal } => self.procs.signal(pid, signal)?,
            Request::Resize { pid, cols, rows } => self.procs.resize(pid, cols, rows)?,
            Request::Ps => self.procs.ps(),
            Request::Watch { path, recursive } => {
                return self.watches.add(id, &self.abs(&path)?, recursive)
            }
            Request::Unwatch { watch } => return self.watches.remove(id, watch),
            Request::Connect { port } => return self.ports.connect(id, port),
            Request::Metrics => metrics::sample(),
            Request::Shutdown => self.shutdown(id),
            file_request => {
                // The worker only goes away with the process.
                let _ = self.files.send((id, file_request, payload));
                return Ok(());
            }
        };
        self.writer.answer(id, Ok(reply));
        Ok(())
    }

    /// Resolves a request path against the agent's working directory.
    pub fn abs(&self, path: &str) -> Result<PathBuf, Fail> {
        files::absolute(&self.cwd, path)
    }

    fn shutdown(&self, id: u32) -> ! {
        self.procs.kill_all();
        self.writer.ok(id, json!({}));
        self.writer.flush();
        std::process::exit(0)
    }
}
