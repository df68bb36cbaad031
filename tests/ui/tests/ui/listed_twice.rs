use tooltrust::{tool, tools};

/// Looks up the weather.
#[tool(trusted, read_only)]
fn weather(city: String) -> String {
    city
}

fn main() {
    let _ = tools![weather, weather];
}
