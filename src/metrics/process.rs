//! The `process_*` families every Prometheus client library exports, read
//! from `/proc/self` at scrape time (Linux; elsewhere they are left out).

use super::text::{Exposition, Kind};

/// Clock ticks per second of `/proc/<pid>/stat`'s CPU times: USER_HZ, which
/// the kernel's ABI fixes at 100 on the architectures Linux supports today.
const TICKS_PER_SECOND: f64 = 100.0;

/// What `/proc/self` says right now; `None` where it could not be read.
#[derive(Debug, Default, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
}

impl ProcessStats {
    pub fn read() -> Self {
        let read = |name: &str| std::fs::read_to_string(format!("/proc/self/{name}")).ok();
        Self {
            cpu_seconds: read("stat").as_deref().and_then(cpu_seconds),
            resident_bytes: read("status").as_deref().and_then(resident_bytes),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|d| d.count() as f64),
            max_fds: read("limits").as_deref().and_then(max_fds),
        }
    }

    pub fn write(&self, e: &mut Exposition) {
        let families = [
            (
                "process_cpu_seconds_total",
                Kind::Counter,
                "Total user and system CPU time spent in seconds.",
                self.cpu_seconds,
            ),
            (
                "process_resident_memory_bytes",
                Kind::Gauge,
                "Resident memory size in bytes.",
                self.resident_bytes,
            ),
            (
                "process_open_fds",
                Kind::Gauge,
                "Number of open file descriptors.",
                self.open_fds,
            ),
            (
                "process_max_fds",
                Kind::Gauge,
                "Maximum number of open file descriptors.",
                self.max_fds,
            ),
        ];
        for (name, kind, help, value) in families {
            if let Some(value) = value {
                e.family(name, kind, help);
                e.sample(name, &[], value);
            }
        }
    }
}

/// utime + stime, fields 14 and 15 of `stat`, counted after the command
/// name, which is in parentheses and may itself hold spaces.
fn cpu_seconds(stat: &str) -> Option<f64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // `after_name` starts at field 3 (state).
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SECOND)
}

/// `VmRSS:   1234 kB` of `status`.
fn resident_bytes(status: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

/// The soft limit of `Max open files` in `limits`.
fn max_fds(limits: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_parsed() {
        let stat =
            "4242 (tokio (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 100 0 0";
        assert_eq!(cpu_seconds(stat), Some(3.0));
        assert_eq!(
            resident_bytes("Name:\tmcp\nVmRSS:\t   2048 kB\n"),
            Some(2048.0 * 1024.0)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n";
        assert_eq!(max_fds(limits), Some(1024.0));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_measured() {
        let stats = ProcessStats::read();
        assert!(stats.resident_bytes.is_some_and(|b| b > 0.0), "{stats:?}");
        assert!(stats.open_fds.is_some_and(|n| n >= 3.0), "{stats:?}");
        assert!(stats.cpu_seconds.is_some(), "{stats:?}");
    }
}
