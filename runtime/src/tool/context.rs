//! What the host supplies per scope (the caller's identity, credentials, a database
//! pool): values a tool receives as `Context<T>` parameters. They are never part of the
//! arguments the model writes, never in a schema, never hashed, never rendered and never
//! recorded; a tool that asks for a context its scope lacks fails before it runs.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A value of type `T` the host supplied to the scope (see
/// [`Scope::with_context`](crate::Scope::with_context)). Cheap to clone; derefs to `T`.
pub struct Context<T: ?Sized>(Arc<T>);

impl<T: ?Sized> Context<T> {
    /// The shared value.
    pub fn into_arc(self) -> Arc<T> {
        self.0
    }
}

impl<T: ?Sized> Clone for Context<T> {
    fn clone(&self) -> Self {
        Context(Arc::clone(&self.0))
    }
}

impl<T: ?Sized> Deref for Context<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

/// Prints the type, never the value: contexts hold credentials.
impl<T: ?Sized> fmt::Debug for Context<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Context<{}>(..)", type_name::<T>())
    }
}

/// The contexts of one scope, one value per type.
#[derive(Clone, Default)]
pub struct Contexts {
    values: HashMap<TypeId, (&'static str, Arc<dyn Any + Send + Sync>)>,
}

impl Contexts {
    /// No contexts.
    pub fn new() -> Self {
        Self::default()
    }

    /// Supplies `value` as the context of type `T`, replacing an earlier one.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.values
            .insert(TypeId::of::<T>(), (type_name::<T>(), Arc::new(value)));
    }

    /// The context of type `T`, if supplied.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<Context<T>> {
        let (_, value) = self.values.get(&TypeId::of::<T>())?;
        Arc::clone(value).downcast::<T>().ok().map(Context)
    }

    /// Whether no context is supplied.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// Lists the types, never the values.
impl fmt::Debug for Contexts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.values.values().map(|(name, _)| *name).collect();
        names.sort_unstable();
        f.debug_set().entries(names).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct User(&'static str);

    #[test]
    fn one_value_per_type_and_debug_shows_no_value() {
        let mut contexts = Contexts::new();
        assert!(contexts.get::<User>().is_none());
        contexts.insert(User("ann"));
        contexts.insert(7u32);
        assert_eq!(*contexts.get::<User>().unwrap(), User("ann"));
        contexts.insert(User("bob"));
        assert_eq!(*contexts.get::<User>().unwrap(), User("bob"));
        let shown = format!("{contexts:?} {:?}", contexts.get::<User>().unwrap());
        assert!(shown.contains("User") && !shown.contains("bob"), "{shown}");
    }
}
