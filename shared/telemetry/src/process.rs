//! The process's own CPU, memory, files and threads, in the Prometheus text format, with
//! the names Prometheus's Go client (and so upstream PipeCD's `/metrics`) gives them, so
//! that a dashboard reading upstream's `process_*` series reads Wisp's.
//!
//! Why not a crate: neither `metrics` nor `metrics-exporter-prometheus` (the crates in
//! the tree) collect process metrics, and the `metrics` facade's counters are integers,
//! while `process_cpu_seconds_total` is fractional. So `/metrics` appends these lines,
//! read from `/proc/self` at each scrape (a few small file reads). Off Linux, nothing.

use std::fmt::Write as _;

/// CPU time, user and system, in seconds (a counter).
pub const CPU_SECONDS: &str = "process_cpu_seconds_total";
/// Resident memory (bytes).
pub const RESIDENT_MEMORY: &str = "process_resident_memory_bytes";
/// Virtual memory (bytes).
pub const VIRTUAL_MEMORY: &str = "process_virtual_memory_bytes";
/// Open file descriptors (sockets included).
pub const OPEN_FDS: &str = "process_open_fds";
/// The soft limit on open file descriptors.
pub const MAX_FDS: &str = "process_max_fds";
/// OS threads.
pub const THREADS: &str = "process_threads";
/// Start time, seconds since the Unix epoch.
pub const START_TIME: &str = "process_start_time_seconds";

/// Every process metric name.
pub const ALL: &[&str] = &[
    CPU_SECONDS,
    RESIDENT_MEMORY,
    VIRTUAL_MEMORY,
    OPEN_FDS,
    MAX_FDS,
    THREADS,
    START_TIME,
];

/// Clock ticks per second in `/proc/<pid>/stat`: USER_HZ, fixed at 100 in the kernel's
/// user-space ABI on the architectures Wisp ships for (x86_64, aarch64).
const TICKS_PER_SECOND: f64 = 100.0;

/// What was read; a field that could not be read is `None` and its metric left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub threads: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

impl ProcessStats {
    /// Reads this process's figures from `/proc/self` (all `None` where there is none).
    pub fn read() -> ProcessStats {
        let mut stats = ProcessStats::default();
        if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
            let boot = std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|s| boot_time(&s));
            stats.apply_stat(&stat, boot);
        }
        if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
            stats.resident_bytes = status_kib(&status, "VmRSS:").map(|k| k * 1024);
        }
        stats.open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|dir| dir.count() as u64);
        stats.max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|s| max_open_files(&s));
        stats
    }

    /// Fields of `/proc/self/stat` (after the command name, which may hold spaces and
    /// parentheses): utime 14, stime 15, num_threads 20, starttime 22, vsize 23.
    fn apply_stat(&mut self, stat: &str, boot_time: Option<u64>) {
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return;
        };
        // `rest` starts at field 3 (state).
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
        if let (Some(user), Some(system)) = (field(14), field(15)) {
            self.cpu_seconds = Some((user + system) as f64 / TICKS_PER_SECOND);
        }
        self.threads = field(20);
        self.virtual_bytes = field(23);
        if let (Some(start), Some(boot)) = (field(22), boot_time) {
            self.start_time_seconds = Some(boot as f64 + start as f64 / TICKS_PER_SECOND);
        }
    }

    /// One sample per figure read, with the Go client's HELP text.
    pub fn samples(&self) -> Vec<Sample> {
        let float = |v: Option<u64>| v.map(|v| v as f64);
        [
            (
                CPU_SECONDS,
                "counter",
                "Total user and system CPU time spent in seconds.",
                self.cpu_seconds,
            ),
            (
                OPEN_FDS,
                "gauge",
                "Number of open file descriptors.",
                float(self.open_fds),
            ),
            (
                MAX_FDS,
                "gauge",
                "Maximum number of open file descriptors.",
                float(self.max_fds),
            ),
            (
                VIRTUAL_MEMORY,
                "gauge",
                "Virtual memory size in bytes.",
                float(self.virtual_bytes),
            ),
            (
                RESIDENT_MEMORY,
                "gauge",
                "Resident memory size in bytes.",
                float(self.resident_bytes),
            ),
            (
                START_TIME,
                "gauge",
                "Start time of the process since unix epoch in seconds.",
                self.start_time_seconds,
            ),
            (
                THREADS,
                "gauge",
                "Number of OS threads in the process.",
                float(self.threads),
            ),
        ]
        .into_iter()
        .filter_map(|(name, kind, help, value)| {
            value.map(|value| Sample {
                name,
                kind,
                help,
                value,
            })
        })
        .collect()
    }

    /// The Prometheus text lines (HELP, TYPE, sample) of every figure read.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for sample in self.samples() {
            sample.write(&mut out);
        }
        out
    }
}

/// One unlabelled sample of the process's own, with its family's HELP and TYPE.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: &'static str,
    pub kind: &'static str,
    pub help: &'static str,
    pub value: f64,
}

impl Sample {
    /// Appends its HELP, TYPE and sample lines.
    pub fn write(&self, out: &mut String) {
        let Sample {
            name,
            kind,
            help,
            value,
        } = self;
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let _ = writeln!(out, "{name} {value}");
    }
}

/// [`ProcessStats::read`] rendered: what `/metrics` appends.
pub fn render() -> String {
    ProcessStats::read().render()
}

/// `btime` of `/proc/stat`: the boot time, seconds since the epoch.
fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// A `kB` line of `/proc/self/status`.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The soft limit of "Max open files" in `/proc/self/limits`.
fn max_open_files(limits: &str) -> Option<u64> {
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat_with_a_tricky_command_name() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
        // cmajflt utime stime cutime cstime priority nice num_threads itrealvalue
        // starttime vsize rss ...
        let stat = "4242 (wisp (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 7 0 1234 123456789 2000 18446744073709551615";
        let mut s = ProcessStats::default();
        s.apply_stat(stat, Some(1_700_000_000));
        assert_eq!(s.cpu_seconds, Some(3.25));
        assert_eq!(s.threads, Some(7));
        assert_eq!(s.virtual_bytes, Some(123_456_789));
        assert_eq!(s.start_time_seconds, Some(1_700_000_012.34));
    }

    #[test]
    fn parses_status_limits_and_boot_time() {
        assert_eq!(
            status_kib("Name:\twisp\nVmRSS:\t   20480 kB\nThreads:\t7\n", "VmRSS:"),
            Some(20480)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
        assert_eq!(
            boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"),
            Some(1_700_000_000)
        );
    }

    /// This process's own figures are read, and every line is what Prometheus parses.
    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process() {
        let s = ProcessStats::read();
        assert!(s.cpu_seconds.is_some(), "{s:?}");
        assert!(s.resident_bytes.is_some_and(|b| b > 1024 * 1024), "{s:?}");
        assert!(s.open_fds.is_some_and(|n| n >= 3), "{s:?}");
        assert!(s.max_fds.is_some_and(|n| n > 0), "{s:?}");
        assert!(s.threads.is_some_and(|n| n >= 1), "{s:?}");
        assert!(s.start_time_seconds.is_some_and(|t| t > 1.5e9), "{s:?}");
        let text = s.render();
        for name in ALL {
            assert!(text.contains(&format!("\n{name} ")), "{name} in {text}");
        }
    }
}
