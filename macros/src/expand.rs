//! Code generation for `#[tool]`.

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::FnArg;
use syn::spanned::Spanned;

use crate::ast::{ItemFn, Output as Returns, ToolFn};
use crate::attr::{Attrs, Output, Trust};
use crate::check::{Checked, check};
use crate::ctxt::Ctxt;

/// Expands `#[tool(args)] item`. On error the function is still emitted (without the
/// parameter doc comments, which only the arguments struct may carry) beside the errors.
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut cx = Ctxt::default();
    let attrs = Attrs::parse(&mut cx, args);
    let item = match ItemFn::parse(item.clone()) {
        Ok(item) => item,
        Err(error) => {
            let message = error.to_compile_error();
            return quote!(#item #message);
        }
    };
    let model = ToolFn::from_syn(&mut cx, &item);
    let checked = check(&mut cx, &attrs, &model);
    let function = strip_param_docs(&item);
    match checked {
        Some(checked) if !cx.has_errors() => {
            let generated = generate(&model, &checked);
            quote!(#function #generated)
        }
        _ => {
            let errors = cx.into_compile_errors();
            quote!(#function #errors)
        }
    }
}

/// The function as written, minus the doc comments on its parameters (rustc rejects
/// them there; they move to the arguments struct).
fn strip_param_docs(item: &ItemFn) -> TokenStream {
    let mut sig = item.sig.clone();
    for input in &mut sig.inputs {
        if let FnArg::Typed(typed) = input {
            typed.attrs.retain(|attr| !attr.path().is_ident("doc"));
        }
    }
    let (attrs, vis, body) = (&item.attrs, &item.vis, &item.body);
    quote!(#(#attrs)* #vis #sig #body)
}

/// `fetch_page` → `FetchPage`.
pub fn pascal_case(snake: &str) -> String {
    snake
        .split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect()
            })
        })
        .collect()
}

/// The name of the struct that implements `Tool` for the function `ident`.
fn tool_struct_ident(ident: &Ident) -> Ident {
    let text = crate::ast::unraw(ident);
    format_ident!("{}", pascal_case(&text), span = ident.span())
}

