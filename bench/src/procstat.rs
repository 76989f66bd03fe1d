//! What the kernel says about the processes under test: CPU time
//! (`/proc/<pid>/stat` utime + stime), peak resident memory (`VmHWM` in
//! `/proc/<pid>/status`, reset between runs through `clear_refs`), the
//! Postgres backends serving one database (found by their process titles),
//! and other builds competing for the cores.

use std::{fs, process::Command, sync::OnceLock};

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux almost always).
fn ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// User + system CPU seconds a process has used so far.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; fields restart after its ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat(5) are the 12th and 13th after the name.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / ticks_per_second())
}

/// Peak resident set size in kB since start or the last [`reset_peak_rss`].
pub fn peak_rss_kb(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Resets the peak RSS to the current RSS (proc(5): `clear_refs` value 5).
pub fn reset_peak_rss(pid: u32) -> bool {
    fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// Every process on the machine as (pid, command line with NULs as spaces).
fn processes() -> Vec<(u32, String)> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let line = String::from_utf8_lossy(&raw).replace('\0', " ");
        Some((pid, line))
    })
    .collect()
}

/// The Postgres backends connected to `database` (titles like
/// `postgres: 15/main: postgres <database> 127.0.0.1(port) idle`).
pub fn postgres_backends(database: &str) -> Vec<u32> {
    let needle = format!(" {database} ");
    processes()
        .into_iter()
        .filter(|(_, cmd)| cmd.starts_with("postgres: ") && cmd.contains(&needle))
        .map(|(pid, _)| pid)
        .collect()
}

/// CPU seconds of a set of processes, by pid (missing ones left out).
pub fn cpu_by_pid(pids: &[u32]) -> Vec<(u32, f64)> {
    pids.iter()
        .filter_map(|&p| cpu_seconds(p).map(|s| (p, s)))
        .collect()
}

/// CPU used between two snapshots; a process that appeared in between
/// counts from zero, one that vanished is lost (rare: the pool keeps its
/// connections).
pub fn cpu_delta(before: &[(u32, f64)], after: &[(u32, f64)]) -> f64 {
    after
        .iter()
        .map(|(pid, now)| {
            let then = before
                .iter()
                .find(|(p, _)| p == pid)
                .map_or(0.0, |(_, s)| *s);
            (now - then).max(0.0)
        })
        .sum()
}

/// How many compiler or cargo processes are running (other engineers'
/// builds on a shared machine), for the noise notes.
pub fn competing_builds() -> usize {
    processes()
        .iter()
        .filter(|(_, cmd)| {
            let exe = cmd.split_whitespace().next().unwrap_or_default();
            let name = exe.rsplit('/').next().unwrap_or_default();
            matches!(name, "rustc" | "cargo" | "cc1" | "cc1plus" | "ld" | "clang")
        })
        .count()
}

/// The 1-minute load average.
pub fn load_average() -> f64 {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_measurable() {
        let me = std::process::id();
        assert!(cpu_seconds(me).is_some());
        assert!(peak_rss_kb(me).is_some_and(|kb| kb > 0));
        let before = vec![(1, 1.0), (2, 5.0)];
        let after = vec![(1, 1.5), (3, 0.25)];
        assert!((cpu_delta(&before, &after) - 0.75).abs() < 1e-9);
    }
}
