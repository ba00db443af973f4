//! Turning how a box ended into the reference's fault classes.
//!
//! Order matters: facts the workload cannot forge (our own deadline, exit codes, kern's started
//! channel) decide before anything read from stderr, which the workload controls.

use crate::output::notes::is_kern_notice;

pub const EXIT_SIGKILL: i32 = 137;
pub const EXIT_SIGSYS: i32 = 159;
pub const EXIT_SIGTERM: i32 = 143;

/// What kern's `KERN_STARTED_FD` channel said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    /// Nothing arrived: the box never started, or kern predates the channel.
    Silent,
    /// The box ran; `mem_cap` is kern's memory-cap byte (0 unknown, 1 enforced, 2 not enforced).
    Yes { mem_cap: u8 },
}

impl Started {
    pub fn from_bytes(b: &[u8]) -> Started {
        match b {
            [1, cap, ..] => Started::Yes { mem_cap: *cap },
            [1] => Started::Yes { mem_cap: 0 },
            _ => Started::Silent,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub kind: &'static str,
    pub message: String,
}

impl Fault {
    fn new(kind: &'static str, message: impl Into<String>) -> Fault {
        Fault {
            kind,
            message: message.into(),
        }
    }
}

/// How a box's life ended, as far as classification needs.
pub struct Ending<'a> {
    pub exit_code: i32,
    /// The binding's own deadline fired.
    pub timed_out: bool,
    pub timeout_s: f64,
    pub started: Started,
    pub stderr: &'a [u8],
    /// Set when something was still alive after teardown.
    pub survivors: Option<String>,
}

pub fn classify(e: &Ending<'_>) -> Option<Fault> {
    let mut fault = classify_inner(e)?;
    if let Some(s) = &e.survivors {
        fault.message.push_str("; ");
        fault.message.push_str(s);
    }
    Some(fault)
}

/// How a process in a machine ended: our deadline, a blocked syscall or a SIGKILL. No kern
/// backstop or box start applies to it, and a SIGTERM is only a SIGTERM.
pub fn classify_process(exit_code: i32, timed_out: Option<f64>) -> Option<Fault> {
    if exit_code == EXIT_SIGTERM && timed_out.is_none() {
        return None;
    }
    classify(&Ending {
        exit_code,
        timed_out: timed_out.is_some(),
        timeout_s: timed_out.unwrap_or(0.0),
        started: Started::Yes { mem_cap: 0 },
        stderr: b"",
        survivors: None,
    })
}

/// A process that was still running when its machine ended.
pub fn machine_gone() -> Fault {
    Fault::new(
        "killed",
        "the machine ended (closed, or its box died) while the process ran",
    )
}

fn classify_inner(e: &Ending<'_>) -> Option<Fault> {
    if e.timed_out {
        return Some(Fault::new(
            "timeout",
            format!(
                "exceeded the {}s time limit (killed by the binding)",
                fmt_secs(e.timeout_s)
            ),
        ));
    }
    match e.exit_code {
        EXIT_SIGSYS => {
            return Some(Fault::new(
                "escape_blocked",
                "a syscall was blocked by the seccomp filter (SIGSYS)",
            ))
        }
        EXIT_SIGKILL => return Some(killed(e.started)),
        EXIT_SIGTERM => {
            return Some(Fault::new(
                "timeout",
                "the box exceeded its time limit (reaped by kern's timeout backstop)",
            ))
        }
        _ => {}
    }
    if e.exit_code != 0 && e.started == Started::Silent {
        if let Some(msg) = kern_startup_error(e.stderr) {
            return Some(Fault::new("startup_failed", msg));
        }
    }
    None
}

fn killed(started: Started) -> Fault {
    match started {
        Started::Yes { mem_cap: 1 } => Fault::new(
            "oom",
            "the box was killed (SIGKILL) at its enforced memory cap: out of memory (exit 137)",
        ),
        Started::Yes { mem_cap: 2 } => Fault::new(
            "killed",
            "the box was killed (SIGKILL, exit 137); kern reports its memory cap as not enforced \
             on this host, so this is not an out-of-memory kill",
        ),
        _ => Fault::new(
            "killed",
            "the box was killed (SIGKILL, exit 137); kern did not report whether a memory cap \
             was enforced, so an out-of-memory kill cannot be confirmed",
        ),
    }
}

/// kern's own fatal lines when the box did not start. Only used when the started channel was
/// silent; kern's warnings (`kern: warning: …`, `kern: --memory not enforced …`) never count.
fn kern_startup_error(stderr: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stderr);
    let is_error = |l: &str| {
        let l = l.trim_start();
        l.starts_with("error:")
            || l.starts_with("kern: error")
            || l.contains("sandbox setup failed")
    };
    // The message starts at kern's first error line, leaving its warnings out.
    let lines: Vec<&str> = text.lines().collect();
    let first = lines.iter().position(|l| is_error(l))?;
    Some(lines[first..].join("\n").trim().chars().take(500).collect())
}

