//! Machines: one persistent box per `Sandbox.machine()`, its PID 1 our agent (agent/), which
//! starts processes, terminals, file operations, watches and port relays in the box's own
//! namespaces and talks to us over one unix socket. Paths are the machine's paths, resolved by the
//! agent inside the box, never by string on the host.

mod freeze;
pub mod lifetime;
pub mod options;
mod ports;
pub mod procs;
mod reader;
mod snapshot;
pub mod wire;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::net::UnixListener;

use crate::egress::attach::OwnedProxy;
use crate::egress::Policy;
use crate::errors::{Error, Result};
use crate::lifecycle::cancel::{Cancel, StopReason};
use crate::lifecycle::outcome::Outcome;
use crate::lifecycle::spawn::{Pipes, Resident};
use crate::output::ChunkFn;
pub use freeze::Gate;
pub use procs::Subscribers;
use procs::{Proc, SharedTable};
use wire::{Conn, Frame, SharedConn};

/// Where the agent and its control socket appear inside the box.
pub use crate::lifecycle::egress::AGENT_IN_BOX;
pub const CTL_IN_BOX: &str = "/.kern-sandbox/ctl";
const SOCKET: &str = "sock";
/// How long a closing machine's agent gets to end its processes before the box is torn down.
const CLOSE_GRACE: Duration = Duration::from_millis(1500);
/// Send and receive buffer of the agent's socket, host side.
const SOCKET_BUFFER: usize = 4 << 20;
/// Writes to a process's stdin go in pieces of at most this size.
const WRITE_PIECE: usize = 1 << 20;

/// What starting a machine needs from its session.
pub struct Launch {
    pub kern: PathBuf,
    pub name: String,
    pub args: Vec<std::ffi::OsString>,
    pub enforce_limits: bool,
    pub env_id: usize,
    pub listener: UnixListener,
    /// The private host directory that holds the socket (bound into the box), removed on close.
    pub ctl_dir: PathBuf,
    pub workdir: String,
    pub startup: Duration,
    /// The image the box runs (what a snapshot of it is against).
    pub image: String,
    /// The host directory bound at the workspace: the session's, or the machine's own.
    pub host_workspace: PathBuf,
    /// A workspace of the machine's own (from a snapshot, a fork): removed on close.
    pub own_workspace: bool,
}

/// How one process is started.
pub struct SpawnSpec {
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub env: HashMap<String, String>,
    pub stdin: Stdin,
    pub pty: Option<(u16, u16)>,
    pub user: Option<String>,
    pub cap: usize,
}

pub enum Stdin {
    Closed,
    Data(Vec<u8>),
    Open,
}

pub struct Machine {
    pub name: String,
    /// kern's pid for the box: its processes are below it on the host.
    pub kern_pid: i32,
    /// The agent's host pid, to end a box whose agent does not answer (kern cannot stop a box
    /// started with -it by name).
    agent_pid: Option<i32>,
    pub workdir: String,
    conn: SharedConn,
    table: SharedTable,
    streams: ports::Streams,
    ports: tokio::sync::Mutex<HashMap<u16, u16>>,
    watches: reader::Watches,
    /// The box, and kern's stdin, held open for the box's life.
    boxed: tokio::sync::Mutex<Option<(Resident, tokio::net::unix::pipe::Sender)>>,
    ctl_dir: PathBuf,
    alive: Arc<AtomicBool>,
    closing: Arc<AtomicBool>,
    /// Fired on close: port listeners and relays stop.
    stop: Arc<Cancel>,
    cpu_sample: Mutex<Option<(Instant, u64)>>,
    /// The machine's own egress proxy (its network is a policy), closed with it.
    egress: Mutex<Option<Arc<OwnedProxy>>>,
    /// Paused: calls are refused, port relays and kills wait (see freeze.rs).
    gate: freeze::Gate,
    /// The frozen box while paused.
    frozen: tokio::sync::Mutex<Option<freeze::Frozen>>,
    lifetime: Arc<lifetime::Lifetime>,
    pub image: String,
    pub host_workspace: PathBuf,
    own_workspace: bool,
}

