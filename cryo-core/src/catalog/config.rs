use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::props;
use crate::error::{Error, Result};

/// The kind of catalog a configuration describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CatalogKind {
    /// SQL catalog (sqlite or PostgreSQL) with the schema PyIceberg and Java's `JdbcCatalog` share.
    Sql,
    /// Iceberg REST catalog.
    Rest,
    /// AWS Glue Data Catalog.
    Glue,
    /// Hive Metastore (Thrift).
    Hive,
    /// Hadoop-style warehouse directory (`<ns>/<table>/metadata/version-hint.text`).
    Hadoop,
    /// A single table given by its `metadata.json` (or table directory).
    Static,
}

/// A catalog configuration: a name and PyIceberg-style properties.
///
/// `Debug` never shows credential values; [`CatalogConfig::redact`] scrubs them from messages.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogConfig {
    /// Catalog name (SQL catalogs scope their rows by it; PyIceberg's `load_catalog(name, ...)`).
    pub name: String,
    /// Properties, e.g. `uri`, `warehouse`, `s3.endpoint`, `token`.
    pub properties: BTreeMap<String, String>,
}

impl fmt::Debug for CatalogConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: BTreeMap<&str, String> = self
            .properties
            .iter()
            .map(|(k, v)| (k.as_str(), self.redact(v)))
            .collect();
        f.debug_struct("CatalogConfig")
            .field("name", &self.name)
            .field("properties", &shown)
            .finish()
    }
}