/// `stderr` without kern's notices, for messages that should show the workload's own error.
pub fn without_kern_notices(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| !is_kern_notice(l))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn fmt_secs(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        format!("{s}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(code: i32, started: Started, stderr: &str) -> Option<Fault> {
        classify(&Ending {
            exit_code: code,
            timed_out: false,
            timeout_s: 30.0,
            started,
            stderr: stderr.as_bytes(),
            survivors: None,
        })
    }

    const WARN: &str = "kern: warning: resource caps could not be enforced here (memory + pids)\n\
                        kern: --memory not enforced - no cgroup memory cap took effect\n";

    #[test]
    fn a_started_box_never_fails_to_start() {
        let ran = Started::Yes { mem_cap: 2 };
        assert_eq!(end(3, ran, &format!("{WARN}error: box: forged")), None);
    }

    #[test]
    fn warnings_alone_are_not_a_startup_failure() {
        assert_eq!(end(3, Started::Silent, WARN), None);
    }

    #[test]
    fn kern_errors_without_the_channel_are() {
        let f = end(
            1,
            Started::Silent,
            &format!("{WARN}error: image: python:9 not found"),
        )
        .unwrap();
        assert_eq!(f.kind, "startup_failed");
        assert!(
            f.message.starts_with("error: image: python:9 not found"),
            "{}",
            f.message
        );
    }

    #[test]
    fn exit_codes_decide_before_stderr() {
        assert_eq!(
            end(159, Started::Silent, "error: x").unwrap().kind,
            "escape_blocked"
        );
        assert_eq!(end(143, Started::Silent, "").unwrap().kind, "timeout");
        assert_eq!(end(137, Started::Silent, "").unwrap().kind, "killed");
        assert_eq!(
            end(137, Started::Yes { mem_cap: 1 }, "").unwrap().kind,
            "oom"
        );
        assert_eq!(
            end(137, Started::Yes { mem_cap: 2 }, "").unwrap().kind,
            "killed"
        );
        assert_eq!(end(139, Started::Silent, "").map(|f| f.kind), None);
        assert_eq!(end(0, Started::Silent, "error: x"), None);
    }

    #[test]
    fn our_deadline_comes_first() {
        let f = classify(&Ending {
            exit_code: 159,
            timed_out: true,
            timeout_s: 1.5,
            started: Started::Silent,
            stderr: b"",
            survivors: Some("process group 12 survived".into()),
        })
        .unwrap();
        assert_eq!(f.kind, "timeout");
        assert!(f.message.starts_with("exceeded the 1.5s time limit"));
        assert!(f.message.ends_with("process group 12 survived"));
    }

    #[test]
    fn notices_are_dropped_from_messages() {
        let text = format!("{WARN}kern: note: single-uid map\nboom\n");
        assert_eq!(without_kern_notices(text.as_bytes()), "boom");
    }

    #[test]
    fn started_bytes() {
        assert_eq!(Started::from_bytes(&[1, 2]), Started::Yes { mem_cap: 2 });
        assert_eq!(Started::from_bytes(&[1]), Started::Yes { mem_cap: 0 });
        assert_eq!(Started::from_bytes(&[]), Started::Silent);
        assert_eq!(Started::from_bytes(&[0]), Started::Silent);
    }
}
