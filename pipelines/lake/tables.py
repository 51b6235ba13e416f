"""The lake's tables, each declared once, and the one way every stage reaches them.

A :class:`LakeTable` is a layer and a name, its columns (``(name, Spark SQL type)`` pairs: the
Spark DDL, the Arrow schema of the decoders and the catalog's ``CREATE TABLE`` are derived
from them), its partition columns and its retention. :func:`register` adds one (one line per
table); :func:`lake_tables` lists them all for ``vacuum``, ``status``, the SQL views and
docs/lake.md.

Where a table lives is the :class:`Lake`'s business (one per configuration):

- by default a Delta table at ``<lake.root>/<layer>/<name>``, read and written by path
  (SQL: ``delta.`<path>```);
- with ``lake.catalog = "cat.schema"`` (``--catalog``), a metastore table
  ``cat.schema.<layer>_<name>``: the schema and the table are created when missing
  (``CREATE TABLE IF NOT EXISTS … USING delta … LOCATION '<lake.root>/<layer>/<name>'``:
  external tables at the lake paths, see docs/lake.md for why; with ``lake.managed = true``
  managed tables, without LOCATION), every read and write goes through the identifier, and
  the delta-rs helpers find the files through ``DESCRIBE DETAIL``.

Nothing here starts a session; pyspark is imported only inside the helpers that need it.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from pipelines.lake import seen as lake_seen
from pipelines.lake.delta_ops import (create_with_stats_columns, current_version, rows_in_table,
                                 sql_string, stats_columns_configuration, table_exists,
                                 target_file_size)
from pipelines.errors import BinlakeError, EngineError, raised_in_task
from pipelines.lake.evolution import read_data_files, with_declared_columns
from pipelines.lake.plain_strings import plain_strings
from pipelines.lake.sql_types import Column, arrow_schema, ddl, parse_columns
from pipelines.lake.task_files import FileSpec, commit_files
from pipelines.config import ROW_GROUP_ROWS, is_url_root, parse_catalog, resolve_root, table_dir
from pipelines.vocabulary import delta_ident, quote_ident

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["LakeTable", "Lake", "register", "lake_table", "lake_tables", "tables_markdown", "with_declared_columns", "read_data_files",
           "BRONZE_EVENTS", "BRONZE_FILES", "SILVER_EVENTS", "SILVER_QUARANTINE",
           "SILVER_PROGRESS", "SCHEMA_SNAPSHOTS", "FK_CONSTRAINTS", "SOURCE_CHECKS",
           "BASELINE_ROWS", "BASELINES",
           "QUALITY_RESULTS", "QUALITY_FAILURES"]


@dataclass(frozen=True)
class LakeTable:
    """One Delta table of the lake (see the module docstring)."""

    layer: str
    name: str
    columns: tuple[Column, ...]
    partition_by: tuple[str, ...] = ()
    description: str = ""
    retention: str | None = None  # delta.deletedFileRetentionDuration; None: gold.deleted_file_retention
    aliases: tuple[str, ...] = ()  # older view names `binlake sql` keeps answering to
    # The columns Delta keeps min/max statistics for (delta.dataSkippingStatsColumns), set
    # when binlake creates the table; empty: Delta's default (the first 32 columns).
    stats_columns: tuple[str, ...] = ()
    # Columns given a Parquet bloom filter where binlake writes the data files (task_files,
    # optimize): a key lookup skips every row group that cannot hold the key.
    bloom_columns: tuple[str, ...] = ()
    # True: where the engine's writer cannot size Parquet row groups (the embedded engine),
    # binlake's tasks write the table's appended data files (Lake.file_spec, task_files).
    row_groups: bool = False

    @property
    def key(self) -> str:
        """``layer/name``: the directory under the lake root."""
        return f"{self.layer}/{self.name}"

    @property
    def table_name(self) -> str:
        """``layer_name``: the catalog table's name and the SQL view's."""
        return f"{self.layer}_{self.name}"

    @property
    def column_names(self) -> list[str]:
        return [c for c, _ in self.columns]

    def ddl(self, *, exclude: Iterable[str] = ()) -> str:
        """The columns as Spark DDL (``a string, b bigint``), without ``exclude``."""
        return ddl(self._cols(exclude))

    def arrow_schema(self, *, exclude: Iterable[str] = ()) -> "pa.Schema":
        """The columns as an Arrow schema (``timestamp`` is UTC microseconds)."""
        return arrow_schema(self._cols(exclude))

    def _cols(self, exclude: Iterable[str]) -> list[Column]:
        drop = set(exclude)
        unknown = drop - set(self.column_names)
        if unknown:
            raise KeyError(f"{self.key} has no column(s) {sorted(unknown)}")
        return [c for c in self.columns if c[0] not in drop]


_REGISTRY: dict[tuple[str, str], LakeTable] = {}


def register(layer: str, name: str, columns: str | Sequence[Column], *,
             partition_by: Sequence[str] = (), description: str = "",
             retention: str | None = None, aliases: Sequence[str] = (),
             stats_columns: Sequence[str] = (), bloom_columns: Sequence[str] = (),
             row_groups: bool = False) -> LakeTable:
    """Declare a lake table (``columns`` as DDL text or ``(name, type)`` pairs); return it.

    Registering the same layer/name twice with the same columns and partitioning returns the
    first; different ones raise :class:`ValueError` (two schemas for one table).
    """
    cols = parse_columns(columns) if isinstance(columns, str) else tuple(map(tuple, columns))
    for what, names in (("partition", partition_by), ("statistics", stats_columns),
                        ("bloom filter", bloom_columns)):
        missing = set(names) - {c for c, _ in cols}
        if missing:
            raise ValueError(f"{layer}/{name}: {what} column(s) {sorted(missing)} not declared")
    if set(stats_columns) & set(partition_by):  # delta-spark refuses them (the path has them)
        raise ValueError(f"{layer}/{name}: partition column(s) "
                         f"{sorted(set(stats_columns) & set(partition_by))} cannot have statistics")
    table = LakeTable(layer, name, cols, tuple(partition_by), description, retention,
                      tuple(aliases), tuple(stats_columns), tuple(bloom_columns), row_groups)
    have = _REGISTRY.setdefault((layer, name), table)
    if (have.columns, have.partition_by) != (table.columns, table.partition_by):
        raise ValueError(f"{layer}/{name} is already registered with another declaration")
    return have


def lake_table(layer: str, name: str) -> LakeTable:
    """The registered table ``layer/name``; :class:`KeyError` when there is none."""
    try:
        return _REGISTRY[(layer, name)]
    except KeyError:
        raise KeyError(f"no lake table {layer}/{name} is registered (pipelines/lake/tables.py)") from None


def lake_tables() -> list[LakeTable]:
    """Every registered table, in registration order (bronze, silver, quality, then others)."""
    return list(_REGISTRY.values())


class Lake:
    """The lake of one configuration: where each :class:`LakeTable` is and how to reach it."""

    def __init__(self, root: str, catalog: str = "", *, managed: bool = False,
                 writer: str = "auto", row_group_rows: int = ROW_GROUP_ROWS) -> None:
        self.root = resolve_root(root)
        self.writer, self.row_group_rows = writer, row_group_rows
        self.catalog = catalog.strip()
        self._parts = parse_catalog(self.catalog) if self.catalog else ()
        self.managed = managed and bool(self._parts)
        # What this lake object has seen, asked of the engine once (each ask is a query plan:
        # ~1.5 ms on Sail, 45–60 ms on JVM Spark): tables that exist (no stage drops one), and
        # tables holding every declared column (no column is ever dropped). Tables at local
        # paths are also remembered for the process (pipelines/lake/seen.py): every stage
        # makes its own lake object.
        self._known: set[str] = set()
        self._complete: set[str] = set()

    @classmethod
    def of(cls, cfg: Any) -> "Lake":
        """The lake of a :class:`~pipelines.config.Config` (``lake.root``, ``lake.catalog``,
        ``lake.managed``)."""
        lc = cfg.lake
        return cls(lc.root, getattr(lc, "catalog", ""), managed=getattr(lc, "managed", False),
                   writer=getattr(lc, "writer", "auto"),
                   row_group_rows=getattr(lc, "row_group_rows", ROW_GROUP_ROWS))

    @property
    def uses_catalog(self) -> bool:
        return bool(self._parts)

    def _seen(self, table: LakeTable, *, complete: bool = False) -> bool:
        if table.key in (self._complete if complete else self._known):
            return True
        return not self._parts and lake_seen.seen(self.path(table), complete=complete)

    def _state(self, table: LakeTable) -> lake_seen.State | None:
        """The table's log state before asking the engine (path mode; else ``None``)."""
        return None if self._parts else lake_seen.state(self.path(table))

    def _saw(self, table: LakeTable, then: lake_seen.State | None = None, *,
             complete: bool = False) -> None:
        (self._complete if complete else self._known).add(table.key)
        if not self._parts:
            lake_seen.saw(self.path(table), then, complete=complete)

    def path(self, table: LakeTable) -> str:
        """The table's directory under the lake root (its LOCATION in catalog mode)."""
        return table_dir(self.root, table.layer, table.name)

    def ident(self, table: LakeTable) -> str:
        """The table in SQL: ``delta.`<path>``` or ```cat`.`schema`.`layer_name```."""
        if self._parts:
            return ".".join(quote_ident(p) for p in self._parts + (table.table_name,))
        return delta_ident(self.path(table))

    def where(self, table: LakeTable) -> str:
        """For messages: the identifier in catalog mode, else the path."""
        return self.ident(table) if self._parts else self.path(table)

    # -- reading ------------------------------------------------------------------------------
    def exists(self, spark, table: LakeTable) -> bool:
        """True when the table exists (and has a Delta log).

        Catalog mode: a Delta table at the lake path that the catalog does not list (a lake
        written by path, or a session catalog that forgot it) is registered first, so that
        no stage mistakes it for a missing table.
        """
        if self._seen(table):
            return True
        if not self._parts:
            then = self._state(table)  # None on a local path: no _delta_log, no table
            if then is None and not is_url_root(self.root) \
                    or not table_exists(spark, self.path(table)):
                return False
            self._saw(table, then)
            return True
        try:
            spark.read.table(self.ident(table)).schema  # noqa: B018 - forces analysis
        except Exception:  # noqa: BLE001 - engines raise different AnalysisException types
            if self.managed or not table_exists(spark, self.path(table)):
                return False
            self.create(spark, table, registered_from_path=True)
        self._saw(table)
        return True

    def read(self, spark, table: LakeTable, version: int | None = None):
        """The table as a DataFrame, at ``version`` when given (Delta time travel).

        Catalog mode: a table the catalog forgot is registered from its path first.
        """
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", int(version))
        if self._parts:
            self.exists(spark, table)
            df = reader.table(self.ident(table))
        else:
            df = reader.load(self.path(table))
        if version is not None:  # an older version may lack columns declared since
            return with_declared_columns(df, table)
        if self._seen(table, complete=True):
            return df
        then = self._state(table)
        out = with_declared_columns(df, table)
        if out is df:  # nothing was missing
            self._saw(table, then, complete=True)
        return out

    def location(self, spark, table: LakeTable) -> str | None:
        """Where the table's files are, for delta-rs: the path, or in catalog mode what
        ``DESCRIBE DETAIL`` says (``None`` when the table does not exist, or without a
        session to ask)."""
        if not self._parts:
            return self.path(table)
        if spark is None:
            return None
        try:
            row = spark.sql(f"DESCRIBE DETAIL {self.ident(table)}").collect()[0]
        except Exception:  # noqa: BLE001 - no such table, or an engine without DESCRIBE DETAIL
            if self.managed or current_version(self.path(table)) is None:
                return None
            return self.path(table)  # external tables are created at their path
        loc = row["location"] or None
        for scheme in ("file://", "file:"):  # a local path, as delta-rs and the tests write it
            if loc and loc.startswith(scheme + "/"):
                return loc[len(scheme):]
        return loc

    def rows(self, spark, table: LakeTable) -> int:
        """Rows in the table's latest version, 0 when there is no table: from the Delta log's
        per-file statistics where they are complete (``delta_ops.rows_in_table``, no data
        file read: a count on JVM Spark is a job of half a second), else counted."""
        if not self.exists(spark, table):
            return 0
        loc = self.location(spark, table)
        n = rows_in_table(loc) if loc else None
        return n if n is not None else self.read(spark, table).count()

    def version(self, spark, table: LakeTable) -> int | None:
        """The table's latest Delta version; ``None`` when there is no table."""
        loc = self.location(spark, table)
        version = current_version(loc) if loc else None
        if version is None and self._parts and loc:
            try:  # files delta-rs cannot open (object store without its credentials)
                return int(spark.sql(f"DESCRIBE HISTORY {self.ident(table)} LIMIT 1")
                           .collect()[0]["version"])
            except Exception:  # noqa: BLE001 - engine without DESCRIBE HISTORY
                return None
        return version

    # -- writing ------------------------------------------------------------------------------
    def create(self, spark, table: LakeTable, *, registered_from_path: bool = False) -> None:
        """Catalog mode: create the schema and the table when missing (external at the lake
        path, or managed; partitioned as declared). ``registered_from_path``: the path
        already holds the Delta table, whose log then gives columns and partitioning. Path
        mode: nothing, the first write creates it."""
        if not self._parts:
            return
        try:
            if len(self._parts) == 2:
                spark.sql("CREATE SCHEMA IF NOT EXISTS "
                          + ".".join(quote_ident(p) for p in self._parts)).collect()
            cols = f" ({ddl(table.columns, quoted=True)})"
            parts = (f" PARTITIONED BY ({', '.join(quote_ident(c) for c in table.partition_by)})"
                     if table.partition_by else "")
            if registered_from_path:
                cols = parts = ""
            where = "" if self.managed else f" LOCATION {sql_string(self.path(table))}"
            props = ("" if registered_from_path or not table.stats_columns else
                     " TBLPROPERTIES ('delta.dataSkippingStatsColumns' = "
                     f"{sql_string(','.join(table.stats_columns))})")
            spark.sql(f"CREATE TABLE IF NOT EXISTS {self.ident(table)}{cols} USING delta"
                      f"{parts}{where}{props}").collect()
        except Exception as exc:  # noqa: BLE001 - AnalysisException and friends
            at = "" if self.managed else f" at {self.path(table)}"
            raise EngineError(f"lake.catalog {self.catalog}: cannot create "
                              f"{self.ident(table)}{at}: {_first_line(exc)}") from exc

    def append(self, df, table: LakeTable, *, target_mb: int = 0) -> None:
        """Append ``df`` (columns by name) to the table in one commit by the engine's Delta
        writer, its data files rolled over at about ``target_mb`` MB (0: the writer's
        default). (:meth:`file_spec` and :meth:`commit_files`: binlake's tasks write them.)"""
        self._write(df, table, "append", target_file_size(target_mb))

    def file_spec(self, spark, table: LakeTable, target_mb: int = 0, *,
                  embedded: bool) -> FileSpec | None:
        """How binlake's own tasks write ``table``'s data files (``task_files``: row groups
        of ``lake.row_group_rows``, bloom filters), or ``None`` where the engine's Delta writer
        does: a table not declared ``row_groups``, ``lake.writer = "engine"``, an engine
        other than the embedded one (``embedded``: JVM Spark and Databricks honour the Parquet
        settings and run their tasks elsewhere), a catalog or an object store, or a table
        lacking declared columns (the engine's ``mergeSchema`` adds them). A missing table is
        created by the first :meth:`commit_files`, from its declaration."""
        if not (embedded and table.row_groups) or self.writer == "engine" or self._parts \
                or is_url_root(self.root):
            return None
        if self.exists(spark, table) and self._missing_columns(spark, table):
            return None
        return FileSpec(self.path(table), table.partition_by, table.stats_columns,
                        table.bloom_columns, self.row_group_rows,
                        target_mb << 20 if target_mb > 0 else 0,
                        schema=table.arrow_schema(exclude=table.partition_by))

    def commit_files(self, table: LakeTable, added) -> int:
        """Commit the data files tasks wrote by :meth:`file_spec` (``added``: a DataFrame of
        their ``ADDED_DDL`` rows, ``task_files.write_files``) to ``table`` in one append; the
        rows they hold."""
        with _task_errors():
            rows = [r.asDict() for r in added.collect()]
        written = commit_files(self.path(table), rows, schema=table.arrow_schema(),
                               partition_by=table.partition_by,
                               configuration=stats_columns_configuration(table.stats_columns))
        self._saw(table, complete=True)
        return written

    def overwrite(self, df, table: LakeTable) -> None:
        """Replace the table's rows with ``df`` in one commit (small state tables)."""
        self._write(df, table, "overwrite", {})

    def _write(self, df, table: LakeTable, mode: str, options: dict[str, str]) -> None:
        # Spark 4.2 Connect would write the decoders' strings as `string collate UTF8_BINARY`,
        # a schema Sail, delta-rs and older Spark cannot read (pipelines/lake/plain_strings.py).
        df = plain_strings(df, table.columns)
        if self._missing_columns(df.sparkSession, table):
            # A table written before columns were declared (a lake of an older binlake):
            # Delta schema evolution adds them on this commit; older rows read them as NULL.
            options = {**options, "mergeSchema": "true"}
        # A write drops no column: a table complete before it is complete after it.
        complete = self._seen(table, complete=True)
        if self._parts:
            if not self.exists(df.sparkSession, table):  # registers one found at the path
                self.create(df.sparkSession, table)
                self._saw(table)
            writer = df.select(*table.column_names).writeTo(self.ident(table)).options(**options)
            with _task_errors():
                if mode == "append":
                    writer.append()
                else:
                    from pyspark.sql import functions as F

                    writer.overwrite(F.lit(True))
            return
        if table.stats_columns and not self.exists(df.sparkSession, table):
            create_with_stats_columns(self.path(table), table.arrow_schema(),
                                      list(table.partition_by), list(table.stats_columns))
        writer = df.write.format("delta").mode(mode).options(**options)
        if table.partition_by:
            writer = writer.partitionBy(*table.partition_by)
        with _task_errors():
            writer.save(self.path(table))
        self._saw(table, complete=complete)

    def takes_literals(self, spark, table: LakeTable) -> bool:
        """Whether an append may give partition values as literals (so that the engine does
        not sort by them): the table's schema comes from its declaration, not from the
        DataFrame, and needs no evolution. Not when the append creates the table from the
        DataFrame (a literal is a NOT NULL column in the schema it writes), nor when it adds
        declared columns (Sail 0.7.2 then leaves the new columns out of a ``mergeSchema``
        append whose partition columns are literals: tests/acceptance/test_dbtrail_mariadb.py)."""
        if not self.exists(spark, table):  # created from the declaration first (_write)?
            return bool(self._parts or table.stats_columns)
        return not self._missing_columns(spark, table)

    def _missing_columns(self, spark, table: LakeTable) -> list[str]:
        """Declared columns the existing table lacks (none when there is no table yet)."""
        if self._seen(table, complete=True) or not self.exists(spark, table):
            return []
        then = self._state(table)
        reader = spark.read.format("delta")
        have = set((reader.table(self.ident(table)) if self._parts
                    else reader.load(self.path(table))).columns)
        missing = [c for c in table.column_names if c not in have]
        if not missing:
            self._saw(table, then, complete=True)
        return missing

    def delete_where(self, spark, table: LakeTable, predicate: str) -> None:
        """``DELETE FROM`` the table where ``predicate`` (SQL on partition columns: a
        metadata-only commit on every engine; on rows only for ``bronze/files``'s
        compaction, a small table without arrays)."""
        spark.sql(f"DELETE FROM {self.ident(table)} WHERE {predicate}").collect()


