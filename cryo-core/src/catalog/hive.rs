//! Hive Metastore: list, load and commit over the metastore's Thrift API (binary protocol,
//! buffered transport), configured with PyIceberg's property names (`uri: thrift://host:9083`).
//!
//! An Iceberg table is a metastore table whose `table_type` parameter is `ICEBERG` and whose
//! `metadata_location` parameter points at its current `metadata.json`. A commit follows Java's
//! `HiveTableOperations`: take an exclusive table lock (`lock`, then `check_lock` while it waits),
//! read the table under the lock, check `metadata_location` is still the head the commit was built
//! on, `alter_table_with_environment_context` with the new location (and the old one as
//! `previous_metadata_location`; `DO_NOT_UPDATE_STATS`), then unlock.
//!
//! The metastore's structs are handled generically: a table is decoded into Thrift fields and
//! encoded back with only its parameters changed, so every field the metastore returned (storage
//! descriptor, owner, privileges, fields of newer metastores) survives the update unchanged.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::{CatalogConfig, Namespace, TableId};
use crate::error::{Error, Result};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const IO_TIMEOUT: Duration = Duration::from_mins(1);
/// Thrift types.
const T_STOP: u8 = 0;
const T_BOOL: u8 = 2;
const T_BYTE: u8 = 3;
const T_DOUBLE: u8 = 4;
const T_I16: u8 = 6;
const T_I32: u8 = 8;
const T_I64: u8 = 10;
const T_STRING: u8 = 11;
const T_STRUCT: u8 = 12;
const T_MAP: u8 = 13;
const T_SET: u8 = 14;
const T_LIST: u8 = 15;
/// Nesting deeper than this is refused (a corrupt answer must not overflow the stack).
const MAX_DEPTH: usize = 64;
/// `Table.parameters`.
const TABLE_PARAMETERS: i16 = 9;
/// `LockState`.
const ACQUIRED: i32 = 1;
const WAITING: i32 = 2;

/// A Thrift value, as the binary protocol carries it.
#[derive(Debug, Clone, PartialEq)]
enum TValue {
    Bool(bool),
    Byte(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    Double(f64),
    Binary(Vec<u8>),
    Struct(Vec<(i16, TValue)>),
    Map(u8, u8, Vec<(TValue, TValue)>),
    List(u8, Vec<TValue>),
    Set(u8, Vec<TValue>),
}

impl TValue {
    fn str(s: &str) -> Self {
        TValue::Binary(s.as_bytes().to_vec())
    }

    fn type_code(&self) -> u8 {
        match self {
            TValue::Bool(_) => T_BOOL,
            TValue::Byte(_) => T_BYTE,
            TValue::I16(_) => T_I16,
            TValue::I32(_) => T_I32,
            TValue::I64(_) => T_I64,
            TValue::Double(_) => T_DOUBLE,
            TValue::Binary(_) => T_STRING,
            TValue::Struct(_) => T_STRUCT,
            TValue::Map(..) => T_MAP,
            TValue::List(..) => T_LIST,
            TValue::Set(..) => T_SET,
        }
    }

