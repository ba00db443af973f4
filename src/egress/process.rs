//! The proxy process (`kern-sandbox-egress`, crate egress/) as the binding drives it: started
//! with a socket path and a policy, updated, asked for its stream count, closed. The control
//! channel is its stdin and stdout (kern_sandbox_egress_policy::wire), owned by this runtime and
//! never by libuv, so the child never holds Node's event loop open. It ends when its stdin ends,
//! that is when [`EgressProcess::close`] runs, when this is dropped, or when Node exits however
//! it exits (the kernel closes the pipe; PR_SET_PDEATHSIG backs that up).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use kern_sandbox_egress_policy::wire::{Command, Reply};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{oneshot, watch};

use super::{EventSink, Policy};
use crate::errors::{Error, Result};

/// How long an update or a count waits for the process's answer (it answers at once unless it
/// is gone or wedged).
const ANSWER: Duration = Duration::from_secs(10);

/// Answers by command number, and whether the process is gone.
#[derive(Default)]
struct Answers {
    by_seq: HashMap<u64, Reply>,
    gone: bool,
}

type Shared = Arc<(Mutex<Answers>, Condvar)>;

/// A running proxy process on a host Unix socket.
pub struct EgressProcess {
    /// The write end of the child's stdin; None once closed.
    input: Mutex<Option<std::fs::File>>,
    answers: Shared,
    seq: AtomicU64,
    ca_pem: String,
    path: PathBuf,
    /// True once the process has exited and every line of it was read.
    exited: watch::Receiver<bool>,
    policy: Mutex<Policy>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl EgressProcess {
    /// Starts `bin` serving `policy` on `path` (which must not exist); resolves once it listens,
    /// with its CA certificate.
    pub async fn start(
        bin: &Path,
        path: &Path,
        policy: Policy,
        events: Option<EventSink>,
    ) -> Result<EgressProcess> {
        let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .map_err(|e| Error::io("cannot make a pipe for the egress proxy", e.into()))?;
        let mut cmd = tokio::process::Command::new(bin);
        cmd.arg("--socket")
            .arg(path)
            .arg("--parent")
            .arg(std::process::id().to_string())
            .stdin(Stdio::from(r))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own group: a terminal's ^C goes to Node, which closes it in order.
            .process_group(0)
            .kill_on_drop(false);
        // Spawned on a runtime worker, which lives as long as the runtime: PR_SET_PDEATHSIG
        // fires when the *thread* that forked exits, and a blocking-pool thread exits when idle.
        let spawned = crate::task::spawn(async move { cmd.spawn() })
            .await
            .map_err(|e| Error::sandbox(format!("could not start the egress proxy: {e}")))?;
        let mut child = spawned.map_err(|e| {
            Error::io(
                format!("could not start the egress proxy {}", bin.display()),
                e,
            )
        })?;
        let mut input = std::fs::File::from(w);
        let stdout = child.stdout.take().expect("stdout is piped");
        let answers: Shared = Arc::default();
        let (ready_tx, ready_rx) = oneshot::channel::<std::result::Result<String, String>>();
        let (exited_tx, exited) = watch::channel(false);
        let a = answers.clone();
        crate::task::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            let mut ready = Some(ready_tx);
            while let Ok(Some(l)) = lines.next_line().await {
                match Reply::decode(&l) {
                    Some(Reply::Ready(pem)) => {
                        if let Some(r) = ready.take() {
                            let _ = r.send(Ok(pem));
                        }
                    }
                    Some(Reply::Failed(why)) => {
                        if let Some(r) = ready.take() {
                            let _ = r.send(Err(why));
                        }
                    }
                    Some(Reply::Event(e)) => {
                        if let Some(f) = &events {
                            f(e);
                        }
                    }
                    Some(ack @ Reply::Ack { seq, .. }) => {
                        lock(&a.0).by_seq.insert(seq, ack);
                        a.1.notify_all();
                    }
                    None => {}
                }
            }
            let _ = child.wait().await;
            lock(&a.0).gone = true;
            a.1.notify_all();
            let _ = exited_tx.send(true);
        });
        // Written whole before the child reads a line: a policy is small next to a pipe's buffer,
        // and the child reads it at once.
        let _ = input.write_all(Command::Start(policy.source().clone()).encode().as_bytes());
        let ca_pem = match ready_rx.await {
            Ok(Ok(pem)) => pem,
            Ok(Err(why)) => return Err(Error::sandbox(why)),
            Err(_) => {
                return Err(Error::sandbox(format!(
                    "the egress proxy {} exited before it listened",
                    bin.display()
                )))
            }
        };
        Ok(EgressProcess {
            input: Mutex::new(Some(input)),
            answers,
            seq: AtomicU64::new(1),
            ca_pem,
            path: path.to_path_buf(),
            exited,
            policy: Mutex::new(policy),
        })
    }

    /// The proxy's CA certificate (PEM) the box must trust for terminated hosts. Its private
    /// key never leaves the proxy process.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    pub fn socket_path(&self) -> &Path {
        &self.path
    }

    /// Sends `cmd` and waits for its answer; None if the process is gone (or closed).
    fn ask(&self, cmd: impl FnOnce(u64) -> Command) -> Option<Reply> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        {
            let mut input = lock(&self.input);
            let f = input.as_mut()?;
            f.write_all(cmd(seq).encode().as_bytes()).ok()?;
        }
        let (m, cv) = &*self.answers;
        let mut a = lock(m);
        loop {
            if let Some(r) = a.by_seq.remove(&seq) {
                return Some(r);
            }
            if a.gone {
                return None;
            }
            let (next, timeout) = cv
                .wait_timeout(a, ANSWER)
                .unwrap_or_else(|p| p.into_inner());
            a = next;
            if timeout.timed_out() {
                return None;
            }
        }
    }

    /// Swaps the policy: requests that start after this returns see the new one (terminated
    /// and plain HTTP connections check each request; an open tunnel carries on).
    pub fn update(&self, policy: Policy) -> Result<()> {
        let json = policy.source().clone();
        match self.ask(|seq| Command::Update(seq, json)) {
            Some(Reply::Ack { error: None, .. }) => {
                *lock(&self.policy) = policy;
                Ok(())
            }
            // Checked here first with the same code: only a root the host's TLS client refuses
            // and this check did not can get here.
            Some(Reply::Ack { error: Some(e), .. }) => Err(Error::BadNetworkPolicy(e)),
            _ => Err(Error::sandbox("the egress proxy is closed")),
        }
    }

    /// The policy in force now.
    pub fn policy(&self) -> Policy {
        lock(&self.policy).clone()
    }

    /// Streams being served right now (0 once closed).
    pub fn active_connections(&self) -> usize {
        match self.ask(Command::Active) {
            Some(Reply::Ack {
                active: Some(n), ..
            }) => n as usize,
            _ => 0,
        }
    }

    /// Stops accepting, ends every connection, removes the socket file and waits for the
    /// process to exit (every event delivered).
    pub async fn close(&self) {
        drop(lock(&self.input).take());
        let mut exited = self.exited.clone();
        let _ = exited.wait_for(|done| *done).await;
    }
}

impl Drop for EgressProcess {
    fn drop(&mut self) {
        // Its stdin ends: the process stops by itself.
        drop(lock(&self.input).take());
    }
}
