//! The configuration users already have: PyIceberg's `.pyiceberg.yaml` and its `PYICEBERG_*`
//! environment variables, read the way PyIceberg 0.12 reads them.
//!
//! - The file is the first `.pyiceberg.yaml` found in `$PYICEBERG_HOME`, then the home directory,
//!   then the current directory. Its keys are lowercased (values are not).
//! - Environment variables `PYICEBERG_<A>__<B>__<C>` override the file: the name is lowercased,
//!   split on its first two `__`, and in each part `__` becomes `.` and `_` becomes `-`. So
//!   `PYICEBERG_CATALOG__PROD__S3__ENDPOINT` sets `s3.endpoint` of catalog `prod`, and
//!   `PYICEBERG_DEFAULT_CATALOG` sets `default-catalog`.
//! - A catalog is looked up by its lowercased name; without a name, `default-catalog` names it,
//!   else `default`. Properties given in code override both.
//!
//! Nested mappings in a catalog's block are flattened to dotted names (`ssl: {cabundle: …}` is
//! `ssl.cabundle`); scalar values become strings as PyIceberg's strict YAML reads them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::CatalogConfig;
use crate::error::{Error, Result};

/// The file PyIceberg reads.
pub const FILE_NAME: &str = ".pyiceberg.yaml";
/// The environment variable naming the directory searched first.
pub const HOME_VAR: &str = "PYICEBERG_HOME";
const ENV_PREFIX: &str = "pyiceberg_";
const DEFAULT_CATALOG_KEY: &str = "default-catalog";
const DEFAULT_NAME: &str = "default";

/// PyIceberg's configuration as found on this machine: the catalogs of `.pyiceberg.yaml` with
/// the `PYICEBERG_*` environment variables applied.
///
/// `Debug` shows catalog names and property keys, never values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PyIcebergConfig {
    file: Option<PathBuf>,
    default_catalog: Option<String>,
    /// Lowercased name → properties; `Err` holds why the entry is not a catalog block.
    catalogs: BTreeMap<String, std::result::Result<BTreeMap<String, String>, String>>,
}

impl std::fmt::Debug for PyIcebergConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: BTreeMap<&str, Vec<&str>> = self
            .catalogs
            .iter()
            .map(|(name, props)| {
                let keys = props
                    .as_ref()
                    .map(|p| p.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                (name.as_str(), keys)
            })
            .collect();
        f.debug_struct("PyIcebergConfig")
            .field("file", &self.file)
            .field("default_catalog", &self.default_catalog)
            .field("catalogs", &keys)
            .finish()
    }
}

impl PyIcebergConfig {
    /// The configuration this process sees: the first `.pyiceberg.yaml` of `$PYICEBERG_HOME`,
    /// the home directory and the current directory, then the `PYICEBERG_*` variables.
    pub fn from_env() -> Result<Self> {
        let mut dirs = Vec::new();
        if let Some(home) = std::env::var_os(HOME_VAR) {
            dirs.push(PathBuf::from(home));
        }
        if let Some(home) = std::env::var_os("HOME") {
            dirs.push(PathBuf::from(home));
        }
        if let Ok(cwd) = std::env::current_dir() {
            dirs.push(cwd);
        }
        Self::from_sources(
            &dirs,
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        )
    }

    /// The configuration from the first `.pyiceberg.yaml` in `dirs` (in order) and the
    /// `PYICEBERG_*` entries of `env`.
    pub fn from_sources(
        dirs: &[PathBuf],
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self> {
        let mut config = Self::default();
        for dir in dirs {
            let path = dir.join(FILE_NAME);
            if !path.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .map_err(|e| Error::config(format!("cannot read {}: {e}", path.display())))?;
            config = Self::from_yaml(&path, &text)?;
            break;
        }
        config.apply_env(env);
        Ok(config)
    }

    /// The configuration a `.pyiceberg.yaml` holds (`path` names it in errors).
    pub fn from_yaml(path: &Path, text: &str) -> Result<Self> {
        let shown = path.display();
        let value: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_saphyr::from_str(text).map_err(|e| {
                // Without the snippet: the offending line may hold a credential.
                let e = e.without_snippet();
                let at = e
                    .location()
                    .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
                    .unwrap_or_default();
                Error::config(format!("{shown} is not valid YAML{at}"))
            })?
        };
        let mut config = Self {
            file: Some(path.to_path_buf()),
            ..Self::default()
        };
        let top = match value {
            Value::Null => return Ok(config),
            Value::Object(top) => top,
            _ => {
                return Err(Error::config(format!(
                    "{shown}: the top level must be a mapping (`catalog:` with one block per catalog)"
                )));
            }
        };
        for (key, value) in top {
            match key.to_lowercase().as_str() {
                DEFAULT_CATALOG_KEY => config.default_catalog = scalar(&value),
                "catalog" => {
                    let Value::Object(catalogs) = value else {
                        return Err(Error::config(format!(
                            "{shown}: `catalog` must be a mapping of catalog names to their properties"
                        )));
                    };
                    for (name, block) in catalogs {
                        let entry = match block {
                            Value::Object(props) => {
                                let mut flat = BTreeMap::new();
                                flatten("", props, &mut flat);
                                Ok(flat)
                            }
                            Value::Null => Ok(BTreeMap::new()),
                            _ => Err(format!(
                                "{shown}: catalog `{name}` must be a mapping of properties"
                            )),
                        };
                        config.catalogs.insert(name.to_lowercase(), entry);
                    }
                }
                // Other settings (max-workers, downcast-ns-timestamp-to-us-on-write, …) are
                // PyIceberg's own.
                _ => {}
            }
        }
        Ok(config)
    }

