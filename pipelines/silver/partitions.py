"""Pure: which rows an ``ALTER TABLE … DROP|TRUNCATE PARTITION p`` removed.

The statement is one QUERY event; the rows the partition held are in no rows event. They are
known when the table's partitioning is: :func:`partition_effects` follows every table's
``PARTITION BY`` through the DDL in binlog order (``CREATE TABLE`` and ``ALTER TABLE …
PARTITION BY`` set it; ``ADD``, ``DROP``, ``REORGANIZE``, ``COALESCE PARTITION`` and
``REMOVE PARTITIONING`` change it; renames move it) and turns each partition drop or truncate
into a :class:`PartitionEffect` whose ``spec`` says which rows the named partitions held
(:func:`holds`, evaluated on a row's last image by the fold, ``derive.Fold``).

Derived: ``RANGE`` and ``LIST`` of a column or of ``YEAR``/``MONTH``/``DAYOFMONTH``/
``TO_DAYS``/``TO_SECONDS`` of a column; ``RANGE COLUMNS`` and ``LIST COLUMNS`` over integer
and date/datetime values (string bounds only when they are dates: other strings compare by
collation); ``HASH`` of such an expression (the partition is ``|value mod n|``, NULL in
the first). Not derived, the effect carrying the ``reason`` instead (silver flags the table,
``fk_gaps``): ``KEY`` and ``LINEAR`` partitioning (the server's own hash), sub-partitions,
other expressions, a table whose ``CREATE TABLE`` is not in the binlogs, and ``EXCHANGE
PARTITION`` (rows swap with another table).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from pipelines.silver.ddl import (_ALTER, _CREATE, _DROP, _DROP_DB, _IDENT, _QUALIFIED,
                                  DROP_DATABASE, _clean, _qualify, _unquote, clauses,
                                  outside_quotes, parenthesised, tables_touched)
from pipelines.silver.renames import renames_in

__all__ = ["PartitionEffect", "Partitioning", "parse_partitioning", "partition_effects",
           "holds"]

_FUNCS = ("YEAR", "MONTH", "DAYOFMONTH", "DAY", "TO_DAYS", "TO_SECONDS")
_EXPR = re.compile(rf"^\s*(?:({'|'.join(_FUNCS)})\s*\(\s*({_IDENT})\s*\)|({_IDENT}))\s*$", re.I)
_BY = re.compile(r"\bPARTITION\s+BY\s+", re.I)
_METHOD = re.compile(r"^(LINEAR\s+)?(RANGE|LIST|HASH|KEY|SYSTEM_TIME)\b\s*(COLUMNS\b)?\s*", re.I)
_LIKE = re.compile(rf"^\(?\s*LIKE\s+{_QUALIFIED}\s*\)?\s*;?\s*$", re.I)
_PART_OP = re.compile(r"^(ADD|DROP|TRUNCATE|REORGANIZE|COALESCE|EXCHANGE|REMOVE|ANALYZE|CHECK|"
                      r"OPTIMIZE|REBUILD|REPAIR|DISCARD|IMPORT)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?"
                      r"PARTITION(?:S|ING)?\b\s*(.*)$", re.I | re.S)
_DEF = re.compile(rf"^PARTITION\s+({_IDENT})\s*(.*)$", re.I | re.S)
_LESS = re.compile(r"^VALUES\s+LESS\s+THAN\s*(MAXVALUE\b|\()", re.I)
_IN = re.compile(r"^VALUES\s+IN\s*\(", re.I)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)?$")
_INT = re.compile(r"^[-+]?\d+$")
MAXVALUE = "MAXVALUE"


@dataclass(frozen=True)
class Partitioning:
    """A table's ``PARTITION BY``: ``method`` (RANGE, LIST, HASH), ``func`` applied to
    ``columns[0]`` (None: the column itself; a COLUMNS method has no function), and the
    partitions in order: ``names`` with their ``bounds`` (RANGE: a tuple, MAXVALUE allowed;
    LIST: a list of tuples; HASH: none). ``reason``: why the rows of a partition cannot be
    known (then nothing else is set)."""

    method: str = ""
    columns: tuple[str, ...] = ()
    func: str | None = None
    names: tuple[str, ...] = ()
    bounds: tuple[Any, ...] = ()
    reason: str | None = None

    def spec(self, names: list[str]) -> dict[str, Any]:
        """What :func:`holds` needs to tell the rows of the partitions ``names``."""
        wanted = {x.lower() for x in names}
        return {"method": self.method, "columns": list(self.columns), "func": self.func,
                "bounds": [_jsonable(b) for b in self.bounds], "count": len(self.names),
                "chosen": [i for i, n in enumerate(self.names) if n.lower() in wanted]}


def _jsonable(bound):
    return [_jsonable(b) for b in bound] if isinstance(bound, (tuple, list)) else bound


@dataclass(frozen=True)
class PartitionEffect:
    """A ``DROP``/``TRUNCATE``/``EXCHANGE PARTITION`` at (source, file, pos) of ``table``:
    ``spec`` for :func:`holds` when its rows are known, else ``reason``."""

    source: str
    file: str
    pos: int
    table: tuple[str, str]
    verb: str
    names: tuple[str, ...]
    spec: dict[str, Any] | None = None
    reason: str | None = None


def parse_partitioning(text: str) -> Partitioning | None:
    """The ``PARTITION BY`` clause at the top level of a CREATE/ALTER TABLE statement (after
    its table name), or None when it has none."""
    at = _top_level(text, _BY)
    if at is None:
        return None
    rest = text[at:]
    m = _METHOD.match(rest)
    if not m:
        return Partitioning(reason=f"partitioning not understood: {rest[:60]!r}")
    linear, method, columns = m.group(1), m.group(2).upper(), m.group(3)
    rest = rest[m.end():]
    if method in ("KEY", "SYSTEM_TIME") or linear:
        return Partitioning(reason=f"{'LINEAR ' if linear else ''}{method} partitioning "
                                   "(the server's own placement)")
    if method == "HASH" and columns:
        return Partitioning(reason="partitioning not understood")
    inner, rest = parenthesised(rest)
    if inner is None:
        return Partitioning(reason="partitioning not understood")
    if columns:
        cols = tuple(_unquote(c.strip()) for c in clauses(inner))
        func = None
        if not all(re.fullmatch(_IDENT, c) or c.startswith("`") for c in clauses(inner)):
            return Partitioning(reason=f"partitioning over {inner!r}")
    else:
        e = _EXPR.match(inner)
        if not e:
            return Partitioning(reason=f"partitioning by the expression {inner.strip()!r}")
        func = e.group(1).upper() if e.group(1) else None
        func = "DAYOFMONTH" if func == "DAY" else func
        cols = (_unquote(e.group(2) or e.group(3)),)
    rest = rest.strip()
    count = None
    p = re.match(r"^PARTITIONS\s+(\d+)\s*", rest, re.I)
    if p:
        count, rest = int(p.group(1)), rest[p.end():]
    if re.match(r"^SUBPARTITION\b", rest, re.I):
        return Partitioning(reason="sub-partitions")
    base = Partitioning(method, cols, func)
    defs, _ = parenthesised(rest) if rest.startswith("(") else (None, "")
    if defs is None:
        if method != "HASH":
            return Partitioning(reason="partitioning not understood")
        return replace(base, names=tuple(f"p{i}" for i in range(count or 1)))
    return _with_definitions(base, clauses(defs))


def _with_definitions(base: Partitioning, defs: list[str]) -> Partitioning:
    names, bounds = list(base.names), list(base.bounds)
    for d in defs:
        m = _DEF.match(d)
        if not m:
            return Partitioning(reason=f"partition definition {d[:60]!r}")
        name, rest = _unquote(m.group(1)), m.group(2).strip()
        if re.search(r"\bSUBPARTITION\b", rest, re.I):
            return Partitioning(reason="sub-partitions")
        if base.method == "HASH":
            names.append(name)
            continue
        bound = _bound(base, rest)
        if isinstance(bound, str) and bound != MAXVALUE:
            return Partitioning(reason=bound)
        names.append(name)
        bounds.append(bound)
    return replace(base, names=tuple(names), bounds=tuple(bounds))


def _bound(base: Partitioning, rest: str):
    """A partition's bound (RANGE: a tuple; LIST: a list of tuples), or why not."""
    if base.method == "RANGE":
        m = _LESS.match(rest)
        if not m:
            return "a RANGE partition without VALUES LESS THAN"
        if m.group(1).upper() == MAXVALUE:
            return tuple([MAXVALUE] * len(base.columns))
        inner, _ = parenthesised(rest[m.start(1):])
        values = [_literal(v) for v in clauses(inner or "")]
        if not inner or any(isinstance(v, _Unknown) for v in values):
            return f"the partition bound {inner!r}"
        if len(values) != len(base.columns):
            return f"the partition bound {inner!r}"
        return tuple(values)
    m = _IN.match(rest)
    if not m:
        return "a LIST partition without VALUES IN"
    inner, _ = parenthesised(rest[m.end() - 1:])
    items = []
    for item in clauses(inner or ""):
        if item.startswith("("):
            sub, _ = parenthesised(item)
            value = tuple(_literal(v) for v in clauses(sub or ""))
        else:
            value = (_literal(item),)
        if any(isinstance(v, _Unknown) for v in value):
            return f"the partition values {inner!r}"
        items.append(value)
    return items


