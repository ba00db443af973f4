//! A warm kernel inside a machine: the driver is a process the agent starts (so cells see the
//! machine's processes, loopback and files); its stdin and output are relayed to host pipes, and
//! the kernel is then served exactly like one in a box of its own.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;

use super::host::{Host, InMachine};
use super::language::Driver;
use super::Kernel;
use crate::errors::{Error, Result};
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::spawn::Pipes;
use crate::machine::procs::Raw;
use crate::machine::{Machine, SpawnSpec, Stdin, Subscribers};

/// What the kernel needs besides the machine: its driver, how long it may take to start.
pub struct KernelStart {
    pub command: Vec<String>,
    pub marker: String,
    pub language: Driver,
    pub cap: usize,
    pub startup: std::time::Duration,
}

fn host_pipe() -> Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| Error::io("could not create a pipe for the kernel", e.into()))
}

pub async fn start(m: &Arc<Machine>, k: KernelStart, stop: &Cancel) -> Result<Arc<Kernel>> {
    let pipe_err = |e| Error::io("could not set up the kernel's pipes", e);
    let (in_r, in_w) = host_pipe()?;
    let (out_r, out_w) = host_pipe()?;
    let (err_r, err_w) = host_pipe()?;
    let (tx, rx) = mpsc::unbounded_channel();
    let spec = SpawnSpec {
        argv: k.command,
        cwd: None,
        env: HashMap::new(),
        stdin: Stdin::Open,
        pty: None,
        user: None,
        // The driver's frames are relayed, not captured.
        cap: 0,
    };
    let subs = Subscribers {
        raw: Some(tx),
        ..Default::default()
    };
    let (proc, _) = m.spawn(spec, subs).await?;
    relay_output(
        rx,
        pipe::Sender::from_owned_fd(out_w).map_err(pipe_err)?,
        pipe::Sender::from_owned_fd(err_w).map_err(pipe_err)?,
    );
    relay_input(
        m.clone(),
        proc.pid,
        pipe::Receiver::from_owned_fd(in_r).map_err(pipe_err)?,
    );
    let host = Host::Machine(InMachine {
        machine: m.clone(),
        proc,
        root_pid: m.kern_pid,
    });
    let pipes = Pipes {
        stdin: pipe::Sender::from_owned_fd(in_w).map_err(pipe_err)?,
        stdout: pipe::Receiver::from_owned_fd(out_r).map_err(pipe_err)?,
        stderr: pipe::Receiver::from_owned_fd(err_r).map_err(pipe_err)?,
    };
    Kernel::start(host, pipes, k.cap, k.marker, k.language, k.startup, stop).await
}

/// The driver's stdout and stderr into the kernel's pipes; they close when the process ends.
fn relay_output(
    mut rx: mpsc::UnboundedReceiver<Raw>,
    mut out: pipe::Sender,
    mut err: pipe::Sender,
) {
    crate::task::spawn(async move {
        while let Some((fd, bytes)) = rx.recv().await {
            let w = if fd == 2 { &mut err } else { &mut out };
            if w.write_all(&bytes).await.is_err() && fd != 2 {
                return;
            }
        }
    });
}

/// What the kernel writes to the driver's stdin, to the agent; its EOF closes the driver's stdin.
fn relay_input(m: Arc<Machine>, pid: u32, mut rd: pipe::Receiver) {
    crate::task::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => {
                    let _ = m.close_stdin(pid).await;
                    return;
                }
                // A cell written while the machine pauses reaches the driver once it resumes.
                Ok(n) => loop {
                    m.thawed().await;
                    match m.write(pid, &buf[..n]).await {
                        Ok(()) => break,
                        Err(Error::MachinePaused(_)) => continue,
                        Err(_) => return,
                    }
                },
            }
        }
    });
}
