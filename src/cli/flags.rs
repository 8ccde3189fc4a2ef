//! The grammar of flag values every command shares.

use std::time::Duration;

/// Every duration flag: Go's grammar, as the config writes durations (`500ms`, `30s`,
/// `1m30s`, `1.5h`), or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    wisp_config::parse_go_duration(text)
        .map_err(|e| format!("{text:?}: expected a duration such as 500ms, 30s, 1m30s or 1h ({e})"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::parse_duration;

    #[test]
    fn one_duration_grammar_for_every_flag() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        for bad in ["", "s", "5x", "-1s", "1 m"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
