"""What one quality run found: per rule and dataset, per MySQL table, and the verdict.

Pure data and its text/JSON forms; the job (``job.py``) fills it, the HTML report
(``report.py``) and the CLI render it.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from pipelines.quality.rules import Action

__all__ = ["RuleResult", "TableCounts", "QualityResult", "blocks", "exit_code", "summary_line",
           "render_result", "result_to_json"]


@dataclass(frozen=True)
class RuleResult:
    """One rule on one dataset in one run (a row of ``<lake>/quality/results``)."""

    name: str
    dataset: str
    action: str
    status: str
    passed_records: int
    failed_records: int
    expectation: str = ""
    description: str = ""
    failing: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    check: str = ""


@dataclass
class TableCounts:
    """Rows checked and rows failing per rule for one MySQL table of one dataset."""

    dataset: str
    schema_name: str | None
    table_name: str | None
    rows: int = 0
    failed: dict[str, int] = field(default_factory=dict)


@dataclass
class QualityResult:
    run_id: str
    run_time: dt.datetime
    window: str
    silver_version: int | None
    rules: list[RuleResult] = field(default_factory=list)
    tables: list[TableCounts] = field(default_factory=list)
    rows_checked: dict[str, int] = field(default_factory=dict)
    report_path: str | None = None
    seconds: float = 0.0
    # what the lake cannot know (tables whose FK rules are unknown in an epoch)
    notes: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        """``failed`` (a fail rule failed or errored), ``warned``, ``passed``."""
        if any(blocks(r) for r in self.rules):
            return "failed"
        if any(r.status not in ("passed", "skipped") for r in self.rules):
            return "warned"
        return "passed"

    def rule(self, name: str, dataset: str) -> RuleResult:
        for r in self.rules:
            if r.name == name and r.dataset == dataset:
                return r
        raise KeyError((name, dataset))


def blocks(r: RuleResult) -> bool:
    """True when ``r`` is a ``fail`` rule that failed or could not be evaluated."""
    return r.action == Action.FAIL and r.status in ("failed", "error")


def exit_code(result: QualityResult) -> int:
    """1 when a ``fail`` rule failed (or could not be evaluated), else 0."""
    return 1 if any(blocks(r) for r in result.rules) else 0


def summary_line(result: QualityResult) -> str:
    """One line for ``binlake index``: counts by status and the failing ``fail`` rules."""
    counted = [r for r in result.rules if r.status != "skipped"]
    by: dict[str, int] = {}
    for r in counted:
        by[r.status] = by.get(r.status, 0) + 1
    parts = [f"{n} {s}" for s, n in sorted(by.items(), key=lambda kv: _ORDER.get(kv[0], 9))]
    line = (f"quality: {result.status.upper()}, {len(counted)} rule(s) over "
            f"{result.rows_checked.get('silver', 0)} silver row(s) ({result.window}) and "
            f"{result.rows_checked.get('quarantine', 0)} quarantined: {', '.join(parts) or 'none'}")
    bad = [r for r in result.rules if r.status in ("failed", "error", "warned", "quarantined")]
    if bad:
        line += " [" + "; ".join(f"{r.name} ({r.dataset}): {r.failed_records} {r.status}"
                                 if r.status != "error" else f"{r.name} ({r.dataset}): error"
                                 for r in bad) + "]"
    if result.notes:
        flagged = sorted({n.split(":", 1)[0] for n in result.notes})
        line += f" (FK rules unknown in some schema epoch: {', '.join(flagged)})"
    if result.report_path:
        line += f" -> {result.report_path}"
    return line


_ORDER = {"failed": 0, "error": 1, "quarantined": 2, "warned": 3, "passed": 4}


def render_result(result: QualityResult, fmt: str = "text") -> str:
    """``binlake quality`` output: JSON (``fmt="json"``), or the summary line and one line per
    rule and dataset with its counts and status."""
    if fmt == "json":
        return json.dumps(result_to_json(result), indent=2, default=str)
    lines = [summary_line(result)]
    width = max((len(f"{r.name} ({r.dataset})") for r in result.rules), default=0)
    width = max(width, len("rule (dataset)"))
    if result.rules:
        lines.append(f"  {'rule (dataset)'.ljust(width)}  {'on failure':<10}  {'passed':>10}  "
                     f"{'failed':>10}  status")
    for r in result.rules:
        label = f"{r.name} ({r.dataset})".ljust(width)
        line = (f"  {label}  {r.action:<10}  {r.passed_records:>10,}  "
                f"{r.failed_records:>10,}  {r.status}")
        if r.error:
            line += f": {r.error}"
        lines.append(line)
    return "\n".join(lines)


def result_to_json(result: QualityResult) -> dict[str, Any]:
    """A JSON-able form of ``result`` (``binlake quality --format json``)."""
    return {
        "run_id": result.run_id, "run_time": result.run_time.isoformat() + "Z",
        "window": result.window, "silver_version": result.silver_version,
        "status": result.status, "exit_code": exit_code(result),
        "rows_checked": result.rows_checked, "report": result.report_path,
        "rules": [{"name": r.name, "dataset": r.dataset, "action": r.action,
                   "status": r.status, "passed_records": r.passed_records,
                   "failed_records": r.failed_records, "expectation": r.expectation,
                   "check": r.check,
                   "error": r.error, "failing": list(r.failing)} for r in result.rules],
        "tables": [{"dataset": t.dataset, "schema_name": t.schema_name,
                    "table_name": t.table_name, "rows": t.rows, "failed": t.failed}
                   for t in result.tables],
    }
