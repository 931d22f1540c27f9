//! Governor and bandit invariants: property tests on the policy, and simulated engines for the
//! bandit (one where the best threshold is known, one driven through the governor by workers).

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::plan::Window;

const NOW: i64 = 1_800_000_000_000;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;

fn coordinator(name: &str, running: u32, queued: u32, maintenance: u32) -> CoordinatorLoad {
    CoordinatorLoad {
        coordinator: name.to_string(),
        running_queries: running,
        queued_queries: queued,
        maintenance_running: maintenance,
    }
}

#[allow(
    clippy::unnecessary_wraps,
    reason = "a probe result, as the governor takes it"
)]
fn snapshot(coordinators: Vec<CoordinatorLoad>, taken_at_ms: i64) -> Probe {
    Ok(LoadSnapshot {
        destination: "trino".to_string(),
        taken_at_ms,
        coordinators,
    })
}

fn idle(n: usize) -> Probe {
    snapshot(
        (0..n)
            .map(|i| coordinator(&format!("c{i}"), 0, 0, 0))
            .collect(),
        NOW,
    )
}

fn limits(per_coordinator: u32, per_destination: u32, running: u32, queued: u32) -> Limits {
    Limits {
        max_maintenance_per_coordinator: per_coordinator,
        max_maintenance_per_destination: per_destination,
        max_running_queries: running,
        max_queued_queries: queued,
        ..Limits::default()
    }
}

fn governor(l: Limits) -> Governor {
    Governor::new(l).unwrap()
}

fn holder() -> LockHolder {
    LockHolder {
        holder: "worker-7".to_string(),
        pid: 4242,
        since_ms: NOW - MINUTE,
        host: String::new(),
    }
}

/// The hard caps hold for Cryo's own slots merged with what the probe saw.
fn assert_caps(g: &Governor, probe: &Probe, l: &Limits, held: &[Slot]) {
    let Ok(s) = probe else { return };
    let mut own: BTreeMap<&str, u32> = BTreeMap::new();
    for slot in held {
        *own.entry(slot.coordinator.as_str()).or_default() += 1;
    }
    assert_eq!(g.in_flight("trino"), held.len() as u32);
    for (name, n) in &own {
        let c = s
            .coordinators
            .iter()
            .find(|c| c.coordinator == *name)
            .unwrap();
        // Every slot was admitted below the caps and the headroom, counting the slots before it.
        assert!(
            *n <= l.max_maintenance_per_coordinator,
            "{name}: {n} own slots"
        );
        let unseen = n.saturating_sub(c.maintenance_running);
        assert!(
            c.running_queries + unseen <= l.max_running_queries,
            "{name}: {} running + {unseen} unseen over {}",
            c.running_queries,
            l.max_running_queries
        );
    }
    if !held.is_empty() {
        // A coordinator the probe lists twice is one coordinator (the policy sums its entries).
        let mut observed: BTreeMap<&str, u32> = BTreeMap::new();
        for c in &s.coordinators {
            *observed.entry(c.coordinator.as_str()).or_default() += c.maintenance_running;
        }
        let total: u32 = observed
            .iter()
            .map(|(name, m)| (*m).max(own.get(name).copied().unwrap_or(0)))
            .sum();
        assert!(
            total <= l.max_maintenance_per_destination,
            "{total} on the destination"
        );
    }
}

fn limits_strategy() -> impl Strategy<Value = Limits> {
    (1u32..4, 1u32..8, 1u32..50, 1u32..5).prop_map(|(c, d, r, q)| limits(c, d, r, q))
}

fn load_strategy() -> impl Strategy<Value = Probe> {
    proptest::collection::vec((0u32..60, 0u32..6, 0u32..4, 0usize..6), 1..5).prop_map(|cs| {
        snapshot(
            cs.into_iter()
                .map(|(r, q, m, name)| coordinator(&format!("c{name}"), r.max(m), q, m))
                .collect(),
            NOW - 1000,
        )
    })
}

fn table_state_strategy() -> impl Strategy<Value = TableState> {
    (
        proptest::option::of("[a-z ]{1,12}"),
        proptest::option::of(-3 * HOUR..3 * HOUR),
        proptest::option::of((0u8..24, 0u8..25)),
        proptest::option::of(-3 * HOUR..3 * HOUR),
        proptest::bool::weighted(0.2),
    )
        .prop_map(|(paused, cooldown, window, deadline, locked)| TableState {
            paused,
            cooldown_until_ms: cooldown.map(|d| NOW + d),
            window: window.map(|(start_hour, end_hour)| Window {
                start_hour,
                end_hour,
            }),
            deadline_ms: deadline.map(|d| NOW + d),
            lock_holder: locked.then(holder),
        })
}

