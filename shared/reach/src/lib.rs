//! Property tests that say how often they test something. A property such as "what
//! parses re-encodes to the same bytes" asserts nothing on an input that does not parse;
//! random bytes seldom form a valid frame or gzip stream, so such a test can pass while
//! its assertion almost never runs. [`Reach`] runs a proptest target, counts for each
//! generated input which assertion it reached (the test names it), prints the shares
//! (`--nocapture` shows them; tests/README.md lists them) and fails when a branch is
//! reached by fewer inputs than the target requires: a generator that stops reaching a
//! branch fails the test instead of silently testing less.
//!
//! A dev-dependency only; like tests, it panics to fail.
#![allow(clippy::panic)]

use std::cell::RefCell;
use std::collections::BTreeMap;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// The assertion an input reached, named by the test; `None` when it reached none.
pub type Reached = Option<&'static str>;

/// One proptest target and the share of inputs each of its branches must get.
#[derive(Debug)]
pub struct Reach {
    name: &'static str,
    source_file: &'static str,
    minimums: Vec<(&'static str, f64)>,
    total_minimum: f64,
}

impl Reach {
    /// Target `name`, defined in `source_file` (`file!()`: where proptest keeps the
    /// inputs that failed, under `proptest-regressions/`).
    pub fn new(name: &'static str, source_file: &'static str) -> Self {
        Reach {
            name,
            source_file,
            minimums: Vec::new(),
            total_minimum: 0.0,
        }
    }

    /// At least `share` (0 to 1) of the inputs must reach the assertion named `label`.
    pub fn at_least(mut self, label: &'static str, share: f64) -> Self {
        self.minimums.push((label, share));
        self
    }

    /// At least `share` of the inputs must reach some assertion.
    pub fn in_all_at_least(mut self, share: f64) -> Self {
        self.total_minimum = share;
        self
    }

    /// Runs `test` on `PROPTEST_CASES` inputs (256 without) from `strategy`, shrinking a
    /// failure as `proptest!` does, then checks and prints the shares.
    pub fn run<S: Strategy>(
        self,
        strategy: S,
        test: impl Fn(S::Value) -> Result<Reached, TestCaseError>,
    ) {
        let counts: RefCell<(usize, BTreeMap<&'static str, usize>)> = RefCell::default();
        let config = Config {
            source_file: Some(self.source_file),
            ..Config::default()
        };
        let mut runner = TestRunner::new(config);
        let outcome = runner.run(&strategy, |input| {
            let reached = test(input)?;
            let mut counts = counts.borrow_mut();
            counts.0 += 1;
            if let Some(label) = reached {
                *counts.1.entry(label).or_default() += 1;
            }
            Ok(())
        });
        if let Err(failure) = outcome {
            panic!("{}: {failure}", self.name);
        }
        let (cases, by_label) = counts.into_inner();
        let share = |n: usize| n as f64 / cases.max(1) as f64;
        let reached: usize = by_label.values().sum();
        let mut line = format!(
            "reach {}: {reached}/{cases} inputs ({:.0}%) reach an assertion",
            self.name,
            100.0 * share(reached)
        );
        for (label, n) in &by_label {
            line.push_str(&format!("; {label} {n} ({:.0}%)", 100.0 * share(*n)));
        }
        println!("{line}");
        if share(reached) < self.total_minimum {
            panic!(
                "{line}: fewer than {:.0}% reach an assertion",
                100.0 * self.total_minimum
            );
        }
        for (label, minimum) in &self.minimums {
            let n = by_label.get(label).copied().unwrap_or(0);
            if share(n) < *minimum {
                panic!(
                    "{line}: fewer than {:.0}% reach \"{label}\"",
                    100.0 * minimum
                );
            }
        }
    }
}
