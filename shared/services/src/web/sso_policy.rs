//! Which addresses a project's SSO settings may make the control plane reach (issue 33):
//! the OIDC issuer and endpoints, GitHub Enterprise's address, the SSO proxy. A project
//! admin writes them, and the control plane fetches them on an unauthenticated
//! `POST /auth/login`, so they must not reach inside the network the control plane runs
//! in: `https://` only, to public addresses only, unless the operator allows private
//! ones (`wisp serve --sso-allow-private-addresses`, `WISP_SSO_ALLOW_PRIVATE_ADDRESSES` on
//! the Lambda functions: a provider in the same network, or
//! one run beside the control plane in tests, where plain `http://` to loopback is then
//! accepted too).
//!
//! The rule is applied when the settings are saved (UpdateProjectSSOConfig: the address
//! as written, host names not resolved), and again by the console before every fetch,
//! where each address a host name resolves to is checked and the connection made to the
//! checked address (`wisp_console`'s provider client), so DNS cannot rebind it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What the operator allows SSO settings to reach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProviderPolicy {
    /// Private, loopback, link-local and unique-local addresses (and `http://` to
    /// loopback).
    pub allow_private: bool,
}

impl ProviderPolicy {
    /// Whether a connection to `ip` is allowed.
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        self.allow_private || is_public(ip)
    }

    /// Checks a provider address as written: `https://` with a host (`http://` only to
    /// loopback, and only when private addresses are allowed); a host written as an
    /// address must be allowed ([`ProviderPolicy::allows_ip`]); `localhost` counts as
    /// loopback. The error says what is wrong, without the address.
    pub fn check_url(&self, url: &str) -> Result<(), String> {
        let (scheme, host) =
            split_url(url).ok_or_else(|| "it is not a URL with a host".to_string())?;
        self.check(&scheme, host)
    }

    /// [`ProviderPolicy::check_url`] on a URL already taken apart (by the HTTP client's own
    /// parser, so that what is checked is what is reached): its scheme and host
    /// (brackets of an IPv6 address allowed).
    pub fn check(&self, scheme: &str, host: &str) -> Result<(), String> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err("it has no host".into());
        }
        let literal = host.parse::<IpAddr>().ok();
        let lower = host.to_ascii_lowercase();
        let localhost = lower == "localhost" || lower.ends_with(".localhost");
        match scheme {
            "https" => {}
            "http" if self.allow_private => {
                if !(localhost || literal.is_some_and(|ip| ip.is_loopback())) {
                    return Err("http:// is accepted only to loopback; use https://".into());
                }
            }
            _ => return Err("it must be an https:// address".into()),
        }
        if localhost && !self.allow_private {
            return Err(PRIVATE_REFUSED.into());
        }
        if let Some(ip) = literal
            && !self.allows_ip(ip)
        {
            return Err(PRIVATE_REFUSED.into());
        }
        Ok(())
    }
}

/// `scheme://[userinfo@]host[:port][/...]` → the scheme (lower case) and the host.
fn split_url(url: &str) -> Option<(String, &str)> {
    let (scheme, rest) = url.trim().split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.0,
        None => host_port.split(':').next()?,
    };
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == '\\') {
        return None;
    }
    Some((scheme.to_ascii_lowercase(), host))
}

/// Why an address inside the network is refused, and the way out.
pub const PRIVATE_REFUSED: &str = "it is a private, loopback or link-local address, which the \
     control plane does not reach for SSO unless its operator allows it \
     (wisp serve --sso-allow-private-addresses; on Lambda WISP_SSO_ALLOW_PRIVATE_ADDRESSES=true)";

/// An address on the public internet: not private (RFC 1918, unique-local), loopback,
/// link-local, shared (CGNAT), unspecified, multicast, broadcast, documentation or
/// reserved; IPv4 inside IPv6 (mapped, compatible, NAT64) judged as the IPv4 it carries.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        // Shared address space (carrier-grade NAT), 100.64.0.0/10.
        || (a == 100 && (64..128).contains(&b))
        // IETF protocol assignments, 192.0.0.0/24.
        || (a == 192 && b == 0 && c == 0)
        // Benchmarking, 198.18.0.0/15.
        || (a == 198 && (b == 18 || b == 19))
        // Reserved, 240.0.0.0/4.
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    // IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::/96) carry an IPv4 address.
    if s[..6] == [0, 0, 0, 0, 0, 0] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let v4 = Ipv4Addr::new(
            (s[6] >> 8) as u8,
            (s[6] & 0xff) as u8,
            (s[7] >> 8) as u8,
            (s[7] & 0xff) as u8,
        );
        return !ip.is_loopback() && !ip.is_unspecified() && is_public_v4(v4);
    }
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // Unique local, fc00::/7.
        || (s[0] & 0xfe00) == 0xfc00
        // Link-local, fe80::/10, and the old site-local, fec0::/10.
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        // Documentation, 2001:db8::/32.
        || (s[0] == 0x2001 && s[1] == 0x0db8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_inside_the_network_are_not_public() {
        for inside in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "127.0.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "::127.0.0.1",
        ] {
            assert!(!is_public(inside.parse().unwrap()), "{inside}");
        }
        for outside in ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert!(is_public(outside.parse().unwrap()), "{outside}");
        }
    }

    #[test]
    fn provider_urls_are_checked_as_written() {
        let strict = ProviderPolicy::default();
        let open = ProviderPolicy {
            allow_private: true,
        };
        assert!(strict.check_url("https://accounts.example.com").is_ok());
        assert!(strict.check_url("https://8.8.8.8/realm").is_ok());
        for refused in [
            "http://accounts.example.com",
            "https://169.254.169.254/latest/meta-data",
            "https://10.0.0.5",
            "https://[fd00::1]:8443",
            "https://localhost:9000",
            "http://127.0.0.1:9000",
            "ftp://example.com",
            "not a url",
        ] {
            assert!(strict.check_url(refused).is_err(), "{refused}");
        }
        assert!(open.check_url("http://127.0.0.1:9000").is_ok());
        assert!(open.check_url("http://localhost:9000").is_ok());
        assert!(open.check_url("https://10.0.0.5").is_ok());
        assert!(open.check_url("http://10.0.0.5").is_err());
        assert!(open.check_url("http://example.com").is_err());
    }
}
