"""The mirror stage (I/O): bring every table's current-state and history Delta tables up to
date with silver, exactly once.

Per run: the silver rows added since the last run (``files_added`` between the silver version
the state records and the current one; the whole table the first time), per source table
those with ``seq`` above the table's watermark. For each table: plan the layout (evolving
both tables in one overwrite commit each when it changed), type the rows, pair versions
(``plan.versions``) against the current table *as of the version the state records* (Delta
time travel), MERGE the history then the current table on the version's ``seq``, and
finally commit every table's new watermark and current-table version in one state commit.

The history is partitioned by ``__is_current``: its MERGE matches only the open versions'
partition (the ones a run may close), so a run rewrites files of open versions and appends
closed ones, never re-reading the closed history.

Kill -9 anywhere: the state still names the old watermark and table versions, so the
re-run computes the same changes from the same inputs, and both MERGEs are idempotent (an
existing version is matched by its start seq, a deleted one is no longer there). When the
history's version is not the recorded one (an interrupted run wrote to it), that table's
MERGE matches on the whole history once, so no version is inserted twice. The ``mirror``
lease (``pipelines/lake/lease.py``) keeps two runs on one lake from interleaving (Sail does not
fail a racing commit).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from pipelines.config import Config
from pipelines.lake.delta_ops import (current_version, files_added, sql_string, table_exists,
                                 version_files)
from pipelines.errors import EngineError
from pipelines.config import lake_dir, parse_catalog
from pipelines.lake.tables import SILVER_EVENTS, Lake, read_data_files
from pipelines.lake.lease import holds_lease
from pipelines.lake.plain_strings import plain_strings
from pipelines.mirror.json_spans import span_columns, span_exprs, spans_exact
from pipelines.mirror.plan import (CURRENT_META, HISTORY_META, HISTORY_PARTITION,
                                   SILVER_INPUT, Layout,
                                   TableTyping, current_changes, history_changes, plan_layout,
                                   record_schema, records, seen_columns, versions)
from pipelines.vocabulary import CHANGE_TYPES, quote_ident

__all__ = ["MirrorResult", "TableRun", "run_mirror", "mirror_path", "state_path",
           "mirrored_tables", "view_names", "mirror_table_paths"]

log = logging.getLogger(__name__)

_STATE_DDL = ("source_id string, schema_name string, table_name string, last_seq bigint, "
              "current_version bigint, history_version bigint, silver_version bigint, "
              "updated_at timestamp")


# The mirror's layers: a Delta table per source table under each (``<layer>/<schema>/<table>``).
_LAYERS = {"current": "mirror", "history": "mirror_history", "work": "mirror_state/work",
           "records": "mirror_state/records"}


def mirror_path(cfg: Config, kind: str, schema: str, table: str) -> str:
    """Where a source table's mirror lives: ``kind`` ``current`` →
    ``<lake>/mirror/<schema>/<table>``, ``history`` → ``<lake>/mirror_history/<schema>/<table>``.
    The one place mirror paths are built (scratch: ``records``, a run's typed records;
    ``work``, its paired versions)."""
    return lake_dir(cfg.lake_root, _LAYERS[kind], schema, table)


def mirror_table_paths(cfg: Config) -> list[tuple[str, str]]:
    """(label, path) of every mirror Delta table on disk, the state and scratch tables
    included (for ``binlake vacuum``); found by their ``_delta_log`` directories."""
    from pipelines.lake.files import delta_tables_under, list_lake_dir

    out = []
    for layer in _LAYERS.values():
        for path in delta_tables_under(lake_dir(cfg.lake_root, layer), 2, cfg.storage):
            out.append((path[len(cfg.lake_root) + 1:], path))
    if list_lake_dir(os.path.join(state_path(cfg), "_delta_log"), cfg.storage) is not None:
        out.append(("mirror_state/tables", state_path(cfg)))
    return out


def state_path(cfg: Config) -> str:
    return cfg.table_path("mirror_state", "tables")


def view_names(schema: str, table: str) -> tuple[str, str]:
    """Catalog names of a table's mirror: ``<schema>__<table>`` and ``…__history``."""
    return f"{schema}__{table}", f"{schema}__{table}__history"


