//! Tools known only at run time (a remote MCP server's, a configuration's): a name, a
//! description, a JSON Schema, a declaration and an async handler. They pass through the
//! same validation as `#[tool]` functions, with the same wording.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;

use serde_json::{Map, Value};

use super::declaration::{RegistryError, validate_tool};
use super::{
    Contexts, DeclaredTrust, Effects, IntoContent, Outcome, OutputKind, Tool, ToolFuture,
    ToolInput, ToolSpec,
};

type Reply = Pin<Box<dyn Future<Output = Outcome> + Send + 'static>>;
type Handler = Box<dyn Fn(Map<String, Value>, Contexts) -> Reply + Send + Sync>;

/// A tool defined at run time. Build it with [`DynamicTool::builder`].
///
/// ```
/// use tooltrust::tool::{DeclaredTrust, DynamicTool};
///
/// let lookup = DynamicTool::builder("lookup_order")
///     .description("Looks up an order's status.")
///     .schema(serde_json::json!({
///         "type": "object",
///         "properties": {"order": {"type": "integer"}},
///         "required": ["order"]
///     }))
///     .trust(DeclaredTrust::Trusted)
///     .read_only()
///     .handler(|args, _contexts| async move {
///         Ok::<_, std::io::Error>(format!("order {} shipped", args["order"]))
///     })
///     .build()?;
/// let registry = tooltrust::Registry::builder().tool(lookup).build()?;
/// # Ok::<(), tooltrust::registry::RegistryError>(())
/// ```
pub struct DynamicTool {
    spec: ToolSpec,
    schema: Value,
    handler: Handler,
}

/// Builds a [`DynamicTool`]. Trust is mandatory; the output is data and the tool
/// consequential unless declared otherwise (fail closed).
pub struct DynamicToolBuilder {
    name: Cow<'static, str>,
    description: Option<Cow<'static, str>>,
    schema: Option<Value>,
    trust: Option<DeclaredTrust>,
    output: OutputKind,
    effects: Effects,
    handler: Option<Handler>,
}

impl DynamicTool {
    /// Starts a tool named `name` (`[A-Za-z0-9_-]{1,64}`, checked at `build`).
    pub fn builder(name: impl Into<Cow<'static, str>>) -> DynamicToolBuilder {
        DynamicToolBuilder {
            name: name.into(),
            description: None,
            schema: None,
            trust: None,
            output: OutputKind::Data,
            effects: Effects::Consequential,
            handler: None,
        }
    }
}

impl DynamicToolBuilder {
    /// What the tool does, shown to the model (required).
    pub fn description(mut self, description: impl Into<Cow<'static, str>>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The JSON Schema of its arguments: an object schema (default: no arguments).
    pub fn schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// How far its output may be trusted (required).
    pub fn trust(mut self, trust: DeclaredTrust) -> Self {
        self.trust = Some(trust);
        self
    }

    /// Declares its output an instruction (only for trusted tools). Give every argument
    /// a closed vocabulary: an argument of free text makes the output data once the scope
    /// is tainted, and a closed one is checked before the tool runs.
    pub fn instruction(mut self) -> Self {
        self.output = OutputKind::Instruction;
        self
    }

    /// Declares that it changes nothing outside the agent.
    pub fn read_only(mut self) -> Self {
        self.effects = Effects::ReadOnly;
        self
    }

    /// What runs: given the arguments (exactly as hashed) and the scope's contexts, it
    /// returns a value or an error (rendered as untrusted data).
    pub fn handler<F, Fut, T, E>(mut self, handler: F) -> Self
    where
        F: Fn(Map<String, Value>, Contexts) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: IntoContent + 'static,
        E: fmt::Display + 'static,
    {
        self.handler = Some(Box::new(move |args, contexts| {
            let reply = handler(args, contexts);
            Box::pin(async move { crate::__private::outcome_of_result(reply.await) })
        }));
        self
    }

    /// Validates the declaration as the registry does (name, trust, description,
    /// schema) and builds the tool.
    pub fn build(self) -> Result<DynamicTool, RegistryError> {
        let name = self.name;
        let trust = self
            .trust
            .ok_or_else(|| RegistryError::MissingTrust(name.to_string()))?;
        let spec = ToolSpec {
            name,
            description: self.description.unwrap_or_default(),
            trust,
            output: self.output,
            effects: self.effects,
        };
        let schema = crate::schema::provider_safe(self.schema.unwrap_or_else(
            || serde_json::json!({"type": "object", "properties": {}, "required": []}),
        ));
        validate_tool(&spec, &schema)?;
        let handler = self
            .handler
            .ok_or_else(|| RegistryError::MissingHandler(spec.name.to_string()))?;
        Ok(DynamicTool {
            spec,
            schema,
            handler,
        })
    }
}

impl Tool for DynamicTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn args_schema(&self) -> Value {
        self.schema.clone()
    }

    fn call<'a>(&'a self, input: ToolInput<'a>) -> ToolFuture<'a> {
        let reply = (self.handler)(input.args().clone(), input.contexts().clone());
        Box::pin(async move { Ok(reply.await) })
    }
}

impl fmt::Debug for DynamicTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicTool")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}
