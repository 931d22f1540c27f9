//! The admission policy: a pure function of a table's state, a destination's load and the
//! limits, kept in a small serializable [`Governor`] value.
//!
//! ```text
//! TableState ─┐
//! Probe ──────┼──decide──▶ Admit { slot }        → run it, then release(slot) (+ record(slot, outcome))
//! now_ms ─────┘            Defer { reason, retry_after_ms }  → ask again after that instant
//!                          PastDeadline { deadline_ms }      → give up on this table for this run
//! ```
//!
//! Checks run in a fixed order and the first that fails decides: deadline, pause, lock,
//! cooldown, off-peak window, then the destination: probe reachable, snapshot fresh, at least
//! one coordinator, destination cap, and a coordinator under its cap with engine headroom
//! (running and queued queries strictly below the thresholds).
//!
//! Concurrency is bounded by the caps and the engine's load, never by how many workers ask:
//! every admission adds one to the governor's own in-flight count for that coordinator, and a
//! coordinator counts `max(observed maintenance, own in-flight)` statements, because a probe
//! may not see a statement Cryo has just submitted. Own statements the probe does not show yet
//! are also added to the coordinator's running queries.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::bandit::{Arm, Bandit, Outcome, Tuned};
use super::lock::LockHolder;
use crate::error::{Error, Result};
use crate::plan::{Window, window_opens_in};

/// What the governor needs to know about one table, kept by the scheduler between runs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TableState {
    /// Paused, with the reason shown in the deferral.
    pub paused: Option<String>,
    /// No maintenance before this instant (ms since epoch).
    pub cooldown_until_ms: Option<i64>,
    /// Daily off-peak window; outside it nothing is admitted.
    pub window: Option<Window>,
    /// The table's work must be done by this instant; past it nothing is admitted.
    pub deadline_ms: Option<i64>,
    /// Who holds the table's lock, if someone else does.
    pub lock_holder: Option<LockHolder>,
}

/// Load of one coordinator (a Trino coordinator, a Spark driver) at probe time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordinatorLoad {
    /// Coordinator name (host, URL or cluster id); the round-robin order is by this name.
    pub coordinator: String,
    /// Queries running, Cryo's maintenance statements included.
    pub running_queries: u32,
    /// Queries waiting for resources.
    pub queued_queries: u32,
    /// Of the running queries, those that are maintenance statements (Cryo's or anyone's).
    pub maintenance_running: u32,
}

/// A destination's load, as a probe saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadSnapshot {
    /// Destination name (the engine a plan step is sent to).
    pub destination: String,
    /// When the probe ran (ms since epoch); an old snapshot defers.
    pub taken_at_ms: i64,
    /// One entry per coordinator.
    pub coordinators: Vec<CoordinatorLoad>,
}

/// A probe that could not read a destination's load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeFailure {
    /// Destination name.
    pub destination: String,
    /// What went wrong (unreachable, refused, timed out).
    pub reason: String,
}

/// What a load probe returns. A failure defers with its reason; it never admits.
pub type Probe = std::result::Result<LoadSnapshot, ProbeFailure>;

/// Admission limits of one destination. Plain values; [`Limits::validate`] rejects nonsense.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Hard cap: maintenance statements running at once on one coordinator.
    pub max_maintenance_per_coordinator: u32,
    /// Hard cap: maintenance statements running at once on the whole destination.
    pub max_maintenance_per_destination: u32,
    /// Headroom: admit on a coordinator only while it runs fewer queries than this.
    pub max_running_queries: u32,
    /// Headroom: admit on a coordinator only while fewer queries than this are queued.
    pub max_queued_queries: u32,
    /// How long to wait before asking again when the load, a lock or a pause defers (ms).
    pub backoff_ms: i64,
    /// A load snapshot older than this defers instead of being trusted (ms).
    pub max_load_age_ms: i64,
}

impl Default for Limits {
    /// One rewrite per coordinator and two per destination, only while fewer than 20 queries
    /// run and none is queued; ask again after a minute; trust a snapshot for 30 seconds.
    fn default() -> Self {
        Self {
            max_maintenance_per_coordinator: 1,
            max_maintenance_per_destination: 2,
            max_running_queries: 20,
            max_queued_queries: 1,
            backoff_ms: 60_000,
            max_load_age_ms: 30_000,
        }
    }
}

