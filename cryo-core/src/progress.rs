//! Progress of long operations: a callback an application (a CLI bar, a notebook widget, a
//! scheduler's heartbeat) hands to a fleet scan, a compaction or a maintenance run.
//!
//! The operation calls it from whichever task makes progress (tokio worker threads included),
//! so it must be quick and must not block on the operation itself. `done` only grows during one
//! stage; `total` is known when the stage starts.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

/// One step forward of a long operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Progress {
    /// What is being counted: `scan` (tables of a fleet scan), `plan` (a compaction planned:
    /// a dry run stops there), `rewrite` (file groups of a compaction), `run` (tables of a
    /// maintenance run).
    pub stage: &'static str,
    /// Units finished so far in this stage.
    pub done: u64,
    /// Units in this stage.
    pub total: u64,
    /// The table the unit belonged to (`namespace.table`), when there is one.
    pub table: Option<String>,
}

impl Progress {
    /// A progress report.
    pub fn new(stage: &'static str, done: u64, total: u64, table: Option<String>) -> Self {
        Self {
            stage,
            done,
            total,
            table,
        }
    }
}

/// The callback: cheap to clone, shared by the tasks of one operation.
#[derive(Clone)]
pub struct ProgressSink(Arc<dyn Fn(&Progress) + Send + Sync>);

impl ProgressSink {
    /// Wrap a callback.
    pub fn new(f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Report one step.
    pub fn report(&self, progress: &Progress) {
        (self.0)(progress);
    }
}

impl fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProgressSink(..)")
    }
}

/// Report through an optional sink.
pub(crate) fn report(
    sink: Option<&ProgressSink>,
    stage: &'static str,
    done: u64,
    total: u64,
    table: Option<String>,
) {
    if let Some(s) = sink {
        s.report(&Progress::new(stage, done, total, table));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn a_sink_sees_every_report_in_order() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = {
            let seen = Arc::clone(&seen);
            ProgressSink::new(move |p| seen.lock().unwrap().push((p.stage, p.done, p.total)))
        };
        for done in 0..=2 {
            report(Some(&sink), "rewrite", done, 2, None);
        }
        report(None, "rewrite", 9, 9, None);
        assert_eq!(
            *seen.lock().unwrap(),
            vec![("rewrite", 0, 2), ("rewrite", 1, 2), ("rewrite", 2, 2)]
        );
        assert_eq!(format!("{sink:?}"), "ProgressSink(..)");
    }
}
