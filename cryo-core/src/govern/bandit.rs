//! Self-tuning admission: a contextual bandit that learns, per destination, which
//! `max_running_queries` threshold works best, from the outcomes of the steps it admitted.
//!
//! ```text
//! LoadSnapshot, now ──context──▶ Context { hour_band, queue_level }
//! Context, static Limits ──tune──▶ Tuned { limits, source: Static | Learned, confidence, arm }
//! Arm, Outcome ──record──▶ posterior of that arm in that context
//! ```
//!
//! - **Arms** are the configured candidate thresholds. Only `max_running_queries` is tuned: the
//!   hard caps on maintenance statements, the queue threshold, the backoff and the snapshot age
//!   always stay the operator's static limits, so exploring never runs more rewrites at once.
//! - **Context** is the UTC hour band and the destination's queue level at decision time.
//! - **Reward** (in `[0, 1]`, see [`Outcome::reward`]): 0 for a failure; otherwise a weighted
//!   mean of how little the step waited relative to its run time and how little it slowed
//!   other queries. A low threshold makes steps wait; a high one slows and fails them.
//! - **Thompson sampling** with a Gaussian posterior per arm (a pseudo-observation of 0.5 as
//!   prior). An arm is drawn once per context and kept until the next outcome in that context,
//!   so every worker sees one threshold between outcomes. Randomness comes from a seeded
//!   `SplitMix64` kept in the state: the same state and inputs give the same choices.
//! - **Fallback**: while a context has fewer than `min_observations` outcomes, the static limits
//!   are used ([`TuningSource::Static`]); their outcomes teach the arm equal to the static
//!   threshold, if one is configured.
//! - **Memory**: an arm's statistics are halved once it has more than `memory` outcomes, so
//!   the bandit follows an engine whose capacity changes.
//! - Statistics are fixed-point integers (rewards in millionths), so the state survives a JSON
//!   round trip exactly.

use serde::{Deserialize, Serialize};

use super::policy::{Limits, LoadSnapshot};
use crate::error::{Error, Result};

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;
const PPM: f64 = 1_000_000.0;
/// Variance of the prior pseudo-observation and of an arm with fewer than two outcomes (the
/// largest a reward in `[0, 1]` can have).
const PRIOR_VARIANCE: f64 = 0.25;
/// Smallest variance assumed for an arm, so a few equal rewards do not end exploration.
const VARIANCE_FLOOR: f64 = 0.0025;

/// The situation a decision is made in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Context {
    /// UTC hour of the day divided into `hour_bands` equal bands (0-based).
    pub hour_band: u8,
    /// How many of the configured `queue_levels` the destination's queued queries reach.
    pub queue_level: u8,
}

/// The threshold used in a context; outcomes are credited to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Arm {
    /// The context of the decision.
    pub context: Context,
    /// The `max_running_queries` the decision used.
    pub threshold: u32,
}

/// How one admitted step went.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Whether the step succeeded.
    pub succeeded: bool,
    /// How long the step waited between its first request and its admission (ms).
    pub queue_delay_ms: i64,
    /// How much the step slowed other queries while it ran: their slowdown ratio (0: none,
    /// 1: twice as slow), or the relative rise of their p95 latency.
    pub impact: f64,
    /// How long the step ran (ms).
    pub duration_ms: i64,
}

impl Outcome {
    /// The reward in `[0, 1]`: 0 for a failure; otherwise
    /// `delay_weight · d + (1 − delay_weight) · i`, with `d = duration / (duration + delay)`
    /// (1 s floor on the duration: waiting as long as it ran halves it) and
    /// `i = 1 / (1 + impact)` (doubling others' latency halves it). Out-of-range inputs are
    /// clamped (a negative or NaN impact counts as none).
    pub fn reward(&self, delay_weight: f64) -> f64 {
        if !self.succeeded {
            return 0.0;
        }
        let w = if delay_weight.is_nan() {
            0.5
        } else {
            delay_weight.clamp(0.0, 1.0)
        };
        let duration = self.duration_ms.max(1000) as f64;
        let delay = self.queue_delay_ms.max(0) as f64;
        let d = duration / (duration + delay);
        let impact = if self.impact.is_nan() {
            0.0
        } else {
            self.impact.max(0.0)
        };
        let i = 1.0 / (1.0 + impact);
        (w * d + (1.0 - w) * i).clamp(0.0, 1.0)
    }
}

