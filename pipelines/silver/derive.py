"""Pure: the row changes the server made without logging them, folded from silver's own.

InnoDB applies ``ON DELETE`` / ``ON UPDATE`` ``CASCADE`` and ``SET NULL`` to child rows below
the binlog (MariaDB; MySQL before 9.6), and ``TRUNCATE TABLE`` is one QUERY event: the rows
they change are in no rows event. :class:`Fold` replays a table group's changes in binlog
order (the alive rows per key: the last image) and, at each cause the run holds, emits the
row changes the server made (docs/silver.md "Derived row changes"):

- ``TRUNCATE TABLE t``: a DELETE of every alive row of t (``origin`` ``truncate``);
- a parent DELETE, or an UPDATE changing the referenced columns, under a rule of the schema
  valid at that point (``rules_at``): the child rows whose FK columns equal the parent's old
  values are deleted (``CASCADE`` on delete, ``fk_cascade``), get the new values (``CASCADE``
  on update, ``fk_cascade``) or NULL (``SET NULL``, ``fk_set_null``); their own children
  follow (transitively, ``MAX_DEPTH`` levels).

A derived row carries its cause's place (binlog_file, start_pos, end_pos, gtid, timestamps,
statement) and ``row_in_event`` numbered after the cause event's own rows (n, n+1, …; a QUERY
event has none, so from 0); its ``seq`` is the cause's ``file_number * 2^32 + start_pos +
row_in_event`` clamped to ``end_pos - 1``, so it sorts after the cause and before the next
event (ties broken by ``row_in_event``). Where the binlog itself carries a child's change
(the same transaction logs a change of that key after the cause: MySQL 9.6's SQL-layer
foreign keys), none is derived.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from pipelines.binlog.names import position_key
from pipelines.silver.column_defaults import Underived, existing_rows_value
from pipelines.silver.ddl import _QUALIFIED, _clean, _qualify, clauses
from pipelines.silver.image_values import pk_values_of, raw_values
from pipelines.silver.partitions import holds
from pipelines.vocabulary import DELETE, UPDATE

__all__ = ["Rule", "Fold", "AddedColumn", "truncated_table", "added_columns", "underived_columns",
           "partition_change",
           "cascading_rules",
           "MAX_DEPTH", "TRUNCATE", "ADD_COLUMNS", "DROP_COLUMNS", "dropped_columns"]

MAX_DEPTH = 8  # levels of children followed from one parent change (as flashback)
TRUNCATE = "TRUNCATE"  # event_type of the marker rows a TRUNCATE's QUERY event becomes
ADD_COLUMNS = "ADD_COLUMNS"  # … and an ALTER TABLE's ADD COLUMN with a value for old rows
RENAME = "RENAME"  # … and a rename (``old``, ``new``, ``columns``): the alive rows move along
DROP_COLUMNS = "DROP_COLUMNS"  # … and ALTER TABLE … DROP COLUMN: the alive rows lose them
_TRUNCATE = re.compile(rf"^TRUNCATE\s+(?:TABLE\s+)?{_QUALIFIED}\s*;?\s*$", re.I)
_ACTIONS = ("CASCADE", "SET NULL")


def truncated_table(query: str, default_schema: str | None) -> tuple[str, str] | None:
    """(schema, table) of a ``TRUNCATE [TABLE] t`` statement, else None."""
    m = _TRUNCATE.match(_clean(query or ""))
    return _qualify(m.group(1), m.group(2), default_schema) if m else None


@dataclass(frozen=True)
class AddedColumn:
    """A column ``ALTER TABLE … ADD`` gives the existing rows a value: ``value`` in silver's
    JSON form; placed ``FIRST``, ``AFTER`` a column, or last."""

    name: str
    value: str
    after: str | None = None
    first: bool = False


_HEAD = rf"^ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+{_QUALIFIED}\s+"  # up to the clauses
_ALTER_HEAD = re.compile(_HEAD, re.I)
_ADD = re.compile(r"^ADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?(`(?:[^`]|``)+`|[\w$]+)\s+"
                  r"([a-z]+)\b(.*)$", re.I | re.S)
_NOT_COLUMNS = {"INDEX", "KEY", "CONSTRAINT", "PRIMARY", "UNIQUE", "FOREIGN", "FULLTEXT",
                "SPATIAL", "PARTITION", "CHECK", "PERIOD", "SYSTEM", "COLUMN"}
_POSITION = re.compile(r"\b(?:(FIRST)|AFTER\s+(`(?:[^`]|``)+`|[\w$]+))\s*$", re.I)


_PARTITION = re.compile(_HEAD + r"(DROP|TRUNCATE)\s+PARTITION\s+(.*?)\s*;?\s*$", re.I | re.S)


def partition_change(query: str, default_schema: str | None
                     ) -> tuple[tuple[str, str], str, list[str]] | None:
    """(table, ``DROP``/``TRUNCATE``, partition names or ``["ALL"]``) of an ``ALTER TABLE
    … DROP|TRUNCATE PARTITION`` statement, else None."""
    m = _PARTITION.match(_clean(query or ""))
    if not m:
        return None
    names = [_unquote(n.strip()) for n in m.group(4).split(",") if n.strip()]
    return (_qualify(m.group(1), m.group(2), default_schema), m.group(3).upper(),
            ["ALL"] if [n.upper() for n in names] == ["ALL"] else names)


def _unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def added_columns(query: str, default_schema: str | None
                  ) -> tuple[tuple[str, str], list[AddedColumn]] | None:
    """The table and the columns an ``ALTER TABLE … ADD [COLUMN]`` fills in existing rows,
    each with the value they get in silver's form (``column_defaults``); None when the
    statement adds none whose value is known and not NULL."""
    found = _added(query, default_schema)
    if found is None:
        return None
    table, columns = found
    out = [AddedColumn(name, value, after, first) for name, value, after, first in columns
           if isinstance(value, str)]
    return (table, out) if out else None


def underived_columns(query: str, default_schema: str | None
                      ) -> tuple[tuple[str, str], list[tuple[str, str]]] | None:
    """The table and the (column, reason) an ``ALTER TABLE … ADD`` gave the existing rows a
    value of that silver does not derive (``column_defaults.Underived``), else None."""
    found = _added(query, default_schema)
    if found is None:
        return None
    table, columns = found
    out = [(name, value.reason) for name, value, _, _ in columns if isinstance(value, Underived)]
    return (table, out) if out else None


def _added(query: str, default_schema: str | None):
    """(table, [(column, its existing rows' value, after, first)]) of an ALTER TABLE's ADD
    clauses, or None for another statement."""
    text = _clean(query or "")
    m = _ALTER_HEAD.match(text)
    if not m:
        return None
    out = []
    for clause in clauses(text[m.end():].rstrip(";")):
        a = _ADD.match(clause)
        if not a or a.group(1).upper() in _NOT_COLUMNS or clause[4:].lstrip()[:1] == "(":
            continue
        value = existing_rows_value(a.group(2), a.group(3))
        if value is None:
            continue  # NULL for the old rows: nothing changes in their images
        pos = _POSITION.search(a.group(3))
        out.append((_unquote(a.group(1)), value,
                    _unquote(pos.group(2)) if pos and pos.group(2) else None,
                    bool(pos and pos.group(1))))
    return _qualify(m.group(1), m.group(2), default_schema), out


_DROP = re.compile(r"^DROP\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?(`(?:[^`]|``)+`|[\w$]+)\s*$",
                   re.I | re.S)


def dropped_columns(query: str, default_schema: str | None
                    ) -> tuple[tuple[str, str], list[str]] | None:
    """The table and the columns an ``ALTER TABLE … DROP [COLUMN]`` removes (None when the
    statement drops none: indexes, keys, constraints and partitions are not columns)."""
    text = _clean(query or "")
    m = _ALTER_HEAD.match(text)
    if not m:
        return None
    out = []
    for clause in clauses(text[m.end():].rstrip(";")):
        d = _DROP.match(clause.strip())
        if d and d.group(1).upper() not in _NOT_COLUMNS:
            out.append(_unquote(d.group(1)))
    return (_qualify(m.group(1), m.group(2), default_schema), out) if out else None


def _with_columns(values: dict[str, str], added: list[AddedColumn]) -> dict[str, str]:
    """``values`` with the added columns in their places."""
    items = list(values.items())
    for col in added:
        if col.name in values:
            continue
        entry = (col.name, col.value)
        if col.first:
            items.insert(0, entry)
        elif col.after is not None and col.after in [k for k, _ in items]:
            items.insert([k for k, _ in items].index(col.after) + 1, entry)
        else:
            items.append(entry)
    return dict(items)


@dataclass(frozen=True)
class Rule:
    """One FOREIGN KEY with a cascading action, as a snapshot recorded it."""

    name: str
    child: tuple[str, str]
    child_columns: tuple[str, ...]
    parent: tuple[str, str]
    parent_columns: tuple[str, ...]
    delete_rule: str
    update_rule: str


def cascading_rules(fks: Iterable[Any]) -> list[Rule]:
    """The rules among a snapshot's FK rows (``source.model.ForeignKey``) whose ON DELETE
    or ON UPDATE makes the server change child rows (CASCADE, SET NULL)."""
    groups: dict[tuple[str, str, str, str], list[Any]] = {}
    for f in fks:
        groups.setdefault((f.constraint_schema, f.table_schema, f.table_name,
                           f.constraint_name), []).append(f)
    out = []
    for (_, _, _, name), cols in sorted(groups.items()):
        cols.sort(key=lambda f: f.ordinal_position)
        f0 = cols[0]
        if f0.delete_rule not in _ACTIONS and f0.update_rule not in _ACTIONS:
            continue
        out.append(Rule(name, (f0.table_schema, f0.table_name),
                        tuple(f.column_name for f in cols),
                        (f0.referenced_table_schema, f0.referenced_table_name),
                        tuple(f.referenced_column_name for f in cols),
                        f0.delete_rule, f0.update_rule))
    return out


def _text(raw: str | None) -> str | None:
    """A value's comparable text (JSON strings unquoted); None for NULL."""
    if raw is None or raw == "null":
        return None
    return json.loads(raw) if raw.startswith('"') else raw


def _image(values: dict[str, str]) -> str:
    return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {v}"
                           for k, v in values.items()) + "}"


@dataclass
class _Row:
    """An alive row: its last image (text and raw values) and naming facts."""

    image: str
    values: dict[str, str]
    pk_kind: str | None
    schema_version: str | None


@dataclass
class Fold:
    """Replays changes (``feed``, in binlog order) and yields the derived ones.

    ``pk_names``: a table's primary-key columns (to key an UPDATE that moves its row; None or
    missing: the key is taken as unchanged, or every column for ``all_columns`` tables).
    ``rules_at(source, parent, seq)``: the rules valid at that point with ``parent`` as their
    parent. ``causes``: whether a row (dict) is a cause this run derives from (its file is
    in the run). ``rows_in_event``: (source, file, start_pos) → the event's logged row count.
    ``logged``: (gtid, schema, table, pk_values) → seqs of logged changes, to derive none
    that the binlog carries.
    """

    pk_names: dict[tuple[str, str], list[str]]
    rules_at: Callable[[str, tuple[str, str], int], list[Rule]]
    causes: Callable[[dict], bool]
    rows_in_event: dict[tuple[str, str, int], int] = field(default_factory=dict)
    logged: dict[tuple[Any, ...], list[int]] = field(default_factory=dict)
    state: dict[tuple[str, str, str], dict[str, list[_Row]]] = field(default_factory=dict)
    _counter: dict[tuple[str, str, int], int] = field(default_factory=dict)
    # (table, FK columns) → their values' texts → keys: the children of a parent value,
    # built at a table's first cascade and kept up to date from then on
    _index: dict[tuple, dict[tuple, set[str]]] = field(default_factory=dict)
    _indexed: dict[tuple[str, str, str], list[tuple[str, ...]]] = field(default_factory=dict)

    def feed(self, rows: Iterable[dict]) -> Iterator[dict]:
        """The derived rows of ``rows`` (silver rows and TRUNCATE markers, sorted by seq
        and row_in_event), in the order they take."""
        for r in rows:
            table = (r["source_id"], r["schema_name"], r["table_name"])
            if r["event_type"] == TRUNCATE:
                if self.causes(r) and r.get("partition") is not None:
                    yield from self._drop_partition(r, table, r["partition"])
                elif self.causes(r):
                    alive = self.state.pop(table, {})
                    for cols in self._indexed.get(table, ()):
                        self._index[(table, cols)] = {}
                    origin = r.get("derived_origin", "truncate")  # PARTITION ALL: partition
                    for key, entries in alive.items():
                        for row in entries:
                            yield self._derived(r, table, key, row, None, origin, [])
                continue
            if r["event_type"] == RENAME:
                self._rename(tuple(r["old"]), tuple(r["new"]), dict(r["columns"]))
                continue
            if r["event_type"] == DROP_COLUMNS:
                self._drop((r["schema_name"], r["table_name"]), set(r["dropped"]))
                continue
            if r["event_type"] == ADD_COLUMNS:
                if self.causes(r):
                    yield from self._fill(r, table, r["added"])
                continue
            before, after = raw_values(r["row_before"]), raw_values(r["row_after"])
            self._apply(table, r["pk_values"], r, before, after)
            if (r["event_type"] in (DELETE, UPDATE) and self.causes(r)
                    and (r.get("origin") or "binlog") == "binlog"):
                yield from self._cascade(r, (r["schema_name"], r["table_name"]), before,
                                         after)

    def _drop_partition(self, cause: dict, table, spec: dict) -> Iterator[dict]:
        """A DELETE of every alive row the dropped or truncated partitions held."""
        for key, entries in sorted(self.state.get(table, {}).items()):
            for row in list(entries):
                if holds(spec, row.values):
                    yield self._derived(cause, table, key, row, None, "partition", [])
                    self._apply(table, key, {"pk_kind": row.pk_kind}, row.values, None)

    def _fill(self, cause: dict, table, added: list[AddedColumn]) -> Iterator[dict]:
        """An UPDATE of every alive row giving the added columns their value (``ddl``)."""
        for key, entries in sorted(self.state.get(table, {}).items()):
            for row in list(entries):
                values = _with_columns(row.values, added)
                changed = [c.name for c in added if c.name not in row.values]
                if not changed:
                    continue
                version = cause.get("schema_version") or row.schema_version
                d = self._derived(cause, table, key, row, values, "ddl", changed)
                d["schema_version"] = version
                yield d
                self._apply(table, key, {"pk_kind": row.pk_kind, "schema_version": version},
                            row.values, values)

    def _rename(self, old: tuple[str, str], new: tuple[str, str],
                columns: dict[str, str]) -> None:
        """A table's alive rows under its new name (and column names), so a later TRUNCATE,
        ADD COLUMN or FK action of the new name reaches the rows made under the old one."""
        for table in [t for t in self.state if t[1:] in (old, new)]:
            for cols in self._indexed.pop(table, ()):
                self._index.pop((table, cols), None)
        for table in [t for t in self.state if t[1:] == old]:
            rows = self.state.pop(table)
            if columns:
                for entries in rows.values():
                    for i, row in enumerate(entries):
                        values = {columns.get(k, k): v for k, v in row.values.items()}
                        entries[i] = _Row(_image(values), values, row.pk_kind,
                                          row.schema_version)
            self.state[(table[0], *new)] = rows

    def _drop(self, name: tuple[str, str], dropped: set[str]) -> None:
        """The alive rows of ``name`` without the dropped columns (a table without PRIMARY
        KEY keys its rows by every column: their keys change too)."""
        for table in [t for t in self.state if t[1:] == name]:
            for cols in self._indexed.pop(table, ()):
                self._index.pop((table, cols), None)
            rows: dict[str, list[_Row]] = {}
            for key, entries in self.state[table].items():
                for row in entries:
                    values = {k: v for k, v in row.values.items() if k not in dropped}
                    new = _Row(_image(values), values, row.pk_kind, row.schema_version)
                    at = pk_values_of(values, list(values)) if row.pk_kind == "all_columns" \
                        else key
                    rows.setdefault(at, []).append(new)
            self.state[table] = rows

    # -- state ------------------------------------------------------------------------------

    def _key_after(self, table: tuple[str, str, str], key: str, after: dict[str, str],
                   pk_kind: str | None) -> str:
        if pk_kind == "all_columns":
            return pk_values_of(after, list(after))
        names = self.pk_names.get(table[1:])
        return pk_values_of(after, names) if names else key

    def _apply(self, table, key: str, r: dict, before, after) -> None:
        rows = self.state.setdefault(table, {})
        if before is not None:
            entries = rows.get(key)
            if entries:
                self._unindex(table, key, entries.pop(), entries)
                if not entries:
                    del rows[key]
        if after is not None:
            if before is not None and r.get("absent_columns"):
                after = {**before, **after}  # a MINIMAL after image: the rest unchanged
            # a logged key change names its new key (silver's pk_values_after): the table's
            # key columns need no snapshot then
            new_key = key if before is None else (
                r.get("pk_values_after") or self._key_after(table, key, after, r.get("pk_kind")))
            row = _Row(_image(after), after, r.get("pk_kind"), r.get("schema_version"))
            if r.get("pk_kind") == "all_columns":
                rows.setdefault(new_key, []).append(row)
            else:
                for old in rows.get(new_key, ()):
                    self._unindex(table, new_key, old, [])
                rows[new_key] = [row]
            for cols in self._indexed.get(table, ()):
                self._index[(table, cols)].setdefault(_values(row, cols), set()).add(new_key)

    def _unindex(self, table, key: str, row: _Row, left: list[_Row]) -> None:
        """Drop ``row`` of ``key`` from the indexes (kept while another entry of the key,
        ``left``, has the same values)."""
        for cols in self._indexed.get(table, ()):
            v = _values(row, cols)
            if any(_values(o, cols) == v for o in left):
                continue
            keys = self._index[(table, cols)].get(v)
            if keys is not None:
                keys.discard(key)

    def _children(self, table, cols: tuple[str, ...], wanted: tuple) -> list[tuple[str, _Row]]:
        """The alive rows of ``table`` whose ``cols`` hold ``wanted``."""
        if (table, cols) not in self._index:
            index: dict[tuple, set[str]] = {}
            for key, entries in self.state.get(table, {}).items():
                for row in entries:
                    index.setdefault(_values(row, cols), set()).add(key)
            self._index[(table, cols)] = index
            self._indexed.setdefault(table, []).append(cols)
        rows = self.state.get(table, {})
        return [(k, row) for k in sorted(self._index[(table, cols)].get(wanted, ()))
                for row in rows.get(k, ()) if _values(row, cols) == wanted]

    # -- cascades ---------------------------------------------------------------------------

    def _cascade(self, cause: dict, parent: tuple[str, str], before, after) -> Iterator[dict]:
        source = cause["source_id"]
        work = [(parent, before, after, 0)]
        while work:
            table, old, new, depth = work.pop(0)
            if depth >= MAX_DEPTH or old is None:
                continue
            for rule in self.rules_at(source, table, cause["seq"]):
                action = _action(rule, old, new)
                if action is None:
                    continue
                wanted = tuple(_text(old.get(p)) for p in rule.parent_columns)
                if any(w is None for w in wanted):
                    continue
                child = (source, *rule.child)
                for key, row in self._children(child, rule.child_columns, wanted):
                    if self._carried(cause, child, key):
                        continue
                    if new is None and action == "CASCADE":
                        yield self._derived(cause, child, key, row, None, "fk_cascade", [])
                        self._apply(child, key, {"pk_kind": row.pk_kind}, row.values, None)
                        work.append((rule.child, row.values, None, depth + 1))
                        continue
                    values = dict(row.values)
                    for c, p in zip(rule.child_columns, rule.parent_columns):
                        values[c] = "null" if action == "SET NULL" else new.get(p, "null")
                    changed = [c for c in rule.child_columns if values[c] != row.values[c]]
                    origin = "fk_set_null" if action == "SET NULL" else "fk_cascade"
                    yield self._derived(cause, child, key, row, values, origin, changed)
                    self._apply(child, key, {"pk_kind": row.pk_kind,
                                             "schema_version": row.schema_version},
                                row.values, values)
                    work.append((rule.child, row.values, values, depth + 1))

    def _carried(self, cause: dict, child: tuple[str, str, str], key: str) -> bool:
        """Whether the cause's transaction logs a later change of the child row itself."""
        if cause.get("gtid") is None:
            return False
        seqs = self.logged.get((cause["gtid"], *child, key), ())
        return any(s > cause["seq"] for s in seqs)

    def _derived(self, cause: dict, table: tuple[str, str, str], key: str, row: _Row,
                 values: dict[str, str] | None, origin: str, changed: list[str]) -> dict:
        place = (cause["source_id"], cause["binlog_file"], cause["start_pos"])
        n = self._counter.get(place, self.rows_in_event.get(place, 0))
        self._counter[place] = n + 1
        seq = position_key(cause["binlog_file"], min(cause["start_pos"] + n, cause["end_pos"] - 1))
        after_key = None if values is None else self._key_after(table, key, values,
                                                                row.pk_kind)
        return {
            **{c: cause.get(c) for c in ("source_id", "server_id", "server_uuid",
                                         "binlog_file", "start_pos", "end_pos",
                                         "event_timestamp", "gtid", "connection_id",
                                         "query_text", "commit_ts_us")},
            "row_in_event": n, "seq": seq, "schema_name": table[1], "table_name": table[2],
            "event_type": DELETE if values is None else UPDATE, "pk_values": key,
            "pk_kind": row.pk_kind, "changed_columns": json.dumps(changed) if values else None,
            "row_before": row.image, "row_after": None if values is None else _image(values),
            "absent_columns": None, "schema_version": row.schema_version, "origin": origin,
            "pk_values_after": after_key if after_key != key else None,
        }


def _values(row: _Row, cols: tuple[str, ...]) -> tuple:
    return tuple(_text(row.values.get(c)) for c in cols)


def _action(rule: Rule, old: dict[str, str], new: dict[str, str] | None) -> str | None:
    """What InnoDB does to ``rule``'s children for the parent's change (old → new)."""
    if new is None:
        return rule.delete_rule if rule.delete_rule in _ACTIONS else None
    if rule.update_rule not in _ACTIONS:
        return None
    changed = any(p in new and _text(new[p]) != _text(old.get(p)) for p in rule.parent_columns)
    return rule.update_rule if changed else None
