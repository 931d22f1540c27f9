#!/usr/bin/env python3
"""Compaction benchmark: Cryo vs Spark rewrite_data_files vs raw DuckDB / pyarrow rewrites.

Run it through ``bash benches/compaction/run.sh [options]`` (builds Cryo's release example first);
see benches/compaction/README.md. Options:

    --size-mb N          data files of the generated table (MiB; default 1024)
    --deletes            the variant with ~5% of the rows deleted by Spark merge-on-read position deletes
    --contenders LIST    comma-separated subset of cryo,spark,duckdb,pyarrow (run in that order)
    --query-runs N       timed runs per query (median reported; one untimed warm-up first)
    --repeat N           rounds of all contenders, order rotated each round (median time, max RSS)
    --regenerate         rebuild the pristine table even if a matching one exists
    --keep               leave the last contender's output in target/bench/compaction/work

Every contender starts from its own fresh copy of the pristine table (``cp -a`` to the same path,
since Iceberg metadata holds absolute paths, then ``sync``), and they run one after another.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import common  # noqa: E402
import generate  # noqa: E402

ALL_CONTENDERS = ["cryo", "spark", "duckdb", "pyarrow"]
RAW = {"duckdb", "pyarrow"}


class BenchError(Exception):
    pass


def sh(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True)


def restore(pristine: Path, work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    sh(["cp", "-a", str(pristine), str(work)])
    os.sync()


def run_process(cmd: list[str], log_path: Path) -> dict[str, Any]:
    """Run ``cmd``; wall time, peak RSS of that process, the JSON it prints last.

    Peak RSS: ``wait4``'s ru_maxrss is useless here (Linux carries the forking parent's high-water
    mark into the child across exec, so every child would report at least this harness's RSS).
    With GNU time, it forks the command from its own tiny process and reports the true maximum
    (``%M``); without it, /proc/<pid>/status VmHWM is polled every 20 ms.
    """
    common.log("$ " + " ".join(cmd))
    rss_file = Path(str(log_path) + ".maxrss")
    rss_file.unlink(missing_ok=True)
    gnu_time = Path("/usr/bin/time").exists()
    full = ["/usr/bin/time", "-f", "%U %S %M", "-o", str(rss_file), *cmd] if gnu_time else cmd
    polled = [0]
    with open(log_path, "w") as err, open(str(log_path) + ".stdout", "w+") as out:
        busy0 = cpu_busy_s()
        start = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err)
        if not gnu_time:
            def poll() -> None:
                while proc.poll() is None:
                    try:
                        polled[0] = max(polled[0], common.peak_rss_kb(proc.pid))
                    except (OSError, ValueError):
                        pass
                    time.sleep(0.02)
            threading.Thread(target=poll, daemon=True).start()
        proc.wait()
        wall = time.perf_counter() - start
        busy = cpu_busy_s() - busy0
        out.seek(0)
        stdout = out.read()
    if proc.returncode != 0:
        tail = Path(log_path).read_text()[-4000:]
        raise BenchError(f"{cmd[0]} failed with exit code {proc.returncode}:\n{tail}")
    cpu = None
    if gnu_time:
        user, system, maxrss = rss_file.read_text().split()[-3:]
        maxrss, how, cpu = int(maxrss), "GNU time %M", float(user) + float(system)
    else:
        maxrss, how = polled[0], "VmHWM polled every 20 ms"
    # CPU used by other processes while this one ran, in cores (noise indicator; needs GNU time).
    others = None if cpu is None else max(0.0, (busy - cpu) / wall)
    last = [line for line in stdout.splitlines() if line.startswith("{")]
    if not last:
        raise BenchError(f"{cmd[0]} printed no JSON:\n{stdout[-2000:]}")
    return {"wall_s": wall, "maxrss_kb": maxrss, "rss_method": how, "cpu_s": cpu, "others_cores": others, "json": json.loads(last[-1])}


def cpu_load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def cpu_busy_s() -> float:
    """Busy CPU-seconds of the whole machine since boot (/proc/stat, all cores)."""
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = f[3] + (f[4] if len(f) > 4 else 0)
    return (sum(f[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def wait_quiet(max_wait_s: float, max_busy: float = 0.15) -> dict:
    """Wait until the machine is idle (busy < ``max_busy`` of all cores over 2 s) or ``max_wait_s``.

    The project machine is shared: another session's build would run alongside a contender.
    """
    start = time.perf_counter()
    cores = os.cpu_count() or 1
    while True:
        b0 = cpu_busy_s()
        time.sleep(2)
        busy = (cpu_busy_s() - b0) / 2 / cores
        waited = time.perf_counter() - start
        if busy < max_busy or waited >= max_wait_s:
            if busy >= max_busy:
                common.log(f"machine still busy ({busy:.0%} of {cores} cores) after {waited:.0f}s: running anyway")
            return {"waited_s": round(waited, 1), "busy_before": round(busy, 2), "quiet": busy < max_busy}


def ensure_pristine(root: Path, work: Path, size_mb: int, seed: int, deletes: bool, spark_memory: str, regenerate: bool) -> tuple[Path, dict]:
    """The pristine base table (and the deletes variant), generated once and reused."""
    import duckdb

    key = f"{size_mb}mb-seed{seed}-g{generate.GENERATOR_VERSION}-duckdb{duckdb.__version__}"
    base, dels = root / f"pristine-{key}", root / f"pristine-{key}-deletes"
    py = sys.executable
    gen = str(HERE / "generate.py")
    if regenerate:
        for d in (base, dels):
            shutil.rmtree(d, ignore_errors=True)
    if not (base / "bench-generated.json").exists():
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
        common.log(f"generating {size_mb} MiB table (seed {seed}) -> {base}")
        r = run_process([py, gen, "--root", str(work), "--size-mb", str(size_mb), "--seed", str(seed)], root / "generate.log")
        sh(["cp", "-a", str(work), str(base)])
        (base / "bench-generated.json").write_text(json.dumps(r["json"]))
    info = json.loads((base / "bench-generated.json").read_text())
    if not deletes:
        return base, info
    if not (dels / "bench-generated.json").exists():
        shutil.rmtree(dels, ignore_errors=True)
        restore(base, work)
        common.log(f"Spark merge-on-read DELETE WHERE {generate.DELETE_PREDICATE} -> {dels}")
        r = run_process([py, gen, "--root", str(work), "--deletes", "--spark-memory", spark_memory], root / "generate-deletes.log")
        info = {**info, "delete": r["json"]}
        sh(["cp", "-a", str(work), str(dels)])
        (dels / "bench-generated.json").write_text(json.dumps(info))
    return dels, json.loads((dels / "bench-generated.json").read_text())


def check_fingerprint(what: str, got: tuple[int, int, int], expected: list[int]) -> None:
    if list(got) != list(expected):
        raise BenchError(
            f"ROW FINGERPRINT MISMATCH for {what}: got rows={got[0]} sum={got[1]} xor={got[2]}, "
            f"expected rows={expected[0]} sum={expected[1]} xor={expected[2]}"
        )
    common.log(f"{what}: fingerprint OK ({got[0]} rows)")


def iceberg_fingerprint(metadata_location: str) -> tuple[int, int, int]:
    con = common.duckdb_connect()
    try:
        return common.fingerprint(con, common.iceberg_rel(metadata_location))
    finally:
        con.close()


def files_fingerprint(files: list[str]) -> tuple[int, int, int]:
    con = common.duckdb_connect()
    try:
        return common.fingerprint(con, common.parquet_rel(files))
    finally:
        con.close()


def state_summary(state: dict) -> dict:
    sizes = state["data_file_sizes"]
    return {
        k: state[k]
        for k in ("metadata_location", "snapshot_id", "operation", "snapshots", "data_files", "data_bytes", "delete_files", "delete_bytes", "records")
    } | {
        "data_file_kb_min_median_max": [round(sizes[0] / 1024), round(statistics.median(sizes) / 1024), round(sizes[-1] / 1024)] if sizes else None
    }


def check_queries(who: str, before: dict, after: dict) -> None:
    for name, b in before.items():
        if not common.same_results(b["result"], after[name]["result"]):
            raise BenchError(f"QUERY RESULT MISMATCH after {who}, query '{name}': before {b['result']} after {after[name]['result']}")


def speedup(before: dict, after: dict) -> dict:
    per = {name: before[name]["median_s"] / after[name]["median_s"] for name in before}
    return {"per_query": per, "geomean": math.exp(sum(math.log(v) for v in per.values()) / len(per))}


def run_contender(name: str, args, root: Path, work: Path, pristine: Path, expected_live: list[int], expected_all: list[int], before: dict, queries_before: dict) -> dict:
    restore(pristine, work)
    quiet = wait_quiet(args.max_wait_quiet) if args.max_wait_quiet > 0 else None
    common.log(f"--- {name} (load average {cpu_load()}, {quiet})")
    res: dict[str, Any] = {"contender": name, "load_before": cpu_load(), "quiet_before": quiet}
    logs = root / "logs"
    logs.mkdir(exist_ok=True)
    if name == "cryo":
        cat = root / "catalog.json"
        cat.write_text(json.dumps(common.catalog_json(work)))
        cmd = [str(args.compact_bin), "--catalog", str(cat), "--table", common.TABLE, "--target-file-size", str(common.TARGET_FILE_SIZE),
               "--strategy", args.strategy, *args.cryo_arg]
        r = run_process(cmd, logs / "cryo.log")
        res.update(cpu_s=r["cpu_s"], cpu_of="whole process", others_cores=r["others_cores"])
        res.update(seconds=r["wall_s"], timed="whole process (start, catalog, plan, rewrite, commit, verification)", peak_rss_kb=r["maxrss_kb"], outcome=r["json"], command=cmd)
        outcome = r["json"]
        if outcome.get("failed_groups") or outcome.get("conflicted_groups"):
            raise BenchError(f"Cryo left groups uncommitted: {outcome}")
    elif name == "spark":
        cmd = [sys.executable, str(HERE / "spark_rewrite.py"), "--root", str(work), "--memory", args.spark_memory, "--strategy", args.strategy]
        if not args.spark_keep_dangling_deletes:
            cmd.append("--remove-dangling-deletes")
        r = run_process(cmd, logs / "spark.log")
        j = r["json"]
        res.update(cpu_s=j["cpu_s"], cpu_of="JVM during the CALL", others_cores=j["others_cores"])
        res.update(
            seconds=j["seconds"], timed="the CALL only (JVM start and session excluded)", peak_rss_kb=j["peak_rss_kb"],
            rss_of="JVM (VmHWM)", driver_python_maxrss_kb=r["maxrss_kb"], process_wall_s=r["wall_s"], startup_s=j["startup_s"],
            outcome=j["result"], sql=j["sql"], spark_memory=args.spark_memory,
        )
    else:
        out = work / f"raw-{name}"
        cmd = [sys.executable, str(HERE / "raw_rewrite.py"), "--engine", name, "--input", str(root / "parts.json"), "--out", str(out)]
        r = run_process(cmd, logs / f"{name}.log")
        res.update(cpu_s=r["json"]["cpu_s"], cpu_of="the rewrite loop", process_cpu_s=r["cpu_s"], others_cores=r["others_cores"])
        res.update(seconds=r["json"]["seconds"], timed="the rewrite loop (interpreter start, imports excluded)", peak_rss_kb=r["maxrss_kb"], process_wall_s=r["wall_s"], command=cmd)
        files = sorted(str(p) for p in out.glob("*.parquet"))
        fp = files_fingerprint(files)
        check_fingerprint(f"{name} output files (deletes not applied)", fp, expected_all)
        res.update(
            data_files_after=len(files), delete_files_after=None, output_bytes=sum(os.path.getsize(f) for f in files),
            codecs=common.parquet_codecs(files), fingerprint=list(fp), deletes_applied=False, commits=False,
        )
    if name not in RAW:
        after = common.table_state(work)
        fp = iceberg_fingerprint(after["metadata_location"])
        check_fingerprint(f"{name} table (DuckDB iceberg_scan)", fp, expected_live)
        if after["data_files"] >= before["data_files"]:
            raise BenchError(f"{name} did not compact: {before['data_files']} -> {after['data_files']} data files")
        old = {f for fs in before["partitions"].values() for f in fs}
        new_files = [f for fs in after["partitions"].values() for f in fs if f not in old]
        common.log(f"{name}: query mix after")
        q = common.run_queries(after["metadata_location"], args.query_runs)
        check_queries(name, queries_before, q)
        res.update(
            data_files_after=after["data_files"], delete_files_after=after["delete_files"], output_bytes=after["data_bytes"],
            codecs=common.parquet_codecs(new_files), fingerprint=list(fp), deletes_applied=True, commits=True,
            table_after=state_summary(after), queries_after=q, query_speedup=speedup(queries_before, q),
        )
    res["input_bytes"] = before["data_bytes"]
    res["mb_per_s"] = before["data_bytes"] / 1e6 / res["seconds"]
    common.log(f"{name}: {res['seconds']:.2f}s = {res['mb_per_s']:.1f} MB/s, peak RSS {res['peak_rss_kb'] / 1024:.0f} MiB")
    return res


def median_queries(runs: list[dict]) -> dict:
    """Per query: the median over rounds of each round's median."""
    return {name: {"median_s": statistics.median(r[name]["median_s"] for r in runs), "result": runs[0][name]["result"]} for name in runs[0]}


