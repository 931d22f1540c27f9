//! The simulated world: one scheduler that releases every storage request, and the object store
//! that asks it.
//!
//! Everything runs on one thread of a tokio runtime whose clock is paused. A request parks until
//! the scheduler releases it; the scheduler wakes only when every task is parked (the paused clock
//! advances, and fires its timer, only when the runtime has nothing else to run, and never while a
//! blocking task is out), picks one parked request with the seeded generator, and says what
//! happens to it: served, failed before it took effect, failed after it did (the answer lost: a
//! commit of unknown outcome), or listed without the objects written in the last moments. The
//! choice of which request goes next is the interleaving of writers and Cryo; a seed fixes it.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{BoxStream, StreamExt};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use tokio::sync::oneshot;

/// A small, fast, seedable generator (splitmix64): the simulation's only source of choices.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }
}

/// Who makes a request (a task-local; tasks Cryo spawns are `Unscoped`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Actor {
    Cryo,
    Writer(usize),
    /// The invariant checks: never faulted.
    Checker,
    Unscoped,
}

tokio::task_local! {
    pub static ACTOR: Actor;
}

fn actor() -> Actor {
    ACTOR.try_with(|a| *a).unwrap_or(Actor::Unscoped)
}

/// Kinds of storage request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Get,
    Put,
    PutIfAbsent,
    Delete,
    List,
    Copy,
}

impl Op {
    fn writes(self) -> bool {
        matches!(self, Op::Put | Op::PutIfAbsent | Op::Delete | Op::Copy)
    }
}

/// What happens to a released request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Serve,
    /// Fails before it takes effect.
    FailBefore,
    /// Takes effect, then fails (a timeout after the write landed: outcome unknown to the caller).
    FailAfter,
    /// A listing that misses what was written in the last `STALE_MS`.
    Stale,
    /// Cryo's process is dead: every request of it fails, and nothing it asks takes effect.
    Dead,
}

/// Probabilities of the faults, per released request of Cryo (writers are served, and recover
/// from conflicts only).
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    pub fail_before: f64,
    pub fail_after: f64,
    pub stale_list: f64,
    /// A slow request: it is parked again and released later, behind others.
    pub slow: f64,
    /// Cryo's process dies at this request (every later request of it fails until restart).
    pub crash: f64,
    /// A conditional create (the catalog's swap: `vN.metadata.json`) that lands and loses its
    /// answer: a commit of unknown outcome, on the one request where it matters most.
    pub swap_lost: f64,
    /// After a lost swap, a catalog outage: the next [`OUTAGE_REQUESTS`] requests of Cryo for
    /// metadata fail (the reloads that would tell it whether its commit landed among them);
    /// data files are still served.
    pub outage: f64,
}

/// Requests of Cryo an outage fails.
pub const OUTAGE_REQUESTS: u32 = 40;

impl Faults {
    pub const NONE: Faults = Faults {
        fail_before: 0.0,
        fail_after: 0.0,
        stale_list: 0.0,
        slow: 0.0,
        crash: 0.0,
        swap_lost: 0.0,
        outage: 0.0,
    };

    pub fn from_rng(rng: &mut Rng) -> Faults {
        // A third of the seeds run without faults (interleavings only).
        if rng.chance(0.33) {
            return Faults::NONE;
        }
        // One in five of the others is a storm: a request in ten fails, before or after it took
        // effect, so that a commit of unknown outcome meets a reload that fails too.
        if rng.chance(0.2) {
            return Faults {
                fail_before: 0.1,
                fail_after: 0.1,
                stale_list: 0.2,
                slow: 0.1,
                crash: 0.0,
                swap_lost: 0.3,
                outage: 0.3,
            };
        }
        Faults {
            fail_before: [0.0, 0.01, 0.03][rng.below(3)],
            fail_after: [0.0, 0.01, 0.03][rng.below(3)],
            stale_list: [0.0, 0.2][rng.below(2)],
            slow: [0.0, 0.1][rng.below(2)],
            crash: [0.0, 0.0, 0.005][rng.below(3)],
            swap_lost: [0.0, 0.1, 0.3][rng.below(3)],
            outage: [0.0, 0.5][rng.below(2)],
        }
    }
}