@dataclass
class TableRun:
    name: str
    changes: int = 0
    evolved: bool = False
    untyped: bool = False  # no schema snapshot describes the table: its columns are strings


@dataclass
class MirrorResult:
    tables: list[TableRun] = field(default_factory=list)
    from_version: int | None = None
    to_version: int | None = None
    note: str = ""
    seconds: float = 0.0
    # mirrored tables whose name is gone (DROP TABLE/DATABASE, renamed away): table → what
    # and where; their mirror keeps the rows of then
    gone: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def changes(self) -> int:
        return sum(t.changes for t in self.tables)


def _load_state(spark, cfg: Config, source: str) -> tuple[int, dict[tuple[str, str], Any]]:
    path = state_path(cfg)
    if not table_exists(spark, path):
        return -1, {}
    rows = spark.read.format("delta").load(path).where(
        f"source_id = {sql_string(source)}").collect()
    silver = max((r["silver_version"] for r in rows), default=-1)
    return silver, {(r["schema_name"], r["table_name"]): r for r in rows if r["table_name"]}


def mirrored_tables(spark, cfg: Config) -> list[tuple[str, str]]:
    """(schema, table) of every mirrored table, from the state."""
    path = state_path(cfg)
    if not table_exists(spark, path):
        return []
    rows = spark.read.format("delta").load(path).select("schema_name", "table_name").collect()
    return sorted({(r[0], r[1]) for r in rows if r[1]})


def _silver_batch(spark, lake, path: str | None, since: int, target: int):
    if since >= 0 and path:
        files = files_added(path, since, target)
        if files is not None:
            return read_data_files(spark, SILVER_EVENTS, files) if files else None
        log.warning("silver log for version %s is gone: mirroring from the whole table", since)
    # The snapshot's files, as gold reads its first export (delta_ops.version_files).
    files = version_files(path, target) if path else None
    if files is not None:
        return read_data_files(spark, SILVER_EVENTS, files) if files else None
    return lake.read(spark, SILVER_EVENTS, target)


