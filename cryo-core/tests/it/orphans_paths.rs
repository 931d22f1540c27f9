//! Orphan removal never reaches outside the table location, however the location or a listed
//! path is spelled: `..` and `.` segments, doubled and trailing slashes, percent-encoding
//! (`%2e%2e`, `%2F`), a sibling whose name extends the table's (`/wh/t` vs `/wh/t2`), Unicode
//! look-alikes of the table directory (NFD vs NFC, full-width), a relative location, another
//! scheme, and symbolic links inside the table directory that lead out of it.
//!
//! Every case runs on real files: a table in a local SQL catalog, old "victim" files planted
//! around it, the default run (a dry run: nothing deleted) and then a real run. Each spelling
//! ends in a typed error (`Refused`, `Config`, `Unsupported`) or in orphans that all lie inside
//! the table's own directory; every victim outside it survives.
#![allow(clippy::too_many_lines)] // Reason: each test walks every spelling of one hazard.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use cryo_core::commit::NewTable;
use cryo_core::maintain::{FileUri, RemoveOrphanFiles, RemoveOrphanFilesOutcome};
use cryo_core::{Catalog, Error, Namespace, TableId};

use crate::replace::{append, schema, sql_catalog};

const DAY: Duration = Duration::from_hours(24);

fn old_file(path: &Path, bytes: &[u8]) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - 10 * DAY).unwrap();
    path.to_path_buf()
}

fn local(location: &str) -> PathBuf {
    PathBuf::from(
        location
            .strip_prefix("file://")
            .or_else(|| location.strip_prefix("file:"))
            .unwrap_or(location),
    )
}

/// Files (and symbolic links, not followed) under `dir`.
fn files_under(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path());
            }
        }
    }
    out
}

/// Victims: old files next to the table, in look-alike directories and up the tree.
struct Victims {
    files: Vec<PathBuf>,
}

impl Victims {
    fn plant(warehouse: &Path) -> Self {
        let db = warehouse.join("db");
        let files = [
            "victim/data/old.parquet",
            "victim/metadata/00000-x.metadata.json",
            "t2/data/old.parquet",
            "t_backup/data/old.parquet",
            "t%2F..%2Fvictim/data/old.parquet",
            // Unicode look-alikes of a table named `café` / `t`.
            "cafe\u{301}/data/old.parquet",
            "\u{FF54}/data/old.parquet",
        ]
        .iter()
        .map(|p| old_file(&db.join(p), b"victim"))
        .chain([old_file(&warehouse.join("top-level.parquet"), b"victim")])
        .collect();
        Victims { files }
    }

    fn assert_intact(&self, case: &str) {
        for f in &self.files {
            assert!(
                f.exists(),
                "{case}: {} outside the table was deleted",
                f.display()
            );
        }
    }
}

/// A table at `location` with one append; `None` when the catalog refuses the location itself.
async fn table_at(catalog: &Catalog, name: &str, location: &str) -> Option<TableId> {
    let id = TableId::new(Namespace::new(["db"]), name);
    let t = match catalog
        .create_table(&id, NewTable::new(schema()).with_location(location))
        .await
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{location}: the catalog refused to create the table: {e}");
            return None;
        }
    };
    let committer = catalog.committer().unwrap();
    append(committer.as_ref(), &t, 0..5).await;
    Some(id)
}

/// The default (dry) run and a real run; both must be a typed refusal or stay inside `dir`.
async fn run_both(catalog: &Catalog, id: &TableId, dir: &Path, case: &str) -> Outcome {
    let mut results = Vec::new();
    for dry_run in [true, false] {
        let mut op = RemoveOrphanFiles::new(catalog, id.clone());
        if !dry_run {
            op = op.dry_run(false);
        }
        let r = op.execute().await;
        match &r {
            Ok(o) => {
                assert_eq!(o.dry_run, dry_run, "{case}");
                if dry_run {
                    assert_eq!(o.deleted_files, 0, "{case}: a dry run deleted");
                }
                for f in &o.orphans {
                    let p = local(&f.path);
                    let canonical = p.canonicalize().unwrap_or(p.clone());
                    assert!(
                        canonical.starts_with(dir),
                        "{case}: orphan {} ({}) is outside the table directory {}",
                        f.path,
                        canonical.display(),
                        dir.display()
                    );
                }
            }
            Err(e) => assert!(
                matches!(
                    e,
                    Error::Refused { .. } | Error::Config { .. } | Error::Unsupported { .. }
                ),
                "{case}: untyped failure {e:?}"
            ),
        }
        results.push(r);
    }
    let real = results.pop().unwrap();
    let dry = results.pop().unwrap();
    Outcome { dry, real }
}

