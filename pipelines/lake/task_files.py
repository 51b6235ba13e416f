"""Data files written by the engine's tasks as their rows come, committed by delta-rs.

Sail 0.7's Delta writer (the embedded engine) writes one Parquet row group per data file,
takes no Parquet setting and holds a partitioned write's rows until the write ends
(docs/performance.md, "Write-time layout"). Where the embedded engine appends to a lake at a
local path, binlake writes the big tables' data files itself instead:

- :func:`write_files` is a ``mapInArrow`` function: each task writes its rows with pyarrow as
  they come — row groups of ``FileSpec.row_group_rows`` rows, a bloom filter on the lookup
  columns, a file rolled over at about ``FileSpec.target_bytes`` — and yields one small row per
  data file (``ADDED_DDL``: its path, size, partition values and Delta statistics). A task
  holds at most a row group in each of its open files, and keeps at most ``_OPEN_FILES``
  open.
- :func:`commit_files` commits those files to the table in one Delta commit (delta-rs, an
  append with the rows' count as ``numOutputRows``, as an engine's write records it).

Nothing is visible before the commit: a task or run that fails leaves files no version lists
(``binlake vacuum`` removes them after the retention), and the stages' exactly-once
bookkeeping is unchanged. JVM Spark and Databricks keep their own Delta writer, which honours
the Parquet settings.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable, Iterator
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.config import ROW_GROUP_ROWS
from pipelines.errors import EngineError
from pipelines.lake.sql_types import arrow_schema, parse_columns

__all__ = ["ADDED_DDL", "FileSpec", "write_files", "stats_json",
           "commit_files", "partition_dir"]

# One row per data file a task wrote.
ADDED_DDL = ("path string, size bigint, partition_values string, num_records bigint, "
             "stats string")
_ADDED = arrow_schema(parse_columns(ADDED_DDL))
# Rows per Parquet row group: lake.row_group_rows's default (pipelines/config.py)
# Spark's and delta-rs's escaping of partition directory names: these characters become %XX.
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0x20)}


@dataclass(frozen=True)
class FileSpec:
    """How a task writes a table's data files (pickled to the tasks)."""

    root: str  # the table's directory, a local path
    partition_by: tuple[str, ...] = ()
    stats_columns: tuple[str, ...] = ()  # () = every column (Delta's first 32)
    bloom_columns: tuple[str, ...] = ()
    row_group_rows: int = ROW_GROUP_ROWS
    target_bytes: int = 128 * 2**20  # a file rolls over at about this size (0: never)
    compression: str = "snappy"
    schema: pa.Schema | None = None  # the files' columns (the table's less its partitions)


def partition_dir(partition_by: Iterable[str], values: Iterable[object]) -> str:
    """The Hive-style directory of one partition (``event_date=2026-12-01``), escaped as
    Spark and delta-rs escape it; NULL is ``__HIVE_DEFAULT_PARTITION__``."""
    parts = []
    for name, value in zip(partition_by, values):
        text = "__HIVE_DEFAULT_PARTITION__" if value is None else _partition_text(value)
        parts.append(f"{name}=" + "".join(f"%{ord(c):02X}" if c in _ESCAPED else c
                                          for c in text))
    return "/".join(parts)


