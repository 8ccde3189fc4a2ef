//! Go-style durations (`300ms`, `5m`, `1h30m`, `1.5h`), as upstream writes them.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A non-negative duration written the way Go's `time.ParseDuration` reads it.
///
/// In YAML it is a string (`5m`, `1h30m`, `1.5s`, `0`) or, as upstream also accepts,
/// a bare number of nanoseconds. It is written back in Go's `Duration.String` form
/// (`5m0s`). Negative durations are rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(pub Duration);

impl GoDuration {
    /// The wrapped [`std::time::Duration`].
    pub const fn as_std(self) -> Duration {
        self.0
    }

    /// Whether this is the zero duration (upstream treats a zero TTL as "use the default").
    pub const fn is_zero(self) -> bool {
        self.0.is_zero()
    }
}

impl From<Duration> for GoDuration {
    fn from(d: Duration) -> Self {
        GoDuration(d)
    }
}

impl From<GoDuration> for Duration {
    fn from(d: GoDuration) -> Self {
        d.0
    }
}

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason}")]
pub struct DurationParseError {
    input: String,
    reason: &'static str,
}

impl DurationParseError {
    /// Why, without the rejected text (which may have been a secret in the wrong place).
    pub fn reason(&self) -> &'static str {
        self.reason
    }
}

impl FromStr for GoDuration {
    type Err = DurationParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_go_duration(s).map(GoDuration)
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_go_duration(self.0))
    }
}

/// Largest duration Go can represent (`math.MaxInt64` nanoseconds).
const MAX_NANOS: u128 = i64::MAX as u128;

/// Parses a duration the way Go's `time.ParseDuration` does: an optional sign, then one
/// or more decimal numbers (fraction allowed), each followed by a unit among `ns`, `us`
/// (`µs`, `μs`), `ms`, `s`, `m`, `h`. A lone `0` needs no unit. Negative values are
/// rejected because a TTL or timeout cannot be negative.
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationParseError> {
    let fail = |reason| DurationParseError {
        input: input.to_owned(),
        reason,
    };
    let mut s = input;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(fail("empty duration"));
    }

    let mut total: u128 = 0;
    while !s.is_empty() {
        // Integer part.
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let (int_digits, rest) = s.split_at(int_len);
        s = rest;
        // Fraction part.
        let mut frac_digits = "";
        if let Some(rest) = s.strip_prefix('.') {
            let frac_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            (frac_digits, s) = rest.split_at(frac_len);
        }
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(fail("expected a number"));
        }
        // Unit.
        let unit_len = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(s.len(), |(i, _)| i);
        let (unit, rest) = s.split_at(unit_len);
        s = rest;
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            "" => return Err(fail("missing unit (one of ns, us, ms, s, m, h)")),
            _ => return Err(fail("unknown unit (expected one of ns, us, ms, s, m, h)")),
        };

        let int_value: u128 = if int_digits.is_empty() {
            0
        } else {
            int_digits.parse().map_err(|_| fail("number too large"))?
        };
        let mut part = int_value
            .checked_mul(unit_nanos)
            .ok_or_else(|| fail("duration too large"))?;
        // Like Go, keep only the fraction digits that can still matter and truncate.
        let mut scale: u128 = 1;
        let mut frac_value: u128 = 0;
        for d in frac_digits.bytes().take(30) {
            frac_value = frac_value * 10 + u128::from(d - b'0');
            scale *= 10;
        }
        if frac_value > 0 {
            part += frac_value * unit_nanos / scale;
        }
        total = total
            .checked_add(part)
            .filter(|t| *t <= MAX_NANOS)
            .ok_or_else(|| fail("duration too large"))?;
    }

    if negative && total != 0 {
        return Err(fail("negative durations are not allowed"));
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| fail("duration too large"))?;
    // The remainder is below 1e9, so it fits.
    let nanos = (total % 1_000_000_000) as u32;
    Ok(Duration::new(secs, nanos))
}

