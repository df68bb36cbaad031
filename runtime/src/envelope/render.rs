//! Rendering content into envelopes, in sealed or compat mode.

use std::borrow::Cow;
use std::ops::Range;

use memchr::memmem;

use super::compat::{self, RETRIEVED_DIRECTIVE, unknown_tool_warning};
use super::neutralise::{Finding, neutralise, neutralise_probing};
use super::{Tier, escape_attr, escape_attr_and_controls, nonce_domain};
use crate::block::Instruction;
use crate::call::Checksum;
use crate::content::{Content, RetrievedRecord, SourceTier};
use crate::id::{Id, IdError, validate};
use crate::nonce::SessionKey;
use crate::record::{Memory, Message, Sender, Thought, ThoughtKind};
use crate::registry::{Registry, ToolOutput};
use crate::tool::{DeclaredTrust, OutputKind, Trust};

/// How nonces are made and bodies treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The default: secret nonces from the session key, every data body neutralised.
    Sealed,
    /// The reference's bytes, for interop: public nonces (checksums, ids) and only the
    /// reference's narrow neutralisation. Still validates ids and refuses live closers.
    Compat,
}

/// Why content was not rendered. Nothing is rendered when any part fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The body contains the closer of its own envelope (or, in compat mode, of an
    /// enclosing one): rendering it would let it end the block early.
    #[error("refused to render: the {tier} body contains its own live closer `{closer}`")]
    LiveCloser {
        /// The tier of the block.
        tier: &'static str,
        /// The closer found in the body.
        closer: String,
    },
    /// An id that would go into a tag name or nonce is invalid.
    #[error("invalid {what} id: {error}")]
    InvalidId {
        /// What the id identifies.
        what: &'static str,
        /// Why it is invalid.
        error: IdError,
    },
    /// An id that would make a tag name of another tier (`retrieved_corpus`).
    #[error("{what} id {id:?} would collide with a container tag name")]
    ReservedId {
        /// What the id identifies.
        what: &'static str,
        /// The id.
        id: String,
    },
}

/// What rendering produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The envelope text.
    pub text: String,
    /// Every nonce the text's closers carry, in order: the live nonces that must never
    /// come back in a tool call's arguments.
    pub nonces: Vec<String>,
    /// What neutralisation changed in the bodies (sealed mode), for the audit log.
    pub findings: Vec<Finding>,
    /// The tool named by a tool result that the registry did not hold (rendered
    /// untrusted).
    pub unknown_tool: Option<String>,
    /// The trust the content was rendered with: `Trusted` only for trusted tool output,
    /// trusted data and first-party records alone.
    pub trust: Trust,
}

impl Rendered {
    fn empty(trust: Trust) -> Self {
        Rendered {
            text: String::new(),
            nonces: Vec::new(),
            findings: Vec::new(),
            unknown_tool: None,
            trust,
        }
    }

    /// Trusted text that needs no envelope of its own (the developer's policy).
    pub(crate) fn trusted_text(text: String) -> Self {
        Rendered {
            text,
            ..Rendered::empty(Trust::Trusted)
        }
    }

    /// The first nonce, for single-block renders.
    pub fn nonce(&self) -> Option<&str> {
        self.nonces.first().map(String::as_str)
    }
}

/// Renders content into envelopes. One per session: in sealed mode it holds the
/// session's key.
#[derive(Debug, Clone)]
pub struct Renderer {
    key: Option<SessionKey>,
}

/// One envelope under construction.
struct Spec<'a> {
    tier: Tier,
    /// The identity a sealed nonce is derived from; compat mode uses `public` instead.
    identity: &'a [&'a str],
    /// The compat nonce (the reference's public value).
    public: &'a str,
    /// Attributes after `nonce`, in order; `None` values are left out.
    attrs: Vec<(&'a str, Option<Cow<'a, str>>)>,
    /// Attributes before `nonce` in compat mode (the reference writes `source` first on
    /// first-party records).
    leading_compat: Vec<(&'a str, Option<Cow<'a, str>>)>,
    /// Whether the reference writes a `nonce` attribute for this tier.
    nonce_attr: bool,
}

impl Renderer {
    /// A sealed-mode renderer (the default mode) keyed by `key`.
    pub fn sealed(key: SessionKey) -> Self {
        Renderer { key: Some(key) }
    }

    /// A compat-mode renderer, byte-identical to the reference format.
    pub fn compat() -> Self {
        Renderer { key: None }
    }

