"""Silver's commits: a run's bronze files cut into slices (one append each), and the one UTC
day a slice's row changes fall on, where there is one.

Slices bound the engine's memory: Sail's sorted partitioned write holds its rows until it
ends, and the anti-join holds its bronze side, so the memory followed the rows of a run.
One commit per slice bounds it by ``silver.commit_mb`` (unset: 64 MB of binlog on such an
engine, one slice per run on JVM Spark and Databricks, whose writers stream:
``delta_ops.commit_bytes``). Exactly once is kept: each slice's
anti-join appends only keys silver does not hold, and a crash between slices leaves the files
to the next run (their progress is written last).

The day: silver is partitioned by ``event_date``, and an engine sorts a partitioned write's
rows by it first (Sail: a sort that holds the commit's rows and copies each of them twice,
~0.5 CPU-s per 681k row changes). A write whose ``event_date`` is one literal needs no sort.
Binlogs are written in time order, so most slices lie within a day; the others, and lakes
whose silver table does not take literals (``Lake.takes_literals``), are written sorted.
docs/performance.md, Silver render.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pipelines.lake.delta_ops import sql_string
from pipelines.lake.tables import BRONZE_EVENTS, Lake
from pipelines.silver.render_batch import DAY_US
from pipelines.vocabulary import CHANGE_TYPES

__all__ = ["Slice", "in_files", "binlog_bytes", "plan_slices", "file_days", "slice_day"]

FileKey = tuple[str, str]  # (source_id, binlog_file)
_EPOCH = dt.date(1970, 1, 1)


@dataclass(frozen=True)
class Slice:
    """One commit's share of a run: a SQL predicate over bronze (and silver) and the files
    it reads from."""

    where: str
    files: tuple[FileKey, ...]


def in_files(files: list[FileKey]) -> str:
    """A SQL predicate naming the rows of ``files``."""
    return " OR ".join(f"(source_id = {sql_string(s)} AND binlog_file = {sql_string(f)})"
                       for s, f in files)


def binlog_bytes(st) -> int:
    """The bytes of binlog a bronze file state covers (0 without one)."""
    return 0 if st is None else max(st.size or 0, st.last_pos or 0)


def plan_slices(files: list[FileKey], states: dict, commit_bytes: int) -> list[Slice]:
    """``files`` in slices of about ``commit_bytes`` of binlog each, in order: a big file by
    ``start_pos`` ranges, small files together (``0``: one slice of all)."""
    if commit_bytes <= 0:
        return [Slice(in_files(files), tuple(files))] if files else []
    slices: list[list[tuple[str, FileKey]]] = [[]]
    size = 0
    for s, f in files:
        n_bytes = binlog_bytes(states.get((s, f)))
        n = max(1, -(-n_bytes // commit_bytes))
        step = -(-n_bytes // n) if n_bytes else 0
        for k in range(n):
            one = f"(source_id = {sql_string(s)} AND binlog_file = {sql_string(f)}"
            if k > 0:
                one += f" AND start_pos >= {k * step}"
            if k < n - 1:
                one += f" AND start_pos < {(k + 1) * step}"
            part = min(step, n_bytes - k * step) if n_bytes else 0
            if slices[-1] and size + part > commit_bytes:
                slices.append([])
                size = 0
            slices[-1].append((one + ")", (s, f)))
            size += part
    return [Slice(" OR ".join(w for w, _ in parts), tuple(dict.fromkeys(k for _, k in parts)))
            for parts in slices]


def file_days(spark, lake: Lake, where: str) -> dict[FileKey, int | None]:
    """Per bronze file of ``where``: the UTC day (days since 1970-01-01) all its row changes
    fall on, or ``None`` (several days, or a row without a time). One aggregate over two
    columns of bronze."""
    from pyspark.sql import functions as F

    micros = F.unix_micros("event_timestamp")
    rows = (lake.read(spark, BRONZE_EVENTS).where(where)
            .where(F.col("event_type").isin(*CHANGE_TYPES))
            .groupBy("source_id", "binlog_file")
            .agg(F.min(micros), F.max(micros), F.count(F.lit(1)) - F.count(micros))
            .collect())
    days: dict[FileKey, int | None] = {}
    for source, name, first, last, untimed in rows:
        one = first is not None and not untimed and first // DAY_US == last // DAY_US
        days[(source, name)] = first // DAY_US if one else None
    return days


def slice_day(sl: Slice, days: dict[FileKey, int | None]) -> dt.date | None:
    """The one day every row change of ``sl`` falls on (``file_days``; a file without row
    changes is not in it and adds none), or ``None``."""
    found = {days[k] for k in sl.files if k in days}
    if len(found) != 1 or None in found:
        return None
    return _EPOCH + dt.timedelta(days=found.pop())
