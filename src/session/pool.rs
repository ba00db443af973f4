//! Boxes started ahead of the calls that will use them (the `prewarm` option).
//!
//! A ready box is started with exactly the argv a call's box would get, except for two things:
//! kern's `--timeout` backstop also covers the time the box may wait ([`IDLE`]), and its command
//! is a small waiter. The waiter signals that the box is up, blocks on stdin for one request, says
//! whether it takes it, then runs it: an `exec` of the call's argv (sh), or, in a box kept for
//! Python cells, the one-shot runner already loaded in that same interpreter. Every box serves
//! one call and is never reused; one that cannot serve a call is stopped, not repurposed.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{watch, Notify};

use crate::kernel::rich::RUNNER;
use crate::lifecycle::spawn::{self, Booted};
use crate::lifecycle::workload;

/// A ready box nobody took within this long is stopped (and not replaced until the next call).
pub const IDLE: Duration = Duration::from_secs(60);
/// How long a waiter gets to come up; a box not ready by then is stopped.
const BOOT_BUDGET: Duration = Duration::from_secs(30);
/// Starts of one kind that failed in a row before the session stops trying that kind (an image
/// without python3, a kern that cannot start boxes).
const STRIKES: u8 = 3;
/// How long a waiter gets to answer a request before the call starts a box of its own instead.
const HANDOVER_BUDGET: Duration = Duration::from_secs(5);
/// The largest request handed to a waiter (sh reads its line a byte at a time); a call with a
/// longer argv starts its own box.
const REQUEST_MAX: usize = 8 * 1024;

const READY: &[u8] = b"KERN-SANDBOX-READY\n";
const GO: &[u8] = b"KERN-SANDBOX-GO\n";

/// The exec waiter. PWD is dropped before the exec unless kern gave it (dash exports one of its
/// own), and stdin becomes /dev/null as a cold box's is. A command that is not there is answered
/// NO so that the call's own box reports it the way kern does. One line, as `kern ps` shows it.
const SH_WAITER: &str = "nopwd=; grep -qz '^PWD=' /proc/$$/environ 2>/dev/null || nopwd=1; \
nl=$(printf '\\nx'); nl=${nl%x}; printf 'KERN-SANDBOX-READY\\n'; IFS= read -r line || exit 0; \
eval \"set -- $line\"; found=; case $1 in */*) [ -f \"$1\" ] && [ -x \"$1\" ] && found=1 ;; \
*) IFS=:; for d in $PATH; do [ -f \"${d:-.}/$1\" ] && [ -x \"${d:-.}/$1\" ] && { found=1; break; }; \
done; unset IFS ;; esac; [ -n \"$found\" ] || { printf 'KERN-SANDBOX-NO\\n'; exit 0; }; \
[ -n \"$nopwd\" ] && unset PWD; exec </dev/null; printf 'KERN-SANDBOX-GO\\n'; exec \"$@\"";

/// The Python waiter's part: run between the runner's definitions and its `_run()`. The request
/// is the runner's path; the interpreter is then set up as `python3 <runner>` would have it.
/// The import caches are dropped: entries that did not exist at boot (`.deps`) were cached as
/// absent.
const PY_WAIT: &str = r#"
def _kern_sandbox_wait():
    import os
    os.write(1, b"KERN-SANDBOX-READY\n")
    buf = b""
    while not buf.endswith(b"\n"):
        got = os.read(0, 65536)
        if not got:
            os._exit(0)
        buf += got
    runner = buf[:-1].decode("utf-8")
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.argv = [runner]
    sys.orig_argv = [sys.orig_argv[0], runner]
    sys.path[0] = runner.rpartition("/")[0]
    sys.path_importer_cache.clear()
    if "sitecustomize" not in sys.modules:
        import site
        site.execsitecustomize()
    os.write(1, b"KERN-SANDBOX-GO\n")


_kern_sandbox_wait()
del _kern_sandbox_wait
"#;

/// The Python waiter: the runner's definitions loaded (and compiled) at boot, `_run()` after the
/// request.
fn py_waiter() -> &'static str {
    static SRC: OnceLock<String> = OnceLock::new();
    SRC.get_or_init(|| {
        let defs = RUNNER.strip_suffix("_run()\n").unwrap_or(RUNNER);
        format!("{defs}{PY_WAIT}_run()\n")
    })
}

