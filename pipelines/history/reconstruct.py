"""``binlake reconstruct``: a table's rows at one point of its history.

The point is ``--at TIME`` (every change logged before the first event stamped later than
TIME), ``--gtid G`` (the state right after that transaction) or ``--pos FILE:POS`` (every
event starting before POS). All three become a *cutoff* on silver's ``seq`` scale.

The history of a table starts at its ``CREATE TABLE`` when bronze holds it (silver then has
every row change since), or at the latest ``binlake snapshot --data`` baseline before the
cutoff (rows copied at known coordinates), whichever is later. Silver's changes from there up
to the cutoff are folded per row in the engine: each change becomes (row key, seq, image or
tombstone) and the latest per key wins; a table without a PRIMARY KEY folds as a multiset of
whole images. Images are projected onto the columns of the schema valid at the cutoff (the
snapshot of that schema epoch, else the newest image in it): a column added later than a
row's last change is NULL, a dropped one disappears.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql import functions as F

from pipelines.config import Config
from pipelines.lake.delta_ops import sql_string
from pipelines.errors import ConfigError, SchemaMismatchError
from pipelines.binlog import coltypes as T
from pipelines.history import lake
from pipelines.history.selection import json_path
from pipelines.history.images import JsonReadings, reread, text_json_columns
from pipelines.silver.image_values import pk_values_of, raw_values
from pipelines.silver.naming import TableSpec, position_key
from pipelines.silver.renames import Segment, renamed

__all__ = ["Point", "resolve_point", "Reconstruction", "reconstruct", "HistoryStartError"]

_INF = (1 << 63) - 1


class HistoryStartError(ConfigError):
    """The point lies before the table's history in the lake starts (the message says where)."""


@dataclass(frozen=True)
class Point:
    cutoff: int  # changes with seq < cutoff are in the state
    text: str  # how the user named it
    at: Any = None  # the time for --at (a baseline taken later cannot serve it)


def _file_key(binlog_file: str, pos: int) -> int:
    return position_key(binlog_file, pos)


def resolve_point(spark, cfg: Config, *, at=None, gtid: str | None = None,
                  pos: str | None = None) -> Point:
    """The cutoff for ``--at`` (naive UTC datetime), ``--gtid`` or ``--pos``."""
    from pipelines.history.times import parse_gtid_set, parse_position

    if pos is not None:
        f, p, key = parse_position(pos)
        return Point(key, f"{f}:{p}")
    b = lake.bronze(spark, cfg)
    if gtid is not None:
        gs = parse_gtid_set(gtid)
        if len(gs.mariadb) + sum(1 for _ in gs.mysql) != 1 or (
                gs.mysql and gs.mysql[0][1] != gs.mysql[0][2]):
            raise ConfigError(f"--gtid {gtid!r}: name one transaction")
        rows = (b.where(gs.sql_predicate("gtid")).groupBy("binlog_file")
                .agg(F.max("end_pos").alias("end")).collect())
        if not rows:
            raise ConfigError(f"--gtid {gtid}: no event of that transaction in the lake")
        return Point(max(_file_key(r["binlog_file"], r["end"]) for r in rows), f"gtid {gtid}")
    if at is None:
        raise ConfigError("reconstruct needs one of --at, --gtid, --pos")
    lit = f"TIMESTAMP'{at.isoformat(' ')}+00:00'"
    rows = (b.where(f"event_timestamp > {lit}").where("event_type NOT IN ('END', 'ERROR')")
            .groupBy("binlog_file").agg(F.min("start_pos").alias("first")).collect())
    cutoff = min((_file_key(r["binlog_file"], r["first"]) for r in rows), default=_INF)
    return Point(cutoff, f"{at.isoformat(' ')} UTC", at)


@dataclass
class Reconstruction:
    schema: str
    table: str
    columns: list[str]
    spec: TableSpec | None  # column types for SQL literals (None: no typed source)
    images: Any  # DataFrame of one string column ``image`` (JSON object text, projected)
    start: str  # where the history used starts
    # what the lake cannot know (FK rules of an epoch no snapshot describes: silver/fk_gaps)
    warnings: list[str] = field(default_factory=list)