impl Machine {
    /// Starts the box with the agent as PID 1 and waits for the agent's hello.
    pub async fn start(l: Launch, cancel: &Cancel) -> Result<Arc<Machine>> {
        let (mut boxed, pipes) = crate::lifecycle::spawn::start_resident(
            &l.kern,
            &l.name,
            &l.args,
            l.enforce_limits,
            l.env_id,
        )
        .await?;
        let Pipes {
            stdin,
            stdout,
            stderr,
        } = pipes;
        let stderr = reader::keep_kern_stderr(stderr);
        reader::drain(stdout);
        let accepted = tokio::select! {
            a = tokio::time::timeout(l.startup, l.listener.accept()) => a,
            code = boxed.exited_within(l.startup) => {
                let why = stderr.text().await;
                return Err(Error::sandbox(format!(
                    "the machine's box ended before it was up (kern exit {}): {why}",
                    code.map(|c| c.to_string()).unwrap_or_else(|| "unknown".into())
                )));
            }
            _ = cancel.fired() => {
                boxed.tear_down().await;
                return Err(Error::Closed("the sandbox was closed while the machine was starting".into()));
            }
        };
        let stream = match accepted {
            Ok(Ok((s, _))) => s,
            _ => {
                boxed.tear_down().await;
                let why = stderr.text().await;
                return Err(Error::sandbox(format!(
                    "the machine did not start within {}s: {why}",
                    l.startup.as_secs()
                )));
            }
        };
        // Large socket buffers: a 1 MiB file or a burst of output crosses in one or two
        // reads instead of a dozen wake-ups on each side.
        let sock = rustix::fd::AsFd::as_fd(&stream);
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(sock, SOCKET_BUFFER);
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(sock, SOCKET_BUFFER);
        let (mut rd, wr) = stream.into_split();
        match tokio::time::timeout(l.startup, wire::read_frame(&mut rd)).await {
            Ok(Ok(Some(f))) if f.str("t") == "hello" => {}
            _ => {
                boxed.tear_down().await;
                return Err(Error::sandbox("the machine's agent did not say hello"));
            }
        }
        let conn: SharedConn = Arc::new(Conn::new(wr));
        let kern_pid = boxed.pgid;
        let agent_pid = crate::lifecycle::procfs::find_descendant(kern_pid, |c| {
            c.split(|b| *b == 0).next() == Some(AGENT_IN_BOX.as_bytes())
        });
        let m = Arc::new(Machine {
            name: l.name,
            kern_pid,
            agent_pid,
            workdir: l.workdir,
            conn: conn.clone(),
            table: Default::default(),
            streams: Default::default(),
            ports: Default::default(),
            watches: Default::default(),
            boxed: tokio::sync::Mutex::new(Some((boxed, stdin))),
            ctl_dir: l.ctl_dir,
            alive: Arc::new(AtomicBool::new(true)),
            closing: Default::default(),
            stop: Default::default(),
            cpu_sample: Mutex::new(None),
            egress: Mutex::new(None),
            gate: Default::default(),
            frozen: Default::default(),
            lifetime: Default::default(),
            image: l.image,
            host_workspace: l.host_workspace,
            own_workspace: l.own_workspace,
        });
        reader::spawn(reader::Routes {
            rd,
            conn,
            table: m.table.clone(),
            streams: m.streams.clone(),
            watches: m.watches.clone(),
            alive: m.alive.clone(),
            closing: m.closing.clone(),
            stderr,
        });
        Ok(m)
    }

