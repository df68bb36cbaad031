//! Subjects against their raw baselines, measured in one run and printed as rows of one
//! table (`bench/report` gathers the rows of every bench into `BENCHMARKS.md`):
//!
//! `| benchmark | baseline | unit | median | best | p99 | baseline median | baseline best | ratio | ratio of bests | goal | verdict |`
//!
//! Three kinds of row, each explicit about what its ratio means:
//! - [`compare`] (and [`compare_per_byte`]): time per operation (or per byte). Each
//!   comparison runs rounds of one baseline batch and one subject batch, back to back
//!   (the order flips every round), so that load from elsewhere on the machine hits both
//!   sides of a round alike. Median and best are over the rounds; the ratio is
//!   subject/baseline, the median of the rounds' ratios (robust to load that comes and
//!   goes); the goal is an upper bound on it.
//! - [`latency`]: a [`compare`] row that also times single calls, for the subject's 99th
//!   percentile; the goal bounds that percentile (each single timing includes the
//!   clock's own cost, a few tens of nanoseconds).
//! - [`throughput`]: rates the bench measured itself (entries per second, say), one pair
//!   per round; the ratio is subject/baseline and the goal a lower bound on it.
//!
//! Lines that start with `note:` are context that `bench/report` keeps beside the table.
//!
//! `cargo bench -p tooltrust --bench NAME [-- FILTER]` runs the rows whose name contains
//! FILTER; `TOOLTRUST_BENCH_ROUNDS` sets the rounds (default 31, at least 5) and
//! `TOOLTRUST_BENCH_BATCH_MS` the target length of one batch (default 5).

#![allow(dead_code, reason = "each bench uses the part of the harness it needs")]

use std::hint::black_box;
use std::sync::Once;
use std::time::{Duration, Instant};

/// What a row's verdict checks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    /// The ratio must not exceed this.
    AtMost(f64),
    /// The ratio must reach this.
    AtLeast(f64),
    /// The subject's 99th percentile must stay below this.
    P99Below(Duration),
    /// No goal: the row gives context.
    None,
}

/// One side of a row, in the row's unit.
#[derive(Debug, Clone, Copy)]
pub struct Side {
    /// The median over rounds.
    pub median: f64,
    /// The best round: the least time, or the highest rate.
    pub best: f64,
    /// The 99th percentile of single calls, for latency rows.
    pub p99: Option<f64>,
}

/// One row of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// What was measured.
    pub name: String,
    /// The raw operation it is compared with.
    pub baseline_name: String,
    /// The unit of the sides: `ns/op`, `ns/B`, `entries/s`.
    pub unit: &'static str,
    /// The operation under test.
    pub subject: Side,
    /// The raw operation.
    pub baseline: Side,
    /// Subject over baseline: the median of the rounds' ratios.
    pub ratio: f64,
    /// Subject over baseline, best rounds.
    pub ratio_of_bests: f64,
    /// What the verdict checks.
    pub goal: Goal,
}

impl Row {
    /// `Some(true)` when the goal is met, `None` when the row has no goal.
    pub fn meets_goal(&self) -> Option<bool> {
        match self.goal {
            Goal::AtMost(bound) => Some(self.ratio <= bound),
            Goal::AtLeast(bound) => Some(self.ratio >= bound),
            Goal::P99Below(bound) => self.subject.p99.map(|p99| p99 < bound.as_nanos() as f64),
            Goal::None => None,
        }
    }

    /// Prints the row (and the table header, once per process).
    pub fn print(&self) {
        static HEADER_ONCE: Once = Once::new();
        HEADER_ONCE.call_once(|| {
            println!(
                "| benchmark | baseline | unit | median | best | p99 | baseline median | baseline best | ratio | ratio of bests | goal | verdict |"
            );
            println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|");
        });
        let goal = match self.goal {
            Goal::AtMost(bound) => format!("≤ {bound}×"),
            Goal::AtLeast(bound) => format!("≥ {bound}×"),
            Goal::P99Below(bound) => format!("p99 < {} ns", bound.as_nanos()),
            Goal::None => "—".to_owned(),
        };
        let verdict = match self.meets_goal() {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "—",
        };
        let p99 = |side: &Side| side.p99.map_or_else(|| "—".to_owned(), figure);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.3}× | {:.3}× | {goal} | {verdict} |",
            self.name,
            self.baseline_name,
            self.unit,
            figure(self.subject.median),
            figure(self.subject.best),
            p99(&self.subject),
            figure(self.baseline.median),
            figure(self.baseline.best),
            self.ratio,
            self.ratio_of_bests,
        );
        if let (Goal::P99Below(_), Some(p99)) = (self.goal, self.baseline.p99) {
            note(&format!(
                "{}: the baseline's p99 is {} ns",
                self.name,
                figure(p99)
            ));
        }
    }
}