    /// The session key of a sealed-mode renderer; `None` in compat mode.
    pub fn key(&self) -> Option<&SessionKey> {
        self.key.as_ref()
    }

    /// The renderer's mode.
    pub fn mode(&self) -> Mode {
        if self.key.is_some() {
            Mode::Sealed
        } else {
            Mode::Compat
        }
    }

    /// The developer's policy: `<system_instructions kind="developer-rules">`, no nonce,
    /// empty items dropped, items joined by a blank line; nothing when no item is left.
    /// Instructions come only from the developer's code or `trusted, instruction` tools.
    pub fn developer_policy(
        &self,
        items: &[Instruction],
        version: Option<&str>,
    ) -> Result<String, RenderError> {
        let parts: Vec<&str> = items
            .iter()
            .map(Instruction::as_str)
            .filter(|text| !text.is_empty())
            .collect();
        if parts.is_empty() {
            return Ok(String::new());
        }
        let body = parts.join("\n\n");
        refuse_live_closers(
            Tier::DeveloperPolicy,
            &body,
            None,
            &["</system_instructions>"],
        )?;
        let mut out = String::with_capacity(body.len() + 64);
        out.push_str("<system_instructions kind=\"developer-rules\"");
        if let Some(version) = version {
            out.push_str(" version=\"");
            escape_attr(&mut out, version);
            out.push('"');
        }
        out.push_str(">\n");
        out.push_str(&body);
        out.push_str("\n</system_instructions>");
        Ok(out)
    }

    /// A tool's output, with the trust the registry gives the tool now: a tool the
    /// registry does not hold renders untrusted with one `tracing` warning; errors,
    /// media, retrieved records and artifact handles render untrusted whatever the tool
    /// declares.
    pub fn tool_output(
        &self,
        registry: &Registry,
        output: &ToolOutput,
    ) -> Result<Rendered, RenderError> {
        self.tool_output_quoting(registry, output)
            .map(|(rendered, _)| rendered)
    }

    /// Like [`tool_output`](Self::tool_output), and where in the envelope's text the
    /// output's text (`output.content.to_text()`) lies unchanged, when it does: whoever
    /// keeps both can keep one copy of those bytes.
    pub(crate) fn tool_output_quoting(
        &self,
        registry: &Registry,
        output: &ToolOutput,
    ) -> Result<(Rendered, Option<Range<usize>>), RenderError> {
        let spec = registry.spec(&output.tool).ok();
        if spec.is_none() {
            tracing::warn!(tool = %output.tool, "{}", unknown_tool_warning(&output.tool));
        }
        let trusted = spec.is_some_and(|spec| spec.trust == DeclaredTrust::Trusted)
            && output.trust == Trust::Trusted;
        let instruction = trusted
            && spec.is_some_and(|spec| spec.output == OutputKind::Instruction)
            && output.output == OutputKind::Instruction;
        let (mut rendered, quoted) = match &output.content {
            Content::Retrieved(records) => (self.retrieved(&records.0)?, None),
            content => {
                let (kind, trusted) = match content {
                    _ if output.failed => ("tool-error", false),
                    Content::Media(_) => ("media-fallback", false),
                    Content::Artifact(_) => ("artifact-handle", false),
                    _ if trusted => ("trusted-tool-result", true),
                    _ => ("tool-result", false),
                };
                self.tool_result_block(
                    &output.tool,
                    &output.call_id,
                    output.checksum,
                    kind,
                    trusted,
                    instruction && trusted,
                    &content.to_text(),
                )?
            }
        };
        if spec.is_none() {
            rendered.unknown_tool = Some(output.tool.clone());
        }
        if output.content.is_outsider_content() {
            rendered.trust = Trust::Untrusted;
        }
        Ok((rendered, quoted))
    }

    /// A tool result from its parts: `trust` decides the tier
    /// (`trusted_content_…` with `kind="trusted-tool-result"`, or
    /// `untrusted_content_…` with `kind="tool-result"`). The compat nonce is the checksum.
    pub fn tool_result(
        &self,
        tool: &str,
        call_id: &Id,
        checksum: Checksum,
        trust: Trust,
        output: OutputKind,
        body: &str,
    ) -> Result<Rendered, RenderError> {
        let trusted = trust == Trust::Trusted;
        let kind = if trusted {
            "trusted-tool-result"
        } else {
            "tool-result"
        };
        let instruction = trusted && output == OutputKind::Instruction;
        self.tool_result_block(tool, call_id, checksum, kind, trusted, instruction, body)
            .map(|(rendered, _)| rendered)
    }

