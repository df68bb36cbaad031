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
    /// A value of any type (`serde_json::Value`, say): strict mode needs every schema to
    /// say what type it holds.
    #[error("`{0}` accepts any JSON value: strict mode needs a type for every value")]
    Untyped(String),
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
/// strict mode does not support are dropped. A map, a value of any type and the
/// combinators strict mode lacks (`allOf`, `not`, `if`) have no strict form.
pub fn strict_schema(schema: &Value) -> Result<Value, StrictSchemaError> {
    let mut strict = schema.clone();
    make_strict(&mut strict, "arguments")?;
    Ok(strict)
}

fn make_strict(schema: &mut Value, at: &str) -> Result<(), StrictSchemaError> {
    // `true` (anything) has no strict form; `false` (nothing) has no use.
    let Some(object) = schema.as_object_mut() else {
        return Err(StrictSchemaError::Untyped(at.to_owned()));
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
    if !["type", "$ref", "anyOf", "enum", "const"]
        .iter()
        .any(|keyword| object.contains_key(*keyword))
    {
        return Err(StrictSchemaError::Untyped(at.to_owned()));
    }
    // `["object", "null"]` (an optional map or struct) is an object too.
    let is_object = match object.get("type") {
        Some(Value::String(ty)) => ty == "object",
        Some(Value::Array(types)) => types.iter().any(|ty| ty == "object"),
        _ => false,
    } || object.contains_key("properties");
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
                all.push(name.clone());
            }
        }
        // In name order whatever order the map keeps (serde_json's `preserve_order`,
        // which another crate of the build may turn on): the schema, and the catalog
        // fingerprint and pins hashed over it, must not depend on a dependency's feature.
        all.sort_unstable();
        object.insert(
            "required".into(),
            Value::Array(all.into_iter().map(Value::from).collect()),
        );
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
    use std::collections::{BTreeMap, HashMap};

    use serde_json::json;

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

    // The rules of OpenAI's strict mode ("Structured Outputs", supported schemas): the
    // root is an object (not `anyOf`); every object lists all its properties in
    // `required` and sets `additionalProperties: false`, at every level, `$defs`
    // included; an optional value is a union with `null`; only `anyOf` combines
    // schemas (`allOf`, `oneOf`, `not`, `if`/`then`/`else` are refused); every schema has
    // a type (or is a `$ref`, an `anyOf`, an `enum` or a `const`). Keywords some
    // models reject (string, number, array and object constraints, `format`,
    // `default`) must be gone.

    /// Keywords that must not appear anywhere in a strict schema.
    const REFUSED: [&str; 17] = [
        "allOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "format",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "patternProperties",
        "default",
    ];

    /// Checks every rule above on `schema` and each of its subschemas; returns how many
    /// object schemas it checked, so that a test can tell the walk reached them.
    fn assert_strict(schema: &Value, at: &str) -> usize {
        let object = schema
            .as_object()
            .unwrap_or_else(|| panic!("{at}: a schema must be an object, got {schema}"));
        for keyword in REFUSED {
            assert!(
                !object.contains_key(keyword),
                "{at}: `{keyword}` in {schema}"
            );
        }
        assert!(
            ["type", "$ref", "anyOf", "enum", "const"]
                .iter()
                .any(|keyword| object.contains_key(*keyword)),
            "{at}: untyped {schema}"
        );
        let mut objects = 0;
        if object.get("type") == Some(&json!("object")) || object.contains_key("properties") {
            objects += 1;
            assert_eq!(
                object.get("additionalProperties"),
                Some(&json!(false)),
                "{at}"
            );
            let properties = object["properties"].as_object().expect("properties");
            let mut names: Vec<&str> = properties.keys().map(String::as_str).collect();
            let mut required: Vec<&str> = object["required"]
                .as_array()
                .expect("required")
                .iter()
                .map(|name| name.as_str().expect("a name"))
                .collect();
            names.sort_unstable();
            required.sort_unstable();
            assert_eq!(names, required, "{at}: every property is required");
            for (name, property) in properties {
                objects += assert_strict(property, &format!("{at}.{name}"));
            }
        }
        if let Some(items) = object.get("items") {
            objects += assert_strict(items, &format!("{at}[]"));
        }
        if let Some(options) = object.get("anyOf") {
            for option in options.as_array().expect("anyOf is an array") {
                objects += assert_strict(option, &format!("{at}|"));
            }
        }
        if let Some(definitions) = object.get("$defs") {
            for (name, definition) in definitions.as_object().expect("$defs") {
                objects += assert_strict(definition, name);
            }
        }
        objects
    }

    fn accepts_null(schema: &Value, root: &Value) -> bool {
        if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
            return accepts_null(&root[target.trim_start_matches("#/$defs/")], root);
        }
        match schema.get("type") {
            Some(Value::String(ty)) => ty == "null",
            Some(Value::Array(types)) => types.contains(&json!("null")),
            _ => schema
                .get("anyOf")
                .and_then(Value::as_array)
                .is_some_and(|options| options.iter().any(|o| accepts_null(o, root))),
        }
    }

    fn strict_of<T: JsonSchema>() -> Value {
        let schema = args_schema::<T>();
        let strict = strict_schema(&schema).unwrap_or_else(|error| panic!("{error}: {schema}"));
        assert_strict(&strict, "arguments");
        strict
    }

    fn definition<'a>(strict: &'a Value, name: &str) -> &'a Value {
        &strict["$defs"][name]
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    enum Unit {
        Kettle,
        Toaster,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    enum Shape {
        Point,
        Circle { radius: f64, label: Option<String> },
        Square(u32),
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Address {
        street: String,
        /// The flat, if any.
        flat: Option<u16>,
        tags: Vec<String>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Nested {
        address: Address,
        previous: Option<Address>,
        history: Vec<Address>,
        shape: Shape,
        maybe_shape: Option<Shape>,
        unit: Unit,
        maybe_unit: Option<Unit>,
        /// How many.
        count: Option<u8>,
        ratio: f64,
        names: Option<Vec<String>>,
        #[schemars(length(min = 1, max = 5), regex(pattern = "^[a-z]+$"))]
        code: String,
    }

    #[test]
    fn a_nested_schema_follows_every_rule_of_strict_mode() {
        let loose = args_schema::<Nested>();
        // The loose schema has what strict mode refuses, so the test can fail.
        let text = loose.to_string();
        for keyword in [
            "\"format\"",
            "\"minimum\"",
            "\"oneOf\"",
            "\"maxLength\"",
            "\"pattern\"",
        ] {
            assert!(text.contains(keyword), "{keyword} not in {loose}");
        }
        assert_eq!(
            loose["required"],
            json!(["address", "history", "shape", "unit", "ratio", "code"])
        );
        let strict = strict_of::<Nested>();
        // Root, Nested's own object, Address and the Circle variant's two objects.
        assert!(assert_strict(&strict, "arguments") >= 4);

        let properties = &strict["properties"];
        // Option<integer> and Option<Vec<_>>: nullable types.
        assert_eq!(properties["count"]["type"], json!(["integer", "null"]));
        assert_eq!(properties["count"]["description"], "How many.");
        assert_eq!(properties["names"]["type"], json!(["array", "null"]));
        assert_eq!(properties["names"]["items"]["type"], "string");
        // Option<struct> and Option<enum>: a union with null, in `anyOf`.
        for name in ["previous", "maybe_shape", "maybe_unit"] {
            assert!(
                accepts_null(&properties[name], &strict),
                "{name}: {}",
                properties[name]
            );
        }
        // Required values stay non-nullable.
        for name in ["address", "history", "shape", "unit", "ratio", "code"] {
            assert!(
                !accepts_null(&properties[name], &strict),
                "{name}: {}",
                properties[name]
            );
        }
        assert_eq!(properties["ratio"]["type"], "number");
        assert_eq!(properties["history"]["type"], "array");
        assert_eq!(properties["history"]["items"]["$ref"], "#/$defs/Address");

        // The nested struct is closed too, and its optional field nullable.
        let address = definition(&strict, "Address");
        // `required` lists the properties in name order.
        assert_eq!(address["required"], json!(["flat", "street", "tags"]));
        assert_eq!(
            address["properties"]["flat"]["type"],
            json!(["integer", "null"])
        );
        assert_eq!(
            address["properties"]["flat"]["description"],
            "The flat, if any."
        );

        // A unit enum: its variant names.
        let unit = definition(&strict, "Unit");
        assert_eq!(unit["type"], "string");
        assert_eq!(unit["enum"], json!(["Kettle", "Toaster"]));

        // A data enum: `anyOf` of its variants, each object closed and fully required.
        let shape = definition(&strict, "Shape");
        let variants = shape["anyOf"].as_array().expect("anyOf of the variants");
        let circle = variants
            .iter()
            .find(|v| v["properties"].get("Circle").is_some())
            .expect("the Circle variant");
        assert_eq!(circle["required"], json!(["Circle"]));
        let fields = &circle["properties"]["Circle"];
        assert_eq!(fields["required"], json!(["label", "radius"]));
        assert_eq!(fields["additionalProperties"], json!(false));
        assert_eq!(
            fields["properties"]["label"]["type"],
            json!(["string", "null"])
        );
        assert!(
            variants
                .iter()
                .any(|v| v["properties"].get("Square").is_some())
        );
        assert!(
            variants
                .iter()
                .any(|v| v.get("const") == Some(&json!("Point"))
                    || v.get("enum").is_some_and(|e| e
                        .as_array()
                        .is_some_and(|e| e.contains(&json!("Point"))))),
            "{shape}"
        );

        // Constraints are dropped from the strict form only (the deserializer and the
        // loose schema keep them).
        assert_eq!(properties["code"], json!({"type": "string"}));
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct WithHashMap {
        name: String,
        headers: HashMap<String, String>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct WithNestedMap {
        inner: Vec<Scores>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Scores {
        by_name: Option<BTreeMap<String, u32>>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct WithAnyValue {
        payload: Value,
    }

    #[test]
    fn maps_and_untyped_values_have_no_strict_form() {
        assert_eq!(
            strict_schema(&args_schema::<WithHashMap>()),
            Err(StrictSchemaError::Map("arguments.headers".into()))
        );
        assert_eq!(
            strict_schema(&args_schema::<WithNestedMap>()),
            Err(StrictSchemaError::Map("Scores.by_name".into()))
        );
        let error = strict_schema(&args_schema::<WithAnyValue>()).unwrap_err();
        assert_eq!(
            error,
            StrictSchemaError::Untyped("arguments.payload".into())
        );
        assert!(error.to_string().contains("`arguments.payload`"), "{error}");
    }

    #[test]
    fn combinators_strict_mode_lacks_are_errors() {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"allOf": [{"type": "string"}]}},
            "required": ["a"]
        });
        assert_eq!(
            strict_schema(&schema),
            Err(StrictSchemaError::Unsupported {
                at: "arguments.a".into(),
                keyword: "allOf"
            })
        );
        let schema = json!({
            "type": "object",
            "properties": {"a": {"type": "string", "not": {"const": "x"}}},
            "required": []
        });
        assert!(matches!(
            strict_schema(&schema),
            Err(StrictSchemaError::Unsupported { keyword: "not", .. })
        ));
    }

    #[test]
    fn an_already_strict_schema_is_unchanged() {
        let strict = strict_of::<Nested>();
        assert_eq!(strict_schema(&strict), Ok(strict));
    }
}
