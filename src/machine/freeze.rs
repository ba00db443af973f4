//! Pausing a machine: every process of its box is frozen in place (no CPU, memory kept, the same
//! pids when it thaws), and the host stops talking to the agent until it is resumed.
//!
//! Machines run as `kern box … -it` boxes, which kern does not register by name, so kern's own
//! pause cannot reach them: the box is frozen here. Where its processes sit in a cgroup v2 cgroup
//! of their own, that cgroup's `cgroup.freeze` does it in one write. Otherwise (kern on a host
//! that gives boxes no cgroup of their own) the process tree below the agent, the box's PID 1, is
//! stopped with SIGSTOP, parents before children, and continued with SIGCONT, children first.
//! Every signal goes through a pidfd opened on the very process that was seen, so a pid recycled
//! meanwhile is never signalled.

use std::collections::{HashMap, VecDeque};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};
use tokio::sync::watch;

use super::Machine;
use crate::errors::{Error, Result};
use crate::lifecycle::procfs::{parse_stat, stat as stat_of, Stat};

/// How long the box's processes get to reach the stopped (or frozen) state. A process in an
/// uninterruptible wait stops only once that wait ends.
const STOP_WITHIN: Duration = Duration::from_secs(5);
/// Between two looks at the box's processes while they stop.
const POLL: Duration = Duration::from_micros(300);

/// Whether the machine is paused, shared with what must wait for it to run again (port relays,
/// a kernel's input, a deadline's kill).
#[derive(Clone)]
pub struct Gate(Arc<watch::Sender<bool>>);

impl Default for Gate {
    fn default() -> Self {
        Gate(Arc::new(watch::channel(false).0))
    }
}

impl Gate {
    pub fn paused(&self) -> bool {
        *self.0.borrow()
    }

    /// `ERR_MACHINE_PAUSED` while paused: calls fail fast rather than wait on a frozen agent.
    pub fn check(&self) -> Result<()> {
        if self.paused() {
            Err(Error::MachinePaused(
                "the machine is paused: resume() it first".into(),
            ))
        } else {
            Ok(())
        }
    }

    /// Resolves once the machine runs (at once when it does).
    pub async fn thawed(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|paused| !*paused).await;
    }

    fn set(&self, paused: bool) {
        self.0.send_replace(paused);
    }
}

impl Machine {
    pub fn paused(&self) -> bool {
        self.gate.paused()
    }

    /// The machine's pause state, for a kernel in it to refuse cells while paused.
    pub fn gate(&self) -> Gate {
        self.gate.clone()
    }

    /// Resolves once the machine is not paused.
    pub async fn thawed(&self) {
        self.gate.thawed().await
    }

    /// Freezes every process of the box; the lifetime clock stops. Idempotent.
    pub async fn pause(&self) -> Result<()> {
        self.pause_as(false).await
    }

