//! `tooltrust conform PATH...`: runs conformance vectors in the shared formats.
//!
//! - a tool-call vector file: a JSON array of objects with `tool` and `args_json`; each
//!   entry's `canonical` and `checksum` must be reproduced exactly, and an entry flagged
//!   `args_unrepresentable` must be refused as unrepresentable;
//! - an envelope vector file: a JSON array of objects with `kind`, `input`, `rendered`;
//! - an RFC 8785 directory: `input/NAME.json` must canonicalise to `output/NAME.json`.
//!
//! One entry is one case. A case passes only when every field it has was checked and
//! matched; an entry of a shape or kind this command does not know fails, it is never
//! skipped. Renderings are checked through [`render`], the one place where renderers plug
//! in; until a kind has one, an envelope entry of that kind fails ("no renderer"), and the
//! `rendered*` fields of tool-call vectors are reported as not yet checked.

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

use serde_json::{Map, Value};
use tooltrust::{CallErrorReason, JsonError, ToolCall, canonical_json, parse_strict};

/// What [`run`] found.
#[derive(Debug, Default)]
pub struct Report {
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed.
    pub failed: usize,
    /// Fields present in the vectors that nothing can check yet, by description.
    pub unchecked: Vec<(String, usize)>,
}

impl Report {
    fn note_unchecked(&mut self, what: &str) {
        match self.unchecked.iter_mut().find(|(known, _)| known == what) {
            Some((_, count)) => *count += 1,
            None => self.unchecked.push((what.to_owned(), 1)),
        }
    }
}

/// Checks every path, printing each failing case as it is found and the totals at the
/// end; `Ok(true)` when nothing failed.
pub fn run(paths: &[impl AsRef<Path>], out: &mut impl Write) -> io::Result<bool> {
    let mut report = Report::default();
    for path in paths {
        let path = path.as_ref();
        for case in cases_of(path) {
            let outcome = case.check(&mut report);
            if outcome.mismatches.is_empty() {
                report.passed += 1;
            } else {
                report.failed += 1;
                write_failure(out, &case.label, &outcome.mismatches)?;
            }
        }
    }
    for (what, count) in &report.unchecked {
        writeln!(out, "not checked yet: {what} ({count} vectors)")?;
    }
    writeln!(out, "{} passed, {} failed", report.passed, report.failed)?;
    Ok(report.failed == 0)
}

fn write_failure(out: &mut impl Write, label: &str, mismatches: &[Mismatch]) -> io::Result<()> {
    writeln!(out, "FAIL {label}")?;
    for mismatch in mismatches {
        writeln!(out, "  {}:", mismatch.what)?;
        writeln!(out, "    expected: {}", mismatch.expected)?;
        writeln!(out, "    actual:   {}", mismatch.actual)?;
    }
    Ok(())
}

/// One field that did not match.
#[derive(Debug)]
struct Mismatch {
    what: String,
    expected: String,
    actual: String,
}

impl Mismatch {
    fn new(
        what: impl Into<String>,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) -> Self {
        Mismatch {
            what: what.into(),
            expected: expected.into(),
            actual: actual.into(),
        }
    }
}

#[derive(Debug, Default)]
struct Outcome {
    mismatches: Vec<Mismatch>,
}

impl Outcome {
    fn fail(&mut self, mismatch: Mismatch) {
        self.mismatches.push(mismatch);
    }

    /// Compares a text field, quoting both sides so that invisible characters show.
    fn compare(&mut self, what: &str, expected: &str, actual: &str) {
        if expected != actual {
            self.fail(Mismatch::new(what, quoted(expected), quoted(actual)));
        }
    }
}

fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}

/// One case to check.
struct Case {
    label: String,
    kind: CaseKind,
}

enum CaseKind {
    /// The path itself could not be read as vectors.
    Unreadable {
        reason: String,
    },
    ToolCall(Map<String, Value>),
    Envelope(Map<String, Value>),
    Jcs {
        input: Result<String, String>,
        output: Result<Vec<u8>, String>,
    },
    UnknownShape(Value),
}

impl Case {
    fn check(&self, report: &mut Report) -> Outcome {
        let mut outcome = Outcome::default();
        match &self.kind {
            CaseKind::Unreadable { reason } => {
                outcome.fail(Mismatch::new(
                    "vectors",
                    "a vector file or RFC 8785 directory",
                    reason,
                ));
            }
            CaseKind::ToolCall(entry) => check_tool_call(entry, report, &mut outcome),
            CaseKind::Envelope(entry) => check_envelope(entry, report, &mut outcome),
            CaseKind::Jcs { input, output } => check_jcs(input, output, &mut outcome),
            CaseKind::UnknownShape(entry) => outcome.fail(Mismatch::new(
                "shape",
                "an object with `args_json` (tool call) or `kind` (envelope)",
                entry.to_string(),
            )),
        }
        outcome
    }
}

