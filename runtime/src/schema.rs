//! Argument schemas in the shape strict providers accept.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The JSON Schema of a tool's arguments type, shaped for strict providers: an object
/// schema in which `properties` and `required` are always present, and without a
/// top-level `title` or `$schema`.
pub fn args_schema<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| settings.meta_schema = None)
        .for_deserialize()
        .into_generator();
    provider_safe(generator.into_root_schema_for::<T>().to_value())
}

/// Removes what strict providers reject and adds what they require.
fn provider_safe(schema: Value) -> Value {
    let mut object = match schema {
        Value::Object(object) => object,
        // An arguments type always has an object schema; anything else is wrapped so
        // that the shape still holds.
        other => {
            let mut object = Map::new();
            object.insert("type".into(), Value::from("object"));
            object.insert("allOf".into(), Value::Array(vec![other]));
            object
        }
    };
    object.remove("$schema");
    object.remove("title");
    // The tool's own description is the tool definition's; the arguments struct's doc
    // comment would only repeat it.
    object.remove("description");
    object
        .entry("type")
        .or_insert_with(|| Value::from("object"));
    object
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    object
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Empty {}

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    /// A titled struct.
    struct Titled {
        /// The query.
        query: String,
        limit: Option<u32>,
    }

    #[test]
    fn empty_args_still_have_properties_and_required() {
        let schema = args_schema::<Empty>();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"], serde_json::json!({}));
        assert_eq!(schema["required"], serde_json::json!([]));
        assert!(schema.get("$schema").is_none());
        assert!(schema.get("title").is_none());
    }

    #[test]
    fn option_fields_are_not_required() {
        let schema = args_schema::<Titled>();
        assert_eq!(schema["required"], serde_json::json!(["query"]));
        assert_eq!(schema["properties"]["query"]["description"], "The query.");
        assert!(schema.get("title").is_none());
    }
}
