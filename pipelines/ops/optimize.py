"""Compact the lake's small files and cluster silver so one key's history reads few files.

A stream commits a micro-batch every second or so and every small binlog adds a file per
partition: after a while a partition holds hundreds of small files and a query opens each.
:func:`optimize_lake` rewrites, per lake table, the partitions that changed since the table's
last OPTIMIZE into files of about ``target_mb`` with row groups of ``row_group_rows`` rows:

- silver (``silver/binlog_events``) is Z-ordered by ``(schema_name, table_name, pk_hash)`` and
  written with a bloom filter on ``pk_hash``, so a key lookup (``WHERE schema_name = … AND
  table_name = … AND pk_hash = …``) reads only the row groups that can hold the key — the
  engine skips the rest from the Delta log's file statistics, the Parquet row-group statistics
  and the bloom filters;
- every other table is compacted (bin-packing, no reordering);
- ``bronze/files`` first loses its superseded state rows (:func:`pipelines.bronze.files.
  compact_states`, the one table where rows change: each file keeps its latest row).

Only data files are rewritten, in one ``OPTIMIZE`` commit per table with ``dataChange=false``:
rows, keys and ``seq`` are identical before and after, earlier versions stay readable
(``VERSION AS OF``) until VACUUM removes the replaced files, and the stages' exactly-once
bookkeeping (bronze partitions, silver's anti-join on the bronze key, gold's silver
watermark) reads rows, not files. A second run finds no partition changed and commits nothing.

Engines: delta-spark and Databricks run Delta's own ``OPTIMIZE … ZORDER BY`` SQL; Sail 0.7 has
no OPTIMIZE, so there delta-rs (``DeltaTable.optimize``) rewrites the same files
(:func:`engine_optimizes`). Raises :class:`EngineError` when neither can.
"""

from __future__ import annotations

import argparse
import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Iterable

from pipelines.bronze.files import compact_states
from pipelines.command import csv_list
from pipelines.config import Config, LakeConfig
from pipelines.lake.delta_ops import capabilities, current_version, files_added, sql_string
from pipelines.errors import ConfigError, EngineError
from pipelines.lake.tables import BRONZE_FILES, Lake, lake_tables
from pipelines.lake.lease import holds_lease, lake_lease
from pipelines.vocabulary import delta_ident, quote_ident

__all__ = ["CLUSTER_BY", "TableOptimized", "optimize_lake", "optimize_table",
           "engine_optimizes", "changed_partitions", "add_parser", "cmd_optimize"]

log = logging.getLogger(__name__)

# The lake tables (pipelines/lake/tables.py: every registered one) clustered, and by which columns.
CLUSTER_BY: dict[tuple[str, str], tuple[str, ...]] = {
    ("silver", "binlog_events"): ("schema_name", "table_name", "pk_hash"),
}
TARGET_MB = 128
# Rows per Parquet row group, the unit that statistics and bloom filters skip. Smaller groups
# skip finer; 20k rows of silver are about 3 MB (docs/layout.md has the measurements).
ROW_GROUP_ROWS = LakeConfig.row_group_rows  # as binlake's own writes (lake.row_group_rows)


@dataclass
class TableOptimized:
    """What :func:`optimize_table` did to one table."""

    table: str
    path: str
    how: str  # "z-order" | "compact" | "unchanged" (nothing to do: no commit)
    via: str  # "delta-rs" | "sql" | "-"
    files_before: int = 0
    files_after: int = 0
    partitions: int = 0  # partitions rewritten
    version_before: int | None = None
    version_after: int | None = None
    seconds: float = 0.0
    rows_before: int | None = None  # bronze/files: state rows before/after its compaction
    rows_after: int | None = None


def engine_optimizes(spark) -> bool:
    """True when the engine runs Delta's ``OPTIMIZE … ZORDER BY`` SQL itself (delta-spark,
    Databricks); Sail has none and delta-rs does the work there. The engine is asked
    (:func:`pipelines.lake.delta_ops.capabilities`), not assumed from how the session was made."""
    return capabilities(spark).optimize


def _optimize_versions(path: str) -> int | None:
    """The version of the table's newest OPTIMIZE commit (``None``: never optimized)."""
    from deltalake import DeltaTable

    for commit in DeltaTable(path).history():
        if str(commit.get("operation", "")).upper() == "OPTIMIZE":
            return commit.get("version")
    return None


def _add_actions(dt) -> list[dict]:
    import pyarrow as pa

    return pa.table(dt.get_add_actions(flatten=True)).to_pylist()


