"""The HTML of ``binlake console`` (pure: tool results → markup; no script, inline SVG).

Every value is escaped; values of silver images are shown as text (strings unquoted, NULL as
``NULL``, other JSON values as their JSON text), the cells of columns a change changed carry
``class="changed"``.
"""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import urlencode
from pipelines.vocabulary import DELETE, INSERT

__all__ = ["page", "home_body", "key_body", "asof_body", "quality_body", "error_body",
           "value_text"]

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 18px}header a{color:#cfe0ff;margin-right:16px}
main{padding:14px 18px}h1{font-size:18px;margin:0 0 8px}h2{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;background:#fff;margin:4px 0 12px}
th,td{border:1px solid #d5d9e0;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5}td.changed{background:#ffe8a3;font-weight:600}
td.null{color:#8a93a3;font-style:italic}.err{color:#a40000;font-weight:600}
.change{background:#fff;border:1px solid #d5d9e0;padding:6px 10px;margin:8px 0}
.INSERT{color:#0a7a2f}.DELETE{color:#a40000}.UPDATE{color:#0b4fb3}
svg .bar,svg .sbar{fill:#4b7bd6}.pill{padding:1px 6px;border-radius:8px;font-size:12px}
.note{color:#555}.scroll{overflow-x:auto}svg text{font-size:10px;fill:#444}form{margin:6px 0 12px}
input{padding:3px 6px;margin-right:6px}code{background:#eef1f5;padding:0 3px}
"""


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def value_text(v: Any) -> str | None:
    """A silver image value as text (None for SQL NULL)."""
    if v is None:
        return None
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _cell(v: Any, cls: str = "") -> str:
    t = value_text(v)
    if t is None:
        return f'<td class="null {cls}">NULL</td>'
    return f'<td class="{cls}">{_e(t)}</td>' if cls else f"<td>{_e(t)}</td>"


def _link(path: str, token: str | None, **params: Any) -> str:
    q = {k: v for k, v in params.items() if v is not None}
    if token:
        q["token"] = token
    return path + ("?" + urlencode(q) if q else "")


def page(title: str, body: str, token: str | None) -> str:
    nav = "".join(f'<a href="{_e(_link(p, token))}">{n}</a>' for p, n in
                  (("/", "tables"), ("/key", "key timeline"), ("/asof", "table as of"),
                   ("/quality", "quality")))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)} · binlake"
            f"</title><style>{_CSS}</style></head><body><header><b>binlake</b> &nbsp; {nav}"
            f"</header><main><h1>{_e(title)}</h1>{body}</main></body></html>")


def error_body(message: str) -> str:
    return f'<p class="err" id="error">{_e(message)}</p>'


def _hidden_token(token: str | None) -> str:
    return f'<input type="hidden" name="token" value="{_e(token)}">' if token else ""


def _volume_svg(volume: list[dict[str, Any]]) -> str:
    """Bars of row changes per UTC hour (all tables), one ``rect.bar`` per hour."""
    hours: dict[str, int] = {}
    for v in volume:
        hours[v["hour"]] = hours.get(v["hour"], 0) + v["changes"]
    if not hours:
        return "<p>No row changes in silver yet.</p>"
    w, h, pad = min(60, max(12, 600 // len(hours))), 120, 30
    top = max(hours.values())
    parts = []
    for i, (hour, n) in enumerate(sorted(hours.items())):
        bh = max(1, round(n / top * (h - 20)))
        x = pad + i * w
        parts.append(f'<rect class="bar" data-hour="{_e(hour)}" data-changes="{n}" x="{x}" '
                     f'y="{h - bh}" width="{w - 4}" height="{bh}"><title>{_e(hour)}: {n}'
                     f'</title></rect><text x="{x}" y="{h - bh - 3}">{n}</text>'
                     f'<text x="{x}" y="{h + 12}">{_e(hour[11:16])}</text>')
    width = pad + len(hours) * w + 10
    return (f'<svg class="volume" width="{width}" height="{h + 20}" xmlns="http://www.w3.org/'
            f'2000/svg" role="img" aria-label="row changes per hour">{"".join(parts)}</svg>')


def _table_svg(table: str, volume: list[dict[str, Any]], hours: list[str]) -> str:
    """A small bar per hour of ``hours`` for one table (``rect.sbar``, empty hours left out)."""
    mine = {v["hour"]: v["changes"] for v in volume if v["table"] == table}
    if not mine:
        return ""
    top, w, h = max(mine.values()), 8, 24
    bars = "".join(
        f'<rect class="sbar" x="{i * w}" y="{h - max(1, round(mine[hr] / top * h))}" '
        f'width="{w - 2}" height="{max(1, round(mine[hr] / top * h))}"><title>{_e(hr)}: '
        f'{mine[hr]}</title></rect>' for i, hr in enumerate(hours) if hr in mine)
    return (f'<svg class="spark" data-table="{_e(table)}" width="{len(hours) * w}" '
            f'height="{h}" xmlns="http://www.w3.org/2000/svg">{bars}</svg>')


def home_body(tables: list[str], volume: list[dict[str, Any]], status: dict[str, Any],
              token: str | None) -> str:
    per_table: dict[str, int] = {}
    for v in volume:
        per_table[v["table"]] = per_table.get(v["table"], 0) + v["changes"]
    hours = sorted({v["hour"] for v in volume})
    rows = "".join(
        f"<tr><td>{_e(t)}</td><td>{per_table.get(t, 0)}</td>"
        f"<td>{_table_svg(t, volume, hours)}</td>"
        f'<td><a href="{_e(_link("/asof", token, table=t))}">as of…</a> · '
        f'<a href="{_e(_link("/key", token, table=t))}">a key…</a></td></tr>' for t in tables)
    silver = status.get("silver") or {}
    stream = status.get("stream")
    lag = ("never run" if not stream else
           ", ".join(f"{k}: {_e(v)}" for k, v in stream.items()
                     if k in ("state", "lag_seconds", "behind", "age_seconds", "position",
                              "source_id")) or _e(stream))
    q = status.get("quality") or {}
    return (f"<h2>Row changes per hour (UTC, last 48 hours of silver)</h2>{_volume_svg(volume)}"
            f"<h2>Tables</h2><table id='tables'><tr><th>table</th><th>changes (48 h)</th>"
            f"<th>per hour</th><th></th></tr>{rows}</table>"
            f"<h2>Lake</h2><table id='status'><tr><th>silver rows</th><td>"
            f"{_e(silver.get('rows', silver.get('n')))}</td></tr><tr><th>silver version</th>"
            f"<td>{_e(silver.get('version'))}</td></tr><tr><th>latest change</th><td>"
            f"{_e(silver.get('latest'))}</td></tr><tr><th>stream</th><td id='lag'>{lag}</td>"
            f"</tr><tr><th>quality</th><td>{_e(q.get('status', 'never run'))}</td></tr>"
            f"<tr><th>faults</th><td>{_e(len(status.get('faults') or []))}</td></tr></table>")


def _form(action: str, fields: list[tuple[str, str, Any]], token: str | None) -> str:
    inputs = "".join(f'<label>{_e(label)} <input name="{name}" value="{_e(value)}"></label>'
                     for name, label, value in fields)
    return (f'<form method="get" action="{action}">{inputs}{_hidden_token(token)}'
            f'<button type="submit">show</button></form>')


def key_body(table: str | None, pk: str | None, result: dict[str, Any] | None,
             token: str | None) -> str:
    out = [_form("/key", [("table", "table", table), ("pk", "key (pk_values)", pk)], token)]
    if result is None:
        return out[0]
    if result.get("note"):
        out.append(f'<p class="note">{_e(result["note"])}</p>')
    for c in result["changes"]:
        before, after = c.get("row_before") or {}, c.get("row_after") or {}
        changed = set(c.get("changed_columns") or [])
        cols = list(dict.fromkeys([*before, *after]))
        lines = []
        for col in cols:
            hit = c["event_type"] == INSERT or col in changed
            cls = "changed" if hit and c["event_type"] != DELETE else ""
            lines.append(f'<tr data-column="{_e(col)}"><th>{_e(col)}</th>'
                         f'{_cell(before.get(col)) if before else "<td></td>"}'
                         f'{_cell(after.get(col), cls) if after else "<td></td>"}</tr>')
        out.append(
            f'<div class="change" data-seq="{_e(c["seq"])}" data-type="{_e(c["event_type"])}">'
            f'<b class="{_e(c["event_type"])}">{_e(c["event_type"])}</b> at '
            f'{_e(c["event_timestamp"])} · gtid {_e(c.get("gtid"))} · seq {_e(c["seq"])}'
            f'{"<br><code>" + _e(c["query_text"]) + "</code>" if c.get("query_text") else ""}'
            f'<table class="images"><tr><th>column</th><th>before</th><th>after</th></tr>'
            f'{"".join(lines)}</table></div>')
    return "".join(out)


def asof_body(table: str | None, at: str | None, result: dict[str, Any] | None,
              token: str | None) -> str:
    out = [_form("/asof", [("table", "table", table), ("at", "at (UTC)", at)], token)]
    if result is None:
        return out[0]
    cols = result["columns"]
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    body = "".join("<tr class='row'>" + "".join(_cell(r.get(c)) for c in cols) + "</tr>"
                   for r in result["rows"])
    out.append(f"<p>{_e(result['table'])} at {_e(result['point'])}: {result['count']} row(s)"
               f" (history from {_e(result['history_from'])})"
               f"{' — ' + _e(result['note']) if result.get('note') else ''}</p>"
               f"<table id='asof'><tr>{head}</tr>{body}</table>")
    out += [f'<p class="note">warning: {_e(w)}</p>' for w in result.get("warnings", [])]
    return "".join(out)


def quality_body(result: dict[str, Any], trends_svg: str) -> str:
    last = result.get("latest")
    if last is None:
        return f"<p>{_e(result.get('note'))}</p>"
    rows = "".join(f"<tr><td>{_e(r['name'])}</td><td>{_e(r['dataset'])}</td>"
                   f"<td>{_e(r['status'])}</td><td>{_e(r['failed_records'])}</td></tr>"
                   for r in last.get("not_passed", []))
    return (f"<table id='quality'><tr><th>run</th><td>{_e(last['run_id'])}</td></tr>"
            f"<tr><th>time</th><td>{_e(last['run_time'])}</td></tr><tr><th>status</th>"
            f"<td id='quality-status'>{_e(last['status'])}</td></tr><tr><th>rules</th>"
            f"<td>{_e(last['rules'])}</td></tr></table>"
            f"<h2>Rules not passed</h2><table><tr><th>rule</th><th>dataset</th><th>status"
            f"</th><th>failed records</th></tr>{rows or '<tr><td colspan=4>none</td></tr>'}"
            f"</table><h2>Trend</h2>{trends_svg}")