    /// `expired`: the pause is the lifetime's `onTimeout: 'pause'`, so resume() re-arms the whole
    /// lifetime instead of what was left of it.
    pub(super) async fn pause_as(&self, expired: bool) -> Result<()> {
        let mut frozen = self.frozen.lock().await;
        if frozen.is_some() {
            return Ok(());
        }
        if self.closing.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::MachineGone("the machine is closed".into()));
        }
        self.check_alive()?;
        let agent = self.agent_pid.ok_or_else(|| {
            Error::sandbox(
                "the machine's agent was not found among the host's processes, so its box cannot \
                 be frozen",
            )
        })?;
        // Calls refused and the clock stopped from here on, before the first process stops (so
        // `paused` and `endsAt` agree throughout).
        self.lifetime.paused(expired);
        self.gate.set(true);
        match off_thread(move || freeze(agent)).await {
            Ok(f) => {
                *frozen = Some(f);
                Ok(())
            }
            Err(e) => {
                self.gate.set(false);
                self.lifetime.resumed();
                Err(e)
            }
        }
    }

    /// Thaws the box exactly as it was; the lifetime clock runs again. Idempotent.
    pub async fn resume(&self) -> Result<()> {
        let mut frozen = self.frozen.lock().await;
        let Some(f) = frozen.take() else {
            return self.check_alive();
        };
        off_thread(move || {
            f.thaw();
            Ok(())
        })
        .await?;
        self.gate.set(false);
        self.lifetime.resumed();
        Ok(())
    }

    /// close()'s first step: a paused box is thawed, so its agent can end its processes. Called
    /// with `closing` set, so no pause starts after it.
    pub(super) async fn thaw_for_close(&self) {
        let f = self.frozen.lock().await.take();
        if let Some(f) = f {
            let _ = off_thread(move || {
                f.thaw();
                Ok(())
            })
            .await;
        }
        self.gate.set(false);
    }

    /// SIGKILL to a process group once the machine runs: a deadline that passed while it was
    /// paused applies when it resumes (close() thaws, so this never waits past it).
    pub async fn kill_thawed(&self, pid: u32) {
        loop {
            self.gate.thawed().await;
            if !matches!(
                self.signal(pid, libc::SIGKILL).await,
                Err(Error::MachinePaused(_))
            ) {
                return;
            }
        }
    }
}

/// Runs freezing or thawing (short sleeps while processes stop) on tokio's blocking pool.
async fn off_thread<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    match crate::task::spawn_blocking(move || crate::errors::guard(f)).await {
        Ok(r) => r,
        Err(e) => Err(Error::sandbox(format!("internal error: {e}"))),
    }
}

/// A frozen box; thawed by `thaw()` or, as a backstop, when dropped.
pub struct Frozen(Option<How>);

enum How {
    /// The box's own cgroup v2 directory, whose `cgroup.freeze` is 1.
    Cgroup(PathBuf),
    /// Every process stopped, in the order they were stopped (parents first).
    Signals(Vec<Held>),
}

/// A stopped process: its pidfd, the one handle a signal goes through.
struct Held {
    fd: OwnedFd,
    pid: i32,
    start: u64,
}

impl Frozen {
    /// How the box was frozen.
    #[cfg(test)]
    fn method(&self) -> &'static str {
        match self.0 {
            Some(How::Cgroup(_)) => "cgroup",
            Some(How::Signals(_)) => "signals",
            None => "thawed",
        }
    }

    pub fn thaw(mut self) {
        self.thaw_now();
    }

    fn thaw_now(&mut self) {
        match self.0.take() {
            Some(How::Cgroup(dir)) => {
                let _ = std::fs::write(dir.join("cgroup.freeze"), "0");
            }
            Some(How::Signals(held)) => cont_all(&held),
            None => {}
        }
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        self.thaw_now();
    }
}

/// Freezes the box whose PID 1 (the agent) has host pid `agent`.
pub fn freeze(agent: i32) -> Result<Frozen> {
    let tree = Tree::of(agent)?;
    let below = tree.below(agent);
    if below.is_empty() {
        return Err(Error::MachineGone(
            "the machine's box is gone (its agent has exited)".into(),
        ));
    }
    if let Some(dir) = own_cgroup(agent, &below) {
        if freeze_cgroup(&dir)? {
            return Ok(Frozen(Some(How::Cgroup(dir))));
        }
    }
    stop_tree(agent).map(|held| Frozen(Some(How::Signals(held))))
}

/// Every process on the host and its children.
struct Tree {
    stat: HashMap<i32, Stat>,
    children: HashMap<i32, Vec<i32>>,
}

