//! The shape check of the wire-format tests: our JSON against a provider's documented
//! example. Shared by the runtime's MCP test and tooltrust-providers' OpenAI and Anthropic
//! tests (included there by path).

use serde_json::Value;

/// Every key path of `documented` exists in `ours` with the same JSON type.
pub fn assert_same_shape(documented: &Value, ours: &Value, path: &str) {
    match (documented, ours) {
        (Value::Object(doc), Value::Object(our)) => {
            for (key, value) in doc {
                // Parameter names and enum values are the documentation's own.
                if path.ends_with("properties") {
                    continue;
                }
                let other = our
                    .get(key)
                    .unwrap_or_else(|| panic!("missing `{path}.{key}` in {ours}"));
                assert_same_shape(value, other, &format!("{path}.{key}"));
            }
        }
        (Value::Array(doc), Value::Array(our)) => {
            if let (Some(first), Some(other)) = (doc.first(), our.first()) {
                assert_same_shape(first, other, &format!("{path}[0]"));
            }
        }
        (doc, our) => assert_eq!(
            std::mem::discriminant(doc),
            std::mem::discriminant(our),
            "type at {path}: documented {doc}, ours {our}"
        ),
    }
}
