//! The model of a tool function: its name, documentation, parameters and return type.

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use syn::parse::{ParseStream, Parser};
use syn::{Attribute, FnArg, Ident, Pat, ReturnType, Signature, Type, Visibility};

use tooltrust_internals::doc::{DocFragment, join_docs};

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
        const WHERE: &str = "#[tool] goes on a free `fn` or `async fn` (or on a method of an `impl` block marked #[toolbox])";
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

/// Where a tool function sits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A free function under `#[tool]`.
    Free,
    /// A method of a `#[toolbox]` impl block.
    Method,
}

/// A tool function as the expansion needs it.
pub struct ToolFn<'a> {
    pub item: &'a ItemFn,
    /// The function's name without `r#`.
    pub name: String,
    /// The doc comment, as the developer wrote it.
    pub doc: Doc,
    pub params: Vec<Param<'a>>,
    pub output: Output<'a>,
}

/// One parameter: an argument the model sends (a field of the arguments struct), or a
/// context the host supplies.
pub struct Param<'a> {
    pub ident: &'a Ident,
    pub ty: &'a Type,
    /// `#[doc]` attributes, moved onto the field.
    pub docs: Vec<&'a Attribute>,
    pub kind: ParamKind<'a>,
}

/// What fills a parameter.
pub enum ParamKind<'a> {
    /// The model, through the arguments JSON.
    Argument,
    /// The host, through the scope: `Context<T>`, with `T` here.
    Context(&'a Type),
}

