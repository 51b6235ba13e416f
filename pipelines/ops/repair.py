"""``binlake repair``: make a damaged lake consistent again, so re-runs restore exactly once.

What it does (``docs/repair.md``), holding the bronze and silver leases:

1. A torn latest ``_delta_log`` commit is set aside (moved to ``_binlake/damaged/``): the
   table is back at the version before it, whose files are all intact.
2. A data file that is truncated is set aside; then every ``add`` whose file is missing is
   removed from the table (Delta's FSCK, ``DeltaTable.repair``).
3. Bronze files whose rows bronze no longer fully holds (the closing END row or the row
   count of their state is gone) are marked ``failed`` in ``bronze/files``, and files left
   ``in_progress`` (their outcome's commit was the torn one) are listed: the next
   ``binlake bronze`` re-indexes them (it replaces a file's rows as a unit).
4. When bronze or silver lost anything, silver's progress is set aside: the next
   ``binlake silver`` considers every file again and its anti-join on the bronze key appends
   exactly the rows silver is missing; ``binlake gold`` then exports them (duplicates are
   no-ops there).

It prints what it did and the commands to run next. A fault it cannot repair (a torn commit
that is not the latest) raises :class:`LakeFaultError` naming it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
from dataclasses import dataclass, field

from pipelines.config import DAMAGED_DIR, Config, lake_dir
from pipelines.errors import LakeFaultError
from pipelines.lake.files import lake_path_exists, list_lake_dir, move_lake_path
from pipelines.vocabulary import CHANGE_TYPES_SQL

__all__ = ["RepairResult", "run_repair", "add_parser", "cmd_repair"]


@dataclass
class RepairResult:
    actions: list[str] = field(default_factory=list)
    reindex: dict[str, list[str]] = field(default_factory=dict)  # binlog dir -> files
    rerun_silver: bool = False
    # binlog files not wholly indexed for a reason of their own (not lake damage): a closed
    # file cut short (partial) or one whose decoding failed, with the state's words
    binlogs: list[str] = field(default_factory=list)


def _aside(cfg: Config, path: str, stamp: str) -> str:
    rel = (path[len(cfg.lake_root) + 1:] if path.startswith(cfg.lake_root + "/")
           else os.path.relpath(path, cfg.lake_root))
    dest = lake_dir(cfg.lake_root, DAMAGED_DIR, stamp, rel)
    move_lake_path(path, dest, cfg.storage)
    return dest


def _fix_tables(cfg: Config, res: RepairResult, stamp: str) -> set[str]:
    """Steps 1 and 2; returns the labels of the tables that changed."""
    from deltalake import DeltaTable

    from pipelines.lake.check import lake_faults

    touched: set[str] = set()
    for _ in range(100):  # one torn commit at a time: the one before may be torn too
        faults = lake_faults(cfg)
        torn = [f for f in faults if f["kind"] != "data_file"]
        if not torn:
            break
        for f in torn:
            if f["kind"] != "torn_commit" or not f["latest"]:
                raise LakeFaultError(f"{f['table']}: {f['problem']}: cannot be repaired "
                                     "automatically (docs/repair.md)")
            crc = f["file"][:-len(".json")] + ".crc"
            dest = _aside(cfg, f["file"], stamp)
            if lake_path_exists(crc, cfg.storage):
                _aside(cfg, crc, stamp)
            res.actions.append(f"{f['table']}: {f['problem']}: set aside to {dest}; the table "
                               f"is back at version {f['version'] - 1}")
            touched.add(f["table"])
    by_table: dict[str, list[dict]] = {}
    for f in lake_faults(cfg):
        by_table.setdefault(f["table"], []).append(f)
    for label, faults in by_table.items():
        for f in faults:
            if lake_path_exists(f["file"], cfg.storage):
                _aside(cfg, f["file"], stamp)
        removed = DeltaTable(cfg.table_path(*label.split("/"))).repair().get("files_removed", [])
        res.actions.append(f"{label}: {len(faults)} damaged data file(s) removed from the "
                           f"table ({'; '.join(f['problem'] for f in faults)}); "
                           f"{len(removed)} add action(s) dropped")
        touched.add(label)
    return touched


def _recheck_bronze(spark, cfg: Config, res: RepairResult) -> None:
    """Step 3: files whose bronze rows are no longer all there are marked ``failed``."""
    from pipelines.bronze.files import load_states, save_states
    from pipelines.lake.tables import BRONZE_EVENTS, Lake

    lake = Lake.of(cfg)
    bronze = lake.ident(BRONZE_EVENTS)
    states = load_states(spark, lake)
    have: dict[tuple[str, str], tuple[int, int]] = {}
    if lake.exists(spark, BRONZE_EVENTS):
        for r in spark.sql(
                "SELECT source_id, binlog_file, "
                "sum(CASE WHEN event_type IN ('END', 'ERROR') THEN 1 ELSE 0 END) AS closing, "
                f"sum(CASE WHEN event_type IN {CHANGE_TYPES_SQL} THEN 1 ELSE 0 END) "
                f"AS changes FROM {bronze} GROUP BY source_id, binlog_file").collect():
            have[(r[0], r[1])] = (int(r[2]), int(r[3]))
    lost = []
    for key, st in states.items():
        if st.path.startswith("stream://"):
            continue
        if st.status == "in_progress":  # its outcome is gone: the next bronze run redoes it
            res.reindex.setdefault(os.path.dirname(st.path), []).append(st.binlog_file)
            res.actions.append(f"bronze/files: {st.source_id}/{st.binlog_file}: in_progress "
                               "(its run's outcome is gone); re-index this file")
            continue
        if st.status not in ("completed", "partial"):
            continue
        closing, changes = have.get(key, (0, 0))
        if closing == 0 or changes != (st.row_changes or 0):
            st.status, st.updated_at = "failed", None
            st.error = (f"repair: bronze holds {changes} of its {st.row_changes} row changes"
                        f"{'' if closing else ' and no closing row'}; re-index this file")
            lost.append(st)
            res.reindex.setdefault(os.path.dirname(st.path), []).append(st.binlog_file)
    save_states(spark, lake, lost)
    for st in lost:
        res.actions.append(f"bronze/files: {st.source_id}/{st.binlog_file}: {st.error}")


def run_repair(spark, cfg: Config) -> RepairResult:
    """Repair the lake (module docstring); returns what was done and what to run next."""
    from pipelines.lake.lease import lake_lease
    from pipelines.lake.tables import BRONZE_EVENTS, SILVER_PROGRESS

    res = RepairResult()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    with lake_lease(cfg, "bronze"), lake_lease(cfg, "silver"):
        touched = _fix_tables(cfg, res, stamp)
        if any(t.startswith(BRONZE_EVENTS.layer + "/") for t in touched):
            _recheck_bronze(spark, cfg, res)
        if touched:
            progress = cfg.table_path(SILVER_PROGRESS.layer, SILVER_PROGRESS.name)
            if list_lake_dir(progress, cfg.storage) is not None:
                dest = _aside(cfg, progress, stamp)
                res.actions.append(f"{SILVER_PROGRESS.key} set aside to {dest}: the next silver "
                                   "run considers every file (anti-join: no row twice)")
            res.rerun_silver = True
    res.binlogs = _binlogs_not_whole(spark, cfg)
    return res


def _binlogs_not_whole(spark, cfg: Config) -> list[str]:
    """The files bronze holds only part of because of the binlog itself, as ``status``
    names them: ``failed`` (its error) and a closed file cut short (``partial: …``)."""
    from pipelines.bronze.files import load_states
    from pipelines.lake.tables import Lake

    out = []
    for (source_id, name), st in sorted(load_states(spark, Lake.of(cfg)).items()):
        if st.status == "failed" or (st.status == "partial"
                                      and (st.error or "").startswith("partial: ")):
            out.append(f"{source_id}/{name}: {st.status} at pos {st.last_pos}: {st.error}")
    return out


def add_parser(sub) -> None:
    """Add ``repair`` to ``binlake``'s sub-parsers."""
    p = sub.add_parser("repair", help="set damaged table files aside so re-runs restore "
                                      "exactly once (docs/repair.md)")
    p.set_defaults(handler=cmd_repair)


def cmd_repair(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.engine.session import get_spark

    res = run_repair(get_spark(cfg.engine), cfg)
    for b in res.binlogs:
        print(f"repair: binlog not wholly indexed (the file, not the lake): {b}")
    if not res.actions:
        print("repair: no damage to the lake found")
        return 0
    for a in res.actions:
        print(f"repair: {a}")
    for d, names in sorted(res.reindex.items()):
        print(f"repair: next: binlake bronze --binlog-dir {d} --files {','.join(sorted(names))}")
    if res.rerun_silver:
        print("repair: next: binlake silver (then binlake gold when gold is configured)")
    return 0