impl Limits {
    /// Reject limits that could never admit or never expire.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::validation(format!("governor limits: {m}")));
        if self.max_maintenance_per_coordinator == 0 || self.max_maintenance_per_destination == 0 {
            return bad(
                "max_maintenance_per_coordinator and max_maintenance_per_destination must be at least 1 (pause the table to stop maintenance)",
            );
        }
        if self.max_running_queries == 0 || self.max_queued_queries == 0 {
            return bad(
                "max_running_queries and max_queued_queries must be at least 1: admission needs fewer running and queued queries than these",
            );
        }
        if self.backoff_ms <= 0 {
            return bad("backoff_ms must be positive");
        }
        if self.max_load_age_ms <= 0 {
            return bad("max_load_age_ms must be positive");
        }
        Ok(())
    }
}

/// Where an admitted step runs. Hand it back with [`Governor::release`] when the step ends.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Slot {
    /// Destination name.
    pub destination: String,
    /// Coordinator the step is sent to.
    pub coordinator: String,
    /// The bandit arm whose limits admitted the step (`None` without a bandit); the outcome
    /// given to [`Governor::record`] is credited to it.
    pub arm: Option<Arm>,
}

/// Why a step was deferred. The `Display` text is written into the receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DeferReason {
    /// The table is paused.
    Paused {
        /// Why, as given by whoever paused it.
        reason: String,
    },
    /// Another worker holds the table's lock.
    Locked {
        /// Who holds it.
        holder: LockHolder,
    },
    /// The table is cooling down after its last maintenance.
    Cooldown {
        /// When the cooldown ends (ms since epoch).
        until_ms: i64,
    },
    /// Outside the table's off-peak window.
    OutsideWindow {
        /// The window.
        window: Window,
        /// How long until it opens (ms).
        opens_in_ms: i64,
    },
    /// The load probe could not read the destination.
    ProbeUnreachable {
        /// The probe's reason.
        reason: String,
    },
    /// The load snapshot is too old to trust.
    StaleLoad {
        /// Its age (ms).
        age_ms: i64,
        /// The limit (ms).
        max_age_ms: i64,
    },
    /// The probe reported no coordinator to send work to.
    NoCoordinators,
    /// Every coordinator with maintenance room lacks headroom; the least loaded one is named.
    EngineBusy {
        /// The least loaded coordinator with maintenance room.
        coordinator: String,
        /// Its running queries (own statements not yet seen by the probe included).
        running: u32,
        /// Its queued queries.
        queued: u32,
        /// Admission needs fewer running queries than this.
        max_running: u32,
        /// Admission needs fewer queued queries than this.
        max_queued: u32,
    },
    /// A hard cap on maintenance statements is reached: the destination's, or every
    /// coordinator's.
    AtCapacity {
        /// `None`: the destination's cap; otherwise every coordinator is at its cap and this is
        /// the least busy one.
        coordinator: Option<String>,
        /// Maintenance statements running there (own statements the probe missed included).
        running: u32,
        /// The cap.
        cap: u32,
    },
}

impl fmt::Display for DeferReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeferReason::Paused { reason } => write!(f, "paused: {reason}"),
            DeferReason::Locked { holder } if holder.host.is_empty() => write!(
                f,
                "locked by {} (pid {}) since {}",
                holder.holder,
                holder.pid,
                fmt_instant(holder.since_ms)
            ),
            DeferReason::Locked { holder } => write!(
                f,
                "locked by {} (pid {} on {}) since {}",
                holder.holder,
                holder.pid,
                holder.host,
                fmt_instant(holder.since_ms)
            ),
            DeferReason::Cooldown { until_ms } => {
                write!(f, "cooling down until {}", fmt_instant(*until_ms))
            }
            DeferReason::OutsideWindow {
                window,
                opens_in_ms,
            } => write!(
                f,
                "outside the off-peak window {:02}:00-{:02}:00 UTC (opens in {})",
                window.start_hour,
                window.end_hour,
                fmt_duration(*opens_in_ms)
            ),
            DeferReason::ProbeUnreachable { reason } => {
                write!(f, "load probe failed: {reason}")
            }
            DeferReason::StaleLoad { age_ms, max_age_ms } => write!(
                f,
                "load snapshot is {} old (trusted up to {})",
                fmt_duration(*age_ms),
                fmt_duration(*max_age_ms)
            ),
            DeferReason::NoCoordinators => write!(f, "the load probe reported no coordinator"),
            DeferReason::EngineBusy {
                coordinator,
                running,
                queued,
                max_running,
                max_queued,
            } => write!(
                f,
                "engine busy: {coordinator} runs {running} and queues {queued} queries \
                 (admits below {max_running} running and {max_queued} queued)"
            ),
            DeferReason::AtCapacity {
                coordinator: Some(c),
                running,
                cap,
            } => write!(
                f,
                "at capacity: every coordinator runs its cap of {cap} maintenance statements \
                 (the least busy, {c}, runs {running})"
            ),
            DeferReason::AtCapacity {
                coordinator: None,
                running,
                cap,
            } => write!(
                f,
                "at capacity: {running} maintenance statements on the destination (cap {cap})"
            ),
        }
    }
}

