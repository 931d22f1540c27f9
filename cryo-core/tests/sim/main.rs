//! Deterministic simulation of the commit protocol: writers, Cryo and faults on one in-memory
//! table, one seed per run.
//!
//! A seed fixes every choice: the table's settings, the writers' actions, Cryo's operations,
//! which parked storage request goes next (the interleaving), and which requests fail, fail
//! after taking effect, list stale or kill Cryo's process ([`world`]). After every round
//! (writers and one Cryo operation side by side) the invariants are checked with faults off
//! ([`check`]): the rows upstream's reader and a reader by hand return are exactly the writers'
//! model (nothing lost, resurrected, duplicated or stale); every file a retained snapshot
//! references exists; sequence numbers are unique and increase from parent to child; the current
//! snapshot's summary counts what its manifests list; on v3, row ids are unique and a row keeps its
//! lineage through every rewrite. A run ends with an orphan removal, after
//! which nothing that no metadata references may be left (what a killed Cryo left is found).
//!
//! A seed fixes the whole run, in this process or another: Cryo's file names, snapshot ids and
//! retry jitter come from the seed ([`cryo_core::clock::seed_thread_randomness`]), every task
//! polls on one thread, and the scheduler orders what is parked by actor, kind and path before
//! it draws (`determinism_survey` runs seeds twice and compares every release). A failure
//! prints the last requests released, and its replay command.
//!
//! ```sh
//! cargo test -p cryo-core --features fuzz,datafusion --test sim            # 40 seeds
//! CRYO_SIM_SEED=42 cargo test -p cryo-core --features fuzz,datafusion --test sim -- replay --nocapture
//! CRYO_SIM_SEEDS=100000 CRYO_SIM_THREADS=2 \
//!     cargo test --release -p cryo-core --features fuzz,datafusion --test sim -- seeds --nocapture
//! ```
#![cfg(feature = "fuzz")]
#![allow(clippy::too_many_lines)] // Reason: a run reads best as one sequence of rounds.
#![allow(clippy::unwrap_used, clippy::print_stderr)] // test code: unwrap to fail loudly, eprintln for reports

mod check;
mod ops;
mod table;
mod world;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use cryo_core::clock::Clock;
use cryo_core::commit::NewTable;
use cryo_core::{Catalog, CatalogConfig, Error, TableId};
use iceberg::spec::FormatVersion;

use ops::CryoOp;
use table::{Done, Model, Writer};
use world::{ACTOR, Actor, Faults, Rng, Sched, SimStore};

/// The simulated clock, as Cryo and the writers see it.
#[derive(Debug)]
struct SimClock(Arc<Sched>);

impl Clock for SimClock {
    fn now_ms(&self) -> i64 {
        self.0.now_ms()
    }
}

/// What a run did (for the volume report).
#[derive(Debug, Default, Clone)]
struct Stats {
    rounds: u32,
    writer_commits: u32,
    writer_gave_up: u32,
    writer_errors: u32,
    cryo_committed: u32,
    cryo_ended_clean: u32,
    cryo_errors: u32,
    cryo_killed: u32,
    requests: u64,
    /// A digest of the interleaving (`determinism_survey` compares two runs of a seed).
    trace: u64,
    /// Time spent in the checks.
    check_s: f64,
    ops: BTreeMap<String, u32>,
}

impl Stats {
    fn add(&mut self, s: &Stats) {
        self.rounds += s.rounds;
        self.writer_commits += s.writer_commits;
        self.writer_gave_up += s.writer_gave_up;
        self.writer_errors += s.writer_errors;
        self.cryo_committed += s.cryo_committed;
        self.cryo_ended_clean += s.cryo_ended_clean;
        self.cryo_errors += s.cryo_errors;
        self.cryo_killed += s.cryo_killed;
        self.requests += s.requests;
        self.check_s += s.check_s;
        for (k, v) in &s.ops {
            *self.ops.entry(k.clone()).or_default() += v;
        }
    }
}

/// A failed invariant, with what reproduces it.
#[derive(Debug)]
struct Failure {
    seed: u64,
    round: u32,
    what: String,
    trace: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "seed {} round {}: {}", self.seed, self.round, self.what)?;
        writeln!(f, "last requests:")?;
        for l in &self.trace {
            writeln!(f, "  {l}")?;
        }
        // The features decide the mix of operations, so the replay needs the same ones.
        let features = if cfg!(feature = "datafusion") {
            "fuzz,datafusion"
        } else {
            "fuzz"
        };
        write!(
            f,
            "reproduce: CRYO_SIM_SEED={} cargo test -p cryo-core --features {features} --test sim -- replay --nocapture",
            self.seed
        )
    }
}

static RUNS: AtomicU64 = AtomicU64::new(0);