impl Tree {
    fn scan() -> Result<Tree> {
        let dir = std::fs::read_dir("/proc").map_err(|e| Error::io("cannot read /proc", e))?;
        let mut t = Tree {
            stat: HashMap::new(),
            children: HashMap::new(),
        };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            if let Some(s) = stat_of(pid) {
                t.stat.insert(pid, s);
                t.children.entry(s.ppid).or_default().push(pid);
            }
        }
        Ok(t)
    }

    /// `root` and the processes below it only, through /proc/PID/task/TID/children (the box's
    /// handful of processes instead of the host's every one); the whole host where the kernel
    /// has no children files.
    fn of(root: i32) -> Result<Tree> {
        if !Path::new(&format!("/proc/{root}/task/{root}/children")).exists() {
            return match stat_of(root) {
                // Gone: an empty tree says so.
                None if !Path::new(&format!("/proc/{root}")).exists() => Ok(Tree {
                    stat: HashMap::new(),
                    children: HashMap::new(),
                }),
                _ => Tree::scan(),
            };
        }
        let mut t = Tree {
            stat: HashMap::new(),
            children: HashMap::new(),
        };
        let mut queue = VecDeque::from([root]);
        while let Some(p) = queue.pop_front() {
            let Some(s) = stat_of(p) else { continue };
            t.stat.insert(p, s);
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
                continue;
            };
            let mut kids = Vec::new();
            for task in tasks.flatten() {
                let text =
                    std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
                kids.extend(
                    text.split_whitespace()
                        .filter_map(|c| c.parse::<i32>().ok()),
                );
            }
            for &k in &kids {
                if !t.stat.contains_key(&k) {
                    queue.push_back(k);
                }
            }
            t.children.insert(p, kids);
        }
        // A child that exited between the two reads has no stat: it is left out.
        for kids in t.children.values_mut() {
            kids.retain(|k| t.stat.contains_key(k));
        }
        Ok(t)
    }

    /// `root` and everything below it, parents before children (empty when `root` is gone).
    /// In the box's pid namespace an orphan is adopted by its PID 1, so nothing of the box is
    /// ever outside this tree.
    fn below(&self, root: i32) -> Vec<i32> {
        if !self.stat.contains_key(&root) {
            return Vec::new();
        }
        let mut out = vec![root];
        let mut queue = VecDeque::from([root]);
        while let Some(p) = queue.pop_front() {
            for &c in self.children.get(&p).map(Vec::as_slice).unwrap_or_default() {
                out.push(c);
                queue.push_back(c);
            }
        }
        out
    }
}

/// A pidfd on `pid`, only if it is still the process that started at `start`.
fn open_same(pid: i32, start: u64) -> Option<OwnedFd> {
    let fd = pidfd_open(Pid::from_raw(pid)?, PidfdFlags::empty()).ok()?;
    // Opened first, checked second: if the start time still matches, the pidfd is that process.
    (stat_of(pid)?.start == start).then_some(fd)
}

/// Whether every thread of a held process has stopped (or the process is gone).
fn has_stopped(h: &Held) -> bool {
    match stat_of(h.pid) {
        Some(s) if s.start == h.start => {}
        _ => return true,
    }
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", h.pid)) else {
        return true;
    };
    tasks.flatten().all(|t| {
        std::fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|s| parse_stat(&s))
            .is_none_or(|s| matches!(s.state, b'T' | b't' | b'Z' | b'X'))
    })
}