def changed_partitions(path: str) -> tuple[list[dict[str, str]] | None, int]:
    """The partitions (``{column: value}``) holding files added since the last OPTIMIZE, and
    the table's file count. ``None`` = every partition (never optimized, history gone, or an
    unpartitioned table with new files); ``[]`` = nothing changed."""
    from deltalake import DeltaTable

    dt = DeltaTable(path)
    files = _add_actions(dt)
    version = dt.version()
    last = _optimize_versions(path)
    if last is None:
        return None, len(files)
    added = files_added(path, last, version)
    if added is None:
        return None, len(files)
    if not added:
        return [], len(files)
    columns = dt.metadata().partition_columns
    if not columns:
        return None, len(files)
    added_names = {a.rsplit("/", 1)[-1] for a in added}
    parts = {tuple((c, f.get(f"partition.{c}")) for c in columns)
             for f in files if f["path"].rsplit("/", 1)[-1] in added_names}
    return [dict(p) for p in sorted(parts, key=str)], len(files)


def _partition_filters(parts: list[dict[str, str]] | None):
    """delta-rs partition filters (a conjunction) covering ``parts``: ``col in (…)`` per
    column. For tables partitioned by more than one column that is a superset (the product of
    the values), harmless: compaction leaves a partition of one file as it is."""
    if not parts:
        return None
    columns = list(parts[0])
    return [(c, "in", sorted({str(p[c]) for p in parts})) for c in columns]


def _sql_where(parts: list[dict[str, str]] | None) -> str:
    if not parts:
        return ""
    terms = [" AND ".join(f"{quote_ident(c)} = {sql_string(str(v))}" for c, v in p.items()) for p in parts]
    return " WHERE " + " OR ".join(f"({t})" for t in terms)


def _via_delta_rs(path: str, cluster: tuple[str, ...], parts, target_mb: int,
                  row_group_rows: int, bloom: tuple[str, ...] = ()) -> None:
    from deltalake import BloomFilterProperties, ColumnProperties, DeltaTable, WriterProperties

    columns = {c: ColumnProperties(bloom_filter_properties=BloomFilterProperties(
        True, fpp=0.01, ndv=row_group_rows)) for c in bloom}
    props = WriterProperties(max_row_group_size=row_group_rows, compression="ZSTD",
                             column_properties=columns or None)
    opt = DeltaTable(path).optimize
    kw = dict(partition_filters=_partition_filters(parts), target_size=target_mb << 20,
              writer_properties=props)
    if cluster:
        opt.z_order(list(cluster), **kw)
    else:
        opt.compact(**kw)


def _via_sql(spark, ident: str, cluster: tuple[str, ...], parts, target_mb: int) -> None:
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(target_mb << 20))
    zorder = f" ZORDER BY ({', '.join(f'`{c}`' for c in cluster)})" if cluster else ""
    spark.sql(f"OPTIMIZE {ident}{_sql_where(parts)}{zorder}").collect()


def _file_count(path: str) -> int:
    from deltalake import DeltaTable

    return len(DeltaTable(path).file_uris())


def optimize_table(spark, path: str, *, table: str = "", ident: str = "",
                   cluster: Iterable[str] = (),
                   bloom: Iterable[str] = (), sql: bool = False, target_mb: int = TARGET_MB,
                   row_group_rows: int = ROW_GROUP_ROWS) -> TableOptimized:
    """Compact (or Z-order by ``cluster``) the partitions of the Delta table at ``path`` that
    changed since its last OPTIMIZE; ``sql`` = through the engine's OPTIMIZE statement on
    ``ident`` (default ``delta.`path```; a catalog table's name in catalog mode), which
    sizes row groups and bloom filters by its own settings), else delta-rs with row groups of
    ``row_group_rows`` and bloom filters on the ``bloom`` columns."""
    started = time.monotonic()
    cluster = tuple(cluster)
    res = TableOptimized(table=table or path, path=path, how="unchanged", via="-",
                         version_before=current_version(path))
    parts, res.files_before = changed_partitions(path)
    res.files_after = res.files_before
    res.version_after = res.version_before
    if parts == [] or res.files_before == 0:
        res.seconds = time.monotonic() - started
        return res
    try:
        if sql:
            _via_sql(spark, ident or delta_ident(path), cluster, parts,
                     target_mb)
        else:
            _via_delta_rs(path, cluster, parts, target_mb, row_group_rows, tuple(bloom))
    except Exception as exc:  # noqa: BLE001 - delta-rs and the engines raise many kinds
        raise EngineError(f"optimize {res.table} ({path}): {exc}") from exc
    res.version_after = current_version(path)
    res.files_after = _file_count(path)
    if res.version_after != res.version_before:
        res.how = "z-order" if cluster else "compact"
        res.via = "sql" if sql else "delta-rs"
        res.partitions = len(parts) if parts is not None else _partition_count(path)
    res.seconds = time.monotonic() - started
    return res


