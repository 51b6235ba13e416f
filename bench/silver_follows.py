#!/usr/bin/env python3
"""What one silver follow costs after a history, against the same follow into an empty lake.

``python bench/silver_follows.py [--history-rows 400000] [--files 12] [--rows-per-file 5000]``

A throwaway MariaDB writes one table: ``--history-rows`` inserts in a first binlog file,
then ``--files`` small files of ``--rows-per-file`` inserts and an UPDATE of 2,000 rows each
(the shape of a stream's micro-batches). Bronze indexes the first file and silver takes it;
then, file after file, bronze takes one small file and ``run_silver`` is timed: the follow
after the history. The baseline: each small file alone into an empty lake (bronze, then the
timed ``run_silver``). One table, side by side per file: seconds after the history, seconds
into the empty lake, their ratio; then the medians. A follow that re-read the history would
grow with it: its ratio would rise file after file.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from devtools.mariadb import MariaDBServer  # noqa: E402
from pipelines.bronze.job import run_bronze  # noqa: E402
from pipelines.config import load_config  # noqa: E402
from pipelines.engine.session import get_spark  # noqa: E402
from pipelines.silver.job import run_silver  # noqa: E402


def _write(binlogs: Path, history_rows: int, files: int, rows_per_file: int) -> list[str]:
    """The binlog files, history first (see the module docstring)."""
    with MariaDBServer(binlog_row_metadata="FULL", max_binlog_size=1 << 30) as server:
        conn = server.connect()
        cur = conn.cursor()
        cur.execute("CREATE DATABASE b")
        cur.execute("CREATE TABLE b.t (id INT PRIMARY KEY, a INT, s VARCHAR(40), d DATETIME(6))")
        next_id = 1

        def insert(n: int) -> None:
            nonlocal next_id
            for start in range(0, n, 2000):
                rows = [(next_id + k, k, f"s{next_id + k}", "2026-01-01 00:00:00")
                        for k in range(min(2000, n - start))]
                next_id += len(rows)
                cur.execute("BEGIN")
                cur.executemany("INSERT INTO b.t VALUES (%s, %s, %s, %s)", rows)
                cur.execute("COMMIT")

        insert(history_rows)
        cur.execute("FLUSH BINARY LOGS")
        for _ in range(files):
            insert(rows_per_file)
            cur.execute("UPDATE b.t SET a = a + 1 WHERE id > %s", (next_id - 2000,))
            cur.execute("FLUSH BINARY LOGS")
        conn.close()
        server.copy_closed_binlogs(binlogs)
    return sorted(p.name for p in binlogs.iterdir() if p.name[-1].isdigit())


def _follow(spark, cfg, binlogs: Path, name: str) -> tuple[float, int]:
    if run_bronze(spark, cfg, binlog_dir=str(binlogs), files=[name]).failed:
        raise SystemExit(f"bronze failed on {name}")
    started = time.monotonic()
    appended = run_silver(spark, cfg).appended
    return time.monotonic() - started, appended


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history-rows", type=int, default=400_000)
    ap.add_argument("--files", type=int, default=12)
    ap.add_argument("--rows-per-file", type=int, default=5000)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="binlake-follows-"))
    try:
        binlogs = work / "binlogs"
        binlogs.mkdir()
        print(f"writing {args.history_rows:,} rows, then {args.files} files of "
              f"{args.rows_per_file:,} ...", flush=True)
        names = _write(binlogs, args.history_rows, args.files, args.rows_per_file)
        history, small = names[0], names[1:1 + args.files]
        cfg = load_config(env={}, overrides={"lake.root": str(work / "lake")})
        spark = get_spark(cfg.engine)
        took, rows = _follow(spark, cfg, binlogs, history)
        print(f"history: {rows:,} row changes into silver in {took:.2f} s", flush=True)
        lines = ["| file | row changes | after the history s | empty lake s | ratio |",
                 "|---|---:|---:|---:|---:|"]
        after, empty = [], []
        for i, name in enumerate(small):
            a, n = _follow(spark, cfg, binlogs, name)
            fresh = load_config(env={}, overrides={"lake.root": str(work / f"empty{i}")})
            e, _ = _follow(spark, fresh, binlogs, name)
            after.append(a)
            empty.append(e)
            lines.append(f"| {name} | {n:,} | {a:.2f} | {e:.2f} | {a / e:.2f}x |")
        lines.append(f"| median | | {statistics.median(after):.2f} | "
                     f"{statistics.median(empty):.2f} | "
                     f"{statistics.median(a / e for a, e in zip(after, empty)):.2f}x |")
        print("\n".join(lines))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
