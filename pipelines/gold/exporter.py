"""The parallel bulk export: each engine task writes its share of silver rows to gold.

:func:`export_rows` is ``DataFrame → DataFrame``: ``mapInArrow`` runs :func:`_task` on every
partition; the task opens one connection, turns each Arrow batch into gold values
(``rows.to_gold``), writes them in chunks of ``batch_rows`` — one transaction each — and
yields one small row of counts. No RDD and no foreachPartition, so it runs the same on Sail,
Spark Connect, classic Spark and Databricks.

Methods (``gold.method``; ``bench/gold_export.py`` measures them side by side):

* ``bulk`` (MariaDB 10.2.7+): the ``insert`` method's statement prepared once per task and
  sent with many rows a command in the binary protocol (``COM_STMT_BULK_EXECUTE``,
  ``bulk.py``): the server parses no literals. A task whose connection could not negotiate it
  writes multi-row INSERTs instead.

* ``load_data``: ``LOAD DATA LOCAL INFILE … IGNORE`` of a TSV body per chunk, sent from memory
  under a fixed name (the connection answers that name only, ``mysql_client.allow_local_file``;
  no file is written). The chunk's warnings are checked before COMMIT: every warning must be
  a duplicate-key skip (their number = rows read − rows inserted), anything else rolls back
  and raises.
* ``insert``: multi-row ``INSERT … ON DUPLICATE KEY UPDATE event_id = event_id`` (a no-op on
  an existing row; unlike INSERT IGNORE it keeps strict mode's errors as errors).
* ``single``: one INSERT per row, committed per chunk — the baseline the bench compares.

Duplicates are no-ops on the ``uq_event_row`` key, so a chunk written twice (a re-run after a
crash) changes nothing: that is the exactly-once half that lives in MySQL. The same makes
retrying a chunk safe after InnoDB picks it as a deadlock victim. Deadlocks are kept rare by
shape: with ``innodb_autoinc_lock_mode=1`` (MariaDB's default) a LOAD DATA statement holds
each partition's table-level AUTO-INC lock to its end, so two statements spanning several
partitions in different orders deadlock; a chunk therefore never crosses an hour boundary
(:func:`hour_chunks`). The same lock makes two LOAD DATA statements into one partition take
turns, which is why the job's ``auto`` method picks multi-row INSERT (a light AUTO-INC
mutex in that mode) for several tasks unless the server runs mode 2 (MySQL 8's default).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa

from pipelines.gold.bulk import BulkInsert
from pipelines.gold.ddl import EVENT_COLUMNS, EVENTS_TABLE
from pipelines.gold.digest import StatementDigests
from pipelines.gold.rows import SILVER_INPUT, sql_rows, sql_values, to_gold, tsv_rows
from pipelines.mysql.client import allow_local_file
from pipelines.mysql.dsn import error_text
from pipelines.vocabulary import quote_ident

__all__ = ["METHODS", "RESULT_DDL", "ExportOptions", "ExportCounts", "export_rows",
           "hour_chunks", "statement_limit", "bulk_insert", "write_chunk", "sum_counts"]

METHODS = ("bulk", "load_data", "insert", "single")
RESULT_DDL = "rows_read long, rows_inserted long, pk_marked long, retries long, seconds double"
_COLS = ", ".join(quote_ident(c) for c in EVENT_COLUMNS)
_INSERT = f"INSERT INTO `{EVENTS_TABLE}` ({_COLS}) VALUES "
_NOOP = " ON DUPLICATE KEY UPDATE event_id = event_id"
_PREPARED = _INSERT + "(" + ", ".join("?" * len(EVENT_COLUMNS)) + ")" + _NOOP
_INSERT_BYTES, _NOOP_BYTES = _INSERT.encode(), _NOOP.encode()
_LOAD = (f"LOAD DATA LOCAL INFILE %s IGNORE INTO TABLE `{EVENTS_TABLE}` CHARACTER SET utf8mb4 "
         "FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' "
         f"({_COLS})")
_CHUNK_NAME = "binlake-gold-chunk.tsv"  # the name LOAD DATA asks for; the body comes from memory


@dataclass(frozen=True)
class ExportOptions:
    """What a task needs (pickled to the engine's workers): the DSN URL, its database,
    the method, the chunk size, each source_id's number in gold (``event_id``) and each
    silver snapshot's (``schema_version``)."""

    dsn_url: str
    database: str
    method: str
    batch_rows: int
    # ((source_id, binlog base), number) of gold's binlake_sources; None: the rows are of one
    # source, number 1 (tests and benches that export without a gold job)
    sources: tuple[tuple[tuple[str, str], int], ...] | None = None
    snapshots: tuple[tuple[str, int], ...] = ()  # silver snapshot id → schema_version

    def __repr__(self) -> str:  # the URL holds the password
        return f"ExportOptions(database={self.database!r}, method={self.method!r}, " \
               f"batch_rows={self.batch_rows})"


@dataclass
class ExportCounts:
    rows_read: int = 0
    rows_inserted: int = 0
    pk_marked: int = 0
    retries: int = 0  # chunks written again after a deadlock / lock wait timeout
    seconds: float = 0.0


def hour_chunks(gold: pa.RecordBatch, max_rows: int):
    """Slices of at most ``max_rows`` rows that never cross an hour (= a partition) boundary,
    each hour's rows in the order they came.

    A batch whose hours already ascend (a binlog's rows in silver's order: nearly always)
    is sliced as it is, without a copy; otherwise it is sorted stably by hour first, so the
    rows of an hour keep their order (silver's, the order of ``uq_event_row``: the server
    appends to that index instead of inserting into the middle of its pages)."""
    import pyarrow.compute as pc

    n = gold.num_rows
    if n == 0:
        return
    ts = EVENT_COLUMNS.index("event_timestamp")
    hours = pc.utf8_slice_codeunits(gold.column(ts), 0, 13)
    cuts = [0]
    if n > 1:
        if not pc.all(pc.less_equal(hours.slice(0, n - 1), hours.slice(1))).as_py():
            order = pc.array_sort_indices(hours)  # stable
            gold, hours = gold.take(order), hours.take(order)
        changed = pc.not_equal(hours.slice(1), hours.slice(0, n - 1))
        cuts += [i + 1 for i in pc.indices_nonzero(changed).to_pylist()]
    cuts.append(n)
    for a, b in zip(cuts, cuts[1:]):
        for off in range(a, b, max_rows):
            yield gold.slice(off, min(max_rows, b - off))


def statement_limit(conn) -> int:
    """The longest ``VALUES`` list one INSERT may carry on ``conn``: the server's
    ``max_allowed_packet`` (4 MB on MySQL 5.7, 16 MB on MariaDB 10.11, 64 MB on MySQL 8)
    less the statement around it."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@SESSION.max_allowed_packet")
        packet = int(cur.fetchone()[0])
    return max(packet - len(_INSERT_BYTES) - len(_NOOP_BYTES) - 1024, 1)


def bulk_insert(conn) -> BulkInsert:
    """The gold INSERT prepared on ``conn`` (a connection made with ``bulk=True`` that
    negotiated bulk operations), once per connection."""
    prepared = getattr(conn, "binlake_bulk_insert", None)
    if prepared is None:
        prepared = conn.binlake_bulk_insert = BulkInsert(conn, _PREPARED, len(EVENT_COLUMNS))
    return prepared


def write_chunk(conn, chunk: pa.RecordBatch, method: str, limit: int | None = None) -> int:
    """Write one chunk of gold values in one transaction; return the rows inserted.

    ``insert`` writes as many statements as keep each within ``limit`` bytes of values
    (:func:`statement_limit`, asked of the server when not given); ``bulk`` as many bulk
    commands (``conn`` made with ``bulk=True``, :func:`bulk_insert`). Raises pymysql errors as
    they come (the caller maps them); for ``load_data`` a warning other than a duplicate-key
    skip rolls the chunk back and raises ValueError.
    """
    n = chunk.num_rows
    if n == 0:
        return 0
    with conn.cursor() as cur:
        if method == "insert":
            limit = statement_limit(conn) if limit is None else limit
            inserted = sum(cur.execute(_INSERT_BYTES + values + _NOOP_BYTES)
                           for values in sql_values(chunk, limit))
        elif method == "bulk":
            limit = statement_limit(conn) if limit is None else limit
            inserted = bulk_insert(conn).write(chunk, limit)
        elif method == "single":
            inserted = 0
            for row in sql_rows(chunk):
                inserted += cur.execute(_INSERT + row + _NOOP)
        elif method == "load_data":
            with allow_local_file(conn, _CHUNK_NAME, tsv_rows(chunk)):
                inserted = cur.execute(_LOAD, (_CHUNK_NAME,))
            cur.execute("SELECT @@warning_count")
            warnings = int(cur.fetchone()[0])
            if warnings > n - inserted:
                cur.execute("SHOW WARNINGS LIMIT 5")
                shown = [f"{r[1]}: {r[2]}" for r in cur.fetchall() if int(r[1]) != 1062]
                conn.rollback()
                raise ValueError("LOAD DATA warnings other than duplicate keys (rolled back): "
                                 + "; ".join(shown))
        else:
            raise ValueError(f"unknown gold export method {method!r}")
    conn.commit()
    return int(inserted)


# InnoDB deadlock / lock wait timeout: concurrent inserts into one unique index take gap
# locks; the chunk was rolled back, and writing it again is safe (duplicates are no-ops).
_RETRY_CODES = (1213, 1205)
_RETRIES = 8


def _write_retrying(conn, chunk: pa.RecordBatch, method: str, dsn,
                    counts: ExportCounts, limit: int) -> int:
    import pymysql

    for attempt in range(_RETRIES + 1):
        try:
            return write_chunk(conn, chunk, method, limit)
        except pymysql.err.MySQLError as exc:
            code = exc.args[0] if exc.args else None
            try:
                conn.rollback()
            except pymysql.err.MySQLError:
                pass
            if code in _RETRY_CODES and attempt < _RETRIES:
                counts.retries += 1
                time.sleep(min(0.05 * 2 ** attempt, 2.0))
                continue
            raise RuntimeError(f"gold export to {dsn}: {error_text(exc, dsn)}") from None
    raise AssertionError("unreachable")


def _task(opts: ExportOptions):
    def run(batches):
        from pipelines.gold.client import connect
        from pipelines.mysql.dsn import Dsn

        started = time.monotonic()
        counts = ExportCounts()
        dsn = Dsn.parse(opts.dsn_url, setting="gold.dsn")
        conn = connect(dsn, local_infile=opts.method == "load_data", autocommit=False,
                       bulk=opts.method == "bulk")
        method = opts.method
        if method == "bulk" and not conn.bulk_operations:
            method = "insert"  # the server did not offer bulk operations
        digests = StatementDigests(conn)
        sources = None if opts.sources is None else dict(opts.sources)
        versions = dict(opts.snapshots)
        try:
            limit = statement_limit(conn)
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                gold, marked = to_gold(batch, digests.lookup, sources, versions)
                counts.rows_read += gold.num_rows
                counts.pk_marked += marked
                for chunk in hour_chunks(gold, opts.batch_rows):
                    counts.rows_inserted += _write_retrying(conn, chunk, method, dsn, counts,
                                                             limit)
        finally:
            conn.close()
        counts.seconds = time.monotonic() - started
        yield pa.RecordBatch.from_pydict(
            {"rows_read": [counts.rows_read], "rows_inserted": [counts.rows_inserted],
             "pk_marked": [counts.pk_marked], "retries": [counts.retries],
             "seconds": [counts.seconds]},
            schema=pa.schema([("rows_read", pa.int64()), ("rows_inserted", pa.int64()),
                              ("pk_marked", pa.int64()), ("retries", pa.int64()),
                              ("seconds", pa.float64())]))

    return run


def export_rows(df, opts: ExportOptions):
    """Pure transform: silver rows → one counts row per task (:data:`RESULT_DDL`).

    Nothing happens until the result is collected; collect it once.
    """
    return df.select(*SILVER_INPUT).mapInArrow(_task(opts), RESULT_DDL)


def sum_counts(rows) -> ExportCounts:
    """Add up the collected per-task rows."""
    out = ExportCounts()
    for r in rows:
        out.rows_read += int(r["rows_read"])
        out.rows_inserted += int(r["rows_inserted"])
        out.pk_marked += int(r["pk_marked"])
        out.retries += int(r["retries"])
        out.seconds = max(out.seconds, float(r["seconds"]))
    return out
