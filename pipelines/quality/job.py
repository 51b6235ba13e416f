"""The quality job: run the rules over the silver window and the quarantine, store and report.

Writes, per run:

- ``<lake>/quality/results`` (Delta, append): one row per rule and dataset, shaped like
  Databricks expectation metrics — run_id, run_time, name, dataset, passed_records,
  failed_records, action, status — plus expectation, window and silver_version;
- ``<lake>/quality/failures`` (Delta, append): the failing rows' keys per rule (a sample of
  ``report.sample_rows``; every one for ``quarantine`` rules, for consumers to exclude);
- ``<lake>/quality/reports/<run_id>.html`` and a copy at ``<lake>/quality/report.html``.

Status per rule: ``passed``; else by action ``warned`` / ``quarantined`` / ``failed``;
``error`` when GE could not evaluate it; ``skipped`` when its dataset has no table yet.
:func:`exit_code` is 1 when a ``fail`` rule failed or errored.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from typing import Any, Sequence

from pipelines.config import QUALITY_REPORTS_DIR, Config, lake_dir
from pipelines.lake.delta_ops import version_unreadable
from pipelines.lake.few_files import keep_few_files
from pipelines.lake.tables import QUALITY_FAILURES, QUALITY_RESULTS, Lake
from pipelines.quality.checks import (KeyPass, Outcome, check_rules_against, considered,
                                      failing_rows, key_pass, unique_filters, unique_measures,
                                      validate)
from pipelines.quality.datasets import (
    KEY, REPORT_COLUMNS, Window, alone_in_bounds, alone_in_stats, bound_aggregates,
    context_frame, context_key_counts, keyed_rows, quarantine_frame, silver_frame, silver_slice,
)
from pipelines.quality.result import (
    QualityResult, RuleResult, TableCounts, exit_code, render_result, result_to_json, summary_line,
)
from pipelines.quality.rules import Action, Expect, Rule, RuleSet, load_rules

__all__ = ["RuleResult", "TableCounts", "QualityResult", "run_quality", "summary_line",
           "exit_code", "result_to_json", "render_result", "last_quality", "render_last",
           "RESULTS_DDL", "FAILURES_DDL"]

RESULTS_DDL = QUALITY_RESULTS.ddl()
FAILURES_DDL = QUALITY_FAILURES.ddl()
_STATUS = {Action.WARN: "warned", Action.QUARANTINE: "quarantined", Action.FAIL: "failed"}
# Checks of silver at a pinned version that a concurrent commit made unreadable, at most.
_PIN_ATTEMPTS = 3

log = logging.getLogger(__name__)


def _rule_result(o: Outcome) -> RuleResult:
    rule = o.rule
    if o.error:
        status = "error"
    elif o.failed:
        status = _STATUS[rule.action]
    else:
        status = "passed"
    return RuleResult(rule.name, rule.dataset, rule.action.value, status, o.passed, o.failed,
                      o.expectation, rule.description, o.failing, o.error, rule.check)


def _skipped(rule: Rule) -> RuleResult:
    return RuleResult(rule.name, rule.dataset, rule.action.value, "skipped", 0, 0,
                      "", rule.description, (), None, rule.check)


def _table_counts(dataset: str, frame, outcomes: Sequence[tuple[Outcome, Any]]
                  ) -> list[TableCounts]:
    """Rows per table, and per failed rule its failing rows per table (exact, via Spark).
    The frame's rows are the sum of the tables' (no ``count()`` of its own: one scan fewer)."""
    tables: dict[tuple[str | None, str | None], TableCounts] = {}
    for r in frame.groupBy("schema_name", "table_name").count().collect():
        key = (r["schema_name"], r["table_name"])
        tables[key] = TableCounts(dataset, *key, rows=int(r["count"]))
    for o, checked_df in outcomes:
        if not o.failed or o.error:
            continue
        for r in (failing_rows(checked_df, o.rule).groupBy("schema_name", "table_name")
                  .count().collect()):
            key = (r["schema_name"], r["table_name"])
            tc = tables.setdefault(key, TableCounts(dataset, *key))
            tc.failed[o.rule.name] = int(r["count"])
    return sorted(tables.values(), key=lambda t: (t.schema_name or "", t.table_name or ""))


def _check_silver_pinned(spark, cfg: Config, rules: list[Rule], rs: RuleSet, window: Window,
                         res: QualityResult) -> list[RuleResult]:
    """:func:`_check_silver`, again at silver's newer version when the engine can no longer
    read the version it pinned (``delta_ops.version_unreadable``: a silver or stream run
    committing meanwhile; quality holds no lease)."""
    for attempt in range(1, _PIN_ATTEMPTS + 1):
        try:
            return _check_silver(spark, cfg, rules, rs, window, res)
        except Exception as exc:  # noqa: BLE001 - the engine's error, matched by its text
            if attempt == _PIN_ATTEMPTS or not version_unreadable(exc):
                raise
            log.warning("quality: silver version %s became unreadable while checking it (a "
                        "commit landed meanwhile); checking again at the latest version",
                        res.silver_version)
    raise AssertionError("unreachable")  # the last attempt returned or raised


def _check_silver(spark, cfg: Config, rules: list[Rule], rs: RuleSet, window: Window,
                  res: QualityResult) -> list[RuleResult]:
    sl = silver_slice(spark, cfg, window)
    res.silver_version = sl.version
    if sl.rows is None:
        return [_skipped(r) for r in rules]
    frame = silver_frame(spark, cfg, sl)
    # Uniqueness looks at the window's rows and every older row sharing their key (no older
    # rows when the window is the whole table, or when the files' statistics show that no
    # older row lies within the window's key range).
    unique = [r for r in rules if r.expect is Expect.UNIQUE and not sl.whole]
    alone = alone_in_stats(sl, [list(r.columns) for r in unique]) if unique else []
    separate = [r for r, a in zip(unique, alone) if not a]
    together = [r for r in rules if r not in separate]
    found: dict[Rule, tuple[Outcome, Any]] = {}
    for o in validate(frame, together, report_columns=REPORT_COLUMNS["silver"],
                      sample_rows=rs.sample_rows, name="silver"):
        found[o.rule] = (o, frame)
    if separate:  # before their bounds are measured: a rule not fitting is named
        check_rules_against(sl.rows, separate)
        # One query over the window's rows measures every such rule's key bounds and how
        # many passes it needs; each pass then counts its keys' rows in the table: no pass
        # holds every key. Where no older row lies within a rule's key bounds (one count),
        # a pass groups the window's rows alone. The context itself (a semi join) is read
        # only by great-expectations, for a rule that found duplicates.
        aggs = [a for i, rule in enumerate(separate)
                for a in (*bound_aggregates(list(rule.columns), f"r{i}_"),
                          *unique_measures(sl.rows, rule, i))]
        measured = sl.rows.agg(*aggs).first().asDict()
    for i, rule in enumerate(separate):
        cols = list(rule.columns)
        bounds = {k[len(f"r{i}_"):]: v for k, v in measured.items() if k.startswith(f"r{i}_")}
        filters = unique_filters(sl.rows, rule, measured, i)
        if alone_in_bounds(sl, cols, bounds):  # no older row shares a key: the window alone
            groups = [key_pass(keyed_rows(sl, cols, where), rule) for where in filters]
        else:
            groups = [KeyPass(context_key_counts(sl, cols, considered(rule), where, bounds))
                      for where in filters]
        ctx = context_frame(sl, cols, bounds)
        (o,) = validate(ctx, [rule], report_columns=REPORT_COLUMNS["silver"],
                        sample_rows=rs.sample_rows, name=f"silver-{rule.name}",
                        unique_groups=groups)
        found[rule] = (o, ctx)
    counts = _table_counts("silver", frame, [found[r] for r in rules])
    res.rows_checked["silver"] = sum(t.rows for t in counts)
    res.tables += counts
    return [_rule_result(found[r][0]) for r in rules]


def _check_quarantine(spark, cfg: Config, rules: list[Rule], rs: RuleSet,
                      res: QualityResult) -> list[RuleResult]:
    frame = quarantine_frame(spark, cfg)
    if frame is None:
        return [_skipped(r) for r in rules]
    outcomes = validate(frame, rules, report_columns=REPORT_COLUMNS["quarantine"],
                        sample_rows=rs.sample_rows, name="quarantine")
    counts = _table_counts("quarantine", frame, [(o, frame) for o in outcomes])
    res.rows_checked["quarantine"] = sum(t.rows for t in counts)
    res.tables += counts
    return [_rule_result(o) for o in outcomes]


def run_quality(spark, cfg: Config, *, window: Window | str | None = None,
                rules: RuleSet | None = None, write: bool = True) -> QualityResult:
    """Run the quality rules (default ``conf/quality.toml``) over ``window`` (default: the
    rows of the latest silver commit) and the quarantine; store results and the HTML report.

    Raises :class:`ConfigError` for a bad window, rules file, or a rule that does not fit its
    dataset (the message names the rule).
    """
    started = time.monotonic()
    rs = rules if rules is not None else load_rules()
    win = window if isinstance(window, Window) else Window.parse(window)
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
    res = QualityResult(run_id=f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}", run_time=now,
                        window=str(win), silver_version=None)
    by_dataset = {
        "silver": _check_silver_pinned(spark, cfg, rs.for_dataset("silver"), rs, win, res),
        "quarantine": _check_quarantine(spark, cfg, rs.for_dataset("quarantine"), rs, res),
    }
    order = {(r.name, r.dataset): i for i, r in enumerate(rs.rules)}
    res.rules = sorted((r for rr in by_dataset.values() for r in rr),
                       key=lambda r: order[(r.name, r.dataset)])
    from pipelines.silver.derived import load_fk_gaps

    res.notes = [g.describe() for g in load_fk_gaps(spark, cfg)]
    res.seconds = time.monotonic() - started
    if write:
        _store(spark, cfg, res)
    return res


def report_path(cfg: Config) -> str:
    """The latest quality report: ``<lake>/quality/report.html``."""
    return lake_dir(cfg.lake_root, QUALITY_REPORTS_DIR, "report.html")


def _store(spark, cfg: Config, res: QualityResult) -> None:
    from pipelines.lake.files import write_lake_file
    from pipelines.quality.report import render_report

    rows = [(res.run_id, res.run_time, r.name, r.dataset, r.passed_records, r.failed_records,
             r.action, r.status, r.expectation, r.description, res.window, res.silver_version,
             r.error) for r in res.rules]
    lake = Lake.of(cfg)
    lake.append(spark.createDataFrame(rows, RESULTS_DDL), QUALITY_RESULTS)
    keep_few_files(spark, lake, QUALITY_RESULTS, lease=(cfg, "quality"))
    failures = []
    for r in res.rules:
        for f in r.failing:
            detail = {k: v for k, v in f.items()
                      if k not in KEY + ["schema_name", "table_name", "event_type"]}
            failures.append((res.run_id, res.run_time, r.name, r.dataset, r.action,
                             f.get("source_id"), f.get("binlog_file"), f.get("start_pos"),
                             f.get("row_in_event"), f.get("schema_name"), f.get("table_name"),
                             f.get("event_type"), json.dumps(detail, default=str)))
    if failures:
        lake.append(spark.createDataFrame(failures, FAILURES_DDL), QUALITY_FAILURES)
    from pipelines.quality.trends import load_trends, render_trends
    html = render_report(res, render_trends(load_trends(spark, cfg)))
    per_run = lake_dir(cfg.lake_root, QUALITY_REPORTS_DIR, "reports", f"{res.run_id}.html")
    latest = report_path(cfg)
    for path in (per_run, latest):
        write_lake_file(cfg.storage, path, html.encode("utf-8"))
    res.report_path = latest


def render_last(last: dict[str, Any] | None) -> str:
    """One line for ``binlake status`` from :func:`last_quality`."""
    if last is None:
        return "quality: never run"
    line = (f"quality: {last['status']} at {last['run_time']} (run {last['run_id']}, window "
            f"{last['window']}, silver version {last['silver_version']}, {last['rules']} rules)")
    if last["not_passed"]:
        line += "; " + ", ".join(f"{r['name']} ({r['dataset']}): {r['failed_records']} "
                                 f"{r['status']}" for r in last["not_passed"])
    return line


def last_quality(spark, cfg: Config) -> dict[str, Any] | None:
    """The latest stored run (for ``binlake status``): run_id, run_time, window, status and
    the rules that did not pass; ``None`` when quality never ran."""
    lake = Lake.of(cfg)
    if not lake.exists(spark, QUALITY_RESULTS):
        return None
    df = lake.read(spark, QUALITY_RESULTS)
    latest = df.orderBy(df.run_time.desc(), df.run_id.desc()).select("run_id").limit(1).collect()
    if not latest:
        return None
    rows = df.where(df.run_id == latest[0]["run_id"]).collect()
    blocking = any(r["action"] == "fail" and r["status"] in ("failed", "error") for r in rows)
    others = any(r["status"] not in ("passed", "skipped") for r in rows)
    return {
        "run_id": rows[0]["run_id"], "run_time": rows[0]["run_time"],
        "window": rows[0]["window"], "silver_version": rows[0]["silver_version"],
        "status": "failed" if blocking else "warned" if others else "passed",
        "rules": len(rows),
        "not_passed": sorted(
            ({"name": r["name"], "dataset": r["dataset"], "status": r["status"],
              "failed_records": r["failed_records"]}
             for r in rows if r["status"] not in ("passed", "skipped")),
            key=lambda d: (d["name"], d["dataset"])),
        "report": report_path(cfg),
    }