class _Unknown:
    pass


def _literal(text: str):
    """A bound's value: an int, a date text, None (NULL), MAXVALUE, or _Unknown."""
    t = text.strip()
    if _INT.match(t):
        return int(t)
    if t.upper() in ("NULL", MAXVALUE):
        return None if t.upper() == "NULL" else MAXVALUE
    if len(t) >= 2 and t[0] == t[-1] == "'":
        s = t[1:-1]
        return s if _DATE.match(s) else _Unknown()
    f = re.match(rf"^({'|'.join(_FUNCS)})\s*\(\s*'([^']*)'\s*\)$", t, re.I)
    if f and _DATE.match(f.group(2)):
        func = f.group(1).upper()
        v = _apply("DAYOFMONTH" if func == "DAY" else func, f.group(2))
        return _Unknown() if v is None else v
    return _Unknown()


def _top_level(text: str, pattern: re.Pattern) -> int | None:
    """Where ``pattern`` ends at parenthesis depth 0 outside quotes (None: nowhere)."""
    for i, ch, depth in outside_quotes(text):
        if depth == 0 and ch in "Pp" and (i == 0 or not (text[i - 1].isalnum()
                                                       or text[i - 1] == "_")):
            m = pattern.match(text, i)
            if m:
                return m.end()
    return None