fn is_blocked(t: &TableState, now: i64) -> bool {
    t.paused.is_some()
        || t.lock_holder.is_some()
        || t.cooldown_until_ms.is_some_and(|c| now < c)
        || t.deadline_ms.is_some_and(|d| now >= d)
        || t.window
            .is_some_and(|w| crate::plan::window_opens_in(w, now).is_some())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any number of workers asking, any load, any interleaving of releases: Cryo's slots stay
    /// under the hard caps and the headroom, and N workers get min(N, K) slots where K depends
    /// on the load and the limits only.
    #[test]
    fn caps_hold_for_any_workers_and_load(l in limits_strategy(), probe in load_strategy(),
                                          ops in proptest::collection::vec(proptest::bool::weighted(0.7), 0..60)) {
        let mut g = governor(l.clone());
        let mut held: Vec<Slot> = Vec::new();
        for (i, ask) in ops.iter().enumerate() {
            if *ask || held.is_empty() {
                if let Decision::Admit { slot } = g.decide(&TableState::default(), &probe, NOW) {
                    held.push(slot);
                }
            } else {
                let slot = held.remove(i % held.len());
                g.release(&slot);
            }
            assert_caps(&g, &probe, &l, &held);
        }

        // Adding workers never adds parallel rewrites.
        let admitted = |workers: usize| {
            let mut g = governor(l.clone());
            (0..workers)
                .filter(|_| matches!(g.decide(&TableState::default(), &probe, NOW), Decision::Admit { .. }))
                .count()
        };
        let k = admitted(200);
        prop_assert!(k as u32 <= l.max_maintenance_per_destination);
        for workers in [0usize, 1, 2, 3, 5, 8, 13, 50] {
            prop_assert_eq!(admitted(workers), workers.min(k));
        }
    }

    /// A blocker in the table's state never admits; without one an idle engine admits.
    /// Every deferral names an instant after now, the right one for cooldowns and windows.
    #[test]
    fn table_blockers_defer(t in table_state_strategy(), offset in 0i64..(24 * HOUR)) {
        let now = NOW + offset;
        let mut g = governor(Limits::default());
        let probe = snapshot(vec![coordinator("c0", 0, 0, 0)], now);
        let d = g.decide(&t, &probe, now);
        if !is_blocked(&t, now) {
            prop_assert!(matches!(d, Decision::Admit { .. }), "{d}");
            return Ok(());
        }
        prop_assert_eq!(g.in_flight("trino"), 0);
        match &d {
            Decision::Admit { .. } => prop_assert!(false, "blocked table admitted: {t:?}"),
            Decision::PastDeadline { deadline_ms } => prop_assert!(now >= *deadline_ms),
            Decision::Defer { reason, retry_after_ms } => {
                prop_assert!(*retry_after_ms > now);
                prop_assert!(t.deadline_ms.is_none_or(|dl| now < dl));
                match reason {
                    DeferReason::Paused { .. } => prop_assert!(t.paused.is_some()),
                    DeferReason::Locked { holder } => prop_assert_eq!(Some(holder), t.lock_holder.as_ref()),
                    DeferReason::Cooldown { until_ms } => prop_assert_eq!(retry_after_ms, until_ms),
                    DeferReason::OutsideWindow { opens_in_ms, .. } => {
                        prop_assert_eq!(*retry_after_ms, now + opens_in_ms);
                        // The window is open when the deferral says to come back.
                        let w = t.window.unwrap();
                        prop_assert!(crate::plan::window_opens_in(w, *retry_after_ms).is_none());
                    }
                    other => prop_assert!(false, "unexpected reason {other:?}"),
                }
            }
        }
    }

    /// A probe that could not reach the destination defers with its reason, whatever the limits.
    #[test]
    fn unreachable_probe_defers(l in limits_strategy(), reason in "[a-z: ]{1,30}") {
        let mut g = governor(l.clone());
        let probe: Probe = Err(ProbeFailure { destination: "trino".to_string(), reason: reason.clone() });
        let d = g.decide(&TableState::default(), &probe, NOW);
        prop_assert_eq!(d, Decision::Defer {
            reason: DeferReason::ProbeUnreachable { reason },
            retry_after_ms: NOW + l.backoff_ms,
        });
        prop_assert_eq!(g.in_flight("trino"), 0);
    }

    /// Same governor state and inputs, same decision and same next state — also after a JSON
    /// round trip of the governor.
    #[test]
    fn decisions_are_deterministic(l in limits_strategy(), probe in load_strategy(),
                                   t in table_state_strategy(), history in 0usize..6, offset in 0i64..(24 * HOUR)) {
        let mut g = governor(l);
        for _ in 0..history {
            g.decide(&TableState::default(), &probe, NOW);
        }
        let json = serde_json::to_string(&g).unwrap();
        let mut twin = g.clone();
        let mut thawed: Governor = serde_json::from_str(&json).unwrap();
        let now = NOW + offset;
        let probe = probe.map(|mut s| { s.taken_at_ms = now; s });
        let d = g.decide(&t, &probe, now);
        prop_assert_eq!(&d, &twin.decide(&t, &probe, now));
        prop_assert_eq!(&d, &thawed.decide(&t, &probe, now));
        prop_assert_eq!(&g, &twin);
        prop_assert_eq!(&g, &thawed);
        if let Decision::Defer { retry_after_ms, .. } = d {
            prop_assert!(retry_after_ms > now);
        }
    }

    /// Round-robin: admissions rotate over the coordinators with headroom, in name order, so
    /// counts never differ by more than one; busy coordinators are skipped.
    #[test]
    fn round_robin_spreads(n in 1usize..6, busy in proptest::collection::vec(any::<bool>(), 6), asks in 1usize..40) {
        let mut g = governor(limits(100, 1000, 10, 1));
        let probe = snapshot(
            (0..n).map(|i| coordinator(&format!("c{i}"), if busy[i] { 10 } else { 0 }, 0, 0)).collect(),
            NOW,
        );
        let free: Vec<String> = (0..n).filter(|i| !busy[*i]).map(|i| format!("c{i}")).collect();
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        let mut order = Vec::new();
        for _ in 0..asks {
            match g.decide(&TableState::default(), &probe, NOW) {
                Decision::Admit { slot } => {
                    *counts.entry(slot.coordinator.clone()).or_default() += 1;
                    order.push(slot.coordinator.clone());
                    g.release(&slot);
                }
                Decision::Defer { reason: DeferReason::EngineBusy { .. }, .. } => prop_assert!(free.is_empty()),
                other => prop_assert!(false, "{other}"),
            }
        }
        if !free.is_empty() {
            prop_assert!(counts.keys().all(|c| free.contains(c)));
            let max = counts.values().max().copied().unwrap_or(0);
            let min = free.iter().map(|c| counts.get(c).copied().unwrap_or(0)).min().unwrap_or(0);
            prop_assert!(max - min <= 1, "{counts:?}");
            for (i, c) in order.iter().enumerate() {
                prop_assert_eq!(c, &free[i % free.len()]);
            }
        }
    }
}

