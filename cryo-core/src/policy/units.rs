//! The values a person writes in a policy file: sizes (`8GiB`), durations (`1h30m`), instants
//! (`2026-12-31`), and table patterns (`lake.*_stream`). Each reads from what a person writes and
//! serializes to one canonical spelling, so two files that mean the same policy have the same
//! fingerprint.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A size in bytes: an integer, or a number with a unit (`512MiB`, `8 GiB`, `100GB`, `1.5TiB`).
/// Binary units (`KiB`…`TiB`) are powers of 1024, decimal ones (`KB`…`TB`) of 1000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// Parse `s`; the error says what was expected.
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
            .unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let number: f64 = number.replace('_', "").parse().map_err(|_| {
            format!("`{s}` is not a size: write bytes or a number with a unit (`512MiB`, `8GiB`)")
        })?;
        let scale: f64 = match unit.trim() {
            "" | "B" => 1.0,
            "KB" | "kB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "TB" => 1e12,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
            other => {
                return Err(format!(
                    "unknown size unit `{other}` in `{s}` (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
                ));
            }
        };
        let bytes = (number * scale).round();
        if !(0.0..1.8e19).contains(&bytes) {
            return Err(format!("`{s}` is out of range"));
        }
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "range checked above"
        )]
        Ok(ByteSize(bytes as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 4] = [
            ("TiB", 1 << 40),
            ("GiB", 1 << 30),
            ("MiB", 1 << 20),
            ("KiB", 1 << 10),
        ];
        for (unit, size) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{}{unit}", self.0 / size);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Int(n) => u64::try_from(n)
                .map(ByteSize)
                .map_err(|_| serde::de::Error::custom("a size cannot be negative")),
            NumberOrText::Float(_) => Err(serde::de::Error::custom(
                "a size in bytes is a whole number (or a number with a unit: `1.5GiB`)",
            )),
            NumberOrText::Text(t) => ByteSize::parse(&t).map_err(serde::de::Error::custom),
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Int(i64),
    Float(#[allow(dead_code, reason = "only that it is not whole matters")] f64),
    Text(String),
}

/// A duration, written with units (`500ms`, `90s`, `5m`, `1h30m`, `7d`, `2w`); kept in
/// milliseconds. A bare number is refused: nobody can tell whether `3600` means seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub i64);

const UNIT_MS: [(&str, i64); 6] = [
    ("w", 7 * 24 * 3_600_000),
    ("d", 24 * 3_600_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

impl Duration {
    /// Parse `s`; the error says what was expected.
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "`{s}` is not a duration: write a number with a unit \
                 (`500ms`, `90s`, `5m`, `1h30m`, `7d`, `2w`)"
            )
        };
        let mut rest = s.trim();
        if rest.is_empty() {
            return Err(bad());
        }
        let mut total: i64 = 0;
        while !rest.is_empty() {
            let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
            if digits == 0 {
                return Err(bad());
            }
            let n: i64 = rest[..digits].parse().map_err(|_| bad())?;
            rest = &rest[digits..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit() || c.is_whitespace())
                .unwrap_or(rest.len());
            let unit = &rest[..unit_len];
            let ms = UNIT_MS
                .iter()
                .find(|(u, _)| *u == unit)
                .map(|(_, ms)| *ms)
                .ok_or_else(bad)?;
            total = n
                .checked_mul(ms)
                .and_then(|v| total.checked_add(v))
                .ok_or_else(|| format!("`{s}` is out of range"))?;
            rest = rest[unit_len..].trim_start();
        }
        Ok(Duration(total))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0s");
        }
        let mut left = self.0;
        for (unit, ms) in UNIT_MS {
            if left >= ms {
                write!(f, "{}{unit}", left / ms)?;
                left %= ms;
            }
        }
        Ok(())
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Text(t) => Duration::parse(&t).map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom(
                "a duration needs a unit (`90s`, `5m`, `1h`, `7d`)",
            )),
        }
    }
}

/// An instant: a date (`2026-12-31`, midnight UTC) or an RFC 3339 time
/// (`2026-12-31T18:00:00Z`); kept in milliseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub i64);

impl Instant {
    /// Parse `s`; the error says what was expected.
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if let Ok(date) = chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d") {
            let ms = date
                .and_hms_opt(0, 0, 0)
                .map(|d| d.and_utc().timestamp_millis())
                .ok_or_else(|| format!("`{s}` is out of range"))?;
            return Ok(Instant(ms));
        }
        chrono::DateTime::parse_from_rfc3339(t)
            .map(|d| Instant(d.timestamp_millis()))
            .map_err(|_| {
                format!("`{s}` is not a date (`2026-12-31`) or a time (`2026-12-31T18:00:00Z`)")
            })
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match chrono::DateTime::from_timestamp_millis(self.0) {
            Some(t) => write!(f, "{}", t.format("%Y-%m-%dT%H:%M:%S%.3fZ")),
            None => write!(f, "{}ms", self.0),
        }
    }
}

impl Serialize for Instant {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Instant {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Text(t) => Instant::parse(&t).map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom(
                "an instant is a date (`2026-12-31`) or a time (`2026-12-31T18:00:00Z`)",
            )),
        }
    }
}

/// A name pattern: `*` matches any run of characters (dots included), `?` one character;
/// everything else matches itself. Matched against a namespace (`lake`, `lake.raw`), a table
/// name, or a whole identifier (`lake.orders`), as the field that holds it says.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Pattern(String);