# -- following the DDL ----------------------------------------------------------------------

@dataclass
class _Tables:
    """Each (source, schema, table)'s partitioning as the DDL went (absent: unknown)."""

    known: dict[tuple[str, str, str], Partitioning | None] = field(default_factory=dict)

    def get(self, key) -> Partitioning | None:
        if key not in self.known:
            return Partitioning(reason="its partitioning is unknown (the CREATE TABLE is "
                                       "not in the binlogs)")
        p = self.known[key]
        return p if p is not None else Partitioning(reason="the table is not partitioned")


def partition_effects(ddl_rows: Iterable[tuple]) -> list[PartitionEffect]:
    """Every ``DROP``/``TRUNCATE``/``EXCHANGE PARTITION`` of ``ddl_rows`` ((source, file,
    pos, default schema, query), in binlog order) with the rows it removed (``spec``) or why
    they are unknown (``reason``). ``TRUNCATE PARTITION ALL`` is not among them: it is a
    ``TRUNCATE`` (``derive.partition_change``)."""
    from pipelines.silver.naming import position_key

    tables = _Tables()
    out = []
    for source, file, pos, schema, query in sorted(
            ddl_rows, key=lambda r: (r[0], position_key(r[1], r[2]))):
        q = _clean(query or "")
        out += _statement(tables, source, file, pos, schema, q)
    return out


