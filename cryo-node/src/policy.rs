//! `Policy`: a checked policy file (cryo-core's [`cryo_core::policy::Policy`]).

use std::sync::Arc;

use cryo_core::policy::Policy as CorePolicy;
use cryo_core::scan::TableScan as CoreScan;
use napi::Either;
use napi_derive::napi;
use serde_json::Value;

use crate::convert::to_value;
use crate::errors::check;
use crate::models::{FleetScan, TableScan};

/// A maintenance policy: presets, assignment rules, per-table overrides, pauses, windows,
/// budgets and prices, read from YAML and checked (every problem at once, each with its file,
/// line and field: the error's `problems`).
#[napi]
pub struct Policy {
    pub(crate) inner: Arc<CorePolicy>,
}

/// The scans a call was given: a fleet scan or table scans.
pub(crate) fn core_scans(scans: Either<&FleetScan, Vec<&TableScan>>) -> Vec<CoreScan> {
    match scans {
        Either::A(fleet) => fleet.inner.tables.clone(),
        Either::B(tables) => tables.iter().map(|t| t.inner.as_ref().clone()).collect(),
    }
}

#[napi]
impl Policy {
    /// Read a policy file, or every `*.yaml`/`*.yml` file of a directory in name order.
    #[napi(factory, catch_unwind, writable = true, configurable = true)]
    #[allow(
        clippy::needless_pass_by_value,
        reason = "napi-rs passes JS strings as owned Strings"
    )]
    pub fn load(path: String) -> napi::Result<Policy> {
        Ok(Policy {
            inner: Arc::new(check(CorePolicy::load(&path))?),
        })
    }

    /// A policy from YAML text; `name` stands for the file in problems.
    #[napi(factory, catch_unwind, writable = true, configurable = true)]
    #[allow(
        clippy::needless_pass_by_value,
        reason = "napi-rs passes JS strings as owned Strings"
    )]
    pub fn from_yaml(text: String, name: Option<String>) -> napi::Result<Policy> {
        let name = name.as_deref().unwrap_or("<string>");
        Ok(Policy {
            inner: Arc::new(check(CorePolicy::from_yaml(&text, name))?),
        })
    }

    /// SHA-256 of the policy's canonical form: the same in Rust, Python and Node.
    #[napi(getter)]
    pub fn fingerprint(&self) -> String {
        self.inner.fingerprint().to_string()
    }

    /// The files it was read from.
    #[napi(getter)]
    pub fn sources(&self) -> Vec<String> {
        self.inner.sources().to_vec()
    }

    /// The policy's canonical JSON (what the fingerprint is over).
    #[napi]
    pub fn to_json(&self) -> napi::Result<String> {
        check(self.inner.to_json())
    }

    /// The policy as one file, in canonical form (cryo-core's `snake_case` names).
    #[napi(ts_return_type = "Record<string, unknown>")]
    pub fn to_object(&self) -> napi::Result<Value> {
        to_value(self.inner.file())
    }

    /// Every preset (the built-in `default` among them) as its tables get it.
    #[napi(ts_return_type = "Record<string, unknown>")]
    pub fn presets(&self) -> napi::Result<Value> {
        to_value(self.inner.presets())
    }

    /// Each scanned table's preset and why, at the time of the newest scan.
    #[napi(catch_unwind, ts_return_type = "Record<string, unknown>")]
    pub fn resolve(&self, scans: Either<&FleetScan, Vec<&TableScan>>) -> napi::Result<Value> {
        let scans = core_scans(scans);
        to_value(&check(self.inner.resolve_scans(&scans))?)
    }

    /// `Policy(… presets, … rules, fingerprint …)`.
    #[napi]
    #[allow(
        clippy::inherent_to_string,
        reason = "JS calls toString(); Display is not visible from JS"
    )]
    pub fn to_string(&self) -> String {
        format!(
            "Policy({} presets, {} rules, fingerprint {}…)",
            self.inner.presets().len(),
            self.inner.file().rules.len(),
            &self.inner.fingerprint()[..12]
        )
    }
}

/// A change set of table properties the grades recommend: review it, approve its fingerprint,
/// then `catalog.applyAdvice(advice, fingerprint)` commits exactly it.
#[napi]
pub struct Advice {
    pub(crate) inner: Arc<cryo_core::policy::Advice>,
}

#[napi]
impl Advice {
    /// Read stored advice (refused unless intact: its fingerprint matches its content).
    #[napi(factory, catch_unwind, writable = true, configurable = true)]
    #[allow(
        clippy::needless_pass_by_value,
        reason = "napi-rs passes JS strings as owned Strings"
    )]
    pub fn from_json(json: String) -> napi::Result<Advice> {
        Ok(Advice {
            inner: Arc::new(check(cryo_core::policy::Advice::from_json(&json))?),
        })
    }

    /// The advice as JSON, for a reviewer and for storing.
    #[napi]
    pub fn to_json(&self) -> napi::Result<String> {
        check(self.inner.to_json())
    }

    /// Content fingerprint (SHA-256): the one a person approves.
    #[napi(getter)]
    pub fn fingerprint(&self) -> String {
        self.inner.fingerprint.clone()
    }

    /// Number of property changes.
    #[napi(getter)]
    pub fn change_count(&self) -> u32 {
        u32::try_from(self.inner.change_count()).unwrap_or(u32::MAX)
    }

    /// Everything (`tables[].changes[]`: key, from, to, finding, reason), `snake_case`.
    #[napi(ts_return_type = "Record<string, unknown>")]
    pub fn to_object(&self) -> napi::Result<Value> {
        to_value(self.inner.as_ref())
    }

    /// `Advice(… changes on … tables, fingerprint …)`.
    #[napi]
    #[allow(
        clippy::inherent_to_string,
        reason = "JS calls toString(); Display is not visible from JS"
    )]
    pub fn to_string(&self) -> String {
        format!(
            "Advice({} changes on {} tables, fingerprint {}…)",
            self.inner.change_count(),
            self.inner.tables.len(),
            &self.inner.fingerprint[..12]
        )
    }
}