def _partition_text(value: object) -> str:
    """A partition value as Delta's ``partitionValues`` writes it."""
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _stat_value(value: object, upper: bool) -> object:
    """A min (``upper`` False) or max as Delta statistics write it: timestamps in UTC at
    millisecond precision, rounded outwards so the range still holds every row."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        ms = value.replace(microsecond=value.microsecond // 1000 * 1000)
        if upper and ms != value:
            ms += dt.timedelta(milliseconds=1)
        return ms.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms.microsecond // 1000:03d}Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def stats_json(num_records: int, ranges: dict[str, tuple[object, object, int]]) -> str:
    """Delta's per-file statistics (``numRecords``, ``minValues``, ``maxValues``,
    ``nullCount``) from each column's (min, max, null count); a column of NULLs only has a
    null count, as the engines write it."""
    mins, maxs, nulls = {}, {}, {}
    for name, (lo, hi, n_null) in ranges.items():
        nulls[name] = n_null
        lo, hi = _stat_value(lo, False), _stat_value(hi, True)
        if lo is not None and hi is not None:
            mins[name], maxs[name] = lo, hi
    return json.dumps({"numRecords": num_records, "minValues": mins, "maxValues": maxs,
                       "nullCount": nulls}, separators=(",", ":"))


def _ranged(kind: pa.DataType) -> bool:
    """Whether Delta statistics give a column of ``kind`` a min and max (the engines give
    none to booleans, binary and nested columns: only their null count)."""
    return (pa.types.is_integer(kind) or pa.types.is_floating(kind)
            or pa.types.is_decimal(kind) or pa.types.is_string(kind)
            or pa.types.is_large_string(kind) or pa.types.is_timestamp(kind)
            or pa.types.is_date(kind))


class _Ranges:
    """(min, max, null count) per statistics column of one file: the null counts of nested
    columns counted as the rows come (Parquet counts their elements), the rest read from the
    Parquet footer's row-group statistics when the file is closed (exact: pyarrow cuts no
    value short; a value too long for them leaves the column without a min and max)."""

    def __init__(self, schema: pa.Schema, columns: Iterable[str]) -> None:
        self.schema, self.columns = schema, list(columns)
        self.nested = {c: 0 for c in self.columns if pa.types.is_nested(schema.field(c).type)}

    def add(self, batch: pa.RecordBatch) -> None:
        for name in self.nested:
            self.nested[name] += batch.column(name).null_count

    def stats(self, footer) -> str:
        ranges: dict[str, tuple[object, object, int]] = {}
        leaves = footer.schema  # a top-level primitive column is the leaf of its own name
        index = {leaves.column(i).path: i for i in range(len(leaves))}
        for name in self.columns:
            if name in self.nested:
                ranges[name] = (None, None, self.nested[name])
                continue
            lo = hi = None
            nulls, ranged = 0, _ranged(self.schema.field(name).type)
            for g in range(footer.num_row_groups):
                group = footer.row_group(g)
                st = group.column(index[name]).statistics
                if st is None or not st.has_null_count:
                    ranged, nulls = False, None
                    break
                nulls += st.null_count
                if st.has_min_max:
                    lo = st.min if lo is None or st.min < lo else lo
                    hi = st.max if hi is None or st.max > hi else hi
                elif st.null_count < group.num_rows:  # values without statistics
                    ranged = False
            if nulls is None:
                continue  # no statistics at all: the column is left out
            ranges[name] = (lo, hi, nulls) if ranged else (None, None, nulls)
        return stats_json(footer.num_rows, ranges)


class _File:
    """One data file being written: row groups of ``row_group_rows`` rows."""

    def __init__(self, spec: FileSpec, schema: pa.Schema, directory: str,
                 values: dict[str, str | None], stats_columns: list[str]) -> None:
        import pyarrow.parquet as pq

        self.spec, self.values = spec, values
        name = f"part-{uuid.uuid4()}-c000.{spec.compression}.parquet"
        self.relative = f"{directory}/{name}" if directory else name
        os.makedirs(os.path.join(spec.root, directory), exist_ok=True)
        self.local = os.path.join(spec.root, self.relative)
        blooms = {c: {"ndv": spec.row_group_rows, "fpp": 0.01}
                  for c in spec.bloom_columns if c in schema.names}
        self.writer = pq.ParquetWriter(self.local, schema, compression=spec.compression,
                                       bloom_filter_options=blooms or None)
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.ranges = _Ranges(schema, stats_columns)

    def add(self, batch: pa.RecordBatch) -> None:
        self.ranges.add(batch)
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        while self.pending_rows >= self.spec.row_group_rows:
            self._flush(self.spec.row_group_rows)

    def _flush(self, rows: int) -> None:
        group = pa.Table.from_batches(self.pending)
        self.writer.write_table(group.slice(0, rows), row_group_size=rows)
        rest = group.slice(rows)
        self.pending = rest.to_batches() if rest.num_rows else []
        self.pending_rows = rest.num_rows

    def full(self) -> bool:
        return 0 < self.spec.target_bytes <= os.path.getsize(self.local)

    def abandon(self) -> None:
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001 - the file is removed either way
            pass
        _remove(self.local)

    def close(self) -> dict:
        if self.pending_rows:
            self._flush(self.pending_rows)
        self.writer.close()
        footer = self.writer.writer.metadata
        return {"path": quote(self.relative, safe="/=-_.~"),
                "size": os.path.getsize(self.local),
                "partition_values": json.dumps(self.values, separators=(",", ":")),
                "num_records": footer.num_rows, "stats": self.ranges.stats(footer)}


def write_files(spec: FileSpec):
    """The ``mapInArrow`` function writing a task's rows as data files of ``spec``'s table;
    it yields one ``ADDED_DDL`` row per file. The files are written on a thread of the task's
    own, a batch or two behind the rows it is given (pyarrow encodes without the GIL), so the
    rows' producer (silver's rendering, bronze's decoding) goes on meanwhile."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        sink = _Sink(spec)
        try:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="task-files") as pool:
                behind: deque = deque()
                for batch in batches:
                    if batch.num_rows:
                        behind.append(pool.submit(sink.add, batch))
                    while len(behind) > _BEHIND:
                        behind.popleft().result()
                while behind:
                    behind.popleft().result()
            done = sink.close()
        except BaseException:
            sink.abandon()  # the rows' producer or a write failed: no file is half left
            raise
        if done:
            yield pa.RecordBatch.from_pylist(done, schema=_ADDED)

    return run


_BEHIND = 2  # batches the writing thread may be behind the task
# Files a task keeps open at once, each holding up to a row group: rows of many partitions
# (silver's days of a long binlog file) cost files, not memory.
_OPEN_FILES = 8


