//! What a tool returns. Trust is content, not courier: media, retrieved records and
//! artifact handles carry outsider bytes, so they are untrusted data whichever tool
//! returns them.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::id::Id;

/// The content of a tool's output.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// A JSON value (anything `Serialize` that is not a string).
    Json(Value),
    /// An image, audio clip or other binary the model may see; always untrusted.
    Media(Media),
    /// Records retrieved from a corpus; always untrusted.
    Retrieved(Retrieved),
    /// A handle to an artifact stored outside the prompt; always untrusted.
    Artifact(ArtifactHandle),
}

impl Content {
    /// Whether the content carries outsider bytes whatever the tool that returned it
    /// declares.
    pub fn is_outsider_content(&self) -> bool {
        matches!(
            self,
            Content::Media(_) | Content::Retrieved(_) | Content::Artifact(_)
        )
    }

    /// The text a prompt shows for this content: text as is, JSON in its compact form,
    /// and a one-line description for media and artifacts.
    pub fn to_text(&self) -> Cow<'_, str> {
        match self {
            Content::Text(text) => Cow::Borrowed(text),
            Content::Json(value) => Cow::Owned(value.to_string()),
            Content::Media(media) => Cow::Owned(media.to_string()),
            Content::Retrieved(records) => Cow::Owned(
                records
                    .0
                    .iter()
                    .map(|r| r.content.as_str())
                    .collect::<Vec<_>>()
                    .join("\n\n"),
            ),
            Content::Artifact(handle) => Cow::Owned(handle.to_string()),
        }
    }
}

/// Binary media (an image, an audio clip). A prompt that cannot carry the bytes shows
/// its description instead, as untrusted content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Media {
    /// The MIME type, such as `image/png`.
    pub mime: String,
    /// The raw bytes.
    pub data: Vec<u8>,
    /// A description written by whoever produced the media, if any.
    pub description: Option<String>,
}

impl fmt::Display for Media {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[media {}, {} bytes", self.mime, self.data.len())?;
        if let Some(description) = &self.description {
            write!(f, ": {description}")?;
        }
        f.write_str("]")
    }
}

/// Where a retrieved record comes from, which decides how it is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceTier {
    /// The developer's own corpus (policies, a knowledge base the developer curates).
    FirstParty,
    /// Public third-party material (web pages).
    ThirdPartyPublic,
    /// Private third-party material (a user's upload, a customer's email).
    ThirdPartyPrivate,
}

/// One record retrieved from a corpus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetrievedRecord {
    /// The record's id; it goes into tag names.
    pub id: Id,
    /// The record's text.
    pub content: String,
    /// Where the record comes from.
    pub tier: SourceTier,
    /// Where the record was found (a URL, a document path), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// When the record was written, as RFC 3339 text, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// The record's kind (`policy`, `faq`…), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The retriever's relevance score, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// Records a tool retrieved. A newtype so that it is never mistaken for serializable
/// data of the tool's own trust.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Retrieved(pub Vec<RetrievedRecord>);

/// A handle to an artifact kept outside the prompt (a file, a blob).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactHandle {
    /// The artifact's id in the host's store.
    pub id: String,
    /// Its name, as its author gave it.
    pub name: String,
    /// Its MIME type.
    pub mime: String,
    /// Its size in bytes.
    pub bytes: u64,
}

impl fmt::Display for ArtifactHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[artifact {} \"{}\", {}, {} bytes]",
            self.id, self.name, self.mime, self.bytes
        )
    }
}

/// A value a tool may return.
///
/// Implemented for everything `Serialize` (strings become text, anything else JSON) and
/// for [`Media`], [`Retrieved`] and [`ArtifactHandle`], which are always untrusted.
pub trait IntoContent {
    /// Converts the value; fails only when serialization fails.
    fn into_content(self) -> Result<Content, String>;
}

impl<T: Serialize> IntoContent for T {
    fn into_content(self) -> Result<Content, String> {
        match serde_json::to_value(self) {
            Ok(Value::String(text)) => Ok(Content::Text(text)),
            Ok(value) => Ok(Content::Json(value)),
            Err(error) => Err(format!(
                "the tool's output could not be serialized: {error}"
            )),
        }
    }
}

/// Content as it is: for handlers that already decided its kind (a remote server's result).
impl IntoContent for Content {
    fn into_content(self) -> Result<Content, String> {
        Ok(self)
    }
}

impl IntoContent for Media {
    fn into_content(self) -> Result<Content, String> {
        Ok(Content::Media(self))
    }
}

impl IntoContent for Retrieved {
    fn into_content(self) -> Result<Content, String> {
        Ok(Content::Retrieved(self))
    }
}

impl IntoContent for ArtifactHandle {
    fn into_content(self) -> Result<Content, String> {
        Ok(Content::Artifact(self))
    }
}

/// Text that a `trusted, instruction` tool may return: plain strings only. Media,
/// retrieved records and artifact handles carry outsider bytes and can never be
/// instructions.
#[diagnostic::on_unimplemented(
    message = "a `trusted, instruction` tool cannot return `{Self}`",
    label = "this output type is not instruction text",
    note = "instructions carry the developer's authority, so they must be text the developer wrote: return `String` or `&'static str`",
    note = "media, retrieved records and artifact handles carry outsider bytes and are always untrusted data; to return them, remove `instruction` from `#[tool(...)]`"
)]
pub trait InstructionText: IntoContent {}

impl InstructionText for String {}
impl InstructionText for &'static str {}
impl InstructionText for Cow<'static, str> {}
impl InstructionText for Box<str> {}
