//! The `#[tool]` attribute and the `tools!` registry macro of tooltrust.
//!
//! Use them through the `tooltrust` crate, which re-exports both; generated code names
//! nothing but `::tooltrust::__private::…`.
//!
//! Pipeline, as in serde_derive and thiserror: `attr` parses the attribute, `ast`
//! models the function, `check` applies the cross-cutting rules and collects every
//! error, `expand` generates the code. On error the function is still emitted, so IDEs
//! keep working.

mod ast;
mod attr;
mod check;
mod ctxt;
mod expand;
mod registry;

use proc_macro::TokenStream;

/// Declares a tool. See the `tooltrust` crate for the grammar.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::tool(args.into(), item.into()).into()
}

/// Builds a `tooltrust::Registry` from `#[tool]` functions, rejecting duplicate names at
/// compile time.
#[proc_macro]
pub fn tools(input: TokenStream) -> TokenStream {
    registry::tools(input.into()).into()
}
