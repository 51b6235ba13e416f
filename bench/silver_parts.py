#!/usr/bin/env python3
"""Where silver's time goes: its parts on the same bronze, beside bronze, in one run.

``python bench/silver_parts.py [--mb 60] [--binlog-dir DIR] [--repeat 3]``

One engine process (the embedded one), one lake. Bronze is indexed once untimed (the engine
and the compiled loops warmed up, and the bronze the parts read); then each round times:

* ``bronze``: the bronze stage into a lake of its own (the reference);
* ``read``: the row changes silver reads from bronze (its columns), handed to a Python task
  that drops them;
* ``read + render``: the same rows through silver's transform (``to_silver``: naming,
  rendering, ``pk_hash``), dropped by a Python task instead of written;
* ``read + render + write``: the same transform appended to a fresh Delta table in one
  commit, no partitions (what the engine's writer adds);
* ``silver``: the stage itself (``run_silver`` into a fresh silver: partitions by
  ``event_date``, a commit per ``silver.commit_mb``, the quarantine count, progress).

Per part: the best and median seconds, the process's CPU seconds (the engine's threads and
its Python tasks; the median), cores busy (CPU over wall, median), and the ratio to bronze,
best to best and paired per round. Bronze's decoding workers are not the process's children
(a fork server's): its CPU is not shown.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

_NONE = "x int"  # the dropping task's (empty) output


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _drop(batches):
    for _ in batches:
        pass
    return iter(())


def _timed(fn) -> dict:
    t, c = time.monotonic(), _cpu()
    fn()
    return {"seconds": time.monotonic() - t, "cpu": _cpu() - c}


def parts(binlog_dir: Path, work: Path, repeat: int) -> tuple[dict[str, list[dict]], int]:
    from pipelines.bronze.job import run_bronze
    from pipelines.bronze.table_maps import read_table_maps
    from pipelines.config import load_config
    from pipelines.history.lake import naming_plan
    from pipelines.lake.tables import BRONZE_EVENTS, Lake
    from pipelines.engine.session import get_spark
    from pipelines.silver.job import run_silver
    from pipelines.silver.render_warm import batch_rows, warm
    from pipelines.silver.transform import bronze_changes, to_silver

    cfg = load_config(env={}, overrides={"lake.root": str(work / "lake")})
    ref = load_config(env={}, overrides={"lake.root": str(work / "reference")})
    spark = get_spark(cfg.engine)
    rows = run_bronze(spark, cfg, binlog_dir=str(binlog_dir), all_files=True).row_changes
    if not warm():
        raise SystemExit("the compiled loops are not available here (numba, BINLAKE_ROW_KERNEL)")
    lake = Lake.of(cfg)
    plan = naming_plan(spark, cfg)
    plan.table_maps = read_table_maps(spark, lake)
    out = work / "written"
    render_rows = batch_rows(cfg)  # as run_silver renders in this process

    def rendered():
        return to_silver(lake.read(spark, BRONZE_EVENTS), plan, 0, True, False, render_rows)

    def bronze() -> None:
        shutil.rmtree(work / "reference", ignore_errors=True)
        run_bronze(spark, ref, binlog_dir=str(binlog_dir), all_files=True)

    def write() -> None:
        shutil.rmtree(out, ignore_errors=True)
        rendered().write.format("delta").save(str(out))

    appended = []

    def silver() -> None:
        shutil.rmtree(work / "lake" / "silver", ignore_errors=True)
        appended.append(run_silver(spark, cfg).appended)
        if appended[-1] != appended[0]:
            raise SystemExit(f"silver appended {appended[-1]} rows, the first run {appended[0]}")

    steps = {
        "bronze": bronze,
        "read": lambda: bronze_changes(lake.read(spark, BRONZE_EVENTS))
        .mapInArrow(_drop, _NONE).collect(),
        "read + render": lambda: rendered().mapInArrow(_drop, _NONE).collect(),
        "read + render + write": write,
        "silver": silver,
    }
    silver()  # untimed: the first run's planning and the engine's caches
    runs: dict[str, list[dict]] = {name: [] for name in steps}
    for r in range(repeat):
        for name, fn in steps.items():
            runs[name].append(_timed(fn))
        print(f"  round {r + 1}: " + ", ".join(f"{n} {v[-1]['seconds']:.2f} s"
                                              for n, v in runs.items()), flush=True)
    return runs, rows


def table(runs: dict[str, list[dict]], rows: int) -> str:
    from rounds import stage_cells

    lines = ["| part | best s | median s | row changes/s (best) | CPU s (median) | cores busy "
             "(median) | ratio to bronze (best) | paired per round: median (min-max) |",
             "|---|---:|---:|---:|---:|---:|---|---|"]
    for name, vs in runs.items():
        c = stage_cells(vs, None if name == "bronze" else runs["bronze"])
        if name == "bronze":  # its decoding workers are a fork server's children: not counted
            c["cpu"] = c["busy"] = "-"
        lines.append(f"| {name} | {c['best']:.2f} | {c['median']} | {rows / c['best']:,.0f} "
                     f"| {c['cpu']} | {c['busy']} | {c['ratio']} | {c['paired']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=60.0, help="size of the generated binlog")
    ap.add_argument("--binlog-dir", help="the binlog files of DIR instead")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (each part once per round)")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="binlake-bench-silver-parts-"))
    try:
        from binlog_server import binlog_input

        binlog_dir = binlog_input(args.binlog_dir, args.mb, work)
        print("bronze once (untimed), then the parts in rounds ...", flush=True)
        runs, rows = parts(binlog_dir, work, args.repeat)
        print()
        print(table(runs, rows))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
