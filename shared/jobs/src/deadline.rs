//! When a run must stop: the Lambda's remaining time minus a margin for the item in
//! flight and the report.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Deadline {
    at: Instant,
    /// For tests of resumption: the deadline also passes after this many checks.
    checks_left: Option<AtomicU64>,
}

impl Deadline {
    pub fn at(at: Instant) -> Deadline {
        Deadline {
            at,
            checks_left: None,
        }
    }

    pub fn after(budget: Duration) -> Deadline {
        let now = Instant::now();
        Deadline::at(now.checked_add(budget).unwrap_or(now))
    }

    /// Passes after `checks` calls of [`Deadline::expired`] (or in an hour): a
    /// deterministic way to stop a job mid-run in tests.
    pub fn after_checks(checks: u64) -> Deadline {
        Deadline {
            checks_left: Some(AtomicU64::new(checks)),
            ..Deadline::after(Duration::from_secs(3600))
        }
    }

    /// True once the run must stop. Jobs check it before each item.
    pub fn expired(&self) -> bool {
        if let Some(left) = &self.checks_left {
            let before = left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .unwrap_or(0);
            if before == 0 {
                return true;
            }
        }
        Instant::now() >= self.at
    }

    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_and_check_budgets() {
        assert!(Deadline::after(Duration::ZERO).expired());
        assert!(!Deadline::after(Duration::from_secs(60)).expired());
        let d = Deadline::after_checks(2);
        assert!(!d.expired());
        assert!(!d.expired());
        assert!(d.expired());
        assert!(d.expired());
    }
}
