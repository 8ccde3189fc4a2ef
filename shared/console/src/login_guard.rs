//! What bounds the static admin login's work (issue 33): where a login comes from (the
//! source its failures are counted by), and the bcrypt checks the process runs at once.
//!
//! The source is the connection's peer address. `X-Forwarded-For` is believed only from
//! the proxies the operator names (`wisp serve --trusted-proxy CIDR`): then the source is
//! the rightmost address in it that is not such a proxy (every proxy appends the address
//! it saw; what a client wrote itself is further left and is never taken). A request with
//! no peer address is one the Lambda function got from the ALB, the function's only way
//! in: the ALB appends the address it saw, so the rightmost entry is taken.
//!
//! bcrypt takes tens of milliseconds of CPU: at most [`PasswordChecks`]' slots run at
//! once, a few more wait, and a login past that is told to try again at once, instead of
//! a queue that grows until every login times out.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use tokio::sync::Semaphore;

/// An address range, `10.0.0.0/8` or a single address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl std::str::FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = match s.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not an address or address/prefix"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{s:?}: the prefix must be 0 to {max}"))?,
        };
        Ok(Cidr { addr, prefix })
    }
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match (self.addr, ip) {
            (IpAddr::V4(_), IpAddr::V6(v6)) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            _ => ip,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// The source a login is counted by (see the module docs).
pub fn client_source(req: &Request<Bytes>, trusted_proxies: &[Cidr]) -> String {
    let peer = req
        .extensions()
        .get::<tonic::transport::server::TcpConnectInfo>()
        .and_then(|info| info.remote_addr())
        .map(|addr| addr.ip());
    let forwarded = || {
        req.headers()
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|a| a.trim().parse::<IpAddr>().ok())
            .collect::<Vec<_>>()
    };
    let trusted = |ip: &IpAddr| trusted_proxies.iter().any(|c| c.contains(*ip));
    let source = match peer {
        Some(peer) if !trusted(&peer) => Some(peer),
        Some(peer) => forwarded()
            .into_iter()
            .rev()
            .find(|ip| !trusted(ip))
            .or(Some(peer)),
        None => forwarded().into_iter().next_back(),
    };
    source.map_or_else(|| "unknown".to_string(), |ip| canonical(ip).to_string())
}

/// IPv4 as itself even when it came mapped into IPv6 (one source, one count).
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// A bcrypt hash of the default cost ([`wisp_auth::hash_secret`]) that no password matches:
/// a login for an unknown project or a disabled admin is checked against it, so that it
/// costs what a wrong password costs. Made once, on first use.
pub fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| {
        // A fresh random secret each process: no one knows what it matches.
        let secret = wisp_auth::generate_piped_key();
        // Should hashing fail, an empty hash matches nothing (verify_secret is then
        // cheap, which only loosens the timing, never the check).
        wisp_auth::hash_secret(&secret).unwrap_or_default()
    })
}

/// How long a password check waits for a slot before the login is told to try again.
const MAX_WAIT: Duration = Duration::from_secs(2);

/// The password checks running at once, and the few that may wait for a slot.
#[derive(Debug, Clone)]
pub struct PasswordChecks {
    slots: Arc<Semaphore>,
    admitted: Arc<Semaphore>,
}

/// Too many password checks at once: the caller should try again in a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many logins at once")]
pub struct Busy;

impl Default for PasswordChecks {
    /// Half the CPUs (at least one) check at once; as many again may wait.
    fn default() -> Self {
        let slots = std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1));
        PasswordChecks::new(slots, slots.max(4))
    }
}

impl PasswordChecks {
    pub fn new(slots: usize, waiting: usize) -> Self {
        PasswordChecks {
            slots: Arc::new(Semaphore::new(slots.max(1))),
            admitted: Arc::new(Semaphore::new(slots.max(1) + waiting)),
        }
    }

    /// Runs `check` (CPU work) on the blocking pool once a slot is free; [`Busy`] when
    /// the slots and the waiting places are taken, or no slot frees up in time.
    pub async fn run<T: Send + 'static>(
        &self,
        check: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Busy> {
        let Ok(admitted) = self.admitted.clone().try_acquire_owned() else {
            return Err(Busy);
        };
        let slot = match tokio::time::timeout(MAX_WAIT, self.slots.clone().acquire_owned()).await {
            Ok(Ok(slot)) => slot,
            _ => return Err(Busy),
        };
        // The permits go with the work: a caller that leaves does not free a slot whose
        // bcrypt is still running.
        tokio::task::spawn_blocking(move || {
            let _held = (admitted, slot);
            check()
        })
        .await
        .map_err(|_| Busy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(peer: Option<&str>, forwarded: &[&str]) -> Request<Bytes> {
        let mut req = Request::new(Bytes::new());
        for f in forwarded {
            req.headers_mut()
                .append("x-forwarded-for", f.parse().unwrap());
        }
        if let Some(peer) = peer {
            req.extensions_mut()
                .insert(tonic::transport::server::TcpConnectInfo {
                    local_addr: None,
                    remote_addr: Some(peer.parse().unwrap()),
                });
        }
        req
    }

    #[test]
    fn forwarded_for_is_believed_only_from_trusted_proxies() {
        let trusted: Vec<Cidr> = vec!["10.0.0.0/8".parse().unwrap()];
        // A client's own header is not believed.
        let spoofed = request(Some("203.0.113.7:5000"), &["198.51.100.1"]);
        assert_eq!(client_source(&spoofed, &trusted), "203.0.113.7");
        // Through the proxy: the rightmost address the proxy did not add itself.
        let proxied = request(Some("10.1.2.3:5000"), &["1.1.1.1, 203.0.113.7", "10.9.9.9"]);
        assert_eq!(client_source(&proxied, &trusted), "203.0.113.7");
        // Without trusted proxies, the peer.
        assert_eq!(client_source(&proxied, &[]), "10.1.2.3");
        // The ALB in front of the Lambda function: its own entry, the last.
        let alb = request(None, &["1.1.1.1, 203.0.113.9"]);
        assert_eq!(client_source(&alb, &[]), "203.0.113.9");
        assert_eq!(client_source(&request(None, &[]), &[]), "unknown");
        let mapped = request(Some("[::ffff:192.0.2.1]:80"), &[]);
        assert_eq!(client_source(&mapped, &[]), "192.0.2.1");
    }

    #[test]
    fn cidrs_parse_and_match() {
        let net: Cidr = "192.168.0.0/16".parse().unwrap();
        assert!(net.contains("192.168.4.5".parse().unwrap()));
        assert!(!net.contains("192.169.0.1".parse().unwrap()));
        assert!(net.contains("::ffff:192.168.1.1".parse().unwrap()));
        let one: Cidr = "fd00::1".parse().unwrap();
        assert!(one.contains("fd00::1".parse().unwrap()));
        assert!(!one.contains("fd00::2".parse().unwrap()));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("nonsense".parse::<Cidr>().is_err());
    }

    /// One slot and one waiting place: a third check is turned away at once, and the
    /// two admitted ones finish.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checks_past_the_slots_and_the_queue_are_busy() {
        let checks = PasswordChecks::new(1, 1);
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let first = {
            let checks = checks.clone();
            tokio::spawn(async move {
                checks
                    .run(move || {
                        let _ = hold.recv();
                        1
                    })
                    .await
            })
        };
        while checks.slots.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        let second = {
            let checks = checks.clone();
            tokio::spawn(async move { checks.run(|| 2).await })
        };
        while checks.admitted.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(checks.run(|| 3).await, Err(Busy));
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap(), Ok(1));
        assert_eq!(second.await.unwrap(), Ok(2));
    }
}