/// The governor's answer for one table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Run now, on this slot.
    Admit {
        /// Where.
        slot: Slot,
    },
    /// Not now; ask again once `retry_after_ms` has passed.
    Defer {
        /// Why.
        reason: DeferReason,
        /// The instant (ms since epoch, always after `now_ms`) before which asking again is
        /// pointless: the cooldown's end, the window's opening, or now plus the backoff.
        retry_after_ms: i64,
    },
    /// The table's deadline has passed: do not retry in this run (a receipt says "skipped").
    /// A distinct variant rather than a `Defer` so that no caller can requeue it by mistake.
    PastDeadline {
        /// The deadline (ms since epoch).
        deadline_ms: i64,
    },
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Admit { slot } => {
                write!(f, "admitted on {} ({})", slot.coordinator, slot.destination)
            }
            Decision::Defer {
                reason,
                retry_after_ms,
            } => write!(
                f,
                "deferred: {reason}; retry after {}",
                fmt_instant(*retry_after_ms)
            ),
            Decision::PastDeadline { deadline_ms } => {
                write!(f, "deadline {} has passed", fmt_instant(*deadline_ms))
            }
        }
    }
}

/// Per-destination state: limits, optional bandit, own in-flight slots, round-robin cursor.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
struct DestinationState {
    limits: Option<Limits>,
    bandit: Option<Bandit>,
    /// Slots Cryo holds per coordinator (only non-zero counts are kept).
    in_flight: BTreeMap<String, u32>,
    /// The coordinator of the last admission; the next starts after it.
    cursor: Option<String>,
}

/// Admission across destinations: limits per destination, the slots Cryo holds, the
/// round-robin cursors and, optionally, a [`Bandit`] per destination. One value shared by all
/// workers (behind a mutex), so that more workers never mean more parallel rewrites.
/// Serializable, so a scheduler can keep it between runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Governor {
    defaults: Limits,
    destinations: BTreeMap<String, DestinationState>,
}

impl Governor {
    /// A governor applying `defaults` to every destination without limits of its own.
    pub fn new(defaults: Limits) -> Result<Self> {
        defaults.validate()?;
        Ok(Self {
            defaults,
            destinations: BTreeMap::new(),
        })
    }

    /// Use `limits` for `destination` (the static limits when a bandit is attached).
    pub fn set_limits(&mut self, destination: &str, limits: Limits) -> Result<()> {
        limits.validate()?;
        self.dest_mut(destination).limits = Some(limits);
        Ok(())
    }

    /// Let `bandit` tune `destination`'s `max_running_queries` from outcomes; the hard caps
    /// stay the static ones.
    pub fn attach_bandit(&mut self, destination: &str, bandit: Bandit) {
        self.dest_mut(destination).bandit = Some(bandit);
    }

    /// The static limits of `destination`.
    pub fn limits(&self, destination: &str) -> &Limits {
        self.destinations
            .get(destination)
            .and_then(|d| d.limits.as_ref())
            .unwrap_or(&self.defaults)
    }

    /// The bandit attached to `destination`, if any.
    pub fn bandit(&self, destination: &str) -> Option<&Bandit> {
        self.destinations
            .get(destination)
            .and_then(|d| d.bandit.as_ref())
    }

