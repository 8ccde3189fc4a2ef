//! How busy the machine was during a phase, and how much of that was this process: a
//! benchmark on a shared machine is only as good as the CPU it had (Linux `/proc`; other
//! systems report nothing).

/// Cumulative CPU time, in clock ticks.
#[derive(Debug, Clone, Copy)]
pub struct CpuSample {
    /// All CPUs, every state.
    total: u64,
    /// All CPUs, idle or waiting for I/O.
    idle: u64,
    /// This process, user + system.
    own: u64,
}

/// Shares of the machine's CPU time over an interval, in percent of all CPUs.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct CpuShare {
    pub this_process_pct: f64,
    pub other_processes_pct: f64,
}

pub fn sample() -> Option<CpuSample> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .map_while(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    if fields.len() < 8 {
        return None;
    }
    let total = fields[..8].iter().sum();
    let idle = fields[3] + fields[4];
    let own_stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at field 3; utime and
    // stime are fields 14 and 15.
    let after_name = own_stat.rsplit_once(") ")?.1;
    let mut rest = after_name.split_whitespace().skip(11);
    let utime: u64 = rest.next()?.parse().ok()?;
    let stime: u64 = rest.next()?.parse().ok()?;
    Some(CpuSample {
        total,
        idle,
        own: utime + stime,
    })
}

/// What this process and everything else used between two samples.
pub fn share(before: Option<CpuSample>, after: Option<CpuSample>) -> Option<CpuShare> {
    let (a, b) = (before?, after?);
    let total = b.total.checked_sub(a.total).filter(|t| *t > 0)? as f64;
    let busy = (b.total - a.total).saturating_sub(b.idle.saturating_sub(a.idle)) as f64;
    let own = b.own.saturating_sub(a.own) as f64;
    Some(CpuShare {
        this_process_pct: (own / total * 100.0).min(100.0),
        other_processes_pct: ((busy - own).max(0.0) / total * 100.0).min(100.0),
    })
}
