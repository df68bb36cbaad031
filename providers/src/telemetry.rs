//! A `tracing` span around each model request, with the OpenTelemetry GenAI
//! semantic-convention attribute names. Only names, counts and reasons are recorded:
//! never the prompt, the answer or a call's arguments.

use tracing::Span;
use tracing::field::Empty;

use crate::completion::Completion;
use crate::error::ProviderError;

/// What the span says about the request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestInfo<'a> {
    /// `gen_ai.provider.name`: `openai`, `azure.ai.openai`, `anthropic`, …
    pub provider: &'a str,
    /// `gen_ai.request.model`.
    pub model: &'a str,
    /// `gen_ai.request.max_tokens`, when the request sets it.
    pub max_tokens: Option<u32>,
}

/// The span of one request to `url`, its response fields still empty.
pub(crate) fn span(request: RequestInfo<'_>, url: &url::Url) -> Span {
    let span = tracing::info_span!(
        "gen_ai.chat",
        otel.name = %format_args!("chat {}", request.model),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = request.provider,
        // The name the conventions used before `gen_ai.provider.name`; kept for
        // backends that still read it.
        gen_ai.system = request.provider,
        gen_ai.request.model = request.model,
        gen_ai.request.max_tokens = Empty,
        server.address = url.host_str().unwrap_or_default(),
        server.port = url.port_or_known_default().unwrap_or_default(),
        gen_ai.response.id = Empty,
        gen_ai.response.model = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
    );
    if let Some(max_tokens) = request.max_tokens {
        span.record("gen_ai.request.max_tokens", max_tokens);
    }
    span
}

/// Records what came back (or what failed) on `span`.
pub(crate) fn record(span: &Span, result: &Result<Completion, ProviderError>) {
    match result {
        Ok(completion) => {
            if let Some(id) = &completion.id {
                span.record("gen_ai.response.id", id.as_str());
            }
            if let Some(model) = &completion.model {
                span.record("gen_ai.response.model", model.as_str());
            }
            if let Some(reason) = &completion.finish_reason {
                // The convention's value is an array of strings; one choice is asked for.
                let reasons = serde_json::Value::from(vec![reason.as_str()]);
                span.record(
                    "gen_ai.response.finish_reasons",
                    tracing::field::display(reasons),
                );
            }
            if let Some(tokens) = completion.usage.input_tokens {
                span.record("gen_ai.usage.input_tokens", tokens);
            }
            if let Some(tokens) = completion.usage.output_tokens {
                span.record("gen_ai.usage.output_tokens", tokens);
            }
        }
        Err(error) => {
            span.record("error.type", error.kind());
            span.record("otel.status_code", "ERROR");
        }
    }
}
