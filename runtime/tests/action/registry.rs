//! The registry: explicit tool lists, a sorted catalog, a fingerprint of the tool surface,
//! and fail-closed dispatch.

use serde_json::{Value, json};
use tooltrust::gate::rule;
use tooltrust::registry::{DispatchError, RegistryError};
use tooltrust::tool::{
    ArtifactHandle, Content, DeclaredTrust, Effects, Media, Outcome, OutputKind, Retrieved,
    RetrievedRecord, SourceTier, Tool, ToolError, ToolFuture, ToolInput, ToolSpec,
};
use tooltrust::{CallOutcome, Id, Registry, Session, ToolCall, Trust, tool, tools};

/// Returns the style guide.
#[tool(trusted, instruction, read_only)]
fn style_guide() -> String {
    "Write plainly.".into()
}

/// Fetches a web page.
#[tool(untrusted, read_only)]
async fn fetch_page(
    /// The page's URL.
    url: String,
) -> Result<String, std::io::Error> {
    if url.starts_with("https://") {
        Ok(format!("page at {url}"))
    } else {
        Err(std::io::Error::other(format!("cannot fetch {url}")))
    }
}

/// Sends an email.
#[tool(trusted)]
fn send_email(
    /// Recipient.
    to: String,
    /// Body.
    body: String,
    /// Optional subject.
    subject: Option<String>,
    /// Optional carbon copies.
    cc: Option<Vec<String>>,
) -> String {
    format!("sent to {to} ({} bytes, {subject:?}, {cc:?})", body.len())
}

/// A trusted tool that returns media: the media is untrusted anyway.
#[tool(trusted, read_only)]
fn screenshot() -> Media {
    Media {
        mime: "image/png".into(),
        data: vec![1, 2, 3],
        description: Some("a page".into()),
    }
}

/// A trusted tool that returns retrieved records: they are untrusted anyway.
#[tool(trusted, read_only)]
fn search() -> Retrieved {
    Retrieved(vec![RetrievedRecord {
        id: tooltrust::Id::new("r1").unwrap(),
        content: "text".into(),
        tier: SourceTier::ThirdPartyPublic,
        source: None,
        created_at: None,
        kind: None,
        score: None,
    }])
}

/// A trusted tool that returns an artifact handle: it is untrusted anyway.
#[tool(trusted, read_only)]
fn export() -> ArtifactHandle {
    ArtifactHandle {
        id: "a1".into(),
        name: "report.pdf".into(),
        mime: "application/pdf".into(),
        bytes: 10,
    }
}

/// A trusted data tool returning structured data.
#[tool(trusted, read_only, name = "order-status")]
fn order_status(order: u64) -> Value {
    json!({"order": order, "status": "shipped"})
}

fn registry() -> Registry {
    tools![
        style_guide,
        fetch_page,
        send_email,
        screenshot,
        search,
        export,
        order_status
    ]
    .expect("valid registry")
}

/// Runs one call in a fresh clean scope, as the gate allows it.
fn dispatch(
    registry: Registry,
    tool: &str,
    args: &str,
) -> Result<tooltrust::registry::ToolOutput, Box<CallOutcome>> {
    let call = ToolCall::from_model(tool, args).expect("well-formed call");
    run(registry, call)
}

fn run(
    registry: Registry,
    call: ToolCall,
) -> Result<tooltrust::registry::ToolOutput, Box<CallOutcome>> {
    let session = Session::builder(registry).build().expect("session");
    let scope = session
        .open_scope(Id::new("agent").unwrap())
        .expect("scope");
    match pollster::block_on(scope.call(call)).expect("recorded") {
        CallOutcome::Ran { output, .. } => Ok(output),
        other => Err(Box::new(other)),
    }
}

