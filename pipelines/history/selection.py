"""Which silver row changes a history command is about, as one DataFrame filter.

Filters go in the order the layout can use them: ``schema_name``/``table_name`` and
``pk_hash`` (= ``sha2(pk_values, 256)``, computed here so the engine compares a constant and
can skip files by their statistics), then ``event_date`` (the partition column) and
``event_timestamp``, then the rest.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass, field

from pipelines.lake.delta_ops import sql_string
from pipelines.errors import ConfigError
from pipelines.history.times import GtidSet
from pipelines.vocabulary import CHANGE_TYPES as EVENT_TYPES

__all__ = ["Selection", "parse_table", "parse_where", "apply_selection", "json_path", "EVENT_TYPES"]



def parse_table(text: str, flag: str = "--table") -> tuple[str, str]:
    """``schema.table`` (backquotes allowed) → (schema, table)."""
    m = re.match(r"^(`(?:[^`]|``)+`|[^.`]+)\.(`(?:[^`]|``)+`|[^.`]+)$", (text or "").strip())
    if not m:
        raise ConfigError(f"{flag} {text!r}: expected schema.table")

    def unq(s: str) -> str:
        return s[1:-1].replace("``", "`") if s.startswith("`") else s

    return unq(m.group(1)), unq(m.group(2))


def parse_where(text: str) -> tuple[str, str | None]:
    """``column=value`` → (column, value); ``column=NULL`` → (column, None)."""
    name, sep, value = (text or "").partition("=")
    if not sep or not name.strip():
        raise ConfigError(f"--where {text!r}: expected column=value")
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return name.strip(), value[1:-1]
    return name.strip(), None if value.upper() == "NULL" else value


@dataclass(frozen=True)
class Selection:
    """The filters of ``query`` and ``flashback`` (all optional, combined with AND)."""

    table: tuple[str, str] | None = None
    schema: str | None = None
    pk: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    gtids: GtidSet | None = None
    event_types: tuple[str, ...] = ()
    changed: str | None = None
    where: list[tuple[str, str | None]] = field(default_factory=list)
    connection_id: int | None = None  # the session that made the change (dbtrail's column)
    query_hash: str | None = None  # gold only: STATEMENT_DIGEST of the statement

    def columns_named(self) -> list[str]:
        return ([self.changed] if self.changed else []) + [c for c, _ in self.where]


def json_path(column: str) -> str:
    # Dot notation takes any name without '.', '[' or quotes (Sail and JVM Spark alike);
    # bracket notation, for the rest, only on engines that know it.
    if not any(ch in column for ch in ".[]'\"") and column.strip() == column:
        return f"$.{column}"
    return "$['" + column.replace("\\", "\\\\").replace("'", "\\'") + "']"


def _image_value(image: str, column: str) -> str:
    return f"get_json_object({image}, {sql_string(json_path(column))})"


def apply_selection(df, sel: Selection):
    """``df`` (silver) filtered by ``sel``."""
    preds: list[str] = []
    if sel.table:
        preds.append(f"schema_name = {sql_string(sel.table[0])}")
        preds.append(f"table_name = {sql_string(sel.table[1])}")
    elif sel.schema:
        preds.append(f"schema_name = {sql_string(sel.schema)}")
    if sel.pk is not None:
        # Either key: the before image's (pk_values), or the after image's of an UPDATE
        # that changed it (pk_values_after: the change that made the key).
        digest = hashlib.sha256(sel.pk.encode("utf-8")).hexdigest()
        pk = sql_string(sel.pk)
        preds.append(f"(pk_hash = '{digest}' OR pk_hash_after = '{digest}')")
        preds.append(f"(pk_values = {pk} OR pk_values_after = {pk})")
    if sel.since is not None:
        preds.append(f"event_date >= DATE'{sel.since.date().isoformat()}'")
        preds.append(f"event_timestamp >= TIMESTAMP'{sel.since.isoformat(' ')}'")
    if sel.until is not None:
        preds.append(f"event_date <= DATE'{sel.until.date().isoformat()}'")
        preds.append(f"event_timestamp <= TIMESTAMP'{sel.until.isoformat(' ')}'")
    if sel.gtids is not None:
        preds.append(sel.gtids.sql_predicate("gtid"))
    if sel.event_types:
        preds.append("event_type IN (" + ", ".join(f"'{t}'" for t in sel.event_types) + ")")
    if sel.connection_id is not None:
        preds.append(f"connection_id = {int(sel.connection_id)}")
    if sel.query_hash is not None:
        raise ConfigError("--query-hash is answered from gold only (add --gold-dsn): silver "
                          "has no STATEMENT_DIGEST")
    if sel.changed:
        preds.append(f"array_contains(from_json(changed_columns, 'array<string>'), "
                     f"{sql_string(sel.changed)})")
    for column, value in sel.where:
        if value is None:
            preds.append(f"(({_image_value('row_before', column)} IS NULL AND row_before "
                         f"LIKE {sql_string('%' + _key_text(column) + '%')}) OR "
                         f"({_image_value('row_after', column)} IS NULL AND row_after "
                         f"LIKE {sql_string('%' + _key_text(column) + '%')}))")
        else:
            preds.append(f"({_image_value('row_before', column)} = {sql_string(value)} OR "
                         f"{_image_value('row_after', column)} = {sql_string(value)})")
    for p in preds:
        df = df.where(p)
    return df


def _key_text(column: str) -> str:
    import json

    return (json.dumps(column, ensure_ascii=False) + ": null").replace("%", "\\%").replace(
        "_", "\\_")