    #[allow(clippy::too_many_arguments)]
    fn tool_result_block(
        &self,
        tool: &str,
        call_id: &Id,
        checksum: Checksum,
        kind: &'static str,
        trusted: bool,
        instruction: bool,
        body: &str,
    ) -> Result<(Rendered, Option<Range<usize>>), RenderError> {
        let checksum = checksum.to_hex();
        let tier = if trusted {
            Tier::TrustedContent
        } else {
            Tier::UntrustedContent
        };
        let sealed = self.key.is_some();
        let spec = Spec {
            tier,
            identity: &[call_id.as_str(), &checksum],
            public: &checksum,
            attrs: vec![
                ("kind", Some(kind.into())),
                ("tool", (!tool.is_empty()).then(|| tool.into())),
                ("call", sealed.then(|| call_id.as_str().into())),
                ("checksum", sealed.then(|| checksum.as_str().into())),
                (
                    "output",
                    (sealed && instruction).then(|| "instruction".into()),
                ),
            ],
            leading_compat: Vec::new(),
            nonce_attr: true,
        };
        let mut rendered = Rendered::empty(if trusted {
            Trust::Trusted
        } else {
            Trust::Untrusted
        });
        let quoted = self.leaf(&mut rendered, spec, body, &[])?;
        Ok((rendered, quoted))
    }

    /// Data that is not a tool's output: `trusted` data of the runtime or the developer
    /// (`<trusted_content_…>`), or untrusted content (`<untrusted_content_…>`), with the
    /// given `kind`. The compat nonce is `id`.
    pub fn data(
        &self,
        trust: Trust,
        kind: &str,
        id: &Id,
        body: &str,
    ) -> Result<Rendered, RenderError> {
        let sealed = self.key.is_some();
        let tier = if trust == Trust::Trusted {
            Tier::TrustedContent
        } else {
            Tier::UntrustedContent
        };
        let spec = Spec {
            tier,
            identity: &[id.as_str()],
            public: id.as_str(),
            attrs: vec![
                ("kind", Some(kind.into())),
                ("id", sealed.then(|| id.as_str().into())),
            ],
            leading_compat: Vec::new(),
            nonce_attr: true,
        };
        let mut rendered = Rendered::empty(trust);
        self.leaf(&mut rendered, spec, body, &[])?;
        Ok(rendered)
    }

    /// A message from a person or a peer agent: untrusted, except the principal's.
    pub fn message(&self, message: &Message) -> Result<Rendered, RenderError> {
        checked_id("message", &message.id)?;
        let sealed = self.key.is_some();
        // Compat writes the reference's single role; sealed mode tells the principal
        // apart from other people, whom an outsider could otherwise impersonate by name.
        let (tier, role) = match message.sender {
            Sender::Principal if sealed => (Tier::Message, Some("principal")),
            Sender::Principal | Sender::User => (Tier::Message, Some("user")),
            Sender::Peer => (Tier::PeerOutput, None),
        };
        let spec = Spec {
            tier,
            identity: &[&message.id],
            public: &message.id,
            attrs: vec![
                ("id", sealed.then(|| message.id.as_str().into())),
                ("from", Some(message.from.as_str().into())),
                ("role", role.map(Cow::Borrowed)),
                (
                    "createdAt",
                    message.created_at.as_deref().map(Cow::Borrowed),
                ),
            ],
            leading_compat: Vec::new(),
            nonce_attr: sealed,
        };
        let trust = if message.sender == Sender::Principal {
            Trust::Trusted
        } else {
            Trust::Untrusted
        };
        let mut rendered = Rendered::empty(trust);
        self.leaf(&mut rendered, spec, &message.content, &[])?;
        Ok(rendered)
    }

