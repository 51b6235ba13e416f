"""The row-by-row silver renderer binlake used before rendering went columnar (issue 13).

Kept only as the referee of ``tests/silver/test_render_diff.py``: for every bronze row change,
the columnar renderer (``pipelines.silver.render_batch``) must produce exactly the silver row
(or the quarantine reason) this one does. It renders one value at a time with
``render.make_renderer`` and assembles each image with Python string joins.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Callable, Sequence

from pipelines.errors import SchemaMismatchError
from pipelines.silver.naming import BronzeTableMap, NamingPlan, TableSpec, file_number
from pipelines.silver.render import make_renderer, pk_text

__all__ = ["ReferenceImages", "ReferenceTableRenderer", "reference_rows"]

_UTC = dt.timezone.utc


@dataclass(frozen=True)
class ReferenceImages:
    row_before: str | None
    row_after: str | None
    changed_columns: str | None
    pk_values: str
    absent_columns: str | None
    pk_values_after: str | None = None  # an UPDATE's after key, where it differs


class ReferenceTableRenderer:
    """Renders row changes of one :class:`TableSpec`, one value at a time."""

    def __init__(self, spec: TableSpec) -> None:
        self.spec = spec
        self.names = [json.dumps(c.name, ensure_ascii=False) for c in spec.columns]
        self.plain = [c.name for c in spec.columns]
        self._renderers: list[Callable[[bytes], str]] | None = None
        self._error: SchemaMismatchError | None = None
        try:
            self._renderers = [make_renderer(c) for c in spec.columns]
        except SchemaMismatchError as exc:
            self._error = exc

    def _values(self, image: Sequence[bytes | None], present: Sequence[bool] | None
                ) -> list[str | None]:
        if len(image) != len(self.plain):
            raise SchemaMismatchError(f"image has {len(image)} values, schema has "
                                      f"{len(self.plain)} columns")
        if self._renderers is None:
            raise self._error  # type: ignore[misc]
        out: list[str | None] = []
        for i, value in enumerate(image):
            if present is not None and not present[i]:
                out.append(None)
            elif value is None:
                out.append("null")
            else:
                out.append(self._renderers[i](bytes(value)))
        return out

    def _object(self, values: list[str | None]) -> str:
        return "{" + ", ".join(f"{self.names[i]}: {v}" for i, v in enumerate(values)
                               if v is not None) + "}"

    def render(self, event_type: str, before, after, before_present, after_present
               ) -> ReferenceImages:
        b = self._values(before, before_present) if before is not None else None
        a = self._values(after, after_present) if after is not None else None
        changed = None
        if event_type == "UPDATE" and b is not None and a is not None:
            changed = json.dumps([self.plain[i] for i in range(len(a))
                                  if b[i] is not None and a[i] is not None and b[i] != a[i]],
                                 ensure_ascii=False)
        key_image = a if event_type == "INSERT" else b
        if key_image is None:
            raise SchemaMismatchError(f"{event_type} without its key image")
        parts = []
        for i in self.spec.pk:
            v = key_image[i]
            if v is None:
                raise SchemaMismatchError(f"primary key column {self.plain[i]} absent from the "
                                          "image")
            parts.append(pk_text(v))
        after_key = None
        if event_type == "UPDATE" and b is not None and a is not None:
            texts = [a[i] if a[i] is not None else b[i] for i in self.spec.pk]
            if self.spec.pk and None not in texts:
                after_key = "|".join(pk_text(v) for v in texts)
                after_key = None if after_key == "|".join(parts) else after_key
        absent = [self.plain[i] for side in (b, a) if side is not None
                  for i, v in enumerate(side) if v is None]
        return ReferenceImages(
            self._object(b) if b is not None else None,
            self._object(a) if a is not None else None,
            changed, "|".join(parts),
            json.dumps(sorted(set(absent), key=self.plain.index), ensure_ascii=False)
            if absent else None, after_key)


def _tup(v):
    if v is None:
        return None
    return tuple(_tup(x) if isinstance(x, list) else x for x in v)


def reference_rows(rows: list[dict], plan: NamingPlan) -> tuple[list[dict], list[dict]]:
    """Bronze row changes (dicts) → (silver rows, quarantine rows), one row at a time."""
    renderers: dict = {}
    silver, quarantine = [], []
    for r in rows:
        try:
            tm = BronzeTableMap(*[_tup(r[c]) for c in (
                "column_types", "column_meta", "column_names", "column_unsigned",
                "column_charsets", "primary_key", "enum_values", "set_values")])
            spec = plan.resolve(r["source_id"], r["schema_name"], r["table_name"],
                                r["binlog_file"], r["start_pos"], tm)
            tr = renderers.get(spec)
            if tr is None:
                tr = renderers[spec] = ReferenceTableRenderer(spec)
            img = tr.render(r["event_type"], r["row_before"], r["row_after"],
                            r["before_present"], r["after_present"])
        except SchemaMismatchError as exc:
            quarantine.append({
                "source_id": r["source_id"], "binlog_file": r["binlog_file"],
                "start_pos": r["start_pos"], "row_in_event": r["row_in_event"],
                "event_timestamp": r["event_timestamp"], "schema_name": r["schema_name"],
                "table_name": r["table_name"], "event_type": r["event_type"],
                "column_count": r["column_count"], "reason": str(exc)})
            continue
        ts = r["event_timestamp"]
        silver.append({
            "source_id": r["source_id"], "server_id": r["server_id"],
            "server_uuid": r["server_uuid"], "binlog_file": r["binlog_file"],
            "start_pos": r["start_pos"], "end_pos": r["end_pos"],
            "row_in_event": r["row_in_event"],
            "seq": file_number(r["binlog_file"]) << 32 | (r["start_pos"] + r["row_in_event"]),
            "event_timestamp": ts, "event_date": ts.astimezone(_UTC).date(),
            "gtid": r["gtid"], "connection_id": r["connection_id"],
            "schema_name": r["schema_name"], "table_name": r["table_name"],
            "event_type": r["event_type"], "pk_values": img.pk_values,
            "pk_kind": spec.pk_kind, "changed_columns": img.changed_columns,
            "row_before": img.row_before, "row_after": img.row_after,
            "absent_columns": img.absent_columns, "schema_version": spec.schema_version,
            "query_text": r["query_text"], "commit_ts_us": r["commit_ts_us"],
            "origin": "binlog", "pk_values_after": img.pk_values_after})
    return silver, quarantine
