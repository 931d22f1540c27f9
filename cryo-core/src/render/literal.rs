//! Checking plan literals before they reach SQL text.
//!
//! Quoting keeps a hostile value inside its literal; these checks keep a malformed one out of
//! the statement altogether (a `Date("2024-13-01")` is a planner bug, and an engine would
//! refuse it). A literal that fails a check makes its field predicate inexpressible: the
//! predicate is dropped (a superset of partitions, which is safe) and the drop is noted.

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

use crate::plan::Literal;

/// A calendar date from `YYYY-MM-DD` (four-digit year, nothing else).
pub(crate) fn parse_date(s: &str) -> Option<NaiveDate> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if !(digits(0..4) && digits(5..7) && digits(8..10)) {
        return None;
    }
    NaiveDate::from_ymd_opt(
        s[0..4].parse().ok()?,
        s[5..7].parse().ok()?,
        s[8..10].parse().ok()?,
    )
}

/// A wall-clock timestamp `YYYY-MM-DD HH:MM:SS[.f…]` (a `T` separator is accepted), with the
/// fraction as written (up to nine digits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Timestamp {
    pub(crate) at: NaiveDateTime,
    /// Fractional-second digits as written (may be empty).
    pub(crate) fraction: String,
}

impl Timestamp {
    /// `YYYY-MM-DD HH:MM:SS`.
    pub(crate) fn seconds_text(&self) -> String {
        self.at.format("%Y-%m-%d %H:%M:%S").to_string()
    }

    /// `YYYY-MM-DD HH:MM:SS` plus the fraction padded to exactly `digits` digits, or `None`
    /// when the written fraction is more precise than that.
    pub(crate) fn padded(&self, digits: usize) -> Option<String> {
        if self.fraction.len() > digits {
            return None;
        }
        let mut out = self.seconds_text();
        if digits > 0 {
            out.push('.');
            out.push_str(&self.fraction);
            out.extend(std::iter::repeat_n('0', digits - self.fraction.len()));
        }
        Some(out)
    }

    /// `YYYY-MM-DD HH:MM:SS[.fraction]` as written (normalized separator).
    pub(crate) fn as_written(&self) -> String {
        if self.fraction.is_empty() {
            self.seconds_text()
        } else {
            format!("{}.{}", self.seconds_text(), self.fraction)
        }
    }

    fn is_zero_fraction(&self) -> bool {
        self.fraction.bytes().all(|c| c == b'0')
    }
}

pub(crate) fn parse_timestamp(s: &str) -> Option<Timestamp> {
    if s.len() < 19 || !s.is_char_boundary(10) || !s.is_char_boundary(19) {
        return None;
    }
    let date = parse_date(&s[..10])?;
    let sep = s.as_bytes()[10];
    if sep != b' ' && sep != b'T' {
        return None;
    }
    let time = parse_time_seconds(&s[11..19])?;
    let rest = &s[19..];
    let fraction = if rest.is_empty() {
        String::new()
    } else {
        let f = rest.strip_prefix('.')?;
        if f.is_empty() || f.len() > 9 || !f.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        f.to_string()
    };
    Some(Timestamp {
        at: date.and_time(time),
        fraction,
    })
}

fn parse_time_seconds(s: &str) -> Option<NaiveTime> {
    let b = s.as_bytes();
    if b.len() != 8 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if !(digits(0..2) && digits(3..5) && digits(6..8)) {
        return None;
    }
    NaiveTime::from_hms_opt(
        s[0..2].parse().ok()?,
        s[3..5].parse().ok()?,
        s[6..8].parse().ok()?,
    )
}

/// A time of day `HH:MM:SS[.f…]`, returned normalized with six fraction digits.
pub(crate) fn parse_time_micros(s: &str) -> Option<String> {
    let (hms, frac) = match s.split_once('.') {
        Some((h, f)) => (h, f),
        None => (s, ""),
    };
    parse_time_seconds(hms)?;
    if frac.len() > 6
        || !frac.bytes().all(|c| c.is_ascii_digit())
        || (s.contains('.') && frac.is_empty())
    {
        return None;
    }
    Some(format!("{hms}.{frac:0<6}"))
}

/// Decimal text: `-?digits[.digits]`.
pub(crate) fn is_decimal(s: &str) -> bool {
    let body = s.strip_prefix('-').unwrap_or(s);
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (body, None),
    };
    !int.is_empty()
        && int.bytes().all(|c| c.is_ascii_digit())
        && frac.is_none_or(|f| !f.is_empty() && f.bytes().all(|c| c.is_ascii_digit()))
}

/// Canonical UUID text (8-4-4-4-12 hex digits).
pub(crate) fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// Hex text of binary values (even length, hex digits only).
pub(crate) fn is_hex(s: &str) -> bool {
    s.len().is_multiple_of(2) && s.bytes().all(|c| c.is_ascii_hexdigit())
}