/// What a ready box waits to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// sh, exec'ing any argv.
    Exec = 0,
    /// python3 with the one-shot runner loaded: Python cells only.
    Python = 1,
}

impl Kind {
    /// The ready box's command.
    pub fn command(self) -> Vec<String> {
        match self {
            Kind::Exec => vec![
                "sh".into(),
                "-c".into(),
                SH_WAITER.into(),
                "kern-sandbox-waiter".into(),
            ],
            Kind::Python => vec!["python3".into(), "-c".into(), py_waiter().into()],
        }
    }
}

/// One call's request to a ready box.
pub enum Request<'a> {
    /// `python3 <runner>`, where the runner is one of ours.
    Python { runner: &'a str },
    /// Any argv.
    Exec(&'a [String]),
}

impl Request<'_> {
    pub fn kind(&self) -> Kind {
        match self {
            Request::Python { .. } => Kind::Python,
            Request::Exec(_) => Kind::Exec,
        }
    }

    /// The line a waiter of `kind` reads, or None when it is too long to hand over.
    fn line(&self, kind: Kind) -> Option<Vec<u8>> {
        let mut line = match (self, kind) {
            (Request::Python { runner }, Kind::Python) => runner.to_string(),
            (Request::Python { runner }, Kind::Exec) => sh_words(&["python3", runner]),
            (Request::Exec(argv), Kind::Exec) => sh_words(argv),
            (Request::Exec(_), Kind::Python) => return None,
        };
        line.push('\n');
        (line.len() <= REQUEST_MAX).then(|| line.into_bytes())
    }
}

