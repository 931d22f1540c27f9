//! The one run loop: a fleet plan, a governor, destinations; receipts for every decision.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::{Deserialize, Serialize};

use super::controls::controls_from_receipts;
use super::native::Native;
use super::run::{MaintenanceOptions, NATIVE_ENGINE};
use super::{Destination, SqlEngine};
use crate::catalog::{Catalog, TableId};
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::govern::{
    CoordinatorLoad, Decision, DeferReason, Governor, LoadSnapshot, LockGuard, Outcome, Probe,
    Slot, TableLocks, TableState,
};
use crate::ops::Operation;
use crate::plan::{MaintenancePlan, PlannedStep, TableControl, TablePlan};
use crate::progress::{ProgressSink, report};
use crate::receipt::{Footprint, Receipt, ReceiptLog, ReceiptStatus};
use crate::render::{RenderedTable, render_table};

/// How a run waits for the gate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Pacing {
    /// Tables side by side as the governor admits them; a deferred step is asked about again
    /// when its retry is due, until the deadline (the default for fleet runs).
    #[default]
    Governed,
    /// Table after table in plan order, each step started as soon as the gate admits it (no
    /// admission receipt: the step's own receipt follows at once); a step the gate holds back is
    /// deferred to the next run, not waited for ([`MaintenanceRun`](super::MaintenanceRun)).
    OnePass,
}

/// How a fleet run routes and paces its work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FleetOptions {
    /// What every run takes: dry run (the default; a dry run consults the governor once per
    /// table and reports what would run where: native steps compute what they would change, SQL
    /// steps show their statements), actor, window, deadline, and the native engine's options.
    #[serde(flatten)]
    pub run: MaintenanceOptions,
    /// How the run waits for the gate.
    pub pacing: Pacing,
    /// Where tables go unless a route says otherwise (`native`, or a destination's name).
    pub default_destination: String,
    /// Per-table destinations, by `namespace.table`.
    pub routes: BTreeMap<String, String>,
    /// Tables whose planned steps read more than this many bytes go to
    /// [`FleetOptions::large_table_destination`] (tables that outgrow one machine).
    pub large_table_bytes: Option<u64>,
    /// The destination for large tables.
    pub large_table_destination: Option<String>,
    /// Shortest wait before a deferred step is tried again.
    pub min_retry_ms: u64,
    /// Minimum time between two runs of an operation on the same table, checked against the
    /// tables' controls ([`FleetRun::with_controls`] and the receipt log) before each step; the
    /// planner's defaults ([`PlanOptions::cooldowns_ms`](crate::plan::PlanOptions)).
    pub cooldowns_ms: BTreeMap<Operation, i64>,
}

impl Default for FleetOptions {
    fn default() -> Self {
        Self {
            run: MaintenanceOptions::default(),
            pacing: Pacing::default(),
            default_destination: NATIVE_ENGINE.into(),
            routes: BTreeMap::new(),
            large_table_bytes: None,
            large_table_destination: None,
            min_retry_ms: 1_000,
            cooldowns_ms: crate::plan::PlanOptions::default().cooldowns_ms,
        }
    }
}

impl FleetOptions {
    /// Reject nonsensical options.
    pub fn validate(&self) -> Result<()> {
        self.run.validate()?;
        if self.large_table_bytes.is_some() != self.large_table_destination.is_some() {
            return Err(Error::validation(
                "large_table_bytes and large_table_destination go together",
            ));
        }
        if self.min_retry_ms == 0 {
            return Err(Error::validation("min_retry_ms must be positive"));
        }
        if self.cooldowns_ms.values().any(|c| *c < 0) {
            return Err(Error::validation("cooldowns must not be negative"));
        }
        Ok(())
    }
}

/// How a table ended in a fleet run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TableStatus {
    /// Every step ran (or, in a dry run, would run).
    Done,
    /// A step failed; the later ones were skipped.
    Failed,
    /// Some steps did not start (deferred past the deadline, the window, or a busy engine).
    Deferred,
    /// Nothing to do, or not to be done (replaced table, render skips).
    Skipped,
}

/// One table's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TableReport {
    /// Table.
    pub table: TableId,
    /// Destination its steps went to.
    pub destination: String,
    /// How it ended.
    pub status: TableStatus,
    /// Steps that ran and succeeded (or dry-ran).
    pub steps_done: usize,
    /// Steps that failed.
    pub steps_failed: usize,
    /// Steps that never started.
    pub steps_deferred: usize,
    /// Steps skipped.
    pub steps_skipped: usize,
    /// Times the governor deferred this table.
    pub deferrals: usize,
}

