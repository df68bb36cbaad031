//! Typed access to the fields of a provider's JSON, with the path of what is missing;
//! and the one schema a request sends for a tool.

use serde_json::Value;
use tooltrust::registry::CatalogEntry;

use crate::error::ProviderError;

/// The string at `value[key]`, or a shape error naming `path`.
pub(crate) fn string_at<'a>(
    value: &'a Value,
    key: &str,
    path: &str,
) -> Result<&'a str, ProviderError> {
    value
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ProviderError::shape(format!("{path}.{key}"), "string"))
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
        .ok_or_else(|| ProviderError::shape(format!("{path}.{key}"), "array"))
}

/// The object at `value[key]`, or a shape error naming `path`.
pub(crate) fn object_at<'a>(
    value: &'a Value,
    key: &str,
    path: &str,
) -> Result<&'a Value, ProviderError> {
    value
        .get(key)
        .filter(|value| value.is_object())
        .ok_or_else(|| ProviderError::shape(format!("{path}.{key}"), "object"))
}

/// The index at `value[key]`, or a shape error naming `path`.
pub(crate) fn index_at(value: &Value, key: &str, path: &str) -> Result<u64, ProviderError> {
    value
        .get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| ProviderError::shape(format!("{path}.{key}"), "index"))
}

/// The string at `value[key]` if there is one (absent and `null` are `None`).
pub(crate) fn optional_string<'a>(
    value: &'a Value,
    key: &str,
    path: &str,
) -> Result<Option<&'a str>, ProviderError> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(ProviderError::shape(format!("{path}.{key}"), "string")),
    }
}

/// The token count at `value[key]`, if it is one (usage is telemetry: a malformed count
/// is left out, not an error).
pub(crate) fn count_at(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

/// The arguments schema of `entry` as a request sends it: its strict form when
/// `strict`, or an error if it has none.
pub(crate) fn tool_schema(entry: &CatalogEntry, strict: bool) -> Result<Value, ProviderError> {
    if !strict {
        return Ok(entry.schema.clone());
    }
    entry
        .strict_schema
        .clone()
        .map_err(|source| ProviderError::StrictSchema {
            tool: entry.name.clone(),
            source,
        })
}