/// The cases in a vector file or RFC 8785 directory.
fn cases_of(path: &Path) -> Vec<Case> {
    let shown = path.display().to_string();
    let unreadable = |reason: String| {
        vec![Case {
            label: shown.clone(),
            kind: CaseKind::Unreadable { reason },
        }]
    };
    if path.is_dir() {
        return jcs_cases(path).unwrap_or_else(unreadable);
    }
    let text = match fs::read(path).map(String::from_utf8) {
        Ok(Ok(text)) => text,
        Ok(Err(_)) => return unreadable("not UTF-8 text".into()),
        Err(error) => return unreadable(format!("cannot read: {error}")),
    };
    let entries = match parse_strict(&text) {
        Ok(Value::Array(entries)) if !entries.is_empty() => entries,
        Ok(Value::Array(_)) => return unreadable("an empty array: no vectors".into()),
        Ok(_) => return unreadable("JSON, but not an array of vectors".into()),
        Err(error) => return unreadable(format!("not JSON: {error}")),
    };
    entries
        .into_iter()
        .enumerate()
        .map(|(index, entry)| {
            let mut label = format!("{shown}#{index}");
            if let Some(note) = entry.get("note").and_then(Value::as_str) {
                label.push_str(&format!(" ({note})"));
            }
            let kind = match entry {
                Value::Object(map) if map.contains_key("args_json") => CaseKind::ToolCall(map),
                Value::Object(map) if map.contains_key("kind") => CaseKind::Envelope(map),
                other => CaseKind::UnknownShape(other),
            };
            Case { label, kind }
        })
        .collect()
}

/// One case per `input/NAME`, paired with `output/NAME`; an output without an input is a
/// failing case too.
fn jcs_cases(dir: &Path) -> Result<Vec<Case>, String> {
    let names = |sub: &str| -> Result<Vec<String>, String> {
        let entries = fs::read_dir(dir.join(sub))
            .map_err(|e| format!("not an RFC 8785 directory: cannot list {sub}/: {e}"))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot list {sub}/: {e}"))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    };
    let (inputs, outputs) = (names("input")?, names("output")?);
    if inputs.is_empty() {
        return Err("input/ holds no vectors".into());
    }
    let mut cases: Vec<Case> = inputs
        .iter()
        .map(|name| Case {
            label: format!("{}/input/{name}", dir.display()),
            kind: CaseKind::Jcs {
                input: fs::read(dir.join("input").join(name))
                    .map_err(|e| format!("cannot read: {e}"))
                    .and_then(|bytes| {
                        String::from_utf8(bytes).map_err(|_| "not UTF-8 text".into())
                    }),
                output: fs::read(dir.join("output").join(name))
                    .map_err(|e| format!("no output/{name}: {e}")),
            },
        })
        .collect();
    cases.extend(
        outputs
            .iter()
            .filter(|name| !inputs.contains(name))
            .map(|name| Case {
                label: format!("{}/output/{name}", dir.display()),
                kind: CaseKind::Jcs {
                    input: Err(format!("no input/{name}")),
                    output: Ok(Vec::new()),
                },
            }),
    );
    Ok(cases)
}

fn check_jcs(
    input: &Result<String, String>,
    output: &Result<Vec<u8>, String>,
    outcome: &mut Outcome,
) {
    let (input, output) = match (input, output) {
        (Ok(input), Ok(output)) => (input, output),
        (Err(reason), _) | (_, Err(reason)) => {
            outcome.fail(Mismatch::new(
                "pair",
                "an input/ and output/ file of one name",
                reason,
            ));
            return;
        }
    };
    let expected = String::from_utf8_lossy(output);
    match parse_strict(input) {
        Ok(value) => outcome.compare("canonical", &expected, &canonical_json(&value)),
        Err(error) => outcome.fail(Mismatch::new(
            "canonical",
            quoted(&expected),
            format!("refused: {error}"),
        )),
    }
}

fn text_field<'a>(
    entry: &'a Map<String, Value>,
    name: &str,
    outcome: &mut Outcome,
) -> Option<&'a str> {
    match entry.get(name) {
        Some(Value::String(text)) => Some(text),
        other => {
            let found = other.map_or("nothing".to_owned(), Value::to_string);
            outcome.fail(Mismatch::new(format!("field `{name}`"), "a string", found));
            None
        }
    }
}

