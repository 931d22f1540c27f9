//! Destinations for fleet runs: the user's Trino (cryo-core's client) and any Python object that
//! can run SQL, such as the `SparkSession` wrapper in `cryo.spark`, plus the governor.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use cryo_core::exec::trino::{TrinoConfig, TrinoEngine};
use cryo_core::exec::{SqlEngine, StatementOutcome};
use cryo_core::govern::{
    Bandit, BanditConfig, CoordinatorLoad, Governor, Limits, LoadSnapshot, Probe, ProbeFailure,
};
use cryo_core::render::{Dialect, SparkDialect, SparkOptions, TrinoDialect, TrinoOptions};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::Deserialize;

use crate::convert::{options, options_pair, to_json};
use crate::errors::{self, check};

/// A destination a fleet run can send steps to (`cryo.TrinoEngine`, or a Python engine such as
/// `cryo.spark.SparkEngine` once wrapped).
#[pyclass(frozen, module = "cryo._cryo", name = "Engine")]
pub struct Engine {
    pub(crate) inner: Arc<dyn SqlEngine>,
}

#[pymethods]
impl Engine {
    /// `trino`, `spark`, …
    #[getter]
    fn kind(&self) -> String {
        self.inner.kind().to_string()
    }
    /// Coordinators (or sessions) statements go to.
    #[getter]
    fn coordinators(&self) -> Vec<String> {
        self.inner.coordinators()
    }
    /// The engine's load now, as the governor sees it (`{"coordinators": [...]}`), or an
    /// `EngineError` saying why it could not be read.
    fn probe<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let engine = Arc::clone(&self.inner);
        let probe = crate::runtime::wait(py, move || async move {
            let now = cryo_core::clock::Clock::now_ms(&cryo_core::clock::SystemClock);
            Ok(engine.probe("probe", now).await)
        })?;
        match probe {
            Ok(load) => crate::convert::to_python(py, &load),
            Err(f) => Err(errors::to_py(
                py,
                &cryo_core::Error::Engine {
                    engine: self.inner.kind().to_string(),
                    query_id: None,
                    code: None,
                    message: f.reason,
                    retryable: true,
                },
            )),
        }
    }
    /// Run one statement on `coordinator` (the first one by default) and return its outcome.
    #[pyo3(signature = (sql, coordinator = None))]
    fn execute<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        coordinator: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let engine = Arc::clone(&self.inner);
        let coordinator = match coordinator {
            Some(c) => c,
            None => self
                .inner
                .coordinators()
                .into_iter()
                .next()
                .unwrap_or_default(),
        };
        let out = crate::runtime::wait(py, move || async move {
            engine.execute(&coordinator, &sql).await
        })?;
        crate::convert::to_python(py, &out)
    }
    fn __repr__(&self) -> String {
        format!(
            "Engine({}, coordinators={:?})",
            self.inner.kind(),
            self.inner.coordinators()
        )
    }
}