struct Outcome {
    dry: cryo_core::Result<RemoveOrphanFilesOutcome>,
    real: cryo_core::Result<RemoveOrphanFilesOutcome>,
}

#[tokio::test]
async fn orphan_removal_refuses_or_stays_inside_however_the_location_is_spelled() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let warehouse = dir.path().canonicalize().unwrap();
    let db = warehouse.join("db");
    let wh = warehouse.display().to_string();
    let victims = Victims::plant(&warehouse);

    // (spelling of the location, the directory its files physically land in, whether Cryo must
    // refuse it outright)
    let cases: Vec<(&str, String, PathBuf, bool)> = vec![
        (
            "dotdot",
            format!("file://{wh}/db/t/../victim"),
            db.join("victim"),
            true,
        ),
        (
            "dotdot_trailing",
            format!("file://{wh}/db/dd/x/.."),
            db.join("dd"),
            true,
        ),
        ("dot", format!("file://{wh}/db/./dot"), db.join("dot"), true),
        (
            "doubled_slashes",
            format!("file://{wh}//db//doubled//"),
            db.join("doubled"),
            false,
        ),
        (
            "trailing_slash",
            format!("file://{wh}/db/trailing/"),
            db.join("trailing"),
            false,
        ),
        (
            "no_authority",
            format!("file:{wh}/db/noauth"),
            db.join("noauth"),
            false,
        ),
        ("bare_path", format!("{wh}/db/bare"), db.join("bare"), false),
        (
            "pct_dotdot_lower",
            format!("file://{wh}/db/pl/%2e%2e/victim"),
            db.join("victim"),
            true,
        ),
        (
            "pct_dotdot_upper",
            format!("file://{wh}/db/pu/%2E%2E/victim"),
            db.join("victim"),
            true,
        ),
        (
            "pct_slash",
            format!("file://{wh}/db/t%2F..%2Fvictim"),
            db.join("victim"),
            true,
        ),
        (
            "pct_slash_mixed",
            format!("file://{wh}/db/ps%2f%2e%2e%2fvictim"),
            db.join("victim"),
            true,
        ),
        (
            "relative",
            "db/relative".to_string(),
            db.join("relative"),
            true,
        ),
        (
            "storage_root",
            "file:///".to_string(),
            PathBuf::from("/"),
            true,
        ),
    ];
    let mut report = Vec::new();
    for (i, (case, location, physical, must_refuse)) in cases.iter().enumerate() {
        let name = format!("t{i}");
        let Some(id) = table_at(&catalog, &name, location).await else {
            report.push(format!("{case}: create refused"));
            victims.assert_intact(case);
            continue;
        };
        let out = run_both(&catalog, &id, physical, case).await;
        if *must_refuse {
            for r in [&out.dry, &out.real] {
                assert!(
                    matches!(r, Err(Error::Refused { .. })),
                    "{case} ({location}): expected a refusal, got {:?}",
                    r.as_ref().map(|o| (&o.location, o.orphans.len()))
                );
            }
        }
        report.push(format!(
            "{case}: dry {}, real {}",
            out.dry.as_ref().map_or_else(
                |e| format!("error: {e}"),
                |o| format!("{} orphans", o.orphans.len())
            ),
            out.real.as_ref().map_or_else(
                |e| format!("error: {e}"),
                |o| format!("{} deleted", o.deleted_files)
            ),
        ));
        victims.assert_intact(case);
    }
    eprintln!("orphan location spellings:\n  {}", report.join("\n  "));
}

