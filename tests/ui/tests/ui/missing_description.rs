use tooltrust::tool;

#[tool(trusted, read_only)]
fn weather(city: String) -> String {
    city
}

fn main() {}