/// What the function returns.
pub enum Output<'a> {
    /// A plain value (`()` when there is no return type).
    Value(Option<&'a Type>),
    /// A `Result<T, E>` (any type whose last path segment is `Result`); its error is
    /// rendered as untrusted data.
    Result(&'a Type),
}

/// A doc comment: the text of `///` lines and `#[doc = "…"]`, and any `#[doc = …]`
/// expression (`include_str!("…")`) kept for the compiler to expand.
pub struct Doc {
    fragments: Vec<Fragment>,
}

/// One `#[doc]` attribute. The compiler hands a `///` comment over as
/// `#[doc = " text"]`, the same tokens as an attribute written by hand, so literal text
/// is read as a `///` comment (by far the common case) and an expression as the
/// attribute it must be: rustdoc unindents the two kinds apart.
enum Fragment {
    Text(String),
    Expr(TokenStream),
}

impl Doc {
    fn of(attrs: &[Attribute]) -> Doc {
        let mut fragments = Vec::new();
        for attr in attrs.iter().filter(|attr| attr.path().is_ident("doc")) {
            if let syn::Meta::NameValue(pair) = &attr.meta {
                fragments.push(match &pair.value {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(text),
                        ..
                    }) => Fragment::Text(text.value()),
                    expr => Fragment::Expr(quote::quote!(#expr)),
                });
            }
        }
        Doc { fragments }
    }

    /// The text as rustdoc renders it, when the comment has no expression; `None` when
    /// it has none at all or only blank lines.
    pub fn text(&self) -> Option<String> {
        let fragments: Vec<DocFragment<'_>> = self
            .fragments
            .iter()
            .map(|fragment| match fragment {
                Fragment::Text(text) => Some(DocFragment::Sugared(text)),
                Fragment::Expr(_) => None,
            })
            .collect::<Option<_>>()?;
        let text = join_docs(&fragments);
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_owned())
    }

    /// Whether the comment holds an expression (its text is known only to the compiler).
    pub fn has_expr(&self) -> bool {
        self.fragments
            .iter()
            .any(|fragment| matches!(fragment, Fragment::Expr(_)))
    }

    /// A `&'static str` expression of the comment, joined as rustdoc joins it by the
    /// same `const fn`s (`private` is the path of tooltrust's `__private`), since an
    /// expression's text is known only once the compiler expands it.
    pub fn expr(&self, private: &TokenStream) -> TokenStream {
        let fragments = self.fragments.iter().map(|fragment| match fragment {
            Fragment::Text(text) => quote::quote!(#private::DocFragment::Sugared(#text)),
            Fragment::Expr(expr) => quote::quote!(#private::DocFragment::Raw(#expr)),
        });
        // A long included file takes the const evaluator millions of steps, which the
        // compiler would otherwise refuse as a likely infinite loop; the join ends.
        quote::quote!({
            #[allow(long_running_const_eval)]
            const DESCRIPTION: &str = {
                const FRAGMENTS: &[#private::DocFragment<'static>] = &[#(#fragments),*];
                const LEN: usize = #private::doc_len(FRAGMENTS);
                const BYTES: [u8; LEN] = #private::doc_join::<LEN>(FRAGMENTS);
                #private::doc_str(&BYTES)
            };
            DESCRIPTION
        })
    }
}

impl<'a> ToolFn<'a> {
    /// Models `item`, recording an error for every parameter it cannot model. A method
    /// must take `&self` first; a free function takes no receiver.
    pub fn from_syn(cx: &mut Ctxt, item: &'a ItemFn, place: Place) -> ToolFn<'a> {
        let mut params = Vec::new();
        let mut has_receiver = false;
        for input in &item.sig.inputs {
            match input {
                FnArg::Receiver(receiver) => {
                    has_receiver = true;
                    check_receiver(cx, receiver, place);
                }
                FnArg::Typed(typed) => match &*typed.pat {
                    Pat::Ident(pat) if pat.by_ref.is_none() && pat.subpat.is_none() => {
                        params.push(Param {
                            ident: &pat.ident,
                            ty: &typed.ty,
                            docs: typed.attrs.iter().filter(|a| a.path().is_ident("doc")).collect(),
                            kind: context_of(&typed.ty).map_or(ParamKind::Argument, ParamKind::Context),
                        });
                    }
                    other => cx.error_spanned_by(
                        other,
                        "tool parameters must be plain names, because each becomes a named field of the arguments the model sends: write `name: Type` and destructure inside the function",
                    ),
                },
            }
        }
        if place == Place::Method && !has_receiver {
            cx.error_spanned_by(
                &item.sig.ident,
                "a #[tool] method of a #[toolbox] takes `&self` first: the tool runs on the toolbox's value; make it `fn name(&self, …)`, or move it out of the impl block as a free `#[tool]` function",
            );
        }
        let output = match &item.sig.output {
            ReturnType::Default => Output::Value(None),
            ReturnType::Type(_, ty) if is_result(ty) => Output::Result(ty),
            ReturnType::Type(_, ty) => Output::Value(Some(ty)),
        };
        ToolFn {
            item,
            name: unraw(&item.sig.ident),
            doc: Doc::of(&item.attrs),
            params,
            output,
        }
    }

    /// The parameters the model fills.
    pub fn arguments(&self) -> impl Iterator<Item = &Param<'a>> {
        self.params
            .iter()
            .filter(|param| matches!(param.kind, ParamKind::Argument))
    }
}

fn check_receiver(cx: &mut Ctxt, receiver: &syn::Receiver, place: Place) {
    match place {
        Place::Free => cx.error_spanned_by(
            receiver.self_token,
            "#[tool] on a free function takes no `self`; for tools with state, put the methods in an `impl` block marked #[toolbox]",
        ),
        Place::Method => match &receiver.kind {
            syn::ReceiverKind::Reference(_, _, None) => {}
            syn::ReceiverKind::Reference(_, _, Some(_)) => cx.error_spanned_by(
                receiver,
                "a #[tool] method takes `&self`, not `&mut self`: calls run concurrently; keep what changes behind a `Mutex` or an atomic in the toolbox",
            ),
            _ => cx.error_spanned_by(
                receiver,
                "a #[tool] method takes `&self`: the registry shares the toolbox between calls (and runs them concurrently), so it cannot give it away",
            ),
        },
    }
}

/// `T` when `ty` is `Context<T>` (by its last path segment, so `tooltrust::Context<T>`
/// is one too).
fn context_of(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else {
        return None;
    };
    let segment = path.path.segments.last()?;
    if path.qself.is_some() || segment.ident != "Context" {
        return None;
    }
    match &segment.arguments {
        syn::PathArguments::AngleBracketed(args) if args.args.len() == 1 => {
            match args.args.first()? {
                syn::GenericArgument::Type(inner) => Some(inner),
                _ => None,
            }
        }
        _ => None,
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
    fn literal_docs_are_comments_and_expressions_are_attributes() {
        let item = ItemFn::parse(quote! {
            /// Title.
            #[doc = include_str!("policy.md")]
            fn f() {}
        })
        .unwrap();
        let doc = Doc::of(&item.attrs);
        assert_eq!(doc.text(), None, "an expression's text is the compiler's");
        let expr = doc.expr(&quote!(::tooltrust::__private)).to_string();
        assert!(
            expr.contains(r#"DocFragment :: Sugared (" Title.")"#),
            "{expr}"
        );
        assert!(
            expr.contains(r#"DocFragment :: Raw (include_str ! ("policy.md"))"#),
            "{expr}"
        );
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
                "#[tool] goes on a free `fn` or `async fn` (or on a method of an `impl` block marked #[toolbox])"
            );
        }
    }
}
