//! When a failed request is tried again, and how long the client waits first.

use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::HeaderMap;

/// How failed requests are retried: only rate limits (429), server errors (500, 502,
/// 503, 504, and Anthropic's 529 "overloaded") and connection failures before any answer, with exponential backoff and
/// jitter, or the wait the provider asks for (`retry-after-ms`, `Retry-After`). Other
/// statuses (400, 401, 403, 404, …) and timeouts are never retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    max_retries: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
    max_retry_after: Duration,
}

impl Default for RetryPolicy {
    /// Two retries, backoff from 0.5 s up to 8 s, and a provider's requested wait honoured
    /// up to 60 s (the official SDKs' defaults).
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// Retries at most `retries` times (so `retries + 1` attempts).
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// The backoff before retry `n` (from 0) is `initial × 2ⁿ`, at most `max`, less up to
    /// a quarter at random so that clients do not retry in step.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    /// The longest wait a provider may ask for and still be retried; a longer one ends
    /// the request with [`ProviderError::Status`](crate::ProviderError::Status) carrying
    /// the wait, for the host to schedule.
    pub fn max_retry_after(mut self, max: Duration) -> Self {
        self.max_retry_after = max;
        self
    }

    /// How many retries are allowed.
    pub(crate) fn retries(&self) -> u32 {
        self.max_retries
    }

    /// The wait before retry `retry` (from 0), or `None` when the provider asked for
    /// longer than [`max_retry_after`](Self::max_retry_after).
    pub(crate) fn delay(&self, retry: u32, requested: Option<Duration>) -> Option<Duration> {
        match requested {
            Some(wait) => (wait <= self.max_retry_after).then_some(wait),
            None => {
                let exponential = self
                    .initial_backoff
                    .saturating_mul(2u32.saturating_pow(retry))
                    .min(self.max_backoff);
                Some(exponential.mul_f64(1.0 - fastrand::f64() / 4.0))
            }
        }
    }
}

/// Whether a response with `status` may be retried.
pub(crate) fn retryable(status: StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 500 | 502 | 503 | 504 | 529)
}

/// The wait the provider asks for: `retry-after-ms` (OpenAI and Azure send it, in
/// milliseconds), else `Retry-After` in seconds or as an HTTP date (relative to `now`).
pub(crate) fn requested_wait(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    if let Some(millis) = header("retry-after-ms").and_then(|ms| ms.parse::<f64>().ok())
        && millis.is_finite()
        && millis >= 0.0
    {
        return Some(Duration::from_secs_f64(millis / 1000.0));
    }
    let value = header("retry-after")?;
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn the_requested_wait_is_read_from_either_header() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        let wait = |pairs: &[(&'static str, &str)]| requested_wait(&headers(pairs), now);
        assert_eq!(wait(&[("retry-after", "3")]), Some(Duration::from_secs(3)));
        assert_eq!(
            wait(&[("retry-after", "Sun, 06 Nov 1994 08:49:42 GMT")]),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            wait(&[("retry-after", "Sun, 06 Nov 1994 08:49:00 GMT")]),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        assert_eq!(
            wait(&[("retry-after-ms", "250"), ("retry-after", "9")]),
            Some(Duration::from_millis(250)),
            "the precise header wins"
        );
        assert_eq!(
            wait(&[("retry-after-ms", "-1"), ("retry-after", "9")]),
            Some(Duration::from_secs(9))
        );
        assert_eq!(wait(&[("retry-after", "soon")]), None);
        assert_eq!(wait(&[]), None);
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered_downwards() {
        let policy =
            RetryPolicy::default().backoff(Duration::from_millis(100), Duration::from_secs(1));
        for _ in 0..100 {
            let first = policy.delay(0, None).unwrap();
            assert!(first >= Duration::from_millis(75) && first <= Duration::from_millis(100));
            let third = policy.delay(2, None).unwrap();
            assert!(third >= Duration::from_millis(300) && third <= Duration::from_millis(400));
            let capped = policy.delay(40, None).unwrap();
            assert!(capped >= Duration::from_millis(750) && capped <= Duration::from_secs(1));
        }
    }

    #[test]
    fn a_requested_wait_is_honoured_up_to_the_limit() {
        let policy = RetryPolicy::default().max_retry_after(Duration::from_secs(5));
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(5))),
            Some(Duration::from_secs(5))
        );
        assert_eq!(policy.delay(0, Some(Duration::from_secs(6))), None);
    }

    #[test]
    fn only_rate_limits_and_server_errors_are_retryable() {
        for code in [429, 500, 502, 503, 504, 529] {
            assert!(retryable(StatusCode::from_u16(code).unwrap()), "{code}");
        }
        for code in [400, 401, 403, 404, 408, 409, 413, 422, 501] {
            assert!(!retryable(StatusCode::from_u16(code).unwrap()), "{code}");
        }
    }
}