/// Where tuned limits came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TuningSource {
    /// The static limits: the context has too few outcomes yet.
    Static,
    /// A threshold chosen by the bandit.
    Learned,
}

/// The limits to use for one decision, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tuned {
    /// The static limits with `max_running_queries` replaced by the arm's threshold.
    pub limits: Limits,
    /// Static fallback or learned.
    pub source: TuningSource,
    /// Estimated probability (0–1) that the best-looking threshold of this context is the
    /// best one; 0 before any outcome.
    pub confidence: f64,
    /// The arm to credit the outcome to.
    pub arm: Arm,
}

/// Bandit settings. Plain values; [`BanditConfig::validate`] rejects nonsense.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BanditConfig {
    /// Candidate `max_running_queries` thresholds (the arms), each at least 1.
    pub thresholds: Vec<u32>,
    /// Outcomes a context needs before learned thresholds replace the static limits.
    pub min_observations: u64,
    /// Bands the UTC day is split into (a divisor of 24: 1 ignores the hour).
    pub hour_bands: u8,
    /// Ascending queued-query counts that start a new queue level (empty: one level).
    pub queue_levels: Vec<u32>,
    /// Weight of queueing delay against impact on other queries in the reward (0–1).
    pub delay_weight: f64,
    /// Outcomes an arm keeps at full weight; beyond them its statistics are halved.
    pub memory: u64,
    /// Seed of the random generator.
    pub seed: u64,
}

impl Default for BanditConfig {
    /// Thresholds 5, 10, 20 (the static default) and 40; learn after 20 outcomes; four
    /// six-hour bands; delay and impact weighted equally; remember about 500 outcomes per arm.
    fn default() -> Self {
        Self {
            thresholds: vec![5, 10, 20, 40],
            min_observations: 20,
            hour_bands: 4,
            queue_levels: Vec::new(),
            delay_weight: 0.5,
            memory: 500,
            seed: 0x0c52_7e5e_ed00_0001,
        }
    }
}

impl BanditConfig {
    /// Reject settings the bandit cannot work with.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::validation(format!("bandit config: {m}")));
        if self.thresholds.is_empty() || self.thresholds.len() > 64 {
            return bad("thresholds must list 1 to 64 candidate thresholds");
        }
        if self.thresholds.contains(&0) {
            return bad("thresholds must be at least 1 (a threshold of 0 never admits)");
        }
        let mut sorted = self.thresholds.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != self.thresholds.len() {
            return bad("thresholds must not repeat");
        }
        if self.hour_bands == 0 || 24 % self.hour_bands != 0 {
            return bad("hour_bands must divide 24 (1, 2, 3, 4, 6, 8, 12 or 24)");
        }
        if self.queue_levels.len() > 8
            || self.queue_levels.first() == Some(&0)
            || self.queue_levels.windows(2).any(|w| w[0] >= w[1])
        {
            return bad("queue_levels must be at most 8 ascending counts, each at least 1");
        }
        if !(0.0..=1.0).contains(&self.delay_weight) {
            return bad("delay_weight must be in [0, 1]");
        }
        if self.memory < 10 {
            return bad("memory must be at least 10 outcomes");
        }
        Ok(())
    }
}

/// Outcomes of one threshold in one context, in millionths of a reward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
struct ArmStats {
    threshold: u32,
    n: u64,
    /// Sum of rewards (ppm).
    sum: u64,
    /// Sum of squared rewards (ppm of the square).
    sum_sq: u64,
}

