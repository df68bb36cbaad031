//! A remote MCP server's tools as registry tools, with the trust the host declares.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ContentBlock, ResourceContents};
use rmcp::service::{NotificationContext, RoleClient, RunningService, ServiceError};
use rmcp::{ClientHandler, Peer, ServiceExt};
use serde_json::Value;
use tokio::sync::Notify;
use tooltrust::tool::{ArtifactHandle, Content, DynamicTool, Effects, Media};

use crate::declaration::Declarations;
use crate::metadata::{MetadataLimits, shown};
use crate::pin::Definition;

/// Why a remote server's tools could not be taken, or a remote call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The MCP handshake failed (the server did not start, or spoke no MCP).
    #[error("the MCP server did not complete its handshake")]
    Handshake(#[source] Box<rmcp::service::ClientInitializeError>),
    /// Listing the server's tools failed.
    #[error("the MCP server did not list its tools: {0}")]
    List(#[source] ServiceError),
    /// A remote tool's declaration was refused by the registry's rules.
    #[error("remote tool `{tool}` cannot be registered")]
    Tool {
        /// The remote tool, as named locally.
        tool: String,
        /// Why.
        #[source]
        source: tooltrust::registry::RegistryError,
    },
    /// The server listed a tool name twice, one starting with `_` (which, after the
    /// `<upstream>__` prefix, could pass for another upstream's tool), or one that with
    /// the prefix is not a tool name (1 to 64 of `A-Z a-z 0-9 _ -`).
    #[error(
        "the MCP server lists a tool name that cannot be taken (twice, starting with `_`, or not a tool name): {0:?}"
    )]
    ToolName(String),
    /// The server did not answer its handshake, or its whole listing, in time.
    #[error("the MCP server did not answer {what} within {after:?}")]
    Timeout {
        /// What it did not answer: `initialize` or `tools/list`.
        what: &'static str,
        /// The time limit ([`ListingLimits::timeout`]).
        after: Duration,
    },
    /// The server's listing went past one of [`ListingLimits`]' bounds.
    #[error("the MCP server's tool list is too large: {0}")]
    ListingTooLarge(String),
}

/// How long an upstream may take to start and list its tools, and how much it may list.
/// Past any of them its listing fails; the proxy then reports it unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListingLimits {
    /// How long the handshake may take, and then the whole listing (every page).
    pub timeout: Duration,
    /// How many pages (`nextCursor` followed) one listing may take.
    pub max_pages: usize,
    /// How many tools one listing may hold.
    pub max_tools: usize,
    /// How many bytes the listed tools may take, as JSON.
    pub max_bytes: usize,
}

impl Default for ListingLimits {
    fn default() -> Self {
        ListingLimits {
            timeout: Duration::from_millis(crate::config::DEFAULT_UPSTREAM_TIMEOUT_MS),
            max_pages: crate::config::DEFAULT_LISTING_PAGES,
            max_tools: crate::config::DEFAULT_LISTED_TOOLS,
            max_bytes: crate::config::DEFAULT_LISTING_BYTES,
        }
    }
}

impl ListingLimits {
    /// The bounds `config` sets for every upstream's start and listing.
    pub fn of(config: &crate::config::ProxyConfig) -> ListingLimits {
        ListingLimits {
            timeout: Duration::from_millis(config.upstream_timeout_ms),
            max_pages: config.max_listing_pages,
            max_tools: config.max_listed_tools,
            max_bytes: config.max_listing_bytes,
        }
    }
}

/// Every page of `peer`'s tool list, within `limits`.
async fn list_bounded(
    peer: &Peer<RoleClient>,
    limits: ListingLimits,
) -> Result<Vec<rmcp::model::Tool>, ConnectError> {
    let listing = async {
        let mut tools = Vec::new();
        let mut bytes = 0usize;
        let mut cursor = None;
        for _ in 0..limits.max_pages {
            let page = peer
                .list_tools(Some(
                    rmcp::model::PaginatedRequestParams::default().with_cursor(cursor),
                ))
                .await
                .map_err(ConnectError::List)?;
            for tool in &page.tools {
                bytes = bytes
                    .saturating_add(serde_json::to_vec(tool).map_or(usize::MAX, |json| json.len()));
            }
            tools.extend(page.tools);
            if tools.len() > limits.max_tools {
                return Err(ConnectError::ListingTooLarge(format!(
                    "more than {} tools",
                    limits.max_tools
                )));
            }
            if bytes > limits.max_bytes {
                return Err(ConnectError::ListingTooLarge(format!(
                    "more than {} bytes of tools",
                    limits.max_bytes
                )));
            }
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(tools),
            }
        }
        Err(ConnectError::ListingTooLarge(format!(
            "more than {} pages",
            limits.max_pages
        )))
    };
    tokio::time::timeout(limits.timeout, listing)
        .await
        .map_err(|_| ConnectError::Timeout {
            what: "tools/list",
            after: limits.timeout,
        })?
}

