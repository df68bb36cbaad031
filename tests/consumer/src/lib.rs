//! Tools declared by a crate whose only dependency is `tooltrust`: free functions, an
//! instruction tool over a closed vocabulary, a toolbox with state and a per-scope
//! context, and a tool defined at run time from configuration.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use tooltrust::canonical::parse_strict;
use tooltrust::tool::{DeclaredTrust, DynamicTool};
use tooltrust::{ClosedVocabulary, Context, tool, toolbox};

/// Adds two integers.
#[tool(trusted, read_only)]
pub fn add(
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
) -> i64 {
    a + b
}

/// Greets someone, optionally by title.
#[tool(untrusted, read_only)]
pub async fn greet(name: String, title: Option<String>) -> Result<String, std::fmt::Error> {
    Ok(match title {
        Some(title) => format!("Hello, {title} {name}"),
        None => format!("Hello, {name}"),
    })
}

/// The products a refund policy exists for: the model selects one, it never writes one.
#[derive(ClosedVocabulary)]
pub enum Product {
    /// An electric kettle.
    Kettle,
    /// A two-slot toaster.
    Toaster,
}

/// Returns the refund policy support agents must follow for a product.
#[tool(trusted, instruction, read_only)]
pub fn refund_policy(
    /// The product the customer bought.
    product: Product,
) -> &'static str {
    match product {
        Product::Kettle => "Kettles: refunds within 30 days.",
        Product::Toaster => "Toasters: refunds within 14 days.",
    }
}

/// Who the agent works for: the host supplies it per scope, the model never sees it.
pub struct Caller {
    /// The caller's name.
    pub name: String,
}

/// The order desk of one shop: the state its tools share.
pub struct OrderDesk {
    shop: String,
    lookups: AtomicU64,
}

impl OrderDesk {
    /// The desk of `shop`, with no lookup made.
    pub fn new(shop: impl Into<String>) -> Self {
        OrderDesk {
            shop: shop.into(),
            lookups: AtomicU64::new(0),
        }
    }

    /// How many times a status was looked up.
    pub fn lookups(&self) -> u64 {
        self.lookups.load(Ordering::SeqCst)
    }
}

/// Why orders could not be cancelled.
#[derive(Debug)]
pub struct CancelError(String);

impl fmt::Display for CancelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[toolbox]
impl OrderDesk {
    /// Looks up the status of one of the caller's orders.
    #[tool(trusted, read_only)]
    fn order_status(
        &self,
        /// The order number.
        order: u64,
        /// Whether to list the items too.
        details: Option<bool>,
        caller: Context<Caller>,
    ) -> String {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        let items = if details == Some(true) {
            " (1 kettle)"
        } else {
            ""
        };
        format!(
            "{}: order {order} of {} has shipped{items}",
            self.shop, caller.name
        )
    }

    /// Cancels orders on the caller's behalf.
    #[tool(trusted)]
    async fn cancel_orders(
        &self,
        /// The order numbers.
        orders: Vec<u64>,
        /// Why, if the caller said.
        reason: Option<String>,
        caller: Context<Caller>,
    ) -> Result<String, CancelError> {
        if orders.is_empty() {
            return Err(CancelError("no order to cancel".into()));
        }
        let reason = reason.unwrap_or_else(|| "no reason given".into());
        Ok(format!(
            "{}: cancelled {} orders of {} ({reason})",
            self.shop,
            orders.len(),
            caller.name
        ))
    }
}

/// The arguments schema of [`store_hours`], as a configuration file would hold it.
pub const STORE_HOURS_SCHEMA: &str = r#"{
    "type": "object",
    "properties": {
        "day": {"type": "string", "enum": ["weekday", "saturday", "sunday"]},
        "holiday": {"type": "boolean", "description": "Whether the day is a public holiday."}
    },
    "required": ["day"]
}"#;

/// Why a tool defined at run time could not be built.
#[derive(Debug)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// A tool known only at run time: its declaration comes from configuration text (here
/// [`STORE_HOURS_SCHEMA`]), its handler from the host.
pub fn store_hours(schema: &str) -> Result<DynamicTool, ConfigError> {
    let schema = parse_strict(schema).map_err(|error| ConfigError(error.to_string()))?;
    DynamicTool::builder("store_hours")
        .description("Returns the store's opening hours on a day.")
        .schema(schema)
        .trust(DeclaredTrust::Trusted)
        .read_only()
        .handler(|args, _contexts| async move {
            // The arguments were checksummed as the model sent them; the handler reads
            // them as JSON, refusing what it does not know.
            let hours = match args.get("day").and_then(|day| day.as_str()) {
                Some("weekday") => "9:00–18:00",
                Some("saturday") => "10:00–16:00",
                Some("sunday") => "closed",
                other => return Err(format!("unknown day {other:?}")),
            };
            let holiday = args.get("holiday").and_then(|h| h.as_bool()) == Some(true);
            Ok(if holiday { "closed" } else { hours })
        })
        .build()
        .map_err(|error| ConfigError(error.to_string()))
}