impl ArmStats {
    /// Posterior mean and variance of the arm's mean reward.
    fn posterior(&self) -> (f64, f64) {
        let n = self.n as f64;
        let mean = (self.sum as f64 / PPM + 0.5) / (n + 1.0);
        let variance = if self.n >= 2 {
            let m = self.sum as f64 / PPM / n;
            let second = self.sum_sq as f64 / PPM / n;
            ((second - m * m) * n / (n - 1.0)).max(VARIANCE_FLOOR)
        } else {
            PRIOR_VARIANCE
        };
        (mean, variance / (n + 1.0))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct ContextStats {
    context: Context,
    /// Outcomes recorded in this context (static ones included).
    observations: u64,
    arms: Vec<ArmStats>,
    /// The threshold drawn for this context, kept until its next outcome.
    current: Option<u32>,
}

/// The learned state of one destination. Serializable: keep it between runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bandit {
    config: BanditConfig,
    /// Sorted by context.
    contexts: Vec<ContextStats>,
    /// `SplitMix64` state.
    rng: u64,
}

impl Bandit {
    /// A bandit with no outcomes yet.
    pub fn new(config: BanditConfig) -> Result<Self> {
        config.validate()?;
        let rng = config.seed;
        Ok(Self {
            config,
            contexts: Vec::new(),
            rng,
        })
    }

    /// Its settings.
    pub fn config(&self) -> &BanditConfig {
        &self.config
    }

    /// The context of a decision on `load` at `now_ms`.
    pub fn context(&self, load: &LoadSnapshot, now_ms: i64) -> Context {
        let hour = now_ms.rem_euclid(DAY_MS) / HOUR_MS;
        let band_hours = i64::from(24 / self.config.hour_bands.clamp(1, 24));
        let queued = load
            .coordinators
            .iter()
            .map(|c| c.queued_queries)
            .fold(0u32, u32::saturating_add);
        let level = self
            .config
            .queue_levels
            .iter()
            .filter(|b| queued >= **b)
            .count();
        Context {
            hour_band: (hour / band_hours.max(1)) as u8,
            queue_level: level as u8,
        }
    }

    /// The limits to use in `context`: `fixed` while the context has too few outcomes,
    /// otherwise `fixed` with the drawn threshold as `max_running_queries`.
    pub fn tune(&mut self, context: Context, fixed: &Limits) -> Tuned {
        let min_observations = self.config.min_observations;
        let idx = self.context_index(context);
        let confidence = self.confidence(idx);
        let learned = self.contexts[idx].observations >= min_observations
            && !self.config.thresholds.is_empty();
        if !learned {
            return Tuned {
                limits: fixed.clone(),
                source: TuningSource::Static,
                confidence,
                arm: Arm {
                    context,
                    threshold: fixed.max_running_queries,
                },
            };
        }
        let threshold = match self.contexts[idx].current {
            Some(t) if self.config.thresholds.contains(&t) => t,
            _ => {
                let t = self.draw(idx);
                self.contexts[idx].current = Some(t);
                t
            }
        };
        let mut limits = fixed.clone();
        limits.max_running_queries = threshold.max(1);
        Tuned {
            limits,
            source: TuningSource::Learned,
            confidence,
            arm: Arm { context, threshold },
        }
    }

    /// Credit `outcome` to `arm`; the context's next decision draws a threshold anew.
    pub fn record(&mut self, arm: &Arm, outcome: &Outcome) {
        let reward = outcome.reward(self.config.delay_weight);
        let ppm = (reward * PPM).round() as u64;
        let ppm_sq = (reward * reward * PPM).round() as u64;
        let memory = self.config.memory.max(2);
        let idx = self.context_index(arm.context);
        let stats = &mut self.contexts[idx];
        stats.observations = stats.observations.saturating_add(1);
        stats.current = None;
        if let Some(a) = stats.arms.iter_mut().find(|a| a.threshold == arm.threshold) {
            a.n += 1;
            a.sum = a.sum.saturating_add(ppm);
            a.sum_sq = a.sum_sq.saturating_add(ppm_sq);
            if a.n > memory {
                a.n /= 2;
                a.sum /= 2;
                a.sum_sq /= 2;
            }
        }
    }

