"""The silver stage: name bronze row changes with the right schema, append them to silver.

Incremental and exactly once: a run considers the bronze files changed since silver last saw
them (``<lake>/silver/progress``) plus every file with quarantined rows, takes their bronze
row changes that silver does not hold yet (anti-join on the bronze key), appends those that
a schema names (one commit per ``silver.commit_mb`` of binlog: ``slices``), and
recomputes the quarantine of those files. A crash anywhere
is repaired by the next run: the anti-join never appends a key twice. Quarantined rows are
released the same way once a snapshot (or import) makes them nameable.
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pipelines.bronze.files import load_states
from pipelines.bronze.table_maps import read_table_maps
from pipelines.config import Config
from pipelines.lake.delta_ops import (commit_bytes, enable_change_data_feed, rows_in_table,
                                 rows_written_since)
from pipelines.lake.few_files import keep_few_files
from pipelines.lake.tables import (BRONZE_EVENTS, SCHEMA_SNAPSHOTS, SILVER_EVENTS,
                                   SILVER_QUARANTINE, Lake)
from pipelines.lake.lease import holds_lease
from pipelines.lake.plain_strings import plain_strings
from pipelines.engine.memory import release_freed_memory
from pipelines.engine.session import engine_name
from pipelines.silver import render_fast
from pipelines.silver.derived import append_derived
from pipelines.silver.naming import NamingPlan
from pipelines.silver.progress import load_progress, save_progress
from pipelines.silver.render_warm import renders_here, warm_in_background
from pipelines.silver.render_worker import BATCH_ROWS, close_idle
from pipelines.silver.slices import binlog_bytes, file_days, in_files, plan_slices, slice_day
from pipelines.silver.transform import (QUARANTINE_DDL, render_workers,
                                       to_quarantine, to_silver, to_silver_files)
from pipelines.vocabulary import CHANGE_TYPES, ROW_KEY

__all__ = ["SilverResult", "run_silver", "KEY", "QUARANTINE_DDL"]

log = logging.getLogger(__name__)

KEY = list(ROW_KEY)


@dataclass
class SilverResult:
    files: list[tuple[str, str]] = field(default_factory=list)
    appended: int = 0
    quarantined: int = 0
    silver_version: int | None = None
    version_before: int | None = None  # silver's version when the run began (None: no table)
    seconds: float = 0.0


def _load_snapshots(spark, cfg: Config) -> list:
    from pipelines.silver.snapshot_store import load_snapshots

    return load_snapshots(spark, cfg)


@holds_lease("silver")
def run_silver(spark, cfg: Config) -> SilverResult:
    """Bring silver up to date with bronze; see the module docstring."""
    try:
        return _run_silver(spark, cfg)
    finally:
        close_idle()  # the rendering processes the run's tasks shared
        # Freed pages go back to the OS once, at the end of the run: between slices, the next
        # slice would fault the same pages in again (~9% of silver's CPU on 250 MB), and the
        # allocator's arenas are reused slice after slice (docs/performance.md, Memory).
        release_freed_memory()


def _run_silver(spark, cfg: Config) -> SilverResult:
    started = time.monotonic()
    res = SilverResult()
    lake = Lake.of(cfg)
    if not lake.exists(spark, BRONZE_EVENTS):
        return res
    # The run's first reads, sent to the engine at once (each mostly waits on it).
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="silver-start") as pool:
        states = pool.submit(load_states, spark, lake)
        progress = pool.submit(load_progress, spark, lake)
        quarantined = pool.submit(_quarantined_files, spark, lake)
        snapshots_at = pool.submit(  # what the done files' derived rows were derived with
            lambda: lake.version(spark, SCHEMA_SNAPSHOTS)
            if lake.exists(spark, SCHEMA_SNAPSHOTS) else None)
        if lake.exists(spark, SILVER_EVENTS):
            res.version_before = lake.version(spark, SILVER_EVENTS)
        bronze_files, done, held_back = states.result(), progress.result(), quarantined.result()
        snaps_at = snapshots_at.result()
    seen, known_ddl = {}, {}
    for key, r in done.items():
        seen[key] = r["bronze_updated_at"]
        st = bronze_files.get(key)
        if r["ddl"] is not None and st is not None and st.status != "in_progress" \
                and st.updated_at == r["bronze_updated_at"]:
            known_ddl[key] = [tuple(q) for q in json.loads(r["ddl"])]
    candidates = {key for key, st in bronze_files.items()
                  if st.status != "in_progress" and seen.get(key) != st.updated_at}
    has_quarantine = held_back is not None
    held_back = held_back or set()  # the files with rows in quarantine
    candidates |= held_back
    res.files = sorted(candidates)
    # Done files whose derived row changes may predate the snapshots now stored.
    unsure = {k for k, r in done.items() if k not in candidates and k in bronze_files
              and (r.get("derived_with") or "").partition(":")[0] != str(snaps_at)}
    if not candidates:
        if unsure:
            ddl_rows = [(s, f, *q) for (s, f), r in done.items()
                        for q in json.loads(r["ddl"] or "[]")]
            snapshots = _load_snapshots(spark, cfg)
            plan = NamingPlan.build(ddl_rows, snapshots)
            res.appended, _ = _derive_again(spark, lake, plan, snapshots, ddl_rows, done,
                                            unsure, snaps_at, [])
        res.silver_version = lake.version(spark, SILVER_EVENTS)
        res.seconds = time.monotonic() - started
        return res

    workers = render_workers(cfg.silver.render_workers, cfg.silver.render_in_subprocess)
    compiled = _compiled(cfg, sum(binlog_bytes(bronze_files.get(k)) for k in res.files),
                         sum(_row_changes(bronze_files.get(k)) for k in res.files))
    where = in_files(res.files)
    # a slice's one day, written as a literal (slices), where the lake takes literals
    literal_days = lake.takes_literals(spark, SILVER_EVENTS)
    ddl, table_maps, days, snapshots = _plan_reads(spark, cfg, lake, bronze_files, known_ddl,
                                                   where, literal_days)
    ddl_rows = [(s, f, *q) for (s, f), queries in ddl.items() for q in queries]
    plan = NamingPlan.build(ddl_rows, snapshots)
    plan.table_maps = table_maps
    files = lake.file_spec(spark, SILVER_EVENTS, cfg.silver.target_file_mb,
                           embedded=engine_name() == "sail")
    slices = plan_slices(res.files, bronze_files, commit_bytes(
        spark, cfg.silver.commit_mb, engine_writes=files is None))
    masked = engine_name() != "sail"  # NULL lists as a mask: JVM Spark's exchange needs it

    def pending(part: str = where):
        bronze = lake.read(spark, BRONZE_EVENTS).where(part)
        if not lake.exists(spark, SILVER_EVENTS):
            return bronze
        held = lake.read(spark, SILVER_EVENTS).where(part).select(*KEY)
        return bronze.join(held, KEY, "left_anti")

    if cfg.silver.change_data_feed:
        rendered = to_silver(pending(), plan, workers, compiled, masked, BATCH_ROWS)
        _change_data_feed(spark, lake, rendered)
    # The silver lease is held: only the change data feed's commit above moved the version.
    before = lake.version(spark, SILVER_EVENTS) if cfg.silver.change_data_feed \
        else res.version_before
    written = 0  # counted by the commits where the tasks write the files
    for sl in slices:  # one commit per slice: the engine's writer memory (slices)
        if files is not None:  # the rendering tasks write the data files (task_files)
            written += lake.commit_files(SILVER_EVENTS, to_silver_files(
                pending(sl.where), plan, files, workers, compiled, masked, BATCH_ROWS,
                slice_day(sl, days)))
        else:
            lake.append(to_silver(pending(sl.where), plan, workers, compiled, masked,
                                  BATCH_ROWS, slice_day(sl, days)),
                        SILVER_EVENTS, target_mb=cfg.silver.target_file_mb)
    # The row changes the server made without logging them, after the logged ones (derived),
    # also of done files derived before a snapshot that names more rules.
    derived, derived_with = _derive_again(spark, lake, plan, snapshots, ddl_rows, done,
                                          unsure, snaps_at, res.files)
    if files is not None:
        written += derived
    if files is None:
        # The appends' own commit metrics; a full count only where the log has none.
        written = rows_written_since(lake.location(spark, SILVER_EVENTS), before)
    res.appended = written if written is not None else lake.rows(spark, SILVER_EVENTS) - (
        0 if before is None else lake.read(spark, SILVER_EVENTS, before).count())

    # What is still not in silver is exactly what no schema names: the quarantine. Counting
    # those keys reads only the key columns; rendering them again (to say why) happens only
    # when there are some.
    if held_back:  # the run holds the silver lease: no other run adds quarantine rows now
        lake.delete_where(spark, SILVER_QUARANTINE, in_files(sorted(held_back)))
    quarantined_now = _pending_keys(spark, lake, where)
    if quarantined_now:
        for sl in slices:
            quarantined = to_quarantine(pending(sl.where), plan, workers, compiled, masked,
                                        BATCH_ROWS)
            lake.append(quarantined.withColumn("quarantined_at", _now_col()), SILVER_QUARANTINE)
    elif not has_quarantine:  # the table exists from the first run on, empty or not
        lake.append(spark.createDataFrame([], SILVER_QUARANTINE.ddl()), SILVER_QUARANTINE)
    if held_back or quarantined_now:  # the silver lease keeps its DELETEs apart
        keep_few_files(spark, lake, SILVER_QUARANTINE)
    res.quarantined = lake.rows(spark, SILVER_QUARANTINE)

    save_progress(spark, lake, [(s, f, st.updated_at, ddl.get((s, f), []), derived_with)
                                for (s, f), st in bronze_files.items() if (s, f) in candidates])
    res.silver_version = lake.version(spark, SILVER_EVENTS)
    res.seconds = time.monotonic() - started
    return res


def _derive_again(spark, lake: Lake, plan: NamingPlan, snapshots: list, ddl_rows: list,
                  done: dict, unsure: set, snaps_at, files: list) -> tuple[int, str]:
    """Append the derived row changes of the run's ``files`` and of the ``unsure`` done files
    derived under another digest (``derived.derivation_digest``: the FK rules and their gaps
    of the snapshots stored); record the unsure ones as derived with this one. (How many
    rows were appended, the ``derived_with`` of the run's own progress rows.)"""
    from pipelines.silver.derived import derivation_digest
    from pipelines.silver.fk_gaps import fk_gaps

    digest = derivation_digest(snapshots, fk_gaps(ddl_rows, snapshots, plan))
    derived_with = f"{snaps_at}:{digest}"
    again = sorted(k for k in unsure
                   if (done[k].get("derived_with") or "").partition(":")[2] != digest)
    if again:
        log.info("silver: deriving the row changes of %d file(s) again: the snapshots name "
                 "other FK rules than when they were derived", len(again))
    run = set(files) | set(again)
    derived = append_derived(spark, lake, plan, snapshots, ddl_rows, sorted(run))
    if unsure:
        save_progress(spark, lake, [
            (s, f, done[(s, f)]["bronze_updated_at"], json.loads(done[(s, f)]["ddl"] or "[]"),
             derived_with) for s, f in sorted(unsure)])
    return derived, derived_with


def _plan_reads(spark, cfg: Config, lake: Lake, bronze_files: dict, known_ddl: dict, where: str,
                literal_days: bool) -> tuple[dict, dict, dict, list]:
    """The run's planning reads, sent to the engine at once (each mostly waits on it): the
    DDL positions (``_ddl_by_file``), the TABLE_MAP facts, the files' days (with
    ``literal_days``) and the schema snapshots. (ddl, table maps, days, snapshots)."""
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="silver-plan") as pool:
        ddl = pool.submit(_ddl_by_file, spark, lake, bronze_files, known_ddl)
        maps = pool.submit(read_table_maps, spark, lake, where)
        days = pool.submit(file_days, spark, lake, where) if literal_days else None
        snapshots = _load_snapshots(spark, cfg)
        return ddl.result(), maps.result(), days.result() if days else {}, snapshots


