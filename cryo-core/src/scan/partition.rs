//! Partition tuples as Cryo stores them: typed values plus Iceberg's human form, computed
//! without trusting the data (a tuple that does not match its spec degrades, never panics).

use std::fmt::Write as _;

use chrono::{DateTime, Datelike, NaiveDate};
use iceberg::spec::{Literal, PrimitiveLiteral, PrimitiveType, Schema, Struct, Transform, Type};

use super::model::{PartitionFieldInfo, PartitionFieldValue, PartitionValue};

const EPOCH_DAYS_FROM_CE: i32 = 719_163;

fn date_from_days(days: i64) -> Option<NaiveDate> {
    i32::try_from(days)
        .ok()
        .and_then(|d| d.checked_add(EPOCH_DAYS_FROM_CE))
        .and_then(NaiveDate::from_num_days_from_ce_opt)
}

/// The human form Iceberg uses in partition paths for a transformed value.
pub(crate) fn human(
    transform: Transform,
    source_type: Option<&PrimitiveType>,
    value: &PartitionValue,
) -> String {
    let v = match value {
        PartitionValue::Int(v) => *v,
        PartitionValue::Null => return "null".to_string(),
        PartitionValue::Bool(b) => return b.to_string(),
        PartitionValue::Float(f) => return f.to_string(),
        PartitionValue::String(s) => return s.clone(),
    };
    match transform {
        Transform::Year => (1970 + v).to_string(),
        Transform::Month => {
            let (y, m) = (1970 + v.div_euclid(12), v.rem_euclid(12) + 1);
            format!("{y:04}-{m:02}")
        }
        Transform::Day => date_from_days(v).map_or(v.to_string(), |d| d.to_string()),
        Transform::Hour => {
            let days = v.div_euclid(24);
            let h = v.rem_euclid(24);
            date_from_days(days).map_or(v.to_string(), |d| format!("{d}-{h:02}"))
        }
        Transform::Identity | Transform::Truncate(_) => match source_type {
            Some(PrimitiveType::Date) => date_from_days(v).map_or(v.to_string(), |d| d.to_string()),
            Some(PrimitiveType::Timestamp | PrimitiveType::Timestamptz) => {
                DateTime::from_timestamp_micros(v).map_or(v.to_string(), |t| {
                    t.naive_utc().format("%Y-%m-%dT%H:%M:%S%.f").to_string()
                })
            }
            Some(PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs) => {
                DateTime::from_timestamp_nanos(v)
                    .naive_utc()
                    .format("%Y-%m-%dT%H:%M:%S%.f")
                    .to_string()
            }
            _ => v.to_string(),
        },
        _ => v.to_string(),
    }
}

fn lower_hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(2 * bytes.len()), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        })
}

fn decimal_text(unscaled: i128, scale: u32) -> String {
    if scale == 0 {
        return unscaled.to_string();
    }
    let neg = unscaled < 0;
    let digits = unscaled.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale - digits.len() + 1))
    } else {
        digits
    };
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{}{int}.{frac}", if neg { "-" } else { "" })
}

/// Convert a stored partition literal.
pub(crate) fn value_of(
    lit: Option<&Literal>,
    result_type: Option<&PrimitiveType>,
) -> PartitionValue {
    let Some(lit) = lit else {
        return PartitionValue::Null;
    };
    let Some(p) = lit.as_primitive_literal() else {
        return PartitionValue::String(format!("{lit:?}"));
    };
    match p {
        PrimitiveLiteral::Boolean(b) => PartitionValue::Bool(b),
        PrimitiveLiteral::Int(i) => PartitionValue::Int(i64::from(i)),
        PrimitiveLiteral::Long(l) => PartitionValue::Int(l),
        PrimitiveLiteral::Float(f) => PartitionValue::Float(f64::from(f.0)),
        PrimitiveLiteral::Double(d) => PartitionValue::Float(d.0),
        PrimitiveLiteral::String(s) => PartitionValue::String(s),
        PrimitiveLiteral::Binary(b) => PartitionValue::String(lower_hex(&b)),
        PrimitiveLiteral::Int128(i) => match result_type {
            Some(PrimitiveType::Decimal { scale, .. }) => {
                PartitionValue::String(decimal_text(i, *scale))
            }
            _ => PartitionValue::String(i.to_string()),
        },
        PrimitiveLiteral::UInt128(u) => match result_type {
            Some(PrimitiveType::Uuid) => {
                PartitionValue::String(uuid::Uuid::from_u128(u).to_string())
            }
            _ => PartitionValue::String(u.to_string()),
        },
        PrimitiveLiteral::AboveMax | PrimitiveLiteral::BelowMin => {
            PartitionValue::String(format!("{p:?}"))
        }
    }
}

