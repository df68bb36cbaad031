//! The HTTP exchange every provider shares: one POST, retried as the [`RetryPolicy`]
//! allows, then the answer read whole or as server-sent events.

use std::time::{Duration, SystemTime};

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, USER_AGENT};
use reqwest::{Response, redirect};
use serde_json::Value;
use tracing::Instrument;

use crate::completion::Completion;
use crate::error::{ApiError, ConfigError, ProviderError, SizeLimit};
use crate::retry::{self, RetryPolicy};
use crate::secret::ApiKey;
use crate::sse;
use crate::telemetry::{self, RequestInfo};

/// Timeouts, retries and size limits of a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpOptions {
    timeout: Duration,
    connect_timeout: Duration,
    retry: RetryPolicy,
    max_body: usize,
    max_line: usize,
    max_event_data: usize,
}

impl Default for HttpOptions {
    /// A 10-minute timeout per attempt (the official SDKs' default: long answers take
    /// minutes), 10 s to connect, the default [`RetryPolicy`], and at most
    /// [`DEFAULT_MAX_BODY`](Self::DEFAULT_MAX_BODY),
    /// [`DEFAULT_MAX_LINE`](Self::DEFAULT_MAX_LINE) and
    /// [`DEFAULT_MAX_EVENT_DATA`](Self::DEFAULT_MAX_EVENT_DATA) bytes read.
    fn default() -> Self {
        HttpOptions {
            timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            max_body: Self::DEFAULT_MAX_BODY,
            max_line: Self::DEFAULT_MAX_LINE,
            max_event_data: Self::DEFAULT_MAX_EVENT_DATA,
        }
    }
}

impl HttpOptions {
    /// The longest one attempt may take, from sending the request to the last byte of
    /// the answer (streamed or not).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest connecting may take.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How failed requests are retried.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The default [`max_body`](Self::max_body): 32 MiB, far above the longest answer a
    /// model writes, streamed or not.
    pub const DEFAULT_MAX_BODY: usize = 32 << 20;
    /// The default [`max_line`](Self::max_line): 4 MiB.
    pub const DEFAULT_MAX_LINE: usize = 4 << 20;
    /// The default [`max_event_data`](Self::max_event_data): 8 MiB.
    pub const DEFAULT_MAX_EVENT_DATA: usize = 8 << 20;

    /// The most bytes of one answer's body read, whole or streamed; a longer one (or one
    /// whose `Content-Length` says it would be) fails with
    /// [`ProviderError::TooLarge`] as soon as the excess arrives, so a hostile or
    /// mistyped endpoint cannot exhaust the host's memory.
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// When streaming, the most bytes of one server-sent-event line (its terminator
    /// excluded); a longer one fails with [`ProviderError::TooLarge`] before it ends.
    pub fn max_line(mut self, bytes: usize) -> Self {
        self.max_line = bytes;
        self
    }

    /// When streaming, the most bytes of one event's data (its `data:` lines joined); more
    /// fails with [`ProviderError::TooLarge`].
    pub fn max_event_data(mut self, bytes: usize) -> Self {
        self.max_event_data = bytes;
        self
    }
}

/// A URL for `Debug` output and error messages: any user name and password before the host
/// replaced by `[redacted]`. Works on text that does not parse as a URL too, so that
/// a rejected base URL's credentials do not reach an error message either.
pub(crate) fn redact_url(url: &str) -> std::borrow::Cow<'_, str> {
    let Some(scheme_end) = url.find("://") else {
        return url.into();
    };
    let authority_start = scheme_end + 3;
    let authority_len = url[authority_start..]
        .find(['/', '?', '#'])
        .unwrap_or(url.len() - authority_start);
    let authority = &url[authority_start..authority_start + authority_len];
    // The host follows the last `@`: a password may hold an unescaped one.
    match authority.rfind('@') {
        Some(at) => format!(
            "{}[redacted]{}",
            &url[..authority_start],
            &url[authority_start + at..]
        )
        .into(),
        None => url.into(),
    }
}

/// A base URL as a builder keeps it: its `Debug` redacts credentials in it.
#[derive(Clone)]
pub(crate) struct BaseUrl(pub String);

impl std::fmt::Debug for BaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&redact_url(&self.0), f)
    }
}

