"""Pure: silver row changes → typed mirror rows, SCD type 1 upserts and SCD type 2 versions.

A table's *layout* is its mirror columns: every column any schema epoch of the table had,
in the latest snapshot's order then the order first seen, each with the type that holds all
its epochs' values (:func:`~pipelines.mirror.types.widen`). Schema change rule
(``docs/mirror.md``): added columns appear (NULL before), dropped columns stay and stop
receiving values (NULL in later versions), a type change widens the column in place.

Each silver row becomes *records* (:func:`records`): an UPDATE or DELETE *closes* the
version holding its before image, an INSERT or UPDATE *opens* a version with its after
image. A version is identified by the ``seq`` that opened it (unique per source), so both
Delta MERGEs the job runs match on that one number and re-running them changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.errors import SchemaMismatchError
from pipelines.mirror.columns import NotFast, image_columns
from pipelines.mirror.json_spans import SPAN_PREFIX
from pipelines.mirror.types import (JSON_IN_TEXT, STRING, MirrorType, converter, parse_image,
                                    type_of_column, widen)
from pipelines.vocabulary import quote_ident

__all__ = ["Layout", "TableTyping", "plan_layout", "mirror_type_of_spark", "records",
           "record_schema", "versions", "history_changes", "current_changes",
           "RECORD_META", "CURRENT_META", "HISTORY_META", "HISTORY_PARTITION"]

RECORD_META = [("__kind", "string"), ("__seq", "bigint"), ("__gtid", "string"),
               ("__event_timestamp", "timestamp"), ("__event_type", "string"),
               ("__absent", "array<string>")]
CURRENT_META = [("__seq", "bigint"), ("__gtid", "string"), ("__event_timestamp", "timestamp")]
HISTORY_META = [("__START_AT", "bigint"), ("__END_AT", "bigint"),
                ("__start_timestamp", "timestamp"), ("__end_timestamp", "timestamp"),
                ("__event_type", "string"), ("__is_current", "boolean")]
# The history's partition column: a run rewrites only the files of open versions (the ones
# it may close), never the closed history.
HISTORY_PARTITION = "__is_current"
SILVER_INPUT = ["seq", "gtid", "event_timestamp", "event_type", "row_before", "row_after",
                "schema_version", "absent_columns"]

_SPARK_KIND = {"tinyint": "int", "smallint": "int", "int": "int", "bigint": "int",
               "float": "float", "double": "double", "date": "date",
               "timestamp_ntz": "datetime", "timestamp": "timestamp", "binary": "binary",
               "string": "text"}


def mirror_type_of_spark(spark: str) -> MirrorType:
    """The :class:`MirrorType` of an existing mirror column's Spark type string."""
    if spark.startswith("decimal"):
        return MirrorType(spark.replace(" ", ""), "decimal")
    return MirrorType(spark, _SPARK_KIND.get(spark, "text"))


@dataclass(frozen=True)
class TableTyping:
    """What the snapshots say about one table: column types per snapshot_id, the latest known
    type per column name (for row changes named from the binlog alone), the key."""

    by_version: dict[str, dict[str, MirrorType]] = field(default_factory=dict)
    latest: dict[str, MirrorType] = field(default_factory=dict)
    order: tuple[str, ...] = ()
    pk: tuple[str, ...] = ()
    # MariaDB JSON columns (a LONGTEXT with a json_valid CHECK that only a snapshot names):
    # silver renders their values as a JSON string of the document where no snapshot of the
    # row's schema_version says JSON
    text_json: frozenset[str] = frozenset()

    @classmethod
    def from_snapshots(cls, snapshots: Iterable[Any], schema: str, table: str,
                       earlier: Iterable[tuple[str, str]] = ()) -> "TableTyping":
        """``snapshots``: ``source.model.Snapshot`` objects, oldest first; ``earlier``: the
        table's earlier names (RENAME TABLE), newest first: a snapshot taken under one of
        them describes it too."""
        earlier = list(earlier)
        by_version: dict[str, dict[str, MirrorType]] = {}
        latest: dict[str, MirrorType] = {}
        order: tuple[str, ...] = ()
        pk: tuple[str, ...] = ()
        text_json: set[str] = set()
        for snap in snapshots:
            ts = next((snap.tables[n] for n in [(schema, table), *earlier] if n in snap.tables),
                      None)
            if ts is None:
                continue
            text_json |= {c.name for c in ts.columns
                          if c.is_json and (c.data_type or "").lower() != "json"}
            cols = {c.name: type_of_column(c.data_type, c.column_type, is_json=c.is_json)
                    for c in ts.columns}
            by_version[snap.snapshot_id] = cols
            latest.update(cols)
            order = tuple(c.name for c in ts.columns)
            pk = tuple(ts.primary_key)
        return cls(by_version, latest, order, pk, frozenset(text_json))

    def type_of(self, version: str | None, column: str) -> MirrorType:
        """The column's type in the epoch ``version`` names: that snapshot's, else the latest
        snapshot's for that name, else string (the column's JSON text)."""
        cols = self.by_version.get(version or "")
        if cols and column in cols:
            return cols[column]
        return self.latest.get(column, STRING)

    def reading_of(self, version: str | None, column: str) -> MirrorType:
        """How the column's silver values of ``version`` are read: :meth:`type_of`, except a
        MariaDB JSON column rendered without a snapshot naming it JSON (a JSON string of the
        document: ``JSON_IN_TEXT``, so the mirror holds the document, not a string of it)."""
        cols = self.by_version.get(version or "")
        if column in self.text_json and not (cols and column in cols):
            return JSON_IN_TEXT
        return self.type_of(version, column)


