"""What a Delta table's per-file min/max statistics say, without reading a data file.

The Delta log records, for every data file an ``add`` action lists, the least and greatest
value of each column with statistics (silver: ``lake.SILVER_EVENTS.stats_columns``). A
file whose range of a column misses a value range holds no row within it: engines skip
such files when a query filters by literals, and delta-rs hands the statistics over
(``DeltaTable.get_add_actions``) for decisions that need no query at all.

A string statistic may be a prefix of the value (writers truncate long strings): a least
value stays at or below every value then, a greatest one may fall below some. So a
greatest string value of :data:`TRUSTED_CHARS` characters or more is taken as unbounded.
"""

from __future__ import annotations

import os
from typing import Any, Sequence
from urllib.parse import unquote

__all__ = ["TRUSTED_CHARS", "alone_in_key_ranges"]

# String statistics shorter than this are whole values (delta-spark and delta-rs truncate
# at 32 characters).
TRUSTED_CHARS = 32


def alone_in_key_ranges(path: str, version: int, files: Sequence[str],
                        keys: Sequence[Sequence[str]]) -> list[bool]:
    """For each key (a list of columns): whether ``files`` (data files of the table at
    ``path``, version ``version``, as ``DeltaTable.file_uris`` names them) are the table's
    only files whose statistics reach into the range of the key's columns that their own
    statistics span. Then no row outside them has every part of the key within that range,
    so none shares a whole key with a row of theirs. False where the statistics cannot tell:
    a file without them for a column, a string greatest value that may be truncated, a table
    delta-rs cannot load, a file the version does not list."""
    if not files:
        return [True for _ in keys]
    try:
        import pyarrow as pa
        from deltalake import DeltaTable

        adds = pa.table(DeltaTable(path, version=version).get_add_actions(flatten=True))
    except Exception:  # noqa: BLE001 - delta-rs raises several kinds
        return [False for _ in keys]
    wanted: dict[str, list[str]] = {}  # by file name (a UUID in it), the full names
    for f in {_relative(f) for f in files}:
        wanted.setdefault(os.path.basename(f), []).append(f)
    inside = []
    for rel in adds.column("path").to_pylist():
        rel = unquote(rel)
        inside.append(any(w == rel or w.endswith("/" + rel)
                          for w in wanted.get(os.path.basename(rel), ())))
    if sum(inside) != sum(map(len, wanted.values())):
        return [False for _ in keys]
    return [_alone(adds, inside, list(columns)) for columns in keys]


def _alone(adds, inside: list[bool], columns: list[str]) -> bool:
    names = set(adds.column_names)
    if any(f"{side}.{c}" not in names for c in columns for side in ("min", "max")):
        return False
    ranges = []
    for c in columns:
        lows = adds.column(f"min.{c}").to_pylist()
        highs = adds.column(f"max.{c}").to_pylist()
        own_lo = [v for v, i in zip(lows, inside) if i]
        own_hi = [v for v, i in zip(highs, inside) if i]
        if any(v is None for v in own_lo + own_hi) or any(map(_maybe_cut, own_hi)):
            return False
        ranges.append((min(own_lo), max(own_hi), lows, highs))
    for n, own in enumerate(inside):
        if not own and all(_reaches(lows[n], highs[n], lo, hi) for lo, hi, lows, highs in ranges):
            return False
    return True


def _relative(uri: str) -> str:
    return unquote(uri[len("file://"):] if uri.startswith("file://") else uri)


def _maybe_cut(value: Any) -> bool:
    return isinstance(value, str) and len(value) >= TRUSTED_CHARS


def _reaches(low: Any, high: Any, lo: Any, hi: Any) -> bool:
    """Whether a file's statistics (``low``..``high``; None: unknown) may hold a value in
    ``lo``..``hi``."""
    if low is not None and low > hi:
        return False
    if high is not None and not _maybe_cut(high) and high < lo:
        return False
    return True