    fn field(&self, id: i16) -> Option<&TValue> {
        match self {
            TValue::Struct(fields) => fields.iter().find(|(i, _)| *i == id).map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            TValue::Binary(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    fn string_map_get(&self, key: &str) -> Option<&str> {
        match self {
            TValue::Map(_, _, entries) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .and_then(|(_, v)| v.as_str()),
            _ => None,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            TValue::Bool(b) => out.push(u8::from(*b)),
            TValue::Byte(b) => out.extend_from_slice(&b.to_be_bytes()),
            TValue::I16(v) => out.extend_from_slice(&v.to_be_bytes()),
            TValue::I32(v) => out.extend_from_slice(&v.to_be_bytes()),
            TValue::I64(v) => out.extend_from_slice(&v.to_be_bytes()),
            TValue::Double(v) => out.extend_from_slice(&v.to_bits().to_be_bytes()),
            TValue::Binary(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
            TValue::Struct(fields) => {
                for (id, v) in fields {
                    out.push(v.type_code());
                    out.extend_from_slice(&id.to_be_bytes());
                    v.encode(out);
                }
                out.push(T_STOP);
            }
            TValue::Map(k, v, entries) => {
                out.push(*k);
                out.push(*v);
                out.extend_from_slice(&(entries.len() as i32).to_be_bytes());
                for (key, value) in entries {
                    key.encode(out);
                    value.encode(out);
                }
            }
            TValue::List(e, items) | TValue::Set(e, items) => {
                out.push(*e);
                out.extend_from_slice(&(items.len() as i32).to_be_bytes());
                for item in items {
                    item.encode(out);
                }
            }
        }
    }
}

/// Reads Thrift values from a stream, refusing sizes and depths no metastore answer has.
struct Decoder<R> {
    inner: R,
}

impl<R: Read> Decoder<R> {
    fn bytes<const N: usize>(&mut self) -> std::io::Result<[u8; N]> {
        let mut buf = [0u8; N];
        self.inner.read_exact(&mut buf)?;
        Ok(buf)
    }

    fn size(&mut self) -> std::io::Result<usize> {
        let n = i32::from_be_bytes(self.bytes()?);
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= 256 << 20)
            .ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad size {n}"))
            })
    }

    fn value(&mut self, t: u8, depth: usize) -> std::io::Result<TValue> {
        let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        if depth > MAX_DEPTH {
            return Err(bad("nested too deeply".into()));
        }
        Ok(match t {
            T_BOOL => TValue::Bool(self.bytes::<1>()?[0] != 0),
            T_BYTE => TValue::Byte(i8::from_be_bytes(self.bytes()?)),
            T_I16 => TValue::I16(i16::from_be_bytes(self.bytes()?)),
            T_I32 => TValue::I32(i32::from_be_bytes(self.bytes()?)),
            T_I64 => TValue::I64(i64::from_be_bytes(self.bytes()?)),
            T_DOUBLE => TValue::Double(f64::from_bits(u64::from_be_bytes(self.bytes()?))),
            T_STRING => {
                let n = self.size()?;
                let mut buf = vec![0u8; n];
                self.inner.read_exact(&mut buf)?;
                TValue::Binary(buf)
            }
            T_STRUCT => {
                let mut fields = Vec::new();
                loop {
                    let ft = self.bytes::<1>()?[0];
                    if ft == T_STOP {
                        break;
                    }
                    let id = i16::from_be_bytes(self.bytes()?);
                    fields.push((id, self.value(ft, depth + 1)?));
                }
                TValue::Struct(fields)
            }
            T_MAP => {
                let [k, v] = self.bytes::<2>()?;
                let n = self.size()?;
                let mut entries = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    let key = self.value(k, depth + 1)?;
                    entries.push((key, self.value(v, depth + 1)?));
                }
                TValue::Map(k, v, entries)
            }
            T_LIST | T_SET => {
                let e = self.bytes::<1>()?[0];
                let n = self.size()?;
                let mut items = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    items.push(self.value(e, depth + 1)?);
                }
                if t == T_LIST {
                    TValue::List(e, items)
                } else {
                    TValue::Set(e, items)
                }
            }
            other => return Err(bad(format!("unknown Thrift type {other}"))),
        })
    }
}

/// Why a call failed.
enum CallError {
    /// Not connected, or the connection failed before the request was sent.
    Unreachable(String),
    /// The request was sent and no complete answer came back: it may have taken effect.
    Unknown(String),
    /// The metastore answered with one of the call's declared exceptions: (its name, message).
    Declared(String, String),
    /// Anything else the metastore answered (an application exception, a malformed answer).
    Failed(String),
}

/// A Hive Metastore client for one catalog configuration.
#[derive(Debug)]
pub(crate) struct HiveClient {
    name: String,
    config: CatalogConfig,
    addresses: Vec<String>,
    lock_min_wait: Duration,
    lock_max_wait: Duration,
    lock_retries: u32,
}

fn seconds(config: &CatalogConfig, key: &str, default: f64) -> Result<Duration> {
    match config.get(key) {
        None => Ok(Duration::from_secs_f64(default)),
        Some(v) => v
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0 && *s < 86_400.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                Error::config(format!(
                    "catalog `{}`: `{key}` must be a number of seconds, got `{v}`",
                    config.name
                ))
            }),
    }
}