/// Objects written this recently (simulated milliseconds: released requests) are missing from
/// a stale listing.
pub const STALE_MS: i64 = 20;
/// Simulated time per released request. The simulated clock starts at the real one and stays
/// within seconds of it: upstream's metadata builder stamps updates with the real clock and
/// refuses snapshots more than a minute out of line with it.
pub const TICK_MS: i64 = 1;

struct Parked {
    seq: u64,
    actor: Actor,
    op: Op,
    path: String,
    slow_once: bool,
    tx: oneshot::Sender<Verdict>,
}

struct State {
    rng: Rng,
    faults: Faults,
    next_seq: u64,
    parked: Vec<Parked>,
    now_ms: i64,
    cryo_dead: bool,
    /// Requests of Cryo the current outage still fails.
    outage_left: u32,
    released: u64,
    trace: Vec<String>,
    digest: u64,
}

/// The scheduler.
pub struct Sched {
    state: Mutex<State>,
    faults_on: AtomicBool,
    dead: tokio::sync::Notify,
    /// The checks run alone: their requests are served at once, outside the schedule.
    bypass: AtomicBool,
}

impl fmt::Debug for Sched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sched").finish_non_exhaustive()
    }
}

static RELEASE_FILES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Sched {
    pub fn new(seed: u64, faults: Faults) -> Arc<Self> {
        RELEASE_FILES.fetch_add(1, Ordering::SeqCst);
        Arc::new(Sched {
            state: Mutex::new(State {
                rng: Rng::new(seed.wrapping_mul(31).wrapping_add(7)),
                faults,
                next_seq: 0,
                parked: Vec::new(),
                now_ms: chrono::Utc::now().timestamp_millis(),
                cryo_dead: false,
                outage_left: 0,
                released: 0,
                trace: Vec::new(),
                digest: 0xcbf2_9ce4_8422_2325,
            }),
            faults_on: AtomicBool::new(false),
            dead: tokio::sync::Notify::new(),
            bypass: AtomicBool::new(false),
        })
    }

    pub fn now_ms(&self) -> i64 {
        self.state.lock().unwrap().now_ms
    }

    /// Serve every request at once, outside the schedule (the checks, with nothing else running).
    pub fn set_bypass(&self, on: bool) {
        self.bypass.store(on, Ordering::SeqCst);
    }

    pub fn set_faults(&self, on: bool) {
        self.faults_on.store(on, Ordering::SeqCst);
    }

    pub fn cryo_dead(&self) -> bool {
        self.state.lock().unwrap().cryo_dead
    }

    /// Cryo's process starts again.
    pub fn restart_cryo(&self) {
        self.state.lock().unwrap().cryo_dead = false;
    }

    /// Resolves once Cryo's process has died.
    pub async fn killed(&self) {
        loop {
            if self.cryo_dead() {
                return;
            }
            self.dead.notified().await;
        }
    }

    /// A digest of every release so far: actor, kind, path and verdict.
    pub fn digest(&self) -> u64 {
        self.state.lock().unwrap().digest
    }

    pub fn released(&self) -> u64 {
        self.state.lock().unwrap().released
    }

    /// The last released requests, for a failure report.
    pub fn trace_tail(&self, n: usize) -> Vec<String> {
        let s = self.state.lock().unwrap();
        s.trace[s.trace.len().saturating_sub(n)..].to_vec()
    }

    /// Park a request until the scheduler releases it; the verdict says what happens to it.
    async fn request(&self, op: Op, path: &str) -> Verdict {
        if self.bypass.load(Ordering::SeqCst) {
            return Verdict::Serve;
        }
        let rx = {
            let mut s = self.state.lock().unwrap();
            let (tx, rx) = oneshot::channel();
            let seq = s.next_seq;
            s.next_seq += 1;
            s.parked.push(Parked {
                seq,
                actor: actor(),
                op,
                path: path.to_string(),
                slow_once: false,
                tx,
            });
            rx
        };
        // A dropped scheduler (the runtime going down) fails the request.
        rx.await.unwrap_or(Verdict::FailBefore)
    }

    /// Release parked requests one at a time, whenever every task waits, until `stop` is set.
    pub async fn run(self: Arc<Self>, stop: Arc<AtomicBool>) {
        while !stop.load(Ordering::SeqCst) {
            // Fires only once the runtime is idle: every task parked here or finished.
            tokio::time::sleep(Duration::from_millis(1)).await;
            self.release_one();
        }
    }

    fn release_one(&self) {
        let faults_on = self.faults_on.load(Ordering::SeqCst);
        let mut guard = self.state.lock().unwrap();
        let state = &mut *guard;
        if state.parked.is_empty() {
            return;
        }
        // The parked requests in an order the seed fixes: by actor, kind and path (the seed
        // fixes Cryo's names too), then by arrival. Requests one task has in flight at once then
        // line up the same whatever order it issued them in (a hash map's, say).
        state
            .parked
            .sort_by(|a, b| (a.actor, a.op, &a.path, a.seq).cmp(&(b.actor, b.op, &b.path, b.seq)));
        let count = state.parked.len();
        let pick = state.rng.below(count);
        let p = state.parked.remove(pick);
        let cryo = matches!(p.actor, Actor::Cryo | Actor::Unscoped);
        let faults = state.faults;
        let verdict = if cryo && state.cryo_dead {
            Verdict::Dead
        } else if !(cryo && faults_on) {
            Verdict::Serve
        } else if state.outage_left > 0 && p.path.contains("/metadata/") {
            state.outage_left -= 1;
            Verdict::FailBefore
        } else if !p.slow_once && state.rng.chance(faults.slow) {
            // Back in the queue: everything parked now may overtake it.
            state.parked.push(Parked {
                slow_once: true,
                ..p
            });
            return;
        } else if state.rng.chance(faults.crash) {
            state.cryo_dead = true;
            self.dead.notify_one();
            Verdict::Dead
        } else if p.op == Op::PutIfAbsent && state.rng.chance(faults.swap_lost) {
            if state.rng.chance(faults.outage) {
                state.outage_left = OUTAGE_REQUESTS;
            }
            Verdict::FailAfter
        } else if state.rng.chance(faults.fail_before) {
            Verdict::FailBefore
        } else if p.op.writes() && state.rng.chance(faults.fail_after) {
            Verdict::FailAfter
        } else if p.op == Op::List && state.rng.chance(faults.stale_list) {
            Verdict::Stale
        } else {
            Verdict::Serve
        };
        state.now_ms += TICK_MS;
        state.released += 1;
        let line = format!(
            "#{} {:?} {:?} {} -> {:?}",
            p.seq, p.actor, p.op, p.path, verdict
        );
        let shape = format!("{:?} {:?} {} {verdict:?}", p.actor, p.op, p.path);
        for b in shape.bytes() {
            state.digest = (state.digest ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        if let Some(path) = std::env::var_os("CRYO_SIM_RELEASES").map(|p| {
            let mut p = p;
            p.push(format!(".{}", RELEASE_FILES.load(Ordering::SeqCst)));
            p
        }) {
            use std::io::Write as _;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(f, "{shape}");
            }
        }
        state.trace.push(line);
        if state.trace.len() > 4096 {
            state.trace.drain(..2048);
        }
        let _ = p.tx.send(verdict);
    }
}

/// The in-memory object store every simulated request goes through.
pub struct SimStore {
    inner: InMemory,
    sched: Arc<Sched>,
    /// Simulated write time of each object (what listings and heads report).
    written_ms: Mutex<HashMap<Path, i64>>,
}

impl SimStore {
    pub fn new(sched: Arc<Sched>) -> Self {
        Self {
            inner: InMemory::new(),
            sched,
            written_ms: Mutex::new(HashMap::new()),
        }
    }

    /// Every object, as the store holds it (no scheduling, no faults): for the checks.
    pub async fn all_objects(&self) -> Vec<ObjectMeta> {
        let mut out: Vec<ObjectMeta> = self
            .inner
            .list(None)
            .filter_map(|m| async move { m.ok() })
            .collect()
            .await;
        out.sort_by(|a, b| a.location.cmp(&b.location));
        out
    }

    pub async fn exists(&self, path: &Path) -> bool {
        self.inner.head(path).await.is_ok()
    }

    fn stamp(&self, mut meta: ObjectMeta) -> ObjectMeta {
        if let Some(ms) = self.written_ms.lock().unwrap().get(&meta.location) {
            meta.last_modified = chrono::DateTime::from_timestamp_millis(*ms).unwrap_or_default();
        }
        meta
    }

    fn record_write(&self, path: &Path) {
        let now = self.sched.now_ms();
        self.written_ms.lock().unwrap().insert(path.clone(), now);
    }

    fn injected(kind: &str, path: &Path) -> object_store::Error {
        object_store::Error::Generic {
            store: "sim",
            source: format!("injected fault: {kind} ({path})").into(),
        }
    }

    async fn gate(&self, op: Op, path: &Path) -> object_store::Result<Verdict> {
        match self.sched.request(op, path.as_ref()).await {
            Verdict::FailBefore => Err(Self::injected("request failed", path)),
            Verdict::Dead => Err(Self::injected("process dead", path)),
            v => Ok(v),
        }
    }

    fn after(verdict: Verdict, path: &Path) -> object_store::Result<()> {
        if verdict == Verdict::FailAfter {
            Err(Self::injected("timed out after it took effect", path))
        } else {
            Ok(())
        }
    }
}

impl fmt::Debug for SimStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SimStore")
    }
}