@contextmanager
def _task_errors() -> Iterator[None]:
    """Around an engine write: a binlake error one of its tasks raised (silver's rendering,
    say) reaches the driver as the engine's exception; it is raised again as itself
    (``errors.raised_in_task``), so callers and the CLI see e.g. ``LakeChangedError``."""
    try:
        yield
    except BinlakeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the engine's own exception types vary
        err = raised_in_task(exc)
        if err is None:
            raise
        raise err from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__


def tables_markdown() -> str:
    """A Markdown table of every registered table (docs/lake.md is generated from it)."""
    lines = ["| table (catalog name) | path under the lake root | partitioned by | columns |",
             "| --- | --- | --- | --- |"]
    for t in lake_tables():
        cols = ", ".join(f"`{c}` {k}" for c, k in t.columns)
        lines.append(f"| `{t.table_name}` | `{t.key}` | {', '.join(t.partition_by) or '-'} | "
                     f"{t.description} {cols} |")
    return "\n".join(lines)


# -- the tables --------------------------------------------------------------------------------
# bronze: docs/bronze.md (pipelines/bronze/records.py writes these columns as Arrow)
BRONZE_EVENTS = register("bronze", "binlog_events", [
    ("source_id", "string"), ("server_id", "bigint"), ("server_uuid", "string"),
    ("binlog_file", "string"), ("start_pos", "bigint"), ("end_pos", "bigint"),
    ("row_in_event", "int"), ("event_timestamp", "timestamp"), ("event_type", "string"),
    ("gtid", "string"), ("trx_pos", "bigint"), ("connection_id", "bigint"),
    ("schema_name", "string"), ("table_name", "string"), ("table_id", "bigint"),
    ("column_count", "int"), ("column_types", "array<int>"), ("column_meta", "array<int>"),
    ("column_nullable", "array<boolean>"), ("column_names", "array<string>"),
    ("column_unsigned", "array<boolean>"), ("column_charsets", "array<int>"),
    ("primary_key", "array<int>"), ("enum_values", "array<array<string>>"),
    ("set_values", "array<array<string>>"), ("row_before", "array<binary>"),
    ("row_after", "array<binary>"), ("before_present", "array<boolean>"),
    ("after_present", "array<boolean>"), ("query", "string"),
    # dbtrail's columns (docs/gold.md), added later: last, so an older table evolves to this.
    ("query_text", "string"), ("commit_ts_us", "bigint"),
    # A row change's TABLE_MAP facts by reference (docs/bronze.md), added later.
    ("table_map_hash", "bigint"),
], partition_by=("source_id", "binlog_file"),
    description="Raw decoded events: one row per row change, DDL, incident, file end, and "
    "per decoding task one TABLE_MAP row per distinct table map its row changes name.",
    row_groups=True)