fn generate(model: &ToolFn<'_>, checked: &Checked) -> TokenStream {
    let item = model.item;
    let vis = &item.vis;
    let fn_ident = &item.sig.ident;
    let tool_ident = tool_struct_ident(fn_ident);
    let args_ident = format_ident!("{}Args", tool_ident);
    let fn_text = &model.name;

    let fields = model.params.iter().map(|param| {
        let (ident, ty, docs) = (param.ident, param.ty, &param.docs);
        quote!(#(#docs)* pub #ident: #ty)
    });
    let field_idents: Vec<&Ident> = model.params.iter().map(|param| param.ident).collect();

    let name = &checked.name;
    let description = &checked.description;
    let trust = match checked.trust {
        Trust::Trusted => quote!(Trusted),
        Trust::Untrusted => quote!(Untrusted),
    };
    let output = match checked.output {
        Output::Data => quote!(Data),
        Output::Instruction => quote!(Instruction),
    };
    let effects = if checked.read_only {
        quote!(ReadOnly)
    } else {
        quote!(Consequential)
    };

    let awaited = item.sig.asyncness.map(|_| quote!(.await));
    let instruction = checked.output == Output::Instruction;
    // The conversion is spanned at the return type, so that a `trusted, instruction`
    // tool returning media is reported there.
    let (convert, span) = match (&model.output, instruction) {
        (Returns::Result(ty), false) => (quote!(outcome_of_result), ty.span()),
        (Returns::Result(ty), true) => (quote!(instruction_outcome_of_result), ty.span()),
        (Returns::Value(ty), false) => (quote!(outcome_of_value), span_of(*ty, item)),
        (Returns::Value(ty), true) => (quote!(instruction_outcome_of_value), span_of(*ty, item)),
    };
    // The returned value is bound to a variable spanned at the return type, so that a
    // type error in the conversion is reported there alone.
    let returned = Ident::new("__tooltrust_returned", span);
    let outcome = quote_spanned! {span=>
        ::tooltrust::__private::#convert(#returned)
    };

    let args_doc = format!(" Arguments of the [`{fn_text}`] tool.");
    let tool_doc = format!(
        " The [`{fn_text}`] tool, declared with `#[tool]`: add it to a `tooltrust::Registry`."
    );

    quote! {
        #[doc = #args_doc]
        #[derive(
            ::tooltrust::__private::serde::Deserialize,
            ::tooltrust::__private::schemars::JsonSchema
        )]
        #[serde(crate = "::tooltrust::__private::serde", deny_unknown_fields)]
        #[schemars(crate = "::tooltrust::__private::schemars")]
        #vis struct #args_ident {
            #(#fields,)*
        }

        #[doc = #tool_doc]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #tool_ident;

        // The function's name also names the tool in the type namespace, so that
        // importing the function imports its tool and `tools![fetch_page]` works.
        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #vis type #fn_ident = #tool_ident;

        impl #tool_ident {
            /// The tool's declared metadata.
            pub const SPEC: ::tooltrust::ToolSpec = ::tooltrust::ToolSpec {
                name: #name,
                description: #description,
                trust: ::tooltrust::Trust::#trust,
                output: ::tooltrust::OutputKind::#output,
                effects: ::tooltrust::Effects::#effects,
            };
        }

        impl ::tooltrust::Tool for #tool_ident {
            fn spec(&self) -> ::tooltrust::ToolSpec {
                Self::SPEC
            }

            fn args_schema(&self) -> ::tooltrust::__private::serde_json::Value {
                ::tooltrust::__private::args_schema::<#args_ident>()
            }

            fn call(
                &self,
                args: ::tooltrust::__private::serde_json::Value,
            ) -> ::tooltrust::ToolFuture<'_> {
                ::std::boxed::Box::pin(async move {
                    let #args_ident { #(#field_idents),* } =
                        ::tooltrust::__private::parse_args::<#args_ident>(args)?;
                    let #returned = #fn_ident(#(#field_idents),*) #awaited;
                    ::core::result::Result::Ok(#outcome)
                })
            }
        }
    }
}

fn span_of(ty: Option<&syn::Type>, item: &ItemFn) -> proc_macro2::Span {
    ty.map_or_else(|| item.sig.ident.span(), Spanned::span)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand_pretty(args: TokenStream, item: TokenStream) -> String {
        let file: syn::File = syn::parse2(tool(args, item)).expect("expansion parses as a file");
        prettyplease::unparse(&file)
    }

    #[test]
    fn pascal_case_of_snake_names() {
        assert_eq!(pascal_case("fetch_page"), "FetchPage");
        assert_eq!(pascal_case("_private_tool"), "PrivateTool");
        assert_eq!(pascal_case("get2fa_code"), "Get2faCode");
        assert_eq!(pascal_case("FetchPage"), "FetchPage");
    }

    #[test]
    fn expansion_of_a_representative_tool() {
        let expanded = expand_pretty(
            quote!(untrusted, read_only),
            quote! {
                /// Fetches a web page.
                pub async fn fetch_page(
                    /// The page's URL.
                    url: String,
                    /// Stop after this many bytes.
                    max_bytes: Option<u32>,
                ) -> Result<String, FetchError> {
                    fetch(url, max_bytes).await
                }
            },
        );
        insta::assert_snapshot!(expanded);
    }

    #[test]
    fn errors_still_emit_the_function() {
        let expanded = tool(
            quote!(untrusted, instruction),
            quote! {
                /// Reads mail.
                fn read_mail(/// Folder.
                    folder: String) -> String { folder }
            },
        )
        .to_string();
        assert!(expanded.contains("fn read_mail"));
        assert!(expanded.contains("compile_error"));
        assert!(
            !expanded.contains("Folder."),
            "param docs are stripped: {expanded}"
        );
        assert!(!expanded.contains("impl :: tooltrust :: Tool"));
    }
}