def _history_start(spark, cfg: Config, schema: str, table: str, point: Point,
                   segments: list[Segment] | None = None
                   ) -> tuple[int, dict[str, Any] | None, str]:
    """(start key, baseline or None, description); :class:`HistoryStartError` if none.
    ``segments``: the table's names back to its first (``silver.renames.lineage``): its
    CREATE TABLE may be under an earlier name."""
    from pipelines.silver.data_snapshot import load_baselines

    ddl = sorted(e for seg in segments or [Segment((schema, table), -1, point.cutoff)]
                 for e in lake.ddl_events(spark, cfg, *seg.name) if seg.lo < e[0] < seg.hi)
    created = [(k, where) for k, kind, where in ddl if kind == "CREATE" and k < point.cutoff]
    dropped = [(k, where) for k, kind, where in ddl if kind == "DROP" and k < point.cutoff]
    baselines = [b for b in load_baselines(spark, cfg, schema, table)
                 if b["seq"] is not None and b["seq"] <= point.cutoff
                 and (point.at is None or b["snapshot_time"] <= point.at)]
    start_c = created[-1][0] if created else None
    base = baselines[-1] if baselines else None
    if dropped and dropped[-1][0] > max(start_c or -1, (base or {}).get("seq") or -1):
        raise ConfigError(f"{schema}.{table} did not exist at {point.text}: dropped at "
                          f"{dropped[-1][1]}")
    if base is not None and (start_c is None or base["seq"] > start_c):
        return base["seq"], base, (f"baseline {base['snapshot_id']} at "
                                   f"{base['binlog_file']}:{base['binlog_pos']}")
    if start_c is not None:
        return start_c, None, f"CREATE TABLE at {created[-1][1]}"
    raise HistoryStartError(_start_message(spark, cfg, schema, table, point, ddl))


def _start_message(spark, cfg: Config, schema: str, table: str, point: Point, ddl) -> str:
    from pipelines.silver.data_snapshot import load_baselines

    first = (lake.silver(spark, cfg)
             .where(f"schema_name = {sql_string(schema)} AND table_name = {sql_string(table)}")
             .orderBy("seq").select("binlog_file", "start_pos", "event_timestamp").limit(1)
             .collect())
    later = [b for b in load_baselines(spark, cfg, schema, table) if b["seq"] is not None]
    created = [where for _, kind, where in ddl if kind == "CREATE"]
    where = []
    if later:
        b = later[0]
        where.append(f"its first baseline is {b['snapshot_id']} at {b['binlog_file']}:"
                     f"{b['binlog_pos']} ({b['snapshot_time']} UTC)")
    if created:
        where.append(f"its CREATE TABLE is at {created[-1]}")
    if first:
        r = first[0]
        where.append(f"silver's first change of it is at {r['binlog_file']}:{r['start_pos']} "
                     f"({r['event_timestamp']} UTC)")
    if not first and not later and not created:
        return f"--table {schema}.{table}: unknown table (no change, DDL or baseline of it)"
    return (f"{point.text} is before the history of {schema}.{table} starts: "
            + "; ".join(where) + ". A point before that needs a `binlake snapshot --data` "
            "baseline taken at or before it")


def _spec_at(spark, cfg: Config, schema: str, table: str, start: int, cutoff: int,
             base: dict[str, Any] | None) -> TableSpec | None:
    """The table's spec valid at the cutoff: its newest change's when that change is in the
    cutoff's schema epoch, else the snapshot valid in that epoch, else the newest change's
    (or the baseline's)."""
    from pipelines.silver.data_snapshot import table_spec
    from pipelines.silver.snapshot_store import load_snapshots

    last = (lake.silver(spark, cfg)
            .where(f"schema_name = {sql_string(schema)} AND table_name = {sql_string(table)}")
            .where(f"seq >= {start} AND seq < {cutoff}").orderBy(F.col("seq").desc()).limit(1))
    plan = lake.naming_plan(spark, cfg)
    found = lake.with_specs(spark, cfg, last, plan)
    source = found[0][0]["source_id"] if found else cfg.source.name
    epoch = plan.epoch(source, schema, table, cutoff - 1)
    if found and found[0][0]["seq"] > epoch[0]:
        return found[0][1]
    snap = plan.snapshot_for(source, schema, table, cutoff - 1)
    if snap is not None:
        return table_spec(snap.table(schema, table), snap.snapshot_id)
    if found:
        return found[0][1]
    for snap in load_snapshots(spark, cfg):
        if base is not None and snap.snapshot_id == base["snapshot_id"]:
            return table_spec(snap.table(schema, table), snap.snapshot_id)
    return None


def _renamed_spec(spec: TableSpec | None, maps: list[tuple[int, dict[str, str]]]
                  ) -> TableSpec | None:
    """``spec`` with its columns' names after the column renames ``maps`` (a spec of a change
    made before them, under the old names; names it no longer has are left alone)."""
    if spec is None or not maps:
        return spec
    import dataclasses

    cols = list(spec.columns)
    for _, names in maps:
        have = {c.name for c in cols}
        if not (set(names) & have) or set(names.values()) & have - set(names):
            continue  # already the new names
        cols = [dataclasses.replace(c, name=names.get(c.name, c.name)) for c in cols]
    return dataclasses.replace(spec, columns=tuple(cols))


