"""Keep the small tables every run reads whole in a few data files.

``bronze/files`` gains rows at every bronze run and stream save, ``quality/results`` at every
quality run and ``silver/quarantine`` at every silver run that quarantines: each append is a
data file of a few rows, and the next runs read the table whole. A query opens every data file
of a table: on the embedded engine about 0.8 ms each (800 one-row appends: a read of 622 ms,
28 ms once compacted; docs/performance.md, Optimize and the small tables), so a lake's runs
got slower with the number of runs before them.

Their writers therefore compact such a table once it holds more than :data:`FEW_FILES` data
files (:func:`keep_few_files`): the engine's ``OPTIMIZE`` where it has one (delta-spark,
Databricks), else delta-rs. The commit rewrites files only (the rows are the same, with
``dataChange=false``), so an append racing it lands as its own version beside it.

Two compactions of one table must not race: delta-rs 1.6.6 commits a compaction planned on
a stale snapshot over one that already rewrote the same files, and every row is then there
twice (seen: two compactions of five one-row files gave ten rows). So a compaction runs under
the lease of the stage that writes the table, loading the table only once it holds the lease:
``bronze`` (bronze runs, the stream, optimize), ``silver`` (silver runs, optimize) and
``quality`` (quality runs take it only when it is free, optimize waits for it). The DELETEs on
these tables (``bronze/files``' compaction, silver's quarantine) run under the same leases.
A compaction that fails is a warning: the run's own work is committed and the next run tries
again. Managed catalog tables are left to the engine's own file management.
"""

from __future__ import annotations

import logging

from pipelines.config import Config
from pipelines.lake.delta_ops import capabilities
from pipelines.lake.tables import Lake, LakeTable
from pipelines.lake.lease import lease_if_free

__all__ = ["FEW_FILES", "keep_few_files"]

log = logging.getLogger(__name__)

FEW_FILES = 16  # data files a small table may hold before its writer compacts it


def keep_few_files(spark, lake: Lake, table: LakeTable, *, most: int = FEW_FILES,
                   lease: tuple[Config, str] | None = None) -> int | None:
    """Compact ``table`` when it holds more than ``most`` data files; the number of files it
    held then, else ``None`` (few enough, no table, a managed one, the lease busy, or the
    compaction failed: a warning). The caller holds the table's lease, or names it in
    ``lease`` (config, stage) to take it for the compaction if it is free."""
    if lake.managed:
        return None
    if lease is None:  # held already: one load, counted and compacted
        return _compact(spark, lake, table, most)
    if (_data_files(lake, table) or 0) <= most:  # the lease only when due
        return None
    with lease_if_free(*lease) as held:
        return _compact(spark, lake, table, most) if held else None


def _data_files(lake: Lake, table: LakeTable) -> int | None:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return len(DeltaTable(lake.path(table)).file_uris())
    except TableNotFoundError:
        return None


def _compact(spark, lake: Lake, table: LakeTable, most: int) -> int | None:
    """Compact on a snapshot loaded now (under the lease): not one another compaction had."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        dt = DeltaTable(lake.path(table))
        files = len(dt.file_uris())
        if files <= most:
            return None
        if capabilities(spark).optimize:
            spark.sql(f"OPTIMIZE {lake.ident(table)}").collect()
        else:
            dt.optimize.compact()
    except TableNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001 - delta-rs and the engines raise many kinds
        first = (str(exc).strip().splitlines() or [repr(exc)])[0][:300]
        log.warning("%s: compacting its data files failed, left to the next run: %s",
                    table.key, first)
        return None
    log.info("%s: compacted %d data files", table.key, files)
    return files
