"""The column spec of a derived row change (docs/silver.md), which has no bronze row; the
lake is read through the :class:`Lookups` ``history.lake.with_specs`` hands in.

A derived change (a TRUNCATE's DELETEs, an FK action, an ADD COLUMN's UPDATEs) carries the
image silver folded, not a TABLE_MAP. Its columns are named, in order of preference, by the
snapshot its image was named with (``schema_version``), the snapshot valid at its place, or
the table's newest logged change in its schema epoch (under an earlier name when renamed,
or the next name's first epoch when renamed right after). When none exists (an ADD COLUMN,
then a TRUNCATE or another ALTER, before any logged change) the table's newest logged change
before it names the old columns. A column the image holds and that spec lacks (added by an
``ALTER TABLE … ADD`` since) is typed as that ADD COLUMN gives it: integer or text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from pipelines.errors import SchemaMismatchError
from pipelines.lake.delta_ops import sql_string
from pipelines.silver.naming import NamingPlan, TableSpec

__all__ = ["derived_spec", "Lookups"]


@dataclass(frozen=True)
class Lookups:
    """What the lake answers here (``history.lake`` builds one per selection)."""

    silver: Callable[[], Any]  # silver's rows (a DataFrame)
    specs: Callable[[Any], list]  # (row, spec) of selected silver rows: ``with_specs``
    ddl: Callable[[str, str], list[dict[str, Any]]]  # a table's DDL: ``ddl_statements``
    renames: Callable[[], list]  # ``silver.renames.load_renames``


def derived_spec(look: Lookups, plan: NamingPlan, d: dict[str, Any], cache: dict
                 ) -> TableSpec:
    """The spec of the derived row ``d`` (a silver row); ``cache`` is shared by the rows of
    one selection. :class:`SchemaMismatchError` naming the change when nothing names it."""
    spec = _named(look, plan, d, cache)
    table = (d["schema_name"], d["table_name"])
    key = ("before", d["source_id"], *table, plan.epoch(d["source_id"], *table, d["seq"]))
    if spec is None and key not in cache:  # the epoch has no logged change: one answer
        for name in _earlier_names(look, table, d["seq"], cache):
            spec = _newest(look, d["source_id"], name, f"seq < {d['seq']}")
            if spec is not None:
                break
        cache[key] = spec
    spec = spec or cache.get(key)
    if spec is None:
        raise SchemaMismatchError(f"{d['binlog_file']} pos {d['start_pos']}: nothing names "
                                  f"the derived change of {d['schema_name']}."
                                  f"{d['table_name']} (no snapshot, no logged change of it "
                                  "before it)")
    return _covering(look, d, spec, cache)


def _named(look: Lookups, plan: NamingPlan, d: dict[str, Any], cache: dict
           ) -> TableSpec | None:
    from pipelines.silver.data_snapshot import table_spec

    table = (d["schema_name"], d["table_name"])
    snaps = [snap for _, snap in plan.snapshots.get(d["source_id"], [])]
    snap = next((x for x in snaps if x.snapshot_id == d["schema_version"]), None) \
        or plan.snapshot_for(d["source_id"], *table, d["seq"])
    if snap is not None:
        for name in _earlier_names(look, table, d["seq"], cache):
            if name in snap.tables:  # its image was named before a RENAME TABLE
                return table_spec(snap.table(*name), snap.snapshot_id)
    start, end = plan.epoch(d["source_id"], *table, d["seq"])
    key = (d["source_id"], *table, start)
    if key in cache:
        return cache[key]
    found = _newest(look, d["source_id"], table, f"seq > {start} AND seq < {end}")
    if found is None:
        # renamed in this epoch before any logged change: the image was named under the
        # table's earlier name (its newest logged change before the rename)
        for name in _earlier_names(look, table, d["seq"], cache)[1:]:
            found = _newest(look, d["source_id"], name, f"seq < {d['seq']}")
            if found is not None:
                break
    if found is None:
        # renamed right after the DDL that opened this epoch: the next name's first epoch
        # (a rename changes no column) names the same columns
        for f in cache.get("renames") or []:
            if f.pos > d["seq"] and f.old == table and f.old != f.new and not f.columns:
                lo, hi = plan.epoch(d["source_id"], *f.new, f.pos + 1)
                found = _newest(look, d["source_id"], f.new,
                                f"seq > {max(lo, f.pos)} AND seq < {hi}", first=True)
                break
    cache[key] = found
    return found


def _newest(look: Lookups, source: str, name: tuple[str, str], where: str,
            first: bool = False) -> TableSpec | None:
    """The spec of the table's newest (``first``: oldest) logged change matching ``where``."""
    last = (look.silver()
            .where(f"source_id = {sql_string(source)} AND schema_name = "
                   f"{sql_string(name[0])} AND table_name = {sql_string(name[1])}")
            .where("coalesce(origin, 'binlog') = 'binlog'")
            .where(where).orderBy("seq", ascending=first).limit(1))
    found = look.specs(last)
    return found[0][1] if found else None


def _covering(look: Lookups, d: dict[str, Any], spec: TableSpec, cache: dict) -> TableSpec:
    """``spec`` with the columns of ``d``'s image it lacks (added since), in the image's
    order; ``spec`` itself when it has them all."""
    from pipelines.binlog import coltypes as T
    from pipelines.silver.render import ColumnSpec

    image = d.get("row_after") or d.get("row_before")
    names = list(json.loads(image)) if image else []
    have = {c.name: c for c in spec.columns}
    if all(n in have for n in names):
        return spec
    kinds = _added_values(look, d, cache)
    columns = []
    for name in names:
        if name in have:
            columns.append(have[name])
        elif kinds.get(name, '"').startswith('"'):
            columns.append(ColumnSpec(name, T.VARCHAR, charset="utf8mb4"))
        else:
            columns.append(ColumnSpec(name, T.LONGLONG))
    return spec.over(columns)


def _added_values(look: Lookups, d: dict[str, Any], cache: dict) -> dict[str, str]:
    """Column → the value (silver's JSON form) the table's ADD COLUMNs before ``d`` gave."""
    from pipelines.silver.derive import added_columns

    table = (d["schema_name"], d["table_name"])
    key = ("added", *table, d["seq"])
    if key not in cache:
        values: dict[str, str] = {}
        for name in reversed(_earlier_names(look, table, d["seq"], cache)):
            for ddl in look.ddl(*name):
                added = (added_columns(ddl["query"] or "", name[0])
                         if ddl["key"] < d["seq"] else None)
                values.update({c.name: c.value for c in (added[1] if added else [])})
        cache[key] = values
    return cache[key]


def _earlier_names(look: Lookups, table: tuple[str, str], seq: int, cache: dict
                   ) -> list[tuple[str, str]]:
    """``table`` and the names it had before ``seq`` (RENAME TABLE), newest first."""
    if "renames" not in cache:
        cache["renames"] = look.renames()
    names = [table]
    for f in reversed(cache["renames"]):
        if f.pos < seq and f.new == names[-1] and f.old != f.new:
            names.append(f.old)
    return names
