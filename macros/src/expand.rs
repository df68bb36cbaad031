//! Code generation for `#[tool]`.

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::FnArg;
use syn::spanned::Spanned;

use crate::ast::{ItemFn, Output as Returns, ParamKind, Place, ToolFn};
use crate::attr::{Attrs, Output, Trust, krate_tokens};
use crate::check::{Checked, Description, check};
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
    let model = ToolFn::from_syn(&mut cx, &item, Place::Free);
    let checked = check(&mut cx, &attrs, &model);
    let function = strip_param_docs(&item);
    match checked {
        Some(checked) if !cx.has_errors() => {
            let krate = krate_tokens(attrs.krate.as_ref());
            let generated = free_tool(&krate, &model, &checked);
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
pub fn strip_param_docs(item: &ItemFn) -> TokenStream {
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

/// The name of the struct that implements `Tool` for the function `ident`, after
/// `prefix` (the toolbox's type, for methods).
pub fn tool_struct_ident(prefix: &str, ident: &Ident) -> Ident {
    let text = crate::ast::unraw(ident);
    format_ident!("{prefix}{}", pascal_case(&text), span = ident.span())
}

/// The code of a free function's tool: the arguments struct, a unit struct that
/// implements `Tool`, and a type alias so that the function's name names the tool.
fn free_tool(krate: &TokenStream, model: &ToolFn<'_>, checked: &Checked) -> TokenStream {
    let item = model.item;
    let vis = &item.vis;
    let fn_ident = &item.sig.ident;
    let tool_ident = tool_struct_ident("", fn_ident);
    let fn_text = &model.name;
    let parts = Parts::new(
        krate,
        model,
        checked,
        &tool_ident,
        quote!(#fn_ident),
        quote!(#vis),
    );
    let Parts {
        args_struct,
        spec,
        call,
        ..
    } = &parts;
    let name = &checked.name;
    let tool_doc = format!(
        " The [`{fn_text}`] tool, declared with `#[tool]`: add it to a `tooltrust::Registry`."
    );
    quote! {
        #args_struct

        #[doc = #tool_doc]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #tool_ident;

        // The function's name also names the tool in the type namespace, so that
        // importing the function imports its tool and `tools![fetch_page]` works.
        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #vis type #fn_ident = #tool_ident;

        impl #tool_ident {
            /// The tool's name, for compile-time checks of a registry.
            #[doc(hidden)]
            pub const NAME: &'static str = #name;

            /// The tool's declared metadata.
            pub const SPEC: #krate::__private::ToolSpec = #spec;
        }

        impl #krate::__private::Tool for #tool_ident {
            fn spec(&self) -> #krate::__private::ToolSpec {
                Self::SPEC
            }

            #call
        }
    }
}

/// The parts every tool's code shares, free function or method.
pub struct Parts {
    /// The arguments struct.
    pub args_struct: TokenStream,
    /// The `ToolSpec` expression.
    pub spec: TokenStream,
    /// `args_schema` and `call` of the `Tool` impl.
    pub call: TokenStream,
}

impl Parts {
    /// The parts of the tool `tool_ident`, whose function `invoke` names (`fetch_page`,
    /// or `self.this.send_email` for a method); the arguments struct is `vis`.
    pub fn new(
        krate: &TokenStream,
        model: &ToolFn<'_>,
        checked: &Checked,
        tool_ident: &Ident,
        invoke: TokenStream,
        vis: TokenStream,
    ) -> Parts {
        let item = model.item;
        let args_ident = format_ident!("{}Args", tool_ident);
        let fn_text = &model.name;
        let private = quote!(#krate::__private);
        let serde_path = format!("{}::__private::serde", path_text(krate));
        let schemars_path = format!("{}::__private::schemars", path_text(krate));

        let fields = model.arguments().map(|param| {
            let (ident, ty, docs) = (param.ident, param.ty, &param.docs);
            quote!(#(#docs)* pub #ident: #ty)
        });
        let field_idents: Vec<&Ident> = model.arguments().map(|param| param.ident).collect();
        let contexts = model.params.iter().filter_map(|param| match param.kind {
            ParamKind::Context(inner) => {
                let ident = param.ident;
                Some(quote_spanned!(inner.span()=> let #ident = input.context::<#inner>()?;))
            }
            ParamKind::Argument => None,
        });
        let every_param = model.params.iter().map(|param| param.ident);

        let name = &checked.name;
        let description = match &checked.description {
            Description::Text(text) => text.clone(),
            Description::DocExpr => model.doc.expr(&private),
        };
        let trust = match checked.trust {
            Trust::Trusted => quote!(Trusted),
            Trust::Untrusted => quote!(Untrusted),
        };
        let instruction = checked.output == Output::Instruction;
        let output = if instruction {
            quote!(Instruction)
        } else {
            quote!(Data)
        };
        let effects = if checked.read_only {
            quote!(ReadOnly)
        } else {
            quote!(Consequential)
        };
        // An instruction tool's arguments are selected, never written: each must be a
        // closed vocabulary, checked by a bound spanned at its type.
        let vocabulary = model.arguments().filter(|_| instruction).map(|param| {
            let ty = param.ty;
            quote_spanned!(ty.span()=> #private::closed_vocabulary::<#ty>();)
        });

        let awaited = item.sig.asyncness.map(|_| quote!(.await));
        // The conversion is spanned at the return type, so that a `trusted, instruction`
        // tool returning media is reported there.
        let (convert, span) = match (&model.output, instruction) {
            (Returns::Result(ty), false) => (quote!(outcome_of_result), ty.span()),
            (Returns::Result(ty), true) => (quote!(instruction_outcome_of_result), ty.span()),
            (Returns::Value(ty), false) => (quote!(outcome_of_value), span_of(*ty, item)),
            (Returns::Value(ty), true) => {
                (quote!(instruction_outcome_of_value), span_of(*ty, item))
            }
        };
        // The returned value is bound to a variable spanned at the return type, so that
        // a type error in the conversion is reported there alone.
        let returned = Ident::new("__tooltrust_returned", span);
        let outcome = quote_spanned! {span=> #private::#convert(#returned) };
        let args_doc = format!(" Arguments of the [`{fn_text}`] tool.");

        Parts {
            args_struct: quote! {
                #[doc = #args_doc]
                #[derive(#private::serde::Deserialize, #private::schemars::JsonSchema)]
                #[serde(crate = #serde_path, deny_unknown_fields)]
                #[schemars(crate = #schemars_path)]
                #vis struct #args_ident {
                    #(#fields,)*
                }
            },
            spec: quote! {
                #private::ToolSpec {
                    name: #private::Cow::Borrowed(#name),
                    description: #private::Cow::Borrowed(#description),
                    trust: #private::DeclaredTrust::#trust,
                    output: #private::OutputKind::#output,
                    effects: #private::Effects::#effects,
                }
            },
            call: quote! {
                fn args_schema(&self) -> #private::serde_json::Value {
                    #private::args_schema::<#args_ident>()
                }

                fn call<'a>(
                    &'a self,
                    input: #private::ToolInput<'a>,
                ) -> #private::ToolFuture<'a> {
                    ::std::boxed::Box::pin(async move {
                        #(#vocabulary)*
                        let #args_ident { #(#field_idents),* } = input.parse::<#args_ident>()?;
                        #(#contexts)*
                        let #returned = #invoke(#(#every_param),*) #awaited;
                        ::core::result::Result::Ok(#outcome)
                    })
                }
            },
        }
    }
}

/// The path's text, for the string-valued `crate = "…"` of serde and schemars.
fn path_text(path: &TokenStream) -> String {
    path.to_string().replace(' ', "")
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
        assert!(!expanded.contains("impl :: tooltrust :: __private :: Tool"));
    }

    #[test]
    fn a_crate_path_replaces_tooltrust_everywhere() {
        let expanded = tool(
            quote!(trusted, read_only, crate = "my_sdk::tooltrust"),
            quote! {
                /// Adds.
                fn add(a: i64, b: i64) -> i64 { a + b }
            },
        )
        .to_string();
        assert!(expanded.contains("my_sdk :: tooltrust :: __private"));
        assert!(expanded.contains("\"my_sdk::tooltrust::__private::serde\""));
        assert_eq!(
            expanded.matches("tooltrust :: __private").count(),
            expanded.matches("my_sdk :: tooltrust :: __private").count(),
            "every path goes through the given crate: {expanded}"
        );
    }
}
