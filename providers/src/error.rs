//! Every way a model request can fail, typed, with its cause kept as the source.

use std::time::Duration;

use serde_json::Value;
use tooltrust::canonical::JsonError;
use tooltrust::tool::StrictSchemaError;

/// Why a model request gave no answer.
///
/// [`Model::respond`](tooltrust::Model::respond) wraps it in a
/// [`ModelError`](tooltrust::agent::ModelError); a host gets it back with
/// `model_error.provider_error().downcast_ref::<ProviderError>()` and decides from the
/// variant whether to retry, shorten the conversation or give up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The request could not be sent, or the connection failed before the provider
    /// answered (retried while attempts were left).
    #[error("the request failed before the provider answered (after {attempts} attempts)")]
    Http {
        /// The HTTP client's error.
        #[source]
        source: reqwest::Error,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The provider did not answer within the configured timeout. Not retried: the
    /// provider may still be generating (and billing) the answer.
    #[error("the provider did not answer within {after:?}")]
    Timeout {
        /// The timeout that elapsed.
        after: Duration,
        /// The HTTP client's error.
        #[source]
        source: reqwest::Error,
    },
    /// The provider answered with an HTTP error status (after the retries that status
    /// allows).
    #[error("the provider answered HTTP {status}{}", describe(.error.as_ref()))]
    Status {
        /// The HTTP status code.
        status: u16,
        /// How long the provider asked the client to wait, if it said (`Retry-After` or
        /// `retry-after-ms`); set when a retry was refused because the wait was too long.
        retry_after: Option<Duration>,
        /// The provider's error object, when the body held one.
        error: Option<ApiError>,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The provider sent an error inside a stream that had begun successfully.
    #[error("the provider reported an error in the stream{}", describe(Some(.0)))]
    Stream(ApiError),
    /// The answer is not UTF-8 text.
    #[error("the provider's answer is not UTF-8")]
    NotUtf8(#[source] std::str::Utf8Error),
    /// The answer (or one streamed event) is not acceptable JSON: invalid, or with
    /// duplicate keys, which are refused so that tooltrust checksums exactly what the
    /// provider sent.
    #[error("the provider's answer is not acceptable JSON: {0}")]
    Json(#[from] JsonError),
    /// A field the format requires is missing or has the wrong type.
    #[error("the provider's answer has no {expected} at `{path}`")]
    Shape {
        /// Where in the answer (a streamed event's path starts with its kind).
        path: String,
        /// What was expected there.
        expected: &'static str,
    },
    /// The stream ended (or broke) before the provider said the answer was complete.
    /// Nothing of it is used: a call cut short never reaches the gate.
    #[error("the stream ended before the answer was complete")]
    Truncated {
        /// The HTTP client's error, if the connection broke.
        #[source]
        source: Option<reqwest::Error>,
    },
    /// The answer is larger than a limit of the client's
    /// [`HttpOptions`](crate::HttpOptions); reading stopped when the excess arrived (or, for
    /// the body, when its `Content-Length` announced it). Not retried.
    #[error("the provider's answer exceeds the {limit} limit of {bytes} bytes")]
    TooLarge {
        /// Which limit.
        limit: SizeLimit,
        /// The limit, in bytes.
        bytes: usize,
    },
    /// The model (or the provider's content filter) refused to answer.
    #[error("the model refused to answer ({kind})")]
    Refusal {
        /// Who refused.
        kind: RefusalKind,
        /// The refusal's text, if the provider sent one (model-written: not in `Display`).
        message: Option<String>,
    },
    /// The answer was cut off at the token limit; its calls, if any, are incomplete and
    /// are dropped.
    #[error("the answer was cut off at the token limit")]
    Length {
        /// The text written before the cut (model-written: not in `Display`).
        content: Option<String>,
    },
    /// The model stopped for a reason tooltrust does not accept as a complete answer.
    #[error("the model stopped for an unexpected reason: {reason:?}")]
    UnexpectedStop {
        /// The provider's stop reason.
        reason: String,
    },
    /// Strict mode was asked for, but a tool's arguments schema has no strict form (a map,
    /// say). Nothing was sent: sending that tool without `strict` would silently give
    /// the model a looser contract than the host asked for.
    #[error("tool `{tool}` cannot be sent in strict mode: {source}")]
    StrictSchema {
        /// The tool.
        tool: String,
        /// Why its schema has no strict form.
        #[source]
        source: StrictSchemaError,
    },
}

/// Which size limit an answer exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SizeLimit {
    /// The whole body ([`HttpOptions::max_body`](crate::HttpOptions::max_body)).
    Body,
    /// One server-sent-event line ([`HttpOptions::max_line`](crate::HttpOptions::max_line)).
    Line,
    /// One server-sent event's data
    /// ([`HttpOptions::max_event_data`](crate::HttpOptions::max_event_data)).
    EventData,
}

impl std::fmt::Display for SizeLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SizeLimit::Body => "body",
            SizeLimit::Line => "event-stream line",
            SizeLimit::EventData => "event data",
        })
    }
}