fn run_seed(seed: u64) -> Result<Stats, Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    // Cryo's names, snapshot ids and retry jitter from the seed too: every task of the run
    // polls on this thread.
    cryo_core::clock::seed_thread_randomness(Some(seed));
    let out = rt.block_on(simulate(seed));
    cryo_core::clock::seed_thread_randomness(None);
    out
}

async fn simulate(seed: u64) -> Result<Stats, Failure> {
    let mut rng = Rng::new(seed);
    let faults = Faults::from_rng(&mut rng);
    let sched = Sched::new(seed, faults);
    let store = Arc::new(SimStore::new(Arc::clone(&sched)));
    // A fresh authority per run: the in-memory stores live for the whole process.
    let authority = format!("sim-{seed}-{}", RUNS.fetch_add(1, Ordering::SeqCst));
    cryo_core::io::install_memory_store(&authority, Arc::clone(&store) as _)
        .expect("install store");
    let stop = Arc::new(AtomicBool::new(false));
    let releaser = tokio::spawn(Arc::clone(&sched).run(Arc::clone(&stop)));
    let out = simulate_on(seed, &mut rng, &sched, &store, &authority).await;
    stop.store(true, Ordering::SeqCst);
    let _ = releaser.await;
    cryo_core::io::uninstall_memory_store(&authority).expect("uninstall store");
    out
}

async fn simulate_on(
    seed: u64,
    rng: &mut Rng,
    sched: &Arc<Sched>,
    store: &Arc<SimStore>,
    authority: &str,
) -> Result<Stats, Failure> {
    let mut stats = Stats::default();
    let fail = |round: u32, what: String| Failure {
        seed,
        round,
        what,
        trace: sched.trace_tail(if verbose() { 400 } else { 40 }),
    };
    let clock: Arc<dyn Clock> = Arc::new(SimClock(Arc::clone(sched)));
    let warehouse = format!("memory://{authority}/wh");
    let config = CatalogConfig::new(
        "sim",
        [("type", "hadoop"), ("warehouse", warehouse.as_str())],
    );
    let catalog = ACTOR
        .scope(Actor::Checker, Catalog::connect(config))
        .await
        .map_err(|e| fail(0, format!("connect: {e}")))?;
    let catalog = Arc::new(catalog);
    let id = TableId::parse("db.t").expect("id");
    let version = if rng.chance(0.35) {
        FormatVersion::V3
    } else {
        FormatVersion::V2
    };
    let mut new = NewTable::new(table::schema())
        .with_partition_spec(table::spec())
        .with_format_version(version)
        .with_property("commit.retry.num-retries", "6")
        // The codec is not what the simulation tests, and zstd's contexts, made per file and
        // page, were a tenth of its time.
        .with_property("write.parquet.compression-codec", "uncompressed");
    if rng.chance(0.5) {
        new = new.with_property("commit.manifest.min-count-to-merge", "3");
    }
    ACTOR
        .scope(Actor::Checker, catalog.create_table(&id, new))
        .await
        .map_err(|e| fail(0, format!("create table: {e}")))?;
    let model = Arc::new(tokio::sync::Mutex::new(Model::default()));
    let rounds = 3 + rng.below(5) as u32;
    let mut next_writer = 0usize;
    let mut lineage = check::Lineage::default();
    let mut parsed = check::Parsed::default();

    for round in 1..=rounds {
        stats.rounds = round;
        sched.set_faults(true);
        // Writers and one Cryo operation, side by side.
        let writers = 1 + rng.below(2);
        let mut tasks = Vec::new();
        for _ in 0..writers {
            let mut w = Writer {
                index: next_writer,
                rng: Rng::new(rng.next_u64()),
                catalog: Arc::clone(&catalog),
                table: id.clone(),
                clock: Arc::clone(&clock),
            };
            next_writer += 1;
            let actions = 1 + rng.below(4);
            let model = Arc::clone(&model);
            tasks.push(tokio::spawn(ACTOR.scope(
                Actor::Writer(w.index),
                async move {
                    let mut results = Vec::new();
                    for _ in 0..actions {
                        results.push(w.act(&model).await);
                    }
                    results
                },
            )));
        }
        let op = (round > 1 || rng.chance(0.3)).then(|| CryoOp::pick(rng));
        let cryo = op.clone().map(|op| {
            let catalog = Arc::clone(&catalog);
            let id = id.clone();
            let clock = Arc::clone(&clock);
            let sched = Arc::clone(sched);
            tokio::spawn(ACTOR.scope(Actor::Cryo, async move {
                let run = ops::run(&op, &catalog, &id, clock);
                // `biased`: a dead process does nothing more, whatever tokio would draw.
                tokio::select! {
                    biased;
                    () = sched.killed() => None,
                    r = run => Some(r),
                }
            }))
        });
        for t in tasks {
            for r in t
                .await
                .map_err(|e| fail(round, format!("writer panicked: {e}")))?
            {
                if verbose() {
                    eprintln!("round {round}: writer: {r:?}");
                }
                match r {
                    Ok(Done::Committed) => stats.writer_commits += 1,
                    Ok(Done::GaveUp(_)) => stats.writer_gave_up += 1,
                    Err(_) => stats.writer_errors += 1,
                }
            }
        }
        if let (Some(op), Some(cryo)) = (op, cryo) {
            *stats.ops.entry(op.name()).or_default() += 1;
            let ended = cryo
                .await
                .map_err(|e| fail(round, format!("Cryo panicked running {op:?}: {e}")))?;
            if verbose() {
                let said = match &ended {
                    None => "killed".to_string(),
                    Some(Ok(e)) => format!("committed: {}, {}", e.committed, e.summary),
                    Some(Err(e)) => format!("error: {e}"),
                };
                eprintln!("round {round}: {op:?}: {said}");
            }
            match ended {
                None => stats.cryo_killed += 1,
                Some(Ok(ended)) => {
                    if ended.committed {
                        stats.cryo_committed += 1;
                    } else {
                        stats.cryo_ended_clean += 1;
                    }
                }
                Some(Err(Error::Internal(m))) => {
                    return Err(fail(
                        round,
                        format!("{op:?} failed with an internal error: {m}"),
                    ));
                }
                Some(Err(_)) => stats.cryo_errors += 1,
            }
        }
        // Every actor idle: drain what a killed Cryo left running, then check.
        sched.set_faults(false);
        tokio::task::yield_now().await;
        sched.restart_cryo();
        sched.set_bypass(true);
        let t0 = Instant::now();
        let checked = check_round(
            &catalog,
            &id,
            &model,
            (&mut lineage, &mut parsed),
            store,
            round,
            &fail,
        )
        .await;
        stats.check_s += t0.elapsed().as_secs_f64();
        sched.set_bypass(false);
        checked?;
    }

    // The end, every actor idle: one orphan removal of everything written before now finds
    // what every abandoned attempt left.
    let now = sched.now_ms();
    sched.set_bypass(true);
    ACTOR
        .scope(
            Actor::Checker,
            ops::final_orphan_removal(&catalog, &id, Arc::clone(&clock), now),
        )
        .await
        .map_err(|e| fail(rounds + 1, format!("final orphan removal: {e}")))?;
    let refs = check_round(
        &catalog,
        &id,
        &model,
        (&mut lineage, &mut parsed),
        store,
        rounds + 1,
        &fail,
    )
    .await?;
    let root = format!("memory://{authority}/wh/db/t");
    check::no_leftovers(store, &refs, &root)
        .await
        .map_err(|e| fail(rounds + 1, e))?;
    stats.requests = sched.released();
    stats.trace = sched.digest();
    Ok(stats)
}