def _json_readings(spark, cfg: Config, schema: str, table: str) -> dict[str, frozenset[str]]:
    """Per snapshot id, the table's MariaDB JSON columns it names (images.JsonReadings)."""
    from pipelines.silver.snapshot_store import load_snapshots

    snaps = load_snapshots(spark, cfg)
    readings = JsonReadings(snaps)
    return {s.snapshot_id: readings.rendered(s.snapshot_id, schema, table) for s in snaps}


def _fold_events(pk_names: list[str] | None, columns: list[str],
                 readings: dict[str, frozenset[str]] | None = None,
                 want: frozenset[str] = frozenset(),
                 maps: list[tuple[int, dict[str, str]]] | None = None):
    """mapInArrow: silver changes → (key, seq, ord, delta, image) fold events. ``readings``:
    per ``schema_version``, the MariaDB JSON columns it rendered as documents (none when
    missing); each image is read as the point's spec renders them (``want``, images.reread),
    whichever order ``index`` and ``snapshot`` ran in. ``maps``: the column renames after a
    row's seq rename its image's columns (``silver.renames.renamed``)."""
    readings = readings or {}
    maps = maps or []

    def project(values: dict[str, str]) -> str:
        return "{" + ", ".join(f"{json.dumps(c, ensure_ascii=False)}: {values.get(c, 'null')}"
                               for c in columns) + "}"

    def key_of(values: dict[str, str]) -> str:
        if pk_names is None:
            return project(values)
        return pk_values_of(values, pk_names)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: dict[str, list] = {"key": [], "seq": [], "rie": [], "ord": [], "delta": [],
                                    "image": []}

            def emit(key, seq, order, delta, image):
                out["key"].append(key)
                out["seq"].append(seq)
                out["rie"].append(r["row_in_event"])
                out["ord"].append(order)
                out["delta"].append(delta)
                out["image"].append(image)

            for r in batch.to_pylist():
                was = readings.get(r.get("schema_version") or "", frozenset())
                before = reread(renamed(raw_values(r["row_before"]), r["seq"], maps),
                                was, want)
                after = reread(renamed(raw_values(r["row_after"]), r["seq"], maps), was, want)
                if before is not None:
                    emit(key_of(before), r["seq"], 0, -1, None)
                if after is not None:
                    emit(key_of(after), r["seq"], 1, 1, project(after))
            yield pa.RecordBatch.from_pydict(out, schema=_FOLD_SCHEMA)

    return run


# ``rie`` (row_in_event) breaks ties of seq: derived row changes of one cause may share a
# clamped seq (docs/silver.md).
_FOLD_SCHEMA = pa.schema([("key", pa.string()), ("seq", pa.int64()), ("rie", pa.int32()),
                          ("ord", pa.int32()), ("delta", pa.int32()), ("image", pa.string())])
_FOLD_DDL = "key string, seq bigint, rie int, ord int, delta int, image string"