impl Pattern {
    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        let p: Vec<char> = self.0.chars().collect();
        let t: Vec<char> = text.chars().collect();
        // Greedy matching with one backtrack point per `*`: linear in practice.
        let (mut pi, mut ti) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while ti < t.len() {
            match p.get(pi) {
                Some('*') => {
                    star = Some((pi, ti));
                    pi += 1;
                }
                Some(&c) if c == '?' || c == t[ti] => {
                    pi += 1;
                    ti += 1;
                }
                _ => match star {
                    Some((sp, st)) => {
                        pi = sp + 1;
                        ti = st + 1;
                        star = Some((sp, st + 1));
                    }
                    None => return false,
                },
            }
        }
        p[pi..].iter().all(|&c| c == '*')
    }

    /// Whether some text matches both patterns (two pauses of the same tables).
    pub fn overlaps(&self, other: &Pattern) -> bool {
        let a: Vec<char> = self.0.chars().collect();
        let b: Vec<char> = other.0.chars().collect();
        // reach[i][j]: some string takes `a` to state i and `b` to state j. A `*` may match
        // nothing (move on without a character) or swallow one character and stay.
        let mut reach = vec![vec![false; b.len() + 1]; a.len() + 1];
        let mut stack = vec![(0usize, 0usize)];
        while let Some((i, j)) = stack.pop() {
            if reach[i][j] {
                continue;
            }
            reach[i][j] = true;
            let mut push = |i: usize, j: usize| {
                if !reach[i][j] {
                    stack.push((i, j));
                }
            };
            if a.get(i) == Some(&'*') {
                push(i + 1, j);
            }
            if b.get(j) == Some(&'*') {
                push(i, j + 1);
            }
            // One character both accept.
            if let (Some(&x), Some(&y)) = (a.get(i), b.get(j)) {
                let next_i = if x == '*' { i } else { i + 1 };
                let next_j = if y == '*' { j } else { j + 1 };
                let agree = x == '*' || y == '*' || x == '?' || y == '?' || x == y;
                if agree {
                    push(next_i, next_j);
                }
            }
        }
        reach[a.len()][b.len()]
    }
}

impl TryFrom<String> for Pattern {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Err("a pattern cannot be empty".into());
        }
        Ok(Pattern(s))
    }
}

impl From<Pattern> for String {
    fn from(p: Pattern) -> String {
        p.0
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(ByteSize::parse("512MiB").unwrap().0, 512 << 20);
        assert_eq!(ByteSize::parse("8 GiB").unwrap().0, 8 << 30);
        assert_eq!(ByteSize::parse("100GB").unwrap().0, 100_000_000_000);
        assert_eq!(ByteSize::parse("1.5KiB").unwrap().0, 1536);
        assert_eq!(ByteSize::parse("1_000").unwrap().0, 1000);
        assert!(
            ByteSize::parse("8 gigs")
                .unwrap_err()
                .contains("unknown size unit")
        );
        assert!(ByteSize::parse("-1").is_err());
        assert_eq!(ByteSize(8 << 30).to_string(), "8GiB");
        assert_eq!(ByteSize(1000).to_string(), "1000");
    }

    #[test]
    fn durations_need_units_and_print_canonically() {
        assert_eq!(Duration::parse("1h30m").unwrap().0, 5_400_000);
        assert_eq!(Duration::parse("90m").unwrap().to_string(), "1h30m");
        assert_eq!(Duration::parse("7d").unwrap().to_string(), "1w");
        assert_eq!(Duration::parse("500ms").unwrap().0, 500);
        assert_eq!(Duration::parse("2h 5s").unwrap().0, 7_205_000);
        for bad in ["", "3600", "1x", "h", "1.5h"] {
            assert!(Duration::parse(bad).is_err(), "{bad}");
        }
        assert!(
            Duration::parse("9999999999999w")
                .unwrap_err()
                .contains("out of range")
        );
    }

    #[test]
    fn instants_are_dates_or_times() {
        let d = Instant::parse("2026-12-31").unwrap();
        assert_eq!(d.to_string(), "2026-12-31T00:00:00.000Z");
        let t = Instant::parse("2026-12-31T18:00:00+01:00").unwrap();
        assert_eq!(t.0 - d.0, 17 * 3_600_000);
        assert!(Instant::parse("next week").is_err());
    }

    #[test]
    fn patterns_match_and_overlap() {
        let p = |s: &str| Pattern::try_from(s.to_string()).unwrap();
        assert!(p("lake.*").matches("lake.orders"));
        assert!(p("*_stream").matches("clicks_stream"));
        assert!(p("ev?nts").matches("events"));
        assert!(!p("lake.*").matches("lakehouse.orders"));
        assert!(p("*a*b*").matches("xaybz"));
        assert!(!p("*a*b*").matches("xbya"));
        assert!(p("lake.orders").overlaps(&p("lake.*")));
        assert!(p("*_v2").overlaps(&p("lake.*")));
        assert!(!p("lake.*").overlaps(&p("raw.*")));
        assert!(!p("a?c").overlaps(&p("abx")));
        assert!(p("a?c").overlaps(&p("a*")));
        assert!(Pattern::try_from(" ".to_string()).is_err());
    }
}