async fn check_round(
    catalog: &Catalog,
    id: &TableId,
    model: &tokio::sync::Mutex<Model>,
    (lineage, parsed): (&mut check::Lineage, &mut check::Parsed),
    store: &SimStore,
    round: u32,
    fail: &dyn Fn(u32, String) -> Failure,
) -> Result<check::References, Failure> {
    ACTOR
        .scope(Actor::Checker, async {
            let head = catalog
                .load_table(id)
                .await
                .map_err(|e| fail(round, format!("load: {e}")))?;
            let mut m = model.lock().await;
            m.settle();
            check::rows_match(&head, &m.rows, lineage)
                .await
                .map_err(|e| fail(round, e))?;
            check::metadata_valid(&head, store, parsed)
                .await
                .map_err(|e| fail(round, e))
        })
        .await
}

fn verbose() -> bool {
    std::env::var_os("CRYO_SIM_VERBOSE").is_some()
}

fn seeds_from_env() -> (u64, u64) {
    let first = std::env::var("CRYO_SIM_FIRST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let n = std::env::var("CRYO_SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    (first, n)
}

/// The seeds `CRYO_SIM_SEEDS` (40 by default) from `CRYO_SIM_FIRST` (0), or as many as
/// `CRYO_SIM_SECONDS` allows, on `CRYO_SIM_THREADS` threads (1): every invariant holds for each.
#[test]
fn seeds() {
    let (first, n) = seeds_from_env();
    let budget = std::env::var("CRYO_SIM_SECONDS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok());
    // `CRYO_SIM_THREADS` runs seeds side by side, each on a runtime of its own.
    let threads = std::env::var("CRYO_SIM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let started = Instant::now();
    let next = AtomicU64::new(first);
    let mut total = Stats::default();
    let mut failures = Vec::new();
    let mut ran = 0u64;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let (mut total, mut failures, mut ran) = (Stats::default(), Vec::new(), 0u64);
                    loop {
                        let seed = next.fetch_add(1, Ordering::SeqCst);
                        if seed >= first + n
                            || budget.is_some_and(|b| started.elapsed().as_secs_f64() >= b)
                        {
                            break;
                        }
                        ran += 1;
                        if (seed - first).is_multiple_of(10_000) && seed > first {
                            eprintln!("... seed {seed}, {:.0} s", started.elapsed().as_secs_f64());
                        }
                        match run_seed(seed) {
                            Ok(s) => total.add(&s),
                            Err(f) => {
                                eprintln!("{f}\n");
                                failures.push(f.seed);
                            }
                        }
                    }
                    (total, failures, ran)
                })
            })
            .collect();
        for w in workers {
            let (t, f, r) = w.join().expect("a simulation thread panicked");
            total.add(&t);
            failures.extend(f);
            ran += r;
        }
    });
    failures.sort_unstable();
    eprintln!(
        "{ran} seeds from {first} in {:.1} s ({:.1} s of it in the checks): {} rounds, {} requests; writers {} commits, {} gave up, {} errors; \
         Cryo {} committed, {} ended with nothing to commit, {} typed errors, {} killed; operations {:?}",
        started.elapsed().as_secs_f64(),
        total.check_s,
        total.rounds,
        total.requests,
        total.writer_commits,
        total.writer_gave_up,
        total.writer_errors,
        total.cryo_committed,
        total.cryo_ended_clean,
        total.cryo_errors,
        total.cryo_killed,
        total.ops,
    );
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
    assert!(
        total.writer_commits > 0 && total.cryo_committed > 0,
        "the runs did something"
    );
}