/// `base` with `segments` appended to its path (its query kept): `http://host:8000/v1`
/// and `["chat", "completions"]` make `http://host:8000/v1/chat/completions`.
pub(crate) fn endpoint(base: &str, segments: &[&str]) -> Result<url::Url, ConfigError> {
    let mut url = url::Url::parse(base).map_err(|source| ConfigError::BaseUrl {
        url: redact_url(base).into_owned(),
        source,
    })?;
    let scheme = ConfigError::Scheme {
        url: redact_url(base).into_owned(),
    };
    if !matches!(url.scheme(), "http" | "https") {
        return Err(scheme);
    }
    url.path_segments_mut()
        .map_err(|()| scheme)?
        .pop_if_empty()
        .extend(segments);
    Ok(url)
}

/// The largest error body read (the rest is an error page nobody needs).
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Whether a stream goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// More events are expected.
    Continue,
    /// The provider said the answer is complete.
    Done,
}

/// Builds a [`Completion`] from a provider's streamed events.
pub(crate) trait Assembler {
    /// Takes one event.
    fn event(&mut self, event: &sse::Event) -> Result<Flow, ProviderError>;
    /// The completion, or [`ProviderError::Truncated`] if the provider never said the
    /// answer was complete.
    fn finish(self) -> Result<Completion, ProviderError>;
}