BRONZE_FILES = register(
    "bronze", "files",
    "source_id string, binlog_file string, path string, size bigint, status string, "
    "events bigint, row_changes bigint, last_pos bigint, error string, updated_at timestamp",
    description="Per-file progress of bronze and the stream: a row per state change, the "
    "latest per file counts.")

# silver: docs/silver.md (pipelines/silver/transform.py renders these columns)
SILVER_EVENTS = register("silver", "binlog_events", [
    ("source_id", "string"), ("server_id", "bigint"), ("server_uuid", "string"),
    ("binlog_file", "string"), ("start_pos", "bigint"), ("end_pos", "bigint"),
    ("row_in_event", "int"), ("seq", "bigint"), ("event_timestamp", "timestamp"),
    ("event_date", "date"), ("gtid", "string"), ("connection_id", "bigint"),
    ("schema_name", "string"), ("table_name", "string"), ("event_type", "string"),
    ("pk_values", "string"), ("pk_hash", "string"), ("pk_kind", "string"),
    ("changed_columns", "string"), ("row_before", "string"), ("row_after", "string"),
    ("absent_columns", "string"), ("schema_version", "string"),
    # dbtrail's columns (docs/gold.md), added later: last, so an older table evolves to this.
    ("query_text", "string"), ("commit_ts_us", "bigint"),
    # Where the row change comes from (docs/silver.md "Derived row changes"): `binlog`, or
    # derived: `fk_cascade`, `fk_set_null`, `truncate`, `ddl`. Added later: NULL is `binlog`.
    ("origin", "string"),
    # An UPDATE changing the key: the after image's key (NULL where it is the before image's,
    # pk_values): `query --pk` finds the change under both keys. Added later, NULL before.
    ("pk_values_after", "string"), ("pk_hash_after", "string"),
], partition_by=("event_date",),
    description="Row changes named by their schema: JSON images, changed columns, pk.",
    # Statistics on what readers filter by, not on the JSON images: writing min/max of every
    # image cost a quarter of the write (docs/performance.md).
    stats_columns=("source_id", "binlog_file", "start_pos", "row_in_event", "seq",
                   "event_timestamp", "gtid", "schema_name", "table_name",
                   "event_type", "pk_hash", "pk_kind", "schema_version", "commit_ts_us",
                   "pk_hash_after"),
    bloom_columns=("pk_hash",), row_groups=True)
