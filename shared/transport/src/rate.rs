//! How fast one caller may open calls: a call-rate bound per principal (a piped, an API
//! key, a console user) and per project, taken by each service's gate right after the
//! caller is authenticated and before any work for the call (its body is not read yet).
//!
//! The in-flight and decode shares ([`crate::load`], [`crate::gate`]) bound what one
//! caller *holds* at once; they do not bound how fast it *opens* calls. Issue 33: a
//! READ_ONLY API key of another project that reopened a call in a tight loop each time
//! one was refused (about 1,900 new streams a second) made 733 of 4,847 fleet calls time
//! out. Past its rate, a caller's call gets `RESOURCE_EXHAUSTED` (which pipeds retry),
//! counted with the calls turned away past `--max-in-flight`.
//!
//! On `wisp serve` the refusal is answered after [`REFUSAL_HOLD`] (at most
//! [`MAX_HELD_REFUSALS`] held at once, the others answered at once): a client that opens
//! a new call as soon as one is answered would otherwise loop as fast as the server
//! answers, each call costing its headers and its authentication; held, its calls take
//! the streams of its connections. Closing the connection of such a client was measured
//! to be worse: it connects again and its new calls must all be authenticated
//! (benches/README.md, `hostile`).
//!
//! Rates are GCRA buckets ([`governor`]): a principal may make
//! [`BURST_SECONDS`] × its rate calls at once (a piped starting up, a console page
//! loading), then its rate per second. A call refused for its principal's rate takes
//! nothing from its project's, so one hammering key does not use up its project's
//! budget for the project's other callers. Keys exist only after authentication, and
//! entries that are back to a full bucket are dropped every [`SWEEP_EVERY`] calls: the
//! state holds the principals and projects that called in the last [`BURST_SECONDS`]
//! and at most [`SWEEP_EVERY`] more.
//!
//! `wisp serve` installs its rates once per process ([`CallRate::install`], from
//! `--max-call-rate` and `--max-project-call-rate`). Elsewhere (the Lambda functions) the
//! process's rates are read from `WISP_MAX_CALL_RATE` and `WISP_MAX_PROJECT_CALL_RATE`
//! (the defaults when unset): per instance there, since instances share no memory, and
//! refusals are answered at once (an instance serves one call at a time).

use std::num::NonZeroU32;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::HashMapStateStore;
use governor::{Quota, RateLimiter};
use tonic::Status;
use wisp_telemetry::metrics;

use crate::gate::Principal;

/// Default of `wisp serve --max-call-rate`: calls per second per principal. An upstream
/// piped polls about once a second per kind of call (a dozen kinds), a console page makes
/// a few dozen calls when it loads.
pub const DEFAULT_CALL_RATE: u32 = 100;
/// Default of `wisp serve --max-project-call-rate`: calls per second per project. Most
/// teams run one project, so this must sit above a whole fleet: 10,000 upstream pipeds
/// make about 4,200 calls a second (benches/README.md, `fleet`), and a start-up burst more.
pub const DEFAULT_PROJECT_CALL_RATE: u32 = 10_000;
/// A bucket holds this many seconds of its rate: the burst a caller may make at once.
pub const BURST_SECONDS: u32 = 5;
/// How long `wisp serve` holds a call refused for its rate before answering it.
pub const REFUSAL_HOLD: Duration = Duration::from_secs(2);
/// Refused calls held at once in the process (a task and a stream each); past it,
/// refusals are answered at once.
pub const MAX_HELD_REFUSALS: usize = 4_096;
/// Calls between two sweeps of the entries back to a full bucket.
pub const SWEEP_EVERY: u64 = 4_096;
/// Environment variables the process's rates are read from where no server installs
/// them (the Lambda functions), as `wisp serve` reads its flags.
pub const CALL_RATE_ENV: &str = "WISP_MAX_CALL_RATE";
pub const PROJECT_CALL_RATE_ENV: &str = "WISP_MAX_PROJECT_CALL_RATE";

type Keyed<K, C> = RateLimiter<K, HashMapStateStore<K>, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// The call-rate bounds of one process: per principal and per project.
pub struct CallRate<C: Clock + Clone = DefaultClock> {
    principals: Keyed<Principal, C>,
    projects: Keyed<String, C>,
    per_principal: NonZeroU32,
    per_project: NonZeroU32,
    checks: AtomicU64,
    /// How long a refusal is held before it is answered.
    hold: Duration,
    held: AtomicUsize,
}