    /// A reasoning trace. A peer's is wrapped in `<peer_agent_output_…>` (closed by a
    /// closer that matches its opener, in compat mode too: the reference closes it with
    /// `</peer_agent_output_…:peer>`, which no strict reader could pair with its opener,
    /// and compat does not reproduce that). Opaque reasoning shows the reference's fixed
    /// summary instead of its payload, with `replayCompatibility` after `createdAt`.
    pub fn thought(&self, thought: &Thought) -> Result<Rendered, RenderError> {
        checked_id("thought", &thought.id)?;
        let sealed = self.key.is_some();
        let opaque = thought.kind == ThoughtKind::OpaqueReasoning;
        let thought_spec = Spec {
            tier: Tier::Thought,
            identity: &[&thought.id],
            public: &thought.id,
            attrs: vec![
                ("id", sealed.then(|| thought.id.as_str().into())),
                ("kind", Some(thought.kind.as_str().into())),
                ("from", Some(thought.from.as_str().into())),
                (
                    "createdAt",
                    thought.created_at.as_deref().map(Cow::Borrowed),
                ),
                (
                    "replayCompatibility",
                    thought
                        .replay_compatibility
                        .as_deref()
                        .filter(|r| opaque && !r.is_empty())
                        .map(Cow::Borrowed),
                ),
            ],
            leading_compat: Vec::new(),
            nonce_attr: true,
        };
        let mut rendered = Rendered::empty(Trust::Untrusted);
        match thought.kind {
            ThoughtKind::SelfReasoning => {
                self.leaf(&mut rendered, thought_spec, &thought.content, &[])?;
                return Ok(rendered);
            }
            ThoughtKind::OpaqueReasoning => {
                let summary = opaque_summary(thought);
                self.leaf(&mut rendered, thought_spec, &summary, &[])?;
                return Ok(rendered);
            }
            ThoughtKind::PeerReasoning => {}
        }
        let peer_spec = Spec {
            tier: Tier::PeerOutput,
            identity: &[&thought.id],
            public: &thought.id,
            attrs: vec![
                ("id", sealed.then(|| thought.id.as_str().into())),
                ("kind", Some("reasoning".into())),
                ("from", Some(thought.from.as_str().into())),
                (
                    "createdAt",
                    thought.created_at.as_deref().map(Cow::Borrowed),
                ),
            ],
            leading_compat: Vec::new(),
            nonce_attr: sealed,
        };
        let (peer_nonce, open) = self.opener(&peer_spec, &mut rendered.findings);
        let close = closer(Tier::PeerOutput, &peer_nonce);
        rendered.text.push_str(&open);
        rendered.text.push('\n');
        rendered.nonces.push(peer_nonce);
        self.leaf(&mut rendered, thought_spec, &thought.content, &[&close])?;
        rendered.text.push('\n');
        rendered.text.push_str(&close);
        Ok(rendered)
    }