/// One provider endpoint: the client, the URL, the headers that authenticate.
pub(crate) struct Transport {
    client: reqwest::Client,
    url: url::Url,
    headers: HeaderMap,
    /// Kept only to blank it out of error messages a server might echo it into.
    key: Option<ApiKey>,
    options: HttpOptions,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("url", &redact_url(self.url.as_str()))
            .field("key", &self.key)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// A transport posting to `url` with `headers` (the key's header among them).
    pub fn new(
        url: url::Url,
        mut headers: HeaderMap,
        key: Option<ApiKey>,
        options: HttpOptions,
    ) -> Result<Self, ConfigError> {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("tooltrust-providers/", env!("CARGO_PKG_VERSION"))),
        );
        let client = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            // A redirect would resend the key header to wherever it points (reqwest strips
            // only `Authorization` across hosts, not `x-api-key` or `api-key`), and turn the
            // POST into a GET; a model API has no reason to redirect.
            .redirect(redirect::Policy::none())
            .build()
            .map_err(ConfigError::Client)?;
        Ok(Transport {
            client,
            url,
            headers,
            key,
            options,
        })
    }

    /// The URL requests go to.
    pub fn url(&self) -> &url::Url {
        &self.url
    }

    /// Posts `body` and reads the answer: as events into `assembler` when streaming
    /// (`Some`), else whole, with `parse`. The exchange runs in a span described by
    /// `info`.
    pub async fn complete<A: Assembler>(
        &self,
        info: RequestInfo<'_>,
        body: &Value,
        assembler: Option<A>,
        parse: fn(&str) -> Result<Completion, ProviderError>,
    ) -> Result<Completion, ProviderError> {
        let span = telemetry::span(info, &self.url);
        let result = async {
            let response = self.post(body.to_string().into_bytes()).await?;
            let json = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .is_some_and(|value| value.starts_with("application/json"));
            match assembler {
                // A server that ignores `stream` answers with one JSON body.
                Some(assembler) if !json => self.read_events(response, assembler).await,
                _ => parse(&self.read_all(response).await?),
            }
        }
        .instrument(span.clone())
        .await;
        telemetry::record(&span, &result);
        result
    }

    /// Sends `body` until it gets a success status, retrying what the policy allows.
    async fn post(&self, body: Vec<u8>) -> Result<Response, ProviderError> {
        let policy = self.options.retry;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let may_retry = attempts <= policy.retries();
            let sent = self
                .client
                .post(self.url.clone())
                .headers(self.headers.clone())
                .timeout(self.options.timeout)
                .body(body.clone())
                .send()
                .await;
            let (delay, status) = match sent {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status();
                    let requested = retry::requested_wait(response.headers(), SystemTime::now());
                    let error = self.error_body(response).await;
                    let delay = if may_retry && retry::retryable(status) {
                        policy.delay(attempts - 1, requested)
                    } else {
                        None
                    };
                    let Some(delay) = delay else {
                        return Err(ProviderError::Status {
                            status: status.as_u16(),
                            retry_after: requested,
                            error,
                            attempts,
                        });
                    };
                    (delay, status.as_u16())
                }
                Err(source) if source.is_timeout() => {
                    return Err(ProviderError::Timeout {
                        after: self.options.timeout,
                        source,
                    });
                }
                Err(source) => {
                    // No answer came: connecting or sending failed.
                    let delay = if may_retry && (source.is_connect() || source.is_request()) {
                        policy.delay(attempts - 1, None)
                    } else {
                        None
                    };
                    let Some(delay) = delay else {
                        return Err(ProviderError::Http { source, attempts });
                    };
                    (delay, 0)
                }
            };
            tracing::info!(
                http.request.resend_count = attempts,
                http.response.status_code = status,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                "model request failed; retrying",
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// The provider's error object from an error response, if it sent one.
    async fn error_body(&self, mut response: Response) -> Option<ApiError> {
        let mut body = Vec::new();
        while body.len() < ERROR_BODY_LIMIT {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) => break,
                // What arrived is still worth reading.
                Err(_) => break,
            }
        }
        let value: Value = serde_json::from_slice(&body).ok()?;
        ApiError::from_body(&value, self.key.as_ref().map(ApiKey::expose))
    }

    /// The whole body, as text, if it is within the body limit.
    async fn read_all(&self, mut response: Response) -> Result<String, ProviderError> {
        let limit = self.options.max_body;
        let too_large = ProviderError::TooLarge {
            limit: SizeLimit::Body,
            bytes: limit,
        };
        let declared = response.content_length();
        if declared.is_some_and(|length| length > limit as u64) {
            return Err(too_large);
        }
        // Reserved up to the declared length only: the header cannot make it reserve more
        // than the limit, and a missing one reserves nothing.
        let mut body = Vec::with_capacity(
            declared.map_or(0, |length| usize::try_from(length).unwrap_or(limit)),
        );
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| self.body_error(error))?
        {
            if chunk.len() > limit - body.len() {
                return Err(too_large);
            }
            body.extend_from_slice(&chunk);
        }
        String::from_utf8(body).map_err(|error| ProviderError::NotUtf8(error.utf8_error()))
    }

    /// Feeds the body's events to `assembler` until the provider says it is done or the
    /// body ends.
    async fn read_events<A: Assembler>(
        &self,
        mut response: Response,
        mut assembler: A,
    ) -> Result<Completion, ProviderError> {
        let options = &self.options;
        let mut parser = sse::Parser::new(options.max_line, options.max_event_data);
        let mut events = Vec::new();
        // Bytes still allowed: the assembler keeps what the events say, so the body limit
        // holds for a stream of small events too.
        let mut left = options.max_body;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| self.body_error(error))?
        {
            left = left
                .checked_sub(chunk.len())
                .ok_or(ProviderError::TooLarge {
                    limit: SizeLimit::Body,
                    bytes: options.max_body,
                })?;
            parser
                .push(&chunk, &mut events)
                .map_err(|error| match error {
                    sse::Error::NotUtf8(error) => ProviderError::NotUtf8(error),
                    sse::Error::Line => ProviderError::TooLarge {
                        limit: SizeLimit::Line,
                        bytes: options.max_line,
                    },
                    sse::Error::Data => ProviderError::TooLarge {
                        limit: SizeLimit::EventData,
                        bytes: options.max_event_data,
                    },
                })?;
            for event in events.drain(..) {
                let flow = assembler.event(&event).map_err(|mut error| {
                    if let ProviderError::Stream(api) = &mut error {
                        api.redact(self.key.as_ref().map(ApiKey::expose));
                    }
                    error
                })?;
                if flow == Flow::Done {
                    return assembler.finish();
                }
            }
        }
        assembler.finish()
    }

    /// A failure while the body was being read: the timeout, or a cut connection.
    fn body_error(&self, source: reqwest::Error) -> ProviderError {
        if source.is_timeout() {
            ProviderError::Timeout {
                after: self.options.timeout,
                source,
            }
        } else {
            ProviderError::Truncated {
                source: Some(source),
            }
        }
    }
}
