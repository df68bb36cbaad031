//! The `agent` condition of `bench/agentdojo/run`: tooltrust's own agent loop
//! ([`tooltrust::Agent`]: sealed envelopes, the standing explanation, the principal's message
//! as a principal block) over the tools of a `tooltrust mcp proxy` configuration, taken
//! through [`tooltrust_mcp::connect`] with that configuration's declarations, the session's
//! gate deciding, and the model reached through `tooltrust-providers`.
//!
//! ```text
//! cargo run -p tooltrust-cli --example agentdojo_agent -- \
//!     --config bench/agentdojo/configs/banking.toml --prompt "What is my balance?" \
//!     [--system-file FILE] [--descriptions FILE] [--approve FILE] \
//!     [--model openai|anthropic] [--max-turns 16] [--out REPORT.json]
//! ```
//!
//! - The model: `openai` (the default) is any OpenAI-compatible Chat Completions endpoint
//!   (`OPENAI_BASE_URL`, default OpenAI's; `OPENAI_API_KEY`, optional for local servers;
//!   `OPENAI_MODEL`, required); `anthropic` is Anthropic's Messages API
//!   (`ANTHROPIC_API_KEY`, `ANTHROPIC_MODEL`, `ANTHROPIC_BASE_URL`). The harness serves its
//!   replay model as a local OpenAI-compatible endpoint and points `OPENAI_BASE_URL` at it.
//! - The tools: each upstream of the configuration is started (its `command`, with the
//!   proxy's environment rules) or reached (`url`), and its tools are registered as
//!   `<upstream>__<tool>` with the configuration's trust and effects, the gate's policy
//!   built as the proxy builds it (`strict_isolation`, `mode`, `max_repeats`, argument
//!   policies), and every decision recorded in the configuration's `audit_log`, as the
//!   proxy records it. `--descriptions` (a JSON object, upstream tool name → text) gives
//!   the host's own descriptions, shown to the model instead of the server's.
//! - Held calls: after each model turn, every call the gate held is decided at once, as the
//!   proxy's reviewer decides it during the call: approved when `--approve` (a JSON array of
//!   `{"tool", "arguments"}`, the tool named as registered) lists a call with the same
//!   checksum (same tool, same canonical arguments), declined otherwise; the loop then goes
//!   on with the approved ones run and the model shown the outcome.
//! - The report (`--out`, or standard output) is JSON: the model's answer, the calls it
//!   asked for, how many turns it took, how many calls were held and reviewed.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use clap::Parser;
use serde::Serialize;
use serde_json::{Map, Value};
use tooltrust::agent::{Agent, AgentError, ChatMessage, ModelFuture, ModelRequest, Transcript};
use tooltrust::audit::AuditLog;
use tooltrust::call::Checksum;
use tooltrust::held::HeldStatus;
use tooltrust::review::Verdict;
use tooltrust::{Id, Instruction, Message, Model, Policy, Registry, Sender, Session, ToolCall};
use tooltrust_mcp::config::{Endpoint, Mode, PinMode, ProxyConfig, Upstream};
use tooltrust_mcp::{ConnectOptions, Declarations, MetadataLimits, Remote};
use tooltrust_providers::{AnthropicClient, ApiKey, OpenAiClient};

