//! `ToolCall::from_model` against its unavoidable work, and against peers
//! (`cargo bench -p tooltrust --bench checksum`):
//!
//! - beside `serde_json::from_str::<Value>` + SHA-256 of the canonical bytes (the goal);
//! - beside serde_json's parser driving a visitor that builds nothing + SHA-256 (the
//!   least any checksum on serde_json's parser can cost: context, no goal);
//! - beside the reference's algorithm on Node (`bench/peers/reference.mjs`) and a naive
//!   Python fingerprint (`bench/peers/naive.py`), each run in its own process when
//!   `node` / `python3` is on the PATH, batch by batch in turn with ours. Their figures
//!   come from this run, never from a file. On a shared host, run it on one CPU
//!   (`taskset -c 0 cargo bench …`, as `bench/report` does), so that both sides of a
//!   peer row run at the same speed.

mod harness;

use std::collections::HashMap;
use std::fmt;
use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use harness::Goal;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tooltrust::ToolCall;

const TOOL: &str = "search_files";

/// The fixtures, by name and file under `runtime/tests/data/perf/`.
const FIXTURES: [(&str, &str); 3] = [
    ("1k", "args1k.json"),
    ("100k_struct", "args100k_struct.json"),
    ("100k_str", "args100k_str.json"),
];

/// `from_model` beside a `Value` parse + SHA-256 at 1 KB (the stretch goal is 0.7).
const GOAL_1K: Goal = Goal::AtMost(1.0);
/// The same for the 100 KB fixtures (issue 8).
const GOAL_100K: Goal = Goal::AtMost(1.5);
/// At least five times faster than the reference's algorithm on Node.
const GOAL_NODE: Goal = Goal::AtMost(0.2);

/// How long one peer batch should last; long beside the round trip to the peer.
const PEER_BATCH: Duration = Duration::from_millis(20);

fn fixture_path(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/perf")
        .join(file)
}

fn main() {
    let fixtures: Vec<(&str, PathBuf, String)> = FIXTURES
        .iter()
        .map(|&(name, file)| {
            let path = fixture_path(file);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|error| panic!("fixture {}: {error}", path.display()));
            (name, path, text)
        })
        .collect();
    let mut peers = start_peers(&fixtures);

    for (name, _, text) in &fixtures {
        let text = text.as_str();
        let call = ToolCall::from_model(TOOL, text)
            .unwrap_or_else(|error| panic!("fixture {name}: {error}"));
        let canonical = call.canonical();
        let goal = if *name == "1k" { GOAL_1K } else { GOAL_100K };
        let value_and_hash = || {
            let value: Value = serde_json::from_str(black_box(text)).ok()?;
            Some((value, Sha256::digest(black_box(canonical.as_bytes()))))
        };
        harness::compare(
            &format!(
                "checksum/from_model {name} ({} B canonical)",
                canonical.len()
            ),
            "serde_json::from_str + SHA-256 of the canonical bytes",
            goal,
            value_and_hash,
            || ToolCall::from_model(TOOL, black_box(text)),
        );
        // With the id the provider gave the call: no id drawn from the OS.
        harness::compare(
            &format!("checksum/from_model_with_id {name}"),
            "serde_json::from_str + SHA-256 of the canonical bytes",
            goal,
            value_and_hash,
            || ToolCall::from_model_with_id("call_7Yb2", TOOL, black_box(text)),
        );
        harness::compare(
            &format!("checksum/from_model_with_id {name}, beside the floor"),
            "serde_json's parser, building nothing, + SHA-256 of the canonical bytes",
            Goal::None,
            || {
                let parsed = visit_all(black_box(text));
                (parsed, Sha256::digest(black_box(canonical.as_bytes())))
            },
            || ToolCall::from_model_with_id("call_7Yb2", TOOL, black_box(text)),
        );
        for peer in &mut peers {
            peer.compare(name, text, &call);
        }
    }
    // Dropping the peers ends their input, and so the peers.
    drop(peers);
}

/// Parses `text` with serde_json, visiting every value and building nothing.
fn visit_all(text: &str) -> bool {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    Nothing.deserialize(&mut deserializer).is_ok() && deserializer.end().is_ok()
}

/// A visitor that looks at every value and keeps none.
struct Nothing;

impl<'de> DeserializeSeed<'de> for Nothing {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Nothing {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        black_box(v);
        Ok(())
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        black_box(v);
        Ok(())
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        black_box(v);
        Ok(())
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        black_box(v);
        Ok(())
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        black_box(v);
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Nothing)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Nothing)?.is_some() {
            map.next_value_seed(Nothing)?;
        }
        Ok(())
    }
}

/// A peer implementation, in its own process, that times batches on request.
struct Peer {
    /// What the table calls it.
    name: &'static str,
    /// Whether its digest is meant to equal ours (the reference's algorithm is).
    same_digest: bool,
    goal: Goal,
    child: Child,
    /// Requests go here; `None` once closed.
    input: Option<ChildStdin>,
    output: BufReader<ChildStdout>,
    /// Its digest of each fixture.
    digests: HashMap<String, String>,
}

