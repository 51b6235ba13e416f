"""``binlake flashback``: SQL undoing a selection of row changes, newest first.

Per change: INSERT → ``DELETE … LIMIT 1``, DELETE → ``INSERT``, UPDATE → ``UPDATE`` back to the
before image; one transaction per source transaction (GTID, else the transaction's start
position), transactions newest first, statements inside each reversed. Every DELETE and
UPDATE matches the row on *all* columns the change left (``<=>``, NULL-safe), so an undo
touches the row only while it still equals that image.

Conflicts are found in the lake before any SQL runs: a selected row (by key) that a later,
unselected change touched is reported and its undo left out. ``--apply`` also checks each
statement's affected-row count on the target and rolls back a transaction whose row moved
since (reported as a conflict).

Foreign-key cascades (:mod:`pipelines.history.cascade`): undoing a parent's DELETE also inserts
the child rows InnoDB's unlogged ``ON DELETE CASCADE`` removed, from their last images, and
undoing a parent's DELETE or key UPDATE sets back the FK columns ``SET NULL`` cleared.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

from pipelines.config import Config
from pipelines.lake.delta_ops import sql_string
from pipelines.errors import ConfigError
from pipelines.history import lake
from pipelines.history.images import (SCRIPT_PREAMBLE, JsonReadings, reread, sql_literal,
                                      text_json_columns)
from pipelines.silver.image_values import pk_values_of, raw_values
from pipelines.history.selection import Selection, apply_selection
from pipelines.silver.naming import TableSpec
from pipelines.vocabulary import DELETE, INSERT, UPDATE, quote_ident

FK_ORIGINS = ("fk_cascade", "fk_set_null")  # silver's origins of derived FK actions
# not undone as changes of their own: FK actions (with their cause, by the cascade), and an
# ADD COLUMN's fill of the existing rows (part of the DDL, which flashback never undoes)
NOT_UNDONE = (*FK_ORIGINS, "ddl")

__all__ = ["Statement", "UndoTransaction", "Conflict", "FlashbackPlan", "plan_flashback",
           "undo_statement", "render_script", "apply_plan", "insert_sql",
           "child_sql"]


@dataclass(frozen=True)
class Statement:
    sql: str
    table: tuple[str, str]
    key: str  # pk_values of the row the statement touches
    seq: int


@dataclass
class UndoTransaction:
    label: str  # GTID, or file:trx_pos
    last_seq: int
    statements: list[Statement] = field(default_factory=list)


@dataclass(frozen=True)
class Conflict:
    table: tuple[str, str]
    key: str
    seq: int
    gtid: str | None
    event_type: str

    def describe(self) -> str:
        return (f"conflict: {self.table[0]}.{self.table[1]} pk_values={self.key!r} was changed "
                f"later ({self.event_type} at seq {self.seq}, gtid {self.gtid}); its undo is "
                "left out")


@dataclass
class FlashbackPlan:
    transactions: list[UndoTransaction] = field(default_factory=list)  # newest first
    conflicts: list[Conflict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    changes: int = 0

    @property
    def statements(self) -> int:
        return sum(len(t.statements) for t in self.transactions)


def _table_ref(schema: str, table: str) -> str:
    return f"{quote_ident(schema)}.{quote_ident(table)}"


def _match(spec: TableSpec, values: dict[str, str]) -> str:
    conds = [f"{quote_ident(c.name)} <=> {sql_literal(c, values[c.name], compare=True)}"
             for c in spec.columns if c.name in values]
    return " AND ".join(conds) or "1=0"


def insert_sql(schema: str, table: str, spec: TableSpec, values: dict[str, str],
               generated: frozenset[str] = frozenset()) -> str:
    """``INSERT`` of the values (generated columns left to the server)."""
    cols = [c for c in spec.columns if c.name in values and c.name not in generated]
    return (f"INSERT INTO {_table_ref(schema, table)} ("
            + ", ".join(quote_ident(c.name) for c in cols) + ") VALUES ("
            + ", ".join(sql_literal(c, values[c.name]) for c in cols) + ")")


def undo_statement(schema: str, table: str, event_type: str, spec: TableSpec,
                   before: dict[str, str] | None, after: dict[str, str] | None,
                   generated: frozenset[str] = frozenset()) -> str:
    """The statement undoing one change (images as :func:`raw_values` dicts); generated
    columns are matched but never assigned."""
    ref = _table_ref(schema, table)
    if event_type == INSERT:
        return f"DELETE FROM {ref} WHERE {_match(spec, after or {})} LIMIT 1"
    if event_type == DELETE:
        return insert_sql(schema, table, spec, before or {}, generated)
    if event_type == UPDATE:
        sets = ", ".join(f"{quote_ident(c.name)} = {sql_literal(c, before[c.name])}"
                         for c in spec.columns
                         if before and c.name in before and c.name not in generated)
        # A MINIMAL after image holds the changed columns only: the others still have their
        # before values, the primary key included.
        current = {**(before or {}), **(after or {})}
        return f"UPDATE {ref} SET {sets} WHERE {_match(spec, current)} LIMIT 1"
    raise ConfigError(f"cannot undo event type {event_type}")


def child_sql(child, generated: frozenset[str] = frozenset()) -> str:
    """The statement restoring one cascade child (:class:`~pipelines.history.cascade.Child`):
    its INSERT, or the UPDATE setting its FK columns back where SET NULL left them NULL."""
    if not child.set_columns:
        return insert_sql(child.schema, child.table, child.spec, child.values, generated)
    sets = ", ".join(f"{quote_ident(c)} = {sql_literal(_column(child.spec, c), child.values[c])}"
                     for c in child.set_columns)
    return (f"UPDATE {_table_ref(child.schema, child.table)} SET {sets} WHERE "
            f"{_match(child.spec, child.current())} LIMIT 1")


def _column(spec: TableSpec, name: str):
    for c in spec.columns:
        if c.name == name:
            return c
    raise ConfigError(f"foreign-key column {name} is not in the table's columns")


def generated_columns(spark, cfg: Config) -> dict[tuple[str, str], frozenset[str]]:
    """Generated columns per table, from the latest snapshot that has the table."""
    from pipelines.silver.snapshot_store import load_snapshots

    out: dict[tuple[str, str], frozenset[str]] = {}
    for snap in load_snapshots(spark, cfg):
        for key, ts in snap.tables.items():
            out[key] = frozenset(c.name for c in ts.columns if c.generated)
    return out


def _incomplete(d: dict[str, Any], spec: TableSpec, before: dict[str, str] | None,
                generated: frozenset[str]) -> str | None:
    if d["event_type"] == INSERT or before is None:
        return None
    missing = [c.name for c in spec.columns if c.name not in before and c.name not in generated]
    if not missing:
        return None
    return (f"{d['schema_name']}.{d['table_name']} pk_values={d['pk_values']!r} at seq "
            f"{d['seq']}: the before image lacks {', '.join(missing)} (binlog_row_image "
            "MINIMAL/NOBLOB): those columns are not restored")


def pk_names(spec: TableSpec) -> list[str]:
    return [spec.columns[i].name for i in spec.pk]


def _keys(event_type: str, pk_values: str, spec: TableSpec,
          after: dict[str, str] | None) -> set[str]:
    keys = {pk_values}
    if event_type == UPDATE and after is not None:
        keys.add(pk_values_of(after, pk_names(spec)))
    return keys


def _later_changes(spark, cfg: Config, touched: dict[tuple[str, str, str], int],
                   selected: set[int], causes: set[tuple[str, str, int]] = frozenset()
                   ) -> list[Conflict]:
    """Unselected changes after the first selected change of each touched row. The FK
    actions derived from a selected change (``causes``: its source, file, start_pos) are
    undone with it, not conflicts."""
    by_table: dict[tuple[str, str], list[str]] = {}
    for (s, t, k) in touched:
        by_table.setdefault((s, t), []).append(k)
    out: list[Conflict] = []
    silver = lake.silver(spark, cfg)
    for (s, t), keys in by_table.items():
        first = min(touched[(s, t, k)] for k in keys)
        hashes = ", ".join(f"'{hashlib.sha256(k.encode('utf-8')).hexdigest()}'" for k in keys)
        rows = (silver.where(f"schema_name = {sql_string(s)} AND table_name = {sql_string(t)}")
                .where(f"pk_hash IN ({hashes})").where(f"seq > {first}")
                .select("seq", "pk_values", "gtid", "event_type", "source_id", "binlog_file",
                        "start_pos", "origin").orderBy("seq").collect())
        seen: set[str] = set()
        for r in rows:
            k = r["pk_values"]
            if (r["seq"] in selected or (s, t, k) not in touched or k in seen
                    or r["seq"] < touched[(s, t, k)]):
                continue
            if r["origin"] in FK_ORIGINS and (r["source_id"], r["binlog_file"],
                                              r["start_pos"]) in causes:
                continue
            if r["origin"] == "ddl":  # an ADD COLUMN's fill: the DDL, never undone
                continue
            seen.add(k)
            out.append(Conflict((s, t), k, r["seq"], r["gtid"], r["event_type"]))
    return out


def _drops(spark, cfg: Config) -> list[tuple[int, tuple[str, str], frozenset[str]]]:
    """Every ``ALTER TABLE … DROP COLUMN`` silver recorded: (position key, table, columns)."""
    from pipelines.lake.tables import Lake
    from pipelines.silver.derive import dropped_columns
    from pipelines.silver.naming import position_key
    from pipelines.silver.renames import load_ddl_rows

    out = []
    for _source, file, pos, schema, query in load_ddl_rows(spark, Lake.of(cfg)):
        found = dropped_columns(query, schema)
        if found is not None:
            out.append((position_key(file, pos), found[0], frozenset(found[1])))
    return out


def _dropped_since(facts, drops, name: tuple[str, str], seq: int) -> frozenset[str]:
    """Pure: the columns a change of table ``name`` at ``seq`` names that a later DROP COLUMN
    removed (under the name renames gave the table by then; column names of today)."""
    from pipelines.silver.renames import forward

    gone: set[str] = set()
    for pos, table, columns in drops:
        if pos > seq and forward([f for f in facts if f.pos < pos], name, seq)[0] == table:
            gone |= columns
    return frozenset(gone)


def _without(spec: TableSpec, gone: frozenset[str]) -> TableSpec:
    return spec.over([c for c in spec.columns if c.name not in gone])


def plan_flashback(spark, cfg: Config, sel: Selection, *, cascade: bool | None = None
                   ) -> FlashbackPlan:
    """Undo transactions for ``sel`` (newest first), conflicts and cascade warnings."""
    from pipelines.history import cascade as cascade_mod

    # The FK actions silver derived (docs/silver.md) are undone with their cause, by the
    # cascade module (children re-inserted after their parent; ON UPDATE CASCADE by the
    # target's own rule), not as changes of their own. A TRUNCATE's derived DELETEs are.
    from pipelines.lake.tables import Lake
    from pipelines.silver.renames import forward, lineage, load_renames, renamed, segments_where

    # A renamed table: --table NEW selects the changes made under its earlier
    # names too, and every change is undone under the name and columns it has today.
    facts = load_renames(spark, Lake.of(cfg))
    df = lake.silver(spark, cfg)
    if sel.table:
        segments = lineage(facts, *sel.table, 1 << 62)
        if len(segments) > 1:
            df, sel = df.where(segments_where(segments)), replace(sel, table=None)
    df = apply_selection(df, sel).where(
        "coalesce(origin, 'binlog') NOT IN (" + ", ".join(f"'{o}'" for o in NOT_UNDONE) + ")")
    naming = lake.naming_plan(spark, cfg)
    changes = lake.with_specs(spark, cfg, df, naming)
    drops = _drops(spark, cfg)
    if facts or drops:
        from pipelines.history.reconstruct import _renamed_spec

        moved = []
        for d, spec in changes:
            made_as = (d["schema_name"], d["table_name"])
            name, maps = forward(facts, made_as, d["seq"])
            if maps or name != made_as:
                d = {**d, "schema_name": name[0], "table_name": name[1], "__maps": maps,
                     "__made_as": made_as}
                spec = _renamed_spec(spec, maps)
            gone = _dropped_since(facts, drops, made_as, d["seq"])
            if gone:  # the target has no such column: its undo names only today's
                d = {**d, "__gone": gone}
                spec = _without(spec, gone)
            moved.append((d, spec))
        changes = moved
    plan = FlashbackPlan(changes=len(changes))
    if not changes:
        return plan
    generated = generated_columns(spark, cfg)
    selected = {d["seq"] for d, _ in changes}
    touched: dict[tuple[str, str, str], int] = {}
    parsed = []
    readings = JsonReadings.of_plan(naming)
    for d, spec in changes:
        # MariaDB JSON values read as the spec writing the undo renders them
        was = readings.rendered(d.get("schema_version"),
                                *d.get("__made_as", (d["schema_name"], d["table_name"])))
        want = text_json_columns(spec.columns)
        before = reread(raw_values(d["row_before"]), was, want)
        after = reread(raw_values(d["row_after"]), was, want)
        if d.get("__maps"):
            before = renamed(before, d["seq"], d["__maps"])
            after = renamed(after, d["seq"], d["__maps"])
        if d.get("__gone"):
            before, after = (None if v is None else
                             {k: x for k, x in v.items() if k not in d["__gone"]}
                             for v in (before, after))
        for k in _keys(d["event_type"], d["pk_values"], spec, after):
            key = (d["schema_name"], d["table_name"], k)
            touched[key] = min(touched.get(key, d["seq"]), d["seq"])
        parsed.append((d, spec, before, after))
    for s, t in sorted({(d["schema_name"], d["table_name"]) for d, _ in changes}):
        held = lake.quarantined(spark, cfg, s, t)
        if held:
            plan.warnings.append(f"{s}.{t}: {len(held)} change(s) are in quarantine, not in "
                                 "silver: changes among them are neither undone nor seen as "
                                 "conflicts")
    from pipelines.silver.derived import load_fk_gaps

    lo, hi = min(selected), max(selected) + 1
    plan.warnings += [g.describe() + " (their undo cannot be written)"
                      for g in load_fk_gaps(spark, cfg) if g.overlaps(lo, hi)]
    restored = cascade_mod.children_to_restore(spark, cfg, parsed, plan.warnings, cascade)
    for child in restored:
        key = (child.schema, child.table, child.key)
        touched[key] = min(touched.get(key, child.parent_seq), child.parent_seq)
    causes = {(d["source_id"], d["binlog_file"], d["start_pos"]) for d, _ in changes}
    plan.conflicts = _later_changes(spark, cfg, touched, selected, causes)
    blocked = {(c.table[0], c.table[1], c.key) for c in plan.conflicts}
    txns: dict[str, UndoTransaction] = {}
    order: list[str] = []
    children_of: dict[int, list] = {}
    for child in restored:
        children_of.setdefault(child.parent_seq, []).append(child)
    for d, spec, before, after in parsed:
        label = d["gtid"] or f"{d['binlog_file']}:{d['trx_pos']}"
        txn = txns.get(label)
        if txn is None:
            txn = txns[label] = UndoTransaction(label, d["seq"])
            order.append(label)
        txn.last_seq = max(txn.last_seq, d["seq"])
        s, t = d["schema_name"], d["table_name"]
        keys = _keys(d["event_type"], d["pk_values"], spec, after)
        if any((s, t, k) in blocked for k in keys):
            continue
        gen = generated.get((s, t), frozenset())
        note = _incomplete(d, spec, before, gen)
        if note:
            plan.warnings.append(note)
        stmts = [Statement(undo_statement(s, t, d["event_type"], spec, before, after, gen),
                           (s, t), d["pk_values"], d["seq"])]
        for child in children_of.get(d["seq"], []):
            if (child.schema, child.table, child.key) in blocked:
                continue
            stmts.append(Statement(child_sql(child, generated.get((child.schema, child.table),
                                                                  frozenset())),
                                   (child.schema, child.table), child.key, d["seq"]))
        # Reversed later: the parent's INSERT must come before its children's.
        txn.statements.extend(reversed(stmts))
    for label in order:
        txns[label].statements.reverse()
    plan.transactions = sorted((txns[x] for x in order if txns[x].statements),
                               key=lambda x: -x.last_seq)
    return plan


def render_script(plan: FlashbackPlan) -> str:
    """The script for the ``mariadb``/``mysql`` client, one transaction per source one."""
    lines = ["-- binlake flashback: "
             f"{plan.changes} change(s), {plan.statements} statement(s), "
             f"{len(plan.conflicts)} conflict(s) left out", SCRIPT_PREAMBLE.rstrip("\n")]
    for c in plan.conflicts:
        lines.append("-- " + c.describe())
    for txn in plan.transactions:
        lines.append(f"-- undo of {txn.label}")
        lines.append("START TRANSACTION;")
        lines += [s.sql + ";" for s in txn.statements]
        lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


@dataclass
class ApplyReport:
    applied: int = 0
    rolled_back: list[str] = field(default_factory=list)


def apply_plan(plan: FlashbackPlan, conn) -> ApplyReport:
    """Run the plan on ``conn`` (pymysql); a transaction in which a statement does not affect
    exactly one row is rolled back and reported (its row changed on the target)."""
    import pymysql

    report = ApplyReport()
    with conn.cursor() as cur:
        for stmt in SCRIPT_PREAMBLE.strip().split("\n"):
            cur.execute(stmt.rstrip(";"))
        for txn in plan.transactions:
            cur.execute("START TRANSACTION")
            failed = None
            for s in txn.statements:
                try:
                    n = cur.execute(s.sql)
                except pymysql.err.MySQLError as exc:
                    failed = f"{s.table[0]}.{s.table[1]} pk_values={s.key!r}: {exc.args[-1]}"
                    break
                if n != 1:
                    failed = (f"{s.table[0]}.{s.table[1]} pk_values={s.key!r}: the row no "
                              "longer equals the image the change left")
                    break
            if failed:
                cur.execute("ROLLBACK")
                report.rolled_back.append(f"{txn.label}: {failed}")
            else:
                cur.execute("COMMIT")
                report.applied += 1
    return report
