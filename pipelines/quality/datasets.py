"""What the rules look at: the window of silver rows, the quarantine, and their helper columns.

Datasets (the names rules use in ``conf/quality.toml``):

- ``silver``: the silver rows of the window (below), with two helper columns:
  ``image_column_count`` (the distinct names in both images and in ``absent_columns``, the
  columns a MINIMAL image left out) and ``schema_column_count`` (the column count of
  the table in the snapshot named by ``schema_version``; NULL when silver named the row from the
  binlog's own metadata, ``schema_version = 'binlog'``).
- ``quarantine``: every row of ``<lake>/silver/quarantine`` (it is the current state: what no
  schema names yet, whatever the window), with ``schema_column_count``: the table's column
  count in its latest snapshot (by snapshot_time), NULL when no snapshot has the table.

Windows (``--window``):

- ``last-run`` (default): the rows the latest silver commit added — the data files it added
  (``delta_ops.files_added``), or version N minus version N-1 as multisets (``exceptAll``)
  when the log cannot say. Running ``binlake quality`` twice gives the same answer.
  ``binlake index`` passes ``since`` = silver's version before its silver run: silver commits
  once per ``silver.commit_mb`` of binlog, and every row the run added is checked.
- ``all``: every silver row.
- ``<N>h`` / ``<N>d``: rows whose ``event_timestamp`` is within the last N hours/days (UTC).

Uniqueness rules look beyond the window: they check the window's rows together with every
older row sharing the key (``context_frame``), so a key appended twice by two runs is caught.
Where the data files' min/max statistics show that no older file reaches into the window's
key range (``alone_in_stats``: the usual run, its binlog file numbered after the history's),
there is no such row, and the window's rows are checked as a first run's are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.window import Window as W

from pipelines.config import Config
from pipelines.errors import ConfigError
from pipelines.lake.delta_ops import files_added
from pipelines.lake.file_stats import alone_in_key_ranges
from pipelines.lake.tables import (SCHEMA_SNAPSHOTS, SILVER_EVENTS, SILVER_QUARANTINE, Lake,
                            read_data_files)
from pipelines.vocabulary import ROW_KEY, hours_of

__all__ = ["Window", "KEY", "REPORT_COLUMNS", "SilverSlice", "silver_slice", "silver_frame",
           "quarantine_frame",
           "with_image_counts", "with_snapshot_counts", "with_latest_snapshot_counts",
           "context_frame", "context_key_counts", "key_bounds", "bound_aggregates",
           "alone_in_bounds", "alone_in_stats", "keyed_rows"]

KEY = list(ROW_KEY)
# Columns recorded for each failing row (the key, then what a person needs to find it).
REPORT_COLUMNS: dict[str, list[str]] = {
    "silver": KEY + ["schema_name", "table_name", "event_type", "seq", "pk_values"],
    "quarantine": KEY + ["schema_name", "table_name", "event_type", "column_count",
                         "schema_column_count", "reason"],
}


@dataclass(frozen=True)
class Window:
    """Which silver rows a quality run checks (see the module docstring)."""

    kind: str = "last-run"  # last-run | all | recent
    hours: int = 0
    # last-run after a known silver version (``binlake index``: the version before its silver
    # run, which may commit several times): every row added since; None: the latest commit.
    since: int | None = None

    @classmethod
    def parse(cls, text: str | None) -> "Window":
        """``last-run``, ``all``, ``24h``, ``7d``; raises :class:`ConfigError` otherwise."""
        if text is None or text.strip() in ("", "last-run"):
            return cls()
        if text.strip() == "all":
            return cls("all")
        hours = hours_of(text)
        if hours is None:
            raise ConfigError(f"--window: expected last-run, all, Nh or Nd (e.g. 24h, 7d), "
                              f"got {text!r}")
        return cls("recent", hours)

    def __str__(self) -> str:
        return f"{self.hours}h" if self.kind == "recent" else self.kind


@dataclass(frozen=True)
class SilverSlice:
    """The silver rows of a window, and the whole table they are part of."""

    rows: DataFrame | None  # None: no silver table yet
    table: DataFrame | None
    version: int | None  # the silver version checked
    window: Window
    whole: bool = False  # the window's rows are the whole table (a first run, or "all")
    # The data files holding exactly the window's rows (``last-run``, where the log says),
    # and the table's location: what the files' statistics can tell (``alone_in_stats``).
    files: tuple[str, ...] | None = None
    path: str | None = None


def silver_slice(spark, cfg: Config, window: Window) -> SilverSlice:
    """Read the silver rows ``window`` selects (without helper columns)."""
    lake = Lake.of(cfg)
    if not lake.exists(spark, SILVER_EVENTS):
        return SilverSlice(None, None, None, window)
    version = lake.version(spark, SILVER_EVENTS)
    # Pinned to the version when known, so rows, table and the recorded version agree.
    table = lake.read(spark, SILVER_EVENTS, version)
    whole = (window.kind == "all" or version is None or version == 0
             or window.kind == "last-run" and window.since is not None and window.since < 0)
    if whole:  # -1: silver did not exist before the run, every row is new
        rows = table
    elif window.kind == "recent":
        rows = table.where(F.col("event_timestamp")
                           >= F.current_timestamp() - F.expr(f"INTERVAL {window.hours} HOURS"))
    else:
        since = window.since if window.since is not None else version - 1
        # where the log is read (a DESCRIBE DETAIL in catalog mode): only if rows were added
        path = lake.location(spark, SILVER_EVENTS) if since < version else None
        rows, files = _rows_added(spark, lake, table, path, since, version)
        return SilverSlice(rows, table, version, window, whole,
                           None if files is None else tuple(files), path)
    return SilverSlice(rows, table, version, window, whole)


def _rows_added(spark, lake: Lake, table: DataFrame, path: str | None, since: int,
                version: int) -> tuple[DataFrame, list[str] | None]:
    """The rows silver's commits after ``since`` up to ``version`` appended: the data files
    those commits added (cost follows the commits, not the table); the whole table minus
    version ``since`` when the log cannot say (cleaned up, unreadable by delta-rs). With the
    files (None: the log could not say)."""
    if since >= version:
        return table.limit(0), []
    files = files_added(path, since, version) if path else None
    if files is None:
        previous = lake.read(spark, SILVER_EVENTS, since)
        return table.exceptAll(previous.select(*table.columns)), None
    if not files:
        return table.limit(0), []
    # The partition column is in the files' directory names (event_date=YYYY-MM-DD), not in
    # the files: read each day's files with it as a literal (engines differ on basePath).
    by_day: dict[str | None, list[str]] = {}
    for f in files:
        m = re.search(r"/event_date=(\d{4}-\d{2}-\d{2})/", f)
        by_day.setdefault(m.group(1) if m else None, []).append(f)
    parts = []
    for day, day_files in sorted(by_day.items(), key=lambda kv: kv[0] or ""):
        df = read_data_files(spark, SILVER_EVENTS, day_files)
        if "event_date" not in df.columns:
            df = df.withColumn("event_date", F.lit(day).cast("date"))
        parts.append(df.select(*table.columns))
    out = parts[0]
    for df in parts[1:]:
        out = out.unionByName(df)
    return out, files


def with_image_counts(df: DataFrame) -> DataFrame:
    """Add ``image_column_count``: the distinct column names of both images and of
    ``absent_columns`` (a MINIMAL image names some columns in one image only); NULL when a row
    has no image at all."""
    names = F.expr(
        "size(array_distinct(concat("
        "coalesce(json_object_keys(row_before), array()), "
        "coalesce(json_object_keys(row_after), array()), "
        "coalesce(from_json(absent_columns, 'array<string>'), array()))))")
    # 1 where the row has an image, else NULL. A product, not ``F.when(has_image, names)``:
    # the embedded engine evaluates a CASE's branch on a copy of the rows it selects, which
    # cost 0.25 s of the rule's 0.8 s over 681k rows (docs/performance.md, Quality).
    has_image = F.nullif(F.col("row_before").isNotNull() | F.col("row_after").isNotNull(),
                         F.lit(False)).cast("int")
    return df.withColumn("image_column_count", names.cast("int") * has_image)


def _column_counts(snapshots: DataFrame) -> DataFrame:
    return (snapshots.where(F.col("column_name").isNotNull())
            .groupBy("snapshot_id", "snapshot_time", "source_id", "schema_name", "table_name")
            .agg(F.countDistinct("column_name").cast("int").alias("schema_column_count")))


def with_snapshot_counts(df: DataFrame, snapshots: DataFrame | None) -> DataFrame:
    """Add ``schema_column_count`` from the snapshot named by each row's ``schema_version``."""
    if snapshots is None:
        return df.withColumn("schema_column_count", F.lit(None).cast("int"))
    counts = (_column_counts(snapshots)
              .select(F.col("snapshot_id").alias("schema_version"), "schema_name", "table_name",
                      "schema_column_count"))
    return df.join(counts, ["schema_version", "schema_name", "table_name"], "left")