/// Seeds that found a bug, or caught a weakened validation (the README's mutation table): each
/// runs in every `cargo test`, so the interleavings that found them keep being checked. A change to the
/// simulator's draws moves them: find them again then (the README says how).
const REGRESSIONS: &[(u64, &str)] = &[
    (
        1,
        "compaction wrote no lineage columns: v3 rows got new _row_ids",
    ),
    (
        75,
        "the commit driver did not look for its own snapshot after a lost swap: data deleted",
    ),
    (
        87,
        "the commit driver deleted what it wrote after a commit of unknown outcome",
    ),
    (
        107,
        "compaction validated against the head, not the snapshot it planned from: deletes lost",
    ),
    (
        13926,
        "compaction into a new default spec ignored equality deletes of the old spec's partition \
         added after its base: deleted rows came back",
    ),
    (26861, "the same, found twice in the 100,000-seed run"),
    (
        80927,
        "compaction deleted the files of a group it dropped after a lost swap whose commit had \
         landed (and been expired away by a writer): a live data file deleted",
    ),
];

#[test]
fn regressions() {
    for (seed, what) in REGRESSIONS {
        if let Err(f) = run_seed(*seed) {
            panic!("regression seed {seed} ({what}):\n{f}");
        }
    }
}

/// One seed (`CRYO_SIM_SEED`), with its report.
#[test]
fn replay() {
    let Some(seed) = std::env::var("CRYO_SIM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    else {
        return;
    };
    match run_seed(seed) {
        Ok(s) => eprintln!("seed {seed}: {s:?}"),
        Err(f) => panic!("{f}"),
    }
}

/// A seed fixes the run. `CRYO_SIM_SURVEY=N` (20): N seeds from `CRYO_SIM_FIRST` (0), each run
/// twice in this process; fails if any two runs of a seed release different requests (the digest
/// of every release: actor, kind, path, verdict); with `CRYO_SIM_HUNT=S` as well: seed S up to N
/// times, until it fails.
#[test]
fn determinism_survey() {
    let n = std::env::var("CRYO_SIM_SURVEY")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(20);
    if let Some(seed) = std::env::var("CRYO_SIM_HUNT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        for i in 0..n {
            if let Err(f) = run_seed(seed) {
                panic!("attempt {i}: {f}");
            }
            eprintln!("=== attempt {i} passed");
        }
        return;
    }
    let (first, _) = seeds_from_env();
    let mut diverged = Vec::new();
    for seed in first..first + n {
        let a = run_seed(seed).unwrap_or_else(|f| panic!("{f}"));
        let b = run_seed(seed).unwrap_or_else(|f| panic!("{f}"));
        if a.trace != b.trace {
            eprintln!(
                "seed {seed} diverges: {} / {} requests, killed {}, ops {:?}",
                a.requests, b.requests, a.cryo_killed, a.ops
            );
            diverged.push(seed);
        }
    }
    assert!(diverged.is_empty(), "seeds whose runs differ: {diverged:?}");
}
