//! The Chat Completions client.

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName};
use tooltrust::Model;
use tooltrust::agent::{ModelFuture, ModelRequest};

use super::stream::ChunkAssembler;
use super::wire::{RequestOptions, parse_response, request_body};
use crate::completion::{Completion, respond};
use crate::error::{ConfigError, ProviderError};
use crate::http::{BaseUrl, HttpOptions, Transport, endpoint};
use crate::secret::ApiKey;
use crate::telemetry::RequestInfo;

/// A client of an OpenAI-compatible Chat Completions endpoint, implementing [`Model`].
///
/// ```no_run
/// use tooltrust_providers::{ApiKey, OpenAiClient};
///
/// // OpenAI itself.
/// let openai = OpenAiClient::builder("gpt-4o-mini")
///     .api_key(ApiKey::from_env("OPENAI_API_KEY")?)
///     .build()?;
/// // A local vLLM, llama.cpp or Ollama server: the base URL includes the version path.
/// let local = OpenAiClient::builder("qwen2.5-7b-instruct")
///     .base_url("http://127.0.0.1:8000/v1")
///     .stream(true)
///     .build()?;
/// // Azure OpenAI: the deployment's URL, the `api-key` header and an `api-version`.
/// let azure = OpenAiClient::builder("gpt-4o")
///     .base_url("https://my-resource.openai.azure.com/openai/deployments/my-gpt-4o")
///     .api_key(ApiKey::from_env("AZURE_OPENAI_API_KEY")?)
///     .azure("2024-10-21")
///     .build()?;
/// # Ok::<(), tooltrust_providers::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct OpenAiClient {
    transport: Transport,
    options: RequestOptions,
    provider: String,
}

/// Configures an [`OpenAiClient`].
#[derive(Debug)]
pub struct OpenAiBuilder {
    options: RequestOptions,
    base_url: BaseUrl,
    key: Option<ApiKey>,
    azure_api_version: Option<String>,
    provider: Option<String>,
    http: HttpOptions,
}

impl OpenAiClient {
    /// OpenAI's base URL.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// A builder for a client of `model`, at [`DEFAULT_BASE_URL`](Self::DEFAULT_BASE_URL)
    /// until [`base_url`](OpenAiBuilder::base_url) says otherwise.
    pub fn builder(model: impl Into<String>) -> OpenAiBuilder {
        OpenAiBuilder {
            options: RequestOptions::new(model),
            base_url: BaseUrl(Self::DEFAULT_BASE_URL.to_owned()),
            key: None,
            azure_api_version: None,
            provider: None,
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
            provider: &self.provider,
            model: &self.options.model,
            max_tokens: None,
        };
        let body = request_body(request, &self.options)?;
        let assembler = self.options.stream.then(ChunkAssembler::default);
        self.transport
            .complete(info, &body, assembler, parse_response)
            .await
    }
}

impl Model for OpenAiClient {
    fn respond<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        respond(self.complete(request))
    }
}

impl OpenAiBuilder {
    /// The base URL, including the version path, as the official SDKs take it
    /// (`OPENAI_BASE_URL`): `http://127.0.0.1:8000/v1`. The client appends
    /// `/chat/completions`.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = BaseUrl(url.into());
        self
    }

    /// The API key, sent as `Authorization: Bearer …` (as `api-key: …` on Azure). Local
    /// servers need none.
    pub fn api_key(mut self, key: ApiKey) -> Self {
        self.key = Some(key);
        self
    }

    /// Azure OpenAI: the key goes in the `api-key` header and `api-version` in the query,
    /// and traces name the provider `azure.ai.openai`. The base URL is the deployment's,
    /// `https://RESOURCE.openai.azure.com/openai/deployments/DEPLOYMENT`.
    pub fn azure(mut self, api_version: impl Into<String>) -> Self {
        self.azure_api_version = Some(api_version.into());
        self
    }

    /// The provider's name in traces (`gen_ai.provider.name`): `openai` by default,
    /// `azure.ai.openai` with [`azure`](Self::azure); say `vllm` or `ollama` for those.
    pub fn provider_name(mut self, name: impl Into<String>) -> Self {
        self.provider = Some(name.into());
        self
    }

    /// Sends `"strict": true` on every function tool, so that the model's arguments
    /// follow the schema exactly.
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

    /// When streaming, whether to ask for token counts (`stream_options.include_usage`,
    /// on by default); turn it off for a server that rejects the option.
    pub fn stream_usage(mut self, include: bool) -> Self {
        self.options.stream_usage = include;
        self
    }

    /// Timeouts, retries and size limits.
    pub fn http(mut self, http: HttpOptions) -> Self {
        self.http = http;
        self
    }

    /// The client.
    pub fn build(self) -> Result<OpenAiClient, ConfigError> {
        let mut url = endpoint(&self.base_url.0, &["chat", "completions"])?;
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.key {
            let (name, value) = match self.azure_api_version {
                Some(_) => (HeaderName::from_static("api-key"), key.header("")?),
                None => (AUTHORIZATION, key.header("Bearer ")?),
            };
            headers.insert(name, value);
        }
        if let Some(version) = &self.azure_api_version {
            url.query_pairs_mut().append_pair("api-version", version);
        }
        let provider = self.provider.unwrap_or_else(|| {
            match self.azure_api_version {
                Some(_) => "azure.ai.openai",
                None => "openai",
            }
            .to_owned()
        });
        Ok(OpenAiClient {
            transport: Transport::new(url, headers, self.key, self.http)?,
            options: self.options,
            provider,
        })
    }
}
