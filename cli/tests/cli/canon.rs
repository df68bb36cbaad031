//! `tooltrust canon FILE`.

use crate::common;

use std::fs;

use common::{tooltrust, vectors};

#[test]
fn writes_exactly_the_canonical_bytes_of_every_jcs_input() {
    let mut count = 0;
    for entry in fs::read_dir(vectors("jcs/input")).unwrap() {
        let input = entry.unwrap().path();
        let name = input.file_name().unwrap().to_owned();
        let expected = fs::read(vectors("jcs/output").join(&name)).unwrap();
        let run = tooltrust(&["canon", input.to_str().unwrap()], b"");
        assert_eq!(run.code, Some(0), "{name:?}: {}", run.stderr);
        assert!(
            run.stdout == expected,
            "{name:?}:\nexpected {}\nactual   {}",
            String::from_utf8_lossy(&expected),
            String::from_utf8_lossy(&run.stdout)
        );
        count += 1;
    }
    assert!(count >= 20);
}

#[test]
fn bad_input_is_a_clear_error_with_exit_status_1() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8], &str); 6] = [
        (
            "dup.json",
            br#"{"a":1,"b":{"c":1,"c":2}}"#,
            "duplicate key \"c\"",
        ),
        ("syntax.json", b"{\"a\":", "invalid JSON"),
        ("surrogate.json", br#"["\udc00"]"#, "lone surrogate"),
        ("overflow.json", b"[1e400]", "out of range"),
        ("latin1.json", b"\"caf\xe9\"", "not UTF-8"),
        ("empty.json", b"", "invalid JSON"),
    ];
    for (name, content, message) in cases {
        let path = dir.path().join(name);
        fs::write(&path, content).unwrap();
        let run = tooltrust(&["canon", path.to_str().unwrap()], b"");
        assert_eq!(run.code, Some(1), "{name}");
        assert!(
            run.stdout.is_empty(),
            "{name}: wrote {:?}",
            run.stdout_text()
        );
        assert!(run.stderr.contains(message), "{name}: {}", run.stderr);
        assert!(
            run.stderr.contains(name),
            "{name}: the error names the file: {}",
            run.stderr
        );
    }
    let missing = dir.path().join("missing.json");
    let run = tooltrust(&["canon", missing.to_str().unwrap()], b"");
    assert_eq!(run.code, Some(1));
    assert!(run.stderr.contains("cannot read"), "{}", run.stderr);
}

#[test]
fn a_file_argument_is_required() {
    let run = tooltrust(&["canon"], b"{}");
    assert_eq!(run.code, Some(2));
    assert!(run.stdout.is_empty());
}
