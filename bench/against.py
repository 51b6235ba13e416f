#!/usr/bin/env python3
"""A bench script's figures for another git revision and this checkout, side by side, one run.

``python bench/against.py REV [--mb 60] [--workload mixed] [--repeat 2] -- bench/pipeline.py
[its arguments]``

REV is checked out into a temporary worktree. The input is written once (``--mb`` MB of
``--workload`` by a throwaway MariaDB, ``bench/binlog_server.py``; or the script's own
``--binlog-dir``) and given to both as ``--binlog-dir``, so both read the same bytes. The
script then runs ``--repeat`` times for each side, alternating (REV, this, REV, this, …: this
machine's speed drifts over minutes), each a process of its own with this virtualenv's Python
and the side's tree first on ``sys.path``. From each run the markdown table the script prints
(``| stage | seconds | …``) is read: per stage the best seconds of each side, this checkout's
against REV's, and the median (min–max) of the ratios paired run by run. A stage that only
one side has shows ``-`` on the other.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent


def stage_seconds(output: str) -> dict[str, float]:
    """Pure: stage -> seconds of the markdown table in a bench script's ``output``."""
    out: dict[str, float] = {}
    header = None
    for line in output.splitlines():
        if not line.startswith("|"):
            header = None if not line.strip() else header
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if set(cells[0]) <= {"-", ":"} or "seconds" not in header:
            continue
        try:
            out[cells[0]] = float(cells[header.index("seconds")].replace(",", ""))
        except ValueError:
            continue
    return out


def side_by_side(rev: str, base: list[dict[str, float]], here: list[dict[str, float]]) -> str:
    """Pure: the comparison table of the runs' stage seconds (see the module docstring)."""
    stages = list(dict.fromkeys([s for run in base + here for s in run]))
    lines = [f"| stage | {rev} best s | this checkout best s | this / {rev} | paired: median "
             "(min–max) |", "|---|---:|---:|---:|---|"]
    for s in stages:
        b = [run[s] for run in base if s in run]
        h = [run[s] for run in here if s in run]
        pairs = [y / x for x, y in ((r.get(s), t.get(s)) for r, t in zip(base, here))
                 if x and y]
        cells = [s, f"{min(b):.2f}" if b else "-", f"{min(h):.2f}" if h else "-",
                 f"{min(h) / min(b):.2f}x" if b and h else "-",
                 f"{statistics.median(pairs):.2f}x ({min(pairs):.2f}–{max(pairs):.2f})"
                 if pairs else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _input(args, script_args: list[str], work: Path) -> list[str]:
    if "--binlog-dir" in script_args:
        return script_args
    sys.path[:0] = [str(ROOT), str(BENCH)]
    from binlog_server import write_binlog
    from workload import WORKLOADS

    out = work / "binlogs"
    print(f"writing a {args.mb:g} MB {args.workload} binlog with a throwaway MariaDB ...",
          flush=True)
    write_binlog(int(args.mb * 1e6), out, WORKLOADS[args.workload])
    return [*script_args, "--binlog-dir", str(out)]


def _run(tree: Path, script: str, script_args: list[str], label: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "bench")])}
    env.pop("VIRTUAL_ENV", None)
    print(f"== {label} ==", flush=True)
    proc = subprocess.run([sys.executable, str(tree / script), *script_args], cwd=tree, env=env,
                          capture_output=True, text=True)
    sys.stdout.write(proc.stdout[-3000:])
    if proc.returncode != 0:
        sys.stdout.write(proc.stderr[-3000:])
        raise SystemExit(f"{label}: {script} exited {proc.returncode}")
    return stage_seconds(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        raise SystemExit("usage: bench/against.py REV [options] -- SCRIPT [its arguments]")
    cut = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the git revision to compare with")
    ap.add_argument("--mb", type=float, default=60.0)
    ap.add_argument("--workload", default="mixed", choices=["mixed", "narrow", "wide"])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv[:cut])
    script, script_args = argv[cut + 1], argv[cut + 2:]
    work = Path(tempfile.mkdtemp(prefix="binlake-against-"))
    tree = work / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.rev],
                   check=True, capture_output=True)
    try:
        if not (tree / script).exists():
            raise SystemExit(f"{args.rev} has no {script}")
        script_args = _input(args, script_args, work)
        base, here = [], []
        for n in range(args.repeat):
            base.append(_run(tree, script, script_args, f"{args.rev}, run {n + 1}"))
            here.append(_run(ROOT, script, script_args, f"this checkout, run {n + 1}"))
        print()
        print(side_by_side(args.rev, base, here))
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                       capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
