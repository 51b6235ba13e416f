"""Snapshots in the lake, and as JSON files for binlogs indexed away from their server.

Tables (flat, no arrays; layouts in docs/silver.md and ``snapshot_model``):

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

from pipelines.config import Config
from pipelines.delta_ops import sql_string, table_exists
from pipelines.errors import ConfigError
from pipelines.silver.snapshot_model import (
    CHECK_COLUMNS, FK_COLUMNS, JSON_FORMAT, JSON_VERSION, SNAPSHOT_COLUMNS, Snapshot,
    SourceCheck, check_from_json, check_to_json, checks_to_rows, fk_to_rows, snapshot_from_json,
    snapshot_to_json, snapshot_to_rows, snapshots_from_rows,
)

__all__ = ["SNAPSHOTS_DDL", "FKS_DDL", "CHECKS_DDL", "snapshots_path", "fks_path", "checks_path",
           "save_snapshot", "load_snapshots", "load_checks", "export_json", "import_json",
           "load_export"]


def _ddl(columns: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{name} {kind}" for name, kind in columns)


SNAPSHOTS_DDL = _ddl(SNAPSHOT_COLUMNS)
FKS_DDL = _ddl(FK_COLUMNS)
CHECKS_DDL = _ddl(CHECK_COLUMNS)


def snapshots_path(cfg: Config) -> str:
    return cfg.table_path("silver", "schema_snapshots")


def fks_path(cfg: Config) -> str:
    return cfg.table_path("silver", "fk_constraints")


def checks_path(cfg: Config) -> str:
    return cfg.table_path("silver", "source_checks")


def _stored(spark, path: str, snapshot_id: str) -> bool:
    if not table_exists(spark, path):
        return False
    df = spark.read.format("delta").load(path)
    return bool(df.filter(f"snapshot_id = {sql_string(snapshot_id)}").limit(1).collect())


def _append(spark, path: str, rows: list[tuple[Any, ...]], ddl: str) -> None:
    spark.createDataFrame(rows, ddl).write.format("delta").mode("append").save(path)


def save_snapshot(spark, cfg: Config, snapshot: Snapshot,
                  checks: Sequence[SourceCheck] = ()) -> bool:
    """Append the snapshot, its foreign keys and its checks; False when already stored."""
    if _stored(spark, snapshots_path(cfg), snapshot.snapshot_id):
        return False
    _append(spark, checks_path(cfg), checks_to_rows(snapshot, checks), CHECKS_DDL)
    _append(spark, fks_path(cfg), fk_to_rows(snapshot), FKS_DDL)
    _append(spark, snapshots_path(cfg), snapshot_to_rows(snapshot), SNAPSHOTS_DDL)
    return True


def _sort_key(s: Snapshot) -> tuple[Any, ...]:
    c = s.coordinate
    return (s.source_id, c is None, c or (0, 0), s.snapshot_time, s.snapshot_id)


def load_snapshots(spark, cfg: Config, source_id: str | None = None) -> list[Snapshot]:
    """Every stored snapshot (of ``source_id`` when given), ordered per source by binlog
    coordinate, then time; snapshots without coordinates come last."""
    path = snapshots_path(cfg)
    if not table_exists(spark, path):
        return []
    df = spark.read.format("delta").load(path)
    if source_id is not None:
        df = df.filter(f"source_id = {sql_string(source_id)}")
    rows = [r.asDict() for r in df.collect()]
    ids = {r["snapshot_id"] for r in rows}
    fk_rows: list[dict[str, Any]] = []
    if ids and table_exists(spark, fks_path(cfg)):
        fdf = spark.read.format("delta").load(fks_path(cfg))
        if source_id is not None:
            fdf = fdf.filter(f"source_id = {sql_string(source_id)}")
        fk_rows = [r.asDict() for r in fdf.collect() if r["snapshot_id"] in ids]
    return sorted(snapshots_from_rows(rows, fk_rows), key=_sort_key)


def load_checks(spark, cfg: Config, snapshot_id: str | None = None) -> list[tuple[str, SourceCheck]]:
    """Stored checks as (snapshot_id, check), for ``status``."""
    path = checks_path(cfg)
    if not table_exists(spark, path):
        return []
    df = spark.read.format("delta").load(path)
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
