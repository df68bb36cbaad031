use tooltrust::tool;

/// Looks up the weather.
#[tool(trusted, read_only)]
fn weather(city: &str) -> String {
    city.to_owned()
}

fn main() {}