#[test]
fn stale_load_and_no_coordinators_defer() {
    let mut g = governor(Limits::default());
    let stale = snapshot(vec![coordinator("c0", 0, 0, 0)], NOW - 31_000);
    let d = g.decide(&TableState::default(), &stale, NOW);
    assert_eq!(
        d,
        Decision::Defer {
            reason: DeferReason::StaleLoad {
                age_ms: 31_000,
                max_age_ms: 30_000
            },
            retry_after_ms: NOW + 60_000
        }
    );
    assert_eq!(
        d.to_string(),
        "deferred: load snapshot is 31s old (trusted up to 30s); retry after 2027-01-15 08:01:00 UTC"
    );
    let empty = snapshot(vec![], NOW);
    assert!(matches!(
        g.decide(&TableState::default(), &empty, NOW),
        Decision::Defer {
            reason: DeferReason::NoCoordinators,
            ..
        }
    ));
}

#[test]
fn own_slots_count_before_the_probe_sees_them() {
    // The probe still shows no maintenance: Cryo's own slot counts anyway, on its coordinator
    // (cap 1) and in its running queries.
    let mut g = governor(limits(1, 4, 5, 1));
    let probe = snapshot(
        vec![coordinator("a", 4, 0, 0), coordinator("b", 3, 0, 0)],
        NOW,
    );
    let first = g.decide(&TableState::default(), &probe, NOW);
    let Decision::Admit { slot } = first else {
        panic!("{first}")
    };
    assert_eq!(slot.coordinator, "a");
    let second = g.decide(&TableState::default(), &probe, NOW);
    let Decision::Admit { slot: second } = second else {
        panic!("{second}")
    };
    assert_eq!(second.coordinator, "b");
    // a: cap reached; b: 3 running + 1 unseen = 4 < 5 but its cap of 1 is reached too.
    let third = g.decide(&TableState::default(), &probe, NOW);
    assert_eq!(
        third,
        Decision::Defer {
            reason: DeferReason::AtCapacity {
                coordinator: Some("a".to_string()),
                running: 1,
                cap: 1
            },
            retry_after_ms: NOW + 60_000
        }
    );
    // Once the probe sees the statements, max(observed, own) does not count them twice.
    let seen = snapshot(
        vec![coordinator("a", 5, 0, 1), coordinator("b", 4, 0, 1)],
        NOW,
    );
    g.release(&second);
    let after = g.decide(&TableState::default(), &seen, NOW);
    assert!(
        matches!(
            &after,
            Decision::Defer {
                reason: DeferReason::AtCapacity {
                    coordinator: Some(_),
                    ..
                },
                ..
            }
        ),
        "{after}"
    );
    // Someone else's maintenance counts against the destination cap.
    let mut g = governor(limits(2, 2, 50, 1));
    let others = snapshot(
        vec![coordinator("a", 9, 0, 1), coordinator("b", 9, 0, 1)],
        NOW,
    );
    let d = g.decide(&TableState::default(), &others, NOW);
    assert_eq!(
        d.to_string(),
        "deferred: at capacity: 2 maintenance statements on the destination (cap 2); retry after 2027-01-15 08:01:00 UTC"
    );
}

