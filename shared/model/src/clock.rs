//! The one clock: what "now" is for everything Wisp stores or compares with what it
//! stored. Unix seconds, as upstream's model timestamps (`created_at`, `updated_at`,
//! expiries); milliseconds where Wisp records finer times (revocations). Code that tests
//! drive at a chosen time takes `now` as an argument and is handed this by its caller.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix seconds now; 0 if the system clock is before 1970.
pub fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Unix milliseconds now; 0 if the system clock is before 1970.
pub fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_milliseconds_tell_the_same_time() {
        let (s, ms) = (now_unix(), now_unix_ms());
        // After 2020 and in step (the two reads may straddle a second).
        assert!(s > 1_577_836_800);
        assert!((ms / 1000 - s).abs() <= 1, "{s} {ms}");
    }
}