def with_latest_snapshot_counts(df: DataFrame, snapshots: DataFrame | None) -> DataFrame:
    """Add ``schema_column_count``: the table's column count in its latest snapshot."""
    if snapshots is None:
        return df.withColumn("schema_column_count", F.lit(None).cast("int"))
    latest = W.partitionBy("source_id", "schema_name", "table_name").orderBy(
        F.col("snapshot_time").desc(), F.col("snapshot_id").desc())
    counts = (_column_counts(snapshots).withColumn("_n", F.row_number().over(latest))
              .where("_n = 1").select("source_id", "schema_name", "table_name",
                                      "schema_column_count"))
    return df.join(counts, ["source_id", "schema_name", "table_name"], "left")


def _snapshots(spark, cfg: Config) -> DataFrame | None:
    lake = Lake.of(cfg)
    return lake.read(spark, SCHEMA_SNAPSHOTS) if lake.exists(spark, SCHEMA_SNAPSHOTS) else None


def silver_frame(spark, cfg: Config, sl: SilverSlice) -> DataFrame | None:
    """The ``silver`` dataset: the window's rows with their helper columns."""
    if sl.rows is None:
        return None
    return with_snapshot_counts(with_image_counts(sl.rows), _snapshots(spark, cfg))


def quarantine_frame(spark, cfg: Config) -> DataFrame | None:
    """The ``quarantine`` dataset (all of it) with ``schema_column_count``; None if no table."""
    lake = Lake.of(cfg)
    if not lake.exists(spark, SILVER_QUARANTINE):
        return None
    return with_latest_snapshot_counts(lake.read(spark, SILVER_QUARANTINE),
                                       _snapshots(spark, cfg))


