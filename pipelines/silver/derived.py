"""I/O: append the derived row changes of a silver run (``derive``: what they are).

After a run appended the logged row changes of its files, the causes among them (parent
DELETE/UPDATEs under a cascading FK rule of some snapshot, ``TRUNCATE TABLE`` QUERY events)
are folded with the history of the tables they touch, in the engine (one ``mapInArrow``
task over the tables' silver rows: the alive rows of those tables are its state), and the
derived rows silver does not hold yet are appended (the anti-join on silver's key that
logged rows take: a re-run after a kill -9 adds none twice). A run whose files hold no
TRUNCATE and whose snapshots record no cascading rule costs nothing; one with rules but no
parent DELETE/UPDATE costs one probe of the run's rows.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any, Iterator

import pyarrow as pa

from pipelines.lake.delta_ops import sql_string
from pipelines.lake.tables import BRONZE_EVENTS, SILVER_EVENTS, Lake
from pipelines.silver.derive import (ADD_COLUMNS, DROP_COLUMNS, RENAME, TRUNCATE, Fold, Rule,
                                     added_columns, cascading_rules, dropped_columns,
                                     partition_change, truncated_table)
from pipelines.silver.naming import NamingPlan, position_key
from pipelines.silver.partitions import partition_effects
from pipelines.silver.slices import in_files
from pipelines.vocabulary import DELETE, INSERT, ROW_KEY, UPDATE

__all__ = ["append_derived", "load_fk_gaps", "FOLD_INPUT", "derivation_digest", "numbered"]

log = logging.getLogger(__name__)

KEY = list(ROW_KEY)
# What the fold reads of silver's rows: silver's columns (the registry's) less the partition,
# the hashes and the changed columns.
FOLD_INPUT = [c for c in SILVER_EVENTS.column_names
              if c not in ("event_date", "pk_hash", "changed_columns", "pk_hash_after")]
_OUT = SILVER_EVENTS.arrow_schema(exclude=["pk_hash", "pk_hash_after"])
_OUT_DDL = SILVER_EVENTS.ddl(exclude=["pk_hash", "pk_hash_after"])
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _rules(snapshots: list) -> tuple[list[Rule], dict[str, set[Rule]]]:
    """Every cascading rule any snapshot records, and each snapshot's."""
    per: dict[str, set[Rule]] = {}
    for snap in snapshots:
        per[snap.snapshot_id] = set(cascading_rules(snap.fks))
    every = sorted({r for rules in per.values() for r in rules}, key=lambda r: (r.child, r.name))
    return every, per


def _pk_names(snapshots: list, tables: set[tuple[str, str]]) -> dict[tuple[str, str], list[str]]:
    """A table's primary-key columns in table order, from the latest snapshot holding it."""
    out: dict[tuple[str, str], list[str]] = {}
    for snap in snapshots:
        for key in tables:
            t = snap.tables.get(key)
            if t is not None and t.has_primary_key:
                out[key] = [c.name for c in t.columns if c.pk_ordinal is not None]
    return out


def _tables_where(tables: set[tuple[str, str]]) -> str:
    return " OR ".join(f"(schema_name = {sql_string(s)} AND table_name = {sql_string(t)})"
                       for s, t in sorted(tables))


