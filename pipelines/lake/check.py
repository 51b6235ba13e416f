"""Find damage in the lake's Delta tables before a stage trips over it.

Two kinds, each named with the table, the file and the repair (``docs/repair.md``):

* a ``_delta_log`` commit that is torn or unreadable (empty, cut inside a JSON line, not
  JSON): the table cannot be loaded at all;
* a data file the current snapshot lists that is missing, or shorter/longer than the size
  its ``add`` action recorded (truncated by a full disk, deleted by hand or by a foreign
  VACUUM): a scan of it fails, or worse, reads fewer rows.

Only the commits after the latest checkpoint are parsed (the ones any reader replays), the
files they and the checkpoint list are read from the log itself (``delta_log``; delta-rs
where the log takes more), and only file sizes are compared (a ``stat`` per file), so the
check costs little and the stage entry points run it every time (:func:`check_tables`).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote

from pipelines.config import Config
from pipelines.errors import LakeFaultError
from pipelines.lake.delta_log import read_log
from pipelines.lake.files import lake_file_sizes

__all__ = ["STAGE_READS", "table_faults", "lake_faults", "check_tables"]

# The tables a stage reads or appends to: it refuses to run while one of them is damaged
# (None: every bronze and silver table of the registry).
STAGE_READS: dict[str, list[tuple[str, str]] | None] = {
    "bronze": [("bronze", "files"), ("bronze", "binlog_events")],
    "silver": None,
    "gold": [("silver", "binlog_events")],
}


def _tables(layers: tuple[str, ...] = ("bronze", "silver")) -> list[tuple[str, str]]:
    from pipelines.lake.tables import lake_tables

    return [(t.layer, t.name) for t in lake_tables() if t.layer in layers]


def _listed_by_delta_rs(path: str) -> list[tuple[str, int, str | None]]:
    import pyarrow as pa
    from deltalake import DeltaTable

    adds = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    files = adds.column("path").to_pylist()
    binlogs = (adds.column("partition.binlog_file").to_pylist()
               if "partition.binlog_file" in adds.schema.names else [None] * len(files))
    return list(zip(files, adds.column("size_bytes").to_pylist(), binlogs))


def table_faults(path: str, label: str, storage: object | None = None) -> list[dict[str, Any]]:
    """The damage found in the Delta table at ``path`` (``label`` e.g. ``bronze/files``);
    ``storage`` is the ``[storage]`` section for a table on an object store."""
    log = read_log(path, storage)
    if log is None:
        return []
    if not log.commits and log.checkpoint < 0:
        return []  # no commit: a creation killed before its first one (nothing was written)
    if log.torn:
        version, file, why = log.torn
        return [{"table": label, "kind": "torn_commit", "file": file, "version": version,
                 "latest": version == log.latest,
                 "problem": f"_delta_log commit {os.path.basename(file)} is {why}",
                 "repair": "binlake repair (sets the commit aside), then re-run the stage"
                           if version == log.latest else
                           "not the latest commit: restore it from a backup (docs/repair.md)"}]
    try:
        adds = ([(f.path, f.size, f.partition.get("binlog_file")) for f in log.files]
                if log.files is not None else _listed_by_delta_rs(path))
    except Exception as exc:  # noqa: BLE001 - delta-rs raises several kinds
        return [{"table": label, "kind": "unreadable", "file": log.log_dir,
                 "version": log.latest, "latest": True,
                 "problem": f"log cannot be loaded: {str(exc)[:300]}", "repair": "docs/repair.md"}]
    out = []
    listed = lake_file_sizes(path, storage)  # object store: one listing, not a stat per file
    for rel, size, binlog in adds:
        full = rel if os.path.isabs(rel) or "://" in rel else os.path.join(path, unquote(rel))
        try:
            have = listed[unquote(rel)] if listed is not None else os.path.getsize(full)
        except (OSError, KeyError):
            problem = f"data file {rel} is missing"
        else:
            if have == size:
                continue
            problem = f"data file {rel} has {have} of its {size} bytes (truncated?)"
        redo = (f"binlake repair, then binlake bronze --files {binlog}" if binlog
                else "binlake repair, then re-run the stage")
        out.append({"table": label, "kind": "data_file", "file": full, "binlog_file": binlog,
                    "problem": problem, "repair": redo})
    return out


def lake_faults(cfg: Config, tables: list[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """Every fault of the lake's tables (``binlake status``), read at their directories under
    the lake root (path mode and external catalog tables; managed tables are not checked)."""
    out = []
    for layer, name in tables or _tables(("bronze", "silver", "quality")):
        out += table_faults(cfg.table_path(layer, name), f"{layer}/{name}", cfg.storage)
    return out


def check_tables(cfg: Config, stage: str) -> None:
    """Raise :class:`LakeFaultError` naming every fault of the tables ``stage`` uses."""
    if stage not in STAGE_READS:
        return
    faults = lake_faults(cfg, STAGE_READS[stage] or _tables())
    if faults:
        raise LakeFaultError(
            f"{stage}: the lake at {cfg.lake_root} is damaged, nothing was written: " + "; ".join(
                f"{f['table']}: {f['problem']} (repair: {f['repair']})" for f in faults))