def aggregate(runs: list[dict], queries_before: dict) -> dict:
    """One contender over the rounds: median time, largest peak RSS, median query times."""
    out = dict(runs[-1])
    out["rounds"] = len(runs)
    out["seconds_all"] = [r["seconds"] for r in runs]
    out["seconds"] = statistics.median(out["seconds_all"])
    out["mb_per_s"] = out["input_bytes"] / 1e6 / out["seconds"]
    out["peak_rss_kb_all"] = [r["peak_rss_kb"] for r in runs]
    out["peak_rss_kb"] = max(out["peak_rss_kb_all"])
    cpus = [r["cpu_s"] for r in runs if r.get("cpu_s") is not None]
    out["cpu_s_all"] = cpus
    out["cpu_s"] = statistics.median(cpus) if cpus else None
    out["others_cores_all"] = [r.get("others_cores") for r in runs]
    if "queries_after" in out:
        out["queries_after"] = median_queries([r["queries_after"] for r in runs])
        out["query_speedup"] = speedup(queries_before, out["queries_after"])
    return out


def markdown(result: dict) -> str:
    rows = result["contenders"]
    cryo = next((r for r in rows if r["contender"] == "cryo"), None)
    inp = result["input"]
    lines = [
        f"Input: `{common.TABLE}`, {inp['data_files']} data files ({inp['data_bytes'] / 1e6:.0f} MB, "
        f"{inp['data_file_kb_min_median_max'][0]}/{inp['data_file_kb_min_median_max'][1]}/{inp['data_file_kb_min_median_max'][2]} KiB min/median/max), "
        f"{inp['delete_files']} position-delete files, {inp['records']:,} rows in data files, 32 partitions; "
        f"target 128 MiB, zstd(3), strategy {result['strategy']}. MB = 10^6 bytes. {result['repeat']} round(s): median time (min–max), largest peak RSS.",
        "",
        "| contender | commits / applies deletes | time (s) | input MB/s | Cryo ÷ this | CPU s | MB per CPU-s | others' CPU (cores) | peak RSS (MiB) | data files before → after | delete files after | output MB | query speedup (geomean) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    def secs(r: dict) -> str:
        a = r["seconds_all"]
        return f"{r['seconds']:.1f}" if len(a) == 1 else f"{r['seconds']:.1f} ({min(a):.1f}–{max(a):.1f})"

    def cpu(r: dict) -> str:
        if not r.get("cpu_s"):
            return "– | –"
        return f"{r['cpu_s']:.1f} | {r['input_bytes'] / 1e6 / r['cpu_s']:.1f}"

    def others(r: dict) -> str:
        o = [x for x in r.get("others_cores_all", []) if x is not None]
        return f"{max(o):.2f}" if o else "–"

    label = {"cryo": "Cryo (`examples/compact`)", "spark": "Spark `rewrite_data_files`", "duckdb": "DuckDB `COPY` per partition", "pyarrow": "pyarrow per partition"}
    for r in rows:
        ratio = f"{cryo['mb_per_s'] / r['mb_per_s']:.2f}×" if cryo else "–"
        qs = f"{r['query_speedup']['geomean']:.2f}×" if "query_speedup" in r else "–"
        dels = "–" if r["delete_files_after"] is None else str(r["delete_files_after"])
        yn = "yes / yes" if r["commits"] else "no / no (raw)"
        lines.append(
            f"| {label[r['contender']]} | {yn} | {secs(r)} | {r['mb_per_s']:.1f} | {ratio} | {cpu(r)} | {others(r)} | "
            f"{r['peak_rss_kb'] / 1024:.0f} | {inp['data_files']} → {r['data_files_after']} | {dels} | {r['output_bytes'] / 1e6:.0f} | {qs} |"
        )
    qb = result["queries_before"]
    withq = [r for r in rows if "queries_after" in r]
    if withq:
        lines += ["", "| query (DuckDB iceberg_scan, median s) | before | " + " | ".join(label[r["contender"]].split(" ")[0] + " after" for r in withq) + " |",
                  "|---|---:|" + "---:|" * len(withq)]
        for name in qb:
            cells = " | ".join(f"{r['queries_after'][name]['median_s']:.3f} ({r['query_speedup']['per_query'][name]:.1f}×)" for r in withq)
            lines.append(f"| {name} | {qb[name]['median_s']:.3f} | {cells} |")
    lines += ["", "Targets:"]
    for t in result["targets"]:
        lines.append(f"- {'MET ' if t['met'] else 'MISSED'} {t['target']}: {t['detail']}")
    return "\n".join(lines)


def paired_ratios(rounds: list[dict], others: list[str]) -> list[float]:
    """Per round: the fastest of ``others``' time over Cryo's time in that round (Cryo's throughput
    relative to theirs). Contenders of one round run minutes apart, so these pairs share most of
    the host's slowdowns that medians taken per contender across rounds do not."""
    out = []
    for rd in rounds:
        c = rd["runs"].get("cryo")
        times = [rd["runs"][n]["seconds"] for n in others if n in rd["runs"]]
        if c and times:
            out.append(min(times) / c["seconds"])
    return out


def targets(rows: list[dict], rounds: list[dict], strategy: str = "binpack") -> list[dict]:
    """The issue's targets. With several rounds a throughput target is met when the median of the
    per-round paired ratios meets it (the ratio of the median times is shown too)."""
    by = {r["contender"]: r for r in rows}
    out = []
    if "cryo" not in by:
        return out
    c = by["cryo"]

    def throughput(target: str, others: list[str], factor: float, label: str) -> dict:
        ratio = min(by[n]["seconds"] for n in others) / c["seconds"]
        pairs = paired_ratios(rounds, others)
        paired = statistics.median(pairs) if pairs else ratio
        hits = sum(1 for x in pairs if x >= factor)
        per_round = ", ".join(f"{x:.2f}×" for x in pairs)
        return {"target": target, "met": paired >= factor,
                "detail": f"per round (same-round pairs) {per_round}: median {paired:.2f}×, {hits}/{len(pairs)} rounds "
                          f"≥ {factor:g}×; ratio of median times vs {label} {ratio:.2f}×",
                "paired_ratios": pairs, "paired_median": paired, "median_ratio": ratio}

    raws = [n for n in RAW if n in by]
    if raws:
        out.append(throughput("Cryo ≥ fastest raw rewrite", raws, 1.0, "the fastest raw"))
    if "spark" in by:
        s = by["spark"]
        # Bin-pack: 5× (issue 21); an ordered rewrite: 3× (issue 30).
        factor = 5.0 if strategy == "binpack" else 3.0
        out.append(throughput(f"Cryo ≥ {factor:g}× Spark ({strategy})", ["spark"], factor, "Spark"))
        out.append({"target": "query speedup of Cryo's output ≥ Spark's", "met": c["query_speedup"]["geomean"] >= s["query_speedup"]["geomean"],
                    "detail": f"Cryo {c['query_speedup']['geomean']:.2f}× vs Spark {s['query_speedup']['geomean']:.2f}× (geometric mean over {len(c['query_speedup']['per_query'])} queries)"})
    out.append({"target": "Cryo peak RSS (compare across --size-mb runs: must not grow with the table)", "met": True,
                "detail": f"{c['peak_rss_kb'] / 1024:.0f} MiB for {c['input_bytes'] / 1e6:.0f} MB of input"})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--deletes", action="store_true")
    ap.add_argument("--seed", type=int, default=common.DEFAULT_SEED)
    ap.add_argument("--contenders", default=",".join(ALL_CONTENDERS))
    ap.add_argument("--query-runs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1, help="rounds of all contenders (order rotated); medians reported")
    ap.add_argument("--spark-memory", default="2g", help="spark.driver.memory of local[2] (default 2g)")
    ap.add_argument("--spark-keep-dangling-deletes", action="store_true", help="do not pass remove-dangling-deletes=true to Spark")
    ap.add_argument("--strategy", default="binpack",
                    help="binpack, sort:col,col, zorder:col,col (Cryo and Spark) or hilbert:col,col (Cryo only); the raw rewrites do not order rows")
    ap.add_argument("--cryo-arg", action="append", default=[], help="extra argument for examples/compact (repeat)")
    ap.add_argument("--compact-bin", type=Path, default=REPO / "target" / "release" / "examples" / "compact")
    ap.add_argument("--max-wait-quiet", type=float, default=180, help="before each contender, wait up to this many seconds for an idle machine (0: don't)")
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--out", type=Path, default=REPO / "target" / "bench")
    args = ap.parse_args()
    contenders = [c for c in args.contenders.split(",") if c]
    if unknown := set(contenders) - set(ALL_CONTENDERS):
        ap.error(f"unknown contenders {sorted(unknown)}")
    ordered = args.strategy != "binpack"
    if ordered and set(contenders) & set(RAW):
        ap.error(f"the raw rewrites ({', '.join(RAW)}) do not order rows: --contenders cryo,spark with --strategy {args.strategy}")
    if args.strategy.startswith("hilbert") and "spark" in contenders:
        ap.error("Spark has no Hilbert order: --contenders cryo")
    if "cryo" in contenders and not args.compact_bin.exists():
        ap.error(f"{args.compact_bin} missing: cargo build --release -p cryo-core --example compact")
    args.out = args.out.resolve()
    root = args.out / "compaction"
    root.mkdir(parents=True, exist_ok=True)
    work = root / "work"
    stamp = time.strftime("%Y%m%dT%H%M%S")
    result: dict[str, Any] = {
        "benchmark": "compaction", "started": stamp, "size_mb": args.size_mb, "deletes": args.deletes, "seed": args.seed, "repeat": args.repeat,
        "strategy": args.strategy,
        "machine": common.env_info(), "contenders": [], "target_file_size_bytes": common.TARGET_FILE_SIZE, "zstd_level": common.ZSTD_LEVEL,
    }
    out_json = args.out / f"compaction-{stamp}.json"
    code = 0
    try:
        pristine, gen = ensure_pristine(root, work, args.size_mb, args.seed, args.deletes, args.spark_memory, args.regenerate)
        expected_all = gen["fingerprint_all"]
        expected_live = gen["fingerprint_live"] if args.deletes else expected_all
        result["generated"] = gen
        restore(pristine, work)
        before = common.table_state(work)
        result["input"] = state_summary(before)
        (root / "parts.json").write_text(json.dumps(before["partitions"]))
        check_fingerprint("pristine table (DuckDB iceberg_scan)", iceberg_fingerprint(before["metadata_location"]), expected_live)
        rounds: list[dict] = []
        for r in range(args.repeat):
            # Rotate the order each round so that no contender always runs first or last.
            order = contenders[r % len(contenders):] + contenders[: r % len(contenders)]
            common.log(f"=== round {r + 1}/{args.repeat}: {', '.join(order)}")
            if r:
                restore(pristine, work)
            common.log("query mix before")
            qb = common.run_queries(before["metadata_location"], args.query_runs)
            runs = {name: run_contender(name, args, root, work, pristine, expected_live, expected_all, before, qb) for name in order}
            rounds.append({"order": order, "queries_before": qb, "runs": runs})
        result["rounds"] = rounds
        result["queries_before"] = median_queries([rd["queries_before"] for rd in rounds])
        result["contenders"] = [aggregate([rd["runs"][name] for rd in rounds], result["queries_before"]) for name in contenders]
        result["targets"] = targets(result["contenders"], rounds, args.strategy)
        md = markdown(result)
        result["markdown"] = md
        print(md)
    except BenchError as e:
        result["error"] = str(e)
        print(f"\n!!! BENCHMARK FAILED: {e}\n", file=sys.stderr)
        code = 1
    finally:
        out_json.parent.mkdir(parents=True, exist_ok=True)
        out_json.write_text(json.dumps(result, indent=1, default=str))
        common.log(f"wrote {out_json}")
        if not args.keep and work.exists():
            shutil.rmtree(work)
    return code


if __name__ == "__main__":
    sys.exit(main())
