//! cryo-core's `tracing` events as records of Python's `logging`, under the `cryo` logger.
//!
//! A global `tracing` subscriber, installed when the module is imported, forwards every event
//! whose target is `cryo_core::…` to `logging.getLogger("cryo.…")` (`cryo_core::compact::run`
//! becomes `cryo.compact.run`), with the Rust file and line as the record's location and the
//! event's fields both in the message (`key=value`) and as `record.cryo_fields` (a dict).
//!
//! Cheap when nobody listens: the lowest level any `cryo` logger accepts is cached (refreshed
//! with the GIL held at import and at the start of every call into Rust, see
//! [`refresh_level`]), so an event below it costs one atomic load and never touches Python.
//! An event above it takes the GIL for that one record (events come from tokio threads while
//! the calling thread waits without the GIL, so this cannot deadlock with the caller), checks
//! `isEnabledFor`, and hands the record to the logger. During interpreter shutdown records
//! are dropped.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU8, Ordering};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

/// Only events of this crate's targets are forwarded.
const TARGET: &str = "cryo_core";

/// Python level numbers (`logging.DEBUG` …); `TRACE` is below `DEBUG`, as in most bridges.
fn python_level(level: Level) -> u8 {
    match level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG => 10,
        Level::TRACE => 5,
    }
}

/// The lowest Python level any `cryo` logger accepts (`u8::MAX`: none). Starts at WARNING,
/// Python's default, until the first refresh.
static THRESHOLD: AtomicU8 = AtomicU8::new(30);

/// `logging.getLogger("cryo.<module>")` per target, created on first use.
static LOGGERS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// Re-read the levels of the `cryo` loggers (the caller holds the GIL). Called at import and
/// before every call into Rust, so a level set between calls applies to the next one.
pub(crate) fn refresh_level(py: Python<'_>) {
    match threshold(py) {
        Ok(level) => THRESHOLD.store(level, Ordering::Relaxed),
        // Logging half torn down (interpreter shutdown): forward nothing.
        Err(_) => THRESHOLD.store(u8::MAX, Ordering::Relaxed),
    }
}

/// The lowest effective level of `cryo` and of every `cryo.*` logger with its own level.
fn threshold(py: Python<'_>) -> PyResult<u8> {
    let logging = py.import("logging")?;
    let root = logging.getattr("getLogger")?.call1(("cryo",))?;
    let mut lowest: i64 = root.call_method0("getEffectiveLevel")?.extract()?;
    let manager = logging.getattr("root")?.getattr("manager")?;
    let logger_class = logging.getattr("Logger")?;
    let existing = manager.getattr("loggerDict")?.cast_into::<PyDict>()?;
    for (name, logger) in existing.iter() {
        let Ok(name) = name.cast::<PyString>() else {
            continue;
        };
        if !name.to_cow()?.starts_with("cryo.") || !logger.is_instance(&logger_class)? {
            continue;
        }
        let own: i64 = logger.getattr("level")?.extract()?;
        if own > 0 {
            lowest = lowest.min(own);
        }
    }
    // `logging.disable(level)` silences that level and everything below.
    let disabled: i64 = manager.getattr("disable")?.extract()?;
    lowest = lowest.max(disabled + 1);
    Ok(lowest.clamp(0, i64::from(u8::MAX)) as u8)
}

/// `cryo_core::compact::run` → `cryo.compact.run`.
fn logger_name(target: &str) -> String {
    let rest = target.strip_prefix(TARGET).unwrap_or(target);
    let rest = rest.trim_start_matches("::");
    if rest.is_empty() {
        "cryo".to_string()
    } else {
        format!("cryo.{}", rest.replace("::", "."))
    }
}

/// The event's message and its other fields, in order.
#[derive(Default)]
struct Fields {
    message: String,
    fields: Vec<(&'static str, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.fields.push((field.name(), value.to_string()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = text;
        } else {
            self.fields.push((field.name(), text));
        }
    }
}

impl Fields {
    fn text(&self) -> String {
        let mut out = self.message.clone();
        for (k, v) in &self.fields {
            let _ = write!(out, " {k}={v}");
        }
        out
    }
}

/// The subscriber: forwards events, ignores spans (cryo-core emits none).
struct PythonLogging;

fn forward(event: &Event<'_>) {
    let meta = event.metadata();
    let level = python_level(*meta.level());
    let mut fields = Fields::default();
    event.record(&mut fields);
    // None during interpreter shutdown: the record is dropped.
    let _ = Python::try_attach(|py| {
        if let Err(e) = emit(py, meta, level, &fields) {
            e.write_unraisable(py, None);
        }
    });
}

fn emit(py: Python<'_>, meta: &Metadata<'_>, level: u8, fields: &Fields) -> PyResult<()> {
    let loggers = LOGGERS
        .get_or_init(py, || PyDict::new(py).unbind())
        .bind(py);
    let target = meta.target();
    let logger = if let Some(l) = loggers.get_item(target)? {
        l
    } else {
        let l = py
            .import("logging")?
            .getattr("getLogger")?
            .call1((logger_name(target),))?;
        loggers.set_item(target, &l)?;
        l
    };
    if !logger.call_method1("isEnabledFor", (level,))?.is_truthy()? {
        return Ok(());
    }
    let extra = PyDict::new(py);
    let values = PyDict::new(py);
    for (k, v) in &fields.fields {
        values.set_item(*k, v)?;
    }
    extra.set_item("cryo_fields", values)?;
    let record = logger.call_method1(
        "makeRecord",
        (
            logger.getattr("name")?,
            level,
            meta.file().unwrap_or("<rust>"),
            meta.line().unwrap_or(0),
            fields.text(),
            pyo3::types::PyTuple::empty(py),
            py.None(),
            meta.module_path(),
            extra,
        ),
    )?;
    logger.call_method1("handle", (record,))?;
    Ok(())
}

impl Subscriber for PythonLogging {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if meta.is_event() && meta.target().starts_with(TARGET) {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        meta.is_event()
            && meta.target().starts_with(TARGET)
            && python_level(*meta.level()) >= THRESHOLD.load(Ordering::Relaxed)
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        forward(event);
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

/// Install the forwarding subscriber (once per process; a no-op when the host application
/// already installed a global `tracing` subscriber in this module's copy of `tracing`).
pub(crate) fn install(py: Python<'_>) {
    refresh_level(py);
    let _ = tracing::subscriber::set_global_default(PythonLogging);
}
