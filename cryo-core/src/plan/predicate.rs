//! From a partition tuple to a predicate on source columns that selects exactly that partition.

use chrono::{DateTime, Months, NaiveDate, NaiveDateTime};

use super::model::{FieldPredicate, Literal, PredicateKind};
use crate::scan::{PartitionFieldInfo, PartitionFieldValue, PartitionValue};

const EPOCH_DAYS_FROM_CE: i64 = 719_163;

fn date(days: i64) -> Option<NaiveDate> {
    i32::try_from(days.checked_add(EPOCH_DAYS_FROM_CE)?)
        .ok()
        .and_then(NaiveDate::from_num_days_from_ce_opt)
}

fn fmt_ts(t: NaiveDateTime) -> String {
    if t.and_utc().timestamp_subsec_micros() == 0 {
        t.format("%Y-%m-%d %H:%M:%S").to_string()
    } else {
        t.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
    }
}

fn ts_literal(column_type: &str, t: NaiveDateTime) -> Option<Literal> {
    match column_type {
        "timestamp" | "timestamp_ns" => Some(Literal::Timestamp(fmt_ts(t))),
        "timestamptz" | "timestamptz_ns" => Some(Literal::TimestampTz(fmt_ts(t))),
        "date" => Some(Literal::Date(t.date().to_string())),
        _ => None,
    }
}

/// Bounds `[lower, upper)` of a time-transform ordinal, as datetimes.
fn time_bounds(transform: &str, v: i64) -> Option<(NaiveDateTime, NaiveDateTime)> {
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?.and_hms_opt(0, 0, 0)?;
    let months = |m: i64| -> Option<NaiveDateTime> {
        if m >= 0 {
            epoch.checked_add_months(Months::new(u32::try_from(m).ok()?))
        } else {
            epoch.checked_sub_months(Months::new(u32::try_from(m.checked_neg()?).ok()?))
        }
    };
    match transform {
        "year" => Some((
            months(v.checked_mul(12)?)?,
            months(v.checked_add(1)?.checked_mul(12)?)?,
        )),
        "month" => Some((months(v)?, months(v.checked_add(1)?)?)),
        "day" => {
            let d = date(v)?.and_hms_opt(0, 0, 0)?;
            Some((d, date(v.checked_add(1)?)?.and_hms_opt(0, 0, 0)?))
        }
        "hour" => {
            let start = DateTime::from_timestamp(v.checked_mul(3600)?, 0)?.naive_utc();
            let end =
                DateTime::from_timestamp(v.checked_add(1)?.checked_mul(3600)?, 0)?.naive_utc();
            Some((start, end))
        }
        _ => None,
    }
}

fn identity_literal(column_type: &str, value: &PartitionValue) -> Option<Literal> {
    Some(match (column_type, value) {
        ("boolean", PartitionValue::Bool(b)) => Literal::Boolean(*b),
        ("int" | "long", PartitionValue::Int(i)) => Literal::Integer(*i),
        ("float" | "double", PartitionValue::Float(f)) if f.is_finite() => Literal::Float(*f),
        (t, PartitionValue::String(s)) if t.starts_with("decimal") => Literal::Decimal(s.clone()),
        ("string" | "uuid", PartitionValue::String(s)) => Literal::String(s.clone()),
        ("date", PartitionValue::Int(d)) => Literal::Date(date(*d)?.to_string()),
        ("timestamp" | "timestamptz", PartitionValue::Int(us)) => {
            let t = DateTime::from_timestamp_micros(*us)?.naive_utc();
            ts_literal(column_type, t)?
        }
        _ => return None,
    })
}