/// Single-quoted words for the sh waiter's `eval "set -- $line"`: a quote as `'\''`, a newline
/// as `$nl` (the line must stay one line).
fn sh_words<S: AsRef<str>>(argv: &[S]) -> String {
    argv.iter()
        .map(|a| {
            let q = a
                .as_ref()
                .replace('\'', r"'\''")
                .replace('\n', r#"'"$nl"'"#);
            format!("'{q}'")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What must match between a ready box and a call's box: the argv without the box name, kern's
/// `--timeout` value and the command.
pub fn key(args: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.iter().skip(2);
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        out.push(a.clone());
        if a == "--timeout" {
            it.next();
        }
    }
    out
}

/// A box up and waiting.
struct Ready {
    booted: Booted,
    kind: Kind,
    key: Vec<OsString>,
    born: Instant,
    /// The call deadline (seconds from boot) kern's backstop still covers.
    covers_s: f64,
}

/// A box to start: its name and argv, and the call deadline its backstop covers.
pub struct Boot {
    pub name: String,
    pub args: Vec<OsString>,
    pub covers_s: f64,
}

/// Where boxes are started: the same for every box of a session.
pub struct Recipe {
    pub kern: std::path::PathBuf,
    pub enforce_limits: bool,
    pub env_id: usize,
}

struct State {
    ready: VecDeque<Ready>,
    booting: usize,
    closed: bool,
    /// What the session ran last: what new boxes wait for.
    kind: Kind,
    /// Starts that failed in a row, per kind ([`Kind::Exec`], [`Kind::Python`]); at [`STRIKES`]
    /// that kind is not started again in this session.
    failed: [u8; 2],
}

pub struct Pool {
    target: usize,
    recipe: Recipe,
    state: Mutex<State>,
    /// Notified as each start ends, for close() to wait on.
    booted: Notify,
    closing: watch::Sender<bool>,
}

impl Pool {
    pub fn new(target: usize, recipe: Recipe) -> Arc<Pool> {
        Arc::new(Pool {
            target,
            recipe,
            state: Mutex::new(State {
                ready: VecDeque::new(),
                booting: 0,
                closed: false,
                kind: Kind::Exec,
                failed: [0; 2],
            }),
            booted: Notify::new(),
            closing: watch::channel(false).0,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A ready box for a call whose box would have `key` and a deadline of `timeout_s`, told to
    /// run `req`. None when no box can take it (the call then starts its own). Boxes that can no
    /// longer serve this session (other argv, another language, too old, dead) are stopped.
    pub async fn take(
        &self,
        key: &[OsString],
        timeout_s: f64,
        req: &Request<'_>,
    ) -> Option<Booted> {
        loop {
            let (found, stale) = self.pick(key, timeout_s, req.kind());
            for r in stale {
                crate::task::spawn(r.booted.discard());
            }
            let r = found?;
            let Some(line) = req.line(r.kind) else {
                self.state().ready.push_front(r);
                return None;
            };
            match hand_over(r.booted, &line).await {
                Ok(b) => return Some(b),
                // Died behind our back, or said NO: stopped, and the next one is tried.
                Err(b) => drop(crate::task::spawn(b.discard())),
            }
        }
    }

    /// Under the lock: the first box that can take the call, and those to stop.
    fn pick(&self, key: &[OsString], timeout_s: f64, want: Kind) -> (Option<Ready>, Vec<Ready>) {
        let mut st = self.state();
        st.kind = want;
        let mut stale = Vec::new();
        let mut found = None;
        let mut keep = VecDeque::new();
        while let Some(r) = st.ready.pop_front() {
            let age = r.born.elapsed();
            let useless = r.key != key
                || age > IDLE
                || r.booted.reaper.exited()
                || (want == Kind::Exec && r.kind == Kind::Python);
            if useless {
                stale.push(r);
            } else if found.is_none() && age.as_secs_f64() + timeout_s <= r.covers_s {
                found = Some(r);
            } else {
                keep.push_back(r);
            }
        }
        st.ready = keep;
        (found, stale)
    }

    /// How many boxes to start now to bring the pool back to its size, reserved, with the kind
    /// they wait for; zero when closed or that kind cannot start here.
    pub fn reserve(&self) -> (usize, Kind) {
        let mut st = self.state();
        let have = st.ready.len() + st.booting;
        if st.closed || st.failed[st.kind as usize] >= STRIKES || have >= self.target {
            return (0, st.kind);
        }
        let n = self.target - have;
        st.booting += n;
        (n, st.kind)
    }

    /// Starts `boots` (reserved with [`Pool::reserve`]) in parallel, in the background.
    pub fn start(self: &Arc<Self>, kind: Kind, boots: Vec<Boot>) {
        for b in boots {
            let me = self.clone();
            crate::task::spawn(async move {
                let ready = me.boot_one(kind, b).await;
                me.settle(ready, kind);
            });
        }
    }

    async fn boot_one(&self, kind: Kind, b: Boot) -> Option<Ready> {
        let r = &self.recipe;
        let mut booted = spawn::boot(&r.kern, &b.name, &b.args, r.enforce_limits, r.env_id, true)
            .await
            .ok()?;
        let mut closing = self.closing.subscribe();
        let mut got = [0u8; READY.len()];
        let up = tokio::select! {
            r = tokio::time::timeout(BOOT_BUDGET, booted.stdout.read_exact(&mut got)) => {
                matches!(r, Ok(Ok(_))) && got == READY
            }
            _ = closing.wait_for(|c| *c) => false,
        };
        if !up {
            booted.discard().await;
            return None;
        }
        // The waiter is the box's init: found now, its exit ends the call without waiting for
        // kern's teardown however soon the workload is over.
        booted.init = workload::find_init(booted.pgid);
        Some(Ready {
            booted,
            kind,
            key: key(&b.args),
            born: Instant::now(),
            covers_s: b.covers_s,
        })
    }

    /// A start ended: its box joins the pool (or is stopped if the pool closed meanwhile).
    fn settle(self: &Arc<Self>, ready: Option<Ready>, kind: Kind) {
        let mut st = self.state();
        st.booting -= 1;
        match ready {
            Some(r) if !st.closed => {
                st.failed[kind as usize] = 0;
                st.ready.push_back(r);
                let me = Arc::downgrade(self);
                crate::task::spawn(expire_later(me));
            }
            Some(r) => drop(crate::task::spawn(r.booted.discard())),
            None if !st.closed => st.failed[kind as usize] += 1,
            None => {}
        }
        drop(st);
        self.booted.notify_waiters();
    }

    /// Stops ready boxes older than [`IDLE`].
    fn expire(&self) {
        let old: VecDeque<Ready> = {
            let mut st = self.state();
            let (old, keep) = std::mem::take(&mut st.ready)
                .into_iter()
                .partition(|r| r.born.elapsed() >= IDLE);
            st.ready = keep;
            old
        };
        for r in old {
            crate::task::spawn(r.booted.discard());
        }
    }

    /// Whether boxes are being started right now.
    pub fn starting(&self) -> bool {
        self.state().booting > 0
    }

    /// Boxes ready right now.
    pub fn ready_count(&self) -> usize {
        self.state().ready.len()
    }

    /// Stops every ready box and waits for starts in flight to end; none is started after.
    pub async fn close(&self) {
        let ready: Vec<Ready> = {
            let mut st = self.state();
            st.closed = true;
            st.ready.drain(..).collect()
        };
        self.closing.send_replace(true);
        let mut stops = tokio::task::JoinSet::new();
        for r in ready {
            crate::task::spawn_in(&mut stops, r.booted.discard());
        }
        while stops.join_next().await.is_some() {}
        loop {
            let notified = self.booted.notified();
            if self.state().booting == 0 {
                break;
            }
            notified.await;
        }
    }
}

async fn expire_later(pool: Weak<Pool>) {
    tokio::time::sleep(IDLE + Duration::from_millis(50)).await;
    if let Some(p) = pool.upgrade() {
        p.expire();
    }
}

/// Hands `line` to the box's waiter and waits for its GO; the box back as Err when it is dead,
/// said NO, or did not answer in time.
async fn hand_over(mut b: Booted, line: &[u8]) -> Result<Booted, Booted> {
    let Some(mut stdin) = b.stdin.take() else {
        return Err(b);
    };
    let stdout = &mut b.stdout;
    let answered = tokio::time::timeout(HANDOVER_BUDGET, async move {
        stdin.write_all(line).await.ok()?;
        drop(stdin);
        let mut ack = [0u8; GO.len()];
        stdout.read_exact(&mut ack).await.ok()?;
        (ack == GO).then_some(())
    })
    .await;
    match answered {
        Ok(Some(())) => Ok(b),
        _ => Err(b),
    }
}

/// The deadline a ready box's argv is built with: the session's, plus the longest wait, so that
/// kern's `--timeout` backstop still covers a call taken at the end of it. It is also the call
/// deadline (seconds from boot) the box covers.
pub fn box_timeout_s(session_timeout_s: f64) -> f64 {
    session_timeout_s + IDLE.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_drops_name_timeout_and_command() {
        let a: Vec<OsString> = [
            "box",
            "n1",
            "--image",
            "i",
            "--timeout",
            "35",
            "--ro",
            "--",
            "x",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let b: Vec<OsString> = [
            "box",
            "n2",
            "--image",
            "i",
            "--timeout",
            "95",
            "--ro",
            "--",
            "y",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        assert_eq!(key(&a), key(&b));
        assert_eq!(key(&a), ["--image", "i", "--timeout", "--ro"]);
    }

    #[test]
    fn sh_words_quote_everything() {
        assert_eq!(
            sh_words(&["a b", "it's", "x\ny", "$HOME"]),
            r#"'a b' 'it'\''s' 'x'"$nl"'y' '$HOME'"#
        );
    }

    #[test]
    fn requests_fit_their_waiter() {
        let argv = vec!["ls".to_string()];
        assert_eq!(Request::Exec(&argv).line(Kind::Python), None);
        assert_eq!(
            Request::Exec(&argv).line(Kind::Exec).unwrap(),
            b"'ls'\n".to_vec()
        );
        let py = Request::Python {
            runner: "/workspace/.run-1.py",
        };
        assert_eq!(py.line(Kind::Python).unwrap(), b"/workspace/.run-1.py\n");
        assert_eq!(
            py.line(Kind::Exec).unwrap(),
            b"'python3' '/workspace/.run-1.py'\n"
        );
        let long = vec!["x".repeat(REQUEST_MAX)];
        assert_eq!(Request::Exec(&long).line(Kind::Exec), None);
    }

    #[test]
    fn python_waiter_runs_the_runner_after_the_request() {
        let src = py_waiter();
        let wait = src.find("_kern_sandbox_wait()\ndel").unwrap();
        assert!(src.find("def _run").unwrap() < wait);
        assert!(src.ends_with("del _kern_sandbox_wait\n_run()\n"));
    }
}
