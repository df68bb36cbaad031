//! The Messages client.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tooltrust::Model;
use tooltrust::agent::{ModelFuture, ModelRequest};

use super::stream::EventAssembler;
use super::wire::{RequestOptions, parse_response, request_body};
use crate::completion::{Completion, respond};
use crate::error::{ConfigError, ProviderError};
use crate::http::{BaseUrl, HttpOptions, Transport, endpoint};
use crate::secret::ApiKey;
use crate::telemetry::RequestInfo;

/// A client of Anthropic's Messages API, implementing [`Model`].
///
/// ```no_run
/// use tooltrust_providers::{AnthropicClient, ApiKey};
///
/// let claude = AnthropicClient::builder("claude-sonnet-4-5")
///     .api_key(ApiKey::from_env("ANTHROPIC_API_KEY")?)
///     .max_tokens(2048)
///     .stream(true)
///     .build()?;
/// # Ok::<(), tooltrust_providers::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct AnthropicClient {
    transport: Transport,
    options: RequestOptions,
}

/// Configures an [`AnthropicClient`].
#[derive(Debug)]
pub struct AnthropicBuilder {
    options: RequestOptions,
    base_url: BaseUrl,
    key: Option<ApiKey>,
    http: HttpOptions,
}

/// The API version the wire format follows (`anthropic-version`).
const API_VERSION: &str = "2023-06-01";

impl AnthropicClient {
    /// Anthropic's base URL.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";

    /// A builder for a client of `model`.
    pub fn builder(model: impl Into<String>) -> AnthropicBuilder {
        AnthropicBuilder {
            options: RequestOptions::new(model),
            base_url: BaseUrl(Self::DEFAULT_BASE_URL.to_owned()),
            key: None,
            http: HttpOptions::default(),
        }
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        self.transport.url().as_str()
    }

    /// Answers `request` with everything the provider said (stop reason, usage, ids);
    /// a refusal or a cut-off is still `Ok` here, and an error from
    /// [`Completion::into_message`].
    pub async fn complete(&self, request: &ModelRequest) -> Result<Completion, ProviderError> {
        let info = RequestInfo {
            provider: "anthropic",
            model: &self.options.model,
            max_tokens: Some(self.options.max_tokens),
        };
        let body = request_body(request, &self.options)?;
        let assembler = self.options.stream.then(EventAssembler::default);
        self.transport
            .complete(info, &body, assembler, parse_response)
            .await
    }
}

impl Model for AnthropicClient {
    fn respond<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        respond(self.complete(request))
    }
}

impl AnthropicBuilder {
    /// The base URL without the version path, as Anthropic's SDKs take it
    /// (`ANTHROPIC_BASE_URL`); the client appends `/v1/messages`.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = BaseUrl(url.into());
        self
    }

    /// The API key, sent as `x-api-key`.
    pub fn api_key(mut self, key: ApiKey) -> Self {
        self.key = Some(key);
        self
    }

    /// The most the model may write (default
    /// [`RequestOptions::DEFAULT_MAX_TOKENS`]); an answer cut off there is
    /// [`ProviderError::Length`].
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.options.max_tokens = max_tokens;
        self
    }

    /// Sends `"strict": true` on every tool, so that the model's inputs follow the schema
    /// exactly.
    pub fn strict(mut self, strict: bool) -> Self {
        self.options.strict = strict;
        self
    }

    /// Streams the answer as server-sent events; the calls still reach the gate only
    /// whole, once the stream says the answer is complete.
    pub fn stream(mut self, stream: bool) -> Self {
        self.options.stream = stream;
        self
    }

    /// Timeouts, retries and size limits.
    pub fn http(mut self, http: HttpOptions) -> Self {
        self.http = http;
        self
    }

    /// The client.
    pub fn build(self) -> Result<AnthropicClient, ConfigError> {
        let url = endpoint(&self.base_url.0, &["v1", "messages"])?;
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        if let Some(key) = &self.key {
            headers.insert(HeaderName::from_static("x-api-key"), key.header("")?);
        }
        Ok(AnthropicClient {
            transport: Transport::new(url, headers, self.key, self.http)?,
            options: self.options,
        })
    }
}