@dataclass(frozen=True)
class Layout:
    """A mirror table's data columns (name, type) and the columns identifying a row."""

    columns: tuple[tuple[str, MirrorType], ...]
    key: tuple[str, ...]
    has_pk: bool

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.columns]

    def type_of(self, name: str) -> MirrorType:
        return dict(self.columns)[name]

    def ddl(self) -> str:
        return ", ".join(f"{quote_ident(n)} {t.spark}" for n, t in self.columns)


def plan_layout(existing: Sequence[tuple[str, str]] | None, typing: TableTyping,
                seen: Iterable[tuple[str | None, str]]) -> Layout:
    """The table's layout after this run.

    ``existing``: the current mirror table's data columns (name, Spark type), ``None`` when
    there is no table yet; ``seen``: (schema_version, column) pairs of this run's rows.
    """
    cols: dict[str, MirrorType] = {}
    for name, spark in existing or ():
        cols[name] = mirror_type_of_spark(spark)
    wanted: list[tuple[str, MirrorType]] = []
    if existing is None:
        wanted += [(n, typing.latest[n]) for n in typing.order]
    for version, name in seen:
        wanted.append((name, typing.type_of(version, name)))
    for name, t in wanted:
        cols[name] = widen(cols[name], t) if name in cols else t
    pk = tuple(n for n in typing.pk if n in cols)
    key = pk or tuple(cols)
    return Layout(tuple(cols.items()), key, bool(pk))


# -- records (Python, inside mapInArrow) ---------------------------------------------------

_ARROW = {"tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
          "float": pa.float32(), "double": pa.float64(), "date": pa.date32(),
          "timestamp_ntz": pa.timestamp("us"), "timestamp": pa.timestamp("us", tz="UTC"),
          "binary": pa.binary(), "string": pa.string()}


def _arrow_type(spark: str) -> pa.DataType:
    if spark == "array<string>":
        return pa.list_(pa.string())
    if spark.startswith("decimal("):
        p, s = spark[8:-1].split(",")
        return pa.decimal128(int(p), int(s))
    return _ARROW[spark]


def record_schema(layout: Layout) -> tuple[str, pa.Schema]:
    """(Spark DDL, Arrow schema) of :func:`records`' output."""
    fields = RECORD_META + [(n, t.spark) for n, t in layout.columns]
    ddl = ", ".join(f"{quote_ident(n)} {t}" for n, t in fields)
    arrow = pa.schema([(n, _arrow_type(t)) for n, t in fields])
    return ddl, arrow


