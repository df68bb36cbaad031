//! `#[derive(ClosedVocabulary)]` on an enum of unit variants: the model selects one of
//! the variants' names and can write nothing else. It implements `Deserialize` (exactly
//! those names), `JsonSchema` (a string `enum` of them) and `ClosedVocabulary`.
//!
//! `#[vocabulary(rename_all = "snake_case")]` on the enum and `#[vocabulary(rename =
//! "…")]` on a variant change the names; `#[vocabulary(crate = "…")]` names tooltrust for
//! crates that re-export it.
//!
//! On a newtype over a string, `#[vocabulary(pattern = "^[A-Z]{2}[0-9]{4}$")]` makes the
//! texts the pattern matches the vocabulary. The pattern must be anchored at both ends and
//! bound the length (the rule the runtime applies to run-time tools' schemas, shared
//! through `tooltrust-internals`); any other pattern lets the model write text, and is a
//! compile error spanned at the pattern.

use proc_macro2::TokenStream;
use quote::quote;
use syn::punctuated::Punctuated;
use syn::{Attribute, Data, DeriveInput, Fields, LitStr, Meta, Token};

use tooltrust_internals::pattern::{CLOSED_PATTERN_RULE, closed_pattern_len};

use crate::attr::{crate_path, krate_tokens};
use crate::ctxt::Ctxt;

/// Expands the derive.
pub fn derive(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(error) => return error.to_compile_error(),
    };
    let mut cx = Ctxt::default();
    let options = Options::parse(&mut cx, &input.attrs, true);
    if let Some(pattern) = &options.pattern {
        return patterned(cx, &input, &options, pattern);
    }
    let variants = match &input.data {
        Data::Enum(data) => data.variants.iter().collect::<Vec<_>>(),
        Data::Struct(data) => {
            cx.error_spanned_by(
                data.struct_token,
                "ClosedVocabulary derives only for enums of unit variants, or a newtype over a string with `#[vocabulary(pattern = \"^…$\")]`: a struct holds values the model would write; list the choices as an enum (`enum Product { Kettle, Toaster }`)",
            );
            Vec::new()
        }
        Data::Union(data) => {
            cx.error_spanned_by(
                data.union_token,
                "ClosedVocabulary derives only for enums of unit variants",
            );
            Vec::new()
        }
    };
    if !input.generics.params.is_empty() {
        cx.error_spanned_by(
            &input.generics,
            "a closed vocabulary cannot be generic: list its values as unit variants",
        );
    }
    if matches!(input.data, Data::Enum(_)) && variants.is_empty() {
        cx.error_spanned_by(
            &input.ident,
            "a closed vocabulary needs at least one variant for the model to select",
        );
    }
    let mut names = Vec::new();
    for variant in &variants {
        if !matches!(variant.fields, Fields::Unit) {
            cx.error_spanned_by(
                &variant.fields,
                format!(
                    "variant `{}` carries data, which the model would write: a closed vocabulary's variants are unit variants (`{}`); put the data in the tool that reads the choice",
                    variant.ident, variant.ident
                ),
            );
        }
        let own = Options::parse(&mut cx, &variant.attrs, false);
        let name = own.rename.map_or_else(
            || options.rename_all.apply(&variant.ident.to_string()),
            |rename| rename.value(),
        );
        if names.iter().any(|(taken, _)| *taken == name) {
            cx.error_spanned_by(
                &variant.ident,
                format!("two variants are named `{name}` for the model; rename one"),
            );
        }
        names.push((name, &variant.ident));
    }
    if cx.has_errors() {
        return cx.into_compile_errors();
    }
    let krate = krate_tokens(options.krate.as_ref());
    let private = quote!(#krate::__private);
    let ident = &input.ident;
    let type_name = ident.to_string();
    let texts: Vec<&String> = names.iter().map(|(name, _)| name).collect();
    let variant_idents = names.iter().map(|(_, ident)| *ident);
    let expecting = format!(
        "one of {}",
        texts
            .iter()
            .map(|name| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    quote! {
        impl<'de> #private::serde::Deserialize<'de> for #ident {
            fn deserialize<D: #private::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::core::result::Result<Self, D::Error> {
                struct Visitor;
                impl<'de> #private::serde::de::Visitor<'de> for Visitor {
                    type Value = #ident;
                    fn expecting(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                        f.write_str(#expecting)
                    }
                    fn visit_str<E: #private::serde::de::Error>(
                        self,
                        value: &str,
                    ) -> ::core::result::Result<#ident, E> {
                        match value {
                            #(#texts => ::core::result::Result::Ok(#ident::#variant_idents),)*
                            other => ::core::result::Result::Err(E::unknown_variant(other, &[#(#texts),*])),
                        }
                    }
                }
                deserializer.deserialize_str(Visitor)
            }
        }

        impl #private::schemars::JsonSchema for #ident {
            fn schema_name() -> #private::Cow<'static, str> {
                #private::Cow::Borrowed(#type_name)
            }

            fn json_schema(
                _: &mut #private::schemars::SchemaGenerator,
            ) -> #private::schemars::Schema {
                #private::schemars::json_schema!({
                    "type": "string",
                    "enum": [#(#texts),*],
                })
            }
        }

        impl #private::ClosedVocabulary for #ident {}
    }
}

