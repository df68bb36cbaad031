//! The rules that span the attribute and the function. Every rule runs, so that all
//! errors are reported together.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Safety, Type};

use crate::ast::{Output as Returns, ToolFn};
use crate::attr::{Attrs, Output, Trust};
use crate::ctxt::Ctxt;

/// What the expansion needs once every rule holds.
pub struct Checked {
    pub trust: Trust,
    pub output: Output,
    pub read_only: bool,
    pub name: String,
    pub description: Description,
}

/// Where the description comes from.
pub enum Description {
    /// A `&'static str` literal: `description = "…"`, or the doc comment's text.
    Text(TokenStream),
    /// The doc comment, which holds an expression (`include_str!`): joined at compile
    /// time by [`Doc::expr`](crate::ast::Doc::expr).
    DocExpr,
}

/// Applies every rule; `None` when any failed (the errors are in `cx`).
pub fn check(cx: &mut Ctxt, attrs: &Attrs, tool: &ToolFn<'_>) -> Option<Checked> {
    let trust = check_trust(cx, attrs);
    let output = attrs.output.map_or(Output::Data, |output| output.value);
    let name = check_name(cx, attrs, tool);
    let description = check_description(cx, attrs, tool);
    check_signature(cx, tool);
    check_param_types(cx, tool);
    if cx.has_errors() {
        return None;
    }
    Some(Checked {
        trust: trust?,
        output,
        read_only: attrs.read_only.is_some(),
        name: name?,
        description: description?,
    })
}

fn check_trust(cx: &mut Ctxt, attrs: &Attrs) -> Option<Trust> {
    let Some(trust) = attrs.trust else {
        cx.error_at(
            attrs.span,
            "#[tool] needs a trust: add `trusted` if you (or a system you vouch for) write the tool's output, or `untrusted` if outsiders can write any of it (web pages, emails, files, API responses)",
        );
        return None;
    };
    if let (Trust::Untrusted, Some(output)) = (trust.value, attrs.output)
        && output.value == Output::Instruction
    {
        cx.error_at(output.span, tooltrust_internals::UNTRUSTED_INSTRUCTION);
        cx.error_at(
            trust.span,
            "the tool is declared `untrusted` here; if you write every byte of its output yourself, declare it `trusted` instead",
        );
    }
    Some(trust.value)
}

fn check_name(cx: &mut Ctxt, attrs: &Attrs, tool: &ToolFn<'_>) -> Option<String> {
    let (name, span) = match &attrs.name {
        Some(literal) => (literal.value(), literal.span()),
        None => (tool.name.clone(), tool.item.sig.ident.span()),
    };
    if tooltrust_internals::is_valid_tool_name(&name) {
        return Some(name);
    }
    let source = if attrs.name.is_some() {
        "fix the name"
    } else {
        "rename the function or set `name = \"…\"`"
    };
    cx.error_at(
        span,
        format!(
            "invalid tool name {name:?}: providers accept only {}; {source}",
            tooltrust_internals::TOOL_NAME_RULE
        ),
    );
    None
}

fn check_description(cx: &mut Ctxt, attrs: &Attrs, tool: &ToolFn<'_>) -> Option<Description> {
    match (&attrs.description, tool.doc.text()) {
        (Some(literal), _) if literal.value().trim().is_empty() => {
            cx.error_spanned_by(
                literal,
                "the description is empty: say what the tool does, so that the model knows when to call it",
            );
            None
        }
        (Some(literal), _) => Some(Description::Text(quote!(#literal))),
        (None, Some(doc)) => Some(Description::Text(quote!(#doc))),
        // Known only once the compiler expands it; the registry refuses it if empty.
        (None, None) if tool.doc.has_expr() => Some(Description::DocExpr),
        (None, None) => {
            cx.error_spanned_by(
                &tool.item.sig.ident,
                "a tool needs a description for the model: add a `///` doc comment to the function, or `description = \"…\"` to #[tool(...)]",
            );
            None
        }
    }
}

fn check_signature(cx: &mut Ctxt, tool: &ToolFn<'_>) {
    let sig = &tool.item.sig;
    if !sig.generics.params.is_empty() {
        cx.error_spanned_by(
            &sig.generics,
            "a tool cannot be generic: the model calls it with JSON, so every parameter needs one concrete type; replace the type parameters with concrete types",
        );
    } else if let Some(clause) = &sig.generics.where_clause {
        cx.error_spanned_by(
            clause,
            "a tool cannot have a `where` clause: give its parameters concrete types",
        );
    }
    if let Some(constness) = &sig.constness {
        cx.error_spanned_by(constness, "a tool cannot be a `const fn`: remove `const`");
    }
    if let Safety::Unsafe(token) = &sig.safety {
        cx.error_spanned_by(
            token,
            "a tool cannot be an `unsafe fn`: the model cannot uphold its safety contract; make it safe and keep the `unsafe` block inside",
        );
    }
    if let Some(abi) = &sig.abi {
        cx.error_spanned_by(abi, "a tool cannot have an `extern` ABI: remove it");
    }
    if let Some(variadic) = &sig.variadic {
        cx.error_spanned_by(variadic, "a tool cannot be variadic");
    }
    if let Returns::Value(Some(ty)) | Returns::Result(ty) = &tool.output
        && contains_impl_trait(ty)
    {
        cx.error_spanned_by(
            ty,
            "a tool cannot return `impl Trait`: name the concrete type, so that its trust can be checked",
        );
    }
}

fn check_param_types(cx: &mut Ctxt, tool: &ToolFn<'_>) {
    for param in &tool.params {
        match param.ty {
            Type::Reference(reference) => cx.error_spanned_by(
                reference,
                format!(
                    "tool parameter `{}` borrows: arguments are deserialized from the model's JSON, so parameters must own their data; use an owned type (`String` for `&str`, `Vec<T>` for `&[T]`)",
                    param.ident
                ),
            ),
            ty if contains_impl_trait(ty) => cx.error_spanned_by(
                ty,
                format!(
                    "tool parameter `{}` has an `impl Trait` type: arguments are deserialized from JSON, so each needs a concrete type",
                    param.ident
                ),
            ),
            _ => {}
        }
    }
}

fn contains_impl_trait(ty: &Type) -> bool {
    match ty {
        Type::ImplTrait(_) => true,
        Type::Group(group) => contains_impl_trait(&group.elem),
        Type::Paren(paren) => contains_impl_trait(&paren.elem),
        Type::Path(path) => path.path.segments.iter().any(|segment| {
            matches!(&segment.arguments, syn::PathArguments::AngleBracketed(args)
                if args.args.iter().any(|arg| matches!(arg, syn::GenericArgument::Type(t) if contains_impl_trait(t))))
        }),
        _ => false,
    }
}
