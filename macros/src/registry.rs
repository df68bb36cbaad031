//! Code generation for `tools![…]`: a registry from `#[tool]` functions, with duplicate
//! names refused at compile time.

use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Path, Token};

use crate::ctxt::Ctxt;
use crate::expand::tool_struct_ident;

/// Expands `tools![a, b, c]`.
pub fn tools(input: TokenStream) -> TokenStream {
    let paths = match Punctuated::<Path, Token![,]>::parse_terminated.parse2(input) {
        Ok(paths) => paths,
        Err(error) => return error.to_compile_error(),
    };
    let mut cx = Ctxt::default();
    let mut structs: Vec<Path> = Vec::new();
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
        let mut path = path.clone();
        if let Some(last) = path.segments.last_mut() {
            last.ident = tool_struct_ident(&last.ident);
        }
        structs.push(path);
    }
    if cx.has_errors() {
        return cx.into_compile_errors();
    }
    quote! {{
        const _: () = ::tooltrust::__private::assert_unique_names(&[#(#structs::SPEC.name),*]);
        ::tooltrust::Registry::new([
            #(::std::boxed::Box::new(#structs) as ::std::boxed::Box<dyn ::tooltrust::Tool>),*
        ])
    }}
}
