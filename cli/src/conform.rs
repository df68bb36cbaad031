//! `tooltrust conform PATH...`: runs conformance vectors in the shared formats.
//!
//! - a tool-call vector file: a JSON array of objects with `tool` and `args_json`; each
//!   entry's `canonical` and `checksum` must be reproduced exactly, and an entry flagged
//!   `args_unrepresentable` must be refused as unrepresentable;
//! - an envelope vector file: a JSON array of objects with `kind`, `input`, `rendered`;
//! - an RFC 8785 directory: `input/NAME.json` must canonicalise to `output/NAME.json`.
//!
//! One entry is one case, checked by `tooltrust::testing::conformance` (the same checks the
//! runtime's tests run). A case passes only when every field it has matched; an entry of a
//! shape or kind this command does not know fails, it is never skipped, and fields it does
//! not know are reported.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use serde_json::{Map, Value};
use tooltrust::canonical::parse_strict;
use tooltrust::testing::conformance;

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

    /// Adds the runtime's mismatches, quoting both sides so that invisible characters
    /// show.
    fn extend(&mut self, mismatches: Vec<conformance::Mismatch>) {
        for mismatch in mismatches {
            self.fail(Mismatch::new(
                mismatch.field,
                quoted(&mismatch.expected),
                quoted(&mismatch.actual),
            ));
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
    outcome.extend(conformance::check_jcs(input, &expected));
}

fn check_tool_call(entry: &Map<String, Value>, report: &mut Report, outcome: &mut Outcome) {
    outcome.extend(conformance::check_entry(&Value::Object(entry.clone())));
    note_unknown_fields(entry, TOOL_CALL_FIELDS, "tool-call", report);
}

fn check_envelope(entry: &Map<String, Value>, report: &mut Report, outcome: &mut Outcome) {
    outcome.extend(conformance::check_entry(&Value::Object(entry.clone())));
    note_unknown_fields(entry, ENVELOPE_FIELDS, "envelope", report);
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