def _statement(tables: _Tables, source, file, pos, schema, q: str) -> list[PartitionEffect]:
    m = _CREATE.match(q)
    if m:
        key = (source, *_qualify(m.group(1), m.group(2), schema))
        like = _LIKE.match(q[m.end():].lstrip())
        if like:
            tables.known[key] = tables.known.get((source, *_qualify(like.group(1),
                                                                     like.group(2), schema)))
        else:
            tables.known[key] = parse_partitioning(q[m.end():])
        return []
    if _DROP.match(q) or _DROP_DB.match(q):
        for db, table in tables_touched(q, schema):
            for key in [k for k in tables.known if k[0] == source and k[1] == db
                        and table in (k[2], DROP_DATABASE)]:
                del tables.known[key]
        return []
    for old, new, _cols in renames_in(q, schema):
        if old != new and (source, *old) in tables.known:
            tables.known[(source, *new)] = tables.known.pop((source, *old))
    m = _ALTER.match(q)
    if not m:
        return []
    key = (source, *_qualify(m.group(1), m.group(2), schema))
    return _alter(tables, key, file, pos, q[m.end():].rstrip(";").strip())


def _alter(tables: _Tables, key, file, pos, body: str) -> list[PartitionEffect]:
    op = _PART_OP.match(body)
    if op is None:
        by = parse_partitioning(body)
        if by is not None:
            tables.known[key] = by
        return []
    verb, rest = op.group(1).upper(), op.group(2).strip()
    current = tables.get(key)
    if verb == "REMOVE":
        tables.known[key] = None
        return []
    if verb in ("ANALYZE", "CHECK", "OPTIMIZE", "REBUILD", "REPAIR", "DISCARD", "IMPORT"):
        return []
    if verb == "EXCHANGE":
        name = re.match(rf"^({_IDENT})\s+WITH\s+TABLE\s+{_QUALIFIED}", rest, re.I)
        effects = [PartitionEffect(key[0], file, pos, key[1:], verb,
                                   (_unquote(name.group(1)) if name else "?",),
                                   reason="EXCHANGE PARTITION swapped its rows with another "
                                          "table's")]
        if name:
            other = _qualify(name.group(2), name.group(3), key[1])
            effects.append(PartitionEffect(key[0], file, pos, other, verb, (),
                                           reason="EXCHANGE PARTITION swapped its rows with "
                                                  f"{key[1]}.{key[2]}'s"))
        return effects
    if current.reason is not None:
        if verb in ("DROP", "TRUNCATE") and not _is_all(rest):
            return [PartitionEffect(key[0], file, pos, key[1:], verb, _names(rest),
                                    reason=current.reason)]
        return []
    if verb in ("DROP", "TRUNCATE"):
        names = _names(rest)
        if _is_all(rest):
            return []
        unknown = [n for n in names if n.lower() not in {x.lower() for x in current.names}]
        if unknown:
            tables.known[key] = Partitioning(reason=f"partition {unknown[0]} is not one the "
                                                    "DDL declared")
            return [PartitionEffect(key[0], file, pos, key[1:], verb, names,
                                    reason=tables.known[key].reason)]
        effect = PartitionEffect(key[0], file, pos, key[1:], verb, names,
                                 spec=current.spec(list(names)))
        if verb == "DROP":
            keep = [i for i, n in enumerate(current.names)
                    if n.lower() not in {x.lower() for x in names}]
            tables.known[key] = replace(current, names=tuple(current.names[i] for i in keep),
                                        bounds=tuple(current.bounds[i] for i in keep)
                                        if current.bounds else ())
        return [effect]
    tables.known[key] = _changed(current, verb, rest)
    return []


