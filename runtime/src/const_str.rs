//! String equality usable in constant evaluation, where `==` on `str` is not.

/// Whether `a` and `b` hold the same bytes.
pub(crate) const fn eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