    /// The agent's own earlier turn, as the model is shown it again: no envelope (it is
    /// the model's own voice), but neutralised like a message body, so that text the
    /// model echoed from an envelope cannot come back as tag vocabulary. Sealed mode
    /// neutralises fully; compat mode as the reference does (`<system_instructions`).
    pub fn own_turn<'t>(&self, text: &'t str) -> Cow<'t, str> {
        match self.key {
            Some(_) => neutralise(text).text,
            None => compat::neutralise_messages(text),
        }
    }

    /// Memories, in the order given, inside one `<memories>` parent; nothing when empty.
    pub fn memories(&self, memories: &[Memory]) -> Result<Rendered, RenderError> {
        let mut rendered = Rendered::empty(Trust::Untrusted);
        if memories.is_empty() {
            return Ok(rendered);
        }
        let sealed = self.key.is_some();
        rendered.text.push_str("<memories>\n");
        for (index, memory) in memories.iter().enumerate() {
            checked_id("memory", &memory.id)?;
            if index > 0 {
                rendered.text.push('\n');
            }
            let source = memory.source.as_deref().map(Cow::Borrowed);
            let spec = Spec {
                tier: Tier::Memory,
                identity: &[&memory.id],
                public: &memory.id,
                attrs: vec![
                    ("id", sealed.then(|| memory.id.as_str().into())),
                    ("source", if sealed { source.clone() } else { None }),
                    ("createdAt", memory.created_at.as_deref().map(Cow::Borrowed)),
                    ("kind", memory.kind.as_deref().map(Cow::Borrowed)),
                    (
                        "score",
                        memory.score.map(|score| format_number(score).into()),
                    ),
                ],
                // The reference's current version writes `source` before `nonce`.
                leading_compat: vec![("source", source)],
                nonce_attr: true,
            };
            self.leaf(&mut rendered, spec, &memory.content, &["</memories>"])?;
        }
        rendered.text.push_str("\n</memories>");
        Ok(rendered)
    }

    /// Retrieved records: the reference's directive, then first-party records (in the
    /// order given) inside `<retrieved_corpus>`, then third-party public and then
    /// third-party private records (each by creation time, then id) as untrusted
    /// content; groups separated by a blank line. Nothing when there are no records.
    pub fn retrieved(&self, records: &[RetrievedRecord]) -> Result<Rendered, RenderError> {
        let third_party = records
            .iter()
            .any(|record| record.tier != SourceTier::FirstParty);
        let mut rendered = Rendered::empty(if third_party {
            Trust::Untrusted
        } else {
            Trust::Trusted
        });
        if records.is_empty() {
            return Ok(rendered);
        }
        for record in records {
            checked_id("retrieved record", &record.id)?;
            if Tier::Retrieved.tag_name(&record.id) == Tier::RetrievedCorpus.tag() {
                return Err(RenderError::ReservedId {
                    what: "retrieved record",
                    id: record.id.to_string(),
                });
            }
        }
        let sealed = self.key.is_some();
        rendered.text.push_str(RETRIEVED_DIRECTIVE);

        let first_party: Vec<&RetrievedRecord> = records
            .iter()
            .filter(|record| record.tier == SourceTier::FirstParty)
            .collect();
        if !first_party.is_empty() {
            rendered.text.push_str("\n\n<retrieved_corpus>\n");
            for (index, record) in first_party.into_iter().enumerate() {
                if index > 0 {
                    rendered.text.push('\n');
                }
                let source = record.source.as_deref().map(Cow::Borrowed);
                let spec = Spec {
                    tier: Tier::Retrieved,
                    identity: &[&record.id],
                    public: &record.id,
                    attrs: vec![
                        ("id", sealed.then(|| record.id.as_str().into())),
                        ("source", if sealed { source.clone() } else { None }),
                        ("createdAt", record.created_at.as_deref().map(Cow::Borrowed)),
                        ("kind", record.kind.as_deref().map(Cow::Borrowed)),
                        (
                            "score",
                            record.score.map(|score| format_number(score).into()),
                        ),
                    ],
                    leading_compat: vec![("source", source)],
                    nonce_attr: true,
                };
                self.leaf(
                    &mut rendered,
                    spec,
                    &record.content,
                    &["</retrieved_corpus>"],
                )?;
            }
            rendered.text.push_str("\n</retrieved_corpus>");
        }

        for (tier, kind) in [
            (SourceTier::ThirdPartyPublic, "retrieved-third-party-public"),
            (
                SourceTier::ThirdPartyPrivate,
                "retrieved-third-party-private",
            ),
        ] {
            let mut group: Vec<(&RetrievedRecord, Option<i128>)> = records
                .iter()
                .filter(|record| record.tier == tier)
                .map(|record| (record, compat::millis(record.created_at.as_deref())))
                .collect();
            if group.is_empty() {
                continue;
            }
            group.sort_by(|(a, a_time), (b, b_time)| {
                compat::record_order(*a_time, &a.id, *b_time, &b.id)
            });
            rendered.text.push_str("\n\n");
            for (index, (record, _)) in group.into_iter().enumerate() {
                if index > 0 {
                    rendered.text.push('\n');
                }
                let spec = Spec {
                    tier: Tier::UntrustedContent,
                    identity: &[&record.id],
                    public: &record.id,
                    attrs: vec![
                        ("kind", Some(kind.into())),
                        ("id", sealed.then(|| record.id.as_str().into())),
                        ("tool", record.source.as_deref().map(Cow::Borrowed)),
                    ],
                    leading_compat: Vec::new(),
                    nonce_attr: true,
                };
                self.leaf(&mut rendered, spec, &record.content, &[])?;
            }
        }
        Ok(rendered)
    }

    /// The nonce and opening tag of `spec` (without the newline that follows it). A sealed
    /// nonce is derived from the attribute values exactly as they are rendered
    /// (neutralised), so that the verifier, which sees only those, derives the same.
    fn opener(&self, spec: &Spec<'_>, findings: &mut Vec<Finding>) -> (String, String) {
        let attrs = self.rendered_values(&spec.attrs, findings);
        let leading = match self.key {
            Some(_) => Vec::new(),
            None => self.rendered_values(&spec.leading_compat, findings),
        };
        let nonce = match &self.key {
            Some(key) => {
                let attr = |wanted: &str| {
                    attrs
                        .iter()
                        .find(|(name, _)| *name == wanted)
                        .map(|(_, value)| value.as_ref())
                };
                key.nonce(&nonce_domain(spec.tier, attr), spec.identity)
            }
            None => spec.public.to_owned(),
        };
        let attrs_len: usize = attrs
            .iter()
            .chain(&leading)
            .map(|(name, value)| name.len() + value.len() + 4)
            .sum();
        // Room for the tag, the nonce twice and the attributes, unless they need escaping.
        let mut out =
            String::with_capacity(spec.tier.tag().len() + 2 * nonce.len() + attrs_len + 16);
        out.push('<');
        out.push_str(spec.tier.tag());
        out.push_str(&nonce);
        self.push_attrs(&mut out, &leading);
        if spec.nonce_attr {
            out.push_str(" nonce=\"");
            escape_attr(&mut out, &nonce);
            out.push('"');
        }
        self.push_attrs(&mut out, &attrs);
        out.push('>');
        (nonce, out)
    }

    /// The present attributes with their values as they are rendered, before escaping: in
    /// sealed mode a value (a sender's display name, a source URL: outsider text) is
    /// neutralised like a body, so no attribute can hold tag vocabulary.
    fn rendered_values<'v>(
        &self,
        attrs: &'v [(&'v str, Option<Cow<'v, str>>)],
        findings: &mut Vec<Finding>,
    ) -> Vec<(&'v str, Cow<'v, str>)> {
        attrs
            .iter()
            .filter_map(|(name, value)| {
                let value = value.as_deref()?;
                if self.key.is_none() {
                    return Some((*name, Cow::Borrowed(value)));
                }
                let neutralised = neutralise(value);
                findings.extend(neutralised.findings);
                Some((*name, neutralised.text))
            })
            .collect()
    }

    /// Writes ` name="value"` for every attribute, escaped; in sealed mode control
    /// characters are escaped too, so no value can break its tag's line.
    fn push_attrs(&self, out: &mut String, attrs: &[(&str, Cow<'_, str>)]) {
        for (name, value) in attrs {
            out.push(' ');
            out.push_str(name);
            out.push_str("=\"");
            if self.key.is_some() {
                escape_attr_and_controls(out, value);
            } else {
                escape_attr(out, value);
            }
            out.push('"');
        }
    }

    /// Appends one leaf envelope: opener, newline, body, newline, closer. The body is
    /// refused if it holds its own closer or one of `enclosing` (compat mode; sealed mode
    /// neutralises those), and in sealed mode it is neutralised. Returns where in
    /// `rendered.text` the body lies when it went in unchanged.
    fn leaf(
        &self,
        rendered: &mut Rendered,
        spec: Spec<'_>,
        body: &str,
        enclosing: &[&str],
    ) -> Result<Option<Range<usize>>, RenderError> {
        let tier = spec.tier;
        let (nonce, open) = self.opener(&spec, &mut rendered.findings);
        let close = closer(tier, &nonce);
        let written: Cow<'_, str> = match &self.key {
            Some(_) => {
                // The neutraliser's scan visits every `<`: the live closers are looked
                // for there rather than in a second pass over the body.
                let neutralised =
                    neutralise_probing(body, |rest| match live_closer_at(rest, &nonce) {
                        Some(keyed) => Err(live_closer(tier, keyed, &nonce)),
                        None => Ok(()),
                    })?;
                if !neutralised.findings.is_empty() {
                    // The scan skipped the brackets inside the spans it rewrote.
                    refuse_live_closers(tier, body, Some(&nonce), &[])?;
                }
                rendered.findings.extend(neutralised.findings);
                neutralised.text
            }
            None if matches!(tier, Tier::Message | Tier::PeerOutput) => {
                refuse_live_closers(tier, body, Some(&nonce), enclosing)?;
                compat::neutralise_messages(body)
            }
            None => {
                // Copied as it is checked, a cache-sized chunk at a time, so the body is
                // read from memory once.
                let text = &mut rendered.text;
                let start = text.len();
                text.reserve(open.len() + body.len() + close.len() + 2);
                text.push_str(&open);
                text.push('\n');
                let body_start = text.len();
                if let Err(error) = push_checked(text, tier, body, &nonce, enclosing) {
                    text.truncate(start);
                    return Err(error);
                }
                let verbatim = body_start..text.len();
                text.push('\n');
                text.push_str(&close);
                rendered.nonces.push(nonce);
                return Ok(Some(verbatim));
            }
        };
        // Nothing was changed when what is written is `body` itself.
        let unchanged = matches!(&written, Cow::Borrowed(kept) if std::ptr::eq::<str>(*kept, body));
        let text = &mut rendered.text;
        text.reserve(open.len() + written.len() + close.len() + 2);
        text.push_str(&open);
        text.push('\n');
        let body_start = text.len();
        text.push_str(&written);
        let verbatim = body_start..text.len();
        text.push('\n');
        text.push_str(&close);
        rendered.nonces.push(nonce);
        Ok(unchanged.then_some(verbatim))
    }
}