fn parse_width(transform: &str, name: &str) -> Option<i64> {
    transform
        .strip_prefix(name)?
        .strip_prefix('[')?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The predicate for one partition field, or `None` when the value cannot be expressed on the
/// source column (a dropped column, a `void` transform, an unknown type).
pub(crate) fn field_predicate(
    field: &PartitionFieldInfo,
    value: &PartitionFieldValue,
) -> Option<FieldPredicate> {
    let column = field.source_column.clone()?;
    let column_type = field.source_type.clone()?;
    let transform = field.transform.as_str();
    if transform == "void" {
        return None;
    }
    let kind = if value.value == PartitionValue::Null {
        PredicateKind::IsNull
    } else if transform == "identity" {
        PredicateKind::Eq {
            value: identity_literal(&column_type, &value.value)?,
        }
    } else if let Some((lo, hi)) = match &value.value {
        PartitionValue::Int(v) => time_bounds(transform, *v),
        _ => None,
    } {
        PredicateKind::Range {
            lower: ts_literal(&column_type, lo)?,
            upper: ts_literal(&column_type, hi)?,
        }
    } else if let Some(n) = parse_width(transform, "bucket") {
        let PartitionValue::Int(v) = value.value else {
            return None;
        };
        PredicateKind::Bucket {
            buckets: u32::try_from(n).ok()?,
            value: v,
        }
    } else if let Some(w) = parse_width(transform, "truncate") {
        match (&value.value, column_type.as_str()) {
            (PartitionValue::Int(v), "int" | "long") => PredicateKind::Range {
                lower: Literal::Integer(*v),
                upper: Literal::Integer(v.checked_add(w)?),
            },
            (PartitionValue::String(s), "string") => {
                // A value shorter than the width is the whole string; at full width it is a prefix.
                if s.chars().count() as i64 >= w {
                    PredicateKind::StartsWith { prefix: s.clone() }
                } else {
                    PredicateKind::Eq {
                        value: Literal::String(s.clone()),
                    }
                }
            }
            _ => return None,
        }
    } else {
        return None;
    };
    Some(FieldPredicate {
        column,
        column_type,
        transform: field.transform.clone(),
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::days_from_epoch;

    fn field(transform: &str, ty: &str) -> PartitionFieldInfo {
        PartitionFieldInfo {
            field_id: 1000,
            name: "p".into(),
            source_id: 1,
            source_column: Some("ts".into()),
            source_type: Some(ty.into()),
            transform: transform.into(),
        }
    }

    fn val(v: PartitionValue) -> PartitionFieldValue {
        PartitionFieldValue {
            field: "p".into(),
            value: v,
            human: String::new(),
        }
    }

    #[test]
    fn day_month_year_hour_ranges() {
        let d = days_from_epoch(NaiveDate::from_ymd_opt(2024, 2, 29).unwrap());
        let p =
            field_predicate(&field("day", "timestamptz"), &val(PartitionValue::Int(d))).unwrap();
        assert_eq!(
            p.kind,
            PredicateKind::Range {
                lower: Literal::TimestampTz("2024-02-29 00:00:00".into()),
                upper: Literal::TimestampTz("2024-03-01 00:00:00".into()),
            }
        );
        let p = field_predicate(
            &field("month", "date"),
            &val(PartitionValue::Int(54 * 12 + 11)),
        )
        .unwrap();
        assert_eq!(
            p.kind,
            PredicateKind::Range {
                lower: Literal::Date("2024-12-01".into()),
                upper: Literal::Date("2025-01-01".into()),
            }
        );
        let p =
            field_predicate(&field("year", "timestamp"), &val(PartitionValue::Int(-1))).unwrap();
        assert_eq!(
            p.kind,
            PredicateKind::Range {
                lower: Literal::Timestamp("1969-01-01 00:00:00".into()),
                upper: Literal::Timestamp("1970-01-01 00:00:00".into()),
            }
        );
        let p = field_predicate(
            &field("hour", "timestamp"),
            &val(PartitionValue::Int(d * 24 + 23)),
        )
        .unwrap();
        assert_eq!(
            p.kind,
            PredicateKind::Range {
                lower: Literal::Timestamp("2024-02-29 23:00:00".into()),
                upper: Literal::Timestamp("2024-03-01 00:00:00".into()),
            }
        );
    }

    #[test]
    fn identity_truncate_bucket_null() {
        let f = PartitionFieldInfo {
            source_column: Some("c".into()),
            ..field("identity", "string")
        };
        let p = field_predicate(&f, &val(PartitionValue::String("it's".into()))).unwrap();
        assert_eq!(
            p.kind,
            PredicateKind::Eq {
                value: Literal::String("it's".into())
            }
        );
        let p = field_predicate(&f, &val(PartitionValue::Null)).unwrap();
        assert_eq!(p.kind, PredicateKind::IsNull);
        let p = field_predicate(
            &field("truncate[10]", "long"),
            &val(PartitionValue::Int(20)),
        )
        .unwrap();
        assert_eq!(
            p.kind,
            PredicateKind::Range {
                lower: Literal::Integer(20),
                upper: Literal::Integer(30)
            }
        );
        let p = field_predicate(
            &field("truncate[3]", "string"),
            &val(PartitionValue::String("abc".into())),
        )
        .unwrap();
        assert_eq!(
            p.kind,
            PredicateKind::StartsWith {
                prefix: "abc".into()
            }
        );
        let p = field_predicate(
            &field("truncate[3]", "string"),
            &val(PartitionValue::String("ab".into())),
        )
        .unwrap();
        assert_eq!(
            p.kind,
            PredicateKind::Eq {
                value: Literal::String("ab".into())
            }
        );
        let p =
            field_predicate(&field("bucket[16]", "long"), &val(PartitionValue::Int(3))).unwrap();
        assert_eq!(
            p.kind,
            PredicateKind::Bucket {
                buckets: 16,
                value: 3
            }
        );
        assert!(field_predicate(&field("void", "long"), &val(PartitionValue::Null)).is_none());
        let dropped = PartitionFieldInfo {
            source_column: None,
            ..field("identity", "long")
        };
        assert!(field_predicate(&dropped, &val(PartitionValue::Int(1))).is_none());
        // Absurd ordinals degrade to "inexpressible", never panic.
        assert!(
            field_predicate(&field("day", "date"), &val(PartitionValue::Int(i64::MAX))).is_none()
        );
        assert!(
            field_predicate(&field("month", "date"), &val(PartitionValue::Int(i64::MIN))).is_none()
        );
    }
}
