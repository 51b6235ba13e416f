"""File layout benchmark: a key's history from silver before and after ``binlake optimize``.

::

    .venv/bin/python bench/optimize_layout.py                      # 5M rows, then grown to 10M
    .venv/bin/python bench/optimize_layout.py --rows 1000000 --grow-to 0   # quick (~1 min)

A silver of ``--rows`` rows (silver's schema, partitioned by ``event_date``) is written by
``bench/silver_gen.py`` as ``--batch-rows`` micro-batches, one Delta commit each, the small
files a stream leaves. On the embedded engine (Sail) the benchmark then runs the query
``binlake query --table S.T --pk K`` needs — ``WHERE schema_name = … AND table_name = … AND
pk_hash = …`` ordered by ``seq`` — for ``--keys`` keys, before and after ``optimize_lake`` (the
code behind ``binlake optimize``: Z-order by (schema_name, table_name, pk_hash), files of
128 MB, row groups of 100k rows). Then the table grows to ``--grow-to`` rows by more
micro-batches and is optimized again (incremental: only the partitions that got new files):
the same figures at that size. Every figure of one size is printed side by side, and each
lookup's row count is checked equal before and after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from silver_gen import pk_hash, silver_batches, table_names  # noqa: E402

from pipelines.config import load_config  # noqa: E402
from pipelines.lake.delta_ops import sql_string  # noqa: E402
from pipelines.ops.optimize import optimize_lake  # noqa: E402
from pipelines.engine.session import get_spark  # noqa: E402

TABLES = 40
KEYS = 200_000


def _lookup(spark, path: str, key: int) -> tuple[int, float]:
    schema, table = table_names(TABLES)[key % TABLES]
    where = (f"schema_name = {sql_string(schema)} AND table_name = {sql_string(table)} "
             f"AND pk_hash = {sql_string(pk_hash(str(key)))}")
    started = time.perf_counter()
    rows = spark.read.format("delta").load(path).where(where).orderBy("seq").collect()
    return len(rows), time.perf_counter() - started


def _measure(spark, path: str, keys: list[int]) -> dict:
    from deltalake import DeltaTable

    _lookup(spark, path, keys[0] + 1)  # warm the engine's plan caches, not this key's data
    runs = [_lookup(spark, path, k) for k in keys]
    seconds = [s for _, s in runs]
    return {"files": len(DeltaTable(path).file_uris()), "counts": [n for n, _ in runs],
            "median": statistics.median(seconds), "max": max(seconds)}


def _write(path: str, batches, rows: int) -> tuple[int, float]:
    from deltalake import write_deltalake

    started, done, commits = time.perf_counter(), 0, 0
    while done < rows:
        table = next(batches)
        write_deltalake(path, table, mode="append", partition_by=["event_date"])
        done += table.num_rows
        commits += 1
    return commits, time.perf_counter() - started


def _report(rows: int, before: dict, after: dict, optimize_s: float) -> None:
    assert before["counts"] == after["counts"], "a key's history changed with the layout"
    print(f"\n== silver of {rows:,} rows: one key's history (median of "
          f"{len(before['counts'])} keys, ~{statistics.mean(after['counts']):.0f} changes each)")
    print(f"{'':28}{'before optimize':>18}{'after optimize':>18}")
    print(f"{'data files':28}{before['files']:>18,}{after['files']:>18,}")
    print(f"{'lookup median (s)':28}{before['median']:>18.3f}{after['median']:>18.3f}")
    print(f"{'lookup slowest (s)':28}{before['max']:>18.3f}{after['max']:>18.3f}")
    print(f"{'speed-up (median)':28}{'':>18}{before['median'] / after['median']:>17.1f}x")
    print(f"optimize took {optimize_s:.1f}s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=5_000_000, help="first size (default 5M)")
    ap.add_argument("--grow-to", type=int, default=10_000_000,
                    help="then grow to this many rows and measure again (0 = no)")
    ap.add_argument("--batch-rows", type=int, default=10_000, help="rows per micro-batch commit")
    ap.add_argument("--days", type=int, default=20, help="event dates spanned at --grow-to")
    ap.add_argument("--keys", type=int, default=7, help="keys looked up per measurement")
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)

    work = args.dir or tempfile.mkdtemp(prefix="binlake-layout-")
    lake = os.path.join(work, "lake")
    cfg = load_config(overrides={"lake.root": lake})
    path = cfg.table_path("silver", "binlog_events")
    total = max(args.rows, args.grow_to)
    batches = silver_batches(total, args.batch_rows, tables=TABLES, keys=KEYS, days=args.days)
    keys = [(7919 * i + 13) % KEYS for i in range(args.keys)]
    spark = get_spark(cfg.engine)
    try:
        done = 0
        for size in (args.rows, args.grow_to):
            if size <= done:
                continue
            commits, seconds = _write(path, batches, size - done)
            done = size
            print(f"wrote {size:,} rows in all: {commits} commits of {args.batch_rows:,} rows "
                  f"in {seconds:.0f}s")
            before = _measure(spark, path, keys)
            started = time.perf_counter()
            (res,) = optimize_lake(spark, cfg, tables=["silver/binlog_events"])
            optimize_s = time.perf_counter() - started
            print(f"optimize: {res.how} via {res.via}, {res.partitions} partition(s), "
                  f"{res.files_before} -> {res.files_after} files")
            after = _measure(spark, path, keys)
            _report(size, before, after, optimize_s)
    finally:
        if args.keep or args.dir:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