/// The driver's command line.
#[derive(Debug, Parser)]
#[command(
    name = "agentdojo_agent",
    about = "tooltrust's agent loop over a proxy configuration's tools"
)]
struct Cli {
    /// The `tooltrust mcp proxy` configuration whose upstreams and declarations are used.
    #[arg(long)]
    config: PathBuf,
    /// The principal's message.
    #[arg(long, conflicts_with = "prompt_file")]
    prompt: Option<String>,
    /// A file holding the principal's message.
    #[arg(long)]
    prompt_file: Option<PathBuf>,
    /// How the principal is named in their message's `from`.
    #[arg(long, default_value = "the user")]
    user: String,
    /// A file holding the developer's policy (the system text after the standing explanation).
    #[arg(long)]
    system_file: Option<PathBuf>,
    /// A JSON object, upstream tool name → the description the host shows for it.
    #[arg(long)]
    descriptions: Option<PathBuf>,
    /// A JSON array of `{"tool", "arguments"}`: the held calls the reviewer approves.
    #[arg(long)]
    approve: Option<PathBuf>,
    /// `openai` (any OpenAI-compatible endpoint) or `anthropic`.
    #[arg(long, default_value = "openai")]
    model: String,
    /// Model turns; the calls the last one asks for are not made (AgentDojo's pipeline:
    /// a turn, then at most 15 rounds of calls and a turn).
    #[arg(long, default_value_t = 16)]
    max_turns: usize,
    /// Where to write the report (default: standard output).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Which model endpoint the agent talks to.
#[derive(Debug, Clone)]
pub enum ModelChoice {
    /// An OpenAI-compatible Chat Completions endpoint.
    OpenAi {
        /// The base URL, with its version path (`http://127.0.0.1:8000/v1`).
        base_url: String,
        /// The API key, if the endpoint needs one.
        api_key: Option<String>,
        /// The model's name.
        model: String,
    },
    /// Anthropic's Messages API.
    Anthropic {
        /// Another base URL than Anthropic's, if any.
        base_url: Option<String>,
        /// The API key.
        api_key: String,
        /// The model's name.
        model: String,
    },
}

/// Everything one run needs; `main` reads it from the command line and the environment.
#[derive(Debug, Clone)]
pub struct Options {
    /// The proxy configuration.
    pub config: PathBuf,
    /// The principal's message.
    pub prompt: String,
    /// The principal's name.
    pub user: String,
    /// The developer's policy.
    pub system: Option<String>,
    /// Host descriptions by upstream tool name.
    pub descriptions: BTreeMap<String, String>,
    /// Calls the reviewer approves: the tool as registered, and its arguments.
    pub approve: Vec<(String, Map<String, Value>)>,
    /// The model.
    pub model: ModelChoice,
    /// Model turns; the calls the last one asks for are not made.
    pub max_turns: usize,
}

/// One call the model asked for.
#[derive(Debug, Clone, Serialize)]
pub struct RequestedCall {
    /// The tool, as registered (`<upstream>__<tool>`).
    pub tool: String,
    /// The arguments as the model wrote them, parsed (`null` when they are not JSON).
    pub arguments: Value,
    /// The call's checksum, when its arguments were an acceptable JSON object.
    pub checksum: Option<String>,
}

/// What one run did.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The model's final answer, if it gave one.
    pub answer: Option<String>,
    /// Every call the model asked for, in order.
    pub requested: Vec<RequestedCall>,
    /// Model turns taken.
    pub turns: usize,
    /// Whether the loop stopped at the turn limit (the last turn's calls not made).
    pub turn_limit: bool,
    /// Calls the gate held.
    pub held: usize,
    /// Held calls put to the reviewer.
    pub reviews: usize,
    /// Held calls the reviewer approved.
    pub approved: usize,
    /// The conversation as the model was shown it (the system text aside).
    pub messages: Vec<ChatMessage>,
    /// The audit log's directory.
    pub audit_log: PathBuf,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A file could not be read, or was not what it should be.
    #[error("{path}: {message}")]
    Input {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// Something the run needs could not be set up or failed.
    #[error("{0}")]
    Setup(String),
    /// The agent loop failed.
    #[error("the agent loop failed: {0}")]
    Agent(#[from] AgentError),
}

fn setup(what: &str, error: impl std::fmt::Display) -> DriverError {
    DriverError::Setup(format!("{what}: {error}"))
}

fn read(path: &Path) -> Result<String, DriverError> {
    std::fs::read_to_string(path).map_err(|error| DriverError::Input {
        path: path.to_owned(),
        message: error.to_string(),
    })
}

fn read_json(path: &Path) -> Result<Value, DriverError> {
    serde_json::from_str(&read(path)?).map_err(|error| DriverError::Input {
        path: path.to_owned(),
        message: format!("not JSON: {error}"),
    })
}

/// The configuration's declarations for `upstream`, each tool named in `descriptions`
/// shown with the host's description and declared as the configuration declares it.
fn declarations(upstream: &Upstream, descriptions: &BTreeMap<String, String>) -> Declarations {
    let configured = upstream.declarations();
    let described = descriptions
        .iter()
        .fold(Declarations::new(), |declared, (tool, text)| {
            declared.declare_described(tool.clone(), configured.of(tool), Some(text.clone()))
        });
    upstream.tools.keys().fold(described, |declared, pattern| {
        // Configured patterns after the described names: the first match wins.
        declared.declare_described(
            pattern.clone(),
            configured.of(pattern),
            configured.description_of(pattern).map(str::to_owned),
        )
    })
}

/// Starts or reaches one upstream and lists its tools, as the proxy does.
async fn reach(
    upstream: &Upstream,
    declarations: &Declarations,
    options: ConnectOptions,
    dir: &Path,
) -> Result<Remote, DriverError> {
    let name = upstream.name.get_ref();
    let connected = match upstream.endpoint() {
        Some(Endpoint::Command { program, args }) => {
            let mut command = tokio::process::Command::new(&program);
            command.args(&args).current_dir(dir).env_clear();
            for key in tooltrust_mcp::proxy::INHERITED_ENV {
                if let Some(value) = std::env::var_os(key) {
                    command.env(key, value);
                }
            }
            command.envs(&upstream.env);
            let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
                .stderr(std::process::Stdio::inherit())
                .spawn()
                .map_err(|error| setup(&format!("cannot start upstream {name}"), error))?;
            tooltrust_mcp::connect(transport, declarations, options).await
        }
        Some(Endpoint::Url(url)) => {
            let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url);
            tooltrust_mcp::connect(transport, declarations, options).await
        }
        None => {
            return Err(DriverError::Setup(format!(
                "upstream {name} has no endpoint"
            )));
        }
    };
    connected.map_err(|error| setup(&format!("upstream {name}"), error))
}

/// The model, limited to `max` turns as AgentDojo's pipeline limits it: the calls the last
/// turn asks for are not made (its text, if any, is the answer).
struct Limited {
    inner: Box<dyn Model>,
    max: usize,
    turns: AtomicUsize,
    cut: AtomicBool,
}

impl Model for Limited {
    fn respond<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(async move {
            let mut reply = self.inner.respond(request).await?;
            if self.turns.fetch_add(1, Ordering::SeqCst) + 1 >= self.max
                && !reply.tool_calls.is_empty()
            {
                reply.tool_calls.clear();
                self.cut.store(true, Ordering::SeqCst);
            }
            Ok(reply)
        })
    }
}

