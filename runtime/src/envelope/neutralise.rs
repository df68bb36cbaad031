//! PLACEHOLDER (replaced by the neutraliser branch on merge).
use serde::Serialize;
use std::borrow::Cow;
/// x
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neutralised<'a> {
    /// x
    pub text: Cow<'a, str>,
    /// x
    pub findings: Vec<Finding>,
}
/// x
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// x
    pub kind: FindingKind,
    /// x
    pub at: usize,
    /// x
    pub len: usize,
    /// x
    pub matched: String,
}
/// x
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum FindingKind {
    /// x
    TagCloser,
}
/// x
pub fn neutralise(body: &str) -> Neutralised<'_> {
    if body.contains("</untrusted_content") {
        return Neutralised {
            text: Cow::Owned(body.replace("</untrusted_content", "&lt;/untrusted_content")),
            findings: vec![Finding {
                kind: FindingKind::TagCloser,
                at: 0,
                len: 0,
                matched: String::new(),
            }],
        };
    }
    Neutralised {
        text: Cow::Borrowed(body),
        findings: vec![],
    }
}
