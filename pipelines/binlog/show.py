"""Render decoded events for people (``binlake decode``): text like ``mysqlbinlog -v``, or JSONL."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Iterable, Iterator, TextIO

from pipelines.binlog import coltypes as T
from pipelines.binlog import events as ev
from pipelines.binlog.table_map import TableMap
from pipelines.vocabulary import INSERT

__all__ = ["render_text", "render_jsonl", "write_events"]


def _ts(seconds: int) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _text_value(value: bytes | None, col_type: int) -> str:
    if value is None:
        return "NULL"
    if col_type not in T.BYTES_TYPES and col_type != T.JSON:
        return value.decode("ascii")
    try:
        text = value.decode("utf-8")
        if text.isprintable():
            return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    except UnicodeDecodeError:
        pass
    return "x'" + value.hex() + "'"


def _json_value(value: bytes | None, col_type: int):
    if value is None:
        return None
    if col_type not in T.BYTES_TYPES:
        return value.decode("utf-8")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(value).decode("ascii")}


def _header_line(e: ev.Event) -> str:
    h = e.header
    return (f"# at {h.pos} end {h.pos + h.event_length} {ev.event_name(h.type_code)} "
            f"server_id={h.server_id} "
            f"ts={_ts(h.timestamp)}")


def _image_lines(tm: TableMap, image: list | None, label: str) -> list[str]:
    if image is None:
        return []
    names = tm.column_names
    lines = [f"### {label}"]
    for i, v in enumerate(image):
        name = f" ({names[i]})" if names else ""
        lines.append(f"###   @{i + 1}{name}={_text_value(v, tm.column_types[i])}")
    return lines


def render_text(events: Iterable[ev.Event]) -> Iterator[str]:
    """One block of lines per event, positions first (``# at N end M TYPE``)."""
    for e in events:
        lines = [_header_line(e)]
        if isinstance(e, ev.RowsEvent):
            tm = e.table
            for i, (before, after) in enumerate(e.rows):
                lines.append(f"### {e.kind} `{tm.schema}`.`{tm.table}` row {i}")
                lines += _image_lines(tm, before, "WHERE" if e.kind != INSERT else "")
                lines += _image_lines(tm, after, "SET")
        elif isinstance(e, TableMap):
            lines.append(f"#   table_id {e.table_id} `{e.schema}`.`{e.table}` columns "
                         + ",".join(T.name(t) for t in e.column_types))
        elif isinstance(e, ev.Query):
            lines.append(f"#   thread_id={e.thread_id} schema={e.schema!r}")
            lines.append(e.query.decode("utf-8", "replace") + ";")
        elif isinstance(e, ev.Gtid):
            stamp = f" commit_ts_us={e.commit_ts_us}" if e.commit_ts_us is not None else ""
            lines.append(f"#   GTID {e.gtid or 'ANONYMOUS'}{stamp}")
        elif isinstance(e, ev.RowsQuery):
            lines += ["#Q> " + line for line in
                      e.query.decode("utf-8", "replace").split("\n")]
        elif isinstance(e, ev.Rotate):
            lines.append(f"#   next file {e.next_file} pos {e.position}")
        elif isinstance(e, ev.FormatDescription):
            lines.append(f"#   server {e.server_version} checksum "
                         f"{ {0: 'NONE', 1: 'CRC32'}.get(e.checksum_alg, 'none') }")
        elif isinstance(e, (ev.PreviousGtids, ev.GtidList)):
            lines.append(f"#   {getattr(e, 'gtid_set', None) or getattr(e, 'gtid_list', '')}")
        elif isinstance(e, ev.Xid):
            lines.append(f"#   COMMIT xid={e.xid}")
        yield "\n".join(lines)


def render_jsonl(events: Iterable[ev.Event]) -> Iterator[str]:
    """One JSON object per event; values as text, bytes that are not UTF-8 as base64."""
    for e in events:
        h = e.header
        obj: dict = {"pos": h.pos, "end_pos": h.pos + h.event_length,
                     "type": ev.event_name(h.type_code),
                     "server_id": h.server_id, "timestamp": _ts(h.timestamp)}
        if isinstance(e, ev.RowsEvent):
            tm = e.table
            types = tm.column_types
            obj.update(schema=tm.schema, table=tm.table, kind=e.kind, rows=[
                {"before": None if b is None else [_json_value(v, types[i]) for i, v in enumerate(b)],
                 "after": None if a is None else [_json_value(v, types[i]) for i, v in enumerate(a)]}
                for b, a in e.rows])
        elif isinstance(e, TableMap):
            obj.update(table_id=e.table_id, schema=e.schema, table=e.table,
                       column_types=[T.name(t) for t in e.column_types], column_meta=e.column_meta,
                       column_names=e.column_names)
        elif isinstance(e, ev.Query):
            obj.update(thread_id=e.thread_id, schema=e.schema,
                       query=e.query.decode("utf-8", "replace"))
        elif isinstance(e, ev.Gtid):
            obj.update(gtid=e.gtid, commit_ts_us=e.commit_ts_us)
        elif isinstance(e, ev.RowsQuery):
            obj.update(query=e.query.decode("utf-8", "replace"))
        elif isinstance(e, ev.Rotate):
            obj.update(next_file=e.next_file, position=e.position)
        elif isinstance(e, ev.Xid):
            obj.update(xid=e.xid)
        yield json.dumps(obj, ensure_ascii=False)


def write_events(events: Iterable[ev.Event], out: TextIO, fmt: str = "text") -> None:
    render = render_jsonl if fmt == "jsonl" else render_text
    for chunk in render(events):
        out.write(chunk)
        out.write("\n")