class _Sink:
    """The data files one task has open, one per partition value it met."""

    def __init__(self, spec: FileSpec) -> None:
        self.spec = spec
        self.files: dict[tuple, _File] = {}
        self.done: list[dict] = []

    def add(self, batch: pa.RecordBatch) -> None:
        spec = self.spec
        for values, part in _by_partition(batch, spec.partition_by):
            data = part.drop_columns(list(spec.partition_by))
            if spec.schema is not None and data.schema != spec.schema:
                data = data.select(spec.schema.names).cast(spec.schema)
            f = self.files.get(values)
            if f is None and len(self.files) >= _OPEN_FILES:  # the longest open one closes
                oldest = next(iter(self.files))
                self.done.append(self.files.pop(oldest).close())
            if f is None:
                stats = [c for c in (spec.stats_columns or data.schema.names[:32])
                         if c in data.schema.names]
                f = self.files[values] = _File(
                    spec, data.schema, partition_dir(spec.partition_by, values),
                    {k: None if v is None else _partition_text(v)
                     for k, v in zip(spec.partition_by, values)}, stats)
            f.add(data)
            if f.full():
                self.done.append(self.files.pop(values).close())

    def close(self) -> list[dict]:
        self.done.extend(f.close() for f in self.files.values())
        self.files.clear()
        return self.done

    def abandon(self) -> None:
        """Remove every file this task wrote (none is committed yet)."""
        for f in self.files.values():
            f.abandon()
        for a in self.done:
            _remove(os.path.join(self.spec.root, unquote(a["path"])))
        self.files.clear()
        self.done.clear()


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _by_partition(batch: pa.RecordBatch, partition_by: tuple[str, ...]
                  ) -> Iterator[tuple[tuple, pa.RecordBatch]]:
    """``batch`` split by its partition columns' values (one piece when it has one value)."""
    if not partition_by:
        yield (), batch
        return
    ends = [pc.min_max(batch.column(c)) for c in partition_by]
    if all(batch.column(c).null_count == 0 and e["min"] == e["max"]
           for c, e in zip(partition_by, ends)):  # one value (every bronze batch): no grouping
        yield tuple(e["min"].as_py() for e in ends), batch
        return
    keys = pa.Table.from_batches([batch.select(list(partition_by))])
    groups = keys.group_by(list(partition_by)).aggregate([])
    for i in range(groups.num_rows):
        values = tuple(groups.column(c)[i].as_py() for c in partition_by)
        mask = None
        for c, v in zip(partition_by, values):
            m = pc.is_null(batch.column(c)) if v is None else \
                pc.equal(batch.column(c), pa.scalar(v, batch.schema.field(c).type))
            m = m.fill_null(False)
            mask = m if mask is None else pc.and_(mask, m)
        yield values, batch.filter(mask)


def commit_files(path: str, added: list[dict], *, schema: pa.Schema | None = None,
                 partition_by: Iterable[str] = (),
                 configuration: dict[str, str] | None = None) -> int:
    """Commit the data files ``added`` (rows of ``ADDED_DDL`` as dicts) to the Delta table at
    ``path`` in one append; the rows they hold. A table not there yet is created by this
    commit, with its first files (``schema``, ``partition_by``, ``configuration``: its
    declaration), so its version 0 holds them. Raises :class:`EngineError` when delta-rs
    cannot commit."""
    from deltalake import DeltaTable, Schema
    from deltalake.exceptions import TableNotFoundError
    from deltalake.transaction import (AddAction, CommitProperties,
                                       create_table_with_add_actions)

    rows = sum(int(a["num_records"]) for a in added)
    now = int(time.time() * 1000)
    actions = [AddAction(a["path"], int(a["size"]), json.loads(a["partition_values"]), now,
                         True, a["stats"]) for a in added]
    # the metrics an engine's append records (delta_ops.rows_written_since reads them)
    metrics = CommitProperties(custom_metadata={"operationMetrics": {
        "numOutputRows": rows, "numAddedFiles": len(actions),
        "numOutputBytes": sum(a.size for a in actions)}})
    try:
        try:
            table = DeltaTable(path)
        except TableNotFoundError:
            if schema is None:
                raise
            try:
                create_table_with_add_actions(
                    path, Schema.from_arrow(schema), actions, mode="error",
                    partition_by=list(partition_by) or None, configuration=configuration,
                    commit_properties=metrics)
                return rows
            except Exception:  # noqa: BLE001 - created meanwhile: append to it below
                table = DeltaTable(path)
        if actions:
            table.create_write_transaction(
                actions, mode="append", schema=table.schema(),
                partition_by=table.metadata().partition_columns or None,
                commit_properties=metrics)
    except Exception as exc:  # noqa: BLE001 - delta-rs raises several error types
        raise EngineError(f"cannot commit {len(added)} data file(s) to the Delta table at "
                          f"{path}: {exc}") from exc
    return rows