#[test]
fn engine_busy_names_the_least_loaded_coordinator() {
    let mut g = governor(limits(1, 4, 20, 2));
    let probe = snapshot(
        vec![
            coordinator("a", 25, 0, 0),
            coordinator("b", 12, 3, 0),
            coordinator("c", 30, 9, 1),
        ],
        NOW,
    );
    let d = g.decide(&TableState::default(), &probe, NOW);
    assert_eq!(
        d,
        Decision::Defer {
            reason: DeferReason::EngineBusy {
                coordinator: "b".to_string(),
                running: 12,
                queued: 3,
                max_running: 20,
                max_queued: 2
            },
            retry_after_ms: NOW + 60_000
        }
    );
    let Decision::Defer { reason, .. } = d else {
        unreachable!()
    };
    assert_eq!(
        reason.to_string(),
        "engine busy: b runs 12 and queues 3 queries (admits below 20 running and 2 queued)"
    );
}

#[test]
fn reasons_read_well() {
    let w = Window {
        start_hour: 22,
        end_hour: 6,
    };
    let t = TableState {
        window: Some(w),
        ..TableState::default()
    };
    // NOW is 08:00 UTC: the window opens in 14 hours.
    let d = governor(Limits::default()).decide(&t, &idle(1), NOW);
    assert_eq!(
        d.to_string(),
        "deferred: outside the off-peak window 22:00-06:00 UTC (opens in 14.0h); retry after 2027-01-15 22:00:00 UTC"
    );
    let t = TableState {
        lock_holder: Some(holder()),
        ..TableState::default()
    };
    let d = governor(Limits::default()).decide(&t, &idle(1), NOW);
    assert_eq!(
        d.to_string(),
        "deferred: locked by worker-7 (pid 4242) since 2027-01-15 07:59:00 UTC; retry after 2027-01-15 08:01:00 UTC"
    );
    let t = TableState {
        paused: Some("migrating".to_string()),
        deadline_ms: Some(NOW),
        ..TableState::default()
    };
    let d = governor(Limits::default()).decide(&t, &idle(1), NOW);
    assert_eq!(d, Decision::PastDeadline { deadline_ms: NOW });
    assert_eq!(d.to_string(), "deadline 2027-01-15 08:00:00 UTC has passed");
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"decision": "past_deadline", "deadline_ms": NOW})
    );
}