#[tokio::test]
async fn orphan_removal_never_follows_links_or_look_alikes_out_of_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let warehouse = dir.path().canonicalize().unwrap();
    let db = warehouse.join("db");
    let victims = Victims::plant(&warehouse);

    // A table named like its look-alikes: `t` (next to `t2`, `t_backup`, full-width `ｔ`).
    let id = table_at(
        &catalog,
        "t",
        &format!("file://{}/db/t", warehouse.display()),
    )
    .await
    .unwrap();
    let root = db.join("t");
    // And `café` in NFC next to the NFD `cafe\u{301}` victim directory.
    let cafe = table_at(
        &catalog,
        "caf\u{e9}",
        &format!("file://{}/db/caf\u{e9}", warehouse.display()),
    )
    .await
    .unwrap();

    // Inside `t`: a directory link and a file link leading out, a link to the warehouse root, and
    // real orphans whose names look like traversal (they are plain names inside the table).
    std::os::unix::fs::symlink(db.join("victim"), root.join("data/escape_dir")).unwrap();
    std::os::unix::fs::symlink(
        db.join("t2/data/old.parquet"),
        root.join("data/escape_file.parquet"),
    )
    .unwrap();
    std::os::unix::fs::symlink(db.join("t_backup"), root.join("metadata/up")).unwrap();
    let inside: BTreeSet<PathBuf> = [
        // (a name starting with `.` would be hidden, as in Java: never an orphan)
        old_file(&root.join("data/x..%2F..%2Fvictim"), b"orphan"),
        old_file(&root.join("data/%2e%2e/x.parquet"), b"orphan"),
        old_file(&root.join("data/a%2Fb.parquet"), b"orphan"),
        old_file(&root.join("data/sp ace & caf\u{e9}.parquet"), b"orphan"),
    ]
    .into();

    let out = run_both(&catalog, &id, &root, "links").await;
    let dry = out.dry.unwrap();
    let listed: BTreeSet<PathBuf> = dry.orphans.iter().map(|o| local(&o.path)).collect();
    // The plain orphans are found under their own names.
    for f in &inside {
        assert!(
            listed.iter().any(|l| l == f || percent_decoded(l) == *f),
            "{} not among the orphans {listed:?}",
            f.display()
        );
    }
    // Nothing reached through a link is an orphan of the table.
    for l in &listed {
        let s = l.to_string_lossy();
        assert!(
            !s.contains("escape_dir/") && !s.contains("/metadata/up/"),
            "an orphan through a link: {s}"
        );
    }
    let real = out.real.unwrap();
    assert!(real.failures.is_empty(), "{:?}", real.failures);
    for f in &inside {
        assert!(!f.exists(), "{} was not deleted", f.display());
    }
    victims.assert_intact("links");
    // The links themselves may go (they are the table directory's own entries); what they point
    // to stays.
    assert!(db.join("victim/data/old.parquet").exists());
    assert!(db.join("t2/data/old.parquet").exists());

    // A link back up the tree (a loop for a listing that follows links): a typed storage error,
    // nothing deleted.
    std::os::unix::fs::symlink(&warehouse, root.join("data/loop")).unwrap();
    let before = files_under(&root);
    for dry_run in [true, false] {
        let r = RemoveOrphanFiles::new(&catalog, id.clone())
            .dry_run(dry_run)
            .execute()
            .await;
        assert!(
            matches!(
                &r,
                Err(e @ Error::Storage { retryable: false, .. }) if e.to_string().contains("loops back")
            ),
            "{:?}",
            r.map(|o| o.orphans)
        );
    }
    assert_eq!(files_under(&root), before);
    victims.assert_intact("loop");

    // The NFC table never touches the NFD directory.
    let cafe_out = run_both(&catalog, &cafe, &db.join("caf\u{e9}"), "nfc").await;
    assert!(cafe_out.real.unwrap().failures.is_empty());
    victims.assert_intact("nfc");

    // Locations compare by whole components after normalization, never by string prefix or
    // Unicode folding.
    let t = FileUri::new("file:///wh/db/t");
    for (other, inside) in [
        ("file:///wh/db/t/data/x", true),
        ("file:/wh//db/t///data/x", true),
        ("/wh/db/t/", true),
        ("file:///wh/db/t2/x", false),
        ("file:///wh/db/t_backup/x", false),
        ("file:///wh/db/\u{FF54}/x", false),
        ("file:///wh/db/T/x", false),
        ("file:///wh/db/t%2Fx", false),
        ("s3://wh/db/t/x", false),
        ("file:///wh/db/x/../t/y", false),
    ] {
        assert_eq!(t.contains(&FileUri::new(other)), inside, "{other}");
    }
    let cafe_uri = FileUri::new("file:///wh/db/caf\u{e9}");
    assert!(!cafe_uri.contains(&FileUri::new("file:///wh/db/cafe\u{301}/x")));
    let s3 = FileUri::new("s3://bucket/wh/t");
    assert!(s3.contains(&FileUri::new("s3a://bucket/wh/t/x")));
    assert!(s3.contains(&FileUri::new("s3n://BUCKET/wh/t/x")));
    assert!(!s3.contains(&FileUri::new("s3://other/wh/t/x")));
    assert!(!s3.contains(&FileUri::new("gs://bucket/wh/t/x")));
    assert!(!s3.contains(&FileUri::new("file:///bucket/wh/t/x")));
}

fn percent_decoded(p: &Path) -> PathBuf {
    let s = p.to_string_lossy();
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    PathBuf::from(String::from_utf8(out).unwrap())
}
