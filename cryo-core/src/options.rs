//! Options as a binding receives them: a JSON object of the fields the caller gave, laid over an
//! options type's defaults.
//!
//! Every options type of cryo-core is `Serialize + Deserialize + Default` with `#[serde(default)]`.
//! A binding (Python, Node, or one's own) turns the caller's keyword arguments or object into a
//! JSON object in cryo-core's field names and calls [`overlay`]: the defaults stay in cryo-core, a
//! field given as `null` keeps its default, and a misspelt field is an [`Error::Validation`] that
//! names the known ones, before anything runs.
//!
//! ```
//! use cryo_core::exec::MaintenanceOptions;
//! use cryo_core::options::overlay;
//! use serde_json::json;
//!
//! let given = json!({ "dry_run": false, "deadline_ms": null });
//! let o: MaintenanceOptions = overlay("run options", given.as_object().unwrap().clone(), str::to_string)?;
//! assert!(!o.dry_run);
//! assert_eq!(o.deadline_ms, None); // null: the default
//! assert_eq!(o.parallel_groups, MaintenanceOptions::default().parallel_groups);
//!
//! let typo = json!({ "dry_runs": false });
//! let err = overlay::<MaintenanceOptions>("run options", typo.as_object().unwrap().clone(), str::to_string)
//!     .unwrap_err();
//! assert!(err.to_string().contains("unknown option `dry_runs` (known: actor, "));
//! # Ok::<_, cryo_core::Error>(())
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The default of an options type as a JSON object: its field names and default values.
pub fn defaults<T: Serialize + Default>() -> Result<Map<String, Value>> {
    match serde_json::to_value(T::default()) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(Error::Internal(format!(
            "options of type {} serialize as {other}, not an object",
            std::any::type_name::<T>()
        ))),
        Err(e) => Err(Error::Internal(format!(
            "the default of {} does not serialize: {e}",
            std::any::type_name::<T>()
        ))),
    }
}

/// `given` laid over `T`'s defaults. `what` names the options in errors (`"run options"`);
/// `spell` writes a field name the way the caller's language does (`dry_run` → `dryRun` in
/// JavaScript) when an error lists the known fields.
pub fn overlay<T>(what: &str, given: Map<String, Value>, spell: fn(&str) -> String) -> Result<T>
where
    T: Serialize + DeserializeOwned + Default,
{
    let base = defaults::<T>()?;
    lay(what, base, given, spell)
}

/// One object of options split between two options types (compaction's "what" and "how": a
/// field of `B` goes to `B`, any other to `A`) and laid over their defaults.
pub fn overlay_pair<A, B>(
    what: &str,
    given: Map<String, Value>,
    spell: fn(&str) -> String,
) -> Result<(A, B)>
where
    A: Serialize + DeserializeOwned + Default,
    B: Serialize + DeserializeOwned + Default,
{
    let (first_base, second_base) = (defaults::<A>()?, defaults::<B>()?);
    if let Some(key) = given
        .keys()
        .find(|k| !first_base.contains_key(*k) && !second_base.contains_key(*k))
    {
        let known = first_base.keys().chain(second_base.keys());
        return Err(unknown(what, key, known, spell));
    }
    let (mut first, mut second) = (Map::new(), Map::new());
    for (key, value) in given {
        if second_base.contains_key(&key) {
            second.insert(key, value);
        } else {
            first.insert(key, value);
        }
    }
    Ok((
        lay(what, first_base, first, spell)?,
        lay(what, second_base, second, spell)?,
    ))
}

fn lay<T: DeserializeOwned>(
    what: &str,
    mut base: Map<String, Value>,
    given: Map<String, Value>,
    spell: fn(&str) -> String,
) -> Result<T> {
    for (key, value) in given {
        if !base.contains_key(&key) {
            return Err(unknown(what, &key, base.keys(), spell));
        }
        if !value.is_null() {
            base.insert(key, value);
        }
    }
    serde_json::from_value(Value::Object(base))
        .map_err(|e| Error::validation(format!("{what}: {e}")))
}

fn unknown<'k>(
    what: &str,
    key: &str,
    known: impl Iterator<Item = &'k String>,
    spell: fn(&str) -> String,
) -> Error {
    let mut known: Vec<String> = known.map(|k| spell(k)).collect();
    known.sort_unstable();
    known.dedup();
    Error::validation(format!(
        "{what}: unknown option `{key}` (known: {})",
        known.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    #[serde(default)]
    struct What {
        target: u64,
        name: Option<String>,
    }

    impl Default for What {
        fn default() -> Self {
            Self {
                target: 7,
                name: None,
            }
        }
    }

    #[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
    #[serde(default)]
    struct How {
        dry_run: bool,
    }

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn fields_overlay_defaults_and_typos_name_the_known_fields() {
        let o: What = overlay("w", object(json!({"name": "x"})), str::to_string).unwrap();
        assert_eq!(
            o,
            What {
                target: 7,
                name: Some("x".into())
            }
        );
        let o: What = overlay("w", object(json!({"target": null})), str::to_string).unwrap();
        assert_eq!(o, What::default());
        let err = overlay::<What>("w", object(json!({"goal": 1})), str::to_uppercase).unwrap_err();
        assert!(matches!(err, Error::Validation { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "invalid input: w: unknown option `goal` (known: NAME, TARGET)"
        );
        let err =
            overlay::<What>("w", object(json!({"target": "many"})), str::to_string).unwrap_err();
        assert!(err.to_string().contains("w: invalid type"), "{err}");
    }

    #[test]
    fn a_pair_splits_by_field() {
        let (w, h): (What, How) = overlay_pair(
            "c",
            object(json!({"target": 3, "dry_run": true})),
            str::to_string,
        )
        .unwrap();
        assert_eq!(w.target, 3);
        assert!(h.dry_run);
        let err = overlay_pair::<What, How>("c", object(json!({"dryrun": true})), str::to_string)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown option `dryrun` (known: dry_run, name, target)"),
            "{err}"
        );
    }
}