/// Why a remote call gave no result; the tool's output is then this error, rendered as
/// untrusted data like any tool error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteCallError {
    /// The server did not answer in time.
    #[error("the MCP server did not answer within {0:?}")]
    Timeout(Duration),
    /// The connection failed or the server answered with a protocol error.
    #[error("the MCP server failed: {0}")]
    Service(#[source] ServiceError),
    /// The server answered with an error result.
    #[error("the remote tool failed: {0}")]
    Tool(String),
    /// The tool's server has not answered since the proxy started.
    #[error("the MCP server has not connected")]
    NotConnected,
}

/// A connected remote server and its tools.
pub struct Remote {
    service: RunningService<RoleClient, Client>,
    limits: ListingLimits,
    tools: Vec<DynamicTool>,
    listed: Vec<Listed>,
}

/// One tool as the server listed it, and what the host is shown of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// Its definition as the server gave it, and the hash a pin compares.
    pub definition: Definition,
    /// Its name in the registry (the prefix and the server's name).
    pub local_name: String,
    /// The description the host is shown (the host's own, the server's neutralised and
    /// capped, or the server's as written for a tool declared `trusted`).
    pub description: String,
    /// Whether the host is shown text the server wrote for a tool not declared
    /// `trusted` (see the proxy's `metadata_taints`).
    pub outsiders_text: bool,
    /// `Some` when the tool is not among the tools: why.
    pub refused: Option<String>,
}

impl Remote {
    /// The server's peer, for tools bound to it before it answered.
    pub(crate) fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    /// Every tool the server listed, in its order, served or not.
    pub fn listed(&self) -> &[Listed] {
        &self.listed
    }

    /// The remote tools, to add to a registry (`Registry::builder().tool(…)`).
    pub fn into_tools(self) -> (Vec<DynamicTool>, Connection) {
        (
            self.tools,
            Connection {
                service: self.service,
                limits: self.limits,
            },
        )
    }
}

/// Keeps a remote server's connection open; dropping it closes the connection.
pub struct Connection {
    service: RunningService<RoleClient, Client>,
    limits: ListingLimits,
}

impl Connection {
    /// Lists the server's tools again, within the same [`ListingLimits`]: their
    /// definitions as it gives them now.
    pub async fn definitions(&self) -> Result<Vec<Definition>, ConnectError> {
        let listed = list_bounded(self.service.peer(), self.limits).await?;
        Ok(listed.iter().map(Definition::of).collect())
    }
}

/// The client side of a connection: tells the host when the server's tools change.
#[derive(Clone, Default)]
pub(crate) struct Client {
    changed: Option<Arc<Notify>>,
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(changed) = &self.changed {
            changed.notify_one();
        }
    }
}

/// How [`connect`] names and calls remote tools.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Put before each remote tool's name (`web__` makes `fetch_page` `web__fetch_page`);
    /// declarations match the remote name, without it.
    pub prefix: String,
    /// How long a remote call may take.
    pub timeout: Duration,
    /// How much of the server's text a tool not declared `trusted` may show.
    pub limits: MetadataLimits,
    /// Notified when the server says its tools changed (`notifications/tools/list_changed`);
    /// [`Connection::definitions`] then lists them again.
    pub tools_changed: Option<Arc<Notify>>,
    /// How long the server may take to start and list, and how much it may list.
    pub listing: ListingLimits,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            prefix: String::new(),
            timeout: Duration::from_secs(60),
            limits: MetadataLimits::default(),
            tools_changed: None,
            listing: ListingLimits::default(),
        }
    }
}

