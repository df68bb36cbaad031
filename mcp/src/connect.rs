//! A remote MCP server's tools as registry tools, with the trust the host declares.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ContentBlock, ResourceContents};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::{Peer, ServiceExt};
use serde_json::Value;
use tooltrust::tool::{ArtifactHandle, Content, DynamicTool, Effects, Media};

use crate::declaration::Declarations;

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
}

/// A connected remote server and its tools.
pub struct Remote {
    service: RunningService<RoleClient, ()>,
    tools: Vec<DynamicTool>,
}

impl Remote {
    /// The remote tools, to add to a registry (`Registry::builder().tool(…)`).
    pub fn into_tools(self) -> (Vec<DynamicTool>, Connection) {
        (
            self.tools,
            Connection {
                _service: self.service,
            },
        )
    }
}

/// Keeps a remote server's connection open; dropping it closes the connection.
pub struct Connection {
    _service: RunningService<RoleClient, ()>,
}

/// How [`connect`] names and calls remote tools.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Put before each remote tool's name (`web__` makes `fetch_page` `web__fetch_page`);
    /// declarations match the remote name, without it.
    pub prefix: String,
    /// How long a remote call may take.
    pub timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            prefix: String::new(),
            timeout: Duration::from_secs(60),
        }
    }
}

/// Connects to an MCP server over `transport`, lists its tools, and turns each into a
/// registry tool with the trust and effects `declarations` give it; the server's own
/// annotations are shown in the description but never raise trust. A tool the server adds
/// later is unknown to the registry until the host declares and connects again (fail
/// closed); a tool it removes fails when called.
pub async fn connect<T, E, A>(
    transport: T,
    declarations: &Declarations,
    options: ConnectOptions,
) -> Result<Remote, ConnectError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let service = ()
        .serve(transport)
        .await
        .map_err(|error| ConnectError::Handshake(Box::new(error)))?;
    let listed = service.list_all_tools().await.map_err(ConnectError::List)?;
    let mut tools = Vec::with_capacity(listed.len());
    for remote in listed {
        let name = format!("{}{}", options.prefix, remote.name);
        let declared = declarations.of(&remote.name);
        let mut description = remote.description.as_deref().unwrap_or_default().to_owned();
        if let Some(annotations) = &remote.annotations {
            // Shown, never believed.
            description.push_str(&format!(
                " (the server claims: read-only {:?}, destructive {:?})",
                annotations.read_only_hint, annotations.destructive_hint
            ));
        }
        if description.trim().is_empty() {
            description = format!("The remote tool `{}`.", remote.name);
        }
        let peer = service.peer().clone();
        let remote_name = remote.name.to_string();
        let timeout = options.timeout;
        let mut builder = DynamicTool::builder(name.clone())
            .description(description)
            .schema(Value::Object((*remote.input_schema).clone()))
            .trust(declared.trust)
            .handler(move |args, _contexts| {
                let peer = peer.clone();
                let remote_name = remote_name.clone();
                async move { call_remote(&peer, remote_name, args, timeout).await }
            });
        if declared.effects == Effects::ReadOnly {
            builder = builder.read_only();
        }
        let tool = builder
            .build()
            .map_err(|source| ConnectError::Tool { tool: name, source })?;
        tools.push(tool);
    }
    Ok(Remote { service, tools })
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