    fn apply_env(&mut self, env: impl IntoIterator<Item = (String, String)>) {
        for (var, value) in env {
            let var = var.to_lowercase();
            let Some(key) = var.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            let parts: Vec<String> = key
                .splitn(3, "__")
                .map(|p| p.replace("__", ".").replace('_', "-"))
                .collect();
            match parts.as_slice() {
                [k] if k == DEFAULT_CATALOG_KEY => self.default_catalog = Some(value),
                [c, name, prop] if c == "catalog" => {
                    let entry = self
                        .catalogs
                        .entry(name.clone())
                        .or_insert_with(|| Ok(BTreeMap::new()));
                    match entry {
                        Ok(props) => {
                            props.insert(prop.clone(), value);
                        }
                        // A file entry that was not a mapping: the variable makes it one.
                        Err(_) => *entry = Ok(BTreeMap::from([(prop.clone(), value)])),
                    }
                }
                [c, name] if c == "catalog" => {
                    self.catalogs.insert(
                        name.clone(),
                        Err(format!(
                            "the environment sets catalog `{name}` to a value, not properties \
                             (PYICEBERG_CATALOG__{}__<PROPERTY>=…)",
                            name.to_uppercase()
                        )),
                    );
                }
                _ => {}
            }
        }
    }

    /// The `.pyiceberg.yaml` that was read, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The catalog used when none is named: `default-catalog`, else `default`.
    pub fn default_catalog(&self) -> &str {
        self.default_catalog.as_deref().unwrap_or(DEFAULT_NAME)
    }

    /// The names of the configured catalogs (lowercased, as PyIceberg keys them).
    pub fn catalog_names(&self) -> impl Iterator<Item = &str> {
        self.catalogs.keys().map(String::as_str)
    }

    /// The configuration of catalog `name` (the default catalog when `None`), with `overrides`
    /// on top, as PyIceberg's `load_catalog(name, **overrides)` builds it. The catalog keeps
    /// the name as given (a SQL catalog scopes its rows by it); it is looked up lowercased.
    pub fn catalog(
        &self,
        name: Option<&str>,
        overrides: impl IntoIterator<Item = (String, String)>,
    ) -> Result<CatalogConfig> {
        let name = name.unwrap_or_else(|| self.default_catalog());
        let mut properties = match self.catalogs.get(&name.to_lowercase()) {
            Some(Ok(props)) => props.clone(),
            Some(Err(why)) => return Err(Error::config(why.clone())),
            None => BTreeMap::new(),
        };
        properties.extend(overrides);
        if properties.is_empty() {
            let known: Vec<&str> = self.catalog_names().collect();
            let source = self.file.as_ref().map_or_else(
                || format!("no {FILE_NAME} was found ($PYICEBERG_HOME, the home directory, the current directory)"),
                |f| format!("{} has {}", f.display(), if known.is_empty() {
                    "no catalogs".to_string()
                } else {
                    format!("catalogs {}", known.join(", "))
                }),
            );
            return Err(Error::NotFound {
                what: format!(
                    "catalog `{name}` in PyIceberg's configuration: {source}, and no PYICEBERG_CATALOG__{}__* variable is set",
                    name.to_uppercase().replace('-', "_")
                ),
            });
        }
        Ok(CatalogConfig::new(name, properties))
    }
}

/// A YAML scalar as the string PyIceberg's strict YAML would read.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