/// Connects to an MCP server over `transport`, lists its tools, and turns each into a
/// registry tool with the trust and effects `declarations` give it; the server's own
/// annotations are shown in the description but never raise trust. A tool the server adds
/// later is unknown to the registry until the host declares and connects again (fail
/// closed); a tool it removes fails when called.
///
/// The server's descriptions and schemas are its text: for a tool not declared `trusted`
/// they are neutralised and capped, or replaced by the host's description (see
/// [`Declarations::declare_described`]); a tool whose schema cannot be shown so is left
/// out, and [`Remote::listed`] says why. A server that lists a name twice, or one starting
/// with `_`, is refused.
pub async fn connect<T, E, A>(
    transport: T,
    declarations: &Declarations,
    options: ConnectOptions,
) -> Result<Remote, ConnectError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let client = Client {
        changed: options.tools_changed.clone(),
    };
    let limits = options.listing;
    let service = tokio::time::timeout(limits.timeout, client.serve(transport))
        .await
        .map_err(|_| ConnectError::Timeout {
            what: "initialize",
            after: limits.timeout,
        })?
        .map_err(|error| ConnectError::Handshake(Box::new(error)))?;
    let listed = list_bounded(service.peer(), limits).await?;
    let mut names = HashSet::with_capacity(listed.len());
    for remote in &listed {
        let local = format!("{}{}", options.prefix, remote.name);
        // The registry's rule, checked here too: a tool left out for its metadata is
        // still named in reports.
        let nameable = (1..=64).contains(&local.len())
            && local
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if remote.name.starts_with('_') || !nameable || !names.insert(&*remote.name) {
            return Err(ConnectError::ToolName(remote.name.to_string()));
        }
    }
    let peer = PeerSlot::default();
    peer.connect(service.peer().clone());
    let mut tools = Vec::with_capacity(listed.len());
    let mut listing = Vec::with_capacity(listed.len());
    for remote in &listed {
        let (listed, tool) = remote_tool(remote, declarations, &options, &peer)?;
        listing.push(listed);
        tools.extend(tool);
    }
    Ok(Remote {
        service,
        limits,
        tools,
        listed: listing,
    })
}

/// What a server's annotations claim, in words (`the server claims it is read-only and
/// not destructive`): each hint MCP defines that is present; `None` when none is.
fn claimed(annotations: &rmcp::model::ToolAnnotations) -> Option<String> {
    let hints = [
        (annotations.read_only_hint, "read-only"),
        (annotations.destructive_hint, "destructive"),
        (annotations.idempotent_hint, "idempotent"),
        (annotations.open_world_hint, "open-world"),
    ];
    let words: Vec<String> = hints
        .into_iter()
        .filter_map(|(hint, word)| match hint? {
            true => Some(word.to_owned()),
            false => Some(format!("not {word}")),
        })
        .collect();
    let (last, rest) = words.split_last()?;
    Some(if rest.is_empty() {
        format!("the server claims it is {last}")
    } else {
        format!("the server claims it is {} and {last}", rest.join(", "))
    })
}

/// Where a remote tool's calls go: its server's peer, once connected. A tool the proxy
/// registers from its pin before its upstream answered is bound to an empty slot.
#[derive(Clone, Default)]
pub(crate) struct PeerSlot(Arc<OnceLock<Peer<RoleClient>>>);

impl PeerSlot {
    /// Binds the slot to `peer`; a slot already bound keeps its peer.
    pub(crate) fn connect(&self, peer: Peer<RoleClient>) {
        let _ = self.0.set(peer);
    }
}

/// `remote` as the host is shown it and, unless it is refused, as a registry tool whose
/// calls go to `peer`.
pub(crate) fn remote_tool(
    remote: &rmcp::model::Tool,
    declarations: &Declarations,
    options: &ConnectOptions,
    peer: &PeerSlot,
) -> Result<(Listed, Option<DynamicTool>), ConnectError> {
    let name = format!("{}{}", options.prefix, remote.name);
    let declared = declarations.of(&remote.name);
    let definition = Definition::of(remote);
    let shown = match shown(
        remote,
        declared,
        declarations.description_of(&remote.name),
        options.limits,
    ) {
        Ok(shown) => shown,
        Err(why) => {
            let listed = Listed {
                definition,
                local_name: name,
                description: String::new(),
                outsiders_text: false,
                refused: Some(why),
            };
            return Ok((listed, None));
        }
    };
    let mut description = shown.description;
    // Shown, never believed; the host's own description is shown as written.
    if declarations.description_of(&remote.name).is_none()
        && let Some(claims) = remote.annotations.as_ref().and_then(claimed)
    {
        description.push_str(&format!(" ({claims})"));
    }
    if description.trim().is_empty() {
        description = format!("The remote tool `{}`.", remote.name);
    }
    let peer = peer.clone();
    let remote_name = remote.name.to_string();
    let timeout = options.timeout;
    let listed = Listed {
        definition,
        local_name: name.clone(),
        description: description.clone(),
        outsiders_text: shown.outsiders_text,
        refused: None,
    };
    let mut builder = DynamicTool::builder(name.clone())
        .description(description)
        .schema(Value::Object(shown.schema))
        .trust(declared.trust)
        .handler(move |args, _contexts| {
            let peer = peer.clone();
            let remote_name = remote_name.clone();
            async move {
                let Some(peer) = peer.0.get() else {
                    return Err(RemoteCallError::NotConnected);
                };
                call_remote(peer, remote_name, args, timeout).await
            }
        });
    if declared.effects == Effects::ReadOnly {
        builder = builder.read_only();
    }
    let tool = builder
        .build()
        .map_err(|source| ConnectError::Tool { tool: name, source })?;
    Ok((listed, Some(tool)))
}

