//! Canonical text of a `serde_json::Value` that is already parsed.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::number::emit_number;
use super::string::{cmp_utf16, emit_string};

/// The six kinds of JSON value, as error messages name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    pub(crate) fn of(value: &Value) -> Kind {
        match value {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Bool,
            Value::Number(_) => Kind::Number,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }

    /// "an object", "a string"…
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Array => "an array",
            Kind::Object => "an object",
        }
    }
}

/// How an error message names a JSON value's type ("an object", "a string"…).
pub(crate) fn type_name(value: &Value) -> &'static str {
    Kind::of(value).name()
}

/// Appends the canonical text of `value` to `out`.
///
/// serde_json's map iterates in UTF-8 order (or insertion order under its
/// `preserve_order` feature), and UTF-16 order differs from UTF-8 order only when keys
/// mix U+E000..U+FFFF with astral characters. So a first pass writes members as the map
/// iterates them, checking the order as it goes, and only when some map was out of
/// UTF-16 order does a second pass, over what the first one wrote, sort every object.
pub(crate) fn write_value(out: &mut String, value: &Value) {
    let start = out.len();
    let mut order = Order::default();
    emit_value(out, value, &mut order);
    if order.misordered {
        out.truncate(start);
        let mut sorted = Order {
            sort: true,
            misordered: false,
        };
        emit_value(out, value, &mut sorted);
    }
}

#[derive(Debug, Default)]
struct Order {
    sort: bool,
    misordered: bool,
}

fn emit_value(out: &mut String, value: &Value, order: &mut Order) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => emit_number(out, number),
        Value::String(text) => emit_string(out, text),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                emit_value(out, item, order);
            }
            out.push(']');
        }
        Value::Object(map) => emit_object(out, map, order),
    }
}

fn emit_object(out: &mut String, map: &Map<String, Value>, order: &mut Order) {
    if order.misordered {
        // This pass is discarded; the sorted one will write the text.
        return;
    }
    out.push('{');
    if order.sort {
        let mut members: Vec<(&String, &Value)> = map.iter().collect();
        members.sort_unstable_by(|a, b| cmp_utf16(a.0, b.0));
        for (index, (key, item)) in members.into_iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            emit_member(out, key, item, order);
        }
    } else {
        let mut previous: Option<&str> = None;
        for (key, item) in map {
            if let Some(previous) = previous {
                if cmp_utf16(previous, key) != Ordering::Less {
                    order.misordered = true;
                }
                out.push(',');
            }
            emit_member(out, key, item, order);
            previous = Some(key);
        }
    }
    out.push('}');
}

fn emit_member(out: &mut String, key: &str, item: &Value, order: &mut Order) {
    emit_string(out, key);
    out.push(':');
    emit_value(out, item, order);
}