/// A finite float as plain decimal text (Rust's shortest round-trip form, never an exponent).
pub(crate) fn float_text(f: f64) -> Option<String> {
    f.is_finite().then(|| {
        let s = format!("{f}");
        if s == "-0" { "0".to_string() } else { s }
    })
}

/// Whether `[lower, upper)` of a time transform starts and ends on partition boundaries.
pub(crate) fn aligned_to(transform: &str, t: &NaiveDateTime, zero_fraction: bool) -> bool {
    let midnight =
        t.hour() == 0 && t.minute() == 0 && t.second() == 0 && t.nanosecond() == 0 && zero_fraction;
    match transform {
        "hour" => t.minute() == 0 && t.second() == 0 && t.nanosecond() == 0 && zero_fraction,
        "day" => midnight,
        "month" => midnight && t.day() == 1,
        "year" => midnight && t.day() == 1 && t.month() == 1,
        _ => false,
    }
}

/// Boundary check for a timestamp literal.
pub(crate) fn timestamp_aligned(transform: &str, ts: &Timestamp) -> bool {
    aligned_to(transform, &ts.at, ts.is_zero_fraction())
}

/// Boundary check for a date literal (`hour` has no date boundaries finer than a day, so any
/// date is aligned for it).
pub(crate) fn date_aligned(transform: &str, d: NaiveDate) -> bool {
    match transform {
        "day" | "hour" => true,
        "month" => d.day() == 1,
        "year" => d.day() == 1 && d.month() == 1,
        _ => false,
    }
}

