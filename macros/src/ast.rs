//! The model of a tool function: its name, documentation, parameters and return type.

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use syn::parse::{ParseStream, Parser};
use syn::{Attribute, FnArg, Ident, Pat, ReturnType, Signature, Type, Visibility};

use crate::ctxt::Ctxt;

/// A function as `#[tool]` reads it: everything but the body is parsed. The body stays
/// the token group it was, because the macro never looks inside it and parsing and
/// printing it again would cost every build of the user's crate time for nothing.
pub struct ItemFn {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub sig: Signature,
    /// The `{ … }` block, as written.
    pub body: Group,
}

impl ItemFn {
    /// Parses the item `#[tool]` is on; anything but a function with a body is an error.
    pub fn parse(item: TokenStream) -> syn::Result<ItemFn> {
        const WHERE: &str = "#[tool] goes on a free `fn` or `async fn`";
        let mut head: Vec<TokenTree> = item.into_iter().collect();
        let body = match head.pop() {
            Some(TokenTree::Group(body)) if body.delimiter() == Delimiter::Brace => body,
            other => {
                let span = other.map_or_else(Span::call_site, |token| token.span());
                return Err(syn::Error::new(span, WHERE));
            }
        };
        let parse_head = |input: ParseStream| {
            Ok(ItemFn {
                attrs: input.call(Attribute::parse_outer)?,
                vis: input.parse()?,
                sig: input.parse()?,
                body,
            })
        };
        parse_head
            .parse2(head.into_iter().collect())
            .map_err(|error| syn::Error::new(error.span(), WHERE))
    }
}

/// A tool function as the expansion needs it.
pub struct ToolFn<'a> {
    pub item: &'a ItemFn,
    /// The function's name without `r#`.
    pub name: String,
    /// The doc comment, if any, as the developer wrote it.
    pub doc: Option<String>,
    pub params: Vec<Param<'a>>,
    pub output: Output<'a>,
}

/// One parameter: it becomes a field of the arguments struct.
pub struct Param<'a> {
    pub ident: &'a Ident,
    pub ty: &'a Type,
    /// `#[doc]` attributes, moved onto the field.
    pub docs: Vec<&'a Attribute>,
}

/// What the function returns.
pub enum Output<'a> {
    /// A plain value (`()` when there is no return type).
    Value(Option<&'a Type>),
    /// A `Result<T, E>` (any type whose last path segment is `Result`); its error is
    /// rendered as untrusted data.
    Result(&'a Type),
}

impl<'a> ToolFn<'a> {
    /// Models `item`, recording an error for every parameter it cannot model.
    pub fn from_syn(cx: &mut Ctxt, item: &'a ItemFn) -> ToolFn<'a> {
        let mut params = Vec::new();
        for input in &item.sig.inputs {
            match input {
                FnArg::Receiver(receiver) => cx.error_spanned_by(
                    receiver.self_token,
                    "#[tool] goes on a free function, not a method: remove `self` and pass what the tool needs as parameters or through a `static`/`OnceLock`",
                ),
                FnArg::Typed(typed) => match &*typed.pat {
                    Pat::Ident(pat) if pat.by_ref.is_none() && pat.subpat.is_none() => {
                        params.push(Param {
                            ident: &pat.ident,
                            ty: &typed.ty,
                            docs: typed.attrs.iter().filter(|a| a.path().is_ident("doc")).collect(),
                        });
                    }
                    other => cx.error_spanned_by(
                        other,
                        "tool parameters must be plain names, because each becomes a named field of the arguments the model sends: write `name: Type` and destructure inside the function",
                    ),
                },
            }
        }
        let output = match &item.sig.output {
            ReturnType::Default => Output::Value(None),
            ReturnType::Type(_, ty) if is_result(ty) => Output::Result(ty),
            ReturnType::Type(_, ty) => Output::Value(Some(ty)),
        };
        ToolFn {
            item,
            name: unraw(&item.sig.ident),
            doc: doc_text(&item.attrs),
            params,
            output,
        }
    }
}

/// The identifier's text without a leading `r#`.
pub fn unraw(ident: &Ident) -> String {
    let text = ident.to_string();
    text.strip_prefix("r#").map_or(text.clone(), str::to_owned)
}

fn is_result(ty: &Type) -> bool {
    match ty {
        Type::Path(path) if path.qself.is_none() => path
            .path
            .segments
            .last()
            .is_some_and(|segment| segment.ident == "Result"),
        Type::Group(group) => is_result(&group.elem),
        Type::Paren(paren) => is_result(&paren.elem),
        _ => false,
    }
}

/// The text of the `///` comments on an item: one leading space per line removed,
/// lines joined with newlines, surrounding blank lines dropped.
fn doc_text(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .filter_map(|attr| match &attr.meta {
            syn::Meta::NameValue(pair) => match &pair.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(text),
                    ..
                }) => Some(text.value()),
                _ => None,
            },
            _ => None,
        })
        .flat_map(|text| {
            text.lines()
                .map(|line| line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    let text = lines.join("\n");
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    #[test]
    fn parses_the_head_and_keeps_the_body_as_written() {
        let body = quote! {{ let page = fetch(&url).await?; Ok(page) }};
        let item = ItemFn::parse(quote! {
            /// Fetches a web page.
            pub async fn fetch_page(url: String) -> Result<String, Error> #body
        })
        .unwrap();
        assert_eq!(item.sig.ident, "fetch_page");
        assert!(item.sig.asyncness.is_some());
        assert_eq!(item.sig.inputs.len(), 1);
        assert_eq!(item.attrs.len(), 1);
        assert!(matches!(item.vis, Visibility::Public(_)));
        assert_eq!(item.body.to_string(), body.to_string());
    }

    #[test]
    fn a_body_rustc_would_reject_is_left_for_rustc_to_report() {
        // The macro never reads the body, so rustc reports its errors where they are.
        let item = ItemFn::parse(quote!(fn broken() { let = ; })).unwrap();
        assert_eq!(item.body.to_string(), quote!({ let = ; }).to_string());
    }

    #[test]
    fn anything_but_a_function_with_a_body_is_refused() {
        for item in [
            quote!(),
            quote! { struct Mailer; },
            quote! { struct Mailer { to: String } },
            quote! { fn declared_only(to: String); },
            quote! { const fn_like: fn() = || {}; },
            quote! { fn extra() {} fn tokens() {} },
        ] {
            let error = ItemFn::parse(item.clone())
                .err()
                .unwrap_or_else(|| panic!("accepted: {item}"));
            assert_eq!(
                error.to_string(),
                "#[tool] goes on a free `fn` or `async fn`"
            );
        }
    }
}
