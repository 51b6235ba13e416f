"""Quality trends across runs, for the HTML report: small inline SVG charts (no scripts).

- *Rules over time*: one row per (rule, dataset), one cell per run (oldest left), coloured by
  the rule's status in that run; each cell's ``<title>`` says run, status and failing rows.
- *Rows checked per run*: one bar per run, the rows of each dataset the run checked (the
  largest passed + failed count among its rules on that dataset), stacked.

Read from the quality results table (one row per rule, dataset and run; small).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any, Iterable

__all__ = ["RunPoint", "load_trends", "render_trends", "STATUS_COLOURS"]

STATUS_COLOURS = {"passed": "#2da44e", "failed": "#cf222e", "error": "#82071e",
                  "warned": "#d4a72c", "quarantined": "#8250df", "skipped": "#afb8c1"}
DATASET_COLOURS = {"silver": "#0969da", "quarantine": "#8250df"}
_CELL, _GAP, _LABEL = 14, 2, 260


@dataclass
class RunPoint:
    """One run: its id, time, per (rule, dataset) status and failing rows, rows checked."""

    run_id: str
    run_time: Any
    statuses: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)
    rows_checked: dict[str, int] = field(default_factory=dict)


def points_from_rows(rows: Iterable[dict[str, Any]], last: int = 30) -> list[RunPoint]:
    """Pure: result rows → the last ``last`` runs, oldest first."""
    runs: dict[str, RunPoint] = {}
    for r in rows:
        p = runs.setdefault(r["run_id"], RunPoint(r["run_id"], r["run_time"]))
        failed = int(r["failed_records"] or 0)
        p.statuses[(r["name"], r["dataset"])] = (r["status"], failed)
        if r["status"] != "skipped":
            checked = int(r["passed_records"] or 0) + failed
            p.rows_checked[r["dataset"]] = max(p.rows_checked.get(r["dataset"], 0), checked)
    ordered = sorted(runs.values(), key=lambda p: (p.run_time, p.run_id))
    return ordered[-last:]


def load_trends(spark, cfg, last: int = 30) -> list[RunPoint]:
    """The last ``last`` runs stored in the lake's quality results (empty when none)."""
    from pipelines.lake.tables import QUALITY_RESULTS, Lake

    lake = Lake.of(cfg)
    if not lake.exists(spark, QUALITY_RESULTS):
        return []
    # One query: the rows of the newest runs (the run ids first, then their rows, cost a
    # query more: ~10 ms on the embedded engine).
    df = lake.read(spark, QUALITY_RESULTS)
    newest = (df.select("run_id", "run_time").distinct()
              .orderBy(df.run_time.desc(), df.run_id.desc()).limit(last))
    rows = (df.join(newest, ["run_id", "run_time"], "left_semi")
            .select("run_id", "run_time", "name", "dataset", "status", "passed_records",
                    "failed_records").collect())
    return points_from_rows([r.asDict() for r in rows], last)


def _rules_svg(points: list[RunPoint]) -> str:
    rules = sorted({k for p in points for k in p.statuses})
    step = _CELL + _GAP
    width = _LABEL + step * len(points) + 4
    height = step * len(rules) + 18
    out = [f'<svg class="trend rules-trend" xmlns="http://www.w3.org/2000/svg" '
           f'width="{width}" height="{height}" role="img" '
           f'aria-label="rule status per run, oldest run left">']
    for j, p in enumerate(points):
        if j == 0 or j == len(points) - 1:
            out.append(f'<text x="{_LABEL + j * step}" y="{height - 4}" font-size="10" '
                       f'fill="#57606a">{escape(str(p.run_time)[:16])}</text>')
    for i, (name, dataset) in enumerate(rules):
        y = i * step
        out.append(f'<text x="{_LABEL - 6}" y="{y + _CELL - 3}" font-size="11" '
                   f'text-anchor="end" fill="#1f2328">{escape(name)} ({escape(dataset)})</text>')
        for j, p in enumerate(points):
            status, failed = p.statuses.get((name, dataset), ("none", 0))
            colour = STATUS_COLOURS.get(status, "#ffffff")
            out.append(f'<rect class="cell {escape(status)}" x="{_LABEL + j * step}" y="{y}" '
                       f'width="{_CELL}" height="{_CELL}" fill="{colour}" stroke="#d0d7de">'
                       f'<title>{escape(p.run_id)}: {escape(status)}, {failed:,} failing '
                       f'rows</title></rect>')
    out.append("</svg>")
    return "".join(out)


def _rows_svg(points: list[RunPoint]) -> str:
    datasets = sorted({d for p in points for d in p.rows_checked})
    top = max((sum(p.rows_checked.values()) for p in points), default=0) or 1
    bar, gap, h = 14, 4, 90
    width = 50 + (bar + gap) * len(points)
    out = [f'<svg class="trend rows-trend" xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{h + 20}" role="img" aria-label="rows checked per run">',
           f'<text x="0" y="10" font-size="10" fill="#57606a">{top:,}</text>',
           f'<line x1="46" y1="{h}" x2="{width}" y2="{h}" stroke="#d0d7de"/>']
    for j, p in enumerate(points):
        x, base = 50 + j * (bar + gap), h
        for d in datasets:
            n = p.rows_checked.get(d, 0)
            if not n:
                continue
            hh = max(1, round(n / top * (h - 14)))
            base -= hh
            out.append(f'<rect class="bar {escape(d)}" x="{x}" y="{base}" width="{bar}" '
                       f'height="{hh}" fill="{DATASET_COLOURS.get(d, "#57606a")}">'
                       f'<title>{escape(p.run_id)}: {n:,} {escape(d)} rows</title></rect>')
    out.append("</svg>")
    return "".join(out)


def render_trends(points: list[RunPoint]) -> str:
    """The report's "Trends" section body (HTML with inline SVG)."""
    if not points:
        return '<p class="note">No stored runs yet.</p>'
    legend = " ".join(f'<span class="pill" style="background:{c};color:#fff">{escape(s)}</span>'
                      for s, c in STATUS_COLOURS.items())
    dlegend = " ".join(f'<span class="pill" style="background:{c};color:#fff">{escape(d)}</span>'
                       for d, c in DATASET_COLOURS.items())
    return (f'<p class="note">The last {len(points)} run(s), oldest left. {legend}</p>'
            f'<h3>Rules over time</h3><div class="scroll">{_rules_svg(points)}</div>'
            f'<h3>Rows checked per run</h3><p class="note">{dlegend}</p>'
            f'<div class="scroll">{_rows_svg(points)}</div>')