fn flatten(prefix: &str, map: serde_json::Map<String, Value>, out: &mut BTreeMap<String, String>) {
    for (key, value) in map {
        let key = if prefix.is_empty() {
            key.to_lowercase()
        } else {
            format!("{prefix}.{}", key.to_lowercase())
        };
        match value {
            Value::Object(inner) => flatten(&key, inner, out),
            Value::Array(items) => {
                // PyIceberg passes lists through; Cryo's properties are strings: comma-joined.
                let joined: Vec<String> = items.iter().filter_map(scalar).collect();
                out.insert(key, joined.join(","));
            }
            other => {
                if let Some(s) = scalar(&other) {
                    out.insert(key, s);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
        vars.iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    const YAML: &str = "
catalog:
  Prod:
    uri: http://rest.example:8181
    credential: id:s3cr3t
    S3.Endpoint: http://s3.example
    ssl:
      cabundle: /etc/ca.pem
    init_catalog_tables: true
    pool.max-connections: 8
  local:
    type: sql
    uri: sqlite:////tmp/c.db
default-catalog: local
max-workers: 4
";

    #[test]
    fn reads_the_file_like_pyiceberg() {
        let c = PyIcebergConfig::from_yaml(Path::new("/x/.pyiceberg.yaml"), YAML).unwrap();
        assert_eq!(c.default_catalog(), "local");
        assert_eq!(c.catalog_names().collect::<Vec<_>>(), ["local", "prod"]);
        let prod = c.catalog(Some("PROD"), []).unwrap();
        assert_eq!(prod.name, "PROD");
        assert_eq!(prod.get("uri"), Some("http://rest.example:8181"));
        assert_eq!(prod.get("s3.endpoint"), Some("http://s3.example"));
        assert_eq!(prod.get("ssl.cabundle"), Some("/etc/ca.pem"));
        assert_eq!(prod.get("init_catalog_tables"), Some("true"));
        assert_eq!(prod.get("pool.max-connections"), Some("8"));
        let default = c.catalog(None, []).unwrap();
        assert_eq!(default.name, "local");
        assert_eq!(default.get("type"), Some("sql"));
        // Debug never shows a value.
        assert!(!format!("{c:?}").contains("s3cr3t"));
    }

    #[test]
    fn environment_overrides_the_file_and_code_overrides_both() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), YAML).unwrap();
        let c = PyIcebergConfig::from_sources(
            &[dir.path().join("absent"), dir.path().to_path_buf()],
            env(&[
                ("PYICEBERG_CATALOG__PROD__URI", "http://other:8181"),
                ("PYICEBERG_CATALOG__PROD__S3__REGION", "eu-west-1"),
                ("pyiceberg_catalog__my_cat__py_io_impl", "x"),
                ("PYICEBERG_DEFAULT_CATALOG", "prod"),
                ("PYICEBERG_HOME", "/ignored"),
                ("OTHER", "1"),
            ]),
        )
        .unwrap();
        assert_eq!(c.file(), Some(dir.path().join(FILE_NAME).as_path()));
        assert_eq!(c.default_catalog(), "prod");
        let prod = c
            .catalog(None, [("s3.region".to_string(), "us-east-2".to_string())])
            .unwrap();
        assert_eq!(prod.get("uri"), Some("http://other:8181"));
        assert_eq!(prod.get("s3.region"), Some("us-east-2"));
        assert_eq!(prod.get("credential"), Some("id:s3cr3t"));
        assert_eq!(
            c.catalog(Some("my-cat"), []).unwrap().get("py-io-impl"),
            Some("x")
        );
    }

    #[test]
    fn clear_errors_that_hold_no_secret() {
        let bad = "catalog:\n  prod:\n    credential: id:s3cr3t\n   uri: [unclosed\n";
        let e = PyIcebergConfig::from_yaml(Path::new("/x/.pyiceberg.yaml"), bad).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("/x/.pyiceberg.yaml is not valid YAML at line"),
            "{msg}"
        );
        assert!(!msg.contains("s3cr3t"), "{msg}");

        let e = PyIcebergConfig::from_yaml(Path::new("f"), "catalog: [1, 2]").unwrap_err();
        assert!(e.to_string().contains("`catalog` must be a mapping"), "{e}");
        let c = PyIcebergConfig::from_yaml(Path::new("f"), "catalog:\n  prod: oops\n").unwrap();
        let e = c.catalog(Some("prod"), []).unwrap_err();
        assert!(
            e.to_string().contains("catalog `prod` must be a mapping"),
            "{e}"
        );

        let none = PyIcebergConfig::from_sources(&[], env(&[])).unwrap();
        let e = none.catalog(Some("prod"), []).unwrap_err();
        assert!(matches!(e, Error::NotFound { .. }), "{e}");
        assert!(e.to_string().contains("PYICEBERG_CATALOG__PROD__"), "{e}");
        // Empty files are no configuration, not an error.
        assert!(PyIcebergConfig::from_yaml(Path::new("f"), "  \n").is_ok());
    }
}
