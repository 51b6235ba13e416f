"""``binlake status``: what the lake holds (files, their outcome, table versions and counts)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pipelines.bronze.files import load_states
from pipelines.config import Config
from pipelines.lake.tables import (BRONZE_EVENTS, SCHEMA_SNAPSHOTS, SILVER_EVENTS, SILVER_QUARANTINE,
                            Lake)
from pipelines.vocabulary import CHANGE_TYPES_SQL

__all__ = ["collect_status", "render_status", "add_parser", "cmd_status"]


def collect_status(spark, cfg: Config) -> dict[str, Any]:
    """A JSON-able summary of the lake; a damaged table shows as a fault, not a crash."""
    from pipelines.lake.check import lake_faults
    from pipelines.lake.lease import current_holders

    lake = Lake.of(cfg)
    out: dict[str, Any] = {"lake": cfg.lake_root, "files": [],
                           "leases": current_holders(cfg), "faults": lake_faults(cfg)}
    if lake.uses_catalog:
        out["catalog"] = lake.catalog
    if out["faults"]:
        return out  # reading a damaged table fails or miscounts: faults and repairs only
    return _collect(spark, cfg, lake, out)


def _collect(spark, cfg: Config, lake: Lake, out: dict[str, Any]) -> dict[str, Any]:
    bronze = lake.ident(BRONZE_EVENTS)
    files = sorted(load_states(spark, lake).values(),
                   key=lambda s: (s.source_id, s.binlog_file))
    out["files"] = [vars(f) for f in files]
    busy = any(x["stage"] == "bronze" and x["state"] == "held" for x in out["leases"])
    out["interrupted"] = [] if busy else [f"{f.source_id}/{f.binlog_file}" for f in files
                                          if f.status == "in_progress"]
    if lake.exists(spark, BRONZE_EVENTS):
        counts = spark.sql(
            "SELECT source_id, count(*) AS row_changes, min(event_timestamp) AS earliest, "
            "max(event_timestamp) AS latest, count(DISTINCT binlog_file) AS files "
            f"FROM {bronze} WHERE event_type IN {CHANGE_TYPES_SQL} "
            "GROUP BY source_id ORDER BY source_id").collect()
        incidents = spark.sql(
            "SELECT source_id, binlog_file, start_pos, query FROM "
            f"{bronze} WHERE event_type = 'INCIDENT' ORDER BY binlog_file, start_pos"
        ).collect()
        out["bronze"] = {"version": lake.version(spark, BRONZE_EVENTS),
                         "sources": [r.asDict() for r in counts],
                         "incidents": [r.asDict() for r in incidents]}
    out["silver"] = _silver_status(spark, cfg)
    from pipelines.stream.status import stream_status

    stream = stream_status(spark, cfg)
    if stream.get("state") != "never run":
        out["stream"] = stream
    from pipelines.quality import last_quality

    out["quality"] = last_quality(spark, cfg)
    from pipelines.gold.job import gold_status

    out["gold"] = gold_status(cfg, spark=spark)
    return out


def _silver_status(spark, cfg: Config) -> dict[str, Any] | None:
    lake = Lake.of(cfg)
    out: dict[str, Any] = {"version": lake.version(spark, SILVER_EVENTS)}
    if lake.exists(spark, SILVER_EVENTS):
        r = spark.sql(f"SELECT count(*) AS n, min(event_timestamp) AS earliest, "
                      f"max(event_timestamp) AS latest FROM {lake.ident(SILVER_EVENTS)}"
                      ).collect()[0]
        out.update(rows=r["n"], earliest=r["earliest"], latest=r["latest"])
    out["quarantined"] = lake.rows(spark, SILVER_QUARANTINE)
    out["snapshots"] = (lake.read(spark, SCHEMA_SNAPSHOTS).select("snapshot_id").distinct().count()
                        if lake.exists(spark, SCHEMA_SNAPSHOTS) else 0)
    from pipelines.silver.snapshot_store import load_checks

    out["warnings"] = sorted({f"{c.name}: {c.detail}" for _, c in load_checks(spark, cfg)
                              if c.level != "ok"})
    return out


def render_status(st: dict[str, Any]) -> str:
    lines = [f"lake: {st['lake']}" + (f" (catalog {st['catalog']})" if st.get("catalog") else "")]
    lines += [f"lease {x['stage']}: {x['state']} by host {x['host']} pid {x['pid']} "
              f"({x['command']!r}) since {x['since']}" for x in st.get("leases", [])
              if x["state"] != "released"]
    lines += [f"FAULT {f['table']}: {f['problem']}\n      repair: {f['repair']}"
              for f in st.get("faults", [])]
    if st.get("faults"):
        return "\n".join(lines)
    if st.get("interrupted"):
        lines.append(f"INTERRUPTED bronze run: {', '.join(st['interrupted'])} in_progress and no "
                     "bronze run holds the lake; run `binlake bronze` for them again")
    b = st.get("bronze")
    if b:
        lines.append(f"bronze: version {b['version']}")
        for s in b["sources"]:
            lines.append(f"  source {s['source_id']}: {s['row_changes']} row changes in "
                         f"{s['files']} file(s) that hold any, {s['earliest']} .. {s['latest']}")
        for inc in b.get("incidents", []):
            lines.append(f"  GAP: INCIDENT at {inc['source_id']}/{inc['binlog_file']} pos "
                         f"{inc['start_pos']}: {inc['query']} (changes may be missing here)")
    else:
        lines.append("bronze: no table yet")
    sv = st.get("silver") or {}
    if sv.get("version") is not None:
        lines.append(f"silver: version {sv['version']}, {sv.get('rows', 0)} row changes "
                     f"({sv.get('earliest')} .. {sv.get('latest')}), {sv['quarantined']} in "
                     f"quarantine, {sv['snapshots']} schema snapshot(s)")
    for w in sv.get("warnings", []):
        lines.append(f"  WARNING {w}")
    lines.append(f"files: {len(st['files'])}")
    for f in st["files"]:
        events = "" if f["events"] is None else f"events {f['events']}, "  # streamed: not counted
        line = (f"  {f['source_id']}/{f['binlog_file']}: {f['status']}, {events}"
                f"row changes {f['row_changes']}, last pos {f['last_pos']}")
        if f.get("error"):
            line += f"\n      {f['error']}"
        lines.append(line)
    if st.get("stream"):
        from pipelines.stream.status import render_stream_status

        lines += render_stream_status(st["stream"])
    from pipelines.quality import render_last

    lines.append(render_last(st.get("quality")))
    if st.get("gold"):
        from pipelines.gold.command import render_gold_status

        lines += render_gold_status(st["gold"])
    return "\n".join(lines)


def add_parser(sub) -> None:
    """Add ``status`` to ``binlake``'s sub-parsers (``pipelines.command``)."""
    p = sub.add_parser("status", help="what is indexed")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(handler=cmd_status)


def cmd_status(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.engine.session import get_spark

    st = collect_status(get_spark(cfg.engine), cfg)
    print(json.dumps(st, indent=2, default=str) if args.format == "json" else render_status(st))
    return 0
