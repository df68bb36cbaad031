use tooltrust::tool;

/// Looks up the weather.
#[tool(trusted, read_only, name = "weather lookup")]
fn weather(city: String) -> String {
    city
}

fn main() {}
