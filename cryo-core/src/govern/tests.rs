//! Governor invariants: property tests on the admission policy.

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
        let total: u32 = s
            .coordinators
            .iter()
            .map(|c| {
                c.maintenance_running
                    .max(own.get(c.coordinator.as_str()).copied().unwrap_or(0))
            })
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
fn limits_validation() {
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
