//! Resource usage of the box: its cgroup's own accounting where readable, else summed over /proc.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::writer::Reply;

/// The directory of this process's own cgroup (v2): /sys/fs/cgroup plus the path
/// /proc/self/cgroup names (just /sys/fs/cgroup inside a cgroup namespace, where that path is
/// "/"). None when that is the root cgroup (it has no memory.current): its figures are the whole
/// host's, as in a kern box that shows the host's hierarchy without a cgroup namespace.
fn cgroup_dir() -> Option<PathBuf> {
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let rel = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/");
    let dir = PathBuf::from("/sys/fs/cgroup").join(rel.trim_start_matches('/'));
    [dir, PathBuf::from("/sys/fs/cgroup")]
        .into_iter()
        .find(|d| d.join("memory.current").exists())
}

fn read_u64(dir: &Path, file: &str) -> Option<u64> {
    fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()
}

fn cpu_usage_usec(dir: &Path) -> Option<u64> {
    let stat = fs::read_to_string(dir.join("cpu.stat")).ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
}

/// `memory.max`: a number, or "max" (no limit).
fn memory_limit(dir: &Path) -> Option<u64> {
    let text = fs::read_to_string(dir.join("memory.max")).ok()?;
    text.trim().parse().ok()
}

/// (cpu µs, resident bytes, process count) summed over /proc/[0-9]*.
fn proc_totals() -> (u64, u64, u64) {
    // SAFETY: sysconf has no memory effects.
    let (ticks, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let (ticks, page) = (ticks.max(1) as u64, page.max(1) as u64);
    let (mut cpu, mut rss, mut count) = (0u64, 0u64, 0u64);
    let Ok(dir) = fs::read_dir("/proc") else {
        return (0, 0, 0);
    };
    for item in dir.flatten() {
        let name = item.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        count += 1;
        let base = item.path();
        if let Ok(stat) = fs::read_to_string(base.join("stat")) {
            // Fields after the parenthesized command: utime, stime, cutime, cstime are the 14th
            // to 17th. Reaped children's time (cutime, cstime) counts too, so the total only
            // grows: everything is reaped by a live ancestor, at the latest by PID 1.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let t = |i: usize| {
                fields
                    .get(i)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            cpu += (t(11) + t(12) + t(13) + t(14)) * 1_000_000 / ticks;
        }
        if let Ok(statm) = fs::read_to_string(base.join("statm")) {
            let resident = statm
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok());
            rss += resident.unwrap_or(0) * page;
        }
    }
    (cpu, rss, count)
}

/// One sample; the host derives a CPU percentage from two.
pub fn sample() -> Reply {
    let dir = cgroup_dir();
    let dir = dir.as_deref();
    let cgroup = (
        dir.and_then(cpu_usage_usec),
        dir.and_then(|d| read_u64(d, "memory.current")),
        dir.and_then(|d| read_u64(d, "pids.current")),
    );
    let fallback = match cgroup {
        (Some(_), Some(_), Some(_)) => (0, 0, 0),
        _ => proc_totals(),
    };
    let limit: Value = dir.and_then(memory_limit).map_or(Value::Null, Value::from);
    Reply::with(json!({
        "cpuUsageUsec": cgroup.0.unwrap_or(fallback.0),
        "memoryBytes": cgroup.1.unwrap_or(fallback.1),
        "memoryLimitBytes": limit,
        "pids": cgroup.2.unwrap_or(fallback.2),
        "diskBytes": null,
    }))
}
