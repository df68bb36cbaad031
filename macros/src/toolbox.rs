//! `#[toolbox]` on an inherent `impl` block: each `#[tool]` method becomes a tool that
//! holds the value (`Arc<Self>`), and the type implements `Toolbox`.
//!
//! Like `#[tool]`, it reads only what it needs: the block's head and each method's
//! signature; bodies pass through as written.

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::quote;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Attribute, Generics, Meta, Token, Type, WhereClause};

use crate::ast::{ItemFn, Place, ToolFn};
use crate::attr::{Attrs, crate_path, krate_tokens};
use crate::check::check;
use crate::ctxt::Ctxt;
use crate::expand::{Parts, pascal_case, strip_param_docs, tool_struct_ident};

/// The head of the impl block: `impl Type` and what must not be there.
struct Head {
    tokens: TokenStream,
    generics: Generics,
    self_ty: Type,
    trait_for: Option<Token![for]>,
    where_clause: Option<WhereClause>,
}

/// One item of the block, as written: a `#[tool]` method, or anything else.
enum Item {
    Tool {
        args: TokenStream,
        /// The `#[tool(...)]` attribute, for errors about what it lacks.
        span: Span,
        item: Box<ItemFn>,
    },
    Other(TokenStream),
}

/// Expands `#[toolbox(args)] impl Type { … }`.
pub fn toolbox(args: TokenStream, input: TokenStream) -> TokenStream {
    let mut cx = Ctxt::default();
    let krate = parse_args(&mut cx, args);
    let (head, body) = match split(input.clone()) {
        Ok(parts) => parts,
        Err(error) => {
            let error = error.to_compile_error();
            return quote!(#input #error);
        }
    };
    check_head(&mut cx, &head);
    let items = items_of(&mut cx, body);
    let emitted = emit_block(&head, &items);
    let krate = krate_tokens(krate.as_ref());
    let generated = generate(&mut cx, &krate, &head, &items);
    if cx.has_errors() {
        let errors = cx.into_compile_errors();
        return quote!(#emitted #errors);
    }
    quote!(#emitted #generated)
}

fn parse_args(cx: &mut Ctxt, args: TokenStream) -> Option<syn::Path> {
    let metas = match Punctuated::<Meta, Token![,]>::parse_terminated.parse2(args) {
        Ok(metas) => metas,
        Err(error) => {
            cx.syn_error(error);
            return None;
        }
    };
    let mut krate = None;
    for meta in metas {
        if meta.path().is_ident("crate") {
            if let Some(path) = crate_path(cx, &meta, krate.is_some()) {
                krate = Some(path);
            }
        } else {
            cx.error_spanned_by(
                meta.path(),
                "#[toolbox] takes only `crate = \"…\"`; declare each tool's trust on its method's #[tool(...)]",
            );
        }
    }
    krate
}

/// Splits the item into its head and the block's brace group.
fn split(input: TokenStream) -> syn::Result<(Head, Group)> {
    const WHERE: &str = "#[toolbox] goes on an inherent `impl` block: `impl Mailer { … }`";
    let mut tokens: Vec<TokenTree> = input.into_iter().collect();
    let body = match tokens.pop() {
        Some(TokenTree::Group(body)) if body.delimiter() == Delimiter::Brace => body,
        other => {
            let span = other.map_or_else(Span::call_site, |token| token.span());
            return Err(syn::Error::new(span, WHERE));
        }
    };
    let head_tokens: TokenStream = tokens.into_iter().collect();
    let parse = |input: ParseStream| {
        input.call(Attribute::parse_outer)?;
        let _: Option<Token![unsafe]> = input.parse()?;
        let _: Token![impl] = input.parse()?;
        let generics: Generics = if input.peek(Token![<]) {
            input.parse()?
        } else {
            Generics::default()
        };
        let _: Option<Token![!]> = input.parse()?;
        let self_ty: Type = input.parse()?;
        let trait_for: Option<Token![for]> = input.parse()?;
        if trait_for.is_some() {
            let _: Type = input.parse()?;
        }
        let where_clause: Option<WhereClause> = input.parse()?;
        Ok(Head {
            tokens: TokenStream::new(),
            generics,
            self_ty,
            trait_for,
            where_clause,
        })
    };
    let mut head = parse
        .parse2(head_tokens.clone())
        .map_err(|error| syn::Error::new(error.span(), WHERE))?;
    head.tokens = head_tokens;
    Ok((head, body))
}

fn check_head(cx: &mut Ctxt, head: &Head) {
    if let Some(token) = head.trait_for {
        cx.error_spanned_by(
            token,
            "#[toolbox] goes on an inherent `impl` block, not a trait impl: write the tools in `impl Mailer { … }`",
        );
    }
    if !head.generics.params.is_empty() {
        cx.error_spanned_by(
            &head.generics,
            "a #[toolbox] cannot be generic: the registry needs one concrete type for its tools; implement it for a concrete type (wrap the generic one in a struct)",
        );
    }
    if let Some(clause) = &head.where_clause {
        cx.error_spanned_by(
            clause,
            "a #[toolbox] cannot have a `where` clause: implement it for a concrete type",
        );
    }
}

/// The block's items, in order; `#[tool]` methods parsed (their signatures only).
fn items_of(cx: &mut Ctxt, body: Group) -> Vec<Item> {
    let mut items = Vec::new();
    let mut current: Vec<TokenTree> = Vec::new();
    for token in body.stream() {
        let ends = match &token {
            TokenTree::Punct(punct) => punct.as_char() == ';',
            TokenTree::Group(group) => group.delimiter() == Delimiter::Brace,
            _ => false,
        };
        current.push(token);
        if ends {
            items.push(item_of(
                cx,
                std::mem::take(&mut current).into_iter().collect(),
            ));
        }
    }
    if !current.is_empty() {
        items.push(Item::Other(current.into_iter().collect()));
    }
    items
}

fn item_of(cx: &mut Ctxt, tokens: TokenStream) -> Item {
    let parse = |input: ParseStream| {
        let attrs = input.call(Attribute::parse_outer)?;
        let rest: TokenStream = input.parse()?;
        Ok((attrs, rest))
    };
    let Ok((attrs, rest)) = parse.parse2(tokens.clone()) else {
        return Item::Other(tokens);
    };
    let (tool_attrs, others): (Vec<Attribute>, Vec<Attribute>) = attrs
        .into_iter()
        .partition(|attr| attr.path().is_ident("tool"));
    let Some(tool_attr) = tool_attrs.first() else {
        return Item::Other(tokens);
    };
    for twice in &tool_attrs[1..] {
        cx.error_spanned_by(twice, "duplicate #[tool] on one method; declare it once");
    }
    let args = match &tool_attr.meta {
        Meta::List(list) => list.tokens.clone(),
        Meta::Path(_) => TokenStream::new(),
        Meta::NameValue(pair) => {
            cx.error_spanned_by(pair, "write #[tool(trusted | untrusted, …)]");
            TokenStream::new()
        }
    };
    match ItemFn::parse(quote!(#(#others)* #rest)) {
        Ok(item) => Item::Tool {
            args,
            span: syn::spanned::Spanned::span(tool_attr.meta.path()),
            item: Box::new(item),
        },
        Err(error) => {
            cx.syn_error(error);
            Item::Other(quote!(#(#others)* #rest))
        }
    }
}

/// The block as written, minus the `#[tool]` attributes and the doc comments on
/// parameters (rustc rejects both there).
fn emit_block(head: &Head, items: &[Item]) -> TokenStream {
    let items = items.iter().map(|item| match item {
        Item::Tool { item, .. } => strip_param_docs(item),
        Item::Other(tokens) => tokens.clone(),
    });
    let head = &head.tokens;
    quote!(#head { #(#items)* })
}

fn generate(cx: &mut Ctxt, krate: &TokenStream, head: &Head, items: &[Item]) -> TokenStream {
    let self_ty = &head.self_ty;
    let prefix = type_name(self_ty);
    let mut seen: Vec<String> = Vec::new();
    let mut tools = Vec::new();
    let mut code = Vec::new();
    for item in items {
        let Item::Tool { args, span, item } = item else {
            continue;
        };
        let mut attrs = Attrs::parse(cx, args.clone());
        attrs.span = *span;
        if let Some(path) = &attrs.krate {
            cx.error_spanned_by(
                path,
                "set `crate = \"…\"` once, on #[toolbox(...)], for every tool of the block",
            );
        }
        let model = ToolFn::from_syn(cx, item, Place::Method);
        let Some(checked) = check(cx, &attrs, &model) else {
            continue;
        };
        if seen.contains(&checked.name) {
            cx.error_spanned_by(
                &item.sig.ident,
                format!(
                    "two tools of this #[toolbox] are named `{}`; give one of them `name = \"…\"` in #[tool(...)]",
                    checked.name
                ),
            );
            continue;
        }
        seen.push(checked.name.clone());
        let tool_ident = tool_struct_ident(&prefix, &item.sig.ident);
        let method = &item.sig.ident;
        let Parts {
            args_struct,
            spec,
            call,
        } = Parts::new(
            krate,
            &model,
            &checked,
            &tool_ident,
            quote!(self.this.#method),
            quote!(),
        );
        code.push(quote! {
            #[doc(hidden)]
            #args_struct

            #[doc(hidden)]
            struct #tool_ident {
                this: #krate::__private::Arc<#self_ty>,
            }

            impl #krate::__private::Tool for #tool_ident {
                fn spec(&self) -> #krate::__private::ToolSpec {
                    #spec
                }

                #call
            }
        });
        tools.push(tool_ident);
    }
    if seen.is_empty() && !cx.has_errors() {
        cx.error_spanned_by(
            self_ty,
            "this #[toolbox] has no #[tool] method: mark each method the model may call with #[tool(trusted | untrusted, …)]",
        );
    }
    quote! {
        #(#code)*

        impl #krate::__private::Toolbox for #self_ty {
            fn tools(
                self: #krate::__private::Arc<Self>,
            ) -> ::std::vec::Vec<::std::boxed::Box<dyn #krate::__private::Tool>> {
                ::std::vec![#(
                    ::std::boxed::Box::new(#tools {
                        this: ::std::clone::Clone::clone(&self),
                    }) as ::std::boxed::Box<dyn #krate::__private::Tool>
                ),*]
            }
        }
    }
}

/// The type's last path segment, in PascalCase: the prefix of its tools' structs.
fn type_name(ty: &Type) -> String {
    match ty {
        Type::Path(path) => path
            .path
            .segments
            .last()
            .map_or_else(String::new, |segment| {
                pascal_case(&segment.ident.to_string())
            }),
        _ => String::from("Toolbox"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand_pretty(args: TokenStream, item: TokenStream) -> String {
        let file: syn::File =
            syn::parse2(toolbox(args, item)).expect("the expansion parses as a file");
        prettyplease::unparse(&file)
    }

    /// Every path the expansion names outside the user's own items goes through
    /// `{krate}::__private`, or is `std`/`core`.
    fn assert_hygienic(expanded: &str, krate: &str) {
        let prefix = format!("{krate}::");
        let mut rest = expanded;
        while let Some(at) = rest.find(&prefix) {
            let tail = &rest[at + prefix.len()..];
            assert!(
                tail.starts_with("__private::"),
                "`{prefix}` outside `__private`: {}",
                &tail[..tail.len().min(60)]
            );
            rest = tail;
        }
        for line in expanded.lines() {
            let line = line.trim_start();
            assert!(
                !line.starts_with("use "),
                "the expansion imports nothing: {line}"
            );
        }
    }

    #[test]
    fn expansion_of_a_representative_toolbox() {
        let expanded = expand_pretty(
            quote!(),
            quote! {
                impl Mailer {
                    /// Sends an email on the user's behalf.
                    #[tool(trusted)]
                    async fn send_email(
                        &self,
                        /// The recipient.
                        to: String,
                        user: Context<User>,
                    ) -> Result<String, MailError> {
                        self.smtp.send(&user.address, &to).await
                    }

                    /// Reads the user's inbox.
                    #[tool(untrusted, read_only, name = "read_inbox")]
                    fn inbox(&self, limit: Option<u32>) -> Vec<String> {
                        self.inbox.lock().iter().take(limit.unwrap_or(10) as usize).cloned().collect()
                    }

                    fn helper(&self) {}
                }
            },
        );
        insta::assert_snapshot!(expanded);
        assert_hygienic(&expanded, "::tooltrust");
        // The context is fetched, never parsed from the arguments.
        assert!(expanded.contains("let user = input.context::<User>()?;"));
        assert!(!expanded.contains("pub user"));
    }

    #[test]
    fn a_crate_path_names_only_its_private_module() {
        let expanded = expand_pretty(
            quote!(crate = "sdk::tooltrust"),
            quote! {
                impl Desk {
                    /// Looks an order up.
                    #[tool(trusted, read_only)]
                    fn order(&self, id: u64, who: Context<Caller>) -> String {
                        format!("{id} {}", who.name)
                    }
                }
            },
        );
        assert_hygienic(&expanded, "sdk::tooltrust");
        assert_eq!(
            expanded.matches("tooltrust::").count(),
            expanded.matches("sdk::tooltrust::__private::").count(),
            "every path goes through the given crate: {expanded}"
        );
        assert!(expanded.contains("\"sdk::tooltrust::__private::serde\""));
    }
}
