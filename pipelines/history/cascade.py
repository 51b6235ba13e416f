"""Child rows an unlogged foreign-key cascade changed, to restore with their parent.

InnoDB applies ``ON DELETE`` / ``ON UPDATE`` ``CASCADE`` / ``SET NULL`` to child rows below the
binlog (MariaDB, MySQL before 9.6), so silver holds the parent's change only. The children
concerned are the child table's rows whose foreign-key columns equal the parent's referenced
values just before that change, folded from silver up to it. The rules come from the
snapshots (``silver/fk_constraints``).

- ``ON DELETE CASCADE``: undoing the DELETE re-inserts them (grandchildren follow).
- ``ON DELETE SET NULL`` and ``ON UPDATE SET NULL`` (a parent UPDATE changing referenced
  columns): undoing it sets their FK columns back (a :class:`Child` with ``set_columns``),
  matched on their last image with those columns NULL.
- ``ON UPDATE CASCADE``: nothing to add: the undo's own parent UPDATE makes the target's
  InnoDB cascade the children back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pipelines.config import Config
from pipelines.lake.delta_ops import sql_string
from pipelines.history import lake
from pipelines.history.selection import json_path
from pipelines.silver.image_values import pk_values_of, raw_values
from pipelines.silver.naming import TableSpec
from pipelines.vocabulary import DELETE, UPDATE

__all__ = ["Child", "ForeignKeyRule", "cascade_rules", "children_to_restore"]

_MAX_DEPTH = 8


@dataclass(frozen=True)
class ForeignKeyRule:
    name: str
    child: tuple[str, str]
    child_columns: tuple[str, ...]
    parent: tuple[str, str]
    parent_columns: tuple[str, ...]
    delete_rule: str
    update_rule: str = "RESTRICT"


_ACTIONS = ("CASCADE", "SET NULL")


@dataclass(frozen=True)
class Child:
    schema: str
    table: str
    key: str
    values: dict[str, str]
    spec: TableSpec
    parent_seq: int  # the parent change whose undo restores this child
    after_seq: int  # the child's last change before that parent change
    # Empty: re-insert ``values``. Else: set these columns back to ``values`` on the row that
    # equals ``values`` with them NULL (what SET NULL left).
    set_columns: tuple[str, ...] = ()

    def current(self) -> dict[str, str]:
        """The image the child row has on the server now (for the undo's match)."""
        return {**self.values, **{c: "null" for c in self.set_columns}}


def cascade_rules(spark, cfg: Config) -> list[ForeignKeyRule]:
    """The cascading ON DELETE / ON UPDATE rules of the latest snapshot that records foreign
    keys."""
    from pipelines.silver.snapshot_store import load_snapshots

    latest = None
    for snap in load_snapshots(spark, cfg):
        if snap.fks or latest is None:
            latest = snap
    if latest is None:
        return []
    groups: dict[tuple[str, str], list[Any]] = {}
    for f in latest.fks:
        groups.setdefault((f.constraint_schema, f.constraint_name), []).append(f)
    out = []
    for (_, name), cols in sorted(groups.items()):
        cols.sort(key=lambda f: f.ordinal_position)
        f0 = cols[0]
        if f0.delete_rule not in _ACTIONS and f0.update_rule not in _ACTIONS:
            continue
        out.append(ForeignKeyRule(
            name, (f0.table_schema, f0.table_name), tuple(f.column_name for f in cols),
            (f0.referenced_table_schema, f0.referenced_table_name),
            tuple(f.referenced_column_name for f in cols), f0.delete_rule, f0.update_rule))
    return out


def _text(raw: str | None) -> str | None:
    if raw is None or raw == "null":
        return None
    return json.loads(raw) if raw.startswith('"') else raw


def _children_at(spark, cfg: Config, rule: ForeignKeyRule, parent_values: dict[str, str],
                 before_seq: int) -> list[tuple[str, dict[str, str], TableSpec, int]]:
    """(key, values, spec, seq) of the child rows referencing the parent just before
    ``before_seq``."""
    wanted = {c: _text(parent_values.get(p)) for c, p in zip(rule.child_columns,
                                                                rule.parent_columns)}
    if any(v is None for v in wanted.values()):
        return []
    df = lake.silver(spark, cfg).where(
        f"schema_name = {sql_string(rule.child[0])} AND table_name = "
        f"{sql_string(rule.child[1])} AND seq < {before_seq}")
    for c, v in wanted.items():
        path = sql_string(json_path(c))
        df = df.where(f"(get_json_object(row_after, {path}) = {sql_string(v)} OR "
                      f"get_json_object(row_before, {path}) = {sql_string(v)})")
    state: dict[str, tuple[dict[str, str], TableSpec, int]] = {}
    for d, spec in lake.with_specs(spark, cfg, df):
        after = raw_values(d["row_after"])
        names = [spec.columns[i].name for i in spec.pk]
        if d["event_type"] in (UPDATE, DELETE):
            state.pop(d["pk_values"], None)
        if after is not None:
            state[pk_values_of(after, names)] = (after, spec, d["seq"])
    return [(k, v, spec, seq) for k, (v, spec, seq) in state.items()
            if all(_text(v.get(c)) == want for c, want in wanted.items())]


def _key_changed(rule: ForeignKeyRule, before: dict[str, str] | None,
                 after: dict[str, str] | None) -> bool:
    """Whether a parent UPDATE changed the columns ``rule`` references (MINIMAL after images
    hold the changed columns only)."""
    if before is None or after is None:
        return False
    return any(p in after and _text(after[p]) != _text(before.get(p))
               for p in rule.parent_columns)


def _rule_for(rule: ForeignKeyRule, event: str, before, after) -> str | None:
    """The action InnoDB took on ``rule``'s children for the parent's change, if any."""
    if event == DELETE:
        return rule.delete_rule if rule.delete_rule in _ACTIONS else None
    if event == UPDATE and rule.update_rule in _ACTIONS and _key_changed(rule, before, after):
        return rule.update_rule
    return None


def children_to_restore(spark, cfg: Config, parsed: list, warnings: list[str],
                        cascade: bool | None) -> list[Child]:
    """Children to restore after the parents' DELETEs and key UPDATEs among ``parsed``
    changes ((row dict, spec, before, after) tuples), in statement order; appends warnings."""
    rules = cascade_rules(spark, cfg)
    work = [((d["schema_name"], d["table_name"]), d["event_type"], before, after, d["seq"],
             d["seq"], 0) for d, _, before, after in parsed
            if d["event_type"] in (DELETE, UPDATE)]
    relevant = [r for r in rules if any(
        p == r.parent and _rule_for(r, ev, b, a) for p, ev, b, a, *_ in work)]
    if cascade is False or not relevant:
        if relevant:
            warnings.append("--no-cascade: children changed by ON DELETE / ON UPDATE rules of "
                            + ", ".join(r.name for r in relevant) + " are not restored")
        return []
    out: list[Child] = []
    done: set[tuple[str, str, str]] = set()
    partial_checked: set[tuple[str, str]] = set()
    while work:
        parent, event, values, after, at_seq, parent_seq, depth = work.pop(0)
        for rule in rules:
            action = _rule_for(rule, event, values, after) if rule.parent == parent else None
            if action is None or depth >= _MAX_DEPTH:
                continue
            if event == UPDATE and action == "CASCADE":
                continue  # the undo's parent UPDATE cascades on the target itself
            found = _children_at(spark, cfg, rule, values or {}, at_seq)
            if rule.child not in partial_checked:
                partial_checked.add(rule.child)
                if not lake.starts_at_creation(spark, cfg, *rule.child):
                    warnings.append(
                        f"{rule.child[0]}.{rule.child[1]}: silver's history of this child "
                        "table does not start at its creation: children of "
                        f"{parent[0]}.{parent[1]} whose last image is older than the lake "
                        "cannot be restored")
            set_columns = rule.child_columns if action == "SET NULL" else ()
            for key, child_values, spec, seq in found:
                ident = (rule.child[0], rule.child[1], key)
                if ident in done:
                    continue
                done.add(ident)
                out.append(Child(rule.child[0], rule.child[1], key, child_values, spec,
                                 parent_seq, seq, set_columns))
                if not set_columns:
                    work.append((rule.child, DELETE, child_values, None, at_seq, parent_seq,
                                 depth + 1))
    return out