fn check_tool_call(entry: &Map<String, Value>, report: &mut Report, outcome: &mut Outcome) {
    let (Some(tool), Some(args_json)) = (
        text_field(entry, "tool", outcome),
        text_field(entry, "args_json", outcome),
    ) else {
        return;
    };
    let flagged = !matches!(
        entry.get("args_unrepresentable"),
        None | Some(Value::Null | Value::Bool(false))
    );
    let call = ToolCall::from_model(tool, args_json);
    if flagged {
        match call {
            Err(error) if unrepresentable(&error.reason) => {}
            Err(error) => outcome.fail(Mismatch::new(
                "refusal",
                "refused as unrepresentable (lone surrogate, duplicate key or overflowing number)",
                format!("refused for another reason: {error}"),
            )),
            Ok(call) => outcome.fail(Mismatch::new(
                "refusal",
                "refused as unrepresentable",
                format!("accepted, checksum {}", call.checksum()),
            )),
        }
    } else {
        let expected: Vec<(&str, &str)> = ["canonical", "checksum"]
            .into_iter()
            .filter(|name| entry.contains_key(*name))
            .filter_map(|name| Some((name, text_field(entry, name, outcome)?)))
            .collect();
        if !entry.contains_key("canonical") && !entry.contains_key("checksum") {
            outcome.fail(Mismatch::new(
                "vector",
                "a `canonical` or `checksum` to check",
                "neither",
            ));
        }
        match call {
            Ok(call) => {
                for (name, want) in expected {
                    let actual = match name {
                        "canonical" => call.canonical(),
                        _ => call.checksum().to_hex(),
                    };
                    outcome.compare(name, want, &actual);
                }
            }
            Err(error) => {
                for (name, want) in expected {
                    outcome.fail(Mismatch::new(
                        name,
                        quoted(want),
                        format!("refused: {error}"),
                    ));
                }
            }
        }
    }
    check_tool_result_renderings(entry, report, outcome);
    note_unknown_fields(entry, TOOL_CALL_FIELDS, "tool-call", report);
}

/// The fields of a tool-call vector; `args` and `note` are for human readers, and
/// `jcs_rfc8785_equal` says that `canonical` is RFC 8785 output, which is what
/// `canonical` is checked against.
const TOOL_CALL_FIELDS: &[&str] = &[
    "tool",
    "args_json",
    "args",
    "note",
    "canonical",
    "checksum",
    "jcs_rfc8785_equal",
    "args_unrepresentable",
    "rendered_body",
    "rendered",
    "rendered_trusted",
    "rendered_error",
];

const ENVELOPE_FIELDS: &[&str] = &["kind", "input", "rendered", "note"];

/// Fields this command does not know are reported, never silently passed.
fn note_unknown_fields(
    entry: &Map<String, Value>,
    known: &[&str],
    what: &str,
    report: &mut Report,
) {
    for field in entry
        .keys()
        .filter(|field| !known.contains(&field.as_str()))
    {
        report.note_unchecked(&format!("unknown field `{field}` of {what} vectors"));
    }
}

/// Whether a refusal says the arguments cannot be represented faithfully, as the
/// vectors' `args_unrepresentable` means (not merely that they are malformed).
fn unrepresentable(reason: &CallErrorReason) -> bool {
    matches!(
        reason,
        CallErrorReason::Json(
            JsonError::LoneSurrogate { .. }
                | JsonError::DuplicateKey { .. }
                | JsonError::NumberOutOfRange { .. }
        )
    )
}

/// The `rendered` / `rendered_trusted` / `rendered_error` fields of a tool-call vector:
/// the body wrapped as an untrusted and as a trusted tool result, or a body that both
/// must refuse to render.
fn check_tool_result_renderings(
    entry: &Map<String, Value>,
    report: &mut Report,
    outcome: &mut Outcome,
) {
    let input = Value::Object(entry.clone());
    let checks: Vec<(&str, Kind, Expected<'_>)> = if entry.contains_key("rendered_error") {
        vec![
            ("rendered_error", Kind::ToolResult, Expected::Refusal),
            ("rendered_error", Kind::TrustedToolResult, Expected::Refusal),
        ]
    } else {
        [
            ("rendered", Kind::ToolResult),
            ("rendered_trusted", Kind::TrustedToolResult),
        ]
        .into_iter()
        .filter(|(field, _)| entry.contains_key(*field))
        .filter_map(|(field, kind)| {
            Some((
                field,
                kind,
                Expected::Text(text_field(entry, field, outcome)?),
            ))
        })
        .collect()
    };
    for (field, kind, expected) in checks {
        match render(kind, &input) {
            Rendering::NoRenderer => report.note_unchecked(&format!(
                "`{field}` of tool-call vectors, kind {kind}: no renderer"
            )),
            rendering => compare_rendering(field, &expected, &rendering, outcome),
        }
    }
}

