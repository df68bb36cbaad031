use tooltrust::tool;

/// Looks up the weather.
#[tool(trusted, untrusted, read_only)]
fn weather(city: String) -> String {
    city
}

fn main() {}
