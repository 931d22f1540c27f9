//! Translation between JavaScript values and cryo-core's serde types.
//!
//! Options: as in the Python binding, the fields the caller gave are laid over the core type's
//! defaults by cryo-core (`options::overlay`), so every default stays in cryo-core and a misspelt
//! option is a `ValidationError` naming the known ones. `null` and
//! `undefined` mean "core's default". Names may be written the JavaScript way (`dryRun`,
//! `olderThanMs`) or as cryo-core spells them (`dry_run`): a camelCase key is renamed when its
//! `snake_case` form is a field of the options struct, at the top level and inside nested option
//! structs (`expire: { retainLast: 3 }`); keys of maps (`routes`, table properties) are data and
//! are left alone.

use cryo_core::options::{defaults, overlay, overlay_pair};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};

use crate::errors;

/// Largest integer a JS number holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// `dryRun` → `dry_run` (ASCII; other characters kept).
pub(crate) fn snake_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `dry_run` → `dryRun`, for messages that list the known options.
pub(crate) fn camel_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// JS numbers arrive as doubles; integral ones within the safe range become integers so that
/// integer fields (`older_than_ms`, `retain_last`) deserialize.
fn integral_numbers(value: Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f)
                if !n.is_i64()
                    && !n.is_u64()
                    && f.fract() == 0.0
                    && f.abs() <= MAX_SAFE_INTEGER =>
            {
                Value::Number(Number::from(f as i64))
            }
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(integral_numbers).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, integral_numbers(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Rename camelCase keys of `given` that name fields of the struct `default` describes (an
/// object with fields); recurse into nested option structs.
fn rename_fields(given: Value, default: &Value) -> Value {
    match (given, default) {
        // A map's default is empty: its keys are data, not field names.
        (Value::Object(given), Value::Object(fields)) if !fields.is_empty() => {
            let mut out = Map::with_capacity(given.len());
            for (key, value) in given {
                let key = if fields.contains_key(&key) {
                    key
                } else {
                    let snake = snake_case(&key);
                    if fields.contains_key(&snake) {
                        snake
                    } else {
                        key
                    }
                };
                let value = match fields.get(&key) {
                    Some(nested) => rename_fields(value, nested),
                    None => value,
                };
                out.insert(key, value);
            }
            Value::Object(out)
        }
        (given, _) => given,
    }
}

/// The caller's options as an object of fields (`None`, `null`: none given).
fn given_object(what: &str, overrides: Option<Value>) -> napi::Result<Map<String, Value>> {
    match overrides.map(integral_numbers) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map),
        Some(other) => Err(errors::validation(format!(
            "{what}: expected an options object, got {}",
            kind(&other)
        ))),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The caller's options, keys renamed to cryo-core's fields (against the fields of `fields`).
fn renamed(given: Map<String, Value>, fields: Map<String, Value>) -> Map<String, Value> {
    match rename_fields(Value::Object(given), &Value::Object(fields)) {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The caller's options laid over the default of `T` (cryo-core's `options::overlay`). Fields
/// `T` does not have are refused (with the list of known ones); `null` values keep the default.
pub(crate) fn options<T>(what: &str, overrides: Option<Value>) -> napi::Result<T>
where
    T: Serialize + DeserializeOwned + Default,
{
    let given = given_object(what, overrides)?;
    let fields = errors::check(defaults::<T>())?;
    errors::check(overlay(what, renamed(given, fields), camel_case))
}

/// Split one options object between two option types (compaction's "what" and "how").
pub(crate) fn options_pair<A, B>(what: &str, overrides: Option<Value>) -> napi::Result<(A, B)>
where
    A: Serialize + DeserializeOwned + Default,
    B: Serialize + DeserializeOwned + Default,
{
    let given = given_object(what, overrides)?;
    let mut fields = errors::check(defaults::<A>())?;
    fields.extend(errors::check(defaults::<B>())?);
    errors::check(overlay_pair(what, renamed(given, fields), camel_case))
}

/// Take a binding-level option (`lockDir`, `receiptLog`) out of an options object before the
/// rest is overlaid on a core type.
pub(crate) fn take_string(
    options: &mut Option<Value>,
    camel: &str,
    snake: &str,
) -> napi::Result<Option<String>> {
    let Some(Value::Object(map)) = options.as_mut() else {
        return Ok(None);
    };
    let value = map.remove(camel).or_else(|| map.remove(snake));
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(errors::validation(format!(
            "`{camel}` must be a string (a path), got {}",
            kind(&other)
        ))),
    }
}

/// Any serializable core value as a plain JS object (through serde; integers beyond 2^53 become
/// `BigInt`s).
pub(crate) fn to_value<T: Serialize>(value: &T) -> napi::Result<Value> {
    serde_json::to_value(value).map_err(errors::internal)
}

/// A core enum's serde spelling (`warn`, `sql`, `data_file`).
pub(crate) fn serde_name<T: Serialize>(value: &T) -> napi::Result<String> {
    match to_value(value)? {
        Value::String(s) => Ok(s),
        other => Ok(other.to_string()),
    }
}