/// What a fleet run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FleetOutcome {
    /// The plan's fingerprint.
    pub plan_fingerprint: String,
    /// Whether nothing was changed on purpose.
    pub dry_run: bool,
    /// Every decision, in the order it was taken.
    pub receipts: Vec<Receipt>,
    /// Per table, in plan order.
    pub tables: Vec<TableReport>,
    /// Wall time.
    pub duration_ms: u64,
}

impl FleetOutcome {
    /// Receipts with `status`.
    pub fn count(&self, status: ReceiptStatus) -> usize {
        self.receipts.iter().filter(|r| r.status == status).count()
    }
}

/// A fleet run: a builder that ends in [`FleetRun::execute`].
#[derive(Debug)]
pub struct FleetRun<'a> {
    catalog: &'a Catalog,
    plan: &'a MaintenancePlan,
    pub(super) options: FleetOptions,
    destinations: BTreeMap<String, Destination>,
    governor: Arc<Mutex<Governor>>,
    locks: Option<Arc<dyn TableLocks>>,
    log: Option<ReceiptLog>,
    clock: Arc<dyn Clock>,
    progress: Option<ProgressSink>,
    controls: BTreeMap<TableId, TableControl>,
    /// Progress stage name.
    stage: &'static str,
}

/// A table's progress through the loop.
struct Work<'p> {
    plan: &'p TablePlan,
    /// Whether the receipts for the steps the planner left out are written (they are made when
    /// the table is taken up, at that instant).
    skips_recorded: bool,
    destination: String,
    steps: Vec<&'p PlannedStep>,
    next: usize,
    not_before_ms: i64,
    guard: Option<LockGuard>,
    rendered: Option<RenderedTable>,
    verified: bool,
    running: bool,
    done: bool,
    last_defer: Option<String>,
    deferrals: usize,
    /// When the governor was first asked about the current step (its queueing delay).
    first_deferred_ms: Option<i64>,
    /// Deferred because the destination's slots were taken: asked again as soon as one frees.
    waiting_for_slot: bool,
}

/// What a finished step sends back to the loop.
struct StepDone {
    work: usize,
    slot: Slot,
    receipt: Receipt,
    /// Time the step waited for admission.
    queue_delay_ms: i64,
    /// Other queries' queueing on the destination when the step ended (see [`impact`]).
    impact: f64,
}

impl<'a> FleetRun<'a> {
    /// Run `plan` against `catalog`; the native engine is always a destination (`native`).
    pub fn new(catalog: &'a Catalog, plan: &'a MaintenancePlan) -> Self {
        Self {
            catalog,
            plan,
            options: FleetOptions::default(),
            destinations: BTreeMap::from([(NATIVE_ENGINE.to_string(), Destination::Native)]),
            governor: Arc::new(Mutex::new(Governor::default())),
            locks: None,
            log: None,
            clock: Arc::new(SystemClock),
            progress: None,
            controls: BTreeMap::new(),
            stage: "fleet",
        }
    }

    /// Name the progress stage (`fleet`, or `run` for [`MaintenanceRun`](super::MaintenanceRun)).
    pub(super) fn with_stage(mut self, stage: &'static str) -> Self {
        self.stage = stage;
        self
    }

    /// Per-table controls checked before every step (a table paused since the plan was made is
    /// not touched; an operation still cooling down is deferred), folded together with what the
    /// receipt log ([`FleetRun::with_receipt_log`]) says ran when.
    #[must_use]
    pub fn with_controls(mut self, controls: BTreeMap<TableId, TableControl>) -> Self {
        self.controls = controls;
        self
    }

    /// Replace the options.
    #[must_use]
    pub fn with_options(mut self, options: FleetOptions) -> Self {
        self.options = options;
        self
    }