def _changed(current: Partitioning, verb: str, rest: str) -> Partitioning:
    """The partitioning after ADD / COALESCE / REORGANIZE PARTITION."""
    if verb == "ADD":
        n = re.match(r"^PARTITIONS\s+(\d+)\s*$", rest, re.I)
        if n and current.method == "HASH":
            have = len(current.names)
            return replace(current, names=current.names + tuple(
                f"p{i}" for i in range(have, have + int(n.group(1)))))
        defs, _ = parenthesised(rest)
        if defs is None:
            return Partitioning(reason="ADD PARTITION not understood")
        return _with_definitions(current, clauses(defs))
    if verb == "COALESCE":
        n = re.match(r"^(\d+)\s*$", rest)
        if n is None or current.method != "HASH":
            return Partitioning(reason="COALESCE PARTITION not understood")
        return replace(current, names=current.names[:len(current.names) - int(n.group(1))])
    m = re.match(r"^(.*?)\s+INTO\s*(\(.*)$", rest, re.I | re.S)  # REORGANIZE
    if m is None or current.method == "HASH":
        return Partitioning(reason="REORGANIZE PARTITION not understood")
    old = [n.lower() for n in _names(m.group(1))]
    idx = [i for i, n in enumerate(current.names) if n.lower() in old]
    defs, _ = parenthesised(m.group(2))
    if not idx or defs is None or idx != list(range(idx[0], idx[0] + len(idx))):
        return Partitioning(reason="REORGANIZE PARTITION not understood")
    new = _with_definitions(replace(current, names=(), bounds=()), clauses(defs))
    if new.reason is not None:
        return new
    a, b = idx[0], idx[-1] + 1
    return replace(current, names=current.names[:a] + new.names + current.names[b:],
                   bounds=current.bounds[:a] + new.bounds + current.bounds[b:])


def _names(text: str) -> tuple[str, ...]:
    return tuple(_unquote(n.strip()) for n in text.split(",") if n.strip())


def _is_all(text: str) -> bool:
    return [n.upper() for n in _names(text)] == ["ALL"]


# -- which rows a partition holds -----------------------------------------------------------

def holds(spec: dict[str, Any], values: dict[str, str]) -> bool:
    """Whether the row of ``values`` (silver's JSON values by column name) lay in one of the
    spec's ``chosen`` partitions."""
    lower = {k.lower(): v for k, v in values.items()}
    if any(c.lower() not in lower for c in spec["columns"]):
        return False  # not in the image (a MINIMAL one): not derived
    raw = [_value(lower[c.lower()]) for c in spec["columns"]]
    if spec["func"] is not None:
        raw = [_apply(spec["func"], raw[0])]
    if any(isinstance(v, _Unknown) for v in raw):
        return False
    index = _partition_of(spec, tuple(raw))
    return index is not None and index in spec["chosen"]


def _value(raw: str | None):
    if raw is None or raw == "null":
        return None
    if _INT.match(raw):
        return int(raw)
    if raw.startswith('"'):
        s = json.loads(raw)
        return s if _DATE.match(s) else _Unknown()
    return _Unknown()


def _apply(func: str, value):
    """MariaDB's ``func`` of a date/datetime text (None for NULL)."""
    if value is None:
        return None
    if not isinstance(value, str) or not _DATE.match(value):
        return _Unknown()
    y, m, d = int(value[:4]), int(value[5:7]), int(value[8:10])
    if func == "YEAR":
        return y
    if func == "MONTH":
        return m
    if func == "DAYOFMONTH":
        return d
    try:
        days = dt.date(y, m, d).toordinal() + 365  # TO_DAYS('0001-01-01') = 366
    except ValueError:
        return None  # a zero date: NULL
    if func == "TO_DAYS":
        return days
    hms = value[11:19] if len(value) > 10 else "00:00:00"
    return days * 86400 + int(hms[:2]) * 3600 + int(hms[3:5]) * 60 + int(hms[6:8])


def _less(a: tuple, b: list) -> bool:
    """Row comparison ``a < b`` (NULL below every value, MAXVALUE above)."""
    for x, y in zip(a, b):
        if y == MAXVALUE:
            return True
        if x == y:
            continue
        if x is None:
            return True
        if y is None:
            return False
        if type(x) is not type(y):
            raise _Incomparable
        return x < y
    return False


class _Incomparable(Exception):
    pass


def _partition_of(spec: dict[str, Any], value: tuple) -> int | None:
    method, bounds = spec["method"], spec["bounds"]
    if method == "HASH":
        v = value[0]
        return 0 if v is None else abs(int(v)) % spec["count"] if isinstance(v, int) else None
    try:
        if method == "RANGE":
            for i, b in enumerate(bounds):
                if _less(value, b):
                    return i
            return None
        for i, items in enumerate(bounds):
            if any(list(value) == list(item) for item in items):
                return i
    except _Incomparable:
        return None
    return None
