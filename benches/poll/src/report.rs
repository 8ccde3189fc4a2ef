//! Figures, ratios and targets: a human table and the same as JSON.

use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::load::{Mix, PhaseOutcome};
use crate::sysload::CpuShare;

/// The targets of the issue.
pub const TARGET_SATURATION_RPS_RATIO: f64 = 0.5;
pub const TARGET_SATURATION_P99_RATIO: f64 = 2.0;
pub const TARGET_CADENCE_P99_MS: f64 = 2.0;

#[derive(Debug, Serialize)]
pub struct Settings {
    pub pipeds: u64,
    pub saturation_secs: u64,
    pub warmup_secs: u64,
    pub mix: Mix,
    pub cadence_secs: u64,
    pub list_every_secs: u64,
    pub stat_every_secs: u64,
    pub max_requests: u64,
    pub stat_bytes: u64,
    pub cpus: usize,
    pub server_threads: usize,
    pub client_threads: usize,
    pub verified_ttl_secs: u64,
}

/// bcrypt verifications the Wisp verifier counted during one phase.
#[derive(Debug, Clone, Copy)]
pub struct BcryptCount(pub u64);

#[derive(Debug, Serialize)]
pub struct Latency {
    pub count: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Self {
        let ms = |ns: u64| ns as f64 / 1e6;
        if h.is_empty() {
            return Latency {
                count: 0,
                p50_ms: 0.0,
                p90_ms: 0.0,
                p99_ms: 0.0,
                p999_ms: 0.0,
                max_ms: 0.0,
                mean_ms: 0.0,
            };
        }
        Latency {
            count: h.len(),
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
            mean_ms: h.mean() / 1e6,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct PhaseReport {
    pub phase: &'static str,
    pub server: &'static str,
    /// Calls answered OK.
    pub requests: u64,
    pub errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    pub elapsed_secs: f64,
    pub requests_per_sec: f64,
    /// True when `--max-requests`, not the clock, ended the phase.
    pub capped: bool,
    pub latency: Latency,
    pub list_unhandled_commands: Latency,
    pub report_stat: Latency,
    /// Wisp only (the no-op server verifies nothing).
    pub bcrypt_verifications: Option<u64>,
    pub bcrypt_per_1000_requests: Option<f64>,
    /// CPU used during the phase, in percent of all CPUs (Linux only). Other processes'
    /// share above a few percent means the figures are not clean.
    pub cpu: Option<CpuShare>,
}

impl PhaseReport {
    pub fn new(
        phase: &'static str,
        server: &'static str,
        outcome: &PhaseOutcome,
        bcrypt: Option<BcryptCount>,
        cpu: Option<CpuShare>,
    ) -> Self {
        let requests = outcome.ok_requests();
        let elapsed = outcome.elapsed.as_secs_f64();
        let all_calls = requests + outcome.errors;
        PhaseReport {
            phase,
            server,
            requests,
            errors: outcome.errors,
            first_error: outcome.first_error.clone(),
            elapsed_secs: elapsed,
            requests_per_sec: if elapsed > 0.0 {
                requests as f64 / elapsed
            } else {
                0.0
            },
            capped: outcome.capped,
            latency: Latency::of(&outcome.all),
            list_unhandled_commands: Latency::of(&outcome.list),
            report_stat: Latency::of(&outcome.stat),
            bcrypt_verifications: bcrypt.map(|b| b.0),
            bcrypt_per_1000_requests: bcrypt.map(|b| {
                if all_calls > 0 {
                    b.0 as f64 * 1000.0 / all_calls as f64
                } else {
                    0.0
                }
            }),
            cpu,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Ratios {
    /// wisp req/s ÷ no-op req/s at saturation.
    pub saturation_rps: Option<f64>,
    /// wisp p99 ÷ no-op p99 at saturation.
    pub saturation_p99: Option<f64>,
    /// wisp p99 ÷ no-op p99 at the real cadence.
    pub cadence_p99: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Target {
    pub name: &'static str,
    pub value: f64,
    pub limit: String,
    pub met: bool,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub settings: Settings,
    /// Creating the project and registering the pipeds.
    pub register_secs: f64,
    /// One call of each RPC per piped, both servers (the first check of each key).
    pub warm_up_secs: f64,
    pub warm_up_bcrypt_verifications: u64,
    pub phases: Vec<PhaseReport>,
    pub ratios: Ratios,
    pub targets: Vec<Target>,
}

impl Report {
    pub fn new(
        settings: Settings,
        register: Duration,
        warm_up: Duration,
        warm_up_bcrypt: u64,
        phases: Vec<PhaseReport>,
    ) -> Self {
        let find = |phase: &str, server: &str| {
            phases
                .iter()
                .find(|p| p.phase == phase && p.server == server)
        };
        let ratio = |a: f64, b: f64| if b > 0.0 { Some(a / b) } else { None };
        let (sat_noop, sat_wisp) = (find("saturation", "noop"), find("saturation", "wisp"));
        let (cad_noop, cad_wisp) = (find("cadence", "noop"), find("cadence", "wisp"));
        let both =
            |a: Option<&PhaseReport>, b: Option<&PhaseReport>, f: fn(&PhaseReport) -> f64| {
                a.zip(b).and_then(|(w, n)| ratio(f(w), f(n)))
            };
        let ratios = Ratios {
            saturation_rps: both(sat_wisp, sat_noop, |p| p.requests_per_sec),
            saturation_p99: both(sat_wisp, sat_noop, |p| p.latency.p99_ms),
            cadence_p99: both(cad_wisp, cad_noop, |p| p.latency.p99_ms),
        };

        let mut targets = Vec::new();
        if let Some(value) = ratios.saturation_rps {
            targets.push(Target {
                name: "saturation: wisp req/s / no-op req/s",
                value,
                limit: format!(">= {TARGET_SATURATION_RPS_RATIO:.2}"),
                met: value >= TARGET_SATURATION_RPS_RATIO,
            });
        }
        if let Some(value) = ratios.saturation_p99 {
            targets.push(Target {
                name: "saturation: wisp p99 / no-op p99",
                value,
                limit: format!("<= {TARGET_SATURATION_P99_RATIO:.2}"),
                met: value <= TARGET_SATURATION_P99_RATIO,
            });
        }
        if let Some(p) = cad_wisp {
            targets.push(Target {
                name: "cadence: wisp p99 (ms)",
                value: p.latency.p99_ms,
                limit: format!("< {TARGET_CADENCE_P99_MS:.2}"),
                met: p.latency.count > 0 && p.latency.p99_ms < TARGET_CADENCE_P99_MS,
            });
        }
        for p in [sat_wisp, cad_wisp].into_iter().flatten() {
            let value = p.bcrypt_per_1000_requests.unwrap_or(0.0);
            targets.push(Target {
                name: if p.phase == "saturation" {
                    "saturation: wisp bcrypt per 1,000 requests"
                } else {
                    "cadence: wisp bcrypt per 1,000 requests"
                },
                value,
                limit: "= 0".into(),
                met: p.bcrypt_verifications == Some(0),
            });
        }
        let errors: u64 = phases.iter().map(|p| p.errors).sum();
        targets.push(Target {
            name: "failed calls, all phases",
            value: errors as f64,
            limit: "= 0".into(),
            met: errors == 0,
        });

        Report {
            settings,
            register_secs: register.as_secs_f64(),
            warm_up_secs: warm_up.as_secs_f64(),
            warm_up_bcrypt_verifications: warm_up_bcrypt,
            phases,
            ratios,
            targets,
        }
    }

    pub fn all_targets_met(&self) -> bool {
        self.targets.iter().all(|t| t.met)
    }

    pub fn table(&self) -> String {
        let s = &self.settings;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\npoll-bench: {} pipeds (1 h2c connection, 1 call in flight each) on 127.0.0.1; \
             {} CPUs; server runtime {} threads, piped runtime {} threads",
            s.pipeds, s.cpus, s.server_threads, s.client_threads
        );
        let _ = writeln!(
            out,
            "saturation {} s (after {} s unmeasured, RPCs: {:?}); cadence {} s (List every {} s, \
             ReportStat every {} s); ReportStat carries {} B of changing metrics; \
             verified-credential TTL {} s",
            s.saturation_secs,
            s.warmup_secs,
            s.mix,
            s.cadence_secs,
            s.list_every_secs,
            s.stat_every_secs,
            s.stat_bytes,
            s.verified_ttl_secs
        );
        let _ = writeln!(
            out,
            "setup: registration {:.1} s; warm-up {:.1} s with {} bcrypt verifications\n",
            self.register_secs, self.warm_up_secs, self.warm_up_bcrypt_verifications
        );
        let header = [
            "phase",
            "server",
            "requests",
            "errors",
            "req/s",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "p99.9 ms",
            "max ms",
            "bcrypt",
            "bcrypt/1k",
            "cpu%",
            "other%",
        ];
        let mut rows = vec![header.map(String::from).to_vec()];
        let dash = || "-".to_string();
        for p in &self.phases {
            let l = &p.latency;
            rows.push(vec![
                p.phase.to_string(),
                p.server.to_string(),
                p.requests.to_string(),
                p.errors.to_string(),
                format!("{:.0}", p.requests_per_sec),
                format!("{:.3}", l.p50_ms),
                format!("{:.3}", l.p90_ms),
                format!("{:.3}", l.p99_ms),
                format!("{:.3}", l.p999_ms),
                format!("{:.3}", l.max_ms),
                p.bcrypt_verifications.map_or_else(dash, |b| b.to_string()),
                p.bcrypt_per_1000_requests
                    .map_or_else(dash, |b| format!("{b:.2}")),
                p.cpu
                    .map_or_else(dash, |c| format!("{:.0}", c.this_process_pct)),
                p.cpu
                    .map_or_else(dash, |c| format!("{:.0}", c.other_processes_pct)),
            ]);
        }
        let widths: Vec<usize> = (0..header.len())
            .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        for row in &rows {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(c, cell)| {
                    if c < 2 {
                        format!("{cell:<w$}", w = widths[c])
                    } else {
                        format!("{cell:>w$}", w = widths[c])
                    }
                })
                .collect();
            let _ = writeln!(out, "{}", cells.join("  "));
        }
        let _ = writeln!(
            out,
            "(cpu% / other%: CPU used by this process / by other processes, in % of all CPUs; \
             a large other% means the machine was shared and the figures are not clean)"
        );

        let _ = writeln!(out, "\nper RPC (p50 / p99 ms):");
        for p in &self.phases {
            let (a, b) = (&p.list_unhandled_commands, &p.report_stat);
            let _ = writeln!(
                out,
                "  {:<10} {:<4}  ListUnhandledCommands {:>7} calls {:>8.3} / {:>8.3}   \
                 ReportStat {:>7} calls {:>8.3} / {:>8.3}",
                p.phase, p.server, a.count, a.p50_ms, a.p99_ms, b.count, b.p50_ms, b.p99_ms
            );
        }
        for p in &self.phases {
            if p.capped {
                let _ = writeln!(
                    out,
                    "  note: {} {} ended at --max-requests",
                    p.phase, p.server
                );
            }
            if let Some(e) = &p.first_error {
                let _ = writeln!(out, "  first error in {} {}: {e}", p.phase, p.server);
            }
        }

        let show = |r: Option<f64>| r.map_or_else(dash, |r| format!("{r:.3}"));
        let _ = writeln!(out, "\nratios (wisp / no-op):");
        let _ = writeln!(
            out,
            "  saturation req/s  {}",
            show(self.ratios.saturation_rps)
        );
        let _ = writeln!(
            out,
            "  saturation p99    {}",
            show(self.ratios.saturation_p99)
        );
        let _ = writeln!(out, "  cadence p99       {}", show(self.ratios.cadence_p99));
        let _ = writeln!(out, "\ntargets:");
        for t in &self.targets {
            let _ = writeln!(
                out,
                "  {:<4} {:<44} {:>9.3}  (target {})",
                if t.met { "ok" } else { "MISS" },
                t.name,
                t.value,
                t.limit
            );
        }
        out
    }
}