def append_derived(spark, lake: Lake, plan: NamingPlan, snapshots: list,
                   ddl_rows: list[tuple], files: list[tuple[str, str]]) -> int:
    """Append the derived row changes of ``files`` (the run's); how many were appended.
    ``ddl_rows``: (source, file, start_pos, default schema, query) of every QUERY event of
    bronze (the run's files' are the causes; all of them say which renames, DROP COLUMNs
    and partitionings hold).

    The derived rows are collected to the driver before their one commit: at most the
    touched tables' alive rows per run."""
    run = set(files)
    queries = []  # the QUERY events that change rows: (source, file, pos, table, marker)
    named = False  # a DROP/TRUNCATE PARTITION of named partitions among them
    for source, file, pos, schema, query in ddl_rows:
        if (source, file) not in run:
            continue
        table = truncated_table(query, schema)
        if table is not None:
            queries.append((source, file, pos, table, {"event_type": TRUNCATE}))
            continue
        part = partition_change(query, schema)
        if part is not None and part[1] == "TRUNCATE" and part[2] == ["ALL"]:
            queries.append((source, file, pos, part[0], {"event_type": TRUNCATE,
                                                         "derived_origin": "partition"}))
            continue
        if part is not None:
            named = True  # its rows: from the table's partitioning (below)
            continue
        added = added_columns(query, schema)
        if added is not None:
            after = plan.snapshot_for(source, *added[0], position_key(file, pos) + 1)
            queries.append((source, file, pos, added[0], {
                "event_type": ADD_COLUMNS, "added": added[1],
                # the new epoch's names: its snapshot's, else the TABLE_MAP's (as its rows)
                "schema_version": after.snapshot_id if after is not None else "binlog"}))
    from pipelines.silver.renames import renames

    if named:  # the partitioning as every earlier DDL left it
        queries += [(e.source, e.file, e.pos, e.table,
                     {"event_type": TRUNCATE, "derived_origin": "partition", "partition": e.spec})
                    for e in partition_effects(ddl_rows)
                    if e.spec is not None and (e.source, e.file) in run]
    rules, per_snapshot = _rules(snapshots)
    if not queries and not rules:
        return 0
    if not lake.exists(spark, SILVER_EVENTS):
        return 0
    silver = lake.read(spark, SILVER_EVENTS)
    where = in_files(sorted(run))
    changed = set()  # the parents the run's files DELETE from or UPDATE
    if rules:
        changed = {(r[0], r[1]) for r in silver.where(where)
                   .where(_tables_where({r.parent for r in rules}))
                   .where(f"event_type IN ('{DELETE}', '{UPDATE}')")
                   .select("schema_name", "table_name").distinct().collect()}
    if not queries and not changed:
        return 0
    # The tables a cause can reach: the TRUNCATEd/ALTERed ones, and the changed parents with
    # their children, theirs, … (a derived change is a parent change in turn).
    tables = {t for _, _, _, t, _ in queries} | changed
    grown = True
    while grown:
        more = {r.child for r in rules if r.parent in tables} - tables
        tables |= more
        grown = bool(more)
    # Renames (this run's and earlier ones): the rows made under a table's other names are
    # its rows too (a TRUNCATE of the new name removes those inserted under the old one).
    facts = renames(ddl_rows)
    grown = True
    while grown:
        more = ({f.old for f in facts if f.new in tables}
                | {f.new for f in facts if f.old in tables}) - tables
        tables |= more
        grown = bool(more)
    markers = _markers(spark, lake, queries) + [
        {"event_type": RENAME, "seq": f.pos, "row_in_event": -1, "source_id": None,
         "schema_name": f.new[0], "table_name": f.new[1], "old": f.old, "new": f.new,
         "columns": f.columns} for f in facts if f.old in tables] + [
        # every file's DROP COLUMNs (not only the run's): the alive rows lose the column, so
        # a later ADD COLUMN's or FK action's image holds only the server's columns
        {"event_type": DROP_COLUMNS, "seq": position_key(file, pos), "row_in_event": -1,
         "source_id": None, "schema_name": d[0][0], "table_name": d[0][1], "dropped": d[1]}
        for _, file, pos, schema, query in ddl_rows
        if (d := dropped_columns(query, schema)) is not None and d[0] in tables]
    # The tables' history, less the derived rows of the run's own files (derived again here:
    # the anti-join keeps those already there).
    derived_here = f"(coalesce(origin, 'binlog') <> 'binlog' AND ({where}))"
    history = (silver.where(_tables_where(tables)).where(f"NOT {derived_here}")
               .select(*FOLD_INPUT))
    pk_names = _pk_names(snapshots, tables)
    for _ in range(len(facts)):  # a renamed table keys its rows as under its other names
        more = {**{f.new: pk_names[f.old] for f in facts
                   if f.old in pk_names and f.new not in pk_names and not f.columns},
                **{f.old: pk_names[f.new] for f in facts
                   if f.new in pk_names and f.old not in pk_names and not f.columns}}
        if not more:
            break
        pk_names.update(more)
    fold = _fold_task(plan, rules, per_snapshot, pk_names, run, markers)
    out = history.repartition(1).mapInArrow(fold, _OUT_DDL)
    from pipelines.silver.transform import with_hashes

    out = with_hashes(out).select(*SILVER_EVENTS.column_names)
    # Silver holds a derived row already when one of the same content is at its place (a
    # re-run after a kill -9, or files derived again after a snapshot named more rules): by
    # content, not by row_in_event, which the new rules may have shifted.
    from pyspark.sql import functions as F

    same = F.sha2(F.to_json(F.struct(*_SAME)), 256).alias("_same")
    held = (silver.where(where).where("coalesce(origin, 'binlog') <> 'binlog'")
            .select(*KEY[:3], same))
    new = (out.select("*", same).join(held, [*KEY[:3], "_same"], "left_anti")
           .select(*SILVER_EVENTS.column_names))
    rows = new.collect()  # few by nature (a table's rows at most); written in one commit
    if not rows:
        return 0
    last = {(r[0], r[1], r[2]): r[3] for r in silver.where(where)
            .groupBy(*KEY[:3]).agg(F.max("row_in_event")).collect()}
    rows = numbered([r.asDict() for r in rows], last)
    names = SILVER_EVENTS.column_names
    lake.append(spark.createDataFrame([tuple(r[c] for c in names) for r in rows],
                                      SILVER_EVENTS.ddl()), SILVER_EVENTS)
    log.info("silver: %d derived row change(s) (FK actions, TRUNCATE)", len(rows))
    return len(rows)