impl fmt::Display for SimStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SimStore")
    }
}

#[async_trait]
impl ObjectStore for SimStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let op = if matches!(opts.mode, object_store::PutMode::Overwrite) {
            Op::Put
        } else {
            Op::PutIfAbsent
        };
        let v = self.gate(op, location).await?;
        let r = self.inner.put_opts(location, payload, opts).await?;
        self.record_write(location);
        Self::after(v, location)?;
        Ok(r)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.gate(Op::Put, location).await?;
        self.record_write(location);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.gate(Op::Get, location).await?;
        let mut r = self.inner.get_opts(location, options).await?;
        r.meta = self.stamp(r.meta);
        Ok(r)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        // One request per object; `self` is not 'static, so collect the paths first.
        let sched = Arc::clone(&self.sched);
        let inner = self.inner.clone();
        locations
            .then(move |p| {
                let sched = Arc::clone(&sched);
                let inner = inner.clone();
                async move {
                    let p = p?;
                    match sched.request(Op::Delete, p.as_ref()).await {
                        Verdict::FailBefore => return Err(Self::injected("request failed", &p)),
                        Verdict::Dead => return Err(Self::injected("process dead", &p)),
                        v => {
                            inner.delete(&p).await?;
                            Self::after(v, &p)?;
                        }
                    }
                    Ok(p)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let sched = Arc::clone(&self.sched);
        let inner = self.inner.clone();
        let written = self.written_ms.lock().unwrap().clone();
        let prefix = prefix.cloned();
        futures::stream::once(async move {
            let key = prefix.as_ref().map_or("", |p| p.as_ref()).to_string();
            let v = match sched.request(Op::List, &key).await {
                Verdict::FailBefore => {
                    return Err(Self::injected("request failed", &Path::from(key)));
                }
                Verdict::Dead => return Err(Self::injected("process dead", &Path::from(key))),
                v => v,
            };
            let now = sched.now_ms();
            let metas: Vec<object_store::Result<ObjectMeta>> =
                inner.list(prefix.as_ref()).collect().await;
            let mut out = Vec::new();
            for m in metas {
                let mut m = m?;
                let at = written.get(&m.location).copied();
                if v == Verdict::Stale && at.is_some_and(|t| now - t < STALE_MS) {
                    continue;
                }
                if let Some(t) = at {
                    m.last_modified =
                        chrono::DateTime::from_timestamp_millis(t).unwrap_or_default();
                }
                out.push(Ok(m));
            }
            Ok(futures::stream::iter(out))
        })
        .map(|r| match r {
            Ok(s) => s.boxed(),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        })
        .flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let key = prefix.map_or("", |p| p.as_ref()).to_string();
        let v = self.gate(Op::List, &Path::from(key)).await?;
        let mut r = self.inner.list_with_delimiter(prefix).await?;
        let now = self.sched.now_ms();
        let written = self.written_ms.lock().unwrap().clone();
        r.objects.retain(|m| {
            !(v == Verdict::Stale && written.get(&m.location).is_some_and(|t| now - t < STALE_MS))
        });
        r.objects = r.objects.into_iter().map(|m| self.stamp(m)).collect();
        Ok(r)
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        let v = self.gate(Op::Copy, to).await?;
        self.inner.copy_opts(from, to, options).await?;
        self.record_write(to);
        Self::after(v, to)
    }
}
