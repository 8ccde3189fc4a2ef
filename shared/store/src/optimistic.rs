//! One optimistic write, for every store that keeps a record or object up to date without
//! locks: read it, change it, write it on condition that nobody wrote it since the read,
//! and on a lost race start again from the read, a bounded number of times with one
//! jittered backoff.
//!
//! What counts as a lost race is decided here once: the conditional write answered
//! `Conflict` (changed since the read), `AlreadyExists` (created since the read found
//! nothing) or `NotFound` (deleted since the read). Each of these means the next read
//! sees something new, so another attempt decides afresh; anything else is final, and so
//! is every error of the read or the change.

use std::time::Duration;

use crate::error::{Result, StoreError};

/// How many attempts in all before a lost race is given up as an error: enough for a few
/// dozen writers on one record, each retry after [`backoff`].
pub(crate) const MAX_WRITE_ATTEMPTS: u32 = 64;

/// What one attempt came to.
#[derive(Debug)]
pub(crate) enum Attempt<T> {
    /// The attempt's answer without a write (nothing to change, or nothing to change it in).
    Done(T),
    /// The outcome of the attempt's conditional write: a lost race is tried again.
    Written(Result<T>),
}

/// Runs `attempt` (read → modify → conditional write) until it is done, its write
/// succeeds or fails for a reason other than a lost race, or [`MAX_WRITE_ATTEMPTS`]
/// attempts lost their race (then the last write's error). `attempt` runs once per try:
/// what it computes must follow from what it reads.
///
/// `attempt` is a closure returning a future rather than an async closure: the futures of
/// async closures borrow the closure, and the compiler cannot yet prove such a future
/// `Send` inside a generic function ("implementation of `Send` is not general enough"),
/// which every caller on a multi-threaded runtime needs.
pub(crate) async fn optimistic_write<T, F, Fut>(mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt().await? {
            Attempt::Done(value) | Attempt::Written(Ok(value)) => return Ok(value),
            Attempt::Written(Err(e)) if lost_race(&e) && tries < MAX_WRITE_ATTEMPTS => {
                backoff(tries).await
            }
            Attempt::Written(Err(e)) => return Err(e),
        }
    }
}

/// Whether a conditional write failed because another writer got there first.
fn lost_race(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Conflict(_) | StoreError::AlreadyExists(_) | StoreError::NotFound(_)
    )
}

/// Jittered pause before retrying a lost race, growing a little with the attempt, so that
/// racing writers spread out.
async fn backoff(attempt: u32) {
    let jitter = rand::random::<u64>() % (1 + u64::from(attempt.min(10)) * 2);
    tokio::time::sleep(Duration::from_millis(jitter)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs an attempt that loses its race `losses` times with `error`, then writes.
    async fn run(losses: u32, error: fn() -> StoreError) -> (Result<&'static str>, u32) {
        let mut tries = 0;
        let result = optimistic_write(|| {
            tries += 1;
            let lost = tries <= losses;
            async move {
                Ok(Attempt::Written(if lost {
                    Err(error())
                } else {
                    Ok("written")
                }))
            }
        })
        .await;
        (result, tries)
    }

    #[tokio::test]
    async fn lost_races_are_tried_again() {
        for error in [
            (|| StoreError::Conflict("changed".into())) as fn() -> StoreError,
            || StoreError::AlreadyExists("created".into()),
            || StoreError::NotFound("deleted".into()),
        ] {
            let (result, tries) = run(3, error).await;
            assert_eq!(result.ok(), Some("written"));
            assert_eq!(tries, 4);
        }
    }

    #[tokio::test]
    async fn attempts_are_bounded() {
        let (result, tries) = run(u32::MAX, || StoreError::Conflict("changed".into())).await;
        assert!(matches!(result, Err(StoreError::Conflict(_))), "{result:?}");
        assert_eq!(tries, MAX_WRITE_ATTEMPTS);
        // The last attempt may still win.
        let (result, tries) = run(MAX_WRITE_ATTEMPTS - 1, || {
            StoreError::Conflict("changed".into())
        })
        .await;
        assert_eq!(result.ok(), Some("written"));
        assert_eq!(tries, MAX_WRITE_ATTEMPTS);
    }

    #[tokio::test]
    async fn other_write_errors_are_final() {
        for error in [
            (|| StoreError::unavailable("down")) as fn() -> StoreError,
            || StoreError::InvalidArgument("too big".into()),
            || StoreError::FailedPrecondition("completed".into()),
        ] {
            let (result, tries) = run(u32::MAX, error).await;
            assert!(result.is_err());
            assert_eq!(tries, 1);
        }
    }

    #[tokio::test]
    async fn read_errors_and_answers_without_a_write_are_final() {
        let mut tries = 0;
        let result: Result<()> = optimistic_write(|| {
            tries += 1;
            async { Err(StoreError::Conflict("a read's error".into())) }
        })
        .await;
        assert!(matches!(result, Err(StoreError::Conflict(_))));
        assert_eq!(tries, 1);

        let mut tries = 0;
        let result = optimistic_write(|| {
            tries += 1;
            async { Ok(Attempt::Done("unchanged")) }
        })
        .await;
        assert_eq!(result.ok(), Some("unchanged"));
        assert_eq!(tries, 1);
    }
}
