//! Code generation for `tools![…]`: a registry from `#[tool]` functions, with duplicate
//! names refused at compile time.

use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Path, Token};

use crate::ctxt::Ctxt;

/// Expands `tools![a, b, c]`.
pub fn tools(input: TokenStream) -> TokenStream {
    let paths = match Punctuated::<Path, Token![,]>::parse_terminated.parse2(input) {
        Ok(paths) => paths,
        Err(error) => return error.to_compile_error(),
    };
    let mut cx = Ctxt::default();
    let mut seen: Vec<String> = Vec::new();
    for path in &paths {
        let text = quote!(#path).to_string().replace(' ', "");
        if seen.contains(&text) {
            cx.error_spanned_by(
                path,
                format!("`{text}` is listed twice; list each tool once"),
            );
        }
        seen.push(text);
    }
    if cx.has_errors() {
        return cx.into_compile_errors();
    }
    // Each path names the tool's struct, or the `#[tool]` function whose name is also
    // a type alias of it.
    let paths = paths.iter();
    let names = paths.clone();
    quote! {{
        const _: () = ::tooltrust::__private::assert_unique_names(&[#(#names::NAME),*]);
        ::tooltrust::__private::Registry::new([
            #(::std::boxed::Box::new(<#paths as ::core::default::Default>::default())
                as ::std::boxed::Box<dyn ::tooltrust::__private::Tool>),*
        ])
    }}
}
