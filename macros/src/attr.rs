//! The grammar of `#[tool(...)]`:
//! `trusted | untrusted`, `data | instruction`, `read_only`, `name = "…"`,
//! `description = "…"`, `crate = "…"`, separated by commas, each at most once.

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Lit, LitStr, Meta, Token};

use crate::ctxt::Ctxt;

/// Every key the attribute accepts, for "did you mean" and the list in errors.
const KEYS: &[&str] = &[
    "trusted",
    "untrusted",
    "data",
    "instruction",
    "read_only",
    "name",
    "description",
    "crate",
];

/// How far the tool's output may be trusted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Trust {
    Trusted,
    Untrusted,
}

/// Whether the tool's output is data or instruction.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Output {
    Data,
    Instruction,
}

/// A keyword together with the span of the token that declared it.
#[derive(Clone, Copy)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

/// The parsed attribute. Every field is `None` when not given; `check` decides what is
/// missing.
pub struct Attrs {
    pub trust: Option<Spanned<Trust>>,
    pub output: Option<Spanned<Output>>,
    pub read_only: Option<Span>,
    pub name: Option<LitStr>,
    pub description: Option<LitStr>,
    /// The path of the `tooltrust` crate, for crates that re-export it.
    pub krate: Option<syn::Path>,
    /// Where the attribute is, for errors about what it lacks.
    pub span: Span,
}

impl Attrs {
    /// Parses the attribute's arguments, recording every error.
    pub fn parse(cx: &mut Ctxt, args: TokenStream) -> Attrs {
        let mut attrs = Attrs {
            trust: None,
            output: None,
            read_only: None,
            name: None,
            description: None,
            krate: None,
            span: Span::call_site(),
        };
        let metas = match Punctuated::<Meta, Token![,]>::parse_terminated.parse2(args) {
            Ok(metas) => metas,
            Err(error) => {
                cx.syn_error(error);
                return attrs;
            }
        };
        for meta in metas {
            attrs.apply(cx, meta);
        }
        attrs
    }

    fn apply(&mut self, cx: &mut Ctxt, meta: Meta) {
        if meta.path().is_ident("crate") {
            if let Some(path) = crate_path(cx, &meta, self.krate.is_some()) {
                self.krate = Some(path);
            }
            return;
        }
        let Some(key) = meta.path().get_ident().map(ToString::to_string) else {
            cx.error_spanned_by(meta.path(), unknown_key_message(&path_text(meta.path())));
            return;
        };
        match (key.as_str(), &meta) {
            ("trusted" | "untrusted", Meta::Path(path)) => {
                let value = if key == "trusted" {
                    Trust::Trusted
                } else {
                    Trust::Untrusted
                };
                let span = path_span(path);
                match self.trust {
                    Some(previous) if previous.value == value => {
                        cx.error_at(span, format!("duplicate `{key}`; declare it once"));
                    }
                    Some(previous) => {
                        cx.error_at(
                            span,
                            "a tool is either `trusted` or `untrusted`, not both; keep the one that describes who writes its output",
                        );
                        cx.error_at(previous.span, "the other trust is declared here");
                    }
                    None => self.trust = Some(Spanned { value, span }),
                }
            }
            ("data" | "instruction", Meta::Path(path)) => {
                let value = if key == "data" {
                    Output::Data
                } else {
                    Output::Instruction
                };
                let span = path_span(path);
                match self.output {
                    Some(previous) if previous.value == value => {
                        cx.error_at(span, format!("duplicate `{key}`; declare it once"));
                    }
                    Some(previous) => {
                        cx.error_at(
                            span,
                            "a tool's output is either `data` or `instruction`, not both; remove one",
                        );
                        cx.error_at(previous.span, "the other output type is declared here");
                    }
                    None => self.output = Some(Spanned { value, span }),
                }
            }
            ("read_only", Meta::Path(path)) => {
                if self.read_only.is_some() {
                    cx.error_spanned_by(path, "duplicate `read_only`; declare it once");
                } else {
                    self.read_only = Some(path_span(path));
                }
            }
            ("name" | "description", Meta::NameValue(pair)) => {
                let Some(text) = string_literal(&pair.value) else {
                    cx.error_spanned_by(
                        &pair.value,
                        format!("`{key}` takes a string literal: `{key} = \"…\"`"),
                    );
                    return;
                };
                let slot = if key == "name" {
                    &mut self.name
                } else {
                    &mut self.description
                };
                if slot.is_some() {
                    cx.error_spanned_by(&pair.path, format!("duplicate `{key}`; declare it once"));
                } else {
                    *slot = Some(text);
                }
            }
            ("name" | "description", _) => cx.error_spanned_by(
                &meta,
                format!("`{key}` takes a string literal: `{key} = \"…\"`"),
            ),
            ("trusted" | "untrusted" | "data" | "instruction" | "read_only", _) => cx
                .error_spanned_by(
                    &meta,
                    format!("`{key}` is a bare keyword: write `{key}` without a value"),
                ),
            _ => cx.error_spanned_by(meta.path(), unknown_key_message(&key)),
        }
    }
}

/// Parses `crate = "path::to::tooltrust"`, recording what is wrong with it.
pub fn crate_path(cx: &mut Ctxt, meta: &Meta, duplicate: bool) -> Option<syn::Path> {
    let Meta::NameValue(pair) = meta else {
        cx.error_spanned_by(
            meta,
            "`crate` takes the path of tooltrust as a string: `crate = \"my_crate::tooltrust\"`",
        );
        return None;
    };
    if duplicate {
        cx.error_spanned_by(&pair.path, "duplicate `crate`; declare it once");
        return None;
    }
    let Some(text) = string_literal(&pair.value) else {
        cx.error_spanned_by(
            &pair.value,
            "`crate` takes the path of tooltrust as a string: `crate = \"my_crate::tooltrust\"`",
        );
        return None;
    };
    match text.parse::<syn::Path>() {
        Ok(path) => Some(path),
        Err(_) => {
            cx.error_spanned_by(
                &text,
                format!("`{}` is not a path: write the path through which your crate reaches tooltrust, like `my_crate::tooltrust`", text.value()),
            );
            None
        }
    }
}

/// `crate`'s path as generated code names it: the given path, or `::tooltrust`.
pub fn krate_tokens(krate: Option<&syn::Path>) -> TokenStream {
    match krate {
        Some(path) => quote::quote!(#path),
        None => quote::quote!(::tooltrust),
    }
}

fn string_literal(expr: &Expr) -> Option<LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(text),
            ..
        }) => Some(text.clone()),
        _ => None,
    }
}

fn path_span(path: &syn::Path) -> Span {
    path.get_ident()
        .map_or_else(Span::call_site, syn::Ident::span)
}

fn path_text(path: &syn::Path) -> String {
    path.segments
        .iter()
        .map(|segment| segment.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

fn unknown_key_message(key: &str) -> String {
    let suggestion = KEYS
        .iter()
        .map(|candidate| (edit_distance(key, candidate), candidate))
        .filter(|(distance, _)| *distance <= 3)
        .min()
        .map(|(_, candidate)| format!("did you mean `{candidate}`? "))
        .unwrap_or_default();
    format!(
        "unknown key `{key}` in #[tool(...)]; {suggestion}expected one of: {}",
        KEYS.iter()
            .map(|key| format!("`{key}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Levenshtein distance, for suggestions.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_nearest_key() {
        assert!(unknown_key_message("readonly").contains("did you mean `read_only`?"));
        assert!(unknown_key_message("trust").contains("did you mean `trusted`?"));
        assert!(!unknown_key_message("zzzzzzzzzz").contains("did you mean"));
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
