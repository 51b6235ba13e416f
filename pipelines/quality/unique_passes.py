"""Uniqueness counted in passes the engine can hold.

A UNIQUE rule groups the rows it considers by key and counts the rows whose key is held more
than once (``checks._unique_counts``). The embedded engine holds a grouped aggregate's keys in
memory (Sail 0.7's memory pool is unbounded, so its aggregates never spill): ~100 MiB per
million keys of the default rules, the only part of a quality run that followed the window's
size (docs/performance.md, session 23). There a window of more than :data:`PASS_ROWS` rows is
grouped in several passes:

- over ranges of the key's first integer column (``seq``, ``start_pos``), equally wide from
  its least to its greatest value, and one pass for the rows where it is NULL;
- over buckets of the key's hash when the key has no integer column.

Rows sharing a key share every part of it, so each key's rows fall in one pass and the sums
over the passes are the single pass's counts. Ranges given as literals also let the engine
skip the data files outside them by their statistics.

Ranges are equally wide, not equally full: keys bunched in one range make that pass larger.
A rule that finds duplicates is then validated by great-expectations over its whole dataset,
as before (a failing run, not the common one).

Engines whose aggregates spill to disk (JVM Spark, Databricks) keep one pass: there each
pass would cost a job and a scan, and memory is the engine's to bound.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegralType

from pipelines.delta_ops import sail_engine
from pipelines.quality.rules import Rule

__all__ = ["PASS_ROWS", "pass_rows", "bounds", "passes"]

# Rows one grouped pass of a uniqueness rule may group on an engine that holds them.
PASS_ROWS = 1_000_000


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
           rows_per_pass: int) -> list[Column | None]:
    """The row filters of rule ``i``'s grouped passes, from :func:`bounds`' ``totals``:
    ``[None]`` (one pass over every row) when the rows fit one pass."""
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
        width = max(math.ceil((int(hi) - int(lo) + 1) / count), 1)
        col = F.col(column)
        for start in range(int(lo), int(hi) + 1, width):
            end = start + width
            out.append((col >= F.lit(start)) & (col < F.lit(end)) if end <= int(hi)
                       else col >= F.lit(start))
    if int(totals.get(f"__unull_{i}") or 0):
        out.append(F.col(column).isNull())
    return out or [None]

