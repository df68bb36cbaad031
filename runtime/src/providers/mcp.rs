//! MCP: the registry as the result of `tools/list`.

use serde_json::{Value, json};

use crate::registry::CatalogEntry;
use crate::tool::{DeclaredTrust, Effects};

/// The `tools/list` result: `{"tools": [{"name", "description", "inputSchema",
/// "annotations"}]}`. The annotations carry what tooltrust knows: `readOnlyHint` from
/// `read_only`, and `openWorldHint` for tools whose output outsiders write.
pub fn tools_list(catalog: &[CatalogEntry]) -> Value {
    let tools: Vec<Value> = catalog
        .iter()
        .map(|entry| {
            json!({
                "name": entry.name,
                "description": entry.description,
                "inputSchema": entry.schema,
                "annotations": {
                    "readOnlyHint": entry.effects == Effects::ReadOnly,
                    "openWorldHint": entry.trust == DeclaredTrust::Untrusted,
                },
            })
        })
        .collect();
    json!({ "tools": tools })
}
