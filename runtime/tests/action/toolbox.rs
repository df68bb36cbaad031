//! The DSL for real tools, through a session: `#[toolbox]` methods on shared state,
//! contexts the host supplies per scope (and the typed error when it did not), and tool
//! descriptions read from doc comments as rustdoc renders them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tooltrust::registry::{DispatchError, ToolOutput};
use tooltrust::tool::{Content, ToolError};
use tooltrust::{CallOutcome, Context, Id, Registry, Scope, Session, ToolCall, tool, toolbox};

/// Who the scope works for; the host supplies it, the model never sees it.
struct Caller {
    name: String,
}

/// A second context type, which no scope below supplies.
struct Credentials;

/// A toolbox whose methods count their runs, per instance (tests run in parallel).
struct Mailbox {
    runs: AtomicUsize,
    domain: String,
}

#[toolbox]
impl Mailbox {
    /// Sends an email on the caller's behalf.
    #[tool(trusted)]
    async fn send_email(
        &self,
        /// The recipient's local part.
        to: String,
        caller: Context<Caller>,
    ) -> Result<String, std::io::Error> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(format!("{} wrote to {to}@{}", caller.name, self.domain))
    }

    /// Signs a document with the caller's credentials.
    #[tool(trusted)]
    fn sign(&self, document: String, _credentials: Context<Credentials>) -> String {
        self.runs.fetch_add(1, Ordering::SeqCst);
        format!("signed {document}")
    }

    /// Counts the mail.
    ///
    /// Lists:
    ///   - the inbox
    ///   - the outbox
    #[tool(untrusted, read_only)]
    fn count_mail(&self) -> usize {
        self.runs.fetch_add(1, Ordering::SeqCst);
        2
    }
}

fn mailbox() -> Arc<Mailbox> {
    Arc::new(Mailbox {
        runs: AtomicUsize::new(0),
        domain: "example.com".into(),
    })
}

fn scope_of(registry: Registry) -> Scope {
    let session = Session::builder(registry).build().expect("session");
    session
        .open_scope(Id::new("agent").expect("id"))
        .expect("scope")
}

fn call(scope: &Scope, tool: &str, args: &str) -> CallOutcome {
    let call = ToolCall::from_model(tool, args).expect("well-formed call");
    pollster::block_on(scope.call(call)).expect("recorded")
}

fn ran(outcome: CallOutcome) -> ToolOutput {
    match outcome {
        CallOutcome::Ran { output, .. } => output,
        other => panic!("expected the call to run: {other:?}"),
    }
}