fn model_of(choice: &ModelChoice) -> Result<Box<dyn Model>, DriverError> {
    Ok(match choice {
        ModelChoice::OpenAi {
            base_url,
            api_key,
            model,
        } => {
            let mut builder = OpenAiClient::builder(model.clone()).base_url(base_url.clone());
            if let Some(key) = api_key {
                builder = builder.api_key(ApiKey::new(key.clone()));
            }
            Box::new(
                builder
                    .build()
                    .map_err(|error| setup("the OpenAI client", error))?,
            )
        }
        ModelChoice::Anthropic {
            base_url,
            api_key,
            model,
        } => {
            let mut builder =
                AnthropicClient::builder(model.clone()).api_key(ApiKey::new(api_key.clone()));
            if let Some(url) = base_url {
                builder = builder.base_url(url.clone());
            }
            Box::new(
                builder
                    .build()
                    .map_err(|error| setup("the Anthropic client", error))?,
            )
        }
    })
}

/// Runs the agent once: the principal's message in, until the model answers or the turn
/// limit.
pub async fn run(options: &Options) -> Result<Report, DriverError> {
    let text = read(&options.config)?;
    let config = ProxyConfig::parse(&text).map_err(|error| DriverError::Input {
        path: options.config.clone(),
        message: error.to_string(),
    })?;
    let dir = options
        .config
        .parent()
        .map(Path::to_owned)
        .unwrap_or_default();
    if config.pin == PinMode::Required || tooltrust_mcp::pin::lock_path(&options.config).exists() {
        return Err(DriverError::Setup(
            "pinned tools are not supported by this driver: remove the lock file and `pin`"
                .to_owned(),
        ));
    }
    let audit_dir = dir.join(&config.audit_log);
    let log = Arc::new(AuditLog::open(&audit_dir).map_err(|error| {
        setup(
            &format!("cannot open the audit log in {}", audit_dir.display()),
            error,
        )
    })?);
    let limits = MetadataLimits {
        description_bytes: config.max_description_bytes,
        schema_bytes: config.max_schema_bytes,
    };

    let mut registry = Registry::builder();
    let mut connections = Vec::new();
    let mut outsiders_text = Vec::new();
    for upstream in &config.upstream {
        let name = upstream.name.get_ref();
        let options_of_connect = ConnectOptions {
            prefix: format!("{name}__"),
            limits,
            ..ConnectOptions::default()
        };
        let declared = declarations(upstream, &options.descriptions);
        let remote = reach(upstream, &declared, options_of_connect, &dir).await?;
        for listed in remote.listed() {
            if let Some(why) = &listed.refused {
                return Err(DriverError::Setup(format!(
                    "tool {} cannot be served: {why}",
                    listed.local_name
                )));
            }
            if listed.outsiders_text {
                outsiders_text.push(format!("- {}: {}", listed.local_name, listed.description));
            }
        }
        let (tools, connection) = remote.into_tools();
        for tool in tools {
            registry = registry.tool(tool);
        }
        connections.push(connection);
    }
    let registry = registry
        .build()
        .map_err(|error| setup("the registry", error))?;

    let mut policy = Policy::new()
        .strict_isolation(config.strict_isolation)
        .observe(config.mode == Mode::Observe);
    if let Some(max) = config.max_repeats {
        policy = policy.max_repeats(max);
    }
    for upstream in &config.upstream {
        let policies = upstream
            .argument_policies()
            .map_err(|error| DriverError::Input {
                path: options.config.clone(),
                message: error.to_string(),
            })?;
        for argument_policy in policies {
            policy = policy.with_rule(argument_policy);
        }
    }
    let recorder: Arc<AuditLog> = Arc::clone(&log);
    let session = Session::builder(registry)
        .policy(policy)
        .recorder(recorder)
        .build()
        .map_err(|error| setup("the session", error))?;
    let id = |text: &str| Id::new(text).map_err(|error| setup("an id", error));
    let scope = session
        .open_scope(id("agentdojo-agent")?)
        .map_err(|error| setup("the scope", error))?;
    if config.metadata_taints && !outsiders_text.is_empty() {
        // The model is shown these: outsiders' words are in its context before the first
        // call, as the proxy counts them.
        scope
            .add_untrusted(
                "tool-metadata",
                format!(
                    "Tool descriptions written by upstream servers, as the model is shown them:\n{}",
                    outsiders_text.join("\n")
                ),
            )
            .map_err(|error| setup("the scope", error))?;
    }

    let approved: HashSet<Checksum> = options
        .approve
        .iter()
        .filter_map(|(tool, arguments)| {
            let text = Value::Object(arguments.clone()).to_string();
            ToolCall::from_model(tool.as_str(), &text)
                .ok()
                .map(|call| call.checksum())
        })
        .collect();
    let reviewer = id("agentdojo-reviewer")?;
    let model = Limited {
        inner: model_of(&options.model)?,
        max: options.max_turns,
        turns: AtomicUsize::new(0),
        cut: AtomicBool::new(false),
    };
    // The developer's policy is their own text (AgentDojo's system message, which the
    // harness reads from the installed package); an `Instruction` is made only from
    // `'static` text, so it is leaked, once per run.
    let policy = options
        .system
        .iter()
        .map(|text| Instruction::new(Box::leak(text.clone().into_boxed_str())))
        .collect();
    // One turn at a time: after each, the held calls are decided before the model goes on.
    let agent = Agent::new(scope, policy).max_turns(1);
    let message = Message {
        id: id("task")?,
        sender: Sender::Principal,
        from: options.user.clone(),
        created_at: None,
        content: options.prompt.clone(),
    };

    let (mut held, mut reviews, mut accepted) = (0, 0, 0);
    let mut step = agent.run(&model, &message).await;
    let answer = loop {
        match step {
            Ok(Transcript { answer, .. }) => break answer,
            Err(AgentError::TurnLimit(_)) => {}
            Err(error) => return Err(error.into()),
        }
        for call in agent.conversation().held {
            if session.pending_status(&call.id) != Some(HeldStatus::Held) {
                continue;
            }
            held += 1;
            reviews += 1;
            let checksum = call.requested.to_call().ok().map(|call| call.checksum());
            let verdict = if checksum.is_some_and(|checksum| approved.contains(&checksum)) {
                accepted += 1;
                Verdict::approve("the reviewer approves this call")
            } else {
                Verdict::reject("the reviewer declines this call")
            };
            session
                .decide_call(&call.id, reviewer.clone(), verdict)
                .map_err(|error| setup("recording a review", error))?;
        }
        step = agent.resume(&model).await;
    };

    let messages = agent.conversation().messages;
    let requested = messages
        .iter()
        .flat_map(|message| match message {
            ChatMessage::Assistant { tool_calls, .. } => tool_calls.clone(),
            _ => Vec::new(),
        })
        .map(|call| RequestedCall {
            checksum: call.to_call().ok().map(|parsed| parsed.checksum().to_hex()),
            arguments: serde_json::from_str(&call.arguments).unwrap_or(Value::Null),
            tool: call.name,
        })
        .collect();
    drop(agent);
    drop(connections);
    Ok(Report {
        turn_limit: model.cut.load(Ordering::SeqCst),
        answer,
        requested,
        turns: model.turns.load(Ordering::SeqCst),
        held,
        reviews,
        approved: accepted,
        messages,
        audit_log: audit_dir,
    })
}

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|value| !value.is_empty())
}