    /// close() has begun (or ended): the session need not keep it.
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire) && !self.conn.is_gone()
    }

    fn check_alive(&self) -> Result<()> {
        if self.alive() {
            Ok(())
        } else {
            Err(self.conn.gone_error())
        }
    }

    async fn request(&self, t: &str, head: Value, data: &[u8]) -> Result<Frame> {
        self.check_alive()?;
        self.gate.check()?;
        self.conn.request(t, head, data).await
    }

    /// Starts a process; returns it once it runs, subscribed with the given callbacks.
    pub async fn spawn(&self, spec: SpawnSpec, subs: Subscribers) -> Result<(Arc<Proc>, u32)> {
        let (mode, data) = match spec.stdin {
            Stdin::Closed => ("none", Vec::new()),
            Stdin::Data(d) => ("data", d),
            Stdin::Open => ("open", Vec::new()),
        };
        if data.len() > wire::MAX_PAYLOAD {
            return Err(Error::TooLarge("stdin data is over 64 MiB".into()));
        }
        let cwd = spec.cwd.unwrap_or_else(|| self.workdir.clone());
        let head = json!({
            "argv": spec.argv,
            "cwd": cwd,
            "env": spec.env,
            "stdin": mode,
            "pty": spec.pty.map(|(cols, rows)| json!({"cols": cols, "rows": rows})),
            "user": spec.user,
        });
        let started = self.request("spawn", head, &data).await?;
        let pid = started
            .u32("pid")
            .ok_or_else(|| Error::sandbox("the agent answered a spawn without a pid"))?;
        let mut p = Proc::new(pid, spec.argv, cwd, spec.pty.is_some(), spec.cap);
        p.internal = subs.raw.is_some();
        let p = Arc::new(p);
        let sub = p.subscribe(subs);
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(p.clone());
        Ok((p, sub))
    }

    /// Runs a process to its end, its deadline, or `cancel`: then its process group is killed.
    pub async fn exec(
        &self,
        spec: SpawnSpec,
        subs: (Option<ChunkFn>, Option<ChunkFn>),
        timeout_s: f64,
        cancel: &Cancel,
    ) -> Result<Outcome> {
        let subs = Subscribers {
            stdout: subs.0,
            stderr: subs.1,
            ..Default::default()
        };
        let (p, _) = self.spawn(spec, subs).await?;
        let stopped = tokio::select! {
            _ = p.exited() => None,
            _ = tokio::time::sleep(procs::secs(timeout_s)) => {
                p.mark_timed_out(timeout_s);
                None
            }
            _ = cancel.fired() => cancel.reason(),
        };
        if p.exit().is_none() {
            self.kill_thawed(p.pid).await;
        }
        let exit = p.exited().await;
        self.forget(p.pid);
        match stopped {
            Some(StopReason::Aborted) => Err(Error::Aborted),
            Some(StopReason::Closed) => Err(Error::Closed(
                "the sandbox was closed while the command ran".into(),
            )),
            None if exit.died.is_none() && !self.alive() => Err(self.conn.gone_error()),
            None => p.result(&exit),
        }
    }

    /// An exec's process is not kept once its result is out.
    fn forget(&self, pid: u32) {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .forget(pid);
    }

    pub fn process(&self, pid: u32) -> Result<Arc<Proc>> {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(pid)
            .ok_or_else(|| {
                Error::ProcessNotFound(format!("no process {pid} was started in this machine"))
            })
    }

    /// What processes() lists: running processes started through the API (not kernel drivers).
    pub fn running(&self) -> Vec<Arc<Proc>> {
        let mut v = self
            .table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .running();
        v.retain(|p| !p.internal);
        v
    }

    /// Gives a process a deadline: past it, its process group is killed and it reads as timed out.
    pub fn deadline(self: &Arc<Self>, p: Arc<Proc>, timeout_s: f64) {
        let me = self.clone();
        crate::task::spawn(async move {
            tokio::select! {
                _ = p.exited() => {}
                _ = tokio::time::sleep(procs::secs(timeout_s)) => {
                    p.mark_timed_out(timeout_s);
                    me.kill_thawed(p.pid).await;
                }
            }
        });
    }

    /// Signals a process group; false when the process had already exited.
    pub async fn signal(&self, pid: u32, signal: i32) -> Result<bool> {
        let p = self.process(pid)?;
        if p.exit().is_some() {
            return Ok(false);
        }
        let r = self
            .request("signal", json!({"pid": pid, "signal": signal}), &[])
            .await?;
        Ok(r.head
            .get("delivered")
            .and_then(Value::as_bool)
            .unwrap_or(false))
    }

    pub async fn write(&self, pid: u32, data: &[u8]) -> Result<()> {
        let p = self.process(pid)?;
        if p.exit().is_some() {
            return Err(Error::ProcessExited(format!("process {pid} has exited")));
        }
        for piece in data.chunks(WRITE_PIECE) {
            self.request("write", json!({ "pid": pid }), piece).await?;
        }
        Ok(())
    }

    /// Closes a process's stdin; also fine once it has exited (the agent says so too, for an exit
    /// that crosses the request): its input is over either way.
    pub async fn close_stdin(&self, pid: u32) -> Result<()> {
        if self.process(pid)?.exit().is_some() {
            return Ok(());
        }
        self.request("close_stdin", json!({ "pid": pid }), &[])
            .await?;
        Ok(())
    }

    pub async fn resize(&self, pid: u32, cols: u16, rows: u16) -> Result<()> {
        let p = self.process(pid)?;
        if !p.pty {
            return Err(Error::InvalidOption(format!(
                "process {pid} does not run on a terminal"
            )));
        }
        if p.exit().is_some() {
            return Err(Error::ProcessExited(format!("process {pid} has exited")));
        }
        self.request(
            "resize",
            json!({"pid": pid, "cols": cols, "rows": rows}),
            &[],
        )
        .await?;
        Ok(())
    }

    /// A file operation: the request and its answer, as they are.
    pub async fn file_op(&self, t: &str, head: Value, data: &[u8]) -> Result<Frame> {
        self.request(t, head, data).await
    }

    /// A path as the machine sees it: relative ones are taken from the working directory.
    pub fn path(&self, p: &str) -> Result<String> {
        if p.is_empty() || p.contains('\0') {
            return Err(Error::InvalidOption(
                "a machine path must be a non-empty string with no NUL byte".into(),
            ));
        }
        Ok(if p.starts_with('/') {
            p.to_string()
        } else {
            format!("{}/{p}", self.workdir.trim_end_matches('/'))
        })
    }

    pub async fn watch(
        &self,
        path: String,
        recursive: bool,
        on_event: reader::EventFn,
    ) -> Result<u32> {
        let r = self
            .request("watch", json!({"path": path, "recursive": recursive}), &[])
            .await?;
        let w = r
            .u32("watch")
            .ok_or_else(|| Error::sandbox("the agent answered a watch without an id"))?;
        // Events that followed the answer before this point are held by the reader and replayed.
        reader::add_watch(&self.watches, w, on_event);
        Ok(w)
    }

    pub async fn unwatch(&self, w: u32) -> Result<()> {
        let r = self.request("unwatch", json!({ "watch": w }), &[]).await;
        reader::remove_watch(&self.watches, w);
        r.map(|_| ())
    }

    /// A host port on 127.0.0.1 relaying to `port` in the machine; the same one for a port asked twice.
    pub async fn expose_port(&self, port: u16) -> Result<u16> {
        self.check_alive()?;
        self.gate.check()?;
        let mut ports = self.ports.lock().await;
        if let Some(p) = ports.get(&port) {
            return Ok(*p);
        }
        let host = ports::expose(
            self.conn.clone(),
            self.streams.clone(),
            port,
            self.stop.clone(),
            self.gate.clone(),
        )
        .await?;
        ports.insert(port, host);
        Ok(host)
    }

    /// CPU use since the last call (or over a short window for the first), memory, pids.
    pub async fn metrics(&self) -> Result<Value> {
        let first = self
            .cpu_sample
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none();
        if first {
            self.sample_cpu().await?;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (m, pct) = self.sample_cpu().await?;
        let mut out = m.head;
        out["cpuPercent"] = json!(pct);
        Ok(out)
    }

    async fn sample_cpu(&self) -> Result<(Frame, f64)> {
        let m = self.request("metrics", json!({}), &[]).await?;
        let usec = m
            .head
            .get("cpuUsageUsec")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let now = Instant::now();
        let prev = self
            .cpu_sample
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace((now, usec));
        let pct = match prev {
            Some((t, u)) if now > t => {
                let wall = now.duration_since(t).as_micros() as f64;
                (usec.saturating_sub(u) as f64 / wall * 100.0).max(0.0)
            }
            _ => 0.0,
        };
        Ok((m, pct))
    }

    /// Ends every process and the box; returns once nothing of it is left. Idempotent.
    pub async fn close(&self) {
        let Some((mut boxed, stdin)) = self.boxed.lock().await.take() else {
            return;
        };
        self.closing.store(true, Ordering::Release);
        self.thaw_for_close().await;
        self.stop.fire(StopReason::Closed);
        if self.alive() {
            let bye = self.conn.request("shutdown", json!({}), &[]);
            let _ = tokio::time::timeout(CLOSE_GRACE, bye).await;
        }
        drop(stdin);
        if boxed.exited_within(CLOSE_GRACE).await.is_none() {
            // The agent is PID 1: when it goes, the kernel ends everything in the box.
            // Checked again first: a pid may have been reused since.
            let still = |pid: &i32| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.starts_with(AGENT_IN_BOX.as_bytes()))
            };
            if let Some(pid) = self.agent_pid.filter(still) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            boxed.tear_down().await;
        }
        self.alive.store(false, Ordering::Release);
        self.conn.fail_all("");
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .machine_gone(None);
        let _ = std::fs::remove_dir_all(&self.ctl_dir);
        if self.own_workspace {
            let _ = std::fs::remove_dir_all(&self.host_workspace);
        }
        let egress = self.egress.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(p) = egress {
            p.close().await;
        }
    }

    /// Hands the machine the proxy its box reaches, to close with it.
    pub fn keep_egress(&self, proxy: OwnedProxy) {
        *self.egress.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(proxy));
    }

    /// The policy of the machine's own proxy now (None: its network is the session's, or fixed).
    pub fn own_policy(&self) -> Option<Policy> {
        self.egress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|p| p.policy())
    }

    /// Replaces the policy of the machine's own proxy: requests that start from now on see it,
    /// and nothing in the box restarts.
    pub fn update_network(&self, policy: Policy) -> Result<()> {
        if self.closing.load(Ordering::Acquire) || !self.alive() {
            return Err(Error::MachineGone("the machine is closed".into()));
        }
        self.gate.check()?;
        match &*self.egress.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(p) => p.update(policy),
            None => Err(Error::NetworkFixed(
                "this machine's network is fixed (it was opened with network: false or true, so \
                 no egress proxy serves it); open it with a policy object to update it later, e.g. \
                 { denyOut: ['0.0.0.0/0'] } for \"off for now\""
                    .into(),
            )),
        }
    }
}

/// The socket path inside a private control directory.
pub fn socket_path(ctl_dir: &Path) -> PathBuf {
    ctl_dir.join(SOCKET)
}