def _partition_count(path: str) -> int:
    from deltalake import DeltaTable

    dt = DeltaTable(path)
    columns = dt.metadata().partition_columns
    if not columns:
        return 1
    return len({tuple(f.get(f"partition.{c}") for c in columns) for f in _add_actions(dt)})


@holds_lease("bronze")
@holds_lease("silver")
def optimize_lake(spark, cfg: Config, *, tables: Iterable[str] | None = None,
                  target_mb: int = TARGET_MB,
                  row_group_rows: int = ROW_GROUP_ROWS) -> list[TableOptimized]:
    """Optimize every existing lake table (or only ``tables``, given as ``layer/name``),
    holding the bronze and silver leases, and the quality lease for the quality tables (their
    writers wait; docs/concurrency.md)."""
    if target_mb < 1:
        raise ConfigError("--target-mb: must be at least 1")
    if row_group_rows < 1000:
        raise ConfigError("--row-group-rows: must be at least 1000")
    lake = Lake.of(cfg)
    known = {t.key: t for t in lake_tables()}
    wanted = list(known) if not tables else list(tables)
    for name in wanted:
        if name not in known:
            raise ConfigError(f"--tables: unknown lake table {name!r} (one of {', '.join(known)})")
    sql = None
    out = []
    for name in wanted:
        table = known[name]
        path = lake.location(spark, table)
        if path is None or current_version(path) is None:
            continue
        if sql is None:
            sql = engine_optimizes(spark)
        where = (table.layer, table.name)
        compacted = None
        if table.key == BRONZE_FILES.key:  # its superseded rows first (bronze lease held)
            compacted = compact_states(spark, lake, force=True)
        # quality runs compact their results under the quality lease (pipelines/few_files)
        with lake_lease(cfg, "quality") if table.layer == "quality" else nullcontext():
            res = optimize_table(spark, path, table=name, ident=lake.ident(table),
                                 cluster=CLUSTER_BY.get(where, ()),
                                 bloom=table.bloom_columns, sql=sql,
                                 target_mb=target_mb, row_group_rows=row_group_rows)
        if compacted is not None:
            res.rows_before, res.rows_after = compacted.rows_before, compacted.rows_after
        log.info("optimize %s: %s via %s, %d -> %d files", name, res.how, res.via,
                 res.files_before, res.files_after)
        out.append(res)
    return out


# -- binlake optimize ------------------------------------------------------------------------


def add_parser(sub) -> None:
    """Add ``optimize`` to ``binlake``'s sub-parsers (``pipelines.command``)."""
    p = sub.add_parser("optimize", help="compact small files; cluster silver by key (Z-order)")
    p.add_argument("--tables", type=csv_list,
                   help="only these lake tables, comma-separated layer/name (default: all)")
    p.add_argument("--target-mb", type=int, default=TARGET_MB,
                   help=f"target data file size in MB (default {TARGET_MB})")
    p.add_argument("--row-group-rows", type=int, default=ROW_GROUP_ROWS,
                   help=f"rows per Parquet row group, the unit statistics skip "
                        f"(default {ROW_GROUP_ROWS}; delta-rs only)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(handler=cmd_optimize)


def cmd_optimize(args: argparse.Namespace, cfg: Config) -> int:
    import json
    from dataclasses import asdict

    from pipelines.engine.session import get_spark

    done = optimize_lake(get_spark(cfg.engine), cfg, tables=args.tables,
                         target_mb=args.target_mb, row_group_rows=args.row_group_rows)
    if args.format == "json":
        print(json.dumps([asdict(t) for t in done], indent=2))
        return 0
    for t in done:
        if t.rows_before is not None:
            print(f"optimize: {t.table}: superseded state rows deleted, {t.rows_before} -> "
                  f"{t.rows_after} row(s)")
        if t.how == "unchanged":
            print(f"optimize: {t.table}: nothing to rewrite "
                  f"({t.files_before} file(s), version {t.version_before})")
            continue
        print(f"optimize: {t.table}: {t.how} via {t.via}, {t.partitions} partition(s), "
              f"{t.files_before} -> {t.files_after} file(s), version {t.version_before} -> "
              f"{t.version_after} in {t.seconds:.1f}s")
    if not done:
        print(f"optimize: no lake tables under {cfg.lake_root}")
    return 0