/// A Trino destination over one or more coordinators (`urls`). `options` holds both the
/// connection's `TrinoConfig` fields (`user`, `password`, `access_token`, timeouts, …) and the
/// rendering's `TrinoOptions` (`catalog`, `version`, retention floors, …), told apart by
/// cryo-core's field names.
#[pyfunction]
#[pyo3(signature = (urls, options = None))]
#[allow(
    clippy::needless_pass_by_value,
    reason = "pyo3 extracts sequences into owned vectors"
)]
pub(crate) fn trino_engine(
    urls: Vec<String>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Engine> {
    let (config, dialect): (TrinoConfig, TrinoOptions) = options_pair("trino options", options)?;
    let dialect = check(TrinoDialect::new(dialect))?;
    let configs = urls
        .into_iter()
        .map(|url| {
            let mut c = config.clone();
            c.url = url;
            c
        })
        .collect();
    Ok(Engine {
        inner: Arc::new(check(TrinoEngine::new(dialect, configs))?),
    })
}

/// Wrap a Python engine object: it has `execute(coordinator, sql) -> dict` and `probe() -> dict`
/// and names its `coordinators`. `dialect` is `trino` or `spark`; `dialect_options` its
/// rendering options.
#[pyfunction]
#[pyo3(signature = (obj, kind, dialect, coordinators, dialect_options = None))]
pub(crate) fn python_engine(
    obj: Py<PyAny>,
    kind: String,
    dialect: &str,
    coordinators: Vec<String>,
    dialect_options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Engine> {
    let dialect: Box<dyn Dialect> = match dialect {
        "spark" => Box::new(check(SparkDialect::new(options::<SparkOptions>(
            "spark options",
            dialect_options,
        )?))?),
        "trino" => Box::new(check(TrinoDialect::new(options::<TrinoOptions>(
            "trino options",
            dialect_options,
        )?))?),
        other => {
            return Err(errors::validation(format!(
                "unknown dialect `{other}` (trino, spark)"
            )));
        }
    };
    if coordinators.is_empty() {
        return Err(errors::validation(
            "an engine needs at least one coordinator",
        ));
    }
    Ok(Engine {
        inner: Arc::new(PyEngine {
            kind,
            dialect,
            coordinators,
            obj: Arc::new(obj),
        }),
    })
}

/// A Python object as an [`SqlEngine`]; its methods run on a blocking thread with the GIL.
struct PyEngine {
    kind: String,
    dialect: Box<dyn Dialect>,
    coordinators: Vec<String>,
    obj: Arc<Py<PyAny>>,
}

impl std::fmt::Debug for PyEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyEngine")
            .field("kind", &self.kind)
            .field("coordinators", &self.coordinators)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct PyProbe {
    coordinators: Vec<CoordinatorLoad>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PyOutcome {
    query_id: Option<String>,
    queued_ms: u64,
    elapsed_ms: u64,
    columns: Vec<String>,
    rows: Vec<Vec<serde_json::Value>>,
}

impl PyEngine {
    /// Call a method of the Python object on a blocking thread; its result as JSON.
    async fn call(
        &self,
        method: &'static str,
        args: Vec<String>,
    ) -> std::result::Result<serde_json::Value, String> {
        let obj = Arc::clone(&self.obj);
        let joined = tokio::task::spawn_blocking(move || {
            Python::attach(|py| {
                let result = match args.as_slice() {
                    [] => obj.call_method0(py, method),
                    [a, b] => obj.call_method1(py, method, (a.as_str(), b.as_str())),
                    _ => obj.call_method1(py, method, (args,)),
                };
                match result {
                    Ok(v) => to_json(v.bind(py)).map_err(|e| e.to_string()),
                    Err(e) => Err(describe(py, &e)),
                }
            })
        })
        .await;
        joined.map_err(|e| format!("the engine call did not finish: {e}"))?
    }
}

/// `ExceptionType: message` of a Python exception.
fn describe(py: Python<'_>, e: &PyErr) -> String {
    let name = e
        .get_type(py)
        .name()
        .map_or_else(|_| "Exception".into(), |n| n.to_string());
    let msg = e.value(py).to_string();
    // Spark's errors carry the JVM stack trace after the first lines.
    let short: Vec<&str> = msg.lines().take(6).collect();
    format!("{name}: {}", short.join(" "))
}

#[async_trait]
impl SqlEngine for PyEngine {
    fn kind(&self) -> &str {
        &self.kind
    }

    fn dialect(&self) -> &dyn Dialect {
        self.dialect.as_ref()
    }

    fn coordinators(&self) -> Vec<String> {
        self.coordinators.clone()
    }

    async fn probe(&self, destination: &str, now_ms: i64) -> Probe {
        let v = self
            .call("probe", Vec::new())
            .await
            .map_err(|e| ProbeFailure {
                destination: destination.to_string(),
                reason: format!("{} probe failed: {e}", self.kind),
            })?;
        let p: PyProbe = serde_json::from_value(v).map_err(|e| ProbeFailure {
            destination: destination.to_string(),
            reason: format!(
                "{} probe returned no `coordinators` list of loads: {e}",
                self.kind
            ),
        })?;
        Ok(LoadSnapshot {
            destination: destination.to_string(),
            taken_at_ms: now_ms,
            coordinators: p.coordinators,
        })
    }

    async fn execute(&self, coordinator: &str, sql: &str) -> cryo_core::Result<StatementOutcome> {
        let engine_error = |message: String| cryo_core::Error::Engine {
            engine: format!("{} {coordinator}", self.kind),
            query_id: None,
            code: None,
            message,
            retryable: false,
        };
        let v = self
            .call("execute", vec![coordinator.to_string(), sql.to_string()])
            .await
            .map_err(engine_error)?;
        let o: PyOutcome = if v.is_null() {
            PyOutcome::default()
        } else {
            serde_json::from_value(v)
                .map_err(|e| engine_error(format!("execute() returned an unexpected value: {e}")))?
        };
        Ok(StatementOutcome::new(o.query_id, o.queued_ms, o.elapsed_ms)
            .with_rows(o.columns, o.rows))
    }
}

/// Admission for fleet runs: limits per destination, the state of what it admitted, and (when
/// enabled) what it learned. Shared by the runs it is given to; `to_json`/`from_json` keep it
/// across processes.
#[pyclass(frozen, module = "cryo._cryo", name = "Governor")]
pub struct PyGovernor {
    pub(crate) inner: Arc<Mutex<Governor>>,
}

impl PyGovernor {
    fn lock(&self) -> std::sync::MutexGuard<'_, Governor> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[pymethods]
impl PyGovernor {
    /// `limits`: per destination, cryo-core's `Limits` (`max_maintenance_per_coordinator`,
    /// `max_maintenance_per_destination`, `max_running_queries`, `max_queued_queries`,
    /// `backoff_ms`, `max_load_age_ms`); `defaults`: the limits of every other destination;
    /// `bandit`: per destination, a `BanditConfig` (`{}` for the defaults) to learn
    /// `max_running_queries` from outcomes.
    #[new]
    #[pyo3(signature = (limits = None, defaults = None, bandit = None))]
    fn new(
        limits: Option<BTreeMap<String, Bound<'_, PyDict>>>,
        defaults: Option<&Bound<'_, PyDict>>,
        bandit: Option<BTreeMap<String, Bound<'_, PyDict>>>,
    ) -> PyResult<Self> {
        let mut g = check(Governor::new(options::<Limits>(
            "governor defaults",
            defaults,
        )?))?;
        for (dest, l) in limits.unwrap_or_default() {
            check(g.set_limits(&dest, options::<Limits>("governor limits", Some(&l))?))?;
        }
        for (dest, c) in bandit.unwrap_or_default() {
            let config = options::<BanditConfig>("bandit config", Some(&c))?;
            g.attach_bandit(&dest, check(Bandit::new(config))?);
        }
        Ok(Self {
            inner: Arc::new(Mutex::new(g)),
        })
    }

    /// The governor's whole state (limits, held slots, round-robin cursors, learned bandits) as
    /// JSON: keep it between runs with [`Governor.from_json`].
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&*self.lock()).map_err(|e| errors::internal(e.to_string()))
    }

    /// A governor from [`Governor.to_json`]'s text.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Self> {
        let g: Governor = serde_json::from_str(text)
            .map_err(|e| errors::validation(format!("not a governor's state: {e}")))?;
        Ok(Self {
            inner: Arc::new(Mutex::new(g)),
        })
    }

    /// The static limits of `destination`.
    fn limits<'py>(&self, py: Python<'py>, destination: &str) -> PyResult<Bound<'py, PyAny>> {
        crate::convert::to_python(py, self.lock().limits(destination))
    }

    /// Steps Cryo currently holds a slot for on `destination`.
    fn in_flight(&self, destination: &str) -> u32 {
        self.lock().in_flight(destination)
    }

    /// Outcomes the bandit of `destination` has learned from (0 without a bandit).
    fn observations(&self, destination: &str) -> u64 {
        self.lock()
            .bandit(destination)
            .map_or(0, Bandit::total_observations)
    }

    fn __repr__(&self) -> String {
        let g = self.lock();
        format!("Governor(defaults={:?})", g.limits(""))
    }
}
