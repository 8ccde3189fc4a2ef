//! `wisp bridge` as a process: native gRPC in, gRPC-web to an upstream out. Behind
//! [`Via::Bridge`](super::Via::Bridge) every scenario runs through one in front of its
//! `wisp serve`.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;

use super::{CliOutput, READY_TIMEOUT, wisp_command};

/// A running `wisp bridge`, killed on drop.
pub struct Bridge {
    child: Child,
    addr: SocketAddr,
    /// Where `/metrics` is served, with `--admin-addr`.
    admin: Option<SocketAddr>,
    log: PathBuf,
}

impl Bridge {
    /// Starts `wisp bridge --listen 127.0.0.1:0 --upstream <upstream> <extra...>` with
    /// debug logging as JSON lines (one per forwarded call) to `<dir>/bridge-<n>.log` and
    /// waits for its `wisp bridge listening on <addr>` line.
    pub fn start(upstream: &str, dir: &Path, extra: &[&str]) -> Bridge {
        Self::start_command(wisp_command(), upstream, dir, extra)
    }

    /// [`Bridge::start`] with `command` as the `wisp` binary (e.g. the one in the
    /// container image, run in its root filesystem).
    pub fn start_command(
        mut command: std::process::Command,
        upstream: &str,
        dir: &Path,
        extra: &[&str],
    ) -> Bridge {
        let log = (0..)
            .map(|n| dir.join(format!("bridge-{n}.log")))
            .find(|p| !p.exists())
            .expect("a free log name");
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("open the bridge log");
        let mut child = command
            .args(["--log", "info,wisp_bridge=debug", "--log-json", "bridge"])
            .args(["--listen", "127.0.0.1:0", "--upstream", upstream])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn wisp bridge");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut bridge = Bridge {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin: None,
            log,
        };
        loop {
            match rx.recv_timeout(READY_TIMEOUT) {
                Ok(line) => {
                    if let Some(addr) = line.strip_prefix("wisp bridge admin listening on ") {
                        bridge.admin = Some(addr.trim().parse().expect("address in the line"));
                    }
                    if let Some(addr) = line.strip_prefix("wisp bridge listening on ") {
                        bridge.addr = addr.trim().parse().expect("address in the ready line");
                        return bridge;
                    }
                }
                Err(err) => panic!(
                    "wisp bridge did not become ready ({err}); log:\n{}",
                    bridge.log_text()
                ),
            }
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address of `/metrics` (the bridge was started with `--admin-addr`).
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin
            .expect("the bridge serves /metrics (--admin-addr)")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `limit` for the process to exit.
    pub async fn wait_exit(
        &mut self,
        limit: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for wisp bridge") {
                return Some(status);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log's lines about calls of `method` (a path's last segment): what the bridge
    /// logged for each, as `(level, fields)`.
    pub fn calls_logged(&self, method: &str) -> Vec<(String, serde_json::Value)> {
        let suffix = format!("/{method}");
        self.log_text()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|entry| {
                entry["fields"]["method"]
                    .as_str()
                    .is_some_and(|m| m.ends_with(&suffix))
            })
            .map(|entry| {
                let level = entry["level"].as_str().unwrap_or_default().to_string();
                (level, entry["fields"].clone())
            })
            .collect()
    }
}

/// Runs `wisp bridge <args>` that is expected to exit (bad arguments).
pub fn bridge_cli(args: &[&str]) -> CliOutput {
    let out = wisp_command()
        .arg("bridge")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run wisp bridge");
    CliOutput {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
