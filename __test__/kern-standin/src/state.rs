//! The running-box registry behind `ps` and `stop`, and kern's `stop` teardown.
//!
//! One file per box name in the state dir, holding the supervisor's pid (+ its start time, so a
//! recycled pid never passes for a live box), the box init's host pid and bwrap's process group. The
//! supervisor creates it atomically before the box starts (which also makes a second box with the same
//! name fail the way kern's does) and removes it when the box ends; an entry whose supervisor died
//! without cleaning up is pruned by whoever reads it next.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::Error;

/// Overrides the state directory (tests point it at a temp dir).
pub const STATE_DIR_ENV: &str = "KERN_STANDIN_STATE_DIR";

/// kern's default stop grace (`--stop-timeout`), used when the box's init handles the signal.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// `$KERN_STANDIN_STATE_DIR`, else `$XDG_RUNTIME_DIR/kern-standin`, else `/tmp/kern-standin-<uid>`.
pub fn dir() -> PathBuf {
    let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = nonempty(STATE_DIR_ENV) {
        return PathBuf::from(d);
    }
    if let Some(d) = nonempty("XDG_RUNTIME_DIR") {
        return PathBuf::from(d).join("kern-standin");
    }
    // SAFETY: getuid has no preconditions.
    PathBuf::from(format!("/tmp/kern-standin-{}", unsafe { libc::getuid() }))
}

#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub name: String,
    /// The supervisor (the `kern-standin box` process): what kern reports as the box's pid.
    pub pid: i32,
    pub starttime: u64,
    /// The box's PID 1 as seen from the host; 0 until bwrap reports it.
    pub pid1: i32,
    /// bwrap's process group (bwrap runs as its own group leader).
    pub pgid: i32,
    pub started: u64,
    pub command: String,
}

impl Record {
    pub fn new(name: &str, command: &[String]) -> Record {
        let pid = std::process::id() as i32;
        Record {
            name: name.to_string(),
            pid,
            starttime: proc_starttime(pid).unwrap_or(0),
            pid1: 0,
            pgid: 0,
            started: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            command: command.join(" "),
        }
    }

    fn encode(&self) -> String {
        // The command goes last and is flattened to one line; nothing else can hold a newline.
        format!(
            "pid={}\nstarttime={}\npid1={}\npgid={}\nstarted={}\ncommand={}\n",
            self.pid,
            self.starttime,
            self.pid1,
            self.pgid,
            self.started,
            self.command.replace(['\n', '\r'], " ")
        )
    }

    fn decode(name: &str, text: &str) -> Option<Record> {
        let field = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
        };
        let int = |k: &str| field(k)?.parse::<i32>().ok();
        let uint = |k: &str| field(k)?.parse::<u64>().ok();
        Some(Record {
            name: name.to_string(),
            pid: int("pid")?,
            starttime: uint("starttime")?,
            pid1: int("pid1")?,
            pgid: int("pgid")?,
            started: uint("started")?,
            command: field("command")?.to_string(),
        })
    }

    fn alive(&self) -> bool {
        self.pid > 0 && proc_starttime(self.pid) == Some(self.starttime)
    }
}

/// Field 22 of /proc/<pid>/stat: the start time that, with the pid, identifies one process.
pub fn proc_starttime(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `comm` (field 2) may contain spaces and parentheses: parse from the last ')'.
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// The registry entry of the box this process supervises.
pub struct Registration {
    path: PathBuf,
    record: Record,
}

impl Registration {
    /// Atomically claim `record.name`, refusing it while another live box holds it.
    pub fn claim(record: Record) -> Result<Registration, Error> {
        let dir = records_dir();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::Sandbox(format!("state dir {}: {e}", dir.display())))?;
        let path = dir.join(&record.name);
        for _ in 0..2 {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(mut f) => {
                    f.write_all(record.encode().as_bytes())
                        .map_err(|e| Error::Sandbox(format!("state {}: {e}", path.display())))?;
                    return Ok(Registration { path, record });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if read(&record.name).is_some_and(|r| r.alive()) {
                        break;
                    }
                    let _ = fs::remove_file(&path); // stale: its supervisor is gone
                }
                Err(e) => return Err(Error::Sandbox(format!("state {}: {e}", path.display()))),
            }
        }
        Err(Error::AlreadyRunning(format!(
            "a box named '{}' is already running",
            record.name
        )))
    }

    /// The command `ps` shows, once the image's default is resolved.
    pub fn set_command(&mut self, command: &[String]) {
        self.record.command = command.join(" ");
        self.persist();
    }

    /// Record the box's init pid and bwrap's group once known.
    pub fn set_box(&mut self, pid1: i32, pgid: i32) {
        self.record.pid1 = pid1;
        self.record.pgid = pgid;
        self.persist();
    }

    /// Write-then-rename, so a reader never sees a half-written entry.
    fn persist(&self) {
        // Box names never start with '.', so the temp name cannot collide with a record.
        let tmp = self
            .path
            .with_file_name(format!(".{}.tmp", self.record.name));
        if fs::write(&tmp, self.record.encode()).is_ok() {
            let _ = fs::rename(&tmp, &self.path);
        }
    }
}

