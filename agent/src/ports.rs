//! Port streams: TCP connections to the box's loopback, relayed over the host connection.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use serde_json::json;

use crate::error::Fail;
use crate::thread::spawn_thread;
use crate::writer::Writer;

/// Host data queued for one stream whose box side does not read. The protocol has no window, so
/// past this the stream is dropped (`closed`) rather than letting the agent's memory grow.
const MAX_QUEUED: usize = 16 << 20;

enum Op {
    Data(Vec<u8>),
    Eof,
}

#[derive(Default)]
struct Halves {
    read_done: bool,
    write_done: bool,
    /// Nothing more is sent for this stream.
    gone: bool,
}

struct Stream {
    id: u32,
    sock: TcpStream,
    tx: Mutex<Option<mpsc::Sender<Op>>>,
    queued: AtomicUsize,
    halves: Mutex<Halves>,
}

type Map = Arc<Mutex<HashMap<u32, Arc<Stream>>>>;

pub struct Ports {
    writer: Arc<Writer>,
    streams: Map,
    next: AtomicU32,
}

impl Ports {
    pub fn new(writer: Arc<Writer>) -> Ports {
        Ports {
            writer,
            streams: Map::default(),
            next: AtomicU32::new(1),
        }
    }

    /// Connects to 127.0.0.1:`port`; answers `ok {stream}` before any of the stream's frames.
    pub fn connect(&self, id: u32, port: u16) -> Result<(), Fail> {
        if port == 0 {
            return Err(Fail::invalid("port must be 1-65535"));
        }
        let sid = self.next.fetch_add(1, Ordering::Relaxed);
        let (writer, streams) = (self.writer.clone(), self.streams.clone());
        // A loopback connect is instant, except to a listener whose backlog is full: then it
        // waits out SYN retries, so never on the request reader.
        spawn_thread("connect", move || {
            if let Err(fail) = open(id, sid, port, &writer, &streams) {
                writer.answer(id, Err(fail));
            }
        });
        Ok(())
    }

    fn get(&self, sid: u32) -> Option<Arc<Stream>> {
        self.streams.lock().unwrap().get(&sid).cloned()
    }

    /// Host bytes for the box side (unknown streams are ignored: they may have just closed).
    pub fn data(&self, sid: u32, data: Vec<u8>) {
        let Some(stream) = self.get(sid) else { return };
        if stream.queued.fetch_add(data.len(), Ordering::Relaxed) + data.len() > MAX_QUEUED {
            stream.end(&self.writer, &self.streams, true);
            return;
        }
        stream.send(Op::Data(data));
    }

    pub fn eof(&self, sid: u32) {
        if let Some(stream) = self.get(sid) {
            stream.send(Op::Eof);
        }
    }

    /// The host dropped the stream: nothing more is sent for it.
    pub fn close(&self, sid: u32) {
        if let Some(stream) = self.get(sid) {
            stream.end(&self.writer, &self.streams, false);
        }
    }
}

/// Connects stream `sid` and answers request `id` before any of the stream's frames.
fn open(id: u32, sid: u32, port: u16, writer: &Arc<Writer>, streams: &Map) -> Result<(), Fail> {
    let sock = TcpStream::connect(("127.0.0.1", port))
        .map_err(|e| Fail::io(&e, &format!("127.0.0.1:{port}")))?;
    let _ = sock.set_nodelay(true);
    let read_half = sock.try_clone().map_err(|e| Fail::io(&e, "dup socket"))?;
    let (tx, rx) = mpsc::channel();
    let stream = Arc::new(Stream {
        id: sid,
        sock,
        tx: Mutex::new(Some(tx)),
        queued: AtomicUsize::new(0),
        halves: Mutex::default(),
    });
    streams.lock().unwrap().insert(sid, stream.clone());
    writer.ok(id, json!({ "stream": sid }));
    let (s, w, m) = (stream.clone(), writer.clone(), streams.clone());
    spawn_thread("port-in", move || relay_in(read_half, &s, &w, &m));
    let (w, m) = (writer.clone(), streams.clone());
    spawn_thread("port-out", move || relay_out(rx, &stream, &w, &m));
    Ok(())
}

impl Stream {
    fn send(&self, op: Op) {
        if let Some(tx) = self.tx.lock().unwrap().as_ref() {
            let _ = tx.send(op);
        }
    }

    /// Ends the stream once: optionally tells the host, forgets it, shuts the socket.
    fn end(&self, writer: &Writer, streams: &Map, tell: bool) {
        {
            let mut halves = self.halves.lock().unwrap();
            if halves.gone {
                return;
            }
            halves.gone = true;
            if tell {
                writer.push(json!({"t": "closed", "stream": self.id}), Vec::new());
            }
        }
        streams.lock().unwrap().remove(&self.id);
        self.tx.lock().unwrap().take();
        let _ = self.sock.shutdown(Shutdown::Both);
    }

    /// Marks one half done; the stream is closed when both are.
    fn half_done(&self, writer: &Writer, streams: &Map, read: bool) {
        let both = {
            let mut halves = self.halves.lock().unwrap();
            if halves.gone {
                return;
            }
            if read {
                halves.read_done = true;
                writer.push(json!({"t": "eof", "stream": self.id}), Vec::new());
            } else {
                halves.write_done = true;
            }
            halves.read_done && halves.write_done
        };
        if both {
            self.end(writer, streams, true);
        }
    }
}

/// Box side → host.
fn relay_in(mut sock: TcpStream, stream: &Stream, writer: &Writer, streams: &Map) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match sock.read(&mut buf) {
            Ok(0) => return stream.half_done(writer, streams, true),
            Ok(n) => {
                writer.wait_room();
                let halves = stream.halves.lock().unwrap();
                if halves.gone {
                    return;
                }
                writer.push(json!({"t": "data", "stream": stream.id}), buf[..n].to_vec());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return stream.end(writer, streams, true),
        }
    }
}

/// Host → box side, in order; only this thread ever waits on the socket.
fn relay_out(rx: mpsc::Receiver<Op>, stream: &Stream, writer: &Writer, streams: &Map) {
    let mut sock = &stream.sock;
    for op in rx {
        match op {
            Op::Data(data) => {
                if sock.write_all(&data).is_err() {
                    return stream.end(writer, streams, true);
                }
                stream.queued.fetch_sub(data.len(), Ordering::Relaxed);
            }
            Op::Eof => {
                let _ = sock.shutdown(Shutdown::Write);
                return stream.half_done(writer, streams, false);
            }
        }
    }
}