#[test]
fn limits_and_config_validation() {
    assert!(Limits::default().validate().is_ok());
    for bad in [
        limits(0, 1, 1, 1),
        limits(1, 0, 1, 1),
        limits(1, 1, 0, 1),
        limits(1, 1, 1, 0),
        Limits {
            backoff_ms: 0,
            ..Limits::default()
        },
        Limits {
            max_load_age_ms: -1,
            ..Limits::default()
        },
    ] {
        let err = Governor::new(bad.clone()).unwrap_err();
        assert_eq!(err.code(), "validation", "{bad:?}");
        let mut g = governor(Limits::default());
        assert!(g.set_limits("trino", bad).is_err());
    }
    assert!(BanditConfig::default().validate().is_ok());
    let bad_configs = [
        BanditConfig {
            thresholds: vec![],
            ..BanditConfig::default()
        },
        BanditConfig {
            thresholds: vec![0, 4],
            ..BanditConfig::default()
        },
        BanditConfig {
            thresholds: vec![4, 4],
            ..BanditConfig::default()
        },
        BanditConfig {
            hour_bands: 5,
            ..BanditConfig::default()
        },
        BanditConfig {
            queue_levels: vec![3, 2],
            ..BanditConfig::default()
        },
        BanditConfig {
            delay_weight: 1.5,
            ..BanditConfig::default()
        },
        BanditConfig {
            memory: 1,
            ..BanditConfig::default()
        },
    ];
    for c in bad_configs {
        assert!(Bandit::new(c.clone()).is_err(), "{c:?}");
    }
}

#[test]
fn limits_per_destination() {
    let mut g = governor(limits(1, 1, 20, 1));
    g.set_limits("spark", limits(3, 3, 20, 1)).unwrap();
    let spark = Ok(LoadSnapshot {
        destination: "spark".to_string(),
        taken_at_ms: NOW,
        coordinators: vec![coordinator("driver", 0, 0, 0)],
    });
    let admitted = (0..10)
        .filter(|_| {
            matches!(
                g.decide(&TableState::default(), &spark, NOW),
                Decision::Admit { .. }
            )
        })
        .count();
    assert_eq!(admitted, 3);
    assert_eq!(g.in_flight("spark"), 3);
    assert_eq!(g.in_flight("trino"), 0);
    assert!(matches!(
        g.decide(&TableState::default(), &idle(2), NOW),
        Decision::Admit { .. }
    ));
    assert!(matches!(
        g.decide(&TableState::default(), &idle(2), NOW),
        Decision::Defer {
            reason: DeferReason::AtCapacity {
                coordinator: None,
                ..
            },
            ..
        }
    ));
}

// ---------------------------------------------------------------- bandit

#[test]
fn reward_orders_outcomes() {
    let ok = Outcome {
        succeeded: true,
        queue_delay_ms: 0,
        impact: 0.0,
        duration_ms: 10 * MINUTE,
    };
    assert!((ok.reward(0.5) - 1.0).abs() < 1e-12);
    let failed = Outcome {
        succeeded: false,
        ..ok
    };
    assert!(failed.reward(0.5).abs() < f64::EPSILON);
    let waited = Outcome {
        queue_delay_ms: 10 * MINUTE,
        ..ok
    };
    assert!((waited.reward(1.0) - 0.5).abs() < 1e-12);
    let slowed = Outcome { impact: 1.0, ..ok };
    assert!((slowed.reward(0.0) - 0.5).abs() < 1e-12);
    assert!(waited.reward(0.5) < ok.reward(0.5) && slowed.reward(0.5) < ok.reward(0.5));
    let garbage = Outcome {
        succeeded: true,
        queue_delay_ms: -5,
        impact: f64::NAN,
        duration_ms: -1,
    };
    assert!((garbage.reward(f64::NAN) - 1.0).abs() < 1e-12);
    let infinite = Outcome {
        impact: f64::INFINITY,
        ..ok
    };
    assert!((infinite.reward(0.5) - 0.5).abs() < 1e-12);
}

#[test]
fn static_limits_until_min_observations() {
    let config = BanditConfig {
        thresholds: vec![5, 10, 20, 40],
        min_observations: 5,
        hour_bands: 1,
        ..BanditConfig::default()
    };
    let mut b = Bandit::new(config).unwrap();
    let fixed = Limits::default();
    let ctx = b.context(&idle(1).unwrap(), NOW);
    let good = Outcome {
        succeeded: true,
        queue_delay_ms: 0,
        impact: 0.0,
        duration_ms: MINUTE,
    };
    for i in 0..5 {
        let t = b.tune(ctx, &fixed);
        assert_eq!(t.source, TuningSource::Static);
        assert_eq!(t.limits, fixed);
        assert_eq!(t.arm.threshold, 20);
        assert_eq!(b.observations(ctx), i);
        b.record(&t.arm, &good);
    }
    // The static threshold is an arm: its outcomes taught it.
    assert_eq!(b.recommend(ctx), Some(20));
    let t = b.tune(ctx, &fixed);
    assert_eq!(t.source, TuningSource::Learned);
    assert!(
        b.config()
            .thresholds
            .contains(&t.limits.max_running_queries)
    );
    assert!(t.confidence > 0.0 && t.confidence <= 1.0);
    // The drawn threshold stays until the next outcome.
    assert_eq!(b.tune(ctx, &fixed).arm, t.arm);
    // Another context has learned nothing.
    let other = Context {
        hour_band: 0,
        queue_level: 0,
    };
    let night = BanditConfig {
        hour_bands: 2,
        queue_levels: vec![1, 10],
        ..BanditConfig::default()
    };
    let b2 = Bandit::new(night).unwrap();
    let busy = snapshot(
        vec![coordinator("a", 0, 4, 0), coordinator("b", 0, 7, 0)],
        NOW,
    );
    let c = b2.context(&busy.unwrap(), NOW + 6 * HOUR);
    assert_eq!(
        c,
        Context {
            hour_band: 1,
            queue_level: 2
        }
    );
    assert_eq!(b2.observations(other), 0);
    assert_eq!(b2.recommend(other), None);
}