/// Formats a duration like Go's `Duration.String`: `0s`, `1.5µs`, `300ms`, `5m0s`,
/// `1h30m0s`.
pub fn format_go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}\u{b5}s", with_fraction(nanos, 3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", with_fraction(nanos, 6));
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3_600, secs / 60 % 60, secs % 60);
    let seconds = with_fraction(
        u128::from(s) * 1_000_000_000 + u128::from(d.subsec_nanos()),
        9,
    );
    if h > 0 {
        format!("{h}h{m}m{seconds}s")
    } else if m > 0 {
        format!("{m}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// `value / 10^digits` written in decimal, without trailing zeros in the fraction.
fn with_fraction(value: u128, digits: u32) -> String {
    let scale = 10u128.pow(digits);
    let (int, frac) = (value / scale, value % scale);
    if frac == 0 {
        return int.to_string();
    }
    let frac = format!("{frac:0width$}", width = digits as usize);
    format!("{int}.{}", frac.trim_end_matches('0'))
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;

        impl Visitor<'_> for DurationVisitor {
            type Value = GoDuration;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as `5m`, `1h30m` or `300ms`")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<GoDuration, E> {
                // Config errors never echo values.
                v.parse().map_err(|e: DurationParseError| {
                    E::custom(format_args!("invalid duration: {}", e.reason()))
                })
            }

            // Upstream also accepts a bare number, read as nanoseconds.
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<GoDuration, E> {
                if u128::from(v) > MAX_NANOS {
                    return Err(E::custom(format!(
                        "duration of {v} nanoseconds is too large"
                    )));
                }
                Ok(GoDuration(Duration::from_nanos(v)))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<GoDuration, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom("negative durations are not allowed"))
                    .and_then(|v| self.visit_u64(v))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<GoDuration, E> {
                if !v.is_finite() || v < 0.0 || v > MAX_NANOS as f64 {
                    return Err(E::custom(format!("invalid duration of {v} nanoseconds")));
                }
                // Truncation towards zero is what Go's conversion does too.
                Ok(GoDuration(Duration::from_nanos(v as u64)))
            }
        }

        deserializer.deserialize_any(DurationVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Duration {
        match parse_go_duration(s) {
            Ok(d) => d,
            Err(e) => panic!("{s}: {e}"),
        }
    }

    #[test]
    fn parses_go_syntax() {
        assert_eq!(p("5m"), Duration::from_secs(300));
        assert_eq!(p("24h"), Duration::from_secs(86_400));
        assert_eq!(p("1h30m"), Duration::from_secs(5_400));
        assert_eq!(p("1h30m15s"), Duration::from_secs(5_415));
        assert_eq!(p("1.5h"), Duration::from_secs(5_400));
        assert_eq!(p(".5s"), Duration::from_millis(500));
        assert_eq!(p("1.s"), Duration::from_secs(1));
        assert_eq!(p("300ms"), Duration::from_millis(300));
        assert_eq!(p("10us"), Duration::from_micros(10));
        assert_eq!(p("10µs"), Duration::from_micros(10));
        assert_eq!(p("10μs"), Duration::from_micros(10));
        assert_eq!(p("7ns"), Duration::from_nanos(7));
        assert_eq!(p("0"), Duration::ZERO);
        assert_eq!(p("+0"), Duration::ZERO);
        assert_eq!(p("-0s"), Duration::ZERO);
        assert_eq!(p("+2s"), Duration::from_secs(2));
        assert_eq!(p("1m1m"), Duration::from_secs(120));
        assert_eq!(p("2562047h"), Duration::from_secs(2_562_047 * 3_600));
    }

    #[test]
    fn rejects_bad_input() {
        for bad in [
            "",
            "5",
            "m",
            "5 m",
            "1h 30m",
            "5x",
            "1.5",
            "-5m",
            ".",
            ".s",
            "1d",
            "2562048h",
            "99999999999999999999999999999999999999999h",
        ] {
            assert!(
                parse_go_duration(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
        let err = parse_go_duration("5x").unwrap_err();
        assert!(err.to_string().contains("\"5x\""), "{err}");
        assert!(err.to_string().contains("unknown unit"), "{err}");
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_go_duration(Duration::ZERO), "0s");
        assert_eq!(format_go_duration(Duration::from_nanos(7)), "7ns");
        assert_eq!(format_go_duration(Duration::from_nanos(1_500)), "1.5µs");
        assert_eq!(format_go_duration(Duration::from_millis(300)), "300ms");
        assert_eq!(format_go_duration(Duration::from_millis(1_500)), "1.5s");
        assert_eq!(format_go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(format_go_duration(Duration::from_secs(5_400)), "1h30m0s");
        assert_eq!(format_go_duration(Duration::from_secs(86_400)), "24h0m0s");
        for s in ["5m0s", "1h30m0s", "1.5s", "300ms", "1.5µs", "7ns", "0s"] {
            assert_eq!(format_go_duration(p(s)), s);
        }
    }

    #[test]
    fn yaml_forms() {
        let d: GoDuration = serde_norway::from_str("1h30m").expect("string form");
        assert_eq!(d.as_std(), Duration::from_secs(5_400));
        let d: GoDuration = serde_norway::from_str("1000000000").expect("nanosecond form");
        assert_eq!(d.as_std(), Duration::from_secs(1));
        assert!(serde_norway::from_str::<GoDuration>("-5").is_err());
        assert!(serde_norway::from_str::<GoDuration>("5 minutes").is_err());
        let text = serde_norway::to_string(&GoDuration(Duration::from_secs(300))).expect("ser");
        assert_eq!(text.trim(), "5m0s");
    }
}