#[test]
fn catalog_is_sorted_and_complete() {
    let registry = registry();
    let names: Vec<&str> = registry.catalog().iter().map(|e| e.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    assert_eq!(names.len(), 7);

    let email = registry
        .catalog()
        .iter()
        .find(|e| e.name == "send_email")
        .expect("listed");
    assert_eq!(email.description, "Sends an email.");
    assert_eq!(email.trust, DeclaredTrust::Trusted);
    assert_eq!(email.output, OutputKind::Data);
    assert_eq!(email.effects, Effects::Consequential);
    assert_eq!(email.schema["required"], json!(["to", "body"]));
    assert_eq!(
        email.schema["properties"]["to"]["description"],
        "Recipient."
    );
    assert_eq!(email.schema["additionalProperties"], json!(false));

    let guide = registry.spec("style_guide").expect("known");
    assert_eq!(guide.output, OutputKind::Instruction);
    assert_eq!(guide.effects, Effects::ReadOnly);
    assert!(
        registry.spec("order-status").is_ok(),
        "`name = …` overrides the fn name"
    );
}

#[test]
fn schemas_are_provider_safe() {
    for entry in registry().catalog() {
        let schema = entry.schema.as_object().expect("object schema");
        assert_eq!(schema["type"], "object", "{}", entry.name);
        assert!(schema["properties"].is_object(), "{}", entry.name);
        assert!(schema["required"].is_array(), "{}", entry.name);
        assert!(!schema.contains_key("title"), "{}", entry.name);
        assert!(!schema.contains_key("$schema"), "{}", entry.name);
    }
}

/// Every property the schema calls required is required by the deserializer, and every
/// optional one may be left out or null.
#[test]
fn schema_and_deserializer_agree() {
    let full =
        json!({"to": "a@example.com", "body": "hi", "subject": "s", "cc": ["b@example.com"]});
    assert!(dispatch(registry(), "send_email", &full.to_string()).is_ok());
    let schema = &registry().spec_schema("send_email");
    let required: Vec<&str> = schema["required"]
        .as_array()
        .expect("array")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for field in schema["properties"].as_object().expect("object").keys() {
        let mut args = full.clone();
        args.as_object_mut().expect("object").remove(field);
        let missing = dispatch(registry(), "send_email", &args.to_string());
        assert_eq!(
            missing.is_err(),
            required.contains(&field.as_str()),
            "field {field}: schema and deserializer disagree"
        );
        if !required.contains(&field.as_str()) {
            args[field.as_str()] = Value::Null;
            assert!(
                dispatch(registry(), "send_email", &args.to_string()).is_ok(),
                "{field}: null"
            );
        }
    }
}

trait SpecSchema {
    fn spec_schema(&self, name: &str) -> Value;
}

impl SpecSchema for Registry {
    fn spec_schema(&self, name: &str) -> Value {
        self.catalog()
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.schema.clone())
            .expect("known tool")
    }
}

#[test]
fn unknown_tool_is_an_error_listing_the_available_tools() {
    let error = registry().spec("delete_account").expect_err("unknown");
    match &error {
        DispatchError::UnknownTool { name, available } => {
            assert_eq!(name, "delete_account");
            assert_eq!(available.len(), 7);
            assert!(available.contains(&"send_email".to_owned()));
        }
        other => panic!("expected UnknownTool, got {other:?}"),
    }
    assert!(
        error
            .to_string()
            .contains("fetch_page, order-status, screenshot")
    );
    // The gate never lets it through.
    match dispatch(registry(), "delete_account", "{}").map_err(|outcome| *outcome) {
        Err(CallOutcome::Denied(decision)) => {
            assert_eq!(decision.rule, rule::UNKNOWN_TOOL);
            assert!(
                decision
                    .reason
                    .contains("available tools: export, fetch_page")
            );
        }
        other => panic!("expected a denial, got {other:?}"),
    }
}