fn check_envelope(entry: &Map<String, Value>, report: &mut Report, outcome: &mut Outcome) {
    note_unknown_fields(entry, ENVELOPE_FIELDS, "envelope", report);
    let Some(kind_name) = text_field(entry, "kind", outcome) else {
        return;
    };
    let Some(kind) = Kind::from_name(kind_name) else {
        outcome.fail(Mismatch::new(
            "kind",
            "a kind conform knows",
            format!("unknown kind {kind_name:?}"),
        ));
        return;
    };
    let Some(expected) = text_field(entry, "rendered", outcome) else {
        return;
    };
    let input = entry.get("input").cloned().unwrap_or(Value::Null);
    match render(kind, &input) {
        Rendering::NoRenderer => outcome.fail(Mismatch::new(
            "rendered",
            quoted(expected),
            format!("kind {kind}: no renderer"),
        )),
        rendering => compare_rendering("rendered", &Expected::Text(expected), &rendering, outcome),
    }
}

enum Expected<'a> {
    Text(&'a str),
    Refusal,
}

fn compare_rendering(
    field: &str,
    expected: &Expected<'_>,
    actual: &Rendering,
    outcome: &mut Outcome,
) {
    match (expected, actual) {
        (Expected::Text(want), Rendering::Text(got)) => outcome.compare(field, want, got),
        (Expected::Text(want), Rendering::Refused(why)) => {
            outcome.fail(Mismatch::new(
                field,
                quoted(want),
                format!("refused: {why}"),
            ));
        }
        (Expected::Refusal, Rendering::Refused(_)) => {}
        (Expected::Refusal, Rendering::Text(got)) => {
            outcome.fail(Mismatch::new(field, "a refusal to render", quoted(got)));
        }
        (_, Rendering::NoRenderer) => {}
    }
}

/// The renderings the shared vectors hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ToolResult,
    TrustedToolResult,
    StandingInstructions,
    Memories,
    Retrievables,
    Thought,
    TimelineMessage,
    UnknownToolWarning,
    RetrievableSafetyDirective,
}

impl Kind {
    const ALL: [Kind; 9] = [
        Kind::ToolResult,
        Kind::TrustedToolResult,
        Kind::StandingInstructions,
        Kind::Memories,
        Kind::Retrievables,
        Kind::Thought,
        Kind::TimelineMessage,
        Kind::UnknownToolWarning,
        Kind::RetrievableSafetyDirective,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::ToolResult => "tool_result",
            Kind::TrustedToolResult => "trusted_tool_result",
            Kind::StandingInstructions => "standing_instructions",
            Kind::Memories => "memories",
            Kind::Retrievables => "retrievables",
            Kind::Thought => "thought",
            Kind::TimelineMessage => "timeline_message",
            Kind::UnknownToolWarning => "unknown_tool_warning",
            Kind::RetrievableSafetyDirective => "retrievable_safety_directive",
        }
    }

    fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a renderer made of a vector's input.
#[allow(
    dead_code,
    reason = "`Text` and `Refused` come from renderers as they land"
)]
enum Rendering {
    /// The rendered text.
    Text(String),
    /// The renderer refused the input (a body that holds its own closer, a bad id).
    Refused(String),
    /// No renderer for this kind exists yet.
    NoRenderer,
}

/// Renders a vector's input as `kind`: one arm per kind. A renderer plugs in by replacing its
/// kind's `NoRenderer` with a call that maps the vector's input to the renderer's
/// arguments (for tool results, the vector entry: `tool`, `checksum`, `rendered_body`).
fn render(kind: Kind, _input: &Value) -> Rendering {
    match kind {
        Kind::ToolResult => Rendering::NoRenderer,
        Kind::TrustedToolResult => Rendering::NoRenderer,
        Kind::StandingInstructions => Rendering::NoRenderer,
        Kind::Memories => Rendering::NoRenderer,
        Kind::Retrievables => Rendering::NoRenderer,
        Kind::Thought => Rendering::NoRenderer,
        Kind::TimelineMessage => Rendering::NoRenderer,
        Kind::UnknownToolWarning => Rendering::NoRenderer,
        Kind::RetrievableSafetyDirective => Rendering::NoRenderer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renderings_compare_as_the_vectors_expect() {
        let check = |expected: &Expected<'_>, actual: Rendering| {
            let mut outcome = Outcome::default();
            compare_rendering("rendered", expected, &actual, &mut outcome);
            outcome.mismatches.len()
        };
        let text = |s: &str| Rendering::Text(s.to_owned());
        let refused = || Rendering::Refused("closer in body".to_owned());
        assert_eq!(check(&Expected::Text("a"), text("a")), 0);
        assert_eq!(check(&Expected::Text("a"), text("b")), 1);
        assert_eq!(check(&Expected::Text("a"), refused()), 1);
        assert_eq!(check(&Expected::Refusal, refused()), 0);
        assert_eq!(check(&Expected::Refusal, text("a")), 1);
    }

    #[test]
    fn every_kind_has_a_name_that_reads_back() {
        for kind in Kind::ALL {
            assert_eq!(Kind::from_name(kind.name()), Some(kind));
        }
        assert_eq!(Kind::from_name("hologram"), None);
    }
}