/// A tiny deterministic generator for the simulated engines (`SplitMix64`).
struct SimRng(u64);

impl SimRng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

/// A simulated engine with a true capacity `capacity`: other queries running are uniform in
/// `0..=MAX_BACKGROUND` each minute; a step waits until fewer than the threshold run, then
/// runs alongside them. Above capacity it slows the others (impact `4·overload/C`), runs
/// longer and fails more (`5% + overload/C`); below it, steps wait for headroom they did not
/// need.
struct SimEngine {
    capacity: u32,
}

const MAX_BACKGROUND: u32 = 24;
const BASE_TICKS: f64 = 4.0;

impl SimEngine {
    fn effects(&self, background: u32) -> (f64, f64, f64) {
        let c = f64::from(self.capacity);
        let overload = f64::from((background + 1).saturating_sub(self.capacity));
        let impact = 4.0 * overload / c;
        let fail = (0.05 + overload / c).min(0.95);
        let ticks = BASE_TICKS * (1.0 + overload / c);
        (impact, fail, ticks)
    }

    fn run(&self, threshold: u32, rng: &mut SimRng) -> Outcome {
        let mut waited = 0i64;
        let background = loop {
            let b = rng.below(u64::from(MAX_BACKGROUND) + 1) as u32;
            if b < threshold || waited >= 600 {
                break b;
            }
            waited += 1;
        };
        let (impact, fail, ticks) = self.effects(background);
        Outcome {
            succeeded: !rng.chance(fail),
            queue_delay_ms: waited * MINUTE,
            impact,
            duration_ms: (ticks * MINUTE as f64) as i64,
        }
    }

    /// The expected reward of a threshold, computed exactly (the "known best" comes from here).
    fn expected_reward(&self, threshold: u32, delay_weight: f64) -> f64 {
        let n = f64::from(MAX_BACKGROUND + 1);
        let admitted = threshold.min(MAX_BACKGROUND + 1);
        let p = f64::from(admitted) / n;
        let mut total = 0.0;
        for waited in 0..2000 {
            let p_wait = (1.0 - p).powi(waited) * p;
            for b in 0..admitted {
                let (impact, fail, ticks) = self.effects(b);
                let o = Outcome {
                    succeeded: true,
                    queue_delay_ms: i64::from(waited) * MINUTE,
                    impact,
                    duration_ms: (ticks * MINUTE as f64) as i64,
                };
                total += p_wait / f64::from(admitted) * (1.0 - fail) * o.reward(delay_weight);
            }
        }
        total
    }
}