def bound_aggregates(columns: list[str], prefix: str = "") -> list[Column]:
    """The least and greatest value of each of ``columns`` (``<prefix>lo<i>``,
    ``<prefix>hi<i>``), aggregated over the rows themselves, not over their distinct keys,
    and the rows with every one of them set (``<prefix>keyed``)."""
    return [*[f(c).alias(f"{prefix}{n}{i}") for i, c in enumerate(columns)
              for n, f in (("lo", F.min), ("hi", F.max))],
            F.sum(F.when(_whole_key(columns), 1).otherwise(0)).alias(f"{prefix}keyed")]


def key_bounds(rows: DataFrame, columns: list[str]) -> Row | None:
    """:func:`bound_aggregates` of ``columns`` over ``rows``, in one query."""
    return rows.agg(*bound_aggregates(columns)).first()


def context_frame(sl: SilverSlice, columns: list[str],
                  bounds: Mapping[str, Any] | None = None) -> DataFrame:
    """The window's rows plus every older silver row sharing ``columns`` with one of them
    (``bounds``: :func:`key_bounds` of the window's rows, when measured already)."""
    assert sl.rows is not None and sl.table is not None
    if sl.window.kind == "all":
        return sl.table
    # Every row sharing a key lies within the window's min..max of each key column: as
    # literals, those ranges let the engine skip the older data files by their statistics,
    # so the cost follows the window, not the history.
    if bounds is None:
        bounds = key_bounds(sl.rows, columns)
    keys = sl.rows.select(*columns).distinct()
    if bounds is None or any(bounds[f"lo{i}"] is None for i in range(len(columns))):
        return sl.table.join(keys, columns, "left_semi")  # a NULL key part: nothing to bound
    older = sl.table.where(_within(columns, bounds))
    return older.join(keys, columns, "left_semi")