/// `truncate[W]` / `bucket[N]` width.
pub(crate) fn transform_width(transform: &str, name: &str) -> Option<i64> {
    transform
        .strip_prefix(name)?
        .strip_prefix('[')?
        .strip_suffix(']')?
        .parse()
        .ok()
        .filter(|w: &i64| *w > 0)
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS.mmm` in UTC.
pub(crate) fn utc_millis_text(ms: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.naive_utc().format("%Y-%m-%d %H:%M:%S%.3f").to_string())
}

/// Milliseconds as the largest exact unit: `7d`, `36h`, `90m`, `45s`, `1500ms`
/// (the units airlift's `Duration` parses: Trino's duration arguments).
pub(crate) fn duration_text(ms: i64) -> String {
    const UNITS: [(i64, &str); 4] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
    ];
    for (size, unit) in UNITS {
        if ms != 0 && ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// Bytes as the largest exact unit: `128MB`, `1536kB`, `100B` (airlift's `DataSize` units,
/// powers of 1024: Trino's data-size arguments).
pub(crate) fn data_size_text(bytes: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 50, "PB"),
        (1 << 40, "TB"),
        (1 << 30, "GB"),
        (1 << 20, "MB"),
        (1 << 10, "kB"),
    ];
    for (size, unit) in UNITS {
        if bytes != 0 && bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    format!("{bytes}B")
}

/// A plan literal checked against its column's Iceberg type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Typed {
    Boolean(bool),
    Integer(i64),
    /// `float` (`REAL`), finite, as decimal text.
    Float32(String),
    /// `double`, finite, as decimal text.
    Float64(String),
    Decimal(String),
    String(String),
    Uuid(String),
    /// Hex digits of a `binary` / `fixed[n]` value.
    Binary(String),
    /// `HH:MM:SS.ffffff`.
    Time(String),
    Date(NaiveDate),
    /// `timestamp` (`nanos`: `timestamp_ns`).
    Timestamp {
        ts: Timestamp,
        nanos: bool,
    },
    /// `timestamptz`, in UTC (`nanos`: `timestamptz_ns`).
    TimestampTz {
        ts: Timestamp,
        nanos: bool,
    },
}

/// Check a literal against the column type the plan gives; a mismatch or malformed value is
/// an inexpressible predicate (the reason says which).
pub(crate) fn typed(lit: &Literal, column: &str, column_type: &str) -> Result<Typed, String> {
    let bad = |what: &str| {
        Err(format!(
            "predicate on {column}: {what} (a malformed plan literal)"
        ))
    };
    let ty = column_type.trim();
    Ok(match (lit, ty) {
        (Literal::Boolean(b), "boolean") => Typed::Boolean(*b),
        (Literal::Integer(i), "int" | "long") => Typed::Integer(*i),
        (Literal::Float(f), "float" | "double") => match float_text(*f) {
            Some(t) if ty == "float" => Typed::Float32(t),
            Some(t) => Typed::Float64(t),
            None => {
                return Err(format!(
                    "predicate on {column}: a NaN or infinite value has no portable SQL literal"
                ));
            }
        },
        (Literal::Decimal(d), t) if t.starts_with("decimal") => {
            if !is_decimal(d) {
                return bad(&format!(
                    "decimal literal `{}` is not a number",
                    comment_safe(d)
                ));
            }
            Typed::Decimal(d.clone())
        }
        (Literal::String(s), "string") => Typed::String(s.clone()),
        (Literal::String(s), "uuid") => {
            if !is_uuid(s) {
                return bad("uuid literal is not a canonical UUID");
            }
            Typed::Uuid(s.to_ascii_lowercase())
        }
        (Literal::String(s), t) if t == "binary" || t.starts_with("fixed") => {
            if !is_hex(s) {
                return bad("binary literal is not hex");
            }
            Typed::Binary(s.to_ascii_uppercase())
        }
        (Literal::String(s), "time") => match parse_time_micros(s) {
            Some(t) => Typed::Time(t),
            None => return bad("time literal is not HH:MM:SS[.ffffff]"),
        },
        (Literal::Date(d), "date") => match parse_date(d) {
            Some(d) => Typed::Date(d),
            None => {
                return bad(&format!(
                    "date literal `{}` is not YYYY-MM-DD",
                    comment_safe(d)
                ));
            }
        },
        (Literal::Timestamp(s), "timestamp" | "timestamp_ns") => match parse_timestamp(s) {
            Some(ts) if ty == "timestamp_ns" || ts.fraction.len() <= 6 => Typed::Timestamp {
                ts,
                nanos: ty == "timestamp_ns",
            },
            _ => {
                return bad(&format!(
                    "timestamp literal `{}` is not YYYY-MM-DD HH:MM:SS[.ffffff]",
                    comment_safe(s)
                ));
            }
        },
        (Literal::TimestampTz(s), "timestamptz" | "timestamptz_ns") => match parse_timestamp(s) {
            Some(ts) if ty == "timestamptz_ns" || ts.fraction.len() <= 6 => Typed::TimestampTz {
                ts,
                nanos: ty == "timestamptz_ns",
            },
            _ => {
                return bad(&format!(
                    "timestamp literal `{}` is not YYYY-MM-DD HH:MM:SS[.ffffff]",
                    comment_safe(s)
                ));
            }
        },
        _ => {
            return bad(&format!(
                "a {} literal does not fit column type `{}`",
                literal_kind(lit),
                comment_safe(ty)
            ));
        }
    })
}

fn literal_kind(lit: &Literal) -> &'static str {
    match lit {
        Literal::Boolean(_) => "boolean",
        Literal::Integer(_) => "integer",
        Literal::Float(_) => "float",
        Literal::Decimal(_) => "decimal",
        Literal::String(_) => "string",
        Literal::Date(_) => "date",
        Literal::Timestamp(_) => "timestamp",
        Literal::TimestampTz(_) => "timestamptz",
    }
}

/// Characters that are not control characters but still end a line or reorder text for the
/// person reviewing a script: the Unicode line and paragraph separators (editors and
/// `str.splitlines` break lines there, so the rest of a `--` note would look like SQL) and the
/// bidirectional controls of "Trojan Source" (CVE-2021-42574), which display a comment's text in
/// another order than it is read.
fn breaks_review(c: char) -> bool {
    matches!(
        c,
        '\u{2028}' | '\u{2029}' | '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// Text fit for a `--` comment line: control characters, line separators and bidirectional
/// controls escaped.
pub(crate) fn comment_safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || breaks_review(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Reason: a failed unwrap is the test failure.
mod tests {
    use super::*;

    #[test]
    fn comments_escape_line_breaks_and_bidi_controls() {
        let text =
            "a\nb\r\u{85}c\u{2028}d\u{2029}e\u{202E}f\u{2066}g\u{200F}h \u{E9}\u{301} 表 \u{1F9CA}";
        let safe = comment_safe(text);
        assert_eq!(safe.lines().count(), 1, "{safe}");
        assert_eq!(
            safe.split(['\u{2028}', '\u{2029}', '\u{85}']).count(),
            1,
            "{safe}"
        );
        assert!(
            !safe.chars().any(|c| c.is_control() || breaks_review(c)),
            "{safe}"
        );
        // Printable text, accents and emoji stay as written.
        assert!(safe.ends_with("h \u{E9}\u{301} 表 \u{1F9CA}"), "{safe}");
    }

    #[test]
    fn dates_are_strict() {
        assert_eq!(
            parse_date("2024-02-29"),
            NaiveDate::from_ymd_opt(2024, 2, 29)
        );
        for bad in [
            "2023-02-29",
            "2024-13-01",
            "24-01-01",
            "2024-1-01",
            "2024-01-01 ",
            "+202-01-01",
            "２０２４-01-01",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn timestamps_keep_their_fraction() {
        let t = parse_timestamp("2024-01-31 10:20:30.5").unwrap();
        assert_eq!(t.as_written(), "2024-01-31 10:20:30.5");
        assert_eq!(t.padded(6).unwrap(), "2024-01-31 10:20:30.500000");
        assert_eq!(t.padded(0), None);
        let t = parse_timestamp("2024-01-31T00:00:00").unwrap();
        assert_eq!(t.padded(6).unwrap(), "2024-01-31 00:00:00.000000");
        assert_eq!(t.padded(0).unwrap(), "2024-01-31 00:00:00");
        assert!(parse_timestamp("2024-01-31 00:00:00.1234567891").is_none());
        for bad in [
            "2024-01-31",
            "2024-01-31 24:00:00",
            "2024-01-31 00:00:00.",
            "2024-01-31 00:00:00Z",
            "2024-01-31 00:00:00'",
        ] {
            assert!(parse_timestamp(bad).is_none(), "{bad}");
        }
        assert!(parse_timestamp("2024-01-31 00:00:0é").is_none());
    }

    #[test]
    fn numbers_uuids_hex() {
        for ok in ["0", "-12.50", "123456789012345678901234567890.1"] {
            assert!(is_decimal(ok), "{ok}");
        }
        for bad in ["", "-", "1.", ".5", "1e5", "1 ", "1'"] {
            assert!(!is_decimal(bad), "{bad}");
        }
        assert!(is_uuid("123e4567-e89b-12d3-a456-426614174000"));
        assert!(!is_uuid("123e4567e89b12d3a456426614174000"));
        assert!(is_hex("00ff") && !is_hex("0ff") && !is_hex("zz"));
        assert_eq!(float_text(1.5).unwrap(), "1.5");
        assert_eq!(float_text(-0.0).unwrap(), "0");
        assert_eq!(float_text(1e21).unwrap(), "1000000000000000000000");
        assert_eq!(float_text(f64::NAN), None);
        assert_eq!(float_text(f64::INFINITY), None);
        assert_eq!(parse_time_micros("10:00:00").unwrap(), "10:00:00.000000");
        assert_eq!(parse_time_micros("10:00:00.25").unwrap(), "10:00:00.250000");
        assert_eq!(parse_time_micros("10:00:00."), None);
    }

    #[test]
    fn boundaries() {
        let ts = |s: &str| parse_timestamp(s).unwrap();
        assert!(timestamp_aligned("day", &ts("2024-01-31 00:00:00.000")));
        assert!(!timestamp_aligned("day", &ts("2024-01-31 00:00:00.001")));
        assert!(timestamp_aligned("hour", &ts("2024-01-31 13:00:00")));
        assert!(!timestamp_aligned("hour", &ts("2024-01-31 13:30:00")));
        assert!(timestamp_aligned("month", &ts("2024-02-01 00:00:00")));
        assert!(!timestamp_aligned("month", &ts("2024-02-02 00:00:00")));
        assert!(timestamp_aligned("year", &ts("2024-01-01 00:00:00")));
        assert!(!timestamp_aligned("year", &ts("2024-02-01 00:00:00")));
        assert!(!timestamp_aligned("bucket[4]", &ts("2024-01-01 00:00:00")));
        let d = |s: &str| parse_date(s).unwrap();
        assert!(date_aligned("month", d("2024-02-01")) && !date_aligned("month", d("2024-02-03")));
        assert!(date_aligned("year", d("2024-01-01")) && !date_aligned("year", d("2024-03-01")));
        assert_eq!(transform_width("truncate[10]", "truncate"), Some(10));
        assert_eq!(transform_width("truncate[0]", "truncate"), None);
        assert_eq!(transform_width("bucket[16]", "truncate"), None);
    }

    #[test]
    fn durations_and_sizes() {
        assert_eq!(duration_text(7 * 86_400_000), "7d");
        assert_eq!(duration_text(36 * 3_600_000), "36h");
        assert_eq!(duration_text(90 * 60_000), "90m");
        assert_eq!(duration_text(45_000), "45s");
        assert_eq!(duration_text(1500), "1500ms");
        assert_eq!(duration_text(0), "0ms");
        assert_eq!(data_size_text(128 << 20), "128MB");
        assert_eq!(data_size_text(1536 << 10), "1536kB");
        assert_eq!(data_size_text(3 << 30), "3GB");
        assert_eq!(data_size_text(100), "100B");
        assert_eq!(data_size_text(0), "0B");
        assert_eq!(
            utc_millis_text(1_700_000_000_123).unwrap(),
            "2023-11-14 22:13:20.123"
        );
        assert_eq!(utc_millis_text(-1).unwrap(), "1969-12-31 23:59:59.999");
        assert_eq!(comment_safe("a\nb\t'c"), "a\\nb\\t'c");
    }
}
