//! The `#[tool]` and `#[toolbox]` attributes, the `ClosedVocabulary` derive and the
//! `tools!` registry macro of tooltrust.
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
mod toolbox;
mod vocabulary;

use proc_macro::TokenStream;

/// Declares a tool. See the `tooltrust` crate for the grammar.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::tool(args.into(), item.into()).into()
}

/// Turns the `#[tool]` methods of an inherent `impl` block into tools of one value. See
/// the `tooltrust` crate.
#[proc_macro_attribute]
pub fn toolbox(args: TokenStream, item: TokenStream) -> TokenStream {
    toolbox::toolbox(args.into(), item.into()).into()
}

/// Derives `ClosedVocabulary` for an enum of unit variants. See the `tooltrust` crate.
#[proc_macro_derive(ClosedVocabulary, attributes(vocabulary))]
pub fn closed_vocabulary(input: TokenStream) -> TokenStream {
    vocabulary::derive(input.into()).into()
}

/// Builds a `tooltrust::Registry` from `#[tool]` functions, rejecting duplicate names at
/// compile time.
#[proc_macro]
pub fn tools(input: TokenStream) -> TokenStream {
    registry::tools(input.into()).into()
}
