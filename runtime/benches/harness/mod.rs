//! A subject against its raw baseline, measured interleaved in one run.
//!
//! Each comparison runs rounds of one baseline batch and one subject batch, back to back
//! (the order flips every round), so that load from elsewhere on the machine hits both
//! sides of a round alike. It prints one table row: min and median nanoseconds per
//! operation of each side, the ratio subject/baseline (the median of the rounds' ratios,
//! which is robust to load that comes and goes) and the ratio of the minima, the goal, and
//! `ok` or `MISS` (the median ratio against the goal).
//!
//! `cargo bench -p tooltrust --bench NAME [-- FILTER]` runs the comparisons whose name
//! contains FILTER; `TOOLTRUST_BENCH_ROUNDS` sets the rounds (default 31, at least 5) and
//! `TOOLTRUST_BENCH_BATCH_MS` the target length of one batch (default 5).

use std::hint::black_box;
use std::sync::Once;
use std::time::{Duration, Instant};

/// Timing of one side of a comparison, in nanoseconds per operation.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    /// The fastest batch.
    pub min_ns: f64,
    /// The median batch.
    pub median_ns: f64,
}

/// The result of one comparison.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// What was compared.
    pub name: String,
    /// The largest acceptable subject/baseline ratio.
    pub goal_ratio: f64,
    /// The raw operation.
    pub baseline: Stats,
    /// The operation under test.
    pub subject: Stats,
    /// The median over rounds of subject/baseline within the round.
    pub paired_ratio: f64,
}

impl Comparison {
    /// Subject over baseline: the median of the rounds' ratios.
    pub fn ratio(&self) -> f64 {
        self.paired_ratio
    }

    /// Subject over baseline, minima.
    pub fn ratio_of_minima(&self) -> f64 {
        self.subject.min_ns / self.baseline.min_ns
    }

    /// Whether the ratio is within the goal.
    pub fn meets_goal(&self) -> bool {
        self.ratio() <= self.goal_ratio
    }
}

const HEADER: &str = "| comparison | baseline min ns | baseline median ns | subject min ns | subject median ns | ratio | ratio of minima | goal | verdict |\n\
                      |---|---:|---:|---:|---:|---:|---:|---:|---|";

/// Measures `subject` against `baseline` and prints the row; `None` when a command-line
/// filter excludes `name`.
pub fn compare<B, RB, S, RS>(
    name: &str,
    goal_ratio: f64,
    mut baseline: B,
    mut subject: S,
) -> Option<Comparison>
where
    B: FnMut() -> RB,
    S: FnMut() -> RS,
{
    if !selected(name) {
        return None;
    }
    let settings = Settings::from_env();
    let baseline_iters = calibrate(&mut baseline, settings.batch);
    let subject_iters = calibrate(&mut subject, settings.batch);
    let mut baseline_ns = Vec::with_capacity(settings.rounds);
    let mut subject_ns = Vec::with_capacity(settings.rounds);
    for round in 0..settings.rounds {
        if round.is_multiple_of(2) {
            baseline_ns.push(per_op_ns(&mut baseline, baseline_iters));
            subject_ns.push(per_op_ns(&mut subject, subject_iters));
        } else {
            subject_ns.push(per_op_ns(&mut subject, subject_iters));
            baseline_ns.push(per_op_ns(&mut baseline, baseline_iters));
        }
    }
    let ratios = subject_ns
        .iter()
        .zip(&baseline_ns)
        .map(|(subject, baseline)| subject / baseline)
        .collect();
    let comparison = Comparison {
        name: name.to_owned(),
        goal_ratio,
        baseline: stats(baseline_ns),
        subject: stats(subject_ns),
        paired_ratio: median(ratios),
    };
    print_row(&comparison);
    Some(comparison)
}

/// Prints the table header once per process.
fn print_row(c: &Comparison) {
    static HEADER_ONCE: Once = Once::new();
    HEADER_ONCE.call_once(|| println!("{HEADER}"));
    println!(
        "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} | {:.3} | {:.2} | {} |",
        c.name,
        c.baseline.min_ns,
        c.baseline.median_ns,
        c.subject.min_ns,
        c.subject.median_ns,
        c.ratio(),
        c.ratio_of_minima(),
        c.goal_ratio,
        if c.meets_goal() { "ok" } else { "MISS" },
    );
}

struct Settings {
    rounds: usize,
    batch: Duration,
}

impl Settings {
    fn from_env() -> Self {
        let number = |name: &str, default: u64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(default)
        };
        Settings {
            rounds: usize::try_from(number("TOOLTRUST_BENCH_ROUNDS", 31))
                .unwrap_or(31)
                .max(5),
            batch: Duration::from_millis(number("TOOLTRUST_BENCH_BATCH_MS", 5).max(1)),
        }
    }
}

/// Whether `name` passes the filters given after `--` (any argument that is not a flag).
fn selected(name: &str) -> bool {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    filters.is_empty() || filters.iter().any(|filter| name.contains(filter.as_str()))
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

/// Min and median of `samples`, in nanoseconds per operation.
fn stats(samples: Vec<f64>) -> Stats {
    Stats {
        min_ns: samples.iter().copied().fold(f64::INFINITY, f64::min),
        median_ns: median(samples),
    }
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