/// A partition tuple, field by field.
pub(crate) fn tuple(
    fields: &[PartitionFieldInfo],
    transforms: &[Transform],
    source_types: &[Option<PrimitiveType>],
    data: &Struct,
) -> Vec<PartitionFieldValue> {
    let lits = data.fields();
    fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let transform = transforms.get(i).copied().unwrap_or(Transform::Unknown);
            let source = source_types.get(i).and_then(Option::as_ref);
            let result_type =
                source.and_then(
                    |s| match transform.result_type(&Type::Primitive(s.clone())) {
                        Ok(Type::Primitive(p)) => Some(p),
                        _ => None,
                    },
                );
            let value = value_of(lits.get(i).and_then(Option::as_ref), result_type.as_ref());
            let human = if transform == Transform::Void {
                "null".to_string()
            } else {
                human(transform, source, &value)
            };
            PartitionFieldValue {
                field: f.name.clone(),
                value,
                human,
            }
        })
        .collect()
}

/// Hive-style path of a tuple, unambiguous: the planner and the compactor select partitions by
/// (spec, path), so two tuples of a spec must never share one.
///
/// Iceberg's human forms collide (found by fuzzing): a null and the string `null` both read
/// `null`, and a `/` or `=` inside a value shifts the fields. So in a value `%`, `/` and `=` are
/// percent-encoded (as Java's `URLEncoder` writes them), and a non-null value that reads `null`
/// is written `%6Eull` (which decodes to `null`). Every other value reads as Iceberg writes it.
pub(crate) fn path_of(values: &[PartitionFieldValue]) -> String {
    values
        .iter()
        .map(|v| {
            let human = if v.value == PartitionValue::Null {
                "null".to_string()
            } else if v.human == "null" {
                "%6Eull".to_string()
            } else {
                escape_path_value(&v.human)
            };
            format!("{}={human}", v.field)
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn escape_path_value(human: &str) -> String {
    let mut out = String::with_capacity(human.len());
    for c in human.chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            '=' => out.push_str("%3D"),
            c => out.push(c),
        }
    }
    out
}

/// Primitive type of a (possibly nested) source column.
pub(crate) fn source_primitive(schema: &Schema, source_id: i32) -> Option<PrimitiveType> {
    schema
        .field_by_id(source_id)
        .and_then(|f| f.field_type.as_primitive_type().cloned())
}

/// Day number of a date, for tests and planners.
pub fn days_from_epoch(d: NaiveDate) -> i64 {
    i64::from(d.num_days_from_ce() - EPOCH_DAYS_FROM_CE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_forms_match_iceberg() {
        let d = days_from_epoch(NaiveDate::from_ymd_opt(2024, 1, 31).unwrap());
        assert_eq!(
            human(Transform::Day, None, &PartitionValue::Int(d)),
            "2024-01-31"
        );
        assert_eq!(
            human(Transform::Month, None, &PartitionValue::Int(12 * 54)),
            "2024-01"
        );
        assert_eq!(
            human(Transform::Year, None, &PartitionValue::Int(54)),
            "2024"
        );
        assert_eq!(
            human(Transform::Hour, None, &PartitionValue::Int(d * 24 + 10)),
            "2024-01-31-10"
        );
        assert_eq!(
            human(Transform::Month, None, &PartitionValue::Int(-1)),
            "1969-12"
        );
        assert_eq!(
            human(Transform::Bucket(16), None, &PartitionValue::Int(3)),
            "3"
        );
        assert_eq!(
            human(Transform::Identity, None, &PartitionValue::Null),
            "null"
        );
        assert_eq!(
            human(
                Transform::Identity,
                Some(&PrimitiveType::Date),
                &PartitionValue::Int(d)
            ),
            "2024-01-31"
        );
        // Out-of-range ordinals degrade to the number instead of panicking.
        assert_eq!(
            human(Transform::Day, None, &PartitionValue::Int(i64::MAX)),
            i64::MAX.to_string()
        );
    }

    #[test]
    fn paths_are_unambiguous() {
        let v = |value: PartitionValue, human: &str| PartitionFieldValue {
            field: "c".into(),
            value,
            human: human.into(),
        };
        let null = path_of(&[v(PartitionValue::Null, "null")]);
        let string_null = path_of(&[v(PartitionValue::String("null".into()), "null")]);
        assert_eq!(null, "c=null");
        assert_eq!(string_null, "c=%6Eull");
        let two = |a: &str, b: &str| {
            path_of(&[
                v(PartitionValue::String(a.into()), a),
                PartitionFieldValue {
                    field: "d".into(),
                    ..v(PartitionValue::String(b.into()), b)
                },
            ])
        };
        assert_ne!(two("x/d=y", "z"), two("x", "y/d=z"));
        assert_eq!(two("a%b", "2024-01-31"), "c=a%25b/d=2024-01-31");
    }

    #[test]
    fn decimals() {
        assert_eq!(decimal_text(12345, 2), "123.45");
        assert_eq!(decimal_text(-5, 3), "-0.005");
        assert_eq!(decimal_text(7, 0), "7");
    }
}