impl HiveClient {
    /// A client for the metastore(s) `uri` names (`thrift://host:port`, comma-separated for
    /// several, tried in order); nothing is sent yet.
    pub(crate) fn new(config: &CatalogConfig) -> Result<Self> {
        let uri = config.require(super::props::URI)?;
        let mut addresses = Vec::new();
        for part in uri.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let address = part
                .strip_prefix("thrift://")
                .filter(|a| a.contains(':') && !a.contains('/'))
                .ok_or_else(|| {
                    Error::config(format!(
                        "catalog `{}`: a Hive catalog's `uri` is thrift://host:port, got `{part}`",
                        config.name
                    ))
                })?;
            addresses.push(address.to_string());
        }
        if addresses.is_empty() {
            return Err(Error::config(format!(
                "catalog `{}`: `uri` names no metastore",
                config.name
            )));
        }
        let lock_retries = match config.get("lock-check-retries") {
            None => 4,
            Some(v) => v.parse::<u32>().ok().filter(|n| *n <= 100).ok_or_else(|| {
                Error::config(format!(
                    "catalog `{}`: `lock-check-retries` must be a small whole number, got `{v}`",
                    config.name
                ))
            })?,
        };
        Ok(Self {
            name: config.name.clone(),
            config: config.clone(),
            addresses,
            lock_min_wait: seconds(config, "lock-check-min-wait-time", 0.1)?,
            lock_max_wait: seconds(config, "lock-check-max-wait-time", 60.0)?,
            lock_retries,
        })
    }

    fn error(&self, message: &str, retryable: bool) -> Error {
        Error::Catalog {
            catalog: self.name.clone(),
            message: self.config.redact(message),
            source: None,
            retryable,
        }
    }

    /// One call: `args` is the call's argument struct; the answer's struct (field 0 the result,
    /// the others its declared exceptions).
    async fn call(
        &self,
        method: &'static str,
        args: Vec<(i16, TValue)>,
    ) -> std::result::Result<TValue, CallError> {
        let addresses = self.addresses.clone();
        tokio::task::spawn_blocking(move || call_blocking(&addresses, method, args))
            .await
            .map_err(|e| CallError::Failed(format!("the metastore call did not finish: {e}")))?
    }

    /// A call whose declared exceptions become typed errors (`NoSuchObjectException` is
    /// `NotFound`), returning field 0 of the answer.
    async fn call_ok(
        &self,
        what: &str,
        method: &'static str,
        args: Vec<(i16, TValue)>,
    ) -> Result<Option<TValue>> {
        match self.call(method, args).await {
            Ok(reply) => Ok(reply.field(0).cloned()),
            Err(e) => Err(self.call_error(what, e)),
        }
    }

    fn call_error(&self, what: &str, e: CallError) -> Error {
        match e {
            CallError::Unreachable(m) => self.error(&format!("{what}: {m}"), true),
            CallError::Unknown(m) => self.error(
                &format!("{what}: {m}; the request may have reached the metastore (state unknown)"),
                true,
            ),
            CallError::Declared(kind, m)
                if kind == "NoSuchObjectException" || kind == "UnknownDBException" =>
            {
                Error::NotFound {
                    what: self
                        .config
                        .redact(&format!("{what} in Hive catalog `{}`: {m}", self.name)),
                }
            }
            CallError::Declared(kind, m) => self.error(&format!("{what}: {kind}: {m}"), false),
            CallError::Failed(m) => self.error(&format!("{what}: {m}"), false),
        }
    }

    fn database(ns: &Namespace) -> Result<&str> {
        ns.single_level("a metastore database")
    }

    /// Every database.
    pub(crate) async fn list_namespaces(&self) -> Result<Vec<Namespace>> {
        let answer = self
            .call_ok("list databases", "get_all_databases", vec![])
            .await?;
        let mut out: Vec<Namespace> = strings(answer.as_ref())
            .map(|d| Namespace::new([d]))
            .collect();
        out.sort();
        Ok(out)
    }

    /// The Iceberg tables of one database.
    pub(crate) async fn list_tables(&self, ns: &Namespace) -> Result<Vec<TableId>> {
        let db = Self::database(ns)?;
        let what = format!("list tables in {ns}");
        let names = self
            .call_ok(&what, "get_all_tables", vec![(1, TValue::str(db))])
            .await?;
        let names: Vec<TValue> = strings(names.as_ref()).map(|n| TValue::str(&n)).collect();
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let tables = self
            .call_ok(
                &what,
                "get_table_objects_by_name",
                vec![(1, TValue::str(db)), (2, TValue::List(T_STRING, names))],
            )
            .await?;
        let mut out: Vec<TableId> = match tables {
            Some(TValue::List(_, items)) => items
                .iter()
                .filter(|t| is_iceberg(t))
                .filter_map(|t| t.field(1).and_then(TValue::as_str))
                .map(|name| TableId::new(ns.clone(), name))
                .collect(),
            _ => Vec::new(),
        };
        out.sort();
        Ok(out)
    }

    async fn get_table(&self, id: &TableId) -> Result<TValue> {
        let db = Self::database(&id.namespace)?;
        let table = self
            .call_ok(
                &format!("table {id}"),
                "get_table",
                vec![(1, TValue::str(db)), (2, TValue::str(&id.name))],
            )
            .await?
            .ok_or_else(|| self.error(&format!("table {id}: get_table answered nothing"), false))?;
        if !is_iceberg(&table) {
            return Err(Error::NotFound {
                what: format!(
                    "Iceberg table {id} in Hive catalog `{}` (the metastore table is not `table_type=ICEBERG`)",
                    self.name
                ),
            });
        }
        Ok(table)
    }

    /// The table's current `metadata.json`.
    pub(crate) async fn metadata_location(&self, id: &TableId) -> Result<String> {
        let table = self.get_table(id).await?;
        parameter(&table, "metadata_location")
            .map(str::to_string)
            .ok_or_else(|| {
                Error::metadata(
                    id,
                    "<catalog>",
                    "the metastore table has no metadata_location parameter",
                )
            })
    }

    /// Create a database (one that exists is not an error); the metastore picks its location.
    pub(crate) async fn create_database(&self, ns: &Namespace) -> Result<()> {
        let db = Self::database(ns)?;
        let database = TValue::Struct(vec![
            (1, TValue::str(db)),
            (2, TValue::str("")),
            (4, TValue::Map(T_STRING, T_STRING, Vec::new())),
        ]);
        match self.call("create_database", vec![(1, database)]).await {
            Ok(_) => Ok(()),
            Err(CallError::Declared(kind, _)) if kind == "AlreadyExistsException" => Ok(()),
            Err(e) => Err(self.call_error(&format!("create namespace {ns}"), e)),
        }
    }

    /// Register an existing table (its `metadata.json` at `metadata_location`, its files under
    /// `location`) as an external Iceberg table, as PyIceberg's and Java's catalogs create them.
    pub(crate) async fn register_table(
        &self,
        id: &TableId,
        location: &str,
        metadata_location: &str,
    ) -> Result<()> {
        let db = Self::database(&id.namespace)?;
        let now = i32::try_from(chrono::Utc::now().timestamp()).unwrap_or(i32::MAX);
        let serde = TValue::Struct(vec![
            (
                2,
                TValue::str("org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"),
            ),
            (3, TValue::Map(T_STRING, T_STRING, Vec::new())),
        ]);
        let sd = TValue::Struct(vec![
            (1, TValue::List(T_STRUCT, Vec::new())),
            (2, TValue::str(location)),
            (3, TValue::str("org.apache.hadoop.mapred.FileInputFormat")),
            (4, TValue::str("org.apache.hadoop.mapred.FileOutputFormat")),
            (5, TValue::Bool(false)),
            (6, TValue::I32(-1)),
            (7, serde),
            (8, TValue::List(T_STRING, Vec::new())),
            (9, TValue::List(T_STRUCT, Vec::new())),
            (10, TValue::Map(T_STRING, T_STRING, Vec::new())),
        ]);
        let parameters = TValue::Map(
            T_STRING,
            T_STRING,
            [
                ("EXTERNAL", "TRUE"),
                ("table_type", "ICEBERG"),
                ("metadata_location", metadata_location),
            ]
            .into_iter()
            .map(|(k, v)| (TValue::str(k), TValue::str(v)))
            .collect(),
        );
        let table = TValue::Struct(vec![
            (1, TValue::str(&id.name)),
            (2, TValue::str(db)),
            (3, TValue::str("cryo")),
            (4, TValue::I32(now)),
            (5, TValue::I32(now)),
            (6, TValue::I32(0)),
            (7, sd),
            (8, TValue::List(T_STRUCT, Vec::new())),
            (9, parameters),
            (12, TValue::str("EXTERNAL_TABLE")),
        ]);
        self.call_ok(&format!("register {id}"), "create_table", vec![(1, table)])
            .await
            .map(|_| ())
    }

    /// Take the exclusive table lock (waiting as the `lock-check-*` properties say); its id.
    async fn lock(&self, id: &TableId) -> Result<i64> {
        let db = Self::database(&id.namespace)?;
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into());
        let component = TValue::Struct(vec![
            (1, TValue::I32(3)), // EXCLUSIVE
            (2, TValue::I32(2)), // TABLE
            (3, TValue::str(db)),
            (4, TValue::str(&id.name)),
        ]);
        let request = TValue::Struct(vec![
            (1, TValue::List(T_STRUCT, vec![component])),
            (3, TValue::str("cryo")),
            (4, TValue::str(&host)),
            (
                5,
                TValue::str(&format!(
                    "cryo {} pid {}",
                    env!("CARGO_PKG_VERSION"),
                    std::process::id()
                )),
            ),
        ]);
        let what = format!("lock {id}");
        let response = self.call_ok(&what, "lock", vec![(1, request)]).await?;
        let (lock_id, mut state) = lock_state(response.as_ref())
            .ok_or_else(|| self.error(&format!("{what}: the metastore answered no lock"), false))?;
        let mut wait = self.lock_min_wait;
        let mut checks = 0;
        while state == WAITING && checks < self.lock_retries {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(self.lock_max_wait);
            checks += 1;
            let response = self
                .call_ok(
                    &what,
                    "check_lock",
                    vec![(1, TValue::Struct(vec![(1, TValue::I64(lock_id))]))],
                )
                .await?;
            state = lock_state(response.as_ref()).map_or(0, |(_, s)| s);
        }
        if state == ACQUIRED {
            return Ok(lock_id);
        }
        self.unlock(lock_id).await;
        Err(Error::CommitConflict {
            table: id.to_string(),
            message: format!(
                "the metastore did not grant the table lock (state {state} after {checks} checks): another writer holds it"
            ),
            retryable: true,
        })
    }

    async fn unlock(&self, lock_id: i64) {
        if let Err(e) = self
            .call_ok(
                "unlock",
                "unlock",
                vec![(1, TValue::Struct(vec![(1, TValue::I64(lock_id))]))],
            )
            .await
        {
            tracing::warn!(catalog = %self.name, lock_id, error = %e, "could not release a metastore lock (it expires on its own)");
        }
    }

    /// Under the table lock: swap `metadata_location` from `expected` to `new`. `Ok(false)` when
    /// another writer moved it first.
    pub(crate) async fn swap_metadata_location(
        &self,
        id: &TableId,
        expected: &str,
        new: &str,
    ) -> Result<bool> {
        let lock_id = self.lock(id).await?;
        let out = self.swap_locked(id, expected, new).await;
        self.unlock(lock_id).await;
        out
    }

    async fn swap_locked(&self, id: &TableId, expected: &str, new: &str) -> Result<bool> {
        let mut table = self.get_table(id).await?;
        if parameter(&table, "metadata_location") != Some(expected) {
            return Ok(false);
        }
        set_parameters(
            &mut table,
            &[
                ("metadata_location", new),
                ("previous_metadata_location", expected),
            ],
        );
        let db = Self::database(&id.namespace)?;
        let context = TValue::Struct(vec![(
            1,
            TValue::Map(
                T_STRING,
                T_STRING,
                vec![(TValue::str("DO_NOT_UPDATE_STATS"), TValue::str("true"))],
            ),
        )]);
        match self
            .call(
                "alter_table_with_environment_context",
                vec![
                    (1, TValue::str(db)),
                    (2, TValue::str(&id.name)),
                    (3, table),
                    (4, context),
                ],
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(e) => Err(self.call_error(&format!("commit {id}"), e)),
        }
    }
}

