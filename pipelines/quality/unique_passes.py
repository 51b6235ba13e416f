"""Uniqueness counted in passes the engine can hold.

A UNIQUE rule groups the rows it considers by key and counts the rows whose key is held more
than once (``checks._unique_counts``). The embedded engine holds a grouped aggregate's keys in
memory (Sail 0.7's memory pool is unbounded, so its aggregates never spill): ~100 MiB per
million keys of the default rules, the only part of a quality run that followed the window's
size (docs/performance.md, Quality). There a window of more than :data:`PASS_ROWS` rows is
grouped in several passes:

- over ranges of the key's first integer column (``seq``, ``start_pos``), and one pass for the
  rows where it is NULL. The ranges are sized by a histogram of that column (one grouped
  query of ``BUCKETS_PER_PASS`` equally wide buckets per pass): consecutive buckets are
  joined while they hold at most ``PASS_ROWS`` rows. Equally wide ranges were not equally
  full: ``seq`` is ``file_number * 2^32 + position``, so a window of several binlog files
  bunches each file's rows in one range, and that pass held a whole file's rows (2.7 million
  for a 1 GB binlog, docs/performance.md, Quality);
- over buckets of the key's hash when the key has no integer column.

Rows sharing a key share every part of it, so each key's rows fall in one pass and the sums
over the passes are the single pass's counts. Ranges given as literals also let the engine
skip the data files outside them by their statistics.

A bucket holding more than ``PASS_ROWS`` rows is a pass of its own (one value held by
millions of rows cannot be split by value). A rule that finds duplicates is validated by
great-expectations over its whole dataset, as before (a failing run, not the common one).

Engines whose aggregates spill to disk (JVM Spark, Databricks) keep one pass: there each
pass would cost a job and a scan, and memory is the engine's to bound.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegralType

from pipelines.lake.delta_ops import sail_engine
from pipelines.quality.rules import Rule

__all__ = ["PASS_ROWS", "BUCKETS_PER_PASS", "pass_rows", "bounds", "passes", "pack"]

# Rows one grouped pass of a uniqueness rule may group on an engine that holds them.
PASS_ROWS = 1_000_000
# Histogram buckets per pass: finer buckets fill each pass closer to PASS_ROWS.
BUCKETS_PER_PASS = 8


def pass_rows(df: DataFrame) -> int:
    """:data:`PASS_ROWS` where ``df``'s engine holds its aggregates in memory, else 0 (one
    pass, whatever the window)."""
    return PASS_ROWS if sail_engine(df.sparkSession) else 0


def _range_column(df: DataFrame, rule: Rule) -> str | None:
    types = {f.name: f.dataType for f in df.schema.fields}
    return next((c for c in rule.columns if isinstance(types.get(c), IntegralType)), None)


def bounds(df: DataFrame, rule: Rule, considered: Column, i: int) -> list[Column]:
    """Aggregates over ``df`` that :func:`passes` reads back for rule ``i``: the rows it
    considers and, with an integer key column, that column's least and greatest value and
    its NULLs among them."""
    aggs = [F.sum(F.when(considered, 1).otherwise(0)).alias(f"__urows_{i}")]
    column = _range_column(df, rule)
    if column is not None:
        c = F.when(considered, F.col(column))
        aggs += [F.min(c).alias(f"__ulo_{i}"), F.max(c).alias(f"__uhi_{i}"),
                 F.sum(F.when(considered & F.col(column).isNull(), 1).otherwise(0))
                 .alias(f"__unull_{i}")]
    return aggs


def passes(df: DataFrame, rule: Rule, totals: Mapping[str, Any], i: int,
           rows_per_pass: int, considered: Column) -> list[Column | None]:
    """The row filters of rule ``i``'s grouped passes, from :func:`bounds`' ``totals``:
    ``[None]`` (one pass over every row) when the rows fit one pass. Ranges of an integer
    column are sized by its histogram over the rows ``considered`` selects (one query)."""
    rows = int(totals.get(f"__urows_{i}") or 0)
    if rows_per_pass <= 0 or rows <= rows_per_pass:
        return [None]
    count = math.ceil(rows / rows_per_pass)
    column = _range_column(df, rule)
    if column is None:
        key_hash = F.pmod(F.xxhash64(*[F.col(c) for c in rule.columns]), F.lit(count))
        return [key_hash == F.lit(k) for k in range(count)]
    out: list[Column | None] = []
    lo, hi = totals.get(f"__ulo_{i}"), totals.get(f"__uhi_{i}")
    if lo is not None:
        lo, hi = int(lo), int(hi)
        width = max(math.ceil((hi - lo + 1) / (count * BUCKETS_PER_PASS)), 1)
        col = F.col(column)
        bucket = F.floor((col - F.lit(lo)) / F.lit(width)).alias("b")
        sizes = {int(r["b"]): int(r["count"]) for r in
                 df.where(considered & col.isNotNull()).groupBy(bucket).count().collect()}
        for start, end in pack(sizes, lo, width, rows_per_pass):
            out.append((col >= F.lit(start)) & (col < F.lit(end)) if end is not None
                       else col >= F.lit(start))
    if int(totals.get(f"__unull_{i}") or 0):
        out.append(F.col(column).isNull())
    return out or [None]


def pack(sizes: Mapping[int, int], lo: int, width: int, rows_per_pass: int
         ) -> list[tuple[int, int | None]]:
    """Pure: a histogram (bucket ``b`` = values ``lo + b * width`` up to the next bucket →
    rows) → consecutive ``[start, end)`` ranges from ``lo`` of at most ``rows_per_pass`` rows
    each (a fuller bucket alone), the last one open (``end`` None)."""
    starts, filled = [lo], 0
    for b in sorted(sizes):
        if filled and filled + sizes[b] > rows_per_pass:
            starts.append(lo + b * width)
            filled = 0
        filled += sizes[b]
    return list(zip(starts, [*starts[1:], None]))