# What makes two derived rows the same change (``row_in_event`` and ``seq`` aside)
_SAME = ["schema_name", "table_name", "event_type", "origin", "pk_values", "row_before",
         "row_after"]


def numbered(rows: list[dict[str, Any]], last: dict[tuple, int]) -> list[dict[str, Any]]:
    """Pure: the new derived ``rows`` numbered after the rows silver holds at their place
    (``last``: (source, file, start_pos) → its highest row_in_event), in the order the fold
    gave them; ``seq`` follows (docs/silver.md: clamped to the event's end)."""

    rows = sorted(rows, key=lambda r: (r["source_id"], r["binlog_file"], r["start_pos"],
                                       r["row_in_event"]))
    after = dict(last)
    for r in rows:
        place = (r["source_id"], r["binlog_file"], r["start_pos"])
        n = max(after.get(place, -1) + 1, 0)
        after[place] = n
        r["row_in_event"] = n
        r["seq"] = position_key(r["binlog_file"], min(r["start_pos"] + n, r["end_pos"] - 1))
    return rows


def derivation_digest(snapshots: list, gaps: list) -> str:
    """Pure: what derived row changes depend on beyond the binlog: every cascading FK rule
    the snapshots record and the schema epochs where a table's rules are unknown (``gaps``,
    ``fk_gaps``). A file derived under another digest is derived again (``silver/job``)."""
    import hashlib
    import json

    rules, _ = _rules(snapshots)
    facts = [[list(r.child), r.name, list(r.child_columns), list(r.parent),
              list(r.parent_columns), r.delete_rule, r.update_rule] for r in rules]
    holes = sorted([g.source, g.schema, g.table, g.start, g.end] for g in gaps)
    return hashlib.sha256(json.dumps([facts, holes]).encode()).hexdigest()[:16]


