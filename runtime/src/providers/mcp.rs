//! MCP: the registry as the result of `tools/list`.

use serde_json::{Value, json};

use crate::registry::CatalogEntry;
use crate::tool::{DeclaredTrust, Effects};

/// The `tools/list` result: `{"tools": [`[`tool`]`, …]}`.
pub fn tools_list(catalog: &[CatalogEntry]) -> Value {
    let tools: Vec<Value> = catalog.iter().map(tool).collect();
    json!({ "tools": tools })
}

/// One tool as MCP lists it: `name`, `description`, `inputSchema`, the annotations that
/// follow from its declaration alone (`readOnlyHint` from `read_only`, `destructiveHint`
/// for consequential tools, `openWorldHint` for tools whose output outsiders write), and
/// the declaration itself in `_meta.tooltrust`.
pub fn tool(entry: &CatalogEntry) -> Value {
    let read_only = entry.effects == Effects::ReadOnly;
    let untrusted = entry.trust == DeclaredTrust::Untrusted;
    json!({
        "name": entry.name,
        "description": entry.description,
        "inputSchema": entry.schema,
        "annotations": {
            "readOnlyHint": read_only,
            "destructiveHint": !read_only,
            "openWorldHint": untrusted,
        },
        "_meta": { "tooltrust": entry.declaration() },
    })
}
