//! Lineages: which blocks influenced a call, shared with the scope rather than copied.

use std::fmt;
use std::sync::Arc;

use crate::id::Id;

/// Ids per shared chunk: a lineage copies at most this many, and shares the rest.
const CHUNK: usize = 64;

/// The blocks that influenced a call, in the order they entered its scope's context
/// (the whole context when the call was decided).
///
/// A scope's context only grows, so every lineage is a prefix of it: a lineage shares
/// the scope's ids in chunks instead of copying them, and a long session's calls do not
/// each pay for every block before them.
#[derive(Clone, Default)]
pub struct Lineage {
    chunks: Vec<Arc<[Id]>>,
    tail: Arc<[Id]>,
}

impl Lineage {
    /// How many blocks.
    pub fn len(&self) -> usize {
        self.chunks.len() * CHUNK + self.tail.len()
    }

    /// Whether no block influenced the call.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.tail.is_empty()
    }

    /// The block ids, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Id> {
        self.chunks
            .iter()
            .flat_map(|chunk| chunk.iter())
            .chain(self.tail.iter())
    }

    /// Whether block `id` is one of them.
    pub fn contains(&self, id: &Id) -> bool {
        self.iter().any(|known| known == id)
    }

    /// The block ids, copied.
    pub fn to_vec(&self) -> Vec<Id> {
        self.iter().cloned().collect()
    }
}

impl PartialEq for Lineage {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Lineage {}

impl fmt::Debug for Lineage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A scope's block ids in order, from which lineages are taken.
#[derive(Default)]
pub(crate) struct Ids {
    chunks: Vec<Arc<[Id]>>,
    tail: Vec<Id>,
}

impl Ids {
    pub(crate) fn push(&mut self, id: Id) {
        self.tail.push(id);
        if self.tail.len() == CHUNK {
            self.chunks.push(Arc::from(std::mem::take(&mut self.tail)));
        }
    }

    /// The lineage of a call decided now: every id so far.
    pub(crate) fn lineage(&self) -> Lineage {
        Lineage {
            chunks: self.chunks.clone(),
            tail: Arc::from(self.tail.as_slice()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lineage_is_every_id_so_far_and_stays_what_it_was() {
        let mut ids = Ids::default();
        let mut expected = Vec::new();
        let mut taken = Vec::new();
        for i in 0..(3 * CHUNK + 5) {
            taken.push((ids.lineage(), expected.clone()));
            let id = Id::new(format!("b{i}")).unwrap();
            ids.push(id.clone());
            expected.push(id);
        }
        for (lineage, then) in taken {
            assert_eq!(lineage.len(), then.len());
            assert_eq!(lineage.to_vec(), then);
            assert_eq!(lineage.is_empty(), then.is_empty());
        }
        let whole = ids.lineage();
        assert!(whole.contains(&expected[CHUNK + 1]));
        assert!(!whole.contains(&Id::new("elsewhere").unwrap()));
        assert_eq!(whole, ids.lineage());
    }
}