@holds_lease("mirror")
def run_mirror(spark, cfg: Config, *, source: str | None = None) -> MirrorResult:
    """Mirror the silver rows of ``source`` (default ``source.name``) not mirrored yet."""
    started = time.monotonic()
    source = source or cfg.source.name
    res = MirrorResult()
    lake = Lake.of(cfg)
    if not lake.exists(spark, SILVER_EVENTS):
        res.note = f"no silver table at {lake.where(SILVER_EVENTS)}"
        return res
    silver_path = lake.location(spark, SILVER_EVENTS)
    target = lake.version(spark, SILVER_EVENTS)
    since, state = _load_state(spark, cfg, source)
    res.from_version, res.to_version = since, target
    if target is None or since >= target:
        res.note = "mirror is up to date"
        res.gone = _gone(spark, lake, state)
        res.seconds = time.monotonic() - started
        return res
    batch = _silver_batch(spark, lake, silver_path, since, target)
    new_state = {k: (r["last_seq"], r["current_version"], r["history_version"])
                 for k, r in state.items()}
    if batch is not None:
        from pyspark.sql import functions as F

        batch = batch.where((F.col("source_id") == source)
                            & F.col("event_type").isin(*CHANGE_TYPES))
        per_table = (batch.groupBy("schema_name", "table_name")
                     .agg(F.max("seq").alias("max_seq"), F.count("*").alias("n"),
                          F.min("seq").alias("min_seq"))
                     .collect())
        from pipelines.silver.snapshot_store import load_snapshots

        snapshots = load_snapshots(spark, cfg, source)
        from pipelines.silver.derived import load_fk_gaps

        gaps: dict[tuple[str, str], list] = {}
        for g in load_fk_gaps(spark, cfg, snapshots):
            gaps.setdefault((g.schema, g.table), []).append(g)
        from pipelines.silver.renames import (column_maps, lineage, load_renames,
                                              segments_where)

        renames = load_renames(spark, lake)
        per_table = _renamed_into([r.asDict() for r in per_table], renames, new_state)
        for row in sorted(per_table, key=lambda r: (r["schema_name"], r["table_name"])):
            key = (row["schema_name"], row["table_name"])
            last_seq, cur_version, hist_version = new_state.get(key, (-1, None, None))
            if 0 <= row["min_seq"] <= last_seq and row["n"] is not None:
                # silver appended rows before what the mirror holds (derived after a later
                # snapshot named FK rules: docs/silver.md): they are not applied
                log.warning("mirror: %s.%s: silver gained row changes older than its mirror "
                            "(derived after a later snapshot); rebuild the mirror to apply "
                            "them (docs/mirror.md)", *key)
            if row["max_seq"] <= last_seq:
                continue
            for g in gaps.get(key, ()):
                if g.overlaps(row["min_seq"], row["max_seq"] + 1):
                    log.warning("mirror: %s", g.describe())
            segments = lineage(renames, *key, row["max_seq"] + 1)
            typing = TableTyping.from_snapshots(snapshots, *key,
                                                earlier=[x.name for x in segments[1:]])
            if not typing.by_version:
                log.warning("mirror: no schema snapshot describes %s.%s: its columns are "
                            "typed as strings (binlake snapshot, then rebuild the mirror: "
                            "docs/mirror.md)", *key)
            rows = batch.where((F.col("schema_name") == key[0])
                               & (F.col("table_name") == key[1])
                               & (F.col("seq") > F.lit(last_seq)))
            maps = column_maps(renames, segments)
            later = [names for pos, names in maps if pos > last_seq >= 0]
            if later:  # its rows of before keep the old names: said, not guessed
                log.warning("mirror: %s.%s: column(s) %s renamed after its mirror was built: "
                            "rows not changed since keep the old column; rebuild the mirror "
                            "to fold them under the new name (docs/mirror.md)", *key,
                            ", ".join(f"{a} -> {b}" for names in later
                                      for a, b in names.items()))
            if last_seq < 0 and (len(segments) > 1 or maps):
                # A renamed table's first mirror run starts from its rows under the earlier
                # names, their images read with today's column names (a table whose columns
                # alone were renamed too: RENAME COLUMN, CHANGE).
                if len(segments) > 1:
                    log.info("mirror: %s.%s was named %s before: its rows since then included",
                             *key, ", ".join(f"{x.name[0]}.{x.name[1]}" for x in segments[1:]))
                rows = _renamed_rows(
                    lake.read(spark, SILVER_EVENTS).where(F.col("source_id") == source)
                    .where(F.col("event_type").isin(*CHANGE_TYPES))
                    .where(segments_where(segments)), maps)
            run, versions_ = _mirror_table(spark, cfg, key, rows, typing, cur_version,
                                           hist_version)
            run.changes = row["n"] if row["n"] is not None else rows.count()
            run.untyped = not typing.by_version
            res.tables.append(run)
            _catalog_tables(spark, cfg, lake, key)
            new_state[key] = (row["max_seq"], *versions_)
    _save_state(spark, cfg, source, new_state, target)
    res.gone = _gone(spark, lake, new_state)
    for (schema, table), what in res.gone.items():
        log.info("mirror: %s.%s was %s: its mirror keeps its rows of then", schema, table, what)
    res.seconds = time.monotonic() - started
    return res


