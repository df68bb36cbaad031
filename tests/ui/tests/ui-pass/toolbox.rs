//! A toolbox with state and a context, a closed vocabulary, a crate path through a
//! re-export, and a description included from a file.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tooltrust::{ClosedVocabulary, Context, Registry, tool, toolbox, tools};

/// How the crate of a host re-exports tooltrust.
mod sdk {
    pub use tooltrust;
}

/// The caller, supplied by the host per scope.
pub struct User {
    pub name: String,
}

#[derive(ClosedVocabulary)]
#[vocabulary(rename_all = "snake_case")]
enum Product {
    ElectricKettle,
    #[vocabulary(rename = "toaster-2")]
    Toaster,
}

#[doc = include_str!("refund_policy.md")]
#[tool(trusted, instruction, read_only)]
fn refund_policy(product: Product, days: u8, gift: bool) -> String {
    let name = match product {
        Product::ElectricKettle => "kettles",
        Product::Toaster => "toasters",
    };
    format!("Refunds for {name}: {days} days (gift: {gift}).")
}

/// Adds two numbers.
#[tool(trusted, read_only, crate = "sdk::tooltrust")]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

struct Mailer {
    sent: AtomicU64,
}

#[toolbox(crate = "sdk::tooltrust")]
impl Mailer {
    /// Sends an email on the user's behalf.
    #[tool(trusted)]
    async fn send_email(
        &self,
        /// The recipient.
        to: String,
        user: Context<User>,
    ) -> Result<String, std::io::Error> {
        self.sent.fetch_add(1, Ordering::SeqCst);
        Ok(format!("{} sent to {to}", user.name))
    }

    /// Reads the user's inbox.
    #[tool(untrusted, read_only, name = "read_inbox")]
    fn inbox(&self) -> String {
        String::new()
    }

    fn not_a_tool(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }
}

fn main() {
    let mailer = Arc::new(Mailer {
        sent: AtomicU64::new(0),
    });
    let registry = Registry::builder()
        .tools(tools![refund_policy, add])
        .toolbox(mailer.clone())
        .build();
    assert!(registry.is_ok());
    assert_eq!(mailer.not_a_tool(), 0);
}
