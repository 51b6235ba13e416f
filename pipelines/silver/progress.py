"""``silver/progress``: the bronze files silver has seen, and their QUERY events.

A row per file and silver run that took the file: the file's bronze state time
(``bronze_updated_at``: a file bronze indexes again gets a new one), the run's time
(``updated_at``) and the file's QUERY events (``ddl``, JSON ``[start_pos, schema, query]``),
so that a run reads bronze's QUERY events only for files new or changed since, and what its
derived row changes were derived with (``derived_with``: ``silver/derived.derivation_digest``
behind the ``schema_snapshots`` version then).

A run appends the rows of the files it took: on the embedded engine an append cost ~8 ms
where rewriting the table whole cost ~25 ms after a history (docs/performance.md). The reader keeps each file's latest row; the writer keeps the table in a few data files
(``few_files``). Only silver runs write it, under the ``silver`` lease.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Iterable

from pipelines.lake.few_files import keep_few_files
from pipelines.lake.tables import SILVER_PROGRESS, Lake

__all__ = ["load_progress", "save_progress"]

_DDL = SILVER_PROGRESS.ddl()


def load_progress(spark, lake: Lake) -> dict[tuple[str, str], dict[str, Any]]:
    """Each file's latest row, keyed by (source_id, binlog_file); empty without a table."""
    if not lake.exists(spark, SILVER_PROGRESS):
        return {}
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in lake.read(spark, SILVER_PROGRESS).collect():
        row = r.asDict()
        key = (row["source_id"], row["binlog_file"])
        old = out.get(key)
        if old is None or (row["updated_at"] or dt.datetime.min) >= (
                old["updated_at"] or dt.datetime.min):
            out[key] = row
    return out


def save_progress(spark, lake: Lake,
                  files: Iterable[tuple[str, str, dt.datetime | None, list, str | None]]
                  ) -> None:
    """Record that this run took ``files`` ((source_id, binlog_file, bronze_updated_at,
    QUERY events, derived_with) each). The caller holds the ``silver`` lease."""
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    rows = [(s, f, at, now, json.dumps(ddl), with_) for s, f, at, ddl, with_ in files]
    if rows:
        lake.append(spark.createDataFrame(rows, _DDL), SILVER_PROGRESS)
        keep_few_files(spark, lake, SILVER_PROGRESS)