/// The derive on a newtype over a string whose texts match `pattern`.
fn patterned(
    mut cx: Ctxt,
    input: &DeriveInput,
    options: &Options,
    pattern: &LitStr,
) -> TokenStream {
    let newtype = match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Unnamed(fields) if fields.unnamed.len() == 1 => Some(()),
            _ => None,
        },
        _ => None,
    };
    if newtype.is_none() {
        cx.error_spanned_by(
            pattern,
            "`pattern` applies to a newtype over a string (`struct Code(String);`): the texts the pattern matches are the vocabulary",
        );
    }
    if !input.generics.params.is_empty() {
        cx.error_spanned_by(
            &input.generics,
            "a closed vocabulary cannot be generic: wrap a `String`",
        );
    }
    if cx.has_errors() {
        return cx.into_compile_errors();
    }
    // An open pattern is reported alone: the impls are still emitted, so that the tools
    // taking the type report nothing more.
    if let Err(error) = closed_pattern_len(&pattern.value()) {
        cx.error_spanned_by(
            pattern,
            format!(
                "this pattern does not close a vocabulary: {error}; the model could write text of its own here, and a `trusted, instruction` tool would return it with your authority. Remedy: {CLOSED_PATTERN_RULE}; or list the choices as an enum of unit variants"
            ),
        );
    }
    let errors = cx.has_errors().then(|| cx.into_compile_errors());
    let krate = krate_tokens(options.krate.as_ref());
    let private = quote!(#krate::__private);
    let ident = &input.ident;
    let type_name = ident.to_string();
    let expecting = format!("a string matching `{}`", pattern.value());
    quote! {
        #errors

        impl<'de> #private::serde::Deserialize<'de> for #ident {
            fn deserialize<D: #private::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::core::result::Result<Self, D::Error> {
                static PATTERN: #private::VocabularyPattern = #private::VocabularyPattern::new(#pattern);
                let text: ::std::string::String = #private::serde::Deserialize::deserialize(deserializer)?;
                if PATTERN.matches(&text) {
                    ::core::result::Result::Ok(#ident(::core::convert::From::from(text)))
                } else {
                    ::core::result::Result::Err(<D::Error as #private::serde::de::Error>::invalid_value(
                        #private::serde::de::Unexpected::Str(&text),
                        &#expecting,
                    ))
                }
            }
        }

        impl #private::schemars::JsonSchema for #ident {
            fn schema_name() -> #private::Cow<'static, str> {
                #private::Cow::Borrowed(#type_name)
            }

            fn json_schema(
                _: &mut #private::schemars::SchemaGenerator,
            ) -> #private::schemars::Schema {
                #private::schemars::json_schema!({
                    "type": "string",
                    "pattern": #pattern,
                })
            }
        }

        impl #private::ClosedVocabulary for #ident {}
    }
}

/// `#[vocabulary(...)]` options.
#[derive(Default)]
struct Options {
    rename_all: RenameAll,
    rename: Option<LitStr>,
    krate: Option<syn::Path>,
    pattern: Option<LitStr>,
}

