"""The ``key-history`` stage of ``bench/pipeline.py``: what one key's history reads from a
silver just written, by binlake's tasks and by the engine's Delta writer, side by side.

Silver is rendered twice from the bronze the bench left (unmeasured): with ``lake.writer =
"auto"`` (binlake's tasks: row groups of ``lake.row_group_rows`` and a ``pk_hash`` bloom
filter, ``pipelines/lake/task_files.py``) and with ``"engine"`` (Sail's writer: one row group per
data file). Then, on each, the histories of ``KEYS`` keys of the table with the most rows and
of one key silver does not hold, as ``binlake query`` asks for them (``schema_name``,
``table_name``, ``pk_hash``): the row groups the scan read after the Delta statistics, the
Parquet statistics and the bloom filters (``EXPLAIN ANALYZE``), of how many the table has, the
bytes it read, and the median seconds of the query (after one warm-up).
"""

from __future__ import annotations

import re
import shutil
import statistics
import time
from pathlib import Path

KEYS = 5
_GROUPS = re.compile(r"row_groups_pruned_bloom_filter=(\d+) total → (\d+) matched")
_STATS = re.compile(r"row_groups_pruned_statistics=(\d+) total → (\d+) matched")
_BYTES = re.compile(r"bytes_scanned=([\d.]+) ?([KMG]?)")
_UNIT = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def _layout(path: Path) -> tuple[int, int]:
    """(data files, row groups) of the Delta table's latest version."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    adds = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).column("path")
    files = adds.to_pylist()
    return len(files), sum(pq.ParquetFile(str(path / p)).metadata.num_row_groups
                           for p in files)


def _lookup(spark, silver: Path, schema: str, table: str, pk_hash: str) -> tuple[int, int, float]:
    """(row groups read, bytes read, seconds) of one key's history."""
    sql = (f"SELECT * FROM delta.`{silver}` WHERE schema_name = '{schema}' AND "
           f"table_name = '{table}' AND pk_hash = '{pk_hash}' ORDER BY seq")
    plan = spark.sql("EXPLAIN ANALYZE " + sql).collect()[0][0]
    bloom = [int(m.group(2)) for m in _GROUPS.finditer(plan)]
    stats = [int(m.group(2)) for m in _STATS.finditer(plan)]
    read = sum(bloom) if bloom else sum(stats)
    scanned = sum(float(m.group(1)) * _UNIT[m.group(2)] for m in _BYTES.finditer(plan))
    spark.sql(sql).collect()  # warm
    times = []
    for _ in range(3):
        t = time.perf_counter()
        spark.sql(sql).collect()
        times.append(time.perf_counter() - t)
    return read, int(scanned), statistics.median(times)


def key_history(spark, cfg_for, lake: Path, work: Path, say) -> str:
    """The stage (see the module docstring) over the bronze of ``lake``; a Markdown table."""
    from pipelines.silver.job import run_silver

    lines = ["| silver written by | data files | row groups | key history: row groups read "
             "(median of keys; an absent key) | bytes read (median) | seconds (median) |",
             "|---|---:|---:|---|---:|---:|"]
    keys = None
    for writer in ("auto", "engine"):
        where = work / f"key-history-{writer}"
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        shutil.copytree(lake / "bronze", where / "bronze")
        run_silver(spark, cfg_for(where, **{"lake.writer": writer}))
        silver = where / "silver" / "binlog_events"
        if keys is None:
            events = spark.read.format("delta").load(str(silver))
            top = events.groupBy("schema_name", "table_name").count() \
                .orderBy("count", ascending=False).first()
            hashes = [r[0] for r in events.where(
                f"schema_name = '{top[0]}' AND table_name = '{top[1]}'")
                .select("pk_hash").distinct().orderBy("pk_hash").collect()]
            step = max(len(hashes) // KEYS, 1)
            present = hashes[::step][:KEYS]
            absent = present[0][:-1] + ("0" if present[0][-1] != "0" else "1")
            keys = (top[0], top[1], present, absent)
        schema, table, present, absent = keys
        got = [_lookup(spark, silver, schema, table, h) for h in present]
        none = _lookup(spark, silver, schema, table, absent)
        files, groups = _layout(silver)
        label = "binlake's tasks" if writer == "auto" else "the engine's writer"
        line = (f"| {label} | {files} | {groups} | "
                f"{statistics.median(g[0] for g in got):g}; {none[0]} | "
                f"{statistics.median(g[1] for g in got) / 2**20:,.1f} MiB | "
                f"{statistics.median(g[2] for g in got):.3f} |")
        say(f"  key history ({schema}.{table}, {len(present)} keys): {line}")
        lines.append(line)
    return "\n".join(lines)
