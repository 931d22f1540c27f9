//! Cryo's randomness: the names of the files it writes, snapshot ids and retry jitter.
//!
//! They come from the OS, except on a thread the commit-protocol simulator has seeded
//! ([`crate::clock::seed_thread_randomness`], with the `fuzz` feature): there a seed fixes every
//! name and id Cryo makes, as it fixes the interleaving.

/// A version-4 UUID.
pub(crate) fn uuid() -> uuid::Uuid {
    #[cfg(feature = "fuzz")]
    if let Some(bits) = seeded::next_u128() {
        return uuid::Builder::from_random_bytes(bits.to_le_bytes()).into_uuid();
    }
    uuid::Uuid::new_v4()
}

/// 64 random bits.
pub(crate) fn u64() -> u64 {
    let (hi, lo) = uuid().as_u64_pair();
    hi ^ lo
}

/// A uniform draw in `[0, 1)`.
pub(crate) fn unit() -> f64 {
    (u64() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(feature = "fuzz")]
pub(crate) mod seeded {
    use std::cell::Cell;

    thread_local! {
        static STATE: Cell<Option<u64>> = const { Cell::new(None) };
    }

    /// Seed this thread's draws (`None`: the OS's again).
    pub(crate) fn seed(seed: Option<u64>) {
        STATE.with(|s| s.set(seed.map(|v| v ^ 0xD1B5_4A32_D192_ED03)));
    }

    fn next_u64() -> Option<u64> {
        STATE.with(|s| {
            let mut x = s.get()?.wrapping_add(0x9E37_79B9_7F4A_7C15);
            s.set(Some(x));
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            Some(x ^ (x >> 31))
        })
    }

    pub(crate) fn next_u128() -> Option<u128> {
        let hi = next_u64()?;
        let lo = next_u64()?;
        Some((u128::from(hi) << 64) | u128::from(lo))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn uuids_are_v4_and_differ() {
        let (a, b) = (super::uuid(), super::uuid());
        assert_ne!(a, b);
        assert_eq!(a.get_version_num(), 4);
        assert!((0.0..1.0).contains(&super::unit()));
    }

    #[cfg(feature = "fuzz")]
    #[test]
    fn a_seeded_thread_repeats_its_draws() {
        super::seeded::seed(Some(7));
        let first: Vec<_> = (0..3).map(|_| super::uuid()).collect();
        super::seeded::seed(Some(7));
        let again: Vec<_> = (0..3).map(|_| super::uuid()).collect();
        super::seeded::seed(None);
        assert_eq!(first, again);
        assert_eq!(first[0].get_version_num(), 4);
        assert_ne!(super::uuid(), first[0]);
    }
}
