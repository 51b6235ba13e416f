#!/usr/bin/env python3
"""Silver in a process that holds its compiled loops, against one that does not, in one run.

``python bench/silver_loaded.py [--mb 60] [--binlog-dir DIR] [--repeat 3]``

Silver renders full row images through compiled loops (``render_fast``) from
``silver.compiled_min_mb`` of binlog (160), because loading them costs a process about a
second; a process that holds them already renders every run with them (a stream loads them
at its start and follows every few seconds; a notebook's or ``binlake serve``'s later runs).
Two engine processes of their own, each with its own lake of the same bronze:

* ``cold``: never loads the loops; each round runs bronze into a fresh lake (the reference,
  timed) and then silver, which renders the Arrow way (what a run below the threshold does in
  a process that has not loaded them);
* ``loaded``: loads them once (``render_warm.warm``, untimed), then each round runs silver.

Rounds alternate between the two (this machine's speed drifts over minutes). Per stage: the
best and median seconds, row changes/s, silver's CPU seconds in its process (the engine runs
the Python tasks there), and the ratio to bronze, best to best and paired per round.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def _timed(fn) -> dict:
    t, c = time.monotonic(), _cpu()
    rows = fn()
    return {"seconds": time.monotonic() - t, "cpu": _cpu() - c, "rows": rows}


def child(kind: str, lake: Path, binlog_dir: str) -> int:
    """One engine process: answers ``run`` lines on stdin with a JSON line per round."""
    from pipelines.bronze.job import run_bronze
    from pipelines.config import load_config
    from pipelines.engine.session import get_spark
    from pipelines.silver import render_fast
    from pipelines.silver.job import run_silver
    from pipelines.silver.render_warm import warm

    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    spark = get_spark(cfg.engine)

    def bronze() -> int:
        shutil.rmtree(lake, ignore_errors=True)
        return run_bronze(spark, cfg, binlog_dir=binlog_dir, all_files=True).row_changes

    def silver() -> int:
        shutil.rmtree(lake / "silver", ignore_errors=True)
        return run_silver(spark, cfg).appended

    bronze()  # the engine warmed up, and the lake the loaded side renders from
    if kind == "loaded" and not warm():
        raise SystemExit("the compiled loops are not available here (numba, BINLAKE_ROW_KERNEL)")
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip() != "run":
            break
        out = {"bronze": _timed(bronze)} if kind == "cold" else {}
        out["silver"] = _timed(silver)
        out["loaded"] = render_fast.loaded()
        print(json.dumps(out), flush=True)
    return 0


class Side:
    def __init__(self, kind: str, work: Path, binlog_dir: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.kind = kind
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", kind, "--lake", str(work / kind),
             "--binlog-dir", str(binlog_dir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
        self.answer()

    def answer(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith("{"):
                return json.loads(line)
        raise SystemExit(f"the {self.kind} process ended (exit {self.proc.wait()})")

    def run(self) -> dict:
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        return self.answer()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=60.0, help="size of the generated binlog")
    ap.add_argument("--binlog-dir", help="the binlog files of DIR instead")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (each side once per round)")
    ap.add_argument("--child", choices=("cold", "loaded"), help=argparse.SUPPRESS)
    ap.add_argument("--lake", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child, Path(args.lake), args.binlog_dir)

    work = Path(tempfile.mkdtemp(prefix="binlake-bench-silver-loaded-"))
    sides: list[Side] = []
    try:
        from binlog_server import binlog_input

        binlog_dir = binlog_input(args.binlog_dir, args.mb, work)
        print("starting the two engine processes (bronze once each, untimed) ...", flush=True)
        cold, loaded = Side("cold", work, binlog_dir), Side("loaded", work, binlog_dir)
        sides = [cold, loaded]
        runs: dict[str, list[dict]] = {"bronze": [], "silver, Arrow way (loops not loaded)": [],
                                       "silver, loops loaded": []}
        for r in range(args.repeat):
            order = sides if r % 2 == 0 else sides[::-1]
            for side in order:
                got = side.run()
                if side is cold:
                    if got["loaded"]:
                        raise SystemExit("the cold process loaded the loops: its silver ran "
                                         "at or above silver.compiled_min_mb")
                    runs["bronze"].append(got["bronze"])
                    runs["silver, Arrow way (loops not loaded)"].append(got["silver"])
                else:
                    runs["silver, loops loaded"].append(got["silver"])
            print(f"  round {r + 1}: " + ", ".join(
                f"{name} {v[-1]['seconds']:.2f} s" for name, v in runs.items()), flush=True)
        counts = {v["rows"] for name, vs in runs.items() for v in vs}
        if len(counts) != 1:
            raise SystemExit(f"row counts differ between runs: {sorted(counts)}")
        print()
        print(_table(runs))
        return 0
    finally:
        for side in sides:
            side.close()
        shutil.rmtree(work, ignore_errors=True)


def _table(runs: dict[str, list[dict]]) -> str:
    from rounds import stage_cells

    lines = ["| stage | best s | median s | row changes/s (best) | CPU s (median) "
             "| ratio to bronze (best) | paired per round: median (min-max) |",
             "|---|---:|---:|---:|---:|---|---|"]
    for name, vs in runs.items():
        c = stage_cells(vs, None if name == "bronze" else runs["bronze"])
        if name == "bronze":  # its decoding workers are the forkserver's children: not counted
            c["cpu"] = "-"
        rate = vs[0]["rows"] / c["best"]
        lines.append(f"| {name} | {c['best']:.2f} | {c['median']} | {rate:,.0f} | {c['cpu']} "
                     f"| {c['ratio']} | {c['paired']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