def _quarantined_files(spark, lake: Lake) -> set[tuple[str, str]] | None:
    """The files with rows in ``silver/quarantine`` (None: no such table yet). An empty
    table (the usual case) is told by its log's statistics without a query."""
    if not lake.exists(spark, SILVER_QUARANTINE):
        return None
    path = lake.location(spark, SILVER_QUARANTINE)
    if path and rows_in_table(path) == 0:
        return set()
    return {(r[0], r[1]) for r in lake.read(spark, SILVER_QUARANTINE)
            .select("source_id", "binlog_file").distinct().collect()}


def _row_changes(state) -> int:
    """The row changes bronze counted in a file (0 where it has no count)."""
    return (state.row_changes or 0) if state is not None else 0


def _compiled(cfg: Config, n_bytes: int, n_rows: int = 0) -> bool:
    """Whether full row images are rendered by the compiled loops. They cost a process
    about a second to load: for runs of at least ``silver.compiled_min_mb`` of binlog or
    ``silver.compiled_min_rows`` row changes (narrow rows: many in few MB), loaded
    on a thread of their own while the planning waits on the engine; and for any run where
    this process renders (``render_warm.renders_here``) and holds them already (a stream's
    follows, a notebook's later runs: docs/performance.md, Silver render)."""
    if n_bytes >= cfg.silver.compiled_min_mb * 2**20 or n_rows >= cfg.silver.compiled_min_rows:
        warm_in_background(cfg)
        return True
    return renders_here(cfg) and render_fast.loaded()


