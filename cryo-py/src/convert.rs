//! Translation between Python values and cryo-core's serde types.
//!
//! Options: the binding starts from the core type's `Default` (serialized), overlays the
//! keyword arguments the caller gave, and deserializes, so every default stays in cryo-core and
//! a misspelt option is a `ValidationError` naming the known ones. `None` means "core's default".

use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PySet, PyString, PyTuple};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::errors;

/// A Python value as JSON (dicts with string keys, sequences, str, int, float, bool, None).
pub(crate) fn to_json(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        return Ok(Value::from(obj.extract::<u64>()?));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return serde_json::Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| errors::validation(format!("{} is not a finite number", f.value())));
    }
    if obj.is_instance_of::<PyString>() {
        return Ok(Value::String(obj.extract::<String>()?));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let key: String = k
                .extract()
                .map_err(|_| errors::validation("option dictionaries need string keys"))?;
            map.insert(key, to_json(&v)?);
        }
        return Ok(Value::Object(map));
    }
    if obj.is_instance_of::<PyList>()
        || obj.is_instance_of::<PyTuple>()
        || obj.is_instance_of::<PySet>()
    {
        let mut items = Vec::new();
        for item in obj.try_iter()? {
            items.push(to_json(&item?)?);
        }
        return Ok(Value::Array(items));
    }
    Err(errors::validation(format!(
        "cannot pass a value of type `{}` as an option",
        obj.get_type().name()?
    )))
}

/// JSON as plain Python values (dict, list, str, int, float, bool, None).
pub(crate) fn from_json<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => (*b).into_bound_py_any(py)?,
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_bound_py_any(py)?
            } else if let Some(u) = n.as_u64() {
                u.into_bound_py_any(py)?
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_bound_py_any(py)?
            }
        }
        Value::String(s) => s.as_str().into_bound_py_any(py)?,
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(from_json(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, from_json(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// Any serializable core value as plain Python values (`to_dict()`).
pub(crate) fn to_python<'py, T: Serialize>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let json = serde_json::to_value(value).map_err(errors::internal)?;
    from_json(py, &json)
}

/// The serialized default of an options type, as a JSON object.
fn default_object<T: Serialize + Default>(what: &str) -> PyResult<Map<String, Value>> {
    match serde_json::to_value(T::default()).map_err(errors::internal)? {
        Value::Object(map) => Ok(map),
        _ => Err(errors::internal(format!(
            "{what}: options are not an object"
        ))),
    }
}

/// Overlay `overrides` on the default of `T` and deserialize. Keys `T` does not have are
/// refused (with the list of known ones); `None` values keep the default.
pub(crate) fn options<T>(what: &str, overrides: Option<&Bound<'_, PyDict>>) -> PyResult<T>
where
    T: Serialize + DeserializeOwned + Default,
{
    let mut base = default_object::<T>(what)?;
    if let Some(overrides) = overrides {
        for (k, v) in overrides.iter() {
            let key: String = k.extract()?;
            if !base.contains_key(&key) {
                let known: Vec<&str> = base.keys().map(String::as_str).collect();
                return Err(errors::validation(format!(
                    "{what}: unknown option `{key}` (known: {})",
                    known.join(", ")
                )));
            }
            if !v.is_none() {
                base.insert(key, to_json(&v)?);
            }
        }
    }
    serde_json::from_value(Value::Object(base))
        .map_err(|e| errors::validation(format!("{what}: {e}")))
}

/// Split one set of keyword options between two option types (compaction's "what" and "how").
pub(crate) fn options_pair<A, B>(
    what: &str,
    overrides: Option<&Bound<'_, PyDict>>,
) -> PyResult<(A, B)>
where
    A: Serialize + DeserializeOwned + Default,
    B: Serialize + DeserializeOwned + Default,
{
    let py_a = default_object::<A>(what)?;
    let py_b = default_object::<B>(what)?;
    let (first, second) = match overrides {
        None => (None, None),
        Some(d) => {
            let py = d.py();
            let first = PyDict::new(py);
            let second = PyDict::new(py);
            for (k, v) in d.iter() {
                let key: String = k.extract()?;
                if !py_a.contains_key(&key) && !py_b.contains_key(&key) {
                    let mut known: Vec<&str> =
                        py_a.keys().chain(py_b.keys()).map(String::as_str).collect();
                    known.sort_unstable();
                    known.dedup();
                    return Err(errors::validation(format!(
                        "{what}: unknown option `{key}` (known: {})",
                        known.join(", ")
                    )));
                }
                if py_b.contains_key(&key) {
                    second.set_item(k, v)?;
                } else {
                    first.set_item(k, v)?;
                }
            }
            (Some(first), Some(second))
        }
    };
    Ok((
        options::<A>(what, first.as_ref())?,
        options::<B>(what, second.as_ref())?,
    ))
}