/// SIGSTOP to every process below the agent, parents first: a process is stopped only once its
/// parent has stopped (a signal lands when its target next runs), so no parent runs to see a child
/// stop (a shell would report its job as stopped). Passes repeat until one finds no process it
/// had not stopped and every thread is stopped.
fn stop_tree(agent: i32) -> Result<Vec<Held>> {
    let mut held: Vec<Held> = Vec::new();
    // pid -> index in `held`, for the process of that pid stopped last.
    let mut seen: HashMap<i32, usize> = HashMap::new();
    let end = Instant::now() + STOP_WITHIN;
    loop {
        let tree = Tree::of(agent)?;
        let below = tree.below(agent);
        if below.is_empty() {
            cont_all(&held);
            return Err(Error::MachineGone(
                "the machine's box is gone (its agent has exited)".into(),
            ));
        }
        let mut fresh = false;
        let mut waiting = false;
        let mut stopped: HashMap<i32, bool> = HashMap::new();
        for pid in below {
            let s = tree.stat[&pid];
            let ours = seen.get(&pid).is_some_and(|&i| held[i].start == s.start);
            if !s.live() || ours {
                continue;
            }
            if pid != agent {
                let parent_stopped = match tree.stat.get(&s.ppid) {
                    Some(p) if !p.live() => true,
                    _ => *stopped.entry(s.ppid).or_insert_with(|| {
                        seen.get(&s.ppid).is_some_and(|&i| has_stopped(&held[i]))
                    }),
                };
                if !parent_stopped {
                    waiting = true;
                    continue;
                }
            }
            let Some(fd) = open_same(pid, s.start) else {
                continue; // exited since the scan
            };
            if pidfd_send_signal(&fd, Signal::STOP).is_ok() {
                fresh = true;
                seen.insert(pid, held.len());
                held.push(Held {
                    fd,
                    pid,
                    start: s.start,
                });
            }
        }
        if !fresh && !waiting && held.iter().all(has_stopped) {
            return Ok(held);
        }
        if Instant::now() >= end {
            cont_all(&held);
            return Err(Error::sandbox(format!(
                "the machine's processes did not all stop within {}s (one is in an \
                 uninterruptible wait?); it was left running",
                STOP_WITHIN.as_secs()
            )));
        }
        // Stops land when their targets next run: a moment for them before the next pass.
        std::thread::sleep(POLL);
    }
}

/// SIGCONT, children first: a parent runs again only once its children do, so it never sees
/// one stopped. A process that has exited meanwhile is skipped (its pidfd says so).
fn cont_all(held: &[Held]) {
    for h in held.iter().rev() {
        let _ = pidfd_send_signal(&h.fd, Signal::CONT);
    }
}

/// The cgroup v2 directory of the box, when it is the box's alone: every process in it (and in
/// cgroups below it) is one of the box's, every process of the box is in it, and it can be
/// frozen. None otherwise (kern gave the box no cgroup of its own): the process tree is used.
fn own_cgroup(agent: i32, box_pids: &[i32]) -> Option<PathBuf> {
    let path = unified_path(agent)?;
    if path == "/" {
        return None;
    }
    let dir = cgroup2_mount()?.join(path.trim_start_matches('/'));
    if !dir.join("cgroup.freeze").is_file() {
        return None;
    }
    let in_box: std::collections::HashSet<i32> = box_pids.iter().copied().collect();
    let all_in_box = |d: &Path| -> bool {
        std::fs::read_to_string(d.join("cgroup.procs")).is_ok_and(|t| {
            t.lines()
                .filter_map(|l| l.trim().parse::<i32>().ok())
                .all(|p| in_box.contains(&p))
        })
    };
    if !walk_dirs(&dir).iter().all(|d| all_in_box(d)) {
        return None;
    }
    let inside =
        |p: &i32| unified_path(*p).is_none_or(|c| c == path || c.starts_with(&format!("{path}/")));
    box_pids.iter().all(inside).then_some(dir)
}

/// A process's cgroup v2 path (the `0::` line of /proc/PID/cgroup).
fn unified_path(pid: i32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

/// Where cgroup2 is mounted with its root at the mount (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on a hybrid host).
fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (mount, fs) = l.split_once(" - ")?;
        let f: Vec<&str> = mount.split(' ').collect();
        (fs.starts_with("cgroup2 ") && f.get(3) == Some(&"/")).then(|| PathBuf::from(f[4]))
    })
}

/// `dir` and every directory below it.
fn walk_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if let Ok(rd) = std::fs::read_dir(&out[i]) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    out.push(e.path());
                }
            }
        }
        i += 1;
    }
    out
}

