//! Where a kernel's driver runs: a box of its own (kern's process is the box), or a process in a
//! machine (the agent started it; its pipes are relayed to host pipes, so the serving code reads
//! and writes plain pipes either way).

use std::sync::Arc;
use std::time::Duration;

use crate::lifecycle::fault::Started;
use crate::lifecycle::spawn::Resident;
use crate::machine::procs::Proc;
use crate::machine::Machine;

/// A driver process in a machine, and the machine's kern pid (the root of its processes on the
/// host, where the driver is found to be interrupted).
pub struct InMachine {
    pub machine: Arc<Machine>,
    pub proc: Arc<Proc>,
    pub root_pid: i32,
}

pub enum Host {
    Box(Resident),
    Machine(InMachine),
}

impl Host {
    /// Ends the driver's box or process group; what survived, if anything.
    pub async fn tear_down(&mut self) -> Option<String> {
        match self {
            Host::Box(b) => b.tear_down().await,
            Host::Machine(m) => {
                if m.proc.exit().is_none() && m.machine.paused() {
                    // Killed when the machine resumes (or closes): nothing is sent to a frozen
                    // agent, and the kernel's close does not wait for a resume.
                    let (machine, pid) = (m.machine.clone(), m.proc.pid);
                    crate::task::spawn(async move { machine.kill_thawed(pid).await });
                } else if m.proc.exit().is_none() {
                    let _ = m.machine.signal(m.proc.pid, libc::SIGKILL).await;
                    let _ = tokio::time::timeout(Duration::from_secs(2), m.proc.exited()).await;
                }
                None
            }
        }
    }

    /// The exit status once it exited by itself, waiting at most `budget`.
    pub async fn exited_within(&mut self, budget: Duration) -> Option<i32> {
        match self {
            Host::Box(b) => b.exited_within(budget).await,
            Host::Machine(m) => tokio::time::timeout(budget, m.proc.exited())
                .await
                .ok()
                .map(|e| e.code),
        }
    }

    /// kern's started channel for a box; a machine's process is started by then.
    pub async fn started(&mut self) -> Started {
        match self {
            Host::Box(b) => b.started().await,
            Host::Machine(_) => Started::Yes { mem_cap: 0 },
        }
    }

    /// Kills what may linger of a box whose kern has exited.
    pub fn kill_lingering(&self) {
        if let Host::Box(b) = self {
            crate::lifecycle::boxes::kill_group(b.pgid);
        }
    }

    /// The host pid below which the driver process is found.
    pub fn root_pid(&self) -> i32 {
        match self {
            Host::Box(b) => b.pgid,
            Host::Machine(m) => m.root_pid,
        }
    }
}
