"""The HTML data-quality report: one self-contained page (inline CSS, no scripts).

Sections: the run (id, time, window, silver version, verdict), trends across runs (inline
SVG charts from ``trends.py``, when given), rules (counts and status per
rule and dataset), tables (rows checked and failing rows per rule for each MySQL table), and
the failing rows' keys per rule.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from pipelines.quality.result import QualityResult, RuleResult

__all__ = ["render_report"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1f2328}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px}
h3{font-size:14px;margin:18px 0 6px}
.meta{color:#57606a;margin-bottom:12px} .meta b{color:#1f2328}
table{border-collapse:collapse;margin:4px 0 8px;min-width:50%}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600} td.n{text-align:right;font-variant-numeric:tabular-nums}
td.zero{color:#8c959f} td.bad{background:#ffebe9;color:#a40e26;font-weight:600}
td.warnc{background:#fff8c5;color:#7d4e00;font-weight:600}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600}
.passed{background:#dafbe1;color:#116329} .failed,.error{background:#ffebe9;color:#a40e26}
.warned{background:#fff8c5;color:#7d4e00} .quarantined{background:#fbefff;color:#8250df}
.skipped{background:#eaeef2;color:#57606a} .big{font-size:15px;padding:3px 12px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
.desc{color:#57606a;max-width:420px} .note{color:#57606a;font-size:12px}
.desc code{display:block;color:#0550ae;margin-top:2px;white-space:pre-wrap}
.scroll{overflow-x:auto;max-width:100%} td.key{white-space:nowrap}
td.long{min-width:300px;max-width:460px;overflow-wrap:anywhere;font-size:12px}
th.rule{max-width:120px;white-space:normal;font-weight:500}
"""


def _e(value: Any) -> str:
    return "NULL" if value is None else escape(str(value))


def _pill(status: str, extra: str = "") -> str:
    return f'<span class="pill {escape(status)} {extra}">{escape(status)}</span>'


def _num(n: int, *, status: str = "failed") -> str:
    if not n:
        return '<td class="n zero">0</td>'
    cls = "bad" if status in ("failed", "error") else "warnc"
    return f'<td class="n {cls}">{n:,}</td>'


def _rules_table(rules: Iterable["RuleResult"]) -> str:
    out = ["<table><tr><th>rule</th><th>dataset</th><th>checks</th><th>expectation</th>"
           "<th>action</th><th>passed</th><th>failed</th><th>status</th></tr>"]
    for r in rules:
        failed = ('<td class="n zero">0</td>' if not r.failed_records
                  else _num(r.failed_records, status=r.status))
        status = _pill(r.status)
        if r.error:
            status += f'<div class="note">{_e(r.error[:300])}</div>'
        out.append(
            f"<tr><td><code>{_e(r.name)}</code></td><td>{_e(r.dataset)}</td>"
            f'<td class="desc">{_e(r.description)}<code>{_e(r.check)}</code></td>'
            f'<td><code>{_e(r.expectation)}</code></td>'
            f"<td>{_e(r.action)}</td><td class=\"n\">{r.passed_records:,}</td>{failed}"
            f"<td>{status}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _tables_section(res: "QualityResult") -> str:
    out = []
    for dataset in ("silver", "quarantine"):
        tables = [t for t in res.tables if t.dataset == dataset]
        rules = [r for r in res.rules if r.dataset == dataset and r.status != "skipped"]
        if not tables:
            continue
        status = {r.name: r.status for r in rules}
        out.append(f'<h3>{escape(dataset)}</h3><div class="scroll"><table><tr><th>table</th>'
                   "<th>rows</th>"
                   + "".join(f'<th class="rule"><code>{_e(r.name).replace("_", "_<wbr>")}</code></th>' for r in rules)
                   + "</tr>")
        for t in tables:
            name = f"{t.schema_name}.{t.table_name}"
            out.append(f"<tr><td><code>{_e(name)}</code></td><td class=\"n\">{t.rows:,}</td>"
                       + "".join(_num(t.failed.get(r.name, 0), status=status[r.name])
                                 for r in rules) + "</tr>")
        out.append("</table></div>")
    if not out:
        return '<p class="note">No rows checked.</p>'
    return ('<p class="note">Rows checked per table and, per rule, how many of them fail.</p>'
            + "\n".join(out))


def _failing_section(res: "QualityResult") -> str:
    out = []
    for r in res.rules:
        if not r.failed_records:
            continue
        shown = len(r.failing)
        note = ("all failing rows" if shown >= r.failed_records
                else f"first {shown} of {r.failed_records:,} failing rows")
        out.append(f'<h3><code>{_e(r.name)}</code> ({_e(r.dataset)}) {_pill(r.status)} '
                   f'<span class="note">{note}</span></h3>')
        if not r.failing:
            continue
        cols: list[str] = []
        for row in r.failing:
            cols += [c for c in row if c not in cols]
        out.append('<div class="scroll"><table><tr>'
                   + "".join(f"<th>{_e(c)}</th>" for c in cols) + "</tr>")
        for row in r.failing:
            out.append("<tr>" + "".join(_cell(row.get(c)) for c in cols) + "</tr>")
        out.append("</table></div>")
    return "\n".join(out) or '<p class="note">No failing rows.</p>'


def _cell(value: Any) -> str:
    if isinstance(value, str) and len(value) > 40:
        return f'<td class="long">{_e(_short(value))}</td>'
    return f'<td class="key">{_e(value)}</td>'


def _short(value: Any, limit: int = 160) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + "…"
    return value


def _notes(notes: list[str]) -> str:
    """What the lake cannot know (tables flagged by silver/fk_gaps), when there is some."""
    if not notes:
        return ""
    return ("<h2>Not known</h2>\n<ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes)
            + "</ul>\n")


def render_report(res: "QualityResult", trends: str = "") -> str:
    """The report page for ``res`` as HTML text; ``trends`` is the body of the Trends section
    (``trends.render_trends``), left out when empty."""
    checked = ", ".join(f"{n:,} {d} row(s)" for d, n in res.rows_checked.items()) or "nothing"
    version = "none" if res.silver_version is None else res.silver_version
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>binlake quality {escape(res.run_id)}: {escape(res.status)}</title>
<style>{_CSS}</style></head><body>
<h1>binlake data quality {_pill(res.status, "big")}</h1>
<div class="meta">run <b>{escape(res.run_id)}</b> at <b>{res.run_time:%Y-%m-%d %H:%M:%S} UTC</b>
 · window <b>{escape(res.window)}</b> · silver version <b>{version}</b> · checked {checked}
 · {res.seconds:.1f}s</div>
{"<h2>Trends</h2>" + trends if trends else ""}
{_notes(res.notes)}<h2>Rules</h2>
{_rules_table(res.rules)}
<h2>Tables</h2>
{_tables_section(res)}
<h2>Failing rows</h2>
{_failing_section(res)}
</body></html>
"""
