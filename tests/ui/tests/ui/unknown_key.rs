use tooltrust::tool;

/// Looks up the weather.
#[tool(trusted, readonly)]
fn weather(city: String) -> String {
    city
}

fn main() {}