impl Options {
    fn parse(cx: &mut Ctxt, attrs: &[Attribute], container: bool) -> Options {
        let mut options = Options::default();
        for attr in attrs
            .iter()
            .filter(|attr| attr.path().is_ident("vocabulary"))
        {
            let metas = match attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
            {
                Ok(metas) => metas,
                Err(error) => {
                    cx.syn_error(error);
                    continue;
                }
            };
            for meta in metas {
                let text = match &meta {
                    Meta::NameValue(pair) => match &pair.value {
                        syn::Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Str(text),
                            ..
                        }) => Some(text.clone()),
                        _ => None,
                    },
                    _ => None,
                };
                match (
                    meta.path().get_ident().map(ToString::to_string).as_deref(),
                    text,
                ) {
                    (Some("crate"), _) if container => {
                        if let Some(path) = crate_path(cx, &meta, options.krate.is_some()) {
                            options.krate = Some(path);
                        }
                    }
                    (Some("rename_all"), Some(text)) if container => {
                        match RenameAll::of(&text.value()) {
                            Some(rule) => options.rename_all = rule,
                            None => cx.error_spanned_by(
                                &text,
                                "unknown `rename_all` rule; expected one of `lowercase`, `UPPERCASE`, `snake_case`, `SCREAMING_SNAKE_CASE`, `kebab-case`, `camelCase`, `PascalCase`",
                            ),
                        }
                    }
                    (Some("rename"), Some(text)) if !container => options.rename = Some(text),
                    (Some("pattern"), Some(text)) if container => options.pattern = Some(text),
                    _ => cx.error_spanned_by(
                        &meta,
                        if container {
                            "expected `rename_all = \"…\"`, `pattern = \"…\"` or `crate = \"…\"` on the type"
                        } else {
                            "expected `rename = \"…\"` on a variant"
                        },
                    ),
                }
            }
        }
        options
    }
}

/// How variant names become the model's names.
#[derive(Default, Clone, Copy)]
enum RenameAll {
    #[default]
    None,
    Lower,
    Upper,
    Snake,
    ScreamingSnake,
    Kebab,
    Camel,
    Pascal,
}

impl RenameAll {
    fn of(text: &str) -> Option<RenameAll> {
        Some(match text {
            "lowercase" => RenameAll::Lower,
            "UPPERCASE" => RenameAll::Upper,
            "snake_case" => RenameAll::Snake,
            "SCREAMING_SNAKE_CASE" => RenameAll::ScreamingSnake,
            "kebab-case" => RenameAll::Kebab,
            "camelCase" => RenameAll::Camel,
            "PascalCase" => RenameAll::Pascal,
            _ => return None,
        })
    }

    /// Renames a PascalCase variant name.
    fn apply(self, variant: &str) -> String {
        let words = || {
            let mut words: Vec<String> = Vec::new();
            for c in variant.chars() {
                if c.is_uppercase() || words.is_empty() {
                    words.push(String::new());
                }
                if let Some(word) = words.last_mut() {
                    word.push(c);
                }
            }
            words
        };
        let lower = |words: Vec<String>, sep: &str| {
            words
                .iter()
                .map(|w| w.to_lowercase())
                .collect::<Vec<_>>()
                .join(sep)
        };
        match self {
            RenameAll::None | RenameAll::Pascal => variant.to_owned(),
            RenameAll::Lower => variant.to_lowercase(),
            RenameAll::Upper => variant.to_uppercase(),
            RenameAll::Snake => lower(words(), "_"),
            RenameAll::ScreamingSnake => lower(words(), "_").to_uppercase(),
            RenameAll::Kebab => lower(words(), "-"),
            RenameAll::Camel => {
                let mut chars = variant.chars();
                chars.next().map_or_else(String::new, |first| {
                    first.to_lowercase().chain(chars).collect()
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_rules() {
        assert_eq!(RenameAll::Snake.apply("ElectricKettle"), "electric_kettle");
        assert_eq!(
            RenameAll::ScreamingSnake.apply("ElectricKettle"),
            "ELECTRIC_KETTLE"
        );
        assert_eq!(RenameAll::Kebab.apply("ElectricKettle"), "electric-kettle");
        assert_eq!(RenameAll::Camel.apply("ElectricKettle"), "electricKettle");
        assert_eq!(RenameAll::Lower.apply("ElectricKettle"), "electrickettle");
        assert_eq!(RenameAll::None.apply("ElectricKettle"), "ElectricKettle");
    }
}