/// Who refused to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalKind {
    /// The model declined (OpenAI's `message.refusal`, Anthropic's `stop_reason:
    /// "refusal"`).
    Model,
    /// The provider's content filter stopped the answer (OpenAI's `finish_reason:
    /// "content_filter"`).
    ContentFilter,
}

impl std::fmt::Display for RefusalKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RefusalKind::Model => "the model declined",
            RefusalKind::ContentFilter => "content filter",
        })
    }
}

/// The error object providers put in error bodies and error events: OpenAI's
/// `{"error": {"message", "type", "code"}}`, Anthropic's `{"type": "error", "error":
/// {"type", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApiError {
    /// `error.type` (`rate_limit_error`, `invalid_request_error`, …).
    pub kind: Option<String>,
    /// `error.code` (OpenAI), as text.
    pub code: Option<String>,
    /// `error.message`, with the client's API key blanked out should a server echo it
    /// (`Display` shows at most its first 1000 bytes).
    pub message: Option<String>,
}

/// The longest provider message an error's `Display` shows.
const MESSAGE_LIMIT: usize = 1000;

impl ApiError {
    /// Reads the error `body`: its `error` object, an `error` string, or (vLLM) the
    /// fields at the top level. `secret` is replaced by `[redacted]` wherever it appears
    /// in the message.
    pub(crate) fn from_body(body: &Value, secret: Option<&str>) -> Option<Self> {
        let error = match body.get("error") {
            Some(Value::String(message)) => &serde_json::json!({ "message": message }),
            Some(error @ Value::Object(_)) => error,
            _ => body,
        };
        let text = |key: &str| match error.get(key)? {
            Value::String(text) => Some(text.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        };
        let mut error = ApiError {
            kind: text("type"),
            code: text("code"),
            message: text("message"),
        };
        error.redact(secret);
        (error != ApiError::default()).then_some(error)
    }

    /// Replaces `secret` by `[redacted]` wherever it appears in the message.
    pub(crate) fn redact(&mut self, secret: Option<&str>) {
        if let (Some(secret), Some(message)) = (secret, &mut self.message)
            && !secret.is_empty()
            && message.contains(secret)
        {
            *message = message.replace(secret, "[redacted]");
        }
    }
}

fn describe(error: Option<&ApiError>) -> String {
    let Some(error) = error else {
        return String::new();
    };
    let label = [error.kind.as_deref(), error.code.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ");
    // Shortened only here, after any redaction, so that no part of a key survives a cut.
    let message = error.message.as_ref().map(|message| {
        if message.len() <= MESSAGE_LIMIT {
            return message.clone();
        }
        let mut end = MESSAGE_LIMIT;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &message[..end])
    });
    match (label.is_empty(), &message) {
        (true, None) => String::new(),
        (false, None) => format!(" ({label})"),
        (true, Some(message)) => format!(": {message}"),
        (false, Some(message)) => format!(" ({label}): {message}"),
    }
}

impl ProviderError {
    /// A short, content-free name of the failure, for `error.type` in traces.
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::Http { .. } => "http",
            ProviderError::Timeout { .. } => "timeout",
            ProviderError::Status { .. } => "status",
            ProviderError::Stream(_) => "stream_error",
            ProviderError::NotUtf8(_) => "not_utf8",
            ProviderError::Json(_) => "malformed_json",
            ProviderError::Shape { .. } => "malformed_body",
            ProviderError::Truncated { .. } => "truncated",
            ProviderError::TooLarge { .. } => "too_large",
            ProviderError::Refusal { .. } => "refusal",
            ProviderError::Length { .. } => "length",
            ProviderError::UnexpectedStop { .. } => "unexpected_stop",
            ProviderError::StrictSchema { .. } => "strict_schema",
        }
    }

    /// A shape error at `path`.
    pub(crate) fn shape(path: impl Into<String>, expected: &'static str) -> Self {
        ProviderError::Shape {
            path: path.into(),
            expected,
        }
    }
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The environment variable that should hold the API key is unset or empty.
    #[error("set {var} to the API key")]
    MissingKey {
        /// The variable's name.
        var: String,
    },
    /// The environment variable is set but is not Unicode.
    #[error("{var} is not valid Unicode")]
    NotUnicode {
        /// The variable's name.
        var: String,
    },
    /// The base URL does not parse.
    #[error("the base URL {url:?} is invalid: {source}")]
    BaseUrl {
        /// The URL given.
        url: String,
        /// The parser's error.
        #[source]
        source: url::ParseError,
    },
    /// The base URL is not an `http` or `https` URL with a path.
    #[error("the base URL {url:?} must be an http:// or https:// URL")]
    Scheme {
        /// The URL given.
        url: String,
    },
    /// The API key holds characters an HTTP header cannot carry (the key is not shown).
    #[error("the API key cannot be sent in an HTTP header")]
    KeyHeader,
    /// The HTTP client could not be built (its TLS configuration, say).
    #[error("the HTTP client could not be built")]
    Client(#[source] reqwest::Error),
}