#[test]
fn bad_arguments_are_typed_errors() {
    for args in [
        r#"{"to": 42, "body": "x"}"#,
        r#"{"body": "x"}"#,
        r#"{"to": "a", "body": "x", "bcc": "spy@example.com"}"#,
        r#"{"to": "a", "body": "x", "cc": "not-a-list"}"#,
    ] {
        match dispatch(registry(), "send_email", args).map_err(|outcome| *outcome) {
            Err(CallOutcome::Invalid {
                error:
                    DispatchError::Refused {
                        tool,
                        error: ToolError::Arguments(error),
                    },
                ..
            }) => {
                assert_eq!(tool, "send_email");
                assert!(!error.to_string().is_empty());
            }
            other => panic!("{args}: expected InvalidArguments, got {other:?}"),
        }
    }
    let Err(CallOutcome::Invalid {
        error: DispatchError::Refused { error, .. },
        ..
    }) = dispatch(registry(), "send_email", r#"{"to": 42, "body": "x"}"#).map_err(|o| *o)
    else {
        panic!("expected InvalidArguments");
    };
    assert!(
        error.to_string().contains("`to`"),
        "names the field: {error}"
    );
}

#[test]
fn outputs_carry_declared_trust_except_outsider_content_and_errors() {
    let cases = [
        (
            "style_guide",
            "{}",
            Trust::Trusted,
            OutputKind::Instruction,
            false,
        ),
        (
            "order-status",
            r#"{"order": 7}"#,
            Trust::Trusted,
            OutputKind::Data,
            false,
        ),
        (
            "fetch_page",
            r#"{"url": "https://a.example"}"#,
            Trust::Untrusted,
            OutputKind::Data,
            false,
        ),
        (
            "fetch_page",
            r#"{"url": "ftp://a.example"}"#,
            Trust::Untrusted,
            OutputKind::Data,
            true,
        ),
        ("screenshot", "", Trust::Untrusted, OutputKind::Data, false),
        ("search", "", Trust::Untrusted, OutputKind::Data, false),
        ("export", "", Trust::Untrusted, OutputKind::Data, false),
    ];
    for (tool, args, trust, output, failed) in cases {
        let result = dispatch(registry(), tool, args).expect("dispatched");
        assert_eq!(result.trust, trust, "{tool}");
        assert_eq!(result.output, output, "{tool}");
        assert_eq!(result.failed, failed, "{tool}");
        assert_eq!(result.tool, tool);
    }
    let result = dispatch(registry(), "order-status", r#"{"order": 7}"#).expect("dispatched");
    assert_eq!(
        result.content,
        Content::Json(json!({"order": 7, "status": "shipped"}))
    );
    let failed = dispatch(registry(), "fetch_page", r#"{"url": "ftp://x"}"#).expect("dispatched");
    assert_eq!(failed.content, Content::Text("cannot fetch ftp://x".into()));
}

#[test]
fn dispatch_reports_the_calls_checksum_and_id() {
    let call = ToolCall::from_model("order-status", r#"{"order": 7}"#).expect("call");
    let output = run(registry(), call.clone()).expect("dispatched");
    assert_eq!(output.checksum, call.checksum());
    assert_eq!(&output.call_id, call.id());
}

/// A hand-written tool whose surface is only known at run time.
struct Dynamic {
    spec: ToolSpec,
}

impl Tool for Dynamic {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }
    fn args_schema(&self) -> Value {
        json!({"type": "object", "properties": {}, "required": []})
    }
    fn call<'a>(&'a self, _input: ToolInput<'a>) -> ToolFuture<'a> {
        Box::pin(async { Ok(Outcome::Output(Content::Text("ok".into()))) })
    }
}

fn dynamic(name: &str) -> Box<dyn Tool> {
    Box::new(Dynamic {
        spec: ToolSpec {
            name: name.to_owned().into(),
            description: "d".into(),
            trust: DeclaredTrust::Trusted,
            output: OutputKind::Data,
            effects: Effects::ReadOnly,
        },
    })
}

#[test]
fn duplicate_and_invalid_names_are_refused_when_built() {
    assert_eq!(
        Registry::new([dynamic("a"), dynamic("b"), dynamic("a")]).err(),
        Some(RegistryError::DuplicateName("a".into()))
    );
    assert_eq!(
        Registry::new([Box::new(SendEmail) as Box<dyn Tool>, dynamic("send_email")]).err(),
        Some(RegistryError::DuplicateName("send_email".into()))
    );
    for bad in ["", "has space", "ünï", "a/b"] {
        assert_eq!(
            Registry::new([dynamic(bad)]).err(),
            Some(RegistryError::InvalidName(bad.into()))
        );
    }
    assert!(matches!(
        Registry::new([dynamic(&"x".repeat(65))]),
        Err(RegistryError::InvalidName(_))
    ));
    let untrusted_instruction = Box::new(Dynamic {
        spec: ToolSpec {
            name: "x".into(),
            description: "d".into(),
            trust: DeclaredTrust::Untrusted,
            output: OutputKind::Instruction,
            effects: Effects::ReadOnly,
        },
    });
    assert_eq!(
        Registry::new([untrusted_instruction as Box<dyn Tool>]).err(),
        Some(RegistryError::UntrustedInstruction("x".into()))
    );
}

#[test]
fn fingerprint_changes_with_the_tool_surface() {
    let base = ToolSpec {
        name: "t".into(),
        description: "d".into(),
        trust: DeclaredTrust::Trusted,
        output: OutputKind::Data,
        effects: Effects::ReadOnly,
    };
    let fingerprint = |spec: ToolSpec| {
        Registry::new([Box::new(Dynamic { spec }) as Box<dyn Tool>])
            .expect("valid")
            .fingerprint()
            .to_owned()
    };
    let variants = [
        base.clone(),
        ToolSpec {
            name: "u".into(),
            ..base.clone()
        },
        ToolSpec {
            description: "e".into(),
            ..base.clone()
        },
        ToolSpec {
            trust: DeclaredTrust::Untrusted,
            ..base.clone()
        },
        ToolSpec {
            output: OutputKind::Instruction,
            ..base.clone()
        },
        ToolSpec {
            effects: Effects::Consequential,
            ..base.clone()
        },
    ];
    let prints: Vec<String> = variants.into_iter().map(fingerprint).collect();
    for (i, a) in prints.iter().enumerate() {
        assert_eq!(a.len(), 64);
        for b in &prints[i + 1..] {
            assert_ne!(a, b);
        }
    }
    // Stable for the same surface, whatever the order tools were listed in.
    assert_eq!(fingerprint(base), prints[0]);
    let ab = Registry::new([dynamic("a"), dynamic("b")]).expect("valid");
    let ba = Registry::new([dynamic("b"), dynamic("a")]).expect("valid");
    assert_eq!(ab.fingerprint(), ba.fingerprint());
    // The schema is part of the surface.
    assert_ne!(
        tools![fetch_page].expect("valid").fingerprint(),
        Registry::new([Box::new(Dynamic {
            spec: FetchPage::SPEC
        }) as Box<dyn Tool>])
        .expect("valid")
        .fingerprint()
    );
}