fn is_iceberg(table: &TValue) -> bool {
    parameter(table, "table_type").is_some_and(|t| t.eq_ignore_ascii_case("iceberg"))
}

fn parameter<'a>(table: &'a TValue, key: &str) -> Option<&'a str> {
    table.field(TABLE_PARAMETERS)?.string_map_get(key)
}

fn set_parameters(table: &mut TValue, values: &[(&str, &str)]) {
    let TValue::Struct(fields) = table else {
        return;
    };
    if !fields.iter().any(|(id, _)| *id == TABLE_PARAMETERS) {
        fields.push((
            TABLE_PARAMETERS,
            TValue::Map(T_STRING, T_STRING, Vec::new()),
        ));
    }
    for (id, value) in fields.iter_mut() {
        if *id != TABLE_PARAMETERS {
            continue;
        }
        if let TValue::Map(_, _, entries) = value {
            for (key, new) in values {
                match entries.iter_mut().find(|(k, _)| k.as_str() == Some(key)) {
                    Some((_, v)) => *v = TValue::str(new),
                    None => entries.push((TValue::str(key), TValue::str(new))),
                }
            }
        }
    }
}

fn strings(value: Option<&TValue>) -> impl Iterator<Item = String> + '_ {
    let items: &[TValue] = match value {
        Some(TValue::List(_, items) | TValue::Set(_, items)) => items,
        _ => &[],
    };
    items.iter().filter_map(|v| v.as_str().map(str::to_string))
}