impl<C: Clock + Clone> std::fmt::Debug for CallRate<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallRate")
            .field("per_principal", &self.per_principal)
            .field("per_project", &self.per_project)
            .finish_non_exhaustive()
    }
}

/// The rates this process's gates check, if installed or first asked for.
static PROCESS: OnceLock<CallRate> = OnceLock::new();

/// Checks a call of `owner` against the process's rates (installed by `wisp serve`, else
/// read from the environment on first use); the error is the status to answer with,
/// once the refusal was held.
pub(crate) async fn check(owner: &Principal) -> Result<(), Status> {
    let rate = PROCESS.get_or_init(CallRate::from_env);
    let refused = rate.check(owner);
    if refused.is_err() {
        rate.hold().await;
    }
    refused
}

/// A quota of `per_second` calls a second, with a bucket of [`BURST_SECONDS`] of them.
fn quota(per_second: NonZeroU32) -> Quota {
    let burst = per_second.saturating_mul(NonZeroU32::MIN.saturating_add(BURST_SECONDS - 1));
    Quota::per_second(per_second).allow_burst(burst)
}

impl CallRate {
    /// `per_principal` calls a second per principal, `per_project` per project (each at
    /// least 1).
    pub fn new(per_principal: u32, per_project: u32) -> Self {
        Self::with_clock(per_principal, per_project, DefaultClock::default())
            .holding_refusals(REFUSAL_HOLD)
    }

    /// The rates of `WISP_MAX_CALL_RATE` and `WISP_MAX_PROJECT_CALL_RATE`, the defaults
    /// for those unset or not a positive number (said in a warning).
    pub fn from_env() -> Self {
        let read = |name: &str, default: u32| match std::env::var(name) {
            Err(_) => default,
            Ok(value) => match value.trim().parse::<u32>() {
                Ok(rate) if rate > 0 => rate,
                _ => {
                    tracing::warn!(
                        variable = name,
                        default,
                        "not a positive number of calls per second; using the default"
                    );
                    default
                }
            },
        };
        Self::with_clock(
            read(CALL_RATE_ENV, DEFAULT_CALL_RATE),
            read(PROJECT_CALL_RATE_ENV, DEFAULT_PROJECT_CALL_RATE),
            DefaultClock::default(),
        )
    }

    /// Makes these the rates every gate of the process checks; `false` if rates were
    /// installed (or used) before (they stay).
    pub fn install(self) -> bool {
        PROCESS.set(self).is_ok()
    }
}

impl<C: Clock + Clone> CallRate<C> {
    pub fn with_clock(per_principal: u32, per_project: u32, clock: C) -> Self {
        let per_principal = NonZeroU32::new(per_principal).unwrap_or(NonZeroU32::MIN);
        let per_project = NonZeroU32::new(per_project).unwrap_or(NonZeroU32::MIN);
        CallRate {
            principals: RateLimiter::hashmap_with_clock(quota(per_principal), clock.clone()),
            projects: RateLimiter::hashmap_with_clock(quota(per_project), clock),
            per_principal,
            per_project,
            checks: AtomicU64::new(0),
            hold: Duration::ZERO,
            held: AtomicUsize::new(0),
        }
    }

    /// Refusals held `hold` before they are answered (none by default).
    pub fn holding_refusals(mut self, hold: Duration) -> Self {
        self.hold = hold;
        self
    }