SILVER_QUARANTINE = register(
    "silver", "quarantine",
    "source_id string, binlog_file string, start_pos bigint, row_in_event int, "
    "event_timestamp timestamp, schema_name string, table_name string, event_type string, "
    "column_count int, reason string, quarantined_at timestamp",
    description="Row changes no schema names yet, with the reason.", aliases=("quarantine",))
SILVER_PROGRESS = register(
    "silver", "progress",
    "source_id string, binlog_file string, bronze_updated_at timestamp, updated_at timestamp, "
    "ddl string, derived_with string",
    description="The bronze files silver has taken (a row per file and run; the latest "
                "counts), with their QUERY events (JSON [start_pos, schema, query]) so that a "
                "run reads bronze's QUERY events only for files new or changed since, and what "
                "their derived row changes were derived with ('<schema_snapshots version>:"
                "<digest of the FK rules and gaps>'): a snapshot that changes it derives them "
                "again.")
SCHEMA_SNAPSHOTS = register("silver", "schema_snapshots", [
    ("snapshot_id", "string"), ("snapshot_time", "timestamp"), ("source_id", "string"),
    ("server_id", "bigint"), ("server_uuid", "string"), ("server_version", "string"),
    ("binlog_file", "string"), ("binlog_pos", "bigint"), ("gtid_executed", "string"),
    ("schema_name", "string"), ("table_name", "string"), ("column_name", "string"),
    ("ordinal_position", "int"), ("column_key", "string"), ("data_type", "string"),
    ("column_type", "string"), ("character_set_name", "string"), ("collation_name", "string"),
    ("is_nullable", "boolean"), ("column_default", "string"), ("is_generated", "boolean"),
    ("is_json", "boolean"), ("pk_ordinal", "int"),
], description="Schema snapshots, one row per column.", aliases=("schema_snapshots",))
FK_CONSTRAINTS = register("silver", "fk_constraints", [
    ("snapshot_id", "string"), ("snapshot_time", "timestamp"), ("source_id", "string"),
    ("constraint_schema", "string"), ("constraint_name", "string"), ("table_schema", "string"),
    ("table_name", "string"), ("column_name", "string"), ("ordinal_position", "int"),
    ("referenced_table_schema", "string"), ("referenced_table_name", "string"),
    ("referenced_column_name", "string"), ("update_rule", "string"), ("delete_rule", "string"),
], description="Foreign keys of each snapshot, one row per column.", aliases=("fk_constraints",))
SOURCE_CHECKS = register(
    "silver", "source_checks",
    "snapshot_id string, source_id string, level string, name string, detail string",
    description="The source checks each snapshot ran.", aliases=("source_checks",))
