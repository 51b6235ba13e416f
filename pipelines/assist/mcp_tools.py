"""The read-only tools of ``binlake mcp`` (and the data of ``binlake console``): plain
functions ``(spark, cfg, ...) -> dict`` over the history, status and quality functions the
CLI uses (``pipelines.history.query``/``reconstruct``/``flashback``, ``pipelines.ops.status``,
``pipelines.quality``): no second copy of their logic.

Every result is JSON-able and bounded: at most ``Limits.rows`` rows and about
``Limits.bytes`` bytes of them, with ``truncated: true`` and a ``note`` when cut.
:func:`scrub` takes every password the configuration knows (and any ``user:pw@`` URL) out of
a result. Bad arguments raise :class:`~pipelines.errors.ConfigError` with a message naming
the argument (unknown table, bad timestamp, …). Nothing here writes: flashback only plans
and renders its SQL, never applies it.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any, Iterable

from pipelines.config import Config
from pipelines.errors import ConfigError

__all__ = ["Limits", "tool_query", "tool_reconstruct", "tool_flashback", "tool_status",
           "tool_schema_changes", "tool_quality", "change_volume", "known_table_names",
           "scrub", "secrets_of"]


@dataclass(frozen=True)
class Limits:
    """How much one result may hold: rows (a caller's ``limit`` is capped here) and bytes
    of JSON text of the rows (the SQL text of a flashback)."""

    rows: int = 200
    bytes: int = 256 * 1024


def _json_value(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v.isoformat(" ")
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return v


def _plain(obj: Any) -> Any:
    """``obj`` made JSON-able (datetimes as UTC text, as ``binlake query`` prints them)."""
    return json.loads(json.dumps(obj, default=_json_value))


def _limit(limit: int | None, limits: Limits) -> int:
    if limit is None:
        return limits.rows
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        raise ConfigError(f"limit {limit!r}: must be a positive integer")
    return min(limit, limits.rows)


def _bounded(rows: Iterable[dict[str, Any]], limit: int, limits: Limits
             ) -> tuple[list[dict[str, Any]], bool, str | None]:
    """At most ``limit`` rows and ``limits.bytes`` bytes of them; (rows, truncated, note)."""
    out: list[dict[str, Any]] = []
    size = 0
    for row in rows:
        if len(out) == limit:
            return out, True, f"more than {limit} row(s): the first {limit} shown"
        n = len(json.dumps(row, ensure_ascii=False).encode())
        if size + n > limits.bytes:
            return out, True, (f"cut at {len(out)} row(s): the next would pass "
                               f"{limits.bytes} bytes")
        out.append(row)
        size += n
    return out, False, None


def _table_arg(spark, cfg: Config, table: str | None) -> tuple[str, str]:
    """``schema.table`` parsed and known to the lake, else :class:`ConfigError`."""
    from pipelines.history.command import build_selection
    from pipelines.history.query import check_names

    if not table or not isinstance(table, str):
        raise ConfigError("table: required, as schema.table")
    sel = build_selection(table=table)
    check_names(spark, cfg, sel)
    return sel.table


def known_table_names(spark, cfg: Config) -> list[str]:
    """``schema.table`` of every table silver or a snapshot knows, sorted."""
    from pipelines.history.query import known_tables

    return [f"{s}.{t}" for s, t in sorted(known_tables(spark, cfg))]


def _change(r: dict[str, Any]) -> dict[str, Any]:
    out = {k: _json_value(v) for k, v in r.items()}
    for k in ("changed_columns", "row_before", "row_after"):
        if isinstance(out.get(k), str):
            out[k] = json.loads(out[k])  # silver stores them as JSON text
    return out


def tool_query(spark, cfg: Config, *, table: str | None = None, schema: str | None = None,
               pk: str | None = None,
               since: str | None = None, until: str | None = None, gtid: str | None = None,
               event_type: str | None = None, changed: str | None = None,
               where: list[str] | None = None, limit: int | None = None,
               limits: Limits = Limits()) -> dict[str, Any]:
    """A key's (``pk``) or a selection's changes of ``table`` (or of every table of
    ``schema``), oldest first (``binlake query``'s jsonl objects)."""
    from pipelines.history.command import build_selection
    from pipelines.history.query import before_history, check_names, query_silver

    if not table and not schema:
        raise ConfigError("table (schema.table) or schema: required")
    if pk is not None and not table:
        raise ConfigError("pk needs table")
    n = _limit(limit, limits)
    sel = build_selection(table=table, schema=schema, pk=pk, since=since, until=until, gtid=gtid,
                          event_type=event_type, changed=changed, where=where or [])
    rows, truncated, note = _bounded(
        (_change(r) for r in query_silver(spark, cfg, sel, n + 1)), n, limits)
    if not rows:
        check_names(spark, cfg, sel)  # an unknown table or column raises here
        note = "no row changes match" + before_history(spark, cfg, sel)
    return {"table": f"{sel.table[0]}.{sel.table[1]}" if sel.table else None,
            "schema": sel.schema, "pk": pk, "changes": rows,
            "count": len(rows), "truncated": truncated, "note": note}


def tool_reconstruct(spark, cfg: Config, *, table: str, at: str | None = None,
                     gtid: str | None = None, pos: str | None = None, pk: str | None = None,
                     limit: int | None = None, limits: Limits = Limits()) -> dict[str, Any]:
    """The rows of ``table`` (or one key) at a time, GTID or ``FILE:POS``, ordered by key."""
    from pipelines.history.reconstruct import reconstruct, resolve_point
    from pipelines.history.times import parse_time

    points = [x for x in (at, gtid, pos) if x]
    if len(points) != 1:
        raise ConfigError("name exactly one point: at (UTC time or ISO 8601), gtid, or pos "
                          "(FILE:POS)")
    n = _limit(limit, limits)
    schema, name = _table_arg(spark, cfg, table)
    point = resolve_point(spark, cfg, at=parse_time(at, "at") if at else None, gtid=gtid,
                          pos=pos)
    rec = reconstruct(spark, cfg, schema, name, point, pk=pk)
    images = (json.loads(r["image"]) for r in
              rec.images.select("image").limit(n + 1).toLocalIterator())
    rows, truncated, note = _bounded(images, n, limits)
    return {"table": f"{schema}.{name}", "point": point.text, "history_from": rec.start,
            "columns": rec.columns, "rows": rows, "count": len(rows), "truncated": truncated,
            "note": note, "warnings": rec.warnings}


def tool_flashback(spark, cfg: Config, *, table: str | None = None, schema: str | None = None,
                   pk: str | None = None, since: str | None = None, until: str | None = None,
                   gtid: str | None = None, event_type: str | None = None,
                   limits: Limits = Limits()) -> dict[str, Any]:
    """The undo SQL of a selection (``binlake flashback --format sql``'s script) with its
    counts and conflicts: a dry run, never applied from here."""
    from pipelines.history.command import build_selection
    from pipelines.history.flashback import plan_flashback, render_script
    from pipelines.history.query import before_history, check_names

    sel = build_selection(table=table, schema=schema, pk=pk, since=since, until=until,
                          gtid=gtid, event_type=event_type)
    if not any((sel.table, sel.schema, sel.pk, sel.since, sel.until, sel.gtids)):
        raise ConfigError("flashback needs a selection: since/until, gtid, table, schema or "
                          "pk (undoing the whole history is never what you want)")
    if sel.pk is not None and sel.table is None:
        raise ConfigError("pk needs table")
    plan = plan_flashback(spark, cfg, sel)
    out: dict[str, Any] = {"applied": False, "changes": plan.changes,
                           "statements": plan.statements,
                           "transactions": len(plan.transactions),
                           "conflicts": [c.describe() for c in plan.conflicts],
                           "warnings": list(plan.warnings), "sql": "", "truncated": False,
                           "note": "dry run: the SQL is for a person to review and run; "
                                   "binlake mcp never applies it"}
    if plan.changes == 0:
        check_names(spark, cfg, sel)
        out["note"] = "no row changes match: nothing to undo" + before_history(spark, cfg, sel)
        return out
    script = render_script(plan)
    raw = script.encode()
    if len(raw) > limits.bytes:
        cut = raw[:limits.bytes].decode(errors="ignore")
        out.update(sql=cut[:cut.rfind("\n") + 1], truncated=True,
                   note=f"SQL cut at {limits.bytes} of {len(raw)} bytes (narrow the selection "
                        "or run binlake flashback --format sql for all of it); a dry run, "
                        "never applied")
    else:
        out["sql"] = script
    return out


def tool_status(spark, cfg: Config, *, limits: Limits = Limits()) -> dict[str, Any]:
    """``binlake status --format json``, with its per-file list bounded to ``limits.rows``."""
    from pipelines.ops.status import collect_status

    st = _plain(collect_status(spark, cfg))
    files = st.get("files") or []
    st["truncated"] = len(files) > limits.rows
    if st["truncated"]:
        st["files"] = files[-limits.rows:]
        st["note"] = f"{len(files)} files: the last {limits.rows} shown"
    return st


def tool_schema_changes(spark, cfg: Config, *, table: str | None = None,
                        limits: Limits = Limits()) -> dict[str, Any]:
    """Per table: the DDL touching it (bronze's QUERY events, in binlog order) and the schema
    snapshots describing it (their coordinates and columns), i.e. its schema epochs."""
    from pipelines.history import lake
    from pipelines.silver.snapshot_store import load_snapshots

    names = ([_table_arg(spark, cfg, table)] if table else
             [tuple(t.split(".", 1)) for t in known_table_names(spark, cfg)])
    snaps = load_snapshots(spark, cfg)
    tables, truncated = [], False
    for schema, name in names:
        if len(tables) == limits.rows:
            truncated = True
            break
        ddl = [{"at": d["where"], "kind": d["kind"], "query": d["query"],
                "event_timestamp": _json_value(d["event_timestamp"])}
               for d in lake.ddl_statements(spark, cfg, schema, name)]
        snapshots = [{"snapshot_id": s.snapshot_id, "snapshot_time": _json_value(s.snapshot_time),
                      "binlog_file": s.binlog_file, "binlog_pos": s.binlog_pos,
                      "columns": list(s.tables[(schema, name)].column_names)}
                     for s in snaps if (schema, name) in s.tables]
        tables.append({"table": f"{schema}.{name}", "ddl": ddl, "snapshots": snapshots,
                       "epochs": len(ddl) + 1})
    out = {"tables": tables, "truncated": truncated}
    if truncated:
        out["note"] = f"more than {limits.rows} tables: name one with table"
    return out


def tool_quality(spark, cfg: Config, *, limits: Limits = Limits()) -> dict[str, Any]:
    """The latest quality run's summary (as in ``binlake status``) and the trend of the last
    runs (status and failed records per rule)."""
    from pipelines.quality import last_quality
    from pipelines.quality.trends import load_trends

    last = last_quality(spark, cfg)
    if last is None:
        return {"latest": None, "trend": [], "note": "quality never ran on this lake "
                                                     "(binlake quality)"}
    points = load_trends(spark, cfg, last=min(30, limits.rows))
    trend = [{"run_id": p.run_id, "run_time": _json_value(p.run_time),
              "rules": {f"{n} ({d})": {"status": s, "failed_records": f}
                        for (n, d), (s, f) in sorted(p.statuses.items())},
              "rows_checked": dict(p.rows_checked)} for p in points]
    return _plain({"latest": last, "trend": trend})


def change_volume(spark, cfg: Config, *, hours: int = 48) -> list[dict[str, Any]]:
    """Row changes per table and UTC hour over the last ``hours`` hours of silver:
    ``{"table", "hour", "changes"}``, oldest hour first."""
    from pyspark.sql import functions as F

    from pipelines.history import lake

    df = lake.silver(spark, cfg)
    latest = df.agg(F.max("event_timestamp")).collect()[0][0]
    if latest is None:
        return []
    since = latest - dt.timedelta(hours=hours)
    rows = (df.where(F.col("event_timestamp") > F.lit(since))
            .groupBy("schema_name", "table_name",
                     F.date_trunc("hour", "event_timestamp").alias("hour"))
            .agg(F.count(F.lit(1)).alias("changes"))
            .orderBy("hour", "schema_name", "table_name").collect())
    return [{"table": f"{r['schema_name']}.{r['table_name']}", "hour": _json_value(r["hour"]),
             "changes": r["changes"]} for r in rows]


def secrets_of(cfg: Config) -> list[str]:
    """Every password the configuration holds (settings and DSNs)."""
    from pipelines.mysql.dsn import Dsn

    out = []
    for section in (cfg.source, cfg.gold):
        if section.password:
            out.append(section.password)
        if section.dsn:
            try:
                pw = Dsn.parse(section.dsn, setting="dsn").password
            except ConfigError:
                continue
            if pw:
                out.append(pw)
    return out


def scrub(result: Any, secrets: Iterable[str]) -> Any:
    """``result`` with every secret and every ``user:pw@`` URL password replaced by ``***``
    (``mysql/dsn.py``'s ``redact``/``redact_urls``)."""
    from pipelines.mysql.dsn import redact, redact_urls

    text = json.dumps(result, default=_json_value, ensure_ascii=False)
    clean = redact_urls(redact(text, *secrets))
    return result if clean == text else json.loads(clean)