async fn call_remote(
    peer: &Peer<RoleClient>,
    name: String,
    args: serde_json::Map<String, Value>,
    timeout: Duration,
) -> Result<Content, RemoteCallError> {
    let params = CallToolRequestParams::new(name).with_arguments(args);
    let result = tokio::time::timeout(timeout, peer.call_tool(params))
        .await
        .map_err(|_| RemoteCallError::Timeout(timeout))?
        .map_err(RemoteCallError::Service)?;
    let failed = result.is_error == Some(true);
    let content = content_of(result.content);
    if failed {
        return Err(RemoteCallError::Tool(content.to_text().into_owned()));
    }
    Ok(content)
}

/// A remote result as tool content. `structuredContent` is left out: the text content
/// carries what the model reads, and every byte of it is enveloped.
fn content_of(mut blocks: Vec<ContentBlock>) -> Content {
    if blocks.len() == 1 {
        match blocks.pop() {
            Some(ContentBlock::Image(image)) => {
                return Content::Media(Media {
                    mime: image.mime_type,
                    data: image.data.into_bytes(),
                    description: Some("an image from an MCP server (base64)".to_owned()),
                });
            }
            Some(ContentBlock::Resource(resource)) => {
                let (uri, mime, bytes) = resource_parts(&resource.resource);
                return Content::Artifact(ArtifactHandle {
                    id: uri.clone(),
                    name: uri,
                    mime,
                    bytes,
                });
            }
            Some(other) => blocks.push(other),
            None => {}
        }
    }
    // Texts are moved, not copied: a result may be large, and one text alone is kept as is.
    let mut parts = blocks.into_iter().map(|block| match block {
        ContentBlock::Text(text) => text.text,
        ContentBlock::Image(image) => format!("[image {}]", image.mime_type),
        ContentBlock::Audio(audio) => format!("[audio {}]", audio.mime_type),
        ContentBlock::Resource(resource) => match &resource.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            other => format!("[resource {}]", resource_parts(other).0),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link {}]", link.uri),
        _ => "[content of a kind this client does not know]".to_owned(),
    });
    let mut text = parts.next().unwrap_or_default();
    for part in parts {
        text.push('\n');
        text.push_str(&part);
    }
    Content::Text(text)
}

fn resource_parts(resource: &ResourceContents) -> (String, String, u64) {
    match resource {
        ResourceContents::TextResourceContents {
            uri,
            mime_type,
            text,
            ..
        } => (
            uri.clone(),
            mime_type.clone().unwrap_or_else(|| "text/plain".to_owned()),
            text.len() as u64,
        ),
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => (
            uri.clone(),
            mime_type
                .clone()
                .unwrap_or_else(|| "application/octet-stream".to_owned()),
            (blob.len() as u64 / 4) * 3,
        ),
        _ => (
            "unknown".to_owned(),
            "application/octet-stream".to_owned(),
            0,
        ),
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::ToolAnnotations;

    use super::claimed;

    #[test]
    fn annotations_read_in_words() {
        let claims = |annotations: ToolAnnotations| claimed(&annotations);
        assert_eq!(
            claims(ToolAnnotations::new().read_only(true).destructive(false)).as_deref(),
            Some("the server claims it is read-only and not destructive")
        );
        assert_eq!(
            claims(ToolAnnotations::new().open_world(true)).as_deref(),
            Some("the server claims it is open-world")
        );
        assert_eq!(
            claims(
                ToolAnnotations::new()
                    .read_only(false)
                    .destructive(true)
                    .idempotent(false)
                    .open_world(false)
            )
            .as_deref(),
            Some(
                "the server claims it is not read-only, destructive, not idempotent and not open-world"
            )
        );
        assert_eq!(claims(ToolAnnotations::with_title("Send")), None);
    }
}