def records(layout: Layout, typing: TableTyping, where: str, *, use_arrow: bool = True,
            spans: dict[str, int] | None = None
            ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function: silver rows (``SILVER_INPUT``) of one table → records.

    A batch converts at once through Arrow (``columns.image_columns``) where that gives the
    same values as converting value by value, the reference (``use_arrow=False``: always).
    ``spans``: JSON columns whose text the engine cut out of the images, each with its
    number in the input's span columns (``json_spans``; the Arrow path's use).

    Raises :class:`SchemaMismatchError` naming ``where`` (the table), the seq and the column
    when a value does not fit its type.
    """
    _, schema = record_schema(layout)
    names = layout.names
    key = set(layout.key)
    per_version: dict[tuple[str | None, bool], list[tuple[str, Callable[[Any], Any]]]] = {}

    def _none(_value: Any) -> None:
        return None

    def convert(version: str | None, image: dict[str, Any], seq: int, only_key: bool
                ) -> list[Any]:
        # A close only needs the key (pairing matches on it): the other columns stay NULL.
        fns = per_version.get((version, only_key))
        if fns is None:
            fns = per_version[(version, only_key)] = [
                (n, converter(typing.reading_of(version, n), layout.type_of(n), n)
                 if n in key or not only_key else _none) for n in names]
        try:
            return [fn(image[n]) if n in image else None for n, fn in fns]
        except SchemaMismatchError as exc:
            raise SchemaMismatchError(f"{where} seq {seq}: {exc}") from None

    arrow = {f.name: f.type for f in schema}

    def fast(batch: pa.RecordBatch) -> pa.RecordBatch:
        # Every image whole (no MINIMAL image: its key fill and absent columns go by row).
        if batch.column("absent_columns").null_count != batch.num_rows:
            raise NotFast("absent columns")
        parts, order = [], []
        versions_ = batch.column("schema_version")
        for version in pc.unique(versions_).to_pylist():
            mask = (pc.is_null(versions_) if version is None
                    else pc.fill_null(pc.equal(versions_, version), False))
            rows = batch.filter(mask)
            at = pc.indices_nonzero(mask)
            cols = [(n, typing.reading_of(version, n), layout.type_of(n), arrow[n])
                    for n in names]
            for kind, image, only, rank in (("close", "row_before", key, 0),
                                            ("open", "row_after", None, 1)):
                has = pc.is_valid(rows.column(image))
                if not pc.any(has).as_py():
                    continue
                sub = rows.filter(has)
                cut = {n: sub.column(f"{SPAN_PREFIX[rank]}{i}").to_pylist()
                       for n, i in (spans or {}).items() if only is None or n in only}
                data = image_columns(sub.column(image).to_pylist(), cols,
                                     frozenset(only) if only is not None else None, cut)
                if rank and layout.has_pk and any(
                        data[i].null_count for i, n in enumerate(names) if n in key):
                    raise NotFast("key")  # a MINIMAL image's key comes from its before image
                m = sub.num_rows
                parts.append(pa.RecordBatch.from_arrays(
                    [pa.array([kind] * m, pa.string()), sub.column("seq"), sub.column("gtid"),
                     sub.column("event_timestamp").cast(arrow["__event_timestamp"]),
                     sub.column("event_type"), pa.nulls(m, arrow["__absent"]), *data],
                    schema=schema))
                order.append(pc.add(pc.multiply(at.filter(has), 2), rank))
        table = pa.Table.from_batches(parts, schema=schema)
        # the reference's order: per row its close, then its open
        return table.take(pc.sort_indices(pa.chunked_array(order))).combine_chunks() \
            .to_batches()[0] if table.num_rows else pa.RecordBatch.from_pylist([], schema)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if use_arrow and batch.num_rows:
                try:
                    out = fast(batch)
                except NotFast:
                    pass  # value by value below: the reference, and its errors
                else:
                    if out.num_rows:
                        yield out
                    continue
            rows: list[list[Any]] = []
            for r in batch.to_pylist():
                meta = [r["seq"], r["gtid"], r["event_timestamp"], r["event_type"]]
                before, after = parse_image(r["row_before"]), parse_image(r["row_after"])
                version = r["schema_version"]
                if before is not None:
                    rows.append(["close", *meta, None,
                                 *convert(version, before, r["seq"], True)])
                if after is not None and before is not None and layout.has_pk:
                    # a MINIMAL after image leaves out the unchanged key: the before image's
                    for k in key:
                        if k not in after and k in before:
                            after[k] = before[k]
                if after is not None:
                    absent = parse_image(r["absent_columns"]) if r["absent_columns"] else None
                    absent = [n for n in absent if n not in after] if absent else None
                    rows.append(["open", *meta, absent or None,
                                 *convert(version, after, r["seq"], False)])
            if rows:
                yield pa.RecordBatch.from_arrays(
                    [pa.array(col, type=f.type) for col, f in zip(zip(*rows), schema)],
                    schema=schema)

    return run


def seen_columns(rows: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A ``mapInArrow`` function: silver rows → distinct (schema_version, column, position in
    the image) triples."""
    seen: dict[tuple[str | None, str], int] = {}
    for batch in rows:
        for r in batch.to_pylist():
            for text in (r["row_before"], r["row_after"]):
                image = parse_image(text)
                for i, k in enumerate(image or ()):
                    seen.setdefault((r["schema_version"], k), i)
    if seen:
        (versions_, columns), positions = zip(*seen), list(seen.values())
        yield pa.RecordBatch.from_arrays([pa.array(versions_, pa.string()),
                                          pa.array(columns, pa.string()),
                                          pa.array(positions, pa.int32())],
                                         names=["schema_version", "column", "position"])


# -- versions (DataFrame transforms) --------------------------------------------------------