BASELINE_ROWS = register(
    "silver", "baseline_rows",
    "snapshot_id string, source_id string, schema_name string, table_name string, "
    "pk_values string, pk_hash string, row_image string",
    description="`snapshot --data` rows in silver's JSON form (docs/history.md).")
BASELINES = register(
    "silver", "baselines",
    "snapshot_id string, snapshot_time timestamp, source_id string, binlog_file string, "
    "binlog_pos bigint, gtid_executed string, seq bigint, schema_name string, "
    "table_name string, row_count bigint",
    description="Complete `snapshot --data` baselines per table, with their coordinates.")

# quality: pipelines/quality/job.py
QUALITY_RESULTS = register(
    "quality", "results",
    "run_id string, run_time timestamp, name string, dataset string, passed_records bigint, "
    "failed_records bigint, action string, status string, expectation string, "
    "description string, window string, silver_version bigint, error string",
    description="One row per rule and dataset per quality run.")
QUALITY_FAILURES = register(
    "quality", "failures",
    "run_id string, run_time timestamp, name string, dataset string, action string, "
    "source_id string, binlog_file string, start_pos bigint, row_in_event int, "
    "schema_name string, table_name string, event_type string, detail string",
    description="The failing rows' keys per rule and run.")


if __name__ == "__main__":  # python -m pipelines.lake.tables: the table list of docs/lake.md
    print(tables_markdown())