fn options_of(cli: Cli) -> Result<Options, DriverError> {
    let prompt = match (&cli.prompt, &cli.prompt_file) {
        (Some(prompt), _) => prompt.clone(),
        (None, Some(path)) => read(path)?,
        (None, None) => return Err(DriverError::Setup("give --prompt or --prompt-file".into())),
    };
    let system = cli.system_file.as_deref().map(read).transpose()?;
    let descriptions = match &cli.descriptions {
        Some(path) => {
            serde_json::from_value(read_json(path)?).map_err(|error| DriverError::Input {
                path: path.clone(),
                message: format!("not an object of strings: {error}"),
            })?
        }
        None => BTreeMap::new(),
    };
    let mut approve = Vec::new();
    if let Some(path) = &cli.approve {
        let invalid = |message: &str| DriverError::Input {
            path: path.clone(),
            message: message.to_owned(),
        };
        let Value::Array(calls) = read_json(path)? else {
            return Err(invalid("not an array"));
        };
        for call in calls {
            match (call.get("tool"), call.get("arguments")) {
                (Some(Value::String(tool)), Some(Value::Object(arguments))) => {
                    approve.push((tool.clone(), arguments.clone()));
                }
                _ => return Err(invalid("an entry is not {\"tool\": …, \"arguments\": {…}}")),
            }
        }
    }
    let model = match cli.model.as_str() {
        "openai" => ModelChoice::OpenAi {
            base_url: env("OPENAI_BASE_URL")
                .unwrap_or_else(|| OpenAiClient::DEFAULT_BASE_URL.to_owned()),
            api_key: env("OPENAI_API_KEY"),
            model: env("OPENAI_MODEL")
                .ok_or_else(|| DriverError::Setup("--model openai needs OPENAI_MODEL".into()))?,
        },
        "anthropic" => ModelChoice::Anthropic {
            base_url: env("ANTHROPIC_BASE_URL"),
            api_key: env("ANTHROPIC_API_KEY").ok_or_else(|| {
                DriverError::Setup("--model anthropic needs ANTHROPIC_API_KEY".into())
            })?,
            model: env("ANTHROPIC_MODEL").ok_or_else(|| {
                DriverError::Setup("--model anthropic needs ANTHROPIC_MODEL".into())
            })?,
        },
        other => {
            return Err(DriverError::Setup(format!(
                "--model {other}: one of openai, anthropic"
            )));
        }
    };
    Ok(Options {
        config: cli.config,
        prompt,
        user: cli.user,
        system,
        descriptions,
        approve,
        model,
        max_turns: cli.max_turns.max(1),
    })
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let out = cli.out.clone();
    let result = match options_of(cli) {
        Ok(options) => run(&options).await,
        Err(error) => Err(error),
    };
    let report = match result {
        Ok(report) => report,
        Err(error) => {
            eprintln!("agentdojo_agent: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let text = match serde_json::to_string_pretty(&report) {
        Ok(text) => text + "\n",
        Err(error) => {
            eprintln!("agentdojo_agent: the report: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let written = match &out {
        Some(path) => std::fs::write(path, text),
        None => {
            print!("{text}");
            Ok(())
        }
    };
    if let Err(error) = written {
        eprintln!("agentdojo_agent: cannot write the report: {error}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}