fn lock_state(response: Option<&TValue>) -> Option<(i64, i32)> {
    let response = response?;
    let TValue::I64(id) = response.field(1)? else {
        return None;
    };
    let TValue::I32(state) = response.field(2)? else {
        return None;
    };
    Some((*id, *state))
}

fn call_blocking(
    addresses: &[String],
    method: &str,
    args: Vec<(i16, TValue)>,
) -> std::result::Result<TValue, CallError> {
    let mut last = String::from("no address");
    let mut stream = None;
    for address in addresses {
        let resolved = match address.to_socket_addrs() {
            Ok(mut a) => a.next(),
            Err(e) => {
                last = format!("{address}: {e}");
                continue;
            }
        };
        let Some(sock) = resolved else { continue };
        match TcpStream::connect_timeout(&sock, CONNECT_TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("connect to {address}: {e}"),
        }
    }
    let mut stream = stream.ok_or(CallError::Unreachable(last))?;
    let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_nodelay(true);
    // Message header (strict binary protocol, CALL, sequence id 0), then the argument struct.
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(&(0x8001_0001_u32).to_be_bytes());
    TValue::str(method).encode(&mut out);
    out.extend_from_slice(&0_i32.to_be_bytes());
    TValue::Struct(args).encode(&mut out);
    stream
        .write_all(&out)
        .map_err(|e| CallError::Unknown(format!("{method}: sending: {e}")))?;
    let mut decoder = Decoder {
        inner: std::io::BufReader::new(stream),
    };
    let read = |e: std::io::Error| CallError::Unknown(format!("{method}: reading the answer: {e}"));
    let header = u32::from_be_bytes(decoder.bytes().map_err(read)?);
    if header & 0xffff_0000 != 0x8001_0000 {
        return Err(CallError::Failed(format!(
            "{method}: not a Thrift binary answer"
        )));
    }
    let _name = decoder.value(T_STRING, 0).map_err(read)?;
    let _seq = decoder.bytes::<4>().map_err(read)?;
    let body = decoder.value(T_STRUCT, 0).map_err(read)?;
    match header & 0xff {
        2 => {
            // REPLY: a declared exception is any field other than 0.
            if let TValue::Struct(fields) = &body
                && let Some((id, e)) = fields.iter().find(|(id, _)| *id != 0)
            {
                let message = e
                    .field(1)
                    .and_then(TValue::as_str)
                    .unwrap_or("")
                    .to_string();
                return Err(CallError::Declared(exception_name(method, *id), message));
            }
            Ok(body)
        }
        3 => {
            let message = body
                .field(1)
                .and_then(TValue::as_str)
                .unwrap_or("")
                .to_string();
            Err(CallError::Failed(format!(
                "{method}: the metastore raised: {message}"
            )))
        }
        other => Err(CallError::Failed(format!(
            "{method}: unexpected message type {other}"
        ))),
    }
}

