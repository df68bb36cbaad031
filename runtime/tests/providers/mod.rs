//! The MCP adapter against the shape the specification documents (fixture in
//! `tests/data/providers`, with the documentation it follows). The OpenAI-compatible and
//! Anthropic adapters are tested in `tooltrust-providers`.

mod shape;

use serde_json::{Value, json};
use tooltrust::providers::mcp;
use tooltrust::{tool, tools};

use shape::assert_same_shape;

/// Get the current weather in a given location
#[tool(untrusted, read_only)]
fn get_weather(
    /// The city and state, e.g. San Francisco, CA
    location: String,
) -> String {
    location
}

/// Books a table.
#[tool(trusted)]
fn book_table(restaurant: String) -> String {
    restaurant
}

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/data/providers/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).expect("fixture")
}

fn fixture_json(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).expect("fixture JSON")
}

#[test]
fn mcp_tools_list_matches_the_documented_shape() {
    let documented = fixture_json("mcp_tools_list.json");
    let registry = tools![get_weather, book_table].unwrap();
    let ours = mcp::tools_list(registry.catalog());
    let weather = ours["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "get_weather")
        .unwrap();
    let mut documented_tool = documented["result"]["tools"][0].clone();
    documented_tool.as_object_mut().unwrap().remove("title");
    assert_same_shape(&documented_tool, weather, "");
    assert_eq!(
        weather["annotations"],
        json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": true})
    );
    let book = ours["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "book_table")
        .unwrap();
    assert_eq!(
        book["annotations"],
        json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false})
    );
    assert_eq!(book["_meta"]["tooltrust"]["effects"], "consequential");
}
