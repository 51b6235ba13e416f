"""Each stage's rows/s on the embedded Sail engine vs local JVM Spark with delta-spark.

The same input for both: the shipped ``samples/binlogs`` (five files from a real MariaDB,
340 row changes) copied ``--copies`` times under consecutive file names, or your own
``--binlog-dir``. Each engine runs in its own child process (so a JVM and the Sail server
never share one): session start-up, then ``bronze``, ``silver`` and ``quality --window all``
over a fresh lake, each timed alone. The table printed at the end puts the engines side by
side (rows/s = row changes / stage seconds; start-up is shown apart).

    .venv/bin/python bench/engines.py                 # default: samples x 30 (10,200 rows)
    .venv/bin/python bench/engines.py --copies 5      # quick
    .venv/bin/python bench/engines.py --binlog-dir DIR --master 'local[2]'

JVM Spark needs the Delta jars ``make setup`` fetches (``engine.delta_jars``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples" / "binlogs"
STAGES = ("bronze", "silver", "quality")
_BINLOG = re.compile(r"^(.*)\.(\d{6})$")


def copy_samples(src: Path, dest: Path, copies: int) -> Path:
    """``copies`` copies of ``src``'s binlog files, renumbered one after another."""
    files = sorted(p for p in src.iterdir() if _BINLOG.match(p.name))
    dest.mkdir(parents=True, exist_ok=True)
    n = 0
    for _ in range(copies):
        for f in files:
            n += 1
            shutil.copy(f, dest / f"{_BINLOG.match(f.name).group(1)}.{n:06d}")
    return dest


def child(engine: str, master: str, lake: str, binlog_dir: str) -> dict:
    """Run in a child process: time start-up and each stage on ``engine``; return figures."""
    sys.path.insert(0, str(REPO))
    from pipelines.bronze.job import run_bronze
    from pipelines.config import load_config
    from pipelines.quality import run_quality
    from pipelines.engine.session import get_spark
    from pipelines.silver.job import run_silver

    cfg = load_config(env={}, overrides={"lake.root": lake, "engine.kind": engine,
                                         "engine.master": master})
    out: dict = {"engine": engine}
    t = time.perf_counter()
    spark = get_spark(cfg.engine)
    spark.range(1).collect()
    out["startup_s"] = time.perf_counter() - t
    t = time.perf_counter()
    bronze = run_bronze(spark, cfg, binlog_dir=binlog_dir, all_files=True)
    out["bronze"] = {"rows": bronze.row_changes, "seconds": time.perf_counter() - t}
    t = time.perf_counter()
    silver = run_silver(spark, cfg)
    out["silver"] = {"rows": silver.appended, "seconds": time.perf_counter() - t}
    t = time.perf_counter()
    quality = run_quality(spark, cfg, window="all")
    out["quality"] = {"rows": quality.rows_checked.get("silver", 0),
                      "seconds": time.perf_counter() - t, "status": quality.status}
    return out


def run_engine(engine: str, master: str, work: Path, binlog_dir: Path) -> dict:
    lake = work / f"lake-{engine}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, __file__, "--child", engine, "--master", master,
                           "--lake", str(lake), "--binlog-dir", str(binlog_dir)],
                          capture_output=True, text=True, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"bench/engines.py: {engine} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def table(results: list[dict]) -> str:
    names = [r["engine"] for r in results]
    head = f"{'stage':<10}" + "".join(f"{n + ' rows/s':>18}{n + ' s':>10}" for n in names)
    lines = [head, "-" * len(head)]
    lines.append(f"{'start-up':<10}" + "".join(f"{'':>18}{r['startup_s']:>10.1f}"
                                                for r in results))
    for stage in STAGES:
        row = f"{stage:<10}"
        for r in results:
            fig = r[stage]
            rate = fig["rows"] / fig["seconds"] if fig["seconds"] else 0.0
            row += f"{rate:>18,.0f}{fig['seconds']:>10.1f}"
        lines.append(row)
    rows = {stage: {r[stage]["rows"] for r in results} for stage in STAGES}
    lines.append("rows per stage: " + ", ".join(
        f"{s}={'/'.join(str(v) for v in sorted(vs))}" for s, vs in rows.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=30, help="copies of samples/binlogs")
    ap.add_argument("--binlog-dir", help="your own binlog directory instead of the samples")
    ap.add_argument("--master", default="local[2]", help="JVM Spark master (default local[2])")
    ap.add_argument("--engines", default="sail,spark", help="engines, in order")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--lake", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.master, args.lake, args.binlog_dir)))
        return 0
    with tempfile.TemporaryDirectory(prefix="binlake-bench-engines-") as tmp:
        work = Path(tmp)
        binlogs = (Path(args.binlog_dir) if args.binlog_dir
                   else copy_samples(SAMPLES, work / "binlogs", args.copies))
        results = []
        for engine in args.engines.split(","):
            print(f"bench: {engine} ...", flush=True)
            results.append(run_engine(engine, args.master, work, binlogs))
        print(table(results))
        mismatch = [s for s in STAGES if len({r[s]["rows"] for r in results}) > 1]
        if mismatch:
            print(f"bench: engines disagree on row counts for {', '.join(mismatch)}")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