def _renamed_into(per_table: list[dict], renames: list, state: dict) -> list[dict]:
    """``per_table`` (the batch's schema_name, table_name, max_seq, n, min_seq per table)
    plus the last name RENAME TABLE gave a table with changes (in the batch or mirrored),
    when that name has no change of its own in the batch nor a mirror yet: its first
    run reads its rows under the earlier names (``max_seq`` is the rename's position, so
    ``lineage`` sees it; ``n`` None: counted when read)."""
    have = {(r["schema_name"], r["table_name"]) for r in per_table}
    held = have | {k for k, v in state.items() if v[0] >= 0}
    into: dict[tuple[str, str], int] = {}
    for i, first in enumerate(renames):
        if first.old not in held or first.new == first.old:
            continue
        name, at = first.new, first.pos
        for r in renames[i + 1:]:  # the names it was given after
            if r.old == name and r.new != name:
                name, at = r.new, r.pos
        if name not in have and state.get(name, (-1,))[0] < 0:
            into[name] = max(into.get(name, -1), at)
    return per_table + [{"schema_name": k[0], "table_name": k[1], "max_seq": pos, "n": None,
                         "min_seq": pos} for k, pos in sorted(into.items())]


def _gone(spark, lake: Lake, state: dict) -> dict[tuple[str, str], str]:
    """Mirrored tables whose name the DDL dropped or renamed away (``silver.renames.gone``)."""
    from pipelines.silver.renames import gone, load_ddl_rows

    return gone(load_ddl_rows(spark, lake), state) if state else {}


def _renamed_rows(rows, maps: list):
    """Silver ``rows`` with the column names of the renames after each (``maps``:
    ``silver.renames.column_maps``) in their images and ``absent_columns``."""
    if not maps:
        return rows
    import json

    from pipelines.silver.image_values import raw_values
    from pipelines.silver.renames import renamed

    rows = rows.select(*SILVER_INPUT)

    def image(text, seq):
        values = renamed(raw_values(text), seq, maps)
        if values is None:
            return None
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {v}"
                               for k, v in values.items()) + "}"

    def run(batches):
        import pyarrow as pa

        for b in batches:
            d = b.to_pydict()
            seqs = d["seq"]
            d["row_before"] = [image(t, q) for t, q in zip(d["row_before"], seqs)]
            d["row_after"] = [image(t, q) for t, q in zip(d["row_after"], seqs)]
            d["absent_columns"] = [
                None if t is None else json.dumps(list(renamed(
                    dict.fromkeys(json.loads(t), ""), q, maps)), ensure_ascii=False)
                for t, q in zip(d["absent_columns"], seqs)]
            yield pa.RecordBatch.from_pydict(d, schema=b.schema)

    return rows.mapInArrow(run, rows.schema)


def _catalog_tables(spark, cfg: Config, lake: Lake, key: tuple[str, str]) -> None:
    """With ``lake.catalog``: the two tables as external catalog tables
    ``<catalog>.<schema>__<table>[__history]`` at their mirror paths (created once; their
    schema follows the Delta log)."""
    if not lake.uses_catalog:
        return
    parts = parse_catalog(lake.catalog)
    for kind, name in zip(("current", "history"), view_names(*key)):
        ident = ".".join(quote_ident(p) for p in (*parts, name))
        try:
            if len(parts) == 2:
                spark.sql("CREATE SCHEMA IF NOT EXISTS "
                          + ".".join(quote_ident(p) for p in parts)).collect()
            spark.sql(f"CREATE TABLE IF NOT EXISTS {ident} USING delta "
                      f"LOCATION {sql_string(mirror_path(cfg, kind, *key))}").collect()
        except Exception as exc:  # noqa: BLE001 - AnalysisException and friends
            raise EngineError(f"lake.catalog {lake.catalog}: cannot create {ident}: "
                              f"{str(exc).splitlines()[0][:200]}") from exc


def _save_state(spark, cfg: Config, source: str, st: dict, silver_version: int) -> None:
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    rows = [(source, s, t, seq, cur, hist, silver_version, now)
            for (s, t), (seq, cur, hist) in st.items()]
    if not rows:  # keep the silver version even before any table has rows
        rows = [(source, "", "", -1, None, None, silver_version, now)]
    (spark.createDataFrame(rows, _STATE_DDL).write.format("delta").mode("overwrite")
     .save(state_path(cfg)))


