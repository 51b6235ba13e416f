"""Snapshots in the lake, and as JSON files for binlogs indexed away from their server.

Tables (flat, no arrays; layouts in docs/silver.md and ``source.model``):

- ``<lake>/silver/schema_snapshots``: one row per column per snapshot;
- ``<lake>/silver/fk_constraints``: one row per foreign-key column per snapshot;
- ``<lake>/silver/source_checks``: the source checks of each snapshot.

:func:`save_snapshot` appends to each in one commit, schema_snapshots last: a snapshot is
visible to :func:`load_snapshots` only once its foreign keys and checks are stored. Saving a
snapshot_id that is already stored does nothing (re-importing a file is harmless).
"""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

from pipelines.binlog.names import position_key
from pipelines.config import Config
from pipelines.lake.delta_ops import sql_string
from pipelines.errors import ConfigError
from pipelines.lake.tables import FK_CONSTRAINTS, SCHEMA_SNAPSHOTS, SOURCE_CHECKS, Lake, LakeTable
from pipelines.source.model import (
    JSON_FORMAT, JSON_VERSION, Snapshot,
    SourceCheck, check_from_json, check_to_json, checks_to_rows, fk_to_rows, snapshot_from_json,
    snapshot_to_json, snapshot_to_rows, snapshots_from_rows,
)

__all__ = ["SNAPSHOTS_DDL", "FKS_DDL", "CHECKS_DDL", "snapshots_path", "fks_path", "checks_path",
           "save_snapshot", "load_snapshots", "latest_snapshot_seq", "load_checks", "export_json",
           "import_json", "load_export"]


SNAPSHOTS_DDL = SCHEMA_SNAPSHOTS.ddl()
FKS_DDL = FK_CONSTRAINTS.ddl()
CHECKS_DDL = SOURCE_CHECKS.ddl()


def snapshots_path(cfg: Config) -> str:
    """Where the snapshots are, for messages (a path, or the catalog table)."""
    return Lake.of(cfg).where(SCHEMA_SNAPSHOTS)


def fks_path(cfg: Config) -> str:
    return Lake.of(cfg).where(FK_CONSTRAINTS)


def checks_path(cfg: Config) -> str:
    return Lake.of(cfg).where(SOURCE_CHECKS)


def _stored(spark, lake: Lake, snapshot_id: str) -> bool:
    if not lake.exists(spark, SCHEMA_SNAPSHOTS):
        return False
    df = lake.read(spark, SCHEMA_SNAPSHOTS)
    return bool(df.filter(f"snapshot_id = {sql_string(snapshot_id)}").limit(1).collect())


def _append(spark, lake: Lake, table: LakeTable, rows: list[tuple[Any, ...]]) -> None:
    lake.append(spark.createDataFrame(rows, table.ddl()), table)


def save_snapshot(spark, cfg: Config, snapshot: Snapshot,
                  checks: Sequence[SourceCheck] = ()) -> bool:
    """Append the snapshot, its foreign keys and its checks; False when already stored."""
    lake = Lake.of(cfg)
    if _stored(spark, lake, snapshot.snapshot_id):
        return False
    _append(spark, lake, SOURCE_CHECKS, checks_to_rows(snapshot, checks))
    _append(spark, lake, FK_CONSTRAINTS, fk_to_rows(snapshot))
    _append(spark, lake, SCHEMA_SNAPSHOTS, snapshot_to_rows(snapshot))
    return True


def _sort_key(s: Snapshot) -> tuple[Any, ...]:
    c = s.coordinate
    return (s.source_id, c is None, c or (0, 0), s.snapshot_time, s.snapshot_id)