impl CatalogConfig {
    /// A configuration from a name and properties.
    pub fn new(
        name: impl Into<String>,
        properties: impl IntoIterator<Item = (impl Into<String>, impl Into<String>)>,
    ) -> Self {
        Self {
            name: name.into(),
            properties: properties
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// The embedded default: a sqlite catalog `catalog.db` and a warehouse under `root`.
    pub fn local(name: impl Into<String>, root: &std::path::Path) -> Self {
        let root = root.to_string_lossy();
        let root = root.trim_end_matches('/');
        Self::new(
            name,
            [
                (props::TYPE, "sql".to_string()),
                (props::URI, format!("sqlite:///{root}/catalog.db")),
                (props::WAREHOUSE, format!("file://{root}/warehouse")),
            ],
        )
    }

    /// One property.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.properties.get(key).map(String::as_str)
    }

    /// The kind: the `type` property, else inferred from `uri` (as PyIceberg does).
    pub fn kind(&self) -> Result<CatalogKind> {
        if let Some(t) = self.get(props::TYPE) {
            return match t.to_ascii_lowercase().as_str() {
                "sql" | "jdbc" => Ok(CatalogKind::Sql),
                "rest" => Ok(CatalogKind::Rest),
                "glue" => Ok(CatalogKind::Glue),
                "hive" => Ok(CatalogKind::Hive),
                "hadoop" => Ok(CatalogKind::Hadoop),
                "static" | "file" => Ok(CatalogKind::Static),
                other => Err(match props::missing_kind(other) {
                    Some(what) => Error::unsupported(format!(
                        "catalog `{}`: type `{other}` ({what}) is not supported yet; Cryo serves sql, rest, glue, hive, hadoop and static catalogs",
                        self.name
                    )),
                    None => Error::config(format!(
                        "catalog `{}`: type `{other}` is not a catalog type (sql, rest, glue, hive, hadoop, static)",
                        self.name
                    )),
                }),
            };
        }
        if self.get(props::METADATA_LOCATION).is_some() {
            return Ok(CatalogKind::Static);
        }
        match self.get(props::URI) {
            Some(uri) if uri.starts_with("http://") || uri.starts_with("https://") => {
                Ok(CatalogKind::Rest)
            }
            Some(uri) if uri.starts_with("thrift://") => Ok(CatalogKind::Hive),
            Some(uri)
                if ["sqlite", "jdbc:sqlite", "postgres", "jdbc:postgresql"]
                    .iter()
                    .any(|p| uri.starts_with(p)) =>
            {
                Ok(CatalogKind::Sql)
            }
            Some(_) => Err(Error::config(format!(
                "catalog `{}`: cannot infer the catalog type from `uri`; set `type`",
                self.name
            ))),
            None if self.get(props::WAREHOUSE).is_some() => Ok(CatalogKind::Hadoop),
            None => Err(Error::config(format!(
                "catalog `{}`: neither `type`, `uri` nor `warehouse` is set",
                self.name
            ))),
        }
    }

    /// What Cryo makes of each property it does not simply use: unknown ones, ones it
    /// understands and ignores, and ones it cannot serve yet (with what is missing), by key.
    pub fn property_notes(&self) -> Vec<props::PropertyNote> {
        self.properties
            .keys()
            .filter_map(|key| match props::support(key) {
                props::Support::Used => None,
                support => Some(props::PropertyNote {
                    key: key.clone(),
                    support,
                }),
            })
            .collect()
    }

    /// Log what Cryo makes of the properties it does not simply use, by name (never a value):
    /// ones it does not know, and ones it knows but cannot serve yet (with what is missing). A
    /// catalog whose files Cryo would write against the user's settings (server-side encryption
    /// it cannot apply) or that names Python code is refused instead.
    pub(crate) fn check_properties(&self) -> Result<()> {
        let mut refused = Vec::new();
        for note in self.property_notes() {
            match note.support {
                props::Support::Missing(what) if props::refuses(&note.key) => {
                    refused.push(format!("`{}` ({what})", note.key));
                }
                props::Support::Missing(what) => tracing::warn!(
                    catalog = %self.name,
                    property = %note.key,
                    "catalog property `{}` is not served yet ({what}); it is ignored",
                    note.key
                ),
                props::Support::Unknown => tracing::warn!(
                    catalog = %self.name,
                    property = %note.key,
                    "catalog property `{}` is not one Cryo knows; it is ignored",
                    note.key
                ),
                props::Support::Ignored(why) => tracing::debug!(
                    catalog = %self.name,
                    property = %note.key,
                    "catalog property `{}` has no effect on Cryo: {why}",
                    note.key
                ),
                props::Support::Used => {}
            }
        }
        if refused.is_empty() {
            Ok(())
        } else {
            Err(Error::unsupported(format!(
                "catalog `{}`: Cryo cannot serve {} yet",
                self.name,
                refused.join(", ")
            )))
        }
    }

    /// A required property, or a clear error naming it.
    pub(crate) fn require(&self, key: &str) -> Result<&str> {
        self.get(key).ok_or_else(|| {
            Error::config(format!(
                "catalog `{}` needs the `{key}` property",
                self.name
            ))
        })
    }

    /// Properties forwarded to storage (`s3.*`, `client.*`, …): everything but catalog-only keys.
    pub(crate) fn storage_properties(&self) -> std::collections::HashMap<String, String> {
        self.properties
            .iter()
            .filter(|(k, _)| {
                !matches!(
                    k.as_str(),
                    props::TYPE | props::URI | props::TOKEN | props::CREDENTIAL
                )
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Remove every configured secret (and URI passwords) from a message.
    pub fn redact(&self, message: &str) -> String {
        let mut out = message.to_string();
        for (k, v) in &self.properties {
            if props::is_secret(k) && v.len() >= 3 {
                out = out.replace(v.as_str(), "***");
                // OAuth2 credentials appear split into id and secret.
                if let Some((_, secret)) = v.split_once(':')
                    && secret.len() >= 3
                {
                    out = out.replace(secret, "***");
                }
            }
        }
        redact_uri_password(&out)
    }
}

/// `scheme://user:password@host` → `scheme://user:***@host`, anywhere in a message.
fn redact_uri_password(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match (authority.rfind('@'), authority.find(':')) {
            (Some(at), Some(colon)) if colon < at => {
                out.push_str(&authority[..=colon]);
                out.push_str("***");
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infers_kind_like_pyiceberg() {
        let c = |p: &[(&str, &str)]| CatalogConfig::new("c", p.iter().copied()).kind();
        assert_eq!(
            c(&[("uri", "sqlite:////tmp/c.db")]).unwrap(),
            CatalogKind::Sql
        );
        assert_eq!(
            c(&[("uri", "http://127.0.0.1:8181")]).unwrap(),
            CatalogKind::Rest
        );
        assert_eq!(c(&[("warehouse", "/tmp/wh")]).unwrap(), CatalogKind::Hadoop);
        assert_eq!(
            c(&[("metadata-location", "/t/metadata/v1.metadata.json")]).unwrap(),
            CatalogKind::Static
        );
        assert_eq!(
            c(&[("uri", "thrift://hms:9083")]).unwrap(),
            CatalogKind::Hive
        );
        assert_eq!(
            c(&[("uri", "postgresql+psycopg2://u@h/db")]).unwrap(),
            CatalogKind::Sql
        );
        assert_eq!(
            c(&[("type", "glue"), ("glue.region", "us-east-1")]).unwrap(),
            CatalogKind::Glue
        );
        assert!(c(&[("uri", "mysql://h/db")]).is_err());
        assert!(matches!(
            c(&[("type", "dynamodb")]).unwrap_err(),
            Error::Unsupported { .. }
        ));
        assert!(c(&[("type", "glue2")]).is_err());
        assert!(c(&[]).is_err());
    }

    #[test]
    fn never_shows_secrets() {
        let cfg = CatalogConfig::new(
            "c",
            [
                ("uri", "https://user:hunter22@cat.example.com/api"),
                ("credential", "client:s3cr3t-value"),
                ("s3.secret-access-key", "AKIASECRETKEY"),
                ("token", "tok-123456"),
            ],
        );
        let dbg = format!("{cfg:?}");
        for s in ["hunter22", "s3cr3t-value", "AKIASECRETKEY", "tok-123456"] {
            assert!(!dbg.contains(s), "{s} leaked in {dbg}");
        }
        let msg = cfg.redact(
            "failed with tok-123456 and s3cr3t-value at https://user:hunter22@cat.example.com/api",
        );
        assert!(
            !msg.contains("tok-123456")
                && !msg.contains("s3cr3t-value")
                && !msg.contains("hunter22")
        );
        assert!(msg.contains("https://user:***@cat.example.com/api"));
    }
}