# -- one table ------------------------------------------------------------------------------

def _data_columns(spark, path: str, meta: list[tuple[str, str]]) -> list[tuple[str, str]] | None:
    if not table_exists(spark, path):
        return None
    skip = {n for n, _ in meta}
    schema = spark.read.format("delta").load(path).schema
    return [(f.name, f.dataType.simpleString()) for f in schema.fields if f.name not in skip]


def _align(df, layout: Layout, meta: list[tuple[str, str]]):
    """``df`` (a mirror table of an older layout) with ``layout``'s columns and types."""
    from pyspark.sql import functions as F

    have = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    cols = []
    for name, t in layout.columns:
        if name not in have:
            cols.append(F.lit(None).cast(t.spark).alias(name))
        elif have[name] == t.spark:
            cols.append(F.col(quote_ident(name)))
        elif t.spark == "string" and have[name] == "binary":
            cols.append(F.base64(F.col(quote_ident(name))).alias(name))
        else:
            cols.append(F.col(quote_ident(name)).cast(t.spark).alias(name))
    return df.select(*cols, *[F.col(quote_ident(n)) for n, _ in meta])


def _ensure_table(spark, path: str, layout: Layout, meta: list[tuple[str, str]],
                  existing: list[tuple[str, str]] | None, partition: tuple[str, ...] = ()
                  ) -> bool:
    """Create the table, or rewrite it in the layout when that changed; True when evolved."""
    ddl = ", ".join([layout.ddl()] + [f"{quote_ident(n)} {t}" for n, t in meta])
    if existing is None:
        spark.createDataFrame([], ddl).write.format("delta").partitionBy(*partition).save(path)
        return False
    if existing == [(n, t.spark) for n, t in layout.columns]:
        return False
    # One overwrite commit: the previous typing stays readable with VERSION AS OF.
    df = _align(spark.read.format("delta").load(path), layout, meta)
    (df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
     .partitionBy(*partition).save(path))
    return True


def _seen(spark, rows, typing: TableTyping) -> list[tuple[str | None, str]]:
    versions_ = [r[0] for r in rows.select("schema_version").distinct().collect()]
    seen = [(v, c) for v in versions_ if v in typing.by_version for c in typing.by_version[v]]
    if any(v not in typing.by_version for v in versions_):
        named = rows.where(~rows.schema_version.isin(*typing.by_version) if typing.by_version
                           else "true")
        found = (named.select("schema_version", "row_before", "row_after")
                 .mapInArrow(seen_columns, "schema_version string, column string, position int")
                 .groupBy("schema_version", "column").agg({"position": "min"}).collect())
        seen += [(r[0], r[1]) for r in sorted(found, key=lambda r: (r[2], r[0] or "", r[1]))]
    return seen


def _scratch(spark, df, path: str):
    """``df`` written over the scratch table at ``path`` and read back. Plain strings in its
    schema (lake/plain_strings.py): a later run on another engine overwrites it, reading its
    log first."""
    (plain_strings(df).write.format("delta").mode("overwrite")
     .option("overwriteSchema", "true").save(path))
    return spark.read.format("delta").load(path)


def _insert(cols: list[str]) -> str:
    return f"INSERT ({', '.join(cols)}) VALUES ({', '.join('s.' + c for c in cols)})"


def _view(df) -> str:
    name = "mirror_src_" + uuid.uuid4().hex[:12]
    df.createOrReplaceTempView(name)
    return name