/// The fixed body the reference shows for opaque reasoning: it names the replay format
/// (or `unknown`) when a payload was kept, and says there is none otherwise.
fn opaque_summary(thought: &Thought) -> String {
    if thought.content.is_empty() {
        return "Empty opaque reasoning placeholder.".to_owned();
    }
    format!(
        "The framework has retained an opaque reasoning block of kind \"{}\" for this turn. Its body is not human-readable text and has been forwarded to the upstream provider via a side-channel.",
        thought.replay_compatibility.as_deref().unwrap_or("unknown")
    )
}

/// The closing tag of a block of `tier` keyed by `nonce`.
pub(crate) fn closer(tier: Tier, nonce: &str) -> String {
    let nonce = if tier.is_keyed() { nonce } else { "" };
    let mut closer = String::with_capacity(tier.tag().len() + nonce.len() + 3);
    closer.push_str("</");
    closer.push_str(tier.tag());
    closer.push_str(nonce);
    closer.push('>');
    closer
}

/// Refuses a body holding a closer that would end its block early: one of a nonce-keyed
/// tier with `nonce` (its own closer, or a sibling tier's, which proves the body knows
/// the nonce: compat nonces are shared across tiers), or one of `enclosing`. Every such
/// closer begins with `</`, which one `memmem` scan finds (code full of `<` has few).
fn refuse_live_closers(
    tier: Tier,
    body: &str,
    nonce: Option<&str>,
    enclosing: &[&str],
) -> Result<(), RenderError> {
    let bytes = body.as_bytes();
    for at in memmem::find_iter(bytes, b"</") {
        refuse_closer_at(tier, &bytes[at..], nonce, enclosing)?;
    }
    Ok(())
}

