//! How an error is written to a log: its message and every cause below it, so that an
//! operator reads the backend's own words (`ResourceNotFoundException`, `database is
//! locked`) where a client is only told the mapped status.

use std::error::Error;
use std::fmt;

/// Displays an error followed by each of its sources, `outer: cause: root cause`.
///
/// Error types in Wisp keep a cause in `source()` and leave it out of their own
/// message, so the chain is written once; a source whose message the level above
/// already ends with (a wrapper that repeats its cause) is skipped rather than repeated.
#[derive(Debug, Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn Error + 'a));

/// `error = %chain(&err)` in a tracing macro logs the whole chain.
pub fn chain<'a>(err: &'a (dyn Error + 'a)) -> ErrorChain<'a> {
    ErrorChain(err)
}

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut previous = self.0.to_string();
        f.write_str(&previous)?;
        let mut next = self.0.source();
        while let Some(err) = next {
            let message = err.to_string();
            if !message.is_empty() && !previous.ends_with(&message) {
                write!(f, ": {message}")?;
            }
            previous = message;
            next = err.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("middle: {0}")]
    struct Middle(#[source] std::io::Error);

    #[test]
    fn writes_every_cause_once() {
        let err = Outer(Middle(std::io::Error::other("database is locked")));
        assert_eq!(chain(&err).to_string(), "outer: middle: database is locked");
    }
}