#[test]
fn a_toolbox_method_runs_on_its_value_with_the_scopes_context() {
    let mailbox = mailbox();
    let registry = Registry::builder()
        .toolbox(mailbox.clone())
        .build()
        .expect("registry");
    assert_eq!(
        registry.names().collect::<Vec<_>>(),
        ["count_mail", "send_email", "sign"]
    );
    // The context is no argument: not in the schema, so the model cannot send it.
    let send = &registry.catalog()[1];
    assert_eq!(send.name, "send_email");
    assert_eq!(send.schema["required"], json!(["to"]));
    assert_eq!(
        send.schema["properties"],
        json!({"to": {"type": "string", "description": "The recipient's local part."}})
    );

    let scope = scope_of(registry).with_context(Caller { name: "Ann".into() });
    let model_call = ToolCall::from_model("send_email", r#"{"to": "bob"}"#).expect("call");
    let checksum = model_call.checksum();
    let output = ran(pollster::block_on(scope.call(model_call)).expect("recorded"));
    assert_eq!(
        output.content,
        Content::Text("Ann wrote to bob@example.com".into())
    );
    // The checksum covers the model's arguments alone, whatever the context.
    assert_eq!(output.checksum, checksum);
    assert_eq!(
        checksum,
        ToolCall::from_value("send_email", json!({"to": "bob"}))
            .expect("call")
            .checksum()
    );
    assert_eq!(mailbox.runs.load(Ordering::SeqCst), 1);
    // The context's value never enters the scope's context (only the tool's output does).
    let context = scope.context().expect("context");
    assert_eq!(context.matches("Ann").count(), 1, "{context}");
}

#[test]
fn a_missing_context_is_a_typed_error_and_the_tool_does_not_run() {
    let mailbox = mailbox();
    let registry = Registry::builder()
        .toolbox(mailbox.clone())
        .build()
        .expect("registry");
    // A `Caller`, but no `Credentials`.
    let scope = scope_of(registry).with_context(Caller { name: "Ann".into() });
    match call(&scope, "sign", r#"{"document": "lease"}"#) {
        CallOutcome::Invalid {
            error:
                DispatchError::Refused {
                    tool,
                    error: ToolError::MissingContext { type_name },
                },
            note,
        } => {
            assert_eq!(tool, "sign");
            assert!(type_name.ends_with("Credentials"), "{type_name}");
            assert!(note.contains("with_context"), "{note}");
        }
        other => panic!("expected a missing-context error, got {other:?}"),
    }
    assert_eq!(
        mailbox.runs.load(Ordering::SeqCst),
        0,
        "the body did not run"
    );

    // A scope with no context at all: the same, for the other method.
    let scope = scope_of(
        Registry::builder()
            .toolbox(mailbox.clone())
            .build()
            .expect("registry"),
    );
    assert!(matches!(
        call(&scope, "send_email", r#"{"to": "bob"}"#),
        CallOutcome::Invalid {
            error: DispatchError::Refused {
                error: ToolError::MissingContext { .. },
                ..
            },
            ..
        }
    ));
    assert_eq!(
        mailbox.runs.load(Ordering::SeqCst),
        0,
        "the body did not run"
    );
    // A method that asks for no context runs in the same scope.
    assert_eq!(
        ran(call(&scope, "count_mail", "")).content,
        Content::Json(2.into())
    );
    assert_eq!(mailbox.runs.load(Ordering::SeqCst), 1);
}

#[test]
fn child_scopes_inherit_the_context() {
    let mailbox = mailbox();
    let registry = Registry::builder()
        .toolbox(mailbox.clone())
        .build()
        .expect("registry");
    let scope = scope_of(registry).with_context(Caller { name: "Ann".into() });
    let child = scope.child(Id::new("helper").expect("id")).expect("child");
    assert_eq!(
        ran(call(&child, "send_email", r#"{"to": "bob"}"#)).content,
        Content::Text("Ann wrote to bob@example.com".into())
    );
}

/// Returns the refund policy.
///
///   Indented lines keep the indentation beyond the shared one:
///       - kettles: 30 days
///
/// The end.
#[tool(trusted, instruction, read_only)]
fn multi_line() -> &'static str {
    "30 days"
}

// The policy file the DSL's compile-time cases include too (tests/ui).
#[doc = include_str!("../../../tests/ui/tests/ui-pass/refund_policy.md")]
#[tool(trusted, instruction, read_only)]
fn included() -> &'static str {
    "30 days"
}

/// The refund policy, as the developer wrote it:
///
#[doc = include_str!("../../../tests/ui/tests/ui-pass/refund_policy.md")]
#[tool(trusted, instruction, read_only)]
fn mixed() -> &'static str {
    "30 days"
}

/// Returns the refund policy.
#[doc = include_str!("../../../tests/ui/tests/ui-pass/refund_policy.md")]
/// The end.
#[tool(trusted, instruction, read_only)]
fn included_between() -> &'static str {
    "30 days"
}

/// Written for the developers, not the model.
#[tool(trusted, read_only, description = "Returns the time.")]
fn overridden() -> &'static str {
    "noon"
}

#[test]
fn descriptions_are_the_doc_text_as_rustdoc_renders_it() {
    let registry = tooltrust::tools![multi_line, included, mixed, included_between, overridden]
        .expect("registry");
    let description = |name: &str| {
        registry
            .catalog()
            .iter()
            .find(|entry| entry.name == name)
            .map(|entry| entry.description.clone())
            .expect("listed")
    };
    // rustdoc drops the one space every `///` line shares, and keeps deeper indentation
    // and blank lines.
    assert_eq!(
        description("multi_line"),
        "Returns the refund policy.\n\
         \n\
         \x20 Indented lines keep the indentation beyond the shared one:\n\
         \x20     - kettles: 30 days\n\
         \n\
         The end."
    );
    let file = "Returns the refund policy that support agents must follow.\n\
                \n\
                It is the developer's text: the model selects a product, never writes the policy.";
    // The file as written (its final newline is not part of the text).
    assert_eq!(
        include_str!("../../../tests/ui/tests/ui-pass/refund_policy.md").trim_end(),
        file
    );
    assert_eq!(description("included"), file);
    // Fragments join line by line, as rustdoc joins them.
    assert_eq!(
        description("mixed"),
        format!("The refund policy, as the developer wrote it:\n\n{file}")
    );
    // The file's final newline ends its last line: no blank line before the next.
    assert_eq!(
        description("included_between"),
        format!("Returns the refund policy.\n{file}\nThe end.")
    );
    assert_eq!(description("overridden"), "Returns the time.");

    // A toolbox method's doc comment is read the same way.
    let registry = Registry::builder()
        .toolbox(mailbox())
        .build()
        .expect("registry");
    assert_eq!(
        registry.catalog()[0].description,
        "Counts the mail.\n\nLists:\n  - the inbox\n  - the outbox"
    );
}
