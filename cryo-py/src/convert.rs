//! Translation between Python values and cryo-core's serde types.
//!
//! Options: the keyword arguments the caller gave, as a JSON object, laid over the core type's
//! defaults by cryo-core (`options::overlay`): every default stays in cryo-core and a misspelt
//! option is a `ValidationError` naming the known ones. `None` means "core's default".

use cryo_core::options::{overlay, overlay_pair};
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

/// The keyword options the caller gave, as a JSON object (`None` values: core's default).
fn given_object(overrides: Option<&Bound<'_, PyDict>>) -> PyResult<Map<String, Value>> {
    let mut given = Map::new();
    if let Some(overrides) = overrides {
        for (k, v) in overrides.iter() {
            given.insert(k.extract()?, to_json(&v)?);
        }
    }
    Ok(given)
}

/// `overrides` laid over the default of `T` (cryo-core's `options::overlay`).
pub(crate) fn options<T>(what: &str, overrides: Option<&Bound<'_, PyDict>>) -> PyResult<T>
where
    T: Serialize + DeserializeOwned + Default,
{
    errors::check(overlay(what, given_object(overrides)?, str::to_string))
}

/// One set of keyword options split between two option types (compaction's "what" and "how").
pub(crate) fn options_pair<A, B>(
    what: &str,
    overrides: Option<&Bound<'_, PyDict>>,
) -> PyResult<(A, B)>
where
    A: Serialize + DeserializeOwned + Default,
    B: Serialize + DeserializeOwned + Default,
{
    errors::check(overlay_pair(what, given_object(overrides)?, str::to_string))
}