    /// Waits [`REFUSAL_HOLD`] (what this was built with) unless [`MAX_HELD_REFUSALS`]
    /// are held already.
    async fn hold(&self) {
        struct Place<'a>(&'a AtomicUsize);
        impl Drop for Place<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        if self.hold.is_zero() {
            return;
        }
        let _place = Place(&self.held);
        if self.held.fetch_add(1, Ordering::AcqRel) < MAX_HELD_REFUSALS {
            tokio::time::sleep(self.hold).await;
        }
    }

    /// Counts a call of `owner`; the error (`RESOURCE_EXHAUSTED`) when it is past its
    /// principal's or its project's rate.
    pub fn check(&self, owner: &Principal) -> Result<(), Status> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep();
        }
        // The principal first: a call refused there takes nothing from its project.
        let refused = if self.principals.check_key(owner).is_err() {
            Some(format!(
                "too many calls: this caller is over its {} calls per second; retry shortly",
                self.per_principal
            ))
        } else if self.projects.check_key(&owner.project).is_err() {
            Some(format!(
                "too many calls: this caller's project is over its {} calls per second; \
                 retry shortly",
                self.per_project
            ))
        } else {
            None
        };
        match refused {
            None => Ok(()),
            Some(message) => {
                metrics::counter!(wisp_telemetry::GRPC_SHED).increment(1);
                Err(Status::resource_exhausted(message))
            }
        }
    }

    /// Drops the entries back to a full bucket (indistinguishable from a new one).
    fn sweep(&self) {
        self.principals.retain_recent();
        self.principals.shrink_to_fit();
        self.projects.retain_recent();
        self.projects.shrink_to_fit();
    }

    /// Principals and projects with state kept.
    pub fn keys(&self) -> (usize, usize) {
        (self.principals.len(), self.projects.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;
    use std::time::Duration;

    fn owner(project: &str, id: &str) -> Principal {
        Principal {
            project: project.into(),
            id: id.into(),
        }
    }

    #[test]
    fn a_caller_gets_its_burst_then_its_rate_and_others_are_not_held_up() {
        let clock = FakeRelativeClock::default();
        // 2 a second per principal (a bucket of 10), 100 per project.
        let rate = CallRate::with_clock(2, 100, clock.clone());
        let hammer = owner("other", "api-key:k");
        for _ in 0..2 * BURST_SECONDS {
            rate.check(&hammer).unwrap();
        }
        let refused = rate.check(&hammer).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(
            refused
                .message()
                .contains("this caller is over its 2 calls per second")
        );
        // A piped of another project, and another key of the same one, go on.
        let piped = owner("quickstart", "piped:p");
        for _ in 0..2 * BURST_SECONDS {
            rate.check(&piped).unwrap();
        }
        rate.check(&owner("other", "api-key:j")).unwrap();
        // Half a second later the hammer has one more call, not two.
        clock.advance(Duration::from_millis(500));
        rate.check(&hammer).unwrap();
        assert!(rate.check(&hammer).is_err());
    }

    #[test]
    fn refused_calls_take_nothing_from_the_project() {
        let clock = FakeRelativeClock::default();
        // 1 a second per principal (a bucket of 5), 2 per project (a bucket of 10).
        let rate = CallRate::with_clock(1, 2, clock.clone());
        let hammer = owner("other", "api-key:k");
        for _ in 0..1000 {
            let _ = rate.check(&hammer);
        }
        // The hammer took its 5; the project's other callers have the other 5.
        for id in ["a", "b", "c", "d", "e"] {
            rate.check(&owner("other", id)).unwrap();
        }
        let refused = rate.check(&owner("other", "f")).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(
            refused
                .message()
                .contains("project is over its 2 calls per second")
        );
        // Another project is not concerned.
        rate.check(&owner("quickstart", "piped:p")).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn refusals_are_held_within_a_bound() {
        let rate = CallRate::with_clock(1, 100, FakeRelativeClock::default())
            .holding_refusals(Duration::from_secs(2));
        let hammer = owner("other", "api-key:k");
        for _ in 0..BURST_SECONDS {
            rate.check(&hammer).unwrap();
        }
        assert!(rate.check(&hammer).is_err());
        // The refusal is answered after the hold, and at once past the bound.
        let started = tokio::time::Instant::now();
        let rate = std::sync::Arc::new(rate);
        let holders: Vec<_> = (0..MAX_HELD_REFUSALS)
            .map(|_| {
                let rate = rate.clone();
                tokio::spawn(async move { rate.hold().await })
            })
            .collect();
        // Every holder starts (time stands still while tasks are runnable).
        while rate.held.load(Ordering::Acquire) < MAX_HELD_REFUSALS {
            tokio::task::yield_now().await;
        }
        assert_eq!(started.elapsed(), Duration::ZERO);
        rate.hold().await;
        assert_eq!(started.elapsed(), Duration::ZERO);
        for holder in holders {
            holder.await.unwrap();
        }
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert_eq!(rate.held.load(Ordering::Acquire), 0);
    }

    #[test]
    fn state_is_dropped_once_buckets_are_full_again() {
        let clock = FakeRelativeClock::default();
        let rate = CallRate::with_clock(10, 1000, clock.clone());
        let n = usize::try_from(SWEEP_EVERY).unwrap() - 1;
        for i in 0..n {
            rate.check(&owner("p", &format!("piped:{i}"))).unwrap();
        }
        assert_eq!(rate.keys(), (n, 1));
        // Long enough for every bucket to refill: the next call sweeps them all but its own.
        clock.advance(Duration::from_secs(u64::from(BURST_SECONDS) + 1));
        rate.check(&owner("q", "piped:new")).unwrap();
        assert_eq!(rate.keys(), (1, 1));
    }
}