impl Drop for Registration {
    /// Remove the entry, unless another supervisor has meanwhile taken the name over.
    fn drop(&mut self) {
        if read(&self.record.name).is_some_and(|r| r.pid == self.record.pid) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// kern's per-box scratch tree (the overlay's upper and work dirs): `<root>/NAME-PID`, PID being
/// the supervisor's. The supervisor removes it when its box ends; `stop` removes it for a
/// supervisor it killed. Nothing is mounted on it here, but it comes and goes as kern's does, so
/// a caller that kills kern before `stop` has cleaned up leaves it behind, as with kern.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn create(name: &str) -> Result<Scratch, Error> {
        let path = scratch_path(name, std::process::id() as i32);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path.join("upper"))
            .map_err(|e| Error::Sandbox(format!("overlay scratch: {e}")))?;
        Ok(Scratch(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `$XDG_RUNTIME_DIR/kern/scratch`, where kern keeps it; else under the state dir.
fn scratch_path(name: &str, pid: i32) -> PathBuf {
    let root = match std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x).join("kern/scratch"),
        None => dir().join("scratch"),
    };
    root.join(format!("{name}-{pid}"))
}

/// One record file per box name; a sibling of the named-volume store.
fn records_dir() -> PathBuf {
    dir().join("boxes")
}

fn read(name: &str) -> Option<Record> {
    Record::decode(name, &fs::read_to_string(records_dir().join(name)).ok()?)
}

/// Live boxes, oldest first; entries of dead supervisors are pruned on the way.
pub fn list() -> Vec<Record> {
    let Ok(entries) = fs::read_dir(records_dir()) else {
        return Vec::new();
    };
    let mut boxes: Vec<Record> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().into_string().ok()?;
            if name.starts_with('.') {
                return None; // an in-flight write
            }
            let rec = Record::decode(&name, &fs::read_to_string(e.path()).ok()?)?;
            if rec.alive() {
                Some(rec)
            } else {
                let _ = fs::remove_file(e.path());
                None
            }
        })
        .collect();
    boxes.sort_by(|a, b| (a.started, &a.name).cmp(&(b.started, &b.name)));
    boxes
}

/// kern's JSON string escaping.
pub fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if c.is_control() => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// `ps` in kern's three output shapes.
pub fn ps(json: bool, quiet: bool) {
    let boxes = list();
    if quiet {
        for b in &boxes {
            println!("{}", b.name);
        }
    } else if json {
        let items: Vec<String> = boxes
            .iter()
            .map(|b| {
                // kern reports its overlay's merged dir; the stand-in's root is the host's.
                format!(
                    "{{\"name\":{},\"pid\":{},\"pod\":\"\",\"rootfs\":\"/\",\"command\":{},\"started\":{},\"ports\":\"\",\"health\":\"\"}}",
                    json_str(&b.name),
                    b.pid,
                    json_str(&b.command),
                    b.started,
                )
            })
            .collect();
        println!("[{}]", items.join(","));
    } else {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        println!(
            "{:<16} {:>7} {:>7}  {:<9} {:<5} COMMAND",
            "NAME", "PID", "UPTIME", "HEALTH", "PORTS"
        );
        for b in &boxes {
            let up = uptime(now.saturating_sub(b.started));
            println!(
                "{:<16} {:>7} {:>7}  {:<9} {:<5} {}",
                b.name, b.pid, up, "-", "-", b.command
            );
        }
    }
}