    /// The threshold with the best mean reward so far in `context` (ties: the lower one), or
    /// `None` before any outcome there.
    pub fn recommend(&self, context: Context) -> Option<u32> {
        let stats = self.contexts.iter().find(|c| c.context == context)?;
        best_tried(stats).map(|(t, _)| t)
    }

    /// Outcomes recorded in `context`.
    pub fn observations(&self, context: Context) -> u64 {
        self.contexts
            .iter()
            .find(|c| c.context == context)
            .map_or(0, |c| c.observations)
    }

    /// Outcomes recorded in every context.
    pub fn total_observations(&self) -> u64 {
        self.contexts.iter().map(|c| c.observations).sum()
    }

    fn context_index(&mut self, context: Context) -> usize {
        match self.contexts.binary_search_by(|c| c.context.cmp(&context)) {
            Ok(i) => {
                // Thresholds added to the config after the state was saved start empty.
                let arms = &mut self.contexts[i].arms;
                for t in &self.config.thresholds {
                    if !arms.iter().any(|a| a.threshold == *t) {
                        arms.push(ArmStats {
                            threshold: *t,
                            ..ArmStats::default()
                        });
                    }
                }
                i
            }
            Err(i) => {
                let arms = self
                    .config
                    .thresholds
                    .iter()
                    .map(|t| ArmStats {
                        threshold: *t,
                        ..ArmStats::default()
                    })
                    .collect();
                self.contexts.insert(
                    i,
                    ContextStats {
                        context,
                        observations: 0,
                        arms,
                        current: None,
                    },
                );
                i
            }
        }
    }

    /// Thompson sampling: draw each configured arm's mean from its posterior, take the
    /// largest (ties: the lower threshold).
    fn draw(&mut self, idx: usize) -> u32 {
        let mut best: Option<(f64, u32)> = None;
        let thresholds = self.config.thresholds.clone();
        for t in thresholds {
            let stats = self.contexts[idx]
                .arms
                .iter()
                .find(|a| a.threshold == t)
                .copied()
                .unwrap_or_default();
            let (mean, var) = stats.posterior();
            let sample = mean + var.sqrt() * self.normal();
            let better = match best {
                None => true,
                Some((s, bt)) => sample.total_cmp(&s).then(bt.cmp(&t)).is_gt(),
            };
            if better {
                best = Some((sample, t));
            }
        }
        best.map_or(1, |(_, t)| t)
    }

    /// Probability that the best-looking tried arm beats every other configured arm, from
    /// pairwise Gaussian comparisons (treated as independent).
    fn confidence(&self, idx: usize) -> f64 {
        let stats = &self.contexts[idx];
        let Some((best, (m_b, v_b))) = best_tried(stats) else {
            return 0.0;
        };
        stats
            .arms
            .iter()
            .filter(|a| a.threshold != best && self.config.thresholds.contains(&a.threshold))
            .map(|a| {
                let (m, v) = a.posterior();
                normal_cdf((m_b - m) / (v_b + v).sqrt().max(f64::MIN_POSITIVE))
            })
            .product()
    }

    fn next_u64(&mut self) -> u64 {
        // SplitMix64 (Steele, Lea, Flood 2014).
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// The tried arm with the highest posterior mean (ties: the lower threshold).
fn best_tried(stats: &ContextStats) -> Option<(u32, (f64, f64))> {
    stats
        .arms
        .iter()
        .filter(|a| a.n > 0)
        .map(|a| (a.threshold, a.posterior()))
        .fold(None, |best, (t, p)| match best {
            Some((bt, bp)) if bp.0.total_cmp(&p.0).then(t.cmp(&bt)).is_ge() => Some((bt, bp)),
            _ => Some((t, p)),
        })
}

/// Standard normal CDF via the Abramowitz–Stegun 7.1.26 approximation of erf (error < 1.5e-7).
fn normal_cdf(x: f64) -> f64 {
    let z = x / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z.abs());
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-z * z).exp();
    let erf = if z < 0.0 { -erf } else { erf };
    (0.5 * (1.0 + erf)).clamp(0.0, 1.0)
}
