use tooltrust::{tool, tools};

/// Looks up the weather.
#[tool(trusted, read_only, name = "lookup")]
fn weather(city: String) -> String {
    city
}

/// Looks up a stock price.
#[tool(trusted, read_only, name = "lookup")]
fn stock(symbol: String) -> String {
    symbol
}

fn main() {
    let _ = tools![weather, stock];
}