/// Writes `cgroup.freeze` and waits for `cgroup.events` to say `frozen 1`. Ok(false): the write
/// was refused (not ours to freeze), so the process tree is used instead.
fn freeze_cgroup(dir: &Path) -> Result<bool> {
    if std::fs::write(dir.join("cgroup.freeze"), "1").is_err() {
        return Ok(false);
    }
    let end = Instant::now() + STOP_WITHIN;
    loop {
        let events = std::fs::read_to_string(dir.join("cgroup.events")).unwrap_or_default();
        if events.lines().any(|l| l.trim() == "frozen 1") {
            return Ok(true);
        }
        if Instant::now() >= end {
            let _ = std::fs::write(dir.join("cgroup.freeze"), "0");
            return Err(Error::sandbox(format!(
                "the machine's cgroup did not freeze within {}s; it was left running",
                STOP_WITHIN.as_secs()
            )));
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    fn states_below(root: i32) -> Vec<u8> {
        let t = Tree::scan().unwrap();
        t.below(root).iter().map(|p| t.stat[p].state).collect()
    }

    /// A command in a process group of its own, to end whole.
    fn start(argv: &[&str]) -> Child {
        use std::os::unix::process::CommandExt;
        Command::new(argv[0])
            .args(&argv[1..])
            .process_group(0)
            .spawn()
            .unwrap()
    }

    fn reap(mut c: Child) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = c.wait();
    }

    #[test]
    fn a_process_tree_stops_and_continues_as_one() {
        // A shell with a child and a grandchild.
        let c = start(&["sh", "-c", "sh -c 'sleep 30; true' & sleep 30; wait"]);
        let root = c.id() as i32;
        let t0 = Instant::now();
        while Tree::scan().unwrap().below(root).len() < 4 && t0.elapsed() < STOP_WITHIN {
            std::thread::sleep(POLL);
        }
        assert_eq!(states_below(root).len(), 4);
        let f = freeze(root).unwrap();
        if f.method() == "signals" {
            assert!(states_below(root).iter().all(|s| *s == b'T'));
        }
        let again = Tree::scan().unwrap().below(root);
        f.thaw();
        assert_eq!(Tree::scan().unwrap().below(root), again, "the same pids");
        let t0 = Instant::now();
        while states_below(root).contains(&b'T') && t0.elapsed() < STOP_WITHIN {
            std::thread::sleep(POLL);
        }
        assert!(!states_below(root).contains(&b'T'));
        reap(c);
    }

    #[test]
    fn a_gone_root_is_machine_gone() {
        let mut c = Command::new("true").spawn().unwrap();
        let pid = c.id() as i32;
        c.wait().unwrap();
        assert!(matches!(freeze(pid), Err(Error::MachineGone(_))));
    }

    /// Where this process may make a cgroup v2 cgroup (a root test host), a process alone in its
    /// own cgroup is frozen through cgroup.freeze.
    #[test]
    fn a_cgroup_of_its_own_is_frozen_whole() {
        let Some(mount) = cgroup2_mount() else {
            return;
        };
        let dir = mount.join(format!("kst-freeze-test-{}", std::process::id()));
        if std::fs::create_dir(&dir).is_err() {
            return;
        }
        let c = start(&["sleep", "30"]);
        let pid = c.id() as i32;
        if std::fs::write(dir.join("cgroup.procs"), pid.to_string()).is_err() {
            reap(c);
            let _ = std::fs::remove_dir(&dir);
            return;
        }
        let f = freeze(pid).unwrap();
        assert_eq!(f.method(), "cgroup");
        let events = std::fs::read_to_string(dir.join("cgroup.events")).unwrap();
        assert!(events.contains("frozen 1"), "{events}");
        drop(f); // a dropped Frozen thaws
        let events = std::fs::read_to_string(dir.join("cgroup.events")).unwrap();
        assert!(events.contains("frozen 0"), "{events}");
        reap(c);
        let _ = std::fs::remove_dir(&dir);
    }
}