/// The name of a call's declared exception by its field id in the answer (the binary protocol
/// carries no type names; these are the metastore 3.1 IDL's).
fn exception_name(method: &str, field: i16) -> String {
    let name = match (method, field) {
        ("get_table", 2) | ("create_table", 4) => "NoSuchObjectException",
        ("create_table" | "create_database", 1) => "AlreadyExistsException",
        ("create_table", 2) => "InvalidObjectException",
        ("get_table_objects_by_name", 3) => "UnknownDBException",
        ("get_table_objects_by_name", 2) | ("alter_table_with_environment_context", 1) => {
            "InvalidOperationException"
        }
        ("lock" | "check_lock", 1) => "NoSuchTxnException",
        ("lock" | "check_lock", 2) => "TxnAbortedException",
        ("check_lock", 3) | ("unlock", 1) => "NoSuchLockException",
        ("unlock", 2) => "TxnOpenException",
        _ => "MetaException",
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_parameters_change_in_place() {
        let table = TValue::Struct(vec![
            (1, TValue::str("t")),
            (2, TValue::str("db")),
            (4, TValue::I32(7)),
            (7, TValue::Struct(vec![(1, TValue::List(T_STRUCT, vec![]))])),
            (
                9,
                TValue::Map(
                    T_STRING,
                    T_STRING,
                    vec![
                        (TValue::str("table_type"), TValue::str("ICEBERG")),
                        (TValue::str("metadata_location"), TValue::str("a")),
                    ],
                ),
            ),
            (14, TValue::Bool(false)),
            (99, TValue::Double(1.5)),
        ]);
        let mut bytes = Vec::new();
        table.encode(&mut bytes);
        let back = Decoder {
            inner: bytes.as_slice(),
        }
        .value(T_STRUCT, 0)
        .unwrap();
        assert_eq!(back, table);
        assert!(is_iceberg(&back));
        let mut changed = back;
        set_parameters(
            &mut changed,
            &[
                ("metadata_location", "b"),
                ("previous_metadata_location", "a"),
            ],
        );
        assert_eq!(parameter(&changed, "metadata_location"), Some("b"));
        assert_eq!(parameter(&changed, "previous_metadata_location"), Some("a"));
        assert_eq!(changed.field(4), Some(&TValue::I32(7)));
        assert_eq!(changed.field(99), Some(&TValue::Double(1.5)));
    }

    #[test]
    fn corrupt_answers_are_errors_not_panics() {
        // A huge size, an unknown type, nesting without end.
        let huge = [T_STRING, 0, 1, 0x7f, 0xff, 0xff, 0xff];
        assert!(Decoder { inner: &huge[..] }.value(T_STRUCT, 0).is_err());
        assert!(
            Decoder {
                inner: &[9u8, 0, 1][..]
            }
            .value(T_STRUCT, 0)
            .is_err()
        );
        let deep: Vec<u8> = std::iter::repeat_n([T_STRUCT, 0, 1], 200)
            .flatten()
            .collect();
        assert!(
            Decoder {
                inner: deep.as_slice()
            }
            .value(T_STRUCT, 0)
            .is_err()
        );
        assert!(Decoder { inner: &[][..] }.value(T_STRUCT, 0).is_err());
    }

    #[test]
    fn configuration_is_checked() {
        let c = |p: &[(&str, &str)]| HiveClient::new(&CatalogConfig::new("h", p.iter().copied()));
        assert!(c(&[("uri", "http://x:9083")]).is_err());
        assert!(c(&[("uri", "thrift://x")]).is_err());
        assert!(
            c(&[
                ("uri", "thrift://a:9083,thrift://b:9083"),
                ("lock-check-retries", "-1")
            ])
            .is_err()
        );
        let ok = c(&[
            ("uri", "thrift://a:9083, thrift://b:9083"),
            ("lock-check-min-wait-time", "0.5"),
        ])
        .unwrap();
        assert_eq!(ok.addresses, ["a:9083", "b:9083"]);
        assert_eq!(ok.lock_min_wait, Duration::from_millis(500));
    }
}
