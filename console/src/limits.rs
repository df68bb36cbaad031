//! Rate limits: at most N events per rolling minute per key (a reviewer's decisions,
//! the console's login attempts).

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(60);

/// How many keys the limiter holds before it forgets those with an empty minute.
const PRUNE_AT: usize = 1024;

/// A rolling one-minute window per key.
pub(crate) struct Limiter {
    per_minute: u32,
    seen: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl Limiter {
    pub(crate) fn new(per_minute: u32) -> Limiter {
        Limiter {
            per_minute,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one event for `key`, or says how long to wait when the minute is full.
    pub(crate) fn take(&self, key: &str) -> Result<(), Duration> {
        self.take_at(key, Instant::now())
    }

    /// Whether `key` may have one more event now (without counting one), or how long
    /// to wait.
    pub(crate) fn check(&self, key: &str) -> Result<(), Duration> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get(key)
            .map_or(Ok(()), |times| self.room(times, Instant::now()))
    }

    /// Whether `times` leave room for one more event at `now`, or how long to wait.
    fn room(&self, times: &VecDeque<Instant>, now: Instant) -> Result<(), Duration> {
        let expired = |t: &&Instant| now.saturating_duration_since(**t) >= WINDOW;
        let mut live = times.iter().skip_while(expired);
        match live.next() {
            Some(oldest) if live.count() + 1 >= self.per_minute as usize => {
                Err(WINDOW.saturating_sub(now.saturating_duration_since(*oldest)))
            }
            _ => Ok(()),
        }
    }

    /// How many keys it holds.
    #[cfg(test)]
    fn keys(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn take_at(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        // Keys whose minute has passed are forgotten, so many keys cannot pile up.
        if seen.len() >= PRUNE_AT {
            seen.retain(|_, times| {
                times
                    .back()
                    .is_some_and(|t| now.saturating_duration_since(*t) < WINDOW)
            });
        }
        let times = seen.entry(key.to_owned()).or_default();
        while times
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW)
        {
            times.pop_front();
        }
        self.room(times, now)?;
        times.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minute_fills_and_empties_per_key() {
        let limiter = Limiter::new(2);
        let start = Instant::now();
        assert!(limiter.take_at("alice", start).is_ok());
        assert!(
            limiter
                .take_at("alice", start + Duration::from_secs(10))
                .is_ok()
        );
        let wait = limiter
            .take_at("alice", start + Duration::from_secs(20))
            .unwrap_err();
        assert_eq!(wait, Duration::from_secs(40));
        assert!(
            limiter
                .take_at("bob", start + Duration::from_secs(20))
                .is_ok()
        );
        assert!(
            limiter
                .take_at("alice", start + Duration::from_secs(60))
                .is_ok()
        );
    }

    #[test]
    fn keys_whose_minute_passed_are_forgotten() {
        let limiter = Limiter::new(1);
        let start = Instant::now();
        for i in 0..PRUNE_AT {
            assert!(limiter.take_at(&format!("k{i}"), start).is_ok());
        }
        assert_eq!(limiter.keys(), PRUNE_AT);
        let later = start + WINDOW;
        assert!(limiter.take_at("fresh", later).is_ok());
        assert_eq!(limiter.keys(), 1);
        // A key still inside its minute is kept, and still limited.
        assert!(limiter.take_at("fresh", later).is_err());
    }
}