def alone_in_bounds(sl: SilverSlice, columns: list[str], bounds: Mapping[str, Any]) -> bool:
    """Whether the window's rows with a whole key (``keyed``, :func:`bound_aggregates`) are
    the only rows of the table within their key bounds: then no older row can share a key
    with one of them. The usual case: a run's files are numbered after the history's. One
    count of the table's rows within the bounds (the engine skips older files by their
    statistics); the table holds the window's rows."""
    assert sl.table is not None
    if any(bounds.get(f"lo{i}") is None for i in range(len(columns))):
        return False
    return sl.table.where(_within(columns, bounds)).count() == int(bounds.get("keyed") or 0)


def alone_in_stats(sl: SilverSlice, keys: list[list[str]]) -> list[bool]:
    """For each key (its columns): whether the Delta log's statistics show that no older
    silver row can share a whole key with a window's row (``file_stats``, over the window's
    data files): the usual case, a run's files numbered after the history's. Then the
    window's rows are their own context, checked as a first run's are, and no query
    measures their bounds. False where the statistics cannot tell (no file list: a
    ``recent`` window, a log that could not say)."""
    if sl.whole or sl.files is None or sl.path is None or sl.version is None:
        return [False for _ in keys]
    return alone_in_key_ranges(sl.path, sl.version, sl.files, keys)


def keyed_rows(sl: SilverSlice, columns: list[str], where: Column | None = None) -> DataFrame:
    """The window's rows (those passing ``where``) whose key has every part: where the window
    is :func:`alone_in_bounds`, its context, grouped by key as :func:`context_key_counts`
    groups the context otherwise (without the union with the table's rows and without a
    filter on the bounds: on the embedded engine a filter on a string column made each pass
    three times slower, docs/performance.md, Tried and dropped)."""
    assert sl.rows is not None
    rows = sl.rows if where is None else sl.rows.where(where)
    return rows.where(_whole_key(columns))


def _whole_key(columns: list[str]) -> Column:
    present = F.lit(True)
    for c in columns:
        present = present & F.col(c).isNotNull()
    return present


def context_key_counts(sl: SilverSlice, columns: list[str], considered: Column,
                       where: Column | None = None,
                       bounds: Mapping[str, Any] | None = None) -> DataFrame:
    """Per key of the window's rows (those passing ``where``), the table's rows sharing it
    that ``considered`` selects (``count``): what grouping :func:`context_frame` by key
    counts. One aggregate over the window's keys and the table's rows within their bounds,
    without the distinct keys and the semi join the context itself takes; a key with a
    NULL part is left out, as the semi join leaves it."""
    assert sl.rows is not None and sl.table is not None
    rows = sl.rows if where is None else sl.rows.where(where)
    table = sl.table if where is None else sl.table.where(where)
    if bounds is None:
        bounds = key_bounds(rows, columns)
    present = _whole_key(columns)
    if bounds is None or any(bounds[f"lo{i}"] is None for i in range(len(columns))):
        present = F.lit(False)  # every key has a NULL part: no context
    else:
        table = table.where(_within(columns, bounds))
    window = rows.where(present).select(*columns, F.lit(1).alias("__window"),
                                        F.lit(0).alias("__rows"))
    shared = table.where(considered & present).select(*columns, F.lit(0).alias("__window"),
                                                      F.lit(1).alias("__rows"))
    return (window.unionByName(shared).groupBy(*columns)
            .agg(F.sum("__window").alias("__window"), F.sum("__rows").alias("count"))
            .where((F.col("__window") > 0) & (F.col("count") > 0)).select(*columns, "count"))


def _within(columns: list[str], bounds) -> Column:
    cond = None
    for i, c in enumerate(columns):
        one = F.col(c).between(F.lit(bounds[f"lo{i}"]), F.lit(bounds[f"hi{i}"]))
        cond = one if cond is None else cond & one
    return cond