    /// Slots Cryo holds on `destination` (all coordinators).
    pub fn in_flight(&self, destination: &str) -> u32 {
        self.destinations
            .get(destination)
            .map_or(0, |d| d.in_flight.values().sum())
    }

    /// Admit or defer one table's step. Pure but for the governor's own state: the same
    /// governor value and inputs always give the same decision. An admission takes a slot
    /// that stays held until [`Governor::release`].
    pub fn decide(&mut self, table: &TableState, probe: &Probe, now_ms: i64) -> Decision {
        if let Some(deadline_ms) = table.deadline_ms
            && now_ms >= deadline_ms
        {
            return Decision::PastDeadline { deadline_ms };
        }
        let destination = match probe {
            Ok(s) => s.destination.as_str(),
            Err(e) => e.destination.as_str(),
        };
        let backoff = now_ms.saturating_add(self.limits(destination).backoff_ms.max(1));
        let defer = |reason, retry_after_ms: i64| Decision::Defer {
            reason,
            retry_after_ms: retry_after_ms.max(now_ms.saturating_add(1)),
        };
        if let Some(reason) = &table.paused {
            return defer(
                DeferReason::Paused {
                    reason: reason.clone(),
                },
                backoff,
            );
        }
        if let Some(holder) = &table.lock_holder {
            return defer(
                DeferReason::Locked {
                    holder: holder.clone(),
                },
                backoff,
            );
        }
        if let Some(until_ms) = table.cooldown_until_ms
            && now_ms < until_ms
        {
            return defer(DeferReason::Cooldown { until_ms }, until_ms);
        }
        if let Some(window) = table.window
            && let Some(opens_in_ms) = window_opens_in(window, now_ms)
        {
            return defer(
                DeferReason::OutsideWindow {
                    window,
                    opens_in_ms,
                },
                now_ms.saturating_add(opens_in_ms),
            );
        }
        let snapshot = match probe {
            Ok(s) => s,
            Err(e) => {
                return defer(
                    DeferReason::ProbeUnreachable {
                        reason: e.reason.clone(),
                    },
                    backoff,
                );
            }
        };
        let static_limits = self.limits(destination).clone();
        let age_ms = now_ms.saturating_sub(snapshot.taken_at_ms).max(0);
        if age_ms > static_limits.max_load_age_ms {
            return defer(
                DeferReason::StaleLoad {
                    age_ms,
                    max_age_ms: static_limits.max_load_age_ms,
                },
                backoff,
            );
        }
        if snapshot.coordinators.is_empty() {
            return defer(DeferReason::NoCoordinators, backoff);
        }
        let dest = self.dest_mut(destination);
        let (limits, arm) = match dest.bandit.as_mut() {
            Some(bandit) => {
                let context = bandit.context(snapshot, now_ms);
                let Tuned { limits, arm, .. } = bandit.tune(context, &static_limits);
                (limits, Some(arm))
            }
            None => (static_limits, None),
        };
        match admit(dest, snapshot, &limits) {
            Ok(coordinator) => {
                *dest.in_flight.entry(coordinator.clone()).or_insert(0) += 1;
                dest.cursor = Some(coordinator.clone());
                Decision::Admit {
                    slot: Slot {
                        destination: destination.to_string(),
                        coordinator,
                        arm,
                    },
                }
            }
            Err(reason) => defer(reason, backoff),
        }
    }

    /// Give back a slot taken by [`Governor::decide`] (the step finished, failed or was
    /// cancelled). Releasing a slot that is not held does nothing.
    pub fn release(&mut self, slot: &Slot) {
        if let Some(dest) = self.destinations.get_mut(&slot.destination)
            && let Some(n) = dest.in_flight.get_mut(&slot.coordinator)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                dest.in_flight.remove(&slot.coordinator);
            }
        }
    }

    /// Teach the destination's bandit how the step admitted on `slot` went. Does nothing
    /// without a bandit or when the slot carries no arm.
    pub fn record(&mut self, slot: &Slot, outcome: &Outcome) {
        if let Some(arm) = &slot.arm
            && let Some(bandit) = self
                .destinations
                .get_mut(&slot.destination)
                .and_then(|d| d.bandit.as_mut())
        {
            bandit.record(arm, outcome);
        }
    }

    fn dest_mut(&mut self, destination: &str) -> &mut DestinationState {
        self.destinations
            .entry(destination.to_string())
            .or_default()
    }
}