fn uptime(s: u64) -> String {
    match s {
        s if s >= 3600 => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
        s if s >= 60 => format!("{}m {:02}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

/// `stop`: kern's teardown, per box. Signal the init and the supervisor's group; give an init that
/// handles the signal the stop grace to exit on its own; then SIGKILL the init (the kernel then
/// kills everything in its pid namespace) and, beyond kern, bwrap's own group.
pub fn stop(names: &[String], all: bool) -> Result<(), Error> {
    let running = list();
    let targets: Vec<&Record> = running
        .iter()
        .filter(|b| all || names.iter().any(|n| n == &b.name))
        .collect();
    if targets.is_empty() {
        return Err(Error::NotRunning(if all {
            "no running boxes to stop".to_string()
        } else {
            let listed: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
            format!("no running box named {}", listed.join(", "))
        }));
    }
    let signalled = Instant::now();
    for b in &targets {
        send(b.pid1, libc::SIGTERM);
        kill_group(b.pid, libc::SIGTERM);
    }
    let mut failures = Vec::new();
    for b in &targets {
        let grace = STOP_GRACE.saturating_sub(signalled.elapsed());
        let gone = teardown(b, grace);
        // The supervisor was killed before it could remove the box's scratch: `stop` does.
        let _ = fs::remove_dir_all(scratch_path(&b.name, b.pid));
        if gone {
            println!("stopped '{}' (pid {})", b.name, b.pid);
        } else {
            failures.push(format!(
                "sent SIGKILL to '{}' (pid {}) but it did not exit in time",
                b.name, b.pid
            ));
        }
    }
    if !all {
        let missing = names
            .iter()
            .filter(|n| !targets.iter().any(|b| &b.name == *n));
        failures.extend(missing.map(|n| format!("no running box '{n}'")));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Error::Sandbox(format!(
            "could not stop: {}",
            failures.join("; ")
        )))
    }
}

fn teardown(b: &Record, grace: Duration) -> bool {
    if b.pid1 <= 0 && !grace.is_zero() {
        // As kern: with no box init on record yet there is nothing to wait on, so the supervisor's
        // group is signalled and the whole grace slept (a supervisor still in its setup dies of
        // it, before it could remove its scratch).
        kill_group(b.pid, libc::SIGTERM);
        std::thread::sleep(grace);
    }
    let pidfd = PidFd::open(b.pid1);
    // kern skips the grace when the init cannot act on the signal (no handler): waiting would only
    // delay the inevitable SIGKILL.
    if !grace.is_zero() && !is_zombie(b.pid1) && catches(b.pid1, libc::SIGTERM) {
        send(b.pid1, libc::SIGTERM);
        kill_group(b.pid, libc::SIGTERM);
        if pidfd.as_ref().is_some_and(|fd| fd.wait(grace)) {
            return true;
        }
    }
    send(b.pid1, libc::SIGKILL);
    kill_group(b.pid, libc::SIGKILL);
    kill_group(b.pgid, libc::SIGKILL);
    match pidfd {
        Some(fd) => fd.wait(Duration::from_secs(1)),
        None => {
            let probe = if b.pid1 > 0 { b.pid1 } else { b.pid };
            wait_gone(probe, Duration::from_secs(1))
        }
    }
}

fn send(pid: i32, sig: i32) {
    if pid > 0 {
        // SAFETY: plain syscall; `pid > 0` never names a group.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Never let a bogus pid turn into `kill(-1)` / `kill(0)`.
fn kill_group(pgid: i32, sig: i32) {
    if pgid > 1 {
        // SAFETY: plain syscall; `pgid > 1` keeps this off kill(-1) and kill(0).
        unsafe { libc::kill(-pgid, sig) };
    }
}

fn proc_status_field(pid: i32, key: &str) -> Option<String> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
}

fn is_zombie(pid: i32) -> bool {
    pid <= 0 || proc_status_field(pid, "State:").is_none_or(|s| s.starts_with('Z'))
}

/// Whether `pid` has a handler installed for `sig` (`SigCgt`).
fn catches(pid: i32, sig: i32) -> bool {
    proc_status_field(pid, "SigCgt:")
        .and_then(|m| u64::from_str_radix(&m, 16).ok())
        .is_some_and(|mask| mask & (1u64 << (sig - 1)) != 0)
}

fn wait_gone(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        // SAFETY: signal 0 only probes.
        if unsafe { libc::kill(pid, 0) } != 0 || is_zombie(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// A pidfd: readable once the process it pins has terminated, immune to pid reuse.
pub struct PidFd(i32);

impl PidFd {
    pub fn open(pid: i32) -> Option<PidFd> {
        if pid <= 0 {
            return None;
        }
        // SAFETY: pidfd_open takes plain ints.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
        (fd >= 0).then_some(PidFd(fd))
    }

    pub fn raw(&self) -> i32 {
        self.0
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: a fd we own; a NULL siginfo is allowed.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0,
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
    }

    /// Wait up to `limit` for the process to terminate; true if it did.
    pub fn wait(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut p = libc::pollfd {
                fd: self.0,
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = left.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: `p` is a live pollfd.
            match unsafe { libc::poll(&mut p, 1, ms) } {
                n if n > 0 => return true,
                0 => return false,
                _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
                _ => return false,
            }
        }
    }
}

impl Drop for PidFd {
    fn drop(&mut self) {
        // SAFETY: we own the fd and close it once, on drop.
        unsafe { libc::close(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_and_flattens_the_command() {
        let mut r = Record::new("b1", &["sh".into(), "-c".into(), "echo a\necho b".into()]);
        r.pid1 = 42;
        r.pgid = 41;
        let back = Record::decode("b1", &r.encode()).unwrap();
        assert_eq!(back.command, "sh -c echo a echo b");
        assert_eq!(back.pid1, 42);
        assert_eq!(back.pgid, 41);
        assert!(back.alive(), "this test process is alive");
    }

    #[test]
    fn json_escaping_matches_kern() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }

    #[test]
    fn uptime_format_matches_kern() {
        assert_eq!(uptime(5), "5s");
        assert_eq!(uptime(65), "1m 05s");
        assert_eq!(uptime(3725), "1h 02m");
    }
}