def load_snapshots(spark, cfg: Config, source_id: str | None = None) -> list[Snapshot]:
    """Every stored snapshot (of ``source_id`` when given), ordered per source by binlog
    coordinate, then time; snapshots without coordinates come last."""
    lake = Lake.of(cfg)
    if not lake.exists(spark, SCHEMA_SNAPSHOTS):
        return []
    df = lake.read(spark, SCHEMA_SNAPSHOTS)
    if source_id is not None:
        df = df.filter(f"source_id = {sql_string(source_id)}")
    rows = [r.asDict() for r in df.collect()]
    ids = {r["snapshot_id"] for r in rows}
    fk_rows: list[dict[str, Any]] = []
    if ids and lake.exists(spark, FK_CONSTRAINTS):
        fdf = lake.read(spark, FK_CONSTRAINTS)
        if source_id is not None:
            fdf = fdf.filter(f"source_id = {sql_string(source_id)}")
        fk_rows = [r.asDict() for r in fdf.collect() if r["snapshot_id"] in ids]
    return sorted(snapshots_from_rows(rows, fk_rows), key=_sort_key)


def latest_snapshot_seq(spark, cfg: Config, source_id: str) -> int | None:
    """The binlog coordinate of ``source_id``'s latest stored snapshot on silver's ``seq``
    scale (``Snapshot.seq``); None when it has none with coordinates."""
    lake = Lake.of(cfg)
    if not lake.exists(spark, SCHEMA_SNAPSHOTS):
        return None
    rows = (lake.read(spark, SCHEMA_SNAPSHOTS)
            .where(f"source_id = {sql_string(source_id)} AND binlog_file IS NOT NULL "
                   "AND binlog_pos IS NOT NULL")
            .select("binlog_file", "binlog_pos").distinct().collect())
    return max((position_key(f, p) for f, p in rows), default=None)


def load_checks(spark, cfg: Config, snapshot_id: str | None = None) -> list[tuple[str, SourceCheck]]:
    """Stored checks as (snapshot_id, check), for ``status``."""
    lake = Lake.of(cfg)
    if not lake.exists(spark, SOURCE_CHECKS):
        return []
    df = lake.read(spark, SOURCE_CHECKS)
    if snapshot_id is not None:
        df = df.filter(f"snapshot_id = {sql_string(snapshot_id)}")
    return [(r["snapshot_id"], SourceCheck(r["level"], r["name"], r["detail"]))
            for r in df.collect()]


# -- JSON files ------------------------------------------------------------------------------

def export_json(snapshot: Snapshot, path: str, checks: Sequence[SourceCheck] = ()) -> None:
    """Write the snapshot (and its checks) as a JSON file; ConfigError when it cannot."""
    doc = {"format": JSON_FORMAT, "version": JSON_VERSION,
           "snapshot": snapshot_to_json(snapshot),
           "checks": [check_to_json(c) for c in checks]}
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, ensure_ascii=False)
            fh.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(f"--export {path}: cannot write: {exc.strerror}") from exc


def load_export(path: str) -> tuple[Snapshot, list[SourceCheck]]:
    """Read and validate a file :func:`export_json` wrote.

    Raises :class:`ConfigError` naming the file and the first problem.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as exc:
        raise ConfigError(f"--import {path}: cannot read: {exc.strerror}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--import {path}: not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != JSON_FORMAT:
        raise ConfigError(f"--import {path}: not a binlake schema snapshot "
                          f"(expected \"format\": \"{JSON_FORMAT}\")")
    if doc.get("version") != JSON_VERSION:
        raise ConfigError(f"--import {path}: unsupported version {doc.get('version')!r} "
                          f"(this binlake reads {JSON_VERSION})")
    try:
        snapshot = snapshot_from_json(doc.get("snapshot"))
        raw = doc.get("checks", [])
        if not isinstance(raw, list):
            raise ValueError("checks: expected a list")
        checks = [check_from_json(c, f"checks[{i}]") for i, c in enumerate(raw)]
    except ValueError as exc:
        raise ConfigError(f"--import {path}: {exc}") from exc
    return snapshot, checks


def import_json(path: str) -> Snapshot:
    """The snapshot in a file :func:`export_json` wrote (see :func:`load_export`)."""
    return load_export(path)[0]
