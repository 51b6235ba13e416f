#!/usr/bin/env python3
"""``binlake mirror`` speed: a full build, then one incremental run on top of the large
history it made, side by side with a full rebuild of the same rows (the baseline an
incremental run must beat: it must not re-read the whole history).

``python bench/mirror.py [--keys 50000] [--rounds 4] [--increment 2000]``

A synthetic silver table on the embedded Sail engine, written with Spark SQL: table
``bench.orders`` (BIGINT UNSIGNED key, VARCHAR, DECIMAL(10,2), ENUM, DATETIME(3), a JSON
column) described by a stored schema snapshot; ``--keys`` INSERTs then ``--rounds - 1``
UPDATE rounds of every key (rows = keys × rounds). Then ``--increment`` more UPDATEs are
appended to silver and mirrored incrementally; finally the whole silver is mirrored again
into a fresh lake (the full-rebuild baseline). Every lake is checked: the current table holds
one row per key with the last round's total, the history rows = row changes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pipelines.config import EngineConfig, load_config  # noqa: E402
from pipelines.mirror.job import mirror_path, run_mirror  # noqa: E402
from pipelines.engine.session import get_spark  # noqa: E402
from pipelines.source.model import ColumnSchema, Snapshot, TableSchema  # noqa: E402
from pipelines.silver.snapshot_store import save_snapshot  # noqa: E402

_COLUMNS = [("id", "bigint", "bigint(20) unsigned", 1), ("customer", "varchar", "varchar(60)", None),
            ("total", "decimal", "decimal(10,2)", None),
            ("status", "enum", "enum('new','paid','shipped')", None),
            ("placed_at", "datetime", "datetime(3)", None), ("doc", "json", "json", None)]


def _snapshot() -> Snapshot:
    cols = [ColumnSchema(name, i + 1, dtype, ctype, charset=None if dtype != "varchar" else "utf8mb4",
                         pk_ordinal=pk, is_json=dtype == "json")
            for i, (name, dtype, ctype, pk) in enumerate(_COLUMNS)]
    return Snapshot("bench-snap", dt.datetime(2024, 1, 1), "default", 1, None, "bench", None,
                    None, None, {("bench", "orders"): TableSchema("bench", "orders", cols)})


def _image(round_expr: str) -> str:
    return ("to_json(named_struct('id', k, 'customer', concat('customer ', k), "
            f"'total', format_string('%d.%02d', k + {round_expr}, {round_expr} % 100), "
            f"'status', CASE WHEN {round_expr} = 0 THEN 'new' ELSE 'paid' END, "
            "'placed_at', '2024-01-02 03:04:05.678', "
            f"'doc', named_struct('round', {round_expr}, 'tags', array('a', 'b'))))")


def write_silver(spark, path: str, keys: int, first_round: int, rounds: int, limit: int | None):
    """Append rounds [first_round, first_round + rounds) of changes to every key."""
    n = keys * rounds
    df = spark.range(n).selectExpr(
        f"id % {keys} AS k", f"CAST(id DIV {keys} + {first_round} AS INT) AS r", "id")
    if limit is not None:
        df = df.limit(limit)
    seq0 = (first_round * keys) + (1 << 32)
    df.selectExpr(
        "'default' AS source_id", "CAST(1 AS BIGINT) AS server_id",
        "CAST(NULL AS STRING) AS server_uuid", "'bench-bin.000001' AS binlog_file",
        f"CAST(id + {seq0} AS BIGINT) AS start_pos", f"CAST(id + {seq0} + 1 AS BIGINT) AS end_pos",
        "0 AS row_in_event", f"CAST(id + {seq0} AS BIGINT) AS seq",
        "TIMESTAMP '2024-01-02 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, r) AS event_timestamp",
        "DATE '2024-01-02' AS event_date", "concat('0-1-', id) AS gtid",
        "CAST(7 AS BIGINT) AS connection_id", "'bench' AS schema_name", "'orders' AS table_name",
        "CASE WHEN r = 0 THEN 'INSERT' ELSE 'UPDATE' END AS event_type",
        "CAST(k AS STRING) AS pk_values", "sha2(CAST(k AS STRING), 256) AS pk_hash",
        "'primary_key' AS pk_kind",
        "CASE WHEN r = 0 THEN NULL ELSE '[\"total\", \"status\", \"doc\"]' END AS changed_columns",
        f"CASE WHEN r = 0 THEN NULL ELSE {_image('(r - 1)')} END AS row_before",
        f"{_image('r')} AS row_after", "CAST(NULL AS STRING) AS absent_columns",
        "'bench-snap' AS schema_version",
    ).write.format("delta").mode("append").partitionBy("event_date").save(path)


def _files(path: str) -> dict[str, int]:
    """The table's data files and their row counts (delta-rs, from the log)."""
    from deltalake import DeltaTable

    import pyarrow as pa

    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pydict()
    return dict(zip(actions["path"], actions["num_records"]))