/// Refuses `rest` if it starts with a live closer: one keyed by `nonce`, or one of
/// `enclosing`.
fn refuse_closer_at(
    tier: Tier,
    rest: &[u8],
    nonce: Option<&str>,
    enclosing: &[&str],
) -> Result<(), RenderError> {
    if let Some(nonce) = nonce
        && let Some(keyed) = live_closer_at(rest, nonce)
    {
        return Err(live_closer(tier, keyed, nonce));
    }
    match enclosing
        .iter()
        .find(|closer| rest.starts_with(closer.as_bytes()))
    {
        Some(closer) => Err(RenderError::LiveCloser {
            tier: tier.name(),
            closer: (*closer).to_owned(),
        }),
        None => Ok(()),
    }
}

/// Bytes [`push_checked`] copies and checks at a time: small enough to stay in the
/// first-level cache between the copy and the scan, and below the size from which glibc
/// copies with `rep movsb`, whose speed depends on how source and destination are
/// aligned (the opener shifts the destination).
const CHUNK: usize = 2 * 1024 - 64;

/// Appends `body` to `out` and refuses it, as [`refuse_live_closers`] does, if it holds
/// a live closer; on refusal `out` holds part of the body and the caller cuts it off.
fn push_checked(
    out: &mut String,
    tier: Tier,
    body: &str,
    nonce: &str,
    enclosing: &[&str],
) -> Result<(), RenderError> {
    // Past this many hits in a chunk, stopping at every one costs more than a scan for
    // another byte.
    const DENSE: usize = 4;
    let closer_start = memmem::Finder::new(b"</");
    let bytes = body.as_bytes();
    let check = |at: usize| refuse_closer_at(tier, &bytes[at..], Some(nonce), enclosing);
    let mut start = 0;
    while start < bytes.len() {
        let mut end = (start + CHUNK).min(bytes.len());
        while !body.is_char_boundary(end) {
            end += 1;
        }
        out.push_str(&body[start..end]);
        // A closer may run past the chunk: each is checked against the whole rest. The
        // pairs are found by their `/` (one byte past the chunk, for a `<` at its end),
        // rare in prose and in most code; where slashes are common, by `<`; where both
        // are, as pairs.
        let limit = (end + 1).min(bytes.len());
        let window = start + 1..limit;
        let mut dense_from = None;
        for (seen, at) in memchr::memchr_iter(b'/', &bytes[window.clone()]).enumerate() {
            let less = start + at;
            if seen == DENSE {
                dense_from = Some(less);
                break;
            }
            if bytes[less] == b'<' {
                check(less)?;
            }
        }
        if let Some(from) = dense_from {
            let mut pairs_from = None;
            for (seen, at) in memchr::memchr_iter(b'<', &bytes[from..end]).enumerate() {
                let less = from + at;
                if seen == DENSE {
                    pairs_from = Some(less);
                    break;
                }
                if bytes.get(less + 1) == Some(&b'/') {
                    check(less)?;
                }
            }
            if let Some(from) = pairs_from {
                for at in closer_start.find_iter(&bytes[from..limit]) {
                    check(from + at)?;
                }
            }
        }
        start = end;
    }
    Ok(())
}

