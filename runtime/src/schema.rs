//! Argument schemas in the shape providers accept, and the strict form OpenAI's
//! structured outputs require.

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
pub(crate) fn provider_safe(schema: Value) -> Value {
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

/// Why a schema has no strict form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StrictSchemaError {
    /// An object whose keys are not listed (a map): strict mode requires every object to
    /// list its properties and allow no others.
    #[error("`{0}` is a map: strict mode lists every property of every object")]
    Map(String),
    /// A combinator strict mode does not support.
    #[error("`{at}` uses `{keyword}`, which strict mode does not support")]
    Unsupported {
        /// Where.
        at: String,
        /// The keyword.
        keyword: &'static str,
    },
}

/// Keywords strict mode documents as unsupported; dropping them loosens what the model
/// is held to, never what a tool accepts (the deserializer still checks).
const UNSUPPORTED: [&str; 22] = [
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "minItems",
    "maxItems",
    "uniqueItems",
    "default",
];

/// The strict form of an arguments schema, as OpenAI's strict structured outputs accept
/// it: every object lists every property in `required` (an optional one becomes
/// nullable) and sets `additionalProperties: false`; `oneOf` becomes `anyOf`; keywords
/// strict mode does not support are dropped. A map has no strict form.
pub fn strict_schema(schema: &Value) -> Result<Value, StrictSchemaError> {
    let mut strict = schema.clone();
    make_strict(&mut strict, "arguments")?;
    Ok(strict)
}

fn make_strict(schema: &mut Value, at: &str) -> Result<(), StrictSchemaError> {
    let Some(object) = schema.as_object_mut() else {
        return Ok(());
    };
    for keyword in UNSUPPORTED {
        object.remove(keyword);
    }
    if let Some(one_of) = object.remove("oneOf") {
        object.insert("anyOf".into(), one_of);
    }
    for keyword in ["allOf", "not", "if", "then", "else", "dependentSchemas"] {
        if object.contains_key(keyword) {
            return Err(StrictSchemaError::Unsupported {
                at: at.to_owned(),
                keyword,
            });
        }
    }
    let is_object = object.get("type").and_then(Value::as_str) == Some("object")
        || object.contains_key("properties");
    if is_object {
        if matches!(object.get("additionalProperties"), Some(extra) if extra != &Value::Bool(false))
        {
            return Err(StrictSchemaError::Map(at.to_owned()));
        }
        object.insert("additionalProperties".into(), Value::Bool(false));
        let required: Vec<String> = object
            .get("required")
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let properties = object
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        let mut all = Vec::new();
        if let Some(properties) = properties.as_object_mut() {
            for (name, property) in properties.iter_mut() {
                make_strict(property, &format!("{at}.{name}"))?;
                if !required.contains(name) {
                    make_nullable(property);
                }
                all.push(Value::from(name.as_str()));
            }
        }
        object.insert("required".into(), Value::Array(all));
    }
    if let Some(items) = object.get_mut("items") {
        make_strict(items, &format!("{at}[]"))?;
    }
    for key in ["anyOf", "prefixItems"] {
        if let Some(Value::Array(options)) = object.get_mut(key) {
            for option in options {
                make_strict(option, at)?;
            }
        }
    }
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(definitions)) = object.get_mut(key) {
            for (name, definition) in definitions.iter_mut() {
                make_strict(definition, name)?;
            }
        }
    }
    Ok(())
}

/// Lets an optional property be `null`, which strict mode requires instead of leaving
/// it out (and which the deserializer reads as `None`).
fn make_nullable(property: &mut Value) {
    let accepts_null = |ty: &Value| match ty {
        Value::String(ty) => ty == "null",
        Value::Array(types) => types.iter().any(|ty| ty == "null"),
        _ => false,
    };
    let Some(object) = property.as_object_mut() else {
        return;
    };
    if object.get("type").is_some_and(accepts_null) {
        return;
    }
    if let Some(options) = object.get_mut("anyOf").and_then(Value::as_array_mut) {
        if !options
            .iter()
            .any(|option| option.get("type").is_some_and(accepts_null))
        {
            options.push(serde_json::json!({"type": "null"}));
        }
        return;
    }
    let simple_type = object
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_owned);
    match simple_type {
        Some(ty) if !object.contains_key("enum") && !object.contains_key("const") => {
            object.insert("type".into(), serde_json::json!([ty, "null"]));
        }
        _ => {
            let description = object.remove("description");
            let inner = std::mem::take(object);
            object.insert(
                "anyOf".into(),
                serde_json::json!([Value::Object(inner), {"type": "null"}]),
            );
            if let Some(description) = description {
                object.insert("description".into(), description);
            }
        }
    }
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