/// Prints a line of context for the report.
pub fn note(text: &str) {
    println!("note: {text}");
}

/// At least four significant figures, without exponents.
fn figure(value: f64) -> String {
    let magnitude = value.abs();
    let decimals = if magnitude >= 1000.0 {
        0
    } else if magnitude >= 100.0 {
        1
    } else if magnitude >= 10.0 {
        2
    } else if magnitude >= 1.0 {
        3
    } else {
        4
    };
    format!("{value:.decimals$}")
}

/// Times `subject` against `baseline` in ns per operation and prints the row; `None`
/// when a command-line filter excludes `name`.
pub fn compare<B, RB, S, RS>(
    name: &str,
    baseline_name: &str,
    goal: Goal,
    baseline: B,
    subject: S,
) -> Option<Row>
where
    B: FnMut() -> RB,
    S: FnMut() -> RS,
{
    compare_per(name, baseline_name, goal, 1, "ns/op", baseline, subject)
}

/// Like [`compare`], in ns per byte of the `bytes` each operation handles.
pub fn compare_per_byte<B, RB, S, RS>(
    name: &str,
    baseline_name: &str,
    goal: Goal,
    bytes: usize,
    baseline: B,
    subject: S,
) -> Option<Row>
where
    B: FnMut() -> RB,
    S: FnMut() -> RS,
{
    compare_per(name, baseline_name, goal, bytes, "ns/B", baseline, subject)
}

fn compare_per<B, RB, S, RS>(
    name: &str,
    baseline_name: &str,
    goal: Goal,
    per: usize,
    unit: &'static str,
    mut baseline: B,
    mut subject: S,
) -> Option<Row>
where
    B: FnMut() -> RB,
    S: FnMut() -> RS,
{
    if !selected(name) {
        return None;
    }
    let (baseline_ns, subject_ns) = interleaved(&mut baseline, &mut subject);
    let per = per.max(1) as f64;
    let scale =
        |samples: Vec<f64>| -> Vec<f64> { samples.into_iter().map(|ns| ns / per).collect() };
    let row = times(
        name,
        baseline_name,
        unit,
        goal,
        &scale(baseline_ns),
        &scale(subject_ns),
    );
    row.print();
    Some(row)
}

/// Like [`compare`], and also times `single_calls` single calls of each side, round by
/// round, for their 99th percentiles; the goal bounds the subject's.
pub fn latency<B, RB, S, RS>(
    name: &str,
    baseline_name: &str,
    p99_below: Duration,
    single_calls: usize,
    mut baseline: B,
    mut subject: S,
) -> Option<Row>
where
    B: FnMut() -> RB,
    S: FnMut() -> RS,
{
    if !selected(name) {
        return None;
    }
    let (baseline_ns, subject_ns) = interleaved(&mut baseline, &mut subject);
    let mut row = times(
        name,
        baseline_name,
        "ns/op",
        Goal::P99Below(p99_below),
        &baseline_ns,
        &subject_ns,
    );
    let rounds = Settings::from_env().rounds;
    let per_round = single_calls.div_ceil(rounds).max(1);
    let mut baseline_calls = Vec::with_capacity(per_round * rounds);
    let mut subject_calls = Vec::with_capacity(per_round * rounds);
    for _ in 0..rounds {
        single(&mut baseline, per_round, &mut baseline_calls);
        single(&mut subject, per_round, &mut subject_calls);
    }
    row.baseline.p99 = Some(percentile(&mut baseline_calls, 0.99));
    row.subject.p99 = Some(percentile(&mut subject_calls, 0.99));
    row.print();
    Some(row)
}

/// A row of rates (higher is better) the bench measured itself, one pair per round.
pub fn throughput(
    name: &str,
    baseline_name: &str,
    unit: &'static str,
    goal: Goal,
    baseline_rates: &[f64],
    subject_rates: &[f64],
) -> Row {
    let best = |rates: &[f64]| rates.iter().copied().fold(0.0, f64::max);
    let (baseline_best, subject_best) = (best(baseline_rates), best(subject_rates));
    Row {
        name: name.to_owned(),
        baseline_name: baseline_name.to_owned(),
        unit,
        subject: Side {
            median: median(subject_rates.to_vec()),
            best: subject_best,
            p99: None,
        },
        baseline: Side {
            median: median(baseline_rates.to_vec()),
            best: baseline_best,
            p99: None,
        },
        ratio: paired_ratio(subject_rates, baseline_rates),
        ratio_of_bests: subject_best / baseline_best,
        goal,
    }
}

