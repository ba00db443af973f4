//! The host connection: the request reader and dispatch to the handlers (frames go out through
//! [`crate::writer`]).

use std::io::BufReader;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{mpsc, Arc};

use serde_json::{json, Map, Value};

use crate::error::{self, Fail};
use crate::proto::{self, Incoming, Request};
use crate::thread::spawn_thread;
use crate::writer::Writer;
use crate::{files, metrics, ports, process, watch};

/// One file request for the file worker.
type FileJob = (u32, Request, Vec<u8>);

/// Everything the request handlers share.
struct Agent {
    writer: Arc<Writer>,
    procs: Arc<process::Table>,
    cwd: PathBuf,
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
            Request::Spawn(spawn) => {
                return process::spawn(&self.procs, &self.writer, &self.cwd, id, spawn, payload)
            }
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
    fn abs(&self, path: &str) -> Result<PathBuf, Fail> {
        files::absolute(&self.cwd, path)
    }

    fn shutdown(&self, id: u32) -> ! {
        self.procs.kill_all();
        self.writer.ok(id, json!({}));
        self.writer.flush();
        std::process::exit(0)
    }
}