def _markers(spark, lake: Lake, queries: list[tuple]) -> list[dict[str, Any]]:
    """One fold row per QUERY event that changes rows (TRUNCATE, ADD COLUMN with a value):
    the event's place, its marker's event_type and facts."""
    if not queries:
        return []
    by_place = {(s, f, p): (t, m) for s, f, p, t, m in queries}
    files = sorted({(s, f) for s, f, _ in by_place})
    cols = ["source_id", "server_id", "server_uuid", "binlog_file", "start_pos", "end_pos",
            "event_timestamp", "gtid", "connection_id", "query", "commit_ts_us"]
    have = set(lake.read(spark, BRONZE_EVENTS).columns)
    q = (lake.read(spark, BRONZE_EVENTS).where(in_files(files))
         .where("event_type = 'QUERY'")
         .where(" OR ".join(f"start_pos = {int(p)}" for _, _, p in by_place))
         .select(*[c for c in cols if c in have]))
    out = []

    for r in q.collect():
        d = r.asDict()
        found = by_place.get((d["source_id"], d["binlog_file"], d["start_pos"]))
        if found is None:
            continue
        table, marker = found
        out.append({**{c: d.get(c) for c in cols}, "query_text": d.get("query"),
                    "row_in_event": -1, "schema_name": table[0], "table_name": table[1],
                    "pk_values": None, "row_before": None, "row_after": None,
                    "seq": position_key(d["binlog_file"], d["start_pos"]), **marker})
    return out


def _fold_task(plan: NamingPlan, rules: list[Rule], per_snapshot: dict[str, set[Rule]],
               pk_names: dict, run: set, markers: list[dict]):
    """mapInArrow over the tables' silver rows (one partition): the derived rows."""

    def rules_at(source: str, parent: tuple[str, str], seq: int) -> list[Rule]:
        out = []
        for r in rules:
            if r.parent != parent:
                continue
            snap = plan.snapshot_for(source, r.child[0], r.child[1], seq)
            if snap is not None and r in per_snapshot.get(snap.snapshot_id, ()):
                out.append(r)
        return out

    def run_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = [r for b in batches for r in b.to_pylist()] + [dict(m) for m in markers]
        rows.sort(key=lambda r: (r["seq"], r["row_in_event"]))
        counts: dict[tuple, int] = {}
        logged: dict[tuple, list[int]] = {}
        for r in rows:
            if r["event_type"] in (TRUNCATE, ADD_COLUMNS, RENAME, DROP_COLUMNS) or (
                    r.get("origin") or "binlog") != "binlog":
                continue
            place = (r["source_id"], r["binlog_file"], r["start_pos"])
            counts[place] = max(counts.get(place, 0), r["row_in_event"] + 1)
            if r["event_type"] != INSERT and r["gtid"] is not None:
                logged.setdefault((r["gtid"], r["source_id"], r["schema_name"],
                                   r["table_name"], r["pk_values"]), []).append(r["seq"])
        fold = Fold(pk_names, rules_at, lambda r: (r["source_id"], r["binlog_file"]) in run,
                    counts, logged)
        out = []
        for d in fold.feed(rows):
            ts = d["event_timestamp"]
            if ts is not None and ts.tzinfo is None:
                ts = ts.replace(tzinfo=dt.timezone.utc)
            d["event_timestamp"] = ts
            d["event_date"] = None if ts is None else ts.astimezone(dt.timezone.utc).date()
            out.append(d)
        for i in range(0, len(out), 10_000):
            yield pa.RecordBatch.from_pylist(out[i:i + 10_000], schema=_OUT)
        if not out:
            yield pa.RecordBatch.from_pylist([], schema=_OUT)

    return run_task


def load_fk_gaps(spark, cfg, snapshots: list | None = None) -> list:
    """The lake's :class:`~pipelines.silver.fk_gaps.FkGap` list, from the QUERY events
    silver recorded per file (``silver/progress``: no bronze scan) and the snapshots."""
    import json

    from pipelines.silver.fk_gaps import fk_gaps
    from pipelines.silver.progress import load_progress

    if snapshots is None:
        from pipelines.silver.snapshot_store import load_snapshots

        snapshots = load_snapshots(spark, cfg)
    lake = Lake.of(cfg)
    ddl_rows = [(s, f, *q) for (s, f), r in load_progress(spark, lake).items()
                for q in json.loads(r["ddl"] or "[]")]
    return fk_gaps(ddl_rows, snapshots, NamingPlan.build(ddl_rows, snapshots))