/// The nonce-keyed tier whose closer with `nonce` starts `rest`, if any.
fn live_closer_at(rest: &[u8], nonce: &str) -> Option<Tier> {
    let name = rest.strip_prefix(b"</")?;
    Tier::ALL
        .into_iter()
        .filter(|tier| tier.is_keyed())
        .find(|keyed| {
            name.strip_prefix(keyed.tag().as_bytes())
                .and_then(|after| after.strip_prefix(nonce.as_bytes()))
                .is_some_and(|after| after.first() == Some(&b'>'))
        })
}

fn live_closer(tier: Tier, keyed: Tier, nonce: &str) -> RenderError {
    RenderError::LiveCloser {
        tier: tier.name(),
        closer: closer(keyed, nonce),
    }
}

fn checked_id(what: &'static str, id: &str) -> Result<(), RenderError> {
    validate(id).map_err(|error| RenderError::InvalidId { what, error })
}

/// A number as JavaScript's `String(n)` writes it.
fn format_number(value: f64) -> String {
    ryu_js::Buffer::new().format(value).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chunked copy-and-check finds exactly the closers the plain scan finds,
    /// wherever they sit (across chunk boundaries, among many `<` or `/`, in multi-byte
    /// text), and copies the body whole when there are none.
    #[test]
    fn the_chunked_check_agrees_with_the_plain_scan() {
        let nonce = "0f3a9c1e";
        let live = closer(Tier::UntrustedContent, nonce);
        let enclosing = ["</memories>"];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let pieces = ["a", "<", "/", "</", "é", "語", "<b>", "</b>", " ", "\n"];
        for case in 0..400 {
            let len = 1 + next(30_000);
            let mut body = String::new();
            // Some bodies dense in `<` and `/`, others nearly plain.
            let plain = case % 3 == 0;
            while body.len() < len {
                let piece = if plain && next(50) != 0 {
                    "word "
                } else {
                    pieces[next(pieces.len())]
                };
                body.push_str(piece);
            }
            if case % 2 == 1 {
                let closer = if case % 4 == 1 {
                    live.as_str()
                } else {
                    enclosing[0]
                };
                // Often right at a chunk boundary.
                let mut at = if next(2) == 0 {
                    CHUNK * (1 + next(12)) - next(3)
                } else {
                    next(body.len())
                };
                at = at.min(body.len());
                while !body.is_char_boundary(at) {
                    at -= 1;
                }
                body.insert_str(at, closer);
            }
            let plain_scan =
                refuse_live_closers(Tier::UntrustedContent, &body, Some(nonce), &enclosing);
            let mut out = String::from("head");
            let chunked = push_checked(&mut out, Tier::UntrustedContent, &body, nonce, &enclosing);
            assert_eq!(chunked.is_err(), plain_scan.is_err(), "case {case}");
            if chunked.is_ok() {
                assert_eq!(&out[4..], body);
            }
        }
    }

    #[test]
    fn live_closers_are_recognised_exactly() {
        let nonce = "0f3a9c1e5b7d2f4a";
        for keyed in Tier::ALL.into_iter().filter(|tier| tier.is_keyed()) {
            let closer = closer(keyed, nonce);
            assert_eq!(live_closer_at(closer.as_bytes(), nonce), Some(keyed));
            assert_eq!(
                live_closer_at(format!("{closer} and more").as_bytes(), nonce),
                Some(keyed)
            );
        }
        for near in [
            format!("</untrusted_content_{nonce}"),
            format!("</untrusted_content_{nonce}0>"),
            format!("</untrusted_content_{}>", &nonce[1..]),
            format!("< /untrusted_content_{nonce}>"),
            format!("<untrusted_content_{nonce}>"),
            format!("</retrieved_corpus{nonce}>"),
            "</".to_owned(),
        ] {
            assert_eq!(live_closer_at(near.as_bytes(), nonce), None, "{near}");
        }
    }
}
