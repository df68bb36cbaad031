//! Provider wire formats: each module turns a registry and a conversation into the JSON a
//! provider expects, and the provider's answer back into an [`AssistantMessage`]. No HTTP
//! client: the host sends the bytes with its own.
//!
//! Responses are parsed strictly (duplicate keys refused), so the arguments tooltrust
//! checksums are exactly the ones the provider sent.
//!
//! [`AssistantMessage`]: crate::agent::AssistantMessage

#[cfg(feature = "anthropic")]
pub mod anthropic;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "openai")]
pub mod openai;

use serde_json::Value;

use crate::canonical::JsonError;

/// Why a provider's answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The body is not acceptable JSON.
    #[error("the provider's answer is not acceptable JSON: {0}")]
    Json(#[from] JsonError),
    /// A field the format requires is missing or has the wrong type.
    #[error("the provider's answer has no {expected} at `{path}`")]
    Shape {
        /// Where in the answer.
        path: String,
        /// What was expected there.
        expected: &'static str,
    },
}

/// The string at `value[key]`, or a shape error naming `path`.
pub(crate) fn string_at<'a>(
    value: &'a Value,
    key: &str,
    path: &str,
) -> Result<&'a str, ProviderError> {
    value
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ProviderError::Shape {
            path: format!("{path}.{key}"),
            expected: "string",
        })
}

/// The array at `value[key]`, or a shape error naming `path`.
pub(crate) fn array_at<'a>(
    value: &'a Value,
    key: &str,
    path: &str,
) -> Result<&'a [Value], ProviderError> {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .ok_or_else(|| ProviderError::Shape {
            path: format!("{path}.{key}"),
            expected: "array",
        })
}