/// Starts the peers whose interpreter is on the PATH; notes the others.
fn start_peers(fixtures: &[(&str, PathBuf, String)]) -> Vec<Peer> {
    let peers_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/peers");
    let candidates = [
        (
            "the reference's algorithm on Node",
            "node",
            "reference.mjs",
            true,
            GOAL_NODE,
        ),
        (
            "a naive Python fingerprint",
            "python3",
            "naive.py",
            false,
            Goal::None,
        ),
    ];
    let mut peers = Vec::new();
    for (name, program, script, same_digest, goal) in candidates {
        if !FIXTURES
            .iter()
            .any(|(fixture, _)| harness::selected(&peer_row(name, fixture)))
        {
            continue;
        }
        let version = Command::new(program).arg("--version").output();
        let Ok(version) = version.map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        else {
            harness::note(&format!("{name}: not run, `{program}` is not on the PATH"));
            continue;
        };
        match Peer::start(
            name,
            program,
            &peers_dir.join(script),
            fixtures,
            same_digest,
            goal,
        ) {
            Ok(peer) => {
                harness::note(&format!(
                    "{name}: `{program} bench/peers/{script}`, {version}"
                ));
                peers.push(peer);
            }
            Err(error) => harness::note(&format!("{name}: not run, {error}")),
        }
    }
    peers
}

fn peer_row(peer: &str, fixture: &str) -> String {
    format!("checksum/from_model {fixture}, beside {peer}")
}

impl Peer {
    fn start(
        name: &'static str,
        program: &str,
        script: &Path,
        fixtures: &[(&str, PathBuf, String)],
        same_digest: bool,
        goal: Goal,
    ) -> Result<Peer, String> {
        let mut command = Command::new(program);
        command.arg(script).arg(TOOL);
        for (fixture, path, _) in fixtures {
            command.arg(format!("{fixture}={}", path.display()));
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|error| format!("cannot start `{program}`: {error}"))?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("no pipes to the peer".into());
        };
        let mut peer = Peer {
            name,
            same_digest,
            goal,
            child,
            input: Some(input),
            output: BufReader::new(output),
            digests: HashMap::new(),
        };
        loop {
            let line = peer.read_line()?;
            match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                ["ready"] => return Ok(peer),
                ["checksum", fixture, digest] => {
                    peer.digests.insert((*fixture).into(), (*digest).into());
                }
                _ => return Err(format!("unexpected line from the peer: {line:?}")),
            }
        }
    }

    fn read_line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.output.read_line(&mut line) {
            Ok(0) => Err("the peer stopped".into()),
            Ok(_) => Ok(line.trim().to_owned()),
            Err(error) => Err(format!("reading from the peer: {error}")),
        }
    }

    /// Nanoseconds the peer took for `iterations` checksums of `fixture`.
    fn batch(&mut self, fixture: &str, iterations: u64) -> f64 {
        let sent = match self.input.as_mut() {
            Some(input) => writeln!(input, "{fixture} {iterations}").and_then(|()| input.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        let reply = sent
            .map_err(|error| error.to_string())
            .and_then(|()| self.read_line());
        match reply.as_deref().map(str::parse::<f64>) {
            Ok(Ok(ns)) => ns,
            other => panic!("{}: no timing for {fixture}: {other:?}", self.name),
        }
    }

    /// Times `from_model` on `text` against the peer on the same fixture, batch by batch
    /// in turn, and prints the row.
    fn compare(&mut self, fixture: &str, text: &str, call: &ToolCall) {
        let row = peer_row(self.name, fixture);
        if !harness::selected(&row) {
            return;
        }
        match self.digests.get(fixture) {
            Some(digest) if *digest == call.checksum().to_hex() => harness::note(&format!(
                "{}: its checksum of {fixture} equals from_model's",
                self.name
            )),
            Some(digest) if self.same_digest => harness::note(&format!(
                "{}: its checksum of {fixture} is {digest}, from_model's is {} (they should agree)",
                self.name,
                call.checksum()
            )),
            _ => {}
        }
        // Calibrate both sides, warming the peer's JIT on the way.
        let mut peer_iterations = 1;
        loop {
            let ns = self.batch(fixture, peer_iterations);
            if ns >= PEER_BATCH.as_nanos() as f64 || peer_iterations >= 1 << 24 {
                break;
            }
            peer_iterations *= 2;
        }
        let ours = || ToolCall::from_model(TOOL, black_box(text));
        let our_iterations = iterations_for(ours, PEER_BATCH);
        let rounds = harness::rounds(31);
        let (mut peer_ns, mut our_ns) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let mut peer = || self.batch(fixture, peer_iterations) / peer_iterations as f64;
            let own = || time_per_call(ours, our_iterations);
            if round % 2 == 0 {
                peer_ns.push(peer());
                our_ns.push(own());
            } else {
                our_ns.push(own());
                peer_ns.push(peer());
            }
        }
        harness::times(&row, self.name, "ns/op", self.goal, &peer_ns, &our_ns).print();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // The end of its input ends the peer.
        drop(self.input.take());
        let _ = self.child.wait();
    }
}

/// How many calls of `f` last about `target`.
fn iterations_for<R>(f: impl Fn() -> R, target: Duration) -> u64 {
    let mut iterations = 1u64;
    loop {
        let start = Instant::now();
        for _ in 0..iterations {
            black_box(f());
        }
        let elapsed = start.elapsed();
        if elapsed >= target / 4 || iterations >= 1 << 30 {
            return ((target.as_secs_f64() / (elapsed.as_secs_f64() / iterations as f64)) as u64)
                .max(1);
        }
        iterations *= 2;
    }
}

/// Nanoseconds per call of `f`, over `iterations` calls.
fn time_per_call<R>(f: impl Fn() -> R, iterations: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..iterations {
        black_box(f());
    }
    start.elapsed().as_nanos() as f64 / iterations as f64
}