/// One coordinator as the policy sees it: the probe's numbers merged with Cryo's own slots.
struct Seen {
    running: u32,
    queued: u32,
    maintenance: u32,
}

/// Pick the coordinator for one admission, or say why none fits.
fn admit(
    dest: &DestinationState,
    snapshot: &LoadSnapshot,
    limits: &Limits,
) -> std::result::Result<String, DeferReason> {
    // Duplicate names (a probe listing a coordinator twice) are summed; BTreeMap orders by name.
    let mut observed: BTreeMap<&str, (u32, u32, u32)> = BTreeMap::new();
    for c in &snapshot.coordinators {
        let e = observed.entry(c.coordinator.as_str()).or_default();
        e.0 = e.0.saturating_add(c.running_queries);
        e.1 = e.1.saturating_add(c.queued_queries);
        e.2 = e.2.saturating_add(c.maintenance_running);
    }
    let seen: BTreeMap<&str, Seen> = observed
        .into_iter()
        .map(|(name, (running, queued, observed_maint))| {
            let own = dest.in_flight.get(name).copied().unwrap_or(0);
            let maintenance = observed_maint.max(own);
            let unseen = maintenance - observed_maint;
            (
                name,
                Seen {
                    running: running.saturating_add(unseen),
                    queued,
                    maintenance,
                },
            )
        })
        .collect();
    // Own slots on coordinators the probe no longer lists still run somewhere.
    let missing: u32 = dest
        .in_flight
        .iter()
        .filter(|(name, _)| !seen.contains_key(name.as_str()))
        .map(|(_, n)| *n)
        .sum();
    let total = seen
        .values()
        .map(|s| s.maintenance)
        .fold(missing, u32::saturating_add);
    if total >= limits.max_maintenance_per_destination {
        return Err(DeferReason::AtCapacity {
            coordinator: None,
            running: total,
            cap: limits.max_maintenance_per_destination,
        });
    }
    let with_room: Vec<(&str, &Seen)> = seen
        .iter()
        .filter(|(_, s)| s.maintenance < limits.max_maintenance_per_coordinator)
        .map(|(n, s)| (*n, s))
        .collect();
    let has_headroom =
        |s: &Seen| s.running < limits.max_running_queries && s.queued < limits.max_queued_queries;
    // Round-robin: the first coordinator after the cursor (by name) that fits, wrapping.
    let after = dest.cursor.as_deref();
    let fits = |(name, s): &&(&str, &Seen)| has_headroom(s) && after.is_none_or(|a| *name > a);
    if let Some((name, _)) = with_room
        .iter()
        .find(fits)
        .or_else(|| with_room.iter().find(|(_, s)| has_headroom(s)))
    {
        return Ok((*name).to_string());
    }
    if let Some((name, s)) = with_room
        .iter()
        .min_by_key(|(name, s)| (s.running, s.queued, *name))
    {
        return Err(DeferReason::EngineBusy {
            coordinator: (*name).to_string(),
            running: s.running,
            queued: s.queued,
            max_running: limits.max_running_queries,
            max_queued: limits.max_queued_queries,
        });
    }
    // Every coordinator is at its cap: name the least busy one.
    let (name, s) = seen
        .iter()
        .min_by_key(|(name, s)| (s.maintenance, **name))
        .map_or(("", 0), |(n, s)| (*n, s.maintenance));
    Err(DeferReason::AtCapacity {
        coordinator: Some(name.to_string()),
        running: s,
        cap: limits.max_maintenance_per_coordinator,
    })
}

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;

fn fmt_duration(ms: i64) -> String {
    let ms = ms.max(0);
    if ms >= HOUR_MS {
        format!("{:.1}h", ms as f64 / HOUR_MS as f64)
    } else if ms >= MINUTE_MS {
        format!("{}m", ms / MINUTE_MS)
    } else {
        format!("{}s", ms / 1000)
    }
}

fn fmt_instant(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms since epoch"),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

impl Default for Governor {
    /// A governor with [`Limits::default`] for every destination.
    fn default() -> Self {
        Self {
            defaults: Limits::default(),
            destinations: BTreeMap::new(),
        }
    }
}
