#!/usr/bin/env python3
"""``binlake query`` speed: one key's history from a large silver, side by side in one run.

``python bench/query_history.py [--rows 1000000] [--keys 100000] [--files 64] [--rounds 3]``

A synthetic silver table (silver's exact columns; ``--rows`` changes over 20 tables of
``shop``, ``--keys`` keys per table, ~300-byte JSON images, 10 days of ``event_date``
partitions) is written twice on the embedded Sail engine:

- **appended**: rows in arrival order (what ``binlake silver`` appends);
- **clustered**: the same rows sorted by (schema_name, table_name, pk_hash) into ``--files``
  files per partition, the layout ``binlake optimize`` gives (data skipping on pk_hash).

Three ways to get one key's history are timed on each (best of ``--rounds``, after one warm-up):

1. **json scan** (baseline): what ``binlake sql`` users write today —
   ``get_json_object(row_after, '$.id') = ... OR get_json_object(row_before, ...)``;
2. **pk_values**: the table filter plus ``pk_values = ...`` (no hash);
3. **binlake query**: ``query_silver`` — schema/table and ``pk_hash = sha2(pk, 256)`` first.

Every method must return the same changes (exit 1 otherwise).
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

from pyspark.sql import functions as F  # noqa: E402

from pipelines.config import EngineConfig, load_config  # noqa: E402
from pipelines.history.query import query_silver  # noqa: E402
from pipelines.history.selection import Selection  # noqa: E402
from pipelines.engine.session import get_spark  # noqa: E402
from pipelines.silver.transform import SILVER_COLUMNS  # noqa: E402

TABLES = 20
DAYS = 10


def synthetic_silver(spark, rows: int, keys: int):
    """Silver rows: change i touches key (i // TABLES) % keys of table i % TABLES."""
    df = spark.range(rows).select(
        F.col("id").alias("i"),
        (F.col("id") % TABLES).alias("t"),
        ((F.col("id") / TABLES).cast("bigint") % keys).alias("k"))
    kind = F.when(F.col("i") < TABLES * keys, F.lit("INSERT")).otherwise(
        F.when(F.col("i") % 10 == 9, F.lit("DELETE")).otherwise(F.lit("UPDATE")))
    image = F.concat(F.lit('{"id": '), F.col("k").cast("string"),
                     F.lit(', "customer": "customer number '), F.col("k").cast("string"),
                     F.lit('", "total": "'), (F.col("i") % 100000).cast("string"),
                     F.lit('.25", "status": "paid", "placed_at": "2026-11-23 10:00:00.000", '
                           '"note": "'), F.lit("x" * 150), F.lit('"}'))
    ts = F.timestamp_seconds(F.lit(1_795_000_000) + (F.col("i") * (DAYS * 86400)
                                                      / F.lit(rows)).cast("bigint"))
    return df.select(
        F.lit("default").alias("source_id"), F.lit(1).cast("bigint").alias("server_id"),
        F.lit(None).cast("string").alias("server_uuid"),
        F.lit("mysql-bin.000001").alias("binlog_file"),
        (F.col("i") * 10).alias("start_pos"), (F.col("i") * 10 + 9).alias("end_pos"),
        F.lit(0).alias("row_in_event"), ((F.lit(1) * 4294967296) + F.col("i") * 10).alias("seq"),
        ts.alias("event_timestamp"), F.to_date(ts).alias("event_date"),
        F.concat(F.lit("0-1-"), F.col("i").cast("string")).alias("gtid"),
        F.lit(7).cast("bigint").alias("connection_id"), F.lit("shop").alias("schema_name"),
        F.concat(F.lit("t"), F.col("t").cast("string")).alias("table_name"),
        kind.alias("event_type"), F.col("k").cast("string").alias("pk_values"),
        F.sha2(F.col("k").cast("string"), 256).alias("pk_hash"),
        F.lit("primary_key").alias("pk_kind"),
        F.when(kind == "UPDATE", F.lit('["total"]')).alias("changed_columns"),
        F.when(kind != "INSERT", image).alias("row_before"),
        F.when(kind != "DELETE", image).alias("row_after"),
        F.lit(None).cast("string").alias("absent_columns"),
        F.lit("binlog").alias("schema_version"),
        F.lit(None).cast("string").alias("query_text"),
        F.lit(None).cast("bigint").alias("commit_ts_us"), F.lit("binlog").alias("origin"),
        F.lit(None).cast("string").alias("pk_values_after"),
        F.lit(None).cast("string").alias("pk_hash_after")).select(*SILVER_COLUMNS)


def _best(fn, rounds: int) -> tuple[float, int]:
    fn()  # warm-up (file listing, JIT of the engine's plan cache)
    best, n = float("inf"), 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        n = fn()
        best = min(best, time.perf_counter() - t0)
    return best, n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=5_000)
    ap.add_argument("--files", type=int, default=16, help="files per partition, clustered")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", help="keep the tables here (default: a temporary directory)")
    args = ap.parse_args(argv)
    spark = get_spark(EngineConfig())
    root = args.dir or tempfile.mkdtemp(prefix="bench_query_")
    layouts = {}
    for layout in ("appended", "clustered"):
        cfg = load_config(env={}, overrides={"lake.root": str(Path(root) / layout)})
        path = cfg.table_path("silver", "binlog_events")
        df = synthetic_silver(spark, args.rows, args.keys)
        t0 = time.perf_counter()
        if layout == "clustered":
            df = df.repartition(args.files, "event_date", "pk_hash").sortWithinPartitions(
                "schema_name", "table_name", "pk_hash", "seq")
        df.write.format("delta").mode("overwrite").partitionBy("event_date").save(path)
        print(f"{layout}: {args.rows:,} rows written in {time.perf_counter() - t0:.1f}s "
              f"-> {path}", flush=True)
        layouts[layout] = cfg
    key, table = str(args.keys // 3), "t7"
    results = []
    for layout, cfg in layouts.items():
        silver = spark.read.format("delta").load(cfg.table_path("silver", "binlog_events"))

        def json_scan():
            return silver.where(f"get_json_object(row_after, '$.id') = '{key}' OR "
                                f"get_json_object(row_before, '$.id') = '{key}'").where(
                f"table_name = '{table}'").orderBy("seq").collect().__len__()

        def pk_values():
            return silver.where(f"schema_name = 'shop' AND table_name = '{table}' AND "
                                f"pk_values = '{key}'").orderBy("seq").collect().__len__()

        def binlake_query():
            return len(list(query_silver(spark, cfg, Selection(table=("shop", table), pk=key),
                                         None)))

        row = [layout]
        counts = set()
        for name, fn in (("json scan", json_scan), ("pk_values", pk_values),
                         ("binlake query", binlake_query)):
            seconds, n = _best(fn, args.rounds)
            counts.add(n)
            row.append(seconds)
            print(f"{layout:9s} {name:14s} {seconds:7.3f}s ({n} changes)", flush=True)
        if len(counts) != 1:
            print(f"error: methods disagree on {layout}: {counts}", file=sys.stderr)
            return 1
        results.append(row)
    print(f"\none key's history, {args.rows:,} silver rows, best of {args.rounds} (seconds):")
    print(f"{'layout':10s} {'json scan':>10s} {'pk_values':>10s} {'binlake query':>14s} "
          f"{'speed-up':>9s}")
    for layout, js, pv, bq in results:
        print(f"{layout:10s} {js:10.3f} {pv:10.3f} {bq:14.3f} {js / bq:8.1f}x")
    if not args.dir:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