def _check(spark, cfg, keys: int, changes: int, last_round: int) -> None:
    cur = spark.read.format("delta").load(mirror_path(cfg, "current", "bench", "orders"))
    hist = spark.read.format("delta").load(mirror_path(cfg, "history", "bench", "orders"))
    n_cur, n_hist = cur.count(), hist.count()
    wrong = cur.where(f"CAST(total AS BIGINT) != CAST(id AS BIGINT) + {last_round}").count()
    if n_cur != keys or n_hist != changes or wrong:
        sys.exit(f"check failed: current {n_cur} rows (want {keys}), history {n_hist} "
                 f"(want {changes}), {wrong} current rows with a stale total")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=50000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--increment", type=int, default=2000)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    spark = get_spark(EngineConfig())
    tmp = Path(tempfile.mkdtemp(prefix="binlake-bench-mirror-"))
    try:
        cfg = load_config(env={}, overrides={"lake.root": str(tmp / "lake")})
        silver = cfg.table_path("silver", "binlog_events")
        save_snapshot(spark, cfg, _snapshot())
        full_rows = args.keys * args.rounds
        write_silver(spark, silver, args.keys, 0, args.rounds, None)

        t0 = time.monotonic()
        run_mirror(spark, cfg)
        full_s = time.monotonic() - t0
        _check(spark, cfg, args.keys, full_rows, args.rounds - 1)

        write_silver(spark, silver, args.keys, args.rounds, 1, args.increment)
        hist_path = mirror_path(cfg, "history", "bench", "orders")
        before = _files(hist_path)
        t0 = time.monotonic()
        inc = run_mirror(spark, cfg)
        inc_s = time.monotonic() - t0
        after = _files(hist_path)
        rewritten = {f: n for f, n in before.items() if f not in after}
        if inc.changes != args.increment:
            sys.exit(f"incremental run mirrored {inc.changes} changes, want {args.increment}")

        rebuild = load_config(env={}, overrides={"lake.root": str(tmp / "rebuild")})
        shutil.copytree(Path(cfg.lake_root) / "silver", Path(rebuild.lake_root) / "silver")
        t0 = time.monotonic()
        run_mirror(spark, rebuild)
        rebuild_s = time.monotonic() - t0
        total = full_rows + args.increment
        hist = spark.read.format("delta").load(mirror_path(rebuild, "history", "bench", "orders"))
        if hist.count() != total:
            sys.exit("rebuild check failed")

        print(f"\nbench.orders: {args.keys:,} keys, history of {full_rows:,} row changes, "
              f"then {args.increment:,} more")
        print(f"{'run':<34}{'row changes':>12}{'seconds':>10}{'rows/s':>12}")
        for name, rows, secs in (("full build", full_rows, full_s),
                                 ("incremental run on that history", args.increment, inc_s),
                                 ("baseline: full rebuild of all", total, rebuild_s)):
            print(f"{name:<34}{rows:>12,}{secs:>10.2f}{rows / secs:>12,.0f}")
        print(f"incremental run: {rebuild_s / inc_s:.1f}x faster than rebuilding "
              f"({inc_s:.2f}s vs {rebuild_s:.2f}s); it rewrote {len(rewritten)} of "
              f"{len(before)} history files, {sum(rewritten.values()):,} of "
              f"{sum(before.values()):,} history rows (the open versions' partition)")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
