//! Numbers in canonical form: the ECMAScript spelling of the nearest double.

use serde_json::Number;

/// The largest magnitude below which every integer is a double.
const EXACT: u64 = 1 << 53;

/// Appends a JSON number, as serde_json holds it.
pub(crate) fn emit_number(out: &mut String, number: &Number) {
    if let Some(n) = number.as_u64() {
        emit_u64(out, n);
    } else if let Some(n) = number.as_i64() {
        emit_i64(out, n);
    } else {
        // serde_json never holds a non-finite number, so `as_f64` always answers.
        emit_f64(out, number.as_f64().unwrap_or(0.0));
    }
}

/// Appends a non-negative integer: its digits up to 2^53, beyond that the nearest double
/// (as the reference reads every number).
pub(crate) fn emit_u64(out: &mut String, n: u64) {
    if n <= EXACT {
        out.push_str(itoa::Buffer::new().format(n));
    } else {
        emit_f64(out, n as f64);
    }
}

/// Appends an integer: its digits up to ±2^53, beyond that the nearest double.
pub(crate) fn emit_i64(out: &mut String, n: i64) {
    if n.unsigned_abs() <= EXACT {
        out.push_str(itoa::Buffer::new().format(n));
    } else {
        emit_f64(out, n as f64);
    }
}

/// Appends a finite double in ECMAScript `Number.prototype.toString` form.
pub(crate) fn emit_f64(out: &mut String, double: f64) {
    // ECMAScript writes an integral double below 2^53 as its integer digits, and `-0` as
    // `0`; itoa is much faster than the general algorithm for these.
    if double.fract() == 0.0 && double.abs() <= EXACT as f64 {
        out.push_str(itoa::Buffer::new().format(double as i64));
    } else {
        out.push_str(ryu_js::Buffer::new().format_finite(double));
    }
}