def _mirror_table(spark, cfg: Config, key: tuple[str, str], rows, typing: TableTyping,
                  cur_version: int | None, hist_version: int | None
                  ) -> tuple[TableRun, tuple[int | None, int | None]]:
    from pyspark.sql import functions as F

    name = f"{key[0]}.{key[1]}"
    run = TableRun(name)
    cur_path = mirror_path(cfg, "current", *key)
    hist_path = mirror_path(cfg, "history", *key)
    existing = _data_columns(spark, cur_path, CURRENT_META)
    layout = plan_layout(existing, typing, _seen(spark, rows, typing))
    hist_existing = _data_columns(spark, hist_path, HISTORY_META)
    run.evolved = _ensure_table(spark, cur_path, layout, CURRENT_META, existing)
    # A history version other than the recorded one: an interrupted run may have written
    # versions and closed them; only then the MERGE looks at the closed partition too.
    clean = hist_version is not None and current_version(hist_path) == hist_version
    run.evolved |= _ensure_table(spark, hist_path, layout, HISTORY_META, hist_existing,
                                 (HISTORY_PARTITION,))

    ddl, _ = record_schema(layout)
    # Materialised once: the close keys and the pairing both read them (over the plan, the
    # Python typing ran once per reader: twice a run, three times for a key-less table).
    spans = (span_columns([n for n, t in layout.columns if t.kind == "json"])
             if spans_exact(spark) else {})
    recs = _scratch(spark, rows.select(*SILVER_INPUT, *span_exprs(spans, layout.key))
                    .mapInArrow(records(layout, typing, name, spans=spans), ddl),
                    mirror_path(cfg, "records", *key))
    if cur_version is not None:
        before = _align(spark.read.format("delta").option("versionAsOf", cur_version)
                        .load(cur_path), layout, CURRENT_META)
        ck = [f"__k{i}" for i in range(len(layout.key))]
        keys = recs.where("__kind = 'close'").select(
            *[F.col(quote_ident(k)).alias(a) for k, a in zip(layout.key, ck)]).distinct()
        cond = [F.col(quote_ident(k)).eqNullSafe(F.col(a)) for k, a in zip(layout.key, ck)]
        opens0 = (before.join(keys, cond, "left_semi")
                  .withColumn("__kind", F.lit("open"))
                  .withColumn("__event_type", F.lit(None).cast("string"))
                  .withColumn("__absent", F.lit(None).cast("array<string>")))
    else:
        opens0 = spark.createDataFrame([], ddl)
    # Materialised once: both MERGEs read it (a MERGE over the un-materialised plan
    # re-runs the Python typing and the window per pass, ~50x slower on Sail).
    partial = bool(rows.where("absent_columns IS NOT NULL").limit(1).collect())
    paired = _scratch(spark, versions(recs, opens0.select(*recs.columns), layout,
                                      fill_absent=partial).drop("__absent"),
                      mirror_path(cfg, "work", *key))

    # A version is its key and the seq that opened it: derived row changes of one cause may
    # share a seq (clamped below the next event: docs/silver.md), never with one key.
    same_key = "".join(f" AND t.{quote_ident(k)} <=> s.{quote_ident(k)}" for k in layout.key)
    hist = _view(history_changes(paired, layout))
    hist_cols = [quote_ident(n) for n in layout.names] + [quote_ident(n) for n, _ in HISTORY_META]
    spark.sql(
        f"MERGE INTO delta.`{hist_path}` AS t USING {hist} AS s "
        f"ON {'t.__is_current AND ' if clean else ''}t.__START_AT = s.__START_AT{same_key} "
        "WHEN MATCHED THEN UPDATE SET __END_AT = s.__END_AT, "
        "__end_timestamp = s.__end_timestamp, __is_current = s.__is_current "
        f"WHEN NOT MATCHED AND s.__op = 'insert' THEN {_insert(hist_cols)}").collect()
    cur = _view(current_changes(paired, layout))
    cur_cols = [quote_ident(n) for n in layout.names] + [quote_ident(n) for n, _ in CURRENT_META]
    spark.sql(
        f"MERGE INTO delta.`{cur_path}` AS t USING {cur} AS s ON t.__seq = s.__seq{same_key} "
        "WHEN MATCHED AND s.__op = 'delete' THEN DELETE "
        f"WHEN NOT MATCHED AND s.__op = 'insert' THEN {_insert(cur_cols)}").collect()
    for v in (hist, cur):
        spark.catalog.dropTempView(v)
    return run, (current_version(cur_path), current_version(hist_path))