/// Two hour bands with different true capacities: in each, the bandit's recommendation after
/// enough rounds is the threshold with the highest expected reward (which equals the capacity),
/// and the hard caps in its limits never move while it explores.
#[test]
fn bandit_converges_to_the_best_threshold() {
    let thresholds = vec![4, 8, 12, 16, 20, 24];
    let engines = [SimEngine { capacity: 16 }, SimEngine { capacity: 8 }];
    for engine in &engines {
        let best = thresholds
            .iter()
            .copied()
            .max_by(|a, b| {
                engine
                    .expected_reward(*a, 0.5)
                    .total_cmp(&engine.expected_reward(*b, 0.5))
            })
            .unwrap();
        assert_eq!(best, engine.capacity, "the simulator's best threshold");
    }
    let fixed = limits(2, 3, 12, 1);
    for seed in [1u64, 7, 42, 2024] {
        let mut b = Bandit::new(BanditConfig {
            thresholds: thresholds.clone(),
            min_observations: 20,
            hour_bands: 2,
            memory: 100_000,
            seed,
            ..BanditConfig::default()
        })
        .unwrap();
        let mut rng = SimRng(seed ^ 0xdead_beef);
        let mut late_choices = [0usize; 2];
        let rounds = 3000;
        for round in 0..rounds {
            for (band, engine) in engines.iter().enumerate() {
                let now = NOW - 8 * HOUR + band as i64 * 12 * HOUR + (round % 12) * HOUR;
                let ctx = b.context(&idle(1).unwrap(), now);
                assert_eq!(usize::from(ctx.hour_band), band);
                let t = b.tune(ctx, &fixed);
                // Exploring never touches the hard caps or the other limits.
                assert_eq!(t.limits.max_maintenance_per_coordinator, 2);
                assert_eq!(t.limits.max_maintenance_per_destination, 3);
                assert_eq!(
                    Limits {
                        max_running_queries: fixed.max_running_queries,
                        ..t.limits.clone()
                    },
                    fixed
                );
                assert!(t.limits.validate().is_ok());
                if round >= 20 {
                    assert_eq!(t.source, TuningSource::Learned);
                }
                let threshold = t.limits.max_running_queries;
                if round >= rounds - 300 && threshold == engine.capacity {
                    late_choices[band] += 1;
                }
                b.record(&t.arm, &engine.run(threshold, &mut rng));
            }
        }
        for (band, engine) in engines.iter().enumerate() {
            let ctx = Context {
                hour_band: band as u8,
                queue_level: 0,
            };
            assert_eq!(
                b.recommend(ctx),
                Some(engine.capacity),
                "seed {seed}, capacity {}",
                engine.capacity
            );
            assert!(
                late_choices[band] >= 200,
                "seed {seed}: best threshold drawn {} of the last 300 rounds",
                late_choices[band]
            );
        }
        let ctx = Context {
            hour_band: 1,
            queue_level: 0,
        };
        assert!(b.tune(ctx, &fixed).confidence > 0.5);
    }
}

/// The governor with a bandit attached, driven by many workers against a simulated two-
/// coordinator engine whose probe lags a minute behind: at every tick the maintenance really
/// running stays under the hard caps, whatever the number of workers, and the bandit learns.
#[test]
fn governor_with_bandit_never_exceeds_caps() {
    let fixed = limits(2, 3, 10, 1);
    let capacity = 8u32;
    let mut peak_by_workers = Vec::new();
    for workers in [1usize, 4, 12, 40] {
        let mut g = governor(fixed.clone());
        let config = BanditConfig {
            thresholds: vec![4, 8, 12, 16],
            min_observations: 10,
            hour_bands: 1,
            seed: workers as u64,
            ..BanditConfig::default()
        };
        g.attach_bandit("trino", Bandit::new(config).unwrap());
        let mut rng = SimRng(99);
        // (worker, slot, started tick, ticks to run, first asked tick)
        let mut running: Vec<(usize, Slot, i64, i64, i64)> = Vec::new();
        let mut waiting_since: Vec<Option<i64>> = vec![None; workers];
        let mut busy = vec![false; workers];
        let mut visible: BTreeMap<String, u32> = BTreeMap::new();
        let mut peak = 0usize;
        for tick in 0..400i64 {
            let now = NOW + tick * MINUTE;
            let background: BTreeMap<&str, u32> = ["c1", "c2"]
                .into_iter()
                .map(|c| (c, rng.below(17) as u32))
                .collect();
            // Finish steps whose time is up.
            let mut still = Vec::new();
            for (w, slot, started, ticks, asked) in running.drain(..) {
                if tick - started >= ticks {
                    let bg = background[slot.coordinator.as_str()];
                    let overload = f64::from((bg + 1).saturating_sub(capacity));
                    let outcome = Outcome {
                        succeeded: !rng.chance(0.05 + overload / f64::from(capacity)),
                        queue_delay_ms: (started - asked) * MINUTE,
                        impact: 4.0 * overload / f64::from(capacity),
                        duration_ms: ticks * MINUTE,
                    };
                    g.record(&slot, &outcome);
                    g.release(&slot);
                    busy[w] = false;
                } else {
                    still.push((w, slot, started, ticks, asked));
                }
            }
            running = still;
            // The probe shows what ran at the previous tick.
            let probe = snapshot(
                ["c1", "c2"]
                    .iter()
                    .map(|c| {
                        let m = visible.get(*c).copied().unwrap_or(0);
                        coordinator(c, background[c] + m, 0, m)
                    })
                    .collect(),
                now,
            );
            for w in 0..workers {
                if busy[w] {
                    continue;
                }
                let asked = *waiting_since[w].get_or_insert(tick);
                match g.decide(&TableState::default(), &probe, now) {
                    Decision::Admit { slot } => {
                        assert!(slot.arm.is_some());
                        busy[w] = true;
                        waiting_since[w] = None;
                        running.push((w, slot, tick, 3 + rng.below(4) as i64, asked));
                    }
                    Decision::Defer { retry_after_ms, .. } => assert!(retry_after_ms > now),
                    Decision::PastDeadline { .. } => unreachable!(),
                }
            }
            let mut per: BTreeMap<String, u32> = BTreeMap::new();
            for (_, slot, ..) in &running {
                *per.entry(slot.coordinator.clone()).or_default() += 1;
            }
            assert!(running.len() <= 3, "{} rewrites at once", running.len());
            assert!(per.values().all(|n| *n <= 2), "{per:?}");
            assert_eq!(g.in_flight("trino") as usize, running.len());
            peak = peak.max(running.len());
            visible = per;
        }
        let b = g.bandit("trino").unwrap();
        let ctx = Context {
            hour_band: 0,
            queue_level: 0,
        };
        assert!(
            b.observations(ctx) >= 10,
            "{workers} workers: the bandit got outcomes"
        );
        assert!(b.recommend(ctx).is_some());
        peak_by_workers.push(peak);
    }
    // One worker runs one step at a time; more workers are bounded by the caps, not by their count.
    assert_eq!(peak_by_workers[0], 1);
    assert!(
        peak_by_workers.iter().all(|p| *p <= 3),
        "{peak_by_workers:?}"
    );
}

