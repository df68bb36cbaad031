use tooltrust::tool;

/// Returns the refund policy for a product.
#[tool(trusted, instruction, read_only)]
fn refund_policy(product: String) -> String {
    format!("Refunds for {product}: 30 days.")
}

fn main() {}