def _ddl_by_file(spark, lake: Lake, bronze_files: dict, known: dict) -> dict:
    """Per bronze file: its QUERY events (start_pos, schema, query), where a table's schema
    may change. Those ``silver/progress`` recorded for a file bronze has not rewritten since
    (``known``) are taken from there; bronze is read only for the other files, so a run
    after a long history does not scan the history's event types."""
    out = dict(known)
    todo = [k for k in bronze_files if k not in known]
    if todo:
        q = lake.read(spark, BRONZE_EVENTS).where("event_type = 'QUERY'")
        if len(todo) < len(bronze_files):
            q = q.where(in_files(todo))
        for k in todo:
            out[k] = []
        for r in q.select("source_id", "binlog_file", "start_pos", "schema_name",
                          "query").collect():
            out.setdefault((r[0], r[1]), []).append((r[2], r[3], r[4]))
    return out


def _pending_keys(spark, lake: Lake, where: str) -> int:
    """How many bronze row changes of the files ``where`` names silver does not hold.

    Silver only ever holds keys of these files' bronze rows, once each (the anti-join of
    every append), so equal counts mean none is left: two counts instead of an anti-join
    over the files' keys (0.06 s against 0.6–0.9 s on a 1 GB binlog). Unequal counts are
    checked key by key."""
    from pyspark.sql import functions as F

    keys = (lake.read(spark, BRONZE_EVENTS).where(where)
            .where(F.col("event_type").isin(*CHANGE_TYPES)).select(*KEY))
    if not lake.exists(spark, SILVER_EVENTS):
        return keys.count()
    held = lake.read(spark, SILVER_EVENTS).where(where).select(*KEY)
    if keys.count() == held.count():
        return 0
    return keys.join(held, KEY, "left_anti").count()


def _change_data_feed(spark, lake: Lake, rows) -> None:
    """``silver.change_data_feed``: silver records its changes (created empty first, so the
    feed covers every row). Engines without a change data feed (Sail) get a warning."""
    if lake.uses_catalog and lake.managed:
        log.warning("silver.change_data_feed: set delta.enableChangeDataFeed on the managed "
                    "table %s in the catalog (binlake sets it on path and external tables)",
                    lake.ident(SILVER_EVENTS))
        return
    # A missing table is created from rows' schema: plain strings (lake/plain_strings.py).
    if not enable_change_data_feed(spark, lake.path(SILVER_EVENTS),
                                   plain_strings(rows, SILVER_EVENTS.columns),
                                   list(SILVER_EVENTS.partition_by)):
        log.warning("silver.change_data_feed = true, but this engine has no Delta change data "
                    "feed (table_changes/readChangeFeed): silver is written without one; run "
                    "on Spark with delta-spark to enable it")


def _now_col():
    from pyspark.sql import functions as F

    return F.current_timestamp()