    /// Change nothing (the default), or carry the plan out.
    #[must_use]
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.options.run.dry_run = dry_run;
        self
    }

    /// Add (or replace) a destination.
    #[must_use]
    pub fn with_destination(mut self, name: impl Into<String>, destination: Destination) -> Self {
        self.destinations.insert(name.into(), destination);
        self
    }

    /// Add an SQL engine as a destination.
    #[must_use]
    pub fn with_engine(self, name: impl Into<String>, engine: Arc<dyn SqlEngine>) -> Self {
        self.with_destination(name, Destination::Sql(engine))
    }

    /// The governor (shared, so its learned state outlives the run).
    #[must_use]
    pub fn with_governor(mut self, governor: Arc<Mutex<Governor>>) -> Self {
        self.governor = governor;
        self
    }

    /// Per-table locks.
    #[must_use]
    pub fn with_locks(mut self, locks: Arc<dyn TableLocks>) -> Self {
        self.locks = Some(locks);
        self
    }

    /// Append every receipt to this log as it is made.
    #[must_use]
    pub fn with_receipt_log(mut self, log: impl Into<ReceiptLog>) -> Self {
        self.log = Some(log.into());
        self
    }

    /// Time source.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Progress: stage `fleet`, one unit per table as each finishes.
    #[must_use]
    pub fn with_progress(mut self, progress: ProgressSink) -> Self {
        self.progress = Some(progress);
        self
    }

    /// The destination a table goes to.
    fn route(&self, table: &TablePlan) -> String {
        if let Some(d) = self.options.routes.get(&table.table.to_string()) {
            return d.clone();
        }
        if let (Some(limit), Some(dest)) = (
            self.options.large_table_bytes,
            &self.options.large_table_destination,
        ) {
            let bytes: u64 = table.steps.iter().map(PlannedStep::input_bytes).sum();
            if bytes > limit {
                return dest.clone();
            }
        }
        self.options.default_destination.clone()
    }

    /// Whether a waiting table is to be tried now: its retry is due, or the deadline has passed
    /// (whatever retry it was given, a backoff or a window opening tomorrow: `try_start` then
    /// ends it with that reason rather than the run sleeping past its deadline).
    fn due(&self, w: &Work<'_>, now: i64) -> bool {
        w.not_before_ms <= now || self.options.run.deadline_ms.is_some_and(|d| now >= d)
    }

    /// Whether `works[i]`'s next step may be asked about now: it is due, and under one-pass
    /// pacing it is the first unfinished table and nothing runs (`idle`).
    fn ready(&self, works: &[Work<'_>], i: usize, now: i64, idle: bool) -> bool {
        let w = &works[i];
        if w.done || w.running || !self.due(w, now) {
            return false;
        }
        self.options.pacing == Pacing::Governed || (idle && works[..i].iter().all(|w| w.done))
    }

    /// Carry the plan out. Fails only on an invalid plan or options, an unknown destination, or a
    /// receipt log that cannot be written; everything that happens to a table is a receipt.
    pub async fn execute(mut self) -> Result<FleetOutcome> {
        let started = Instant::now();
        self.options.validate()?;
        self.plan.verify()?;
        self.fold_in_the_log().await?;
        let mut receipts = Vec::new();
        for skipped in &self.plan.skipped_tables {
            let r = self
                .receipt(&skipped.table, None, ReceiptStatus::Skipped)
                .with_reason(skipped.reason.clone());
            self.record(&mut receipts, vec![r]).await?;
        }
        let mut works = self.prepare()?;
        let total = works.len() as u64;
        let mut finished = works.iter().filter(|w| w.done).count() as u64;
        report(self.progress.as_ref(), self.stage, finished, total, None);

        let mut running = FuturesUnordered::new();
        loop {
            let now = self.clock.now_ms();
            let mut probes: BTreeMap<String, Probe> = BTreeMap::new();
            for i in 0..works.len() {
                if !works[i].skips_recorded
                    && (self.options.pacing == Pacing::Governed
                        || works[..i].iter().all(|w| w.done))
                {
                    let skips = self.take_up(&mut works[i]);
                    self.record(&mut receipts, skips).await?;
                }
                if !self.ready(&works, i, now, running.is_empty()) {
                    continue;
                }
                let w = &mut works[i];
                let mut new = Vec::new();
                let started = self.try_start(i, w, now, &mut probes, &mut new).await;
                if let Some(fut) = started {
                    running.push(fut);
                }
                self.record(&mut receipts, new).await?;
                if w.done {
                    finished += 1;
                    report(
                        self.progress.as_ref(),
                        self.stage,
                        finished,
                        total,
                        Some(w.plan.table.to_string()),
                    );
                }
            }
            if running.is_empty() && works.iter().all(|w| w.done) {
                break;
            }
            // A table whose step was skipped without admission can go on at once.
            let now = self.clock.now_ms();
            if (0..works.len()).any(|i| self.ready(&works, i, now, running.is_empty())) {
                continue;
            }
            // Wait for a step to finish or the next deferred table to become due.
            let wake = works
                .iter()
                .filter(|w| !w.done && !w.running)
                .map(|w| w.not_before_ms)
                .chain(self.options.run.deadline_ms)
                .filter(|t| *t > now)
                .min();
            let sleep_ms = wake.map(|t| (t - now).max(1) as u64);
            let done = next_or_wake(&mut running, sleep_ms, self.options.min_retry_ms).await;
            if let Some(d) = done {
                let (new, table_done) = self.finish_step(&mut works, d);
                if let Some(table) = table_done {
                    finished += 1;
                    report(
                        self.progress.as_ref(),
                        self.stage,
                        finished,
                        total,
                        Some(table),
                    );
                }
                self.record(&mut receipts, new).await?;
            }
        }
        let tables = works.iter().map(|w| table_report(w, &receipts)).collect();
        Ok(FleetOutcome {
            plan_fingerprint: self.plan.fingerprint.clone(),
            dry_run: self.options.run.dry_run,
            receipts,
            tables,
            duration_ms: started.elapsed().as_millis() as u64,
        })
    }

    /// Cooldowns hold across runs and processes that share the receipt log: fold what it says
    /// ran when into the tables' controls.
    async fn fold_in_the_log(&mut self) -> Result<()> {
        // The log gives when operations last ran: it matters only to cooldowns (a one-pass
        // run of a plan has none, and need not read a log that only grows).
        if self.options.cooldowns_ms.is_empty() {
            return Ok(());
        }
        if let Some(log) = &self.log {
            for (id, control) in controls_from_receipts(&log.read().await?) {
                self.controls.entry(id).or_default().merge(&control);
            }
        }
        Ok(())
    }

    /// Every planned table as work: its destination, its steps in order, its statements rendered
    /// for an SQL destination.
    fn prepare(&self) -> Result<Vec<Work<'_>>> {
        let mut works = Vec::with_capacity(self.plan.tables.len());
        for table in &self.plan.tables {
            let destination = self.route(table);
            let Some(dest) = self.destinations.get(&destination) else {
                return Err(Error::validation(format!(
                    "table {} is routed to `{destination}`, which is not a destination of this run (known: {})",
                    table.table,
                    self.destinations
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            };
            let rendered = match dest {
                Destination::Native => None,
                Destination::Sql(engine) => Some(render_table(
                    table,
                    engine.dialect(),
                    self.plan.created_at_ms,
                )),
            };
            let mut steps: Vec<&PlannedStep> = table.steps.iter().collect();
            steps.sort_by_key(|s| s.operation);
            works.push(Work {
                plan: table,
                skips_recorded: false,
                destination,
                done: steps.is_empty(),
                steps,
                next: 0,
                not_before_ms: i64::MIN,
                guard: None,
                rendered,
                verified: false,
                running: false,
                last_defer: None,
                deferrals: 0,
                first_deferred_ms: None,
                waiting_for_slot: false,
            });
        }
        Ok(works)
    }

    /// A step ended: give its slot back (and its outcome to the bandit), wake tables waiting for
    /// a slot on that destination, and advance its table. Returns the receipts to record and,
    /// when the table is done, its name.
    fn finish_step(&self, works: &mut [Work<'_>], d: StepDone) -> (Vec<Receipt>, Option<String>) {
        let StepDone {
            work,
            slot,
            receipt,
            queue_delay_ms,
            impact,
        } = d;
        if let Ok(mut g) = self.governor.lock() {
            g.release(&slot);
            if !self.options.run.dry_run {
                g.record(
                    &slot,
                    &Outcome {
                        succeeded: receipt.status == ReceiptStatus::Succeeded,
                        queue_delay_ms,
                        impact,
                        duration_ms: receipt.duration_ms.unwrap_or(0) as i64,
                    },
                );
            }
        }
        // A freed slot: whoever waits for one on that destination asks again now.
        let now = self.clock.now_ms();
        for other in &mut *works {
            if other.waiting_for_slot
                && !other.running
                && !other.done
                && other.destination == slot.destination
            {
                other.not_before_ms = other.not_before_ms.min(now);
                other.waiting_for_slot = false;
            }
        }
        let w = &mut works[work];
        w.running = false;
        w.next += 1;
        let failed = receipt.status == ReceiptStatus::Failed;
        let mut new = vec![receipt];
        if failed {
            let op = w.steps[w.next - 1].operation;
            for step in &w.steps[w.next..] {
                new.push(
                    on(
                        self.receipt(&w.plan.table, Some(step.operation), ReceiptStatus::Skipped),
                        &self.destinations[&w.destination],
                    )
                    .with_reason(format!("{op} failed earlier on this table")),
                );
            }
            w.next = w.steps.len();
        }
        let mut table_done = None;
        if w.next >= w.steps.len() {
            w.done = true;
            w.guard = None;
            table_done = Some(w.plan.table.to_string());
        }
        (new, table_done)
    }

    /// Ask everything that decides whether `w`'s next step may start now. Returns the step's
    /// future when it was admitted; receipts go to `out`.
    #[allow(clippy::too_many_arguments, clippy::too_many_lines)] // every admission rule, in order
    async fn try_start<'s>(
        &'s self,
        index: usize,
        w: &mut Work<'s>,
        now: i64,
        probes: &mut BTreeMap<String, Probe>,
        out: &mut Vec<Receipt>,
    ) -> Option<futures::future::BoxFuture<'s, StepDone>> {
        let dest = &self.destinations[&w.destination];
        let id = &w.plan.table;
        let step = w.steps[w.next];
        let defer_rest = |w: &mut Work<'s>, reason: String, out: &mut Vec<Receipt>| {
            for s in &w.steps[w.next..] {
                out.push(
                    on(
                        self.receipt(id, Some(s.operation), ReceiptStatus::Deferred),
                        dest,
                    )
                    .with_reason(reason.clone()),
                );
            }
            w.next = w.steps.len();
            w.done = true;
            w.guard = None;
        };
        if let Some(deadline) = self.options.run.deadline_ms
            && now >= deadline
        {
            defer_rest(
                w,
                format!("the run's deadline passed {} ms ago", now - deadline),
                out,
            );
            return None;
        }
        // The lock first: the governor is told who holds it.
        let mut lock_holder = None;
        if w.guard.is_none()
            && let Some(locks) = &self.locks
        {
            match locks
                .try_acquire(self.catalog.name(), id, &self.options.run.actor, now)
                .await
            {
                Ok(Ok(g)) => w.guard = Some(g),
                Ok(Err(holder)) => lock_holder = Some(holder),
                Err(e) => {
                    out.push(
                        on(self.receipt(id, None, ReceiptStatus::Failed), dest)
                            .with_reason(format!("could not take the table lock: {e}")),
                    );
                    defer_rest(w, "the table lock could not be taken".into(), out);
                    return None;
                }
            }
        }
        if lock_holder.is_none() && !w.verified {
            if let Some(r) = self.same_table(w.plan).await {
                let reason = r.reason.clone().unwrap_or_default();
                out.push(on(r, dest));
                for s in &w.steps[w.next..] {
                    out.push(
                        on(
                            self.receipt(id, Some(s.operation), ReceiptStatus::Skipped),
                            dest,
                        )
                        .with_reason(reason.clone()),
                    );
                }
                w.next = w.steps.len();
                w.done = true;
                w.guard = None;
                return None;
            }
            w.verified = true;
        }
        // A step the destination's dialect rendered no statement for needs no admission.
        if let Some(r) = &w.rendered
            && !r
                .steps
                .iter()
                .any(|s| s.operation == step.operation && !s.statements.is_empty())
        {
            let reasons: Vec<String> = r
                .skipped
                .iter()
                .filter(|s| s.operation == step.operation)
                .map(|s| s.reason.clone())
                .collect();
            let reason = if reasons.is_empty() {
                format!("{} rendered no statement for it", dest.kind())
            } else {
                reasons.join("; ")
            };
            out.push(
                on(
                    self.receipt(id, Some(step.operation), ReceiptStatus::Skipped),
                    dest,
                )
                .with_reason(reason)
                .with_detail("destination", w.destination.clone()),
            );
            w.next += 1;
            if w.next >= w.steps.len() {
                w.done = true;
                w.guard = None;
            }
            return None;
        }
        let control = self.controls.get(id);
        let state = TableState {
            paused: control.and_then(TableControl::pause),
            cooldown_until_ms: control
                .and_then(|c| c.cooldown_until_ms(step.operation, &self.options.cooldowns_ms, now)),
            window: self.options.run.window,
            deadline_ms: match (
                self.options.run.deadline_ms,
                control.and_then(|c| c.deadline_ms),
            ) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            lock_holder,
        };
        if !probes.contains_key(&w.destination) {
            let p = match dest {
                Destination::Native => Ok(native_probe(&w.destination, now)),
                Destination::Sql(engine) => engine.probe(&w.destination, now).await,
            };
            probes.insert(w.destination.clone(), p);
        }
        let probe = &probes[&w.destination];
        let Ok(mut governor) = self.governor.lock() else {
            defer_rest(
                w,
                "the governor's state is poisoned (a panic elsewhere)".into(),
                out,
            );
            return None;
        };
        let decision = governor.decide(&state, probe, now);
        drop(governor);
        match decision {
            Decision::Admit { slot } => {
                if self.options.pacing == Pacing::Governed {
                    out.push(
                        on(
                            self.receipt(id, Some(step.operation), ReceiptStatus::Admitted),
                            dest,
                        )
                        .with_detail("destination", slot.destination.clone())
                        .with_detail("coordinator", slot.coordinator.clone()),
                    );
                }
                w.running = true;
                w.last_defer = None;
                let queue_delay_ms = w.first_deferred_ms.take().map_or(0, |t| now - t);
                let rendered = w.rendered.as_ref().map(|r| {
                    (
                        r.steps
                            .iter()
                            .find(|s| s.operation == step.operation)
                            .cloned(),
                        r.skipped
                            .iter()
                            .filter(|s| s.operation == step.operation)
                            .map(|s| s.reason.clone())
                            .collect::<Vec<_>>(),
                    )
                });
                let dest_name = w.destination.clone();
                let fut = async move {
                    let (receipt, impact) = match dest {
                        Destination::Native => {
                            let native = Native {
                                catalog: self.catalog,
                                options: &self.options.run,
                                clock: Arc::clone(&self.clock),
                            };
                            let r = self.receipt(id, Some(step.operation), ReceiptStatus::Failed);
                            (native.step(r, id, step).await, 0.0)
                        }
                        Destination::Sql(engine) => {
                            let (rs, skips) = rendered.unwrap_or_default();
                            let r = self
                                .sql_step(engine.as_ref(), &slot, id, step, rs, skips)
                                .await;
                            let after = if self.options.run.dry_run {
                                None
                            } else {
                                engine.probe(&dest_name, self.clock.now_ms()).await.ok()
                            };
                            (r, impact(after.as_ref(), &slot.coordinator))
                        }
                    };
                    StepDone {
                        work: index,
                        slot,
                        receipt: on(receipt, dest).with_detail("destination", dest_name),
                        queue_delay_ms,
                        impact,
                    }
                };
                Some(Box::pin(fut))
            }
            Decision::Defer {
                reason,
                retry_after_ms,
            } => {
                let text = reason.to_string();
                w.deferrals += 1;
                if w.first_deferred_ms.is_none() {
                    w.first_deferred_ms = Some(now);
                }
                if w.last_defer.as_deref() != Some(text.as_str()) {
                    let mut r = self.receipt(id, Some(step.operation), ReceiptStatus::Deferred);
                    r.at_ms = now; // the instant of the decision, which retry_after counts from
                    let mut r = on(r, dest)
                        .with_reason(text.clone())
                        .with_detail("destination", w.destination.clone())
                        .with_detail("retry_after_ms", retry_after_ms);
                    if let DeferReason::Locked { holder } = &reason {
                        r = r.with_detail("lock_holder", holder.holder.clone());
                        if !holder.host.is_empty() {
                            r = r.with_detail("lock_holder_host", holder.host.clone());
                        }
                    }
                    out.push(r);
                    w.last_defer = Some(text.clone());
                }
                w.waiting_for_slot = matches!(reason, DeferReason::AtCapacity { .. });
                if matches!(reason, DeferReason::Cooldown { .. }) {
                    // The controls do not change during a run: this step waits for a later
                    // run, the table's next step is asked about at once.
                    w.next += 1;
                    w.not_before_ms = now;
                    w.last_defer = None;
                    w.first_deferred_ms = None;
                    if w.next >= w.steps.len() {
                        w.done = true;
                        w.guard = None;
                    }
                } else if matches!(reason, DeferReason::Paused { .. }) {
                    w.next += 1;
                    defer_rest(w, format!("not retried in this run ({text})"), out);
                } else if self.options.run.dry_run && !w.waiting_for_slot {
                    // A dry run reports the decision and moves on (it waits only for its own
                    // steps' slots, which free in moments).
                    w.next += 1;
                    defer_rest(w, format!("dry run: not retried ({text})"), out);
                } else if self.options.pacing == Pacing::OnePass && !w.waiting_for_slot {
                    w.next += 1;
                    defer_rest(w, format!("not retried in this run ({text})"), out);
                } else {
                    w.not_before_ms = retry_after_ms.max(now + self.options.min_retry_ms as i64);
                    // A lock we hold is given back while we wait.
                    w.guard = None;
                }
                None
            }
            Decision::PastDeadline { deadline_ms } => {
                defer_rest(
                    w,
                    format!("the run's deadline passed {} ms ago", now - deadline_ms),
                    out,
                );
                None
            }
        }
    }

    /// Run one step's rendered statements on an SQL engine.
    #[allow(clippy::too_many_arguments, clippy::too_many_lines)] // one step, one receipt
    async fn sql_step(
        &self,
        engine: &dyn SqlEngine,
        slot: &Slot,
        id: &TableId,
        step: &PlannedStep,
        rendered: Option<crate::render::RenderedStep>,
        skips: Vec<String>,
    ) -> Receipt {
        let mut r = self.receipt(id, Some(step.operation), ReceiptStatus::Failed);
        r.engine = engine.kind().to_string();
        let statements: Vec<String> = rendered
            .as_ref()
            .map(|s| s.statements.iter().map(|st| st.sql.clone()).collect())
            .unwrap_or_default();
        if statements.is_empty() {
            r.status = ReceiptStatus::Skipped;
            r.reason = Some(if skips.is_empty() {
                format!(
                    "{} rendered no statement for {}",
                    engine.kind(),
                    step.operation
                )
            } else {
                skips.join("; ")
            });
            return r;
        }
        r.details.insert(
            "statements".into(),
            serde_json::Value::from(statements.clone()),
        );
        if let Some(rs) = &rendered
            && !rs.notes.is_empty()
        {
            r.details
                .insert("notes".into(), serde_json::Value::from(rs.notes.clone()));
        }
        if !skips.is_empty() {
            r.details
                .insert("render_skips".into(), serde_json::Value::from(skips));
        }
        if self.options.run.dry_run {
            r.status = ReceiptStatus::DryRun;
            return r;
        }
        let started = Instant::now();
        let before = self.footprint(id).await;
        if let Some((snap, fp)) = before {
            r.snapshot_before = snap;
            r.before = Some(fp);
        }
        let mut query_ids = Vec::new();
        let mut results = Vec::new();
        let (mut queued, mut elapsed, mut attempts) = (0u64, 0u64, 0u32);
        let mut failure = None;
        for (n, sql) in statements.iter().enumerate() {
            match engine.execute(&slot.coordinator, sql).await {
                Ok(o) => {
                    // What the procedure reported (Spark: rewritten/added file counts; Trino:
                    // nothing for table procedures), first rows only.
                    if !o.columns.is_empty() && !o.rows.is_empty() {
                        let rows: Vec<serde_json::Value> = o
                            .rows
                            .iter()
                            .take(20)
                            .map(|row| {
                                serde_json::Value::Object(
                                    o.columns.iter().cloned().zip(row.iter().cloned()).collect(),
                                )
                            })
                            .collect();
                        results.push(serde_json::Value::Array(rows));
                    }
                    query_ids.extend(o.query_id);
                    queued += o.queued_ms;
                    elapsed += o.elapsed_ms;
                    attempts += o.attempts;
                }
                Err(e) => {
                    failure = Some((n, e));
                    break;
                }
            }
        }
        r.duration_ms = Some(started.elapsed().as_millis() as u64);
        r.details
            .insert("query_ids".into(), serde_json::Value::from(query_ids));
        r.details.insert("queued_ms".into(), queued.into());
        r.details.insert("engine_elapsed_ms".into(), elapsed.into());
        r.details.insert("attempts".into(), attempts.into());
        if !results.is_empty() {
            r.details
                .insert("results".into(), serde_json::Value::Array(results));
        }
        if let Some((snap_after, fp)) = self.footprint(id).await {
            r.after = Some(fp);
            if let Some(s) = snap_after
                && Some(s) != r.snapshot_before
            {
                r.snapshots_after = vec![s];
            }
        }
        match failure {
            None => r.status = ReceiptStatus::Succeeded,
            Some((n, e)) => {
                r.status = ReceiptStatus::Failed;
                r.reason = Some(format!(
                    "statement {} of {} failed: {e}",
                    n + 1,
                    statements.len()
                ));
                r.details.insert("error_code".into(), e.code().into());
            }
        }
        r
    }

    /// The table's current snapshot and live files/bytes, from its snapshot summary.
    async fn footprint(&self, id: &TableId) -> Option<(Option<i64>, Footprint)> {
        let loaded = self.catalog.load_table(id).await.ok()?;
        let Some(snap) = loaded.metadata.current_snapshot() else {
            return Some((None, Footprint::default()));
        };
        let summary = &snap.summary().additional_properties;
        let num = |k: &str| {
            summary
                .get(k)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Some((
            Some(snap.snapshot_id()),
            Footprint {
                files: num("total-data-files") + num("total-delete-files"),
                bytes: num("total-files-size"),
            },
        ))
    }

    /// A receipt of this run, on the native engine until [`on`] says otherwise.
    fn receipt(
        &self,
        table: &TableId,
        operation: Option<Operation>,
        status: ReceiptStatus,
    ) -> Receipt {
        Receipt::new(
            self.clock.now_ms(),
            self.catalog.name(),
            table.clone(),
            operation,
            NATIVE_ENGINE,
            status,
            self.options.run.actor.clone(),
        )
        .with_plan(self.plan.fingerprint.clone())
    }

    /// A table taken up: the receipts for the steps the planner left out, made now.
    fn take_up(&self, w: &mut Work<'_>) -> Vec<Receipt> {
        w.skips_recorded = true;
        let dest = &self.destinations[&w.destination];
        self.planner_skips(w.plan)
            .into_iter()
            .map(|r| on(r, dest))
            .collect()
    }

    /// Receipts for the steps the planner left out: deferred (a cooldown or outside the window:
    /// it will run later) or skipped (not needed or not possible).
    fn planner_skips(&self, table: &TablePlan) -> Vec<Receipt> {
        table
            .skipped
            .iter()
            .map(|s| {
                let status = if s.reason.starts_with("cooldown") || s.reason.starts_with("outside")
                {
                    ReceiptStatus::Deferred
                } else {
                    ReceiptStatus::Skipped
                };
                self.receipt(&table.table, Some(s.operation), status)
                    .with_reason(s.reason.clone())
            })
            .collect()
    }

    /// `None` when the table is still the one the plan was made for; else the receipt saying why
    /// it must not run (replaced since planning, or cannot be loaded).
    async fn same_table(&self, table: &TablePlan) -> Option<Receipt> {
        let id = &table.table;
        match self.catalog.load_table(id).await {
            Ok(loaded) => {
                let uuid = loaded.metadata.uuid().to_string();
                if !table.table_uuid.is_empty() && uuid != table.table_uuid {
                    return Some(
                        self.receipt(id, None, ReceiptStatus::Skipped)
                            .with_reason(format!(
                                "the table was replaced since planning (uuid {} in the plan, {uuid} now): plan again",
                                table.table_uuid
                            )),
                    );
                }
                None
            }
            Err(e) => Some(
                self.receipt(id, None, ReceiptStatus::Failed)
                    .with_reason(e.to_string())
                    .with_detail("error_code", e.code()),
            ),
        }
    }

    /// Redact, log and keep receipts.
    async fn record(&self, all: &mut Vec<Receipt>, new: Vec<Receipt>) -> Result<()> {
        if new.is_empty() {
            return Ok(());
        }
        let config = self.catalog.config();
        let new: Vec<Receipt> = new.into_iter().map(|r| r.redact(config)).collect();
        if let Some(log) = &self.log {
            log.append(&new).await?;
        }
        all.extend(new);
        Ok(())
    }
}

/// A receipt as made by the native run, re-labelled with this destination's engine.
fn on(mut r: Receipt, dest: &Destination) -> Receipt {
    r.engine = dest.kind().to_string();
    r
}

/// How much a finished step's engine made others wait: queued queries per running query on its
/// coordinator right after the step (0 when nothing queued or the probe failed). A step that
/// pushes an engine into queueing teaches the governor's bandit to admit less.
fn impact(after: Option<&LoadSnapshot>, coordinator: &str) -> f64 {
    after
        .and_then(|l| l.coordinators.iter().find(|c| c.coordinator == coordinator))
        .map_or(0.0, |c| {
            f64::from(c.queued_queries) / f64::from(c.running_queries.max(1))
        })
}

/// The native engine's load: this process; the governor's own in-flight count is what bounds it.
fn native_probe(destination: &str, now: i64) -> LoadSnapshot {
    LoadSnapshot {
        destination: destination.to_string(),
        taken_at_ms: now,
        coordinators: vec![CoordinatorLoad {
            coordinator: "local".into(),
            running_queries: 0,
            queued_queries: 0,
            maintenance_running: 0,
        }],
    }
}

fn table_report(w: &Work<'_>, receipts: &[Receipt]) -> TableReport {
    let mine = || {
        receipts
            .iter()
            .filter(move |r| r.table == w.plan.table && r.operation.is_some())
    };
    let count = |s: ReceiptStatus| mine().filter(|r| r.status == s).count();
    let steps_done = count(ReceiptStatus::Succeeded) + count(ReceiptStatus::DryRun);
    let steps_failed = count(ReceiptStatus::Failed);
    let steps_skipped = count(ReceiptStatus::Skipped);
    // A step deferred and later run has both receipts: count only steps that never ran.
    let ran: Vec<Operation> = mine()
        .filter(|r| {
            matches!(
                r.status,
                ReceiptStatus::Succeeded
                    | ReceiptStatus::DryRun
                    | ReceiptStatus::Failed
                    | ReceiptStatus::Skipped
            )
        })
        .filter_map(|r| r.operation)
        .collect();
    let mut deferred_ops: Vec<Operation> = mine()
        .filter(|r| r.status == ReceiptStatus::Deferred)
        .filter_map(|r| r.operation)
        .filter(|op| !ran.contains(op))
        .collect();
    deferred_ops.dedup();
    let steps_deferred = deferred_ops.len();
    let status = if steps_failed > 0 {
        TableStatus::Failed
    } else if steps_deferred > 0 {
        TableStatus::Deferred
    } else if steps_done == 0 {
        TableStatus::Skipped
    } else {
        TableStatus::Done
    };
    TableReport {
        table: w.plan.table.clone(),
        destination: w.destination.clone(),
        status,
        steps_done,
        steps_failed,
        steps_deferred,
        steps_skipped,
        deferrals: w.deferrals,
    }
}

/// The next step of `running` to end, or `None` once `sleep_ms` has passed (with nothing
/// running: after `sleep_ms`, or `idle_ms` if nothing is due). `biased`: a step that ended goes
/// before the timer, whatever tokio would draw.
async fn next_or_wake<F: Future>(
    running: &mut FuturesUnordered<F>,
    sleep_ms: Option<u64>,
    idle_ms: u64,
) -> Option<F::Output> {
    if running.is_empty() {
        tokio::time::sleep(Duration::from_millis(sleep_ms.unwrap_or(idle_ms))).await;
        return None;
    }
    let Some(ms) = sleep_ms else {
        return running.next().await;
    };
    tokio::select! {
        biased;
        d = running.next() => d,
        () = tokio::time::sleep(Duration::from_millis(ms)) => None,
    }
}