#[test]
fn bandit_state_survives_json() {
    let mut b = Bandit::new(BanditConfig {
        min_observations: 3,
        hour_bands: 4,
        queue_levels: vec![2],
        ..BanditConfig::default()
    })
    .unwrap();
    let engine = SimEngine { capacity: 10 };
    let mut rng = SimRng(5);
    let fixed = Limits::default();
    for i in 0..200 {
        let ctx = Context {
            hour_band: (i % 4) as u8,
            queue_level: (i % 2) as u8,
        };
        let t = b.tune(ctx, &fixed);
        b.record(&t.arm, &engine.run(t.limits.max_running_queries, &mut rng));
    }
    let json = serde_json::to_string(&b).unwrap();
    let mut thawed: Bandit = serde_json::from_str(&json).unwrap();
    assert_eq!(thawed, b);
    assert_eq!(serde_json::to_string(&thawed).unwrap(), json);
    // Same state, same future.
    for i in 0..50 {
        let ctx = Context {
            hour_band: (i % 4) as u8,
            queue_level: 0,
        };
        let (x, y) = (b.tune(ctx, &fixed), thawed.tune(ctx, &fixed));
        assert_eq!(x, y);
        let o = engine.run(x.limits.max_running_queries, &mut rng);
        b.record(&x.arm, &o);
        thawed.record(&y.arm, &o);
    }
    assert_eq!(thawed, b);

    // A governor with a bandit round-trips too.
    let mut g = governor(Limits::default());
    g.attach_bandit("trino", b);
    let _ = g.decide(&TableState::default(), &idle(2), NOW);
    let thawed: Governor = serde_json::from_str(&serde_json::to_string(&g).unwrap()).unwrap();
    assert_eq!(thawed, g);
}

/// With memory, a bandit follows an engine whose capacity changes.
#[test]
fn bandit_follows_a_changed_engine() {
    let mut b = Bandit::new(BanditConfig {
        thresholds: vec![4, 8, 16, 24],
        min_observations: 10,
        hour_bands: 1,
        memory: 200,
        seed: 3,
        ..BanditConfig::default()
    })
    .unwrap();
    let ctx = Context {
        hour_band: 0,
        queue_level: 0,
    };
    let fixed = Limits::default();
    let mut rng = SimRng(11);
    for engine in [SimEngine { capacity: 16 }, SimEngine { capacity: 8 }] {
        for _ in 0..3000 {
            let t = b.tune(ctx, &fixed);
            b.record(&t.arm, &engine.run(t.limits.max_running_queries, &mut rng));
        }
        assert_eq!(b.recommend(ctx), Some(engine.capacity));
    }
}
