//! Collects errors so that all of them are reported together.

use proc_macro2::TokenStream;
use quote::ToTokens;
use std::fmt::Display;

/// The errors found so far.
#[derive(Default)]
pub struct Ctxt {
    errors: Vec<syn::Error>,
}

impl Ctxt {
    /// Records an error spanning `tokens`.
    pub fn error_spanned_by<T: ToTokens, M: Display>(&mut self, tokens: T, message: M) {
        self.errors.push(syn::Error::new_spanned(tokens, message));
    }

    /// Records an error at `span`.
    pub fn error_at<M: Display>(&mut self, span: proc_macro2::Span, message: M) {
        self.errors.push(syn::Error::new(span, message));
    }

    /// Records a parse error.
    pub fn syn_error(&mut self, error: syn::Error) {
        self.errors.push(error);
    }

    /// Whether anything went wrong.
    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// The errors as `compile_error!` invocations.
    pub fn into_compile_errors(self) -> TokenStream {
        self.errors
            .iter()
            .map(syn::Error::to_compile_error)
            .collect()
    }
}
