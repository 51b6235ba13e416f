"""``binlake snapshot``: take (or import) a schema snapshot, check the source, store it.

``binlake snapshot [--source-dsn URL] [--schemas a,b] [--export FILE | --import FILE]``

- from a server (``--source-dsn``, else ``source.dsn``): read the snapshot and the source
  checks; any ``refuse`` check raises :class:`SourceError` and nothing is stored or exported;
- ``--import FILE``: a snapshot exported elsewhere, stored under this lake's ``source.name``
  (the name bronze gives the same binlogs here); its recorded checks are kept, and the
  schema-derived ones (FK cascades, tables without PK) are recomputed when the file has none;
- ``--export FILE`` additionally writes the snapshot as JSON. With ``spark=None`` nothing is
  stored (an export-only run next to the server, without a lake).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Sequence, TextIO

from pipelines.config import Config
from pipelines.mysql.dsn import resolve_dsn
from pipelines.errors import ConfigError, SourceError
from pipelines.source.model import Snapshot, SourceCheck
from pipelines.source.checks import refusals, schema_checks
from pipelines.source.schema import take_snapshot
from pipelines.silver.snapshot_store import (
    export_json, load_export, save_snapshot, snapshots_path,
)

__all__ = ["run_snapshot", "print_summary"]


def run_snapshot(spark, cfg: Config, *, source_dsn: str | None = None,
                 schemas: Sequence[str] | None = None, export_path: str | None = None,
                 import_path: str | None = None) -> tuple[Snapshot, list[SourceCheck]]:
    """Take or import one snapshot, refuse a source that would give wrong data, store it.

    Raises :class:`ConfigError` for missing/contradictory options or a bad import file, and
    :class:`SourceError` when the server cannot be read or a check refuses it (the message
    lists the refusals; nothing is stored).
    """
    if import_path and source_dsn:
        raise ConfigError("--import and --source-dsn exclude each other")
    if import_path and export_path:
        raise ConfigError("--import and --export exclude each other")
    if import_path:
        snapshot, checks = load_export(import_path)
        if schemas:
            raise ConfigError("--schemas applies to a snapshot taken from a server, not --import")
        snapshot = dataclasses.replace(snapshot, source_id=cfg.source.name)
        if not checks:
            checks = schema_checks(snapshot)
    else:
        url = source_dsn or cfg.source.dsn
        if not url:
            raise ConfigError("snapshot needs --source-dsn mysql://user:password@host:port/ "
                              "or source.dsn in the configuration")
        dsn = resolve_dsn(url, cfg.source, section="source",
                          setting="--source-dsn" if source_dsn else "source.dsn")
        snapshot, checks = take_snapshot(dsn, source_id=cfg.source.name, schemas=schemas)
    refused = refusals(checks)
    if refused:
        raise SourceError("refusing the source, nothing stored: " + "; ".join(
            f"{c.name}: {c.detail}" for c in refused))
    if export_path:
        export_json(snapshot, export_path, checks)
    if spark is not None:
        save_snapshot(spark, cfg, snapshot, checks)
    return snapshot, checks


def print_summary(snapshot: Snapshot, checks: Sequence[SourceCheck], *,
                  cfg: Config | None = None, export_path: str | None = None,
                  out: TextIO | None = None) -> None:
    """Print what was snapshotted and every check, one line each."""
    out = out or sys.stdout
    where = f"{snapshot.binlog_file}:{snapshot.binlog_pos}" if snapshot.binlog_file else "no binlog"
    gtid = f", gtid {snapshot.gtid_executed}" if snapshot.gtid_executed else ""
    print(f"snapshot: {snapshot.snapshot_id} of {snapshot.source_id} "
          f"({snapshot.server_version or 'unknown server'}) at {where}{gtid}", file=out)
    print(f"snapshot: {len(snapshot.tables)} tables, {snapshot.column_count} columns, "
          f"{len(snapshot.constraint_names)} fk constraints", file=out)
    for c in checks:
        print(f"check {c.level.upper():6} {c.name}: {c.detail}", file=out)
    if cfg is not None:
        print(f"snapshot: stored in {snapshots_path(cfg)}", file=out)
    if export_path:
        print(f"snapshot: exported to {export_path}", file=out)