def reconstruct(spark, cfg: Config, schema: str, table: str, point: Point,
                pk: str | None = None) -> Reconstruction:
    """The table's rows at ``point`` (optionally one key); see the module docstring."""
    from pipelines.lake.tables import Lake
    from pipelines.silver.renames import column_maps, lineage, load_renames, segments_where

    facts = load_renames(spark, Lake.of(cfg))
    segments = lineage(facts, schema, table, point.cutoff)  # rows made under earlier names
    maps = column_maps(facts, segments)
    start, base, start_text = _history_start(spark, cfg, schema, table, point, segments)
    held = lake.quarantined(spark, cfg, schema, table, start, point.cutoff)
    if held:
        q = held[0]
        raise SchemaMismatchError(
            f"{schema}.{table}: {len(held)} change(s) before {point.text} are in quarantine, "
            f"not in silver (first: {q['binlog_file']}:{q['start_pos']}: {q['reason']}); a "
            "snapshot naming them (binlake snapshot, then binlake silver) releases them")
    spec = _spec_at(spark, cfg, schema, table, start, point.cutoff, base)
    for seg in segments[1:]:  # no change nor snapshot since the rename: the old name's
        if spec is not None:
            break
        spec = _spec_at(spark, cfg, *seg.name, start, seg.hi, base)
    spec = _renamed_spec(spec, maps)
    if spec is None and base is None:
        # no change under any of its names since its CREATE TABLE, no snapshot of that
        # epoch: the table held no row at the point (its columns: a later snapshot's)
        return _empty(spark, cfg, schema, table, point, start_text, facts)
    if spec is None:
        raise HistoryStartError(f"{schema}.{table}: no change and no baseline between its "
                                f"history start ({start_text}) and {point.text}")
    columns = [c.name for c in spec.columns]
    pk_names = ([spec.columns[i].name for i in spec.pk] if spec.pk_kind == "primary_key"
                else None)
    changes = (lake.silver(spark, cfg).where(segments_where(segments))
               .where(f"seq >= {start} AND seq < {point.cutoff}"))
    if pk is not None:
        import hashlib

        changes = changes.where(f"pk_hash = '{hashlib.sha256(pk.encode()).hexdigest()}'")
    changes = changes.select("seq", "row_in_event", "row_before", "row_after",
                             "schema_version")
    if base is not None:
        from pipelines.lake.tables import BASELINE_ROWS, Lake

        lk = Lake.of(cfg)
        if lk.exists(spark, BASELINE_ROWS):
            rows = (lk.read(spark, BASELINE_ROWS)
                    .where(f"snapshot_id = {sql_string(base['snapshot_id'])} AND schema_name = "
                           f"{sql_string(schema)} AND table_name = {sql_string(table)}"))
            if pk is not None:
                rows = rows.where(f"pk_values = {sql_string(pk)}")
            changes = changes.unionByName(rows.select(
                F.lit(start - 1).cast("bigint").alias("seq"),
                F.lit(0).cast("int").alias("row_in_event"),
                F.lit(None).cast("string").alias("row_before"),
                F.col("row_image").alias("row_after"),
                F.lit(base["snapshot_id"]).cast("string").alias("schema_version")))
    readings: dict[str, frozenset[str]] = {}
    for seg in segments:
        for sid, cols in _json_readings(spark, cfg, *seg.name).items():
            readings[sid] = readings.get(sid, frozenset()) | cols
    events = changes.mapInArrow(_fold_events(pk_names, columns, readings,
                                             text_json_columns(spec.columns), maps), _FOLD_DDL)
    if pk_names is not None:
        latest = events.groupBy("key").agg(F.max(F.struct("seq", "rie", "ord", "image")).alias("m"))
        images = latest.where("m.image IS NOT NULL").select(
            F.col("key"), F.col("m.image").alias("image"))
    else:
        counted = events.groupBy("key").agg(F.sum("delta").alias("n"))
        images = counted.where("n > 0").select(
            F.col("key"), F.explode(F.array_repeat(F.col("key"), F.col("n").cast("int")))
            .alias("image"))
    if pk is not None and pk_names is not None:
        images = images.where(f"key = {sql_string(pk)}")
    from pipelines.silver.derived import load_fk_gaps

    warnings = [g.describe() for g in load_fk_gaps(spark, cfg)
                if (g.schema, g.table) == (schema, table) and g.overlaps(start, point.cutoff)]
    return Reconstruction(schema, table, columns, spec,
                          images.orderBy(*_key_order(spec, pk_names), "key"), start_text,
                          warnings)


def _empty(spark, cfg: Config, schema: str, table: str, point: Point, start_text: str,
           facts) -> Reconstruction:
    """The table with no row at ``point``: nothing changed it since its CREATE TABLE
    (``start_text``). Its columns are those of the first later snapshot naming it (under the
    name renames gave it by then), with a warning saying so; none when no snapshot does."""
    from pipelines.silver.data_snapshot import table_spec

    plan = lake.naming_plan(spark, cfg)
    spec, found = None, None
    for coord, snap in plan.snapshots.get(cfg.source.name, []):
        if coord < point.cutoff:
            continue
        name = (schema, table)
        for r in facts:
            if point.cutoff <= r.pos < coord and r.old == name:
                name = r.new
        if name in snap.tables:
            spec, found = table_spec(snap.table(*name), snap.snapshot_id), snap
            break
    columns = [c.name for c in spec.columns] if spec is not None else []
    known = (f"its columns are those of the later snapshot {found.snapshot_id}"
             if found is not None else "no snapshot names its columns")
    warning = (f"{schema}.{table} held no row at {point.text}: no change of it since its "
               f"history start ({start_text}); {known}")
    images = spark.createDataFrame([], "key string, image string")
    return Reconstruction(schema, table, columns, spec, images, start_text, [warning])


def _key_order(spec: TableSpec, pk_names: list[str] | None) -> list[Any]:
    """The rows' order: the key columns' values in their types (1, 2, 10, not 1, 10, 2);
    ``key`` (pk_values text) breaks ties. A table without a PRIMARY KEY orders by its image."""
    if pk_names is None:
        return []
    kinds = {c.name: c.col_type for c in spec.columns}
    out = []
    for name in pk_names:
        value = F.get_json_object(F.col("image"), json_path(name))
        col_type = kinds.get(name)
        if col_type in T.INTEGER_TYPES:
            value = value.cast("decimal(20,0)")  # BIGINT UNSIGNED included
        elif col_type in T.NUMERIC_TYPES:
            value = value.cast("double")
        elif col_type == T.YEAR:
            value = value.cast("int")
        out.append(value)
    return out
