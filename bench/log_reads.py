#!/usr/bin/env python3
"""What a run reads from a long Delta log, side by side with reading the whole log.

``python bench/log_reads.py [--at 250,1000,2000] [--rounds 5]``

Silver counts the rows it appended from its own commits' metrics
(``delta_ops.rows_written_since``); quality and gold take the files appended since the version
they last saw (``delta_ops.files_added``). A stream's table gains a commit every few seconds,
so these run against a log that grows all day. The table here gets small appends from the
embedded engine (so its commits carry the engine's metrics) and a checkpoint every 100, as
Delta's writers do; at each length of ``--at`` commits, each read is timed, best of
``--rounds``:

- **whole log** (the baseline, what both read before): ``DeltaTable(path).history()``;
- ``rows_written_since(path, latest - 1)``: silver after a run that appended one commit;
- ``files_added(path, latest - 1, latest)``: quality or gold after that run (it also loads
  delta-rs snapshots at the run's first and last versions).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pipelines.config import EngineConfig  # noqa: E402
from pipelines.lake.delta_ops import files_added, rows_written_since  # noqa: E402
from pipelines.engine.session import get_spark  # noqa: E402


def _best(rounds: int, fn) -> tuple[float, object]:
    times, out = [], None
    for _ in range(rounds):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--at", default="250,1000,2000", help="log lengths (commits) to time at")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    from deltalake import DeltaTable

    lengths = sorted(int(n) for n in args.at.split(","))
    spark = get_spark(EngineConfig())
    lines = []
    with tempfile.TemporaryDirectory(prefix="binlake-log-") as tmp:
        path = str(Path(tmp) / "t")
        started, done = time.perf_counter(), 0
        for n in lengths:
            for i in range(done, n):
                spark.range(i * 10, i * 10 + 10).write.format("delta").mode("append").save(path)
                if i % 100 == 99:
                    DeltaTable(path).create_checkpoint()
            done = n
            print(f"{n} commits of 10 rows written ({time.perf_counter() - started:.0f} s)",
                  flush=True)
            latest = DeltaTable(path).version()
            whole, commits = _best(args.rounds, lambda: len(DeltaTable(path).history()))
            rows_s, rows = _best(args.rounds, lambda: rows_written_since(path, latest - 1))
            files_s, files = _best(args.rounds, lambda: files_added(path, latest - 1, latest))
            if commits != latest + 1 or rows != 10 or files is None or len(files) != 1:
                print(f"wrong: {commits} commits, {rows} rows, files {files}", file=sys.stderr)
                return 1
            lines.append(f"| {commits} | {whole:.4f} | {rows_s:.4f} ({whole / rows_s:.1f}x) | "
                         f"{files_s:.4f} |")
    print()
    print("| commits in the log | whole log: `history()` (baseline) | `rows_written_since` "
          "(silver; x faster) | `files_added` (quality, gold) |")
    print("|---:|---:|---:|---:|")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