def _fill_absent(events, layout: Layout):
    """Columns a MINIMAL/NOBLOB after image did not carry keep the key's previous value: the
    last version (this run's or the current table's) in which the column was present."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = (Window.partitionBy(*[F.col(quote_ident(k)) for k in layout.key]).orderBy("__seq")
         .rowsBetween(Window.unboundedPreceding, 0))
    is_open = F.col("__kind") == "open"
    out = events
    for name in layout.names:
        if name in layout.key:
            continue
        present = is_open & ~F.coalesce(F.array_contains(F.col("__absent"), name), F.lit(False))
        carried = F.last(F.when(present, F.struct(F.col(quote_ident(name)).alias("v"))),
                         ignorenulls=True).over(w)
        out = out.withColumn(name, F.when(is_open, carried["v"])
                             .otherwise(F.col(quote_ident(name))))
    return out


def versions(recs, opens0, layout: Layout, *, fill_absent: bool = False):
    """Pair opens with the closes that end them.

    ``recs``: this run's records; ``opens0``: the versions open before this run whose key
    this run closes (current-table rows as ``open`` records). Returns one row per version
    touched: data columns, ``__start`` (seq), ``__end`` (seq or NULL), ``__end_ts``,
    ``__existing`` (opened before this run), the opening change's gtid/time/type.
    ``fill_absent`` (some images were MINIMAL/NOBLOB): see :func:`_fill_absent` (tables with
    a primary key; without one, absent columns stay NULL).

    With a primary key a version ends at the first close of its key after it. Without one
    (identical rows may repeat) the n-th close of a row's values ends its n-th open: at every
    moment there are at least as many opens as closes, so that pairing is always possible.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = [F.col(quote_ident(k)) for k in layout.key]
    events = recs.withColumn("__existing", F.lit(False)).unionByName(
        opens0.withColumn("__existing", F.lit(True)))
    if fill_absent and layout.has_pk:
        events = _fill_absent(events, layout)
    opens = events.where("__kind = 'open'")
    closes = events.where("__kind = 'close'")
    if layout.has_pk:
        # closes sort before opens of the same seq (an UPDATE ends the old version first)
        order = [F.col("__seq"), F.when(F.col("__kind") == "close", 0).otherwise(1)]
        w = Window.partitionBy(*key).orderBy(*order).rowsBetween(1, Window.unboundedFollowing)
        nxt = F.min(F.when(F.col("__kind") == "close",
                           F.struct(F.col("__seq").alias("s"),
                                    F.col("__event_timestamp").alias("t")))).over(w)
        paired = (events.withColumn("__next", nxt).where("__kind = 'open'")
                  .withColumn("__end", F.col("__next.s"))
                  .withColumn("__end_ts", F.col("__next.t")).drop("__next"))
    else:
        w = Window.partitionBy(*key).orderBy("__seq")
        o = opens.withColumn("__n", F.row_number().over(w))
        ck = [f"__k{i}" for i in range(len(layout.key))]
        c = closes.select(*[F.col(quote_ident(k)).alias(a) for k, a in zip(layout.key, ck)],
                          F.col("__seq").alias("__end"),
                          F.col("__event_timestamp").alias("__end_ts"),
                          F.row_number().over(w).alias("__cn"))
        cond = [F.col(quote_ident(k)).eqNullSafe(F.col(a)) for k, a in zip(layout.key, ck)]
        paired = (o.join(c, cond + [F.col("__n") == F.col("__cn")], "left")
                  .drop("__n", "__cn", *ck))
    return paired.withColumnRenamed("__seq", "__start").drop("__kind")


def history_changes(paired, layout: Layout):
    """MERGE source for the history table: every version touched, with ``__op`` ``insert``
    (opened this run) or ``close`` (opened before, closed now)."""
    from pyspark.sql import functions as F

    touched = paired.where("NOT __existing OR __end IS NOT NULL")
    return touched.select(
        *[F.col(quote_ident(n)) for n in layout.names],
        F.col("__start").alias("__START_AT"), F.col("__end").alias("__END_AT"),
        F.col("__event_timestamp").alias("__start_timestamp"),
        F.col("__end_ts").alias("__end_timestamp"),
        F.col("__event_type"), F.col("__end").isNull().alias("__is_current"),
        F.when(F.col("__existing"), "close").otherwise("insert").alias("__op"))


def current_changes(paired, layout: Layout):
    """MERGE source for the current table: ``delete`` every version closed (before or in
    this run: a re-run after a crash may find it there), ``insert`` the ones left open."""
    from pyspark.sql import functions as F

    return paired.select(
        *[F.col(quote_ident(n)) for n in layout.names],
        F.col("__start").alias("__seq"), F.col("__gtid"), F.col("__event_timestamp"),
        F.when(F.col("__end").isNull(), "insert").otherwise("delete").alias("__op"))