/// A row of times (lower is better), one pair per round, in `unit`.
pub fn times(
    name: &str,
    baseline_name: &str,
    unit: &'static str,
    goal: Goal,
    baseline_times: &[f64],
    subject_times: &[f64],
) -> Row {
    let best = |times: &[f64]| times.iter().copied().fold(f64::INFINITY, f64::min);
    let (baseline_best, subject_best) = (best(baseline_times), best(subject_times));
    Row {
        name: name.to_owned(),
        baseline_name: baseline_name.to_owned(),
        unit,
        subject: Side {
            median: median(subject_times.to_vec()),
            best: subject_best,
            p99: None,
        },
        baseline: Side {
            median: median(baseline_times.to_vec()),
            best: baseline_best,
            p99: None,
        },
        ratio: paired_ratio(subject_times, baseline_times),
        ratio_of_bests: subject_best / baseline_best,
        goal,
    }
}

/// The rounds to run: `TOOLTRUST_BENCH_ROUNDS`, else `default`; at least 5.
pub fn rounds(default: usize) -> usize {
    std::env::var("TOOLTRUST_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(default)
        .max(5)
}

/// Whether `name` passes the filters given after `--` (any argument that is not a flag).
pub fn selected(name: &str) -> bool {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    filters.is_empty() || filters.iter().any(|filter| name.contains(filter.as_str()))
}

struct Settings {
    rounds: usize,
    batch: Duration,
}

impl Settings {
    fn from_env() -> Self {
        let batch_ms = std::env::var("TOOLTRUST_BENCH_BATCH_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(5)
            .max(1);
        Settings {
            rounds: rounds(31),
            batch: Duration::from_millis(batch_ms),
        }
    }
}

/// Batches of each side, interleaved round by round; ns per operation of each batch.
fn interleaved<B, RB, S, RS>(baseline: &mut B, subject: &mut S) -> (Vec<f64>, Vec<f64>)
where
    B: FnMut() -> RB,
    S: FnMut() -> RS,
{
    let settings = Settings::from_env();
    let baseline_iters = calibrate(baseline, settings.batch);
    let subject_iters = calibrate(subject, settings.batch);
    let mut baseline_ns = Vec::with_capacity(settings.rounds);
    let mut subject_ns = Vec::with_capacity(settings.rounds);
    for round in 0..settings.rounds {
        if round.is_multiple_of(2) {
            baseline_ns.push(per_op_ns(baseline, baseline_iters));
            subject_ns.push(per_op_ns(subject, subject_iters));
        } else {
            subject_ns.push(per_op_ns(subject, subject_iters));
            baseline_ns.push(per_op_ns(baseline, baseline_iters));
        }
    }
    (baseline_ns, subject_ns)
}

/// The number of iterations that makes one batch last about `target`.
fn calibrate<F: FnMut() -> R, R>(f: &mut F, target: Duration) -> u64 {
    black_box(f()); // warm caches and lazy state
    let mut iters = 1u64;
    loop {
        let start = Instant::now();
        run(f, iters);
        let elapsed = start.elapsed();
        if elapsed >= target / 4 || iters >= 1 << 30 {
            let per_op = elapsed.as_secs_f64() / iters as f64;
            return ((target.as_secs_f64() / per_op.max(1e-12)) as u64).max(1);
        }
        iters *= 2;
    }
}

fn per_op_ns<F: FnMut() -> R, R>(f: &mut F, iters: u64) -> f64 {
    let start = Instant::now();
    run(f, iters);
    start.elapsed().as_nanos() as f64 / iters as f64
}

fn run<F: FnMut() -> R, R>(f: &mut F, iters: u64) {
    for _ in 0..iters {
        black_box(f());
    }
}

/// Times `calls` single calls of `f`, in ns each.
fn single<F: FnMut() -> R, R>(f: &mut F, calls: usize, into: &mut Vec<f64>) {
    for _ in 0..calls {
        let start = Instant::now();
        black_box(f());
        into.push(start.elapsed().as_nanos() as f64);
    }
}

/// The median over rounds of subject/baseline within the round.
fn paired_ratio(subject: &[f64], baseline: &[f64]) -> f64 {
    median(
        subject
            .iter()
            .zip(baseline)
            .map(|(subject, baseline)| subject / baseline)
            .collect(),
    )
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let mid = samples.len() / 2;
    match (samples.get(mid.wrapping_sub(1)), samples.get(mid)) {
        (Some(low), Some(high)) if samples.len().is_multiple_of(2) => (low + high) / 2.0,
        (_, Some(middle)) => *middle,
        _ => f64::NAN,
    }
}

/// The nearest-rank percentile `p` (0 to 1) of `samples`.
fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let rank = ((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len().max(1));
    samples.get(rank - 1).copied().unwrap_or(f64::NAN)
}
