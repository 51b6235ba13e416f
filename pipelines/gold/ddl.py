"""Gold objects in MySQL/MariaDB: ``binlog_events`` (bintrail-compatible, hourly partitions),
``schema_snapshots``, ``binlake_export_state``, ``binlake_sources`` (the source numbers in
``event_id``, ``event_ids.py``); and hourly partition management.

The DDL sticks to what MySQL 8.0/8.4 and MariaDB 10.6+ both accept: a STORED generated
column, JSON columns (MariaDB: LONGTEXT with a ``json_valid`` CHECK, text kept verbatim),
``PARTITION BY RANGE (TO_SECONDS(event_timestamp))``, and ``REORGANIZE PARTITION`` to add
partitions (``ADD PARTITION`` cannot go below ``p_future`` / above MAXVALUE).

Partition ``p_YYYYMMDDHH`` holds the hour starting then: ``VALUES LESS THAN
(TO_SECONDS(<the next hour>))``, as bintrail names them; ``p_future`` (MAXVALUE) catches the
rest and stays empty because partitions are added ahead of every export. RANGE partitions are
open below, so the oldest hourly partition also holds anything older than its hour.

Partition planning (:func:`plan_partitions`) is pure; :func:`apply_plan` runs the DDL.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from pipelines.gold.event_ids import (FIRST_ID, MAX_SOURCES, EventIdError, SourceKey,
                                      binlog_base, binlog_base_sql, event_id_sql)
from pipelines.vocabulary import DELETE, INSERT, UPDATE, quote_ident

__all__ = [
    "EVENTS_TABLE", "SNAPSHOTS_TABLE", "STATE_TABLE", "SOURCES_TABLE", "EVENT_COLUMNS",
    "EVENT_TYPE_CODES", "CREATE_SOURCES", "source_numbers", "renumber_events", "BINTRAIL_TYPES",
    "match_bintrail_types",
    "MAX_PARTITIONS", "Partition", "PartitionPlan", "hour_floor", "partition_name",
    "partition_hour", "partition_clause", "create_events_sql",
    "CREATE_STATE", "ADDED_COLUMNS", "add_missing_columns", "read_partitions",
    "plan_partitions", "apply_plan", "utc_now",
]

EVENTS_TABLE = "binlog_events"
SNAPSHOTS_TABLE = "schema_snapshots"
STATE_TABLE = "binlake_export_state"
SOURCES_TABLE = "binlake_sources"
FUTURE = "p_future"
# MySQL allows 8192 partitions per table (p_future included); keep a margin for rotate's
# top-up between exports.
MAX_PARTITIONS = 8000
EVENT_TYPE_CODES = {INSERT: 1, UPDATE: 2, DELETE: 3}

# The columns an export writes, in order (pk_hash is generated). event_id is computed from
# the row's binlog coordinates (event_ids.py); the column stays AUTO_INCREMENT, as bintrail
# declares it, so a row written without one (by hand, by another tool) still gets one.
EVENT_COLUMNS = (
    "event_id", "source_id", "binlog_file", "start_pos", "end_pos", "row_in_event", "event_timestamp",
    "gtid", "connection_id", "schema_name", "table_name", "event_type", "pk_values",
    "changed_columns", "row_before", "row_after", "schema_version",
    "query_text", "query_hash", "commit_ts_us",
)
# dbtrail's later columns (its indexer adds them to older tables the same way, after
# schema_version): name → definition. query_hash is STATEMENT_DIGEST(query_text) computed
# on the gold connection at export (gold/digest.py); NULL where the server has no such
# function (MariaDB) or the text does not parse.
ADDED_COLUMNS = (
    ("query_text", "MEDIUMTEXT DEFAULT NULL COMMENT 'statement from ROWS_QUERY/ANNOTATE_ROWS; "
                   "NULL unless binlog_rows_query_log_events / binlog_annotate_row_events'"),
    ("query_hash", "CHAR(64) DEFAULT NULL COMMENT 'STATEMENT_DIGEST(query_text) on the gold "
                   "connection at export'"),
    ("commit_ts_us", "BIGINT UNSIGNED DEFAULT NULL COMMENT 'commit time, microseconds since "
                     "the epoch (MySQL 8 GTID immediate_commit_timestamp); NULL on MariaDB'"),
)

# bintrail's binlog_events plus what exactly-once needs: source_id and row_in_event, and the
# UNIQUE key uq_event_row naming one row change (it must include the partitioning column).
# Widened from bintrail: pk_values NULL (tables without a primary key). schema_version is
# bintrail's INT: schema_snapshots.snapshot_id, the gold number of a silver snapshot
# (snapshots.py); connection_id bintrail's INT UNSIGNED (a binlog's pseudo_thread_id is 4
# bytes, so silver's BIGINT values fit).
_EVENTS_BODY = """(
    event_id        BIGINT UNSIGNED  NOT NULL AUTO_INCREMENT,
    source_id       VARCHAR(64)      NOT NULL DEFAULT 'default' COMMENT 'binlake source.name',
    binlog_file     VARCHAR(255)     NOT NULL,
    start_pos       BIGINT UNSIGNED  NOT NULL,
    end_pos         BIGINT UNSIGNED  NOT NULL,
    row_in_event    INT UNSIGNED     NOT NULL DEFAULT 0 COMMENT '0-based row index in its rows event',
    event_timestamp DATETIME         NOT NULL,
    gtid            VARCHAR(255)     DEFAULT NULL,
    connection_id   INT UNSIGNED     DEFAULT NULL COMMENT 'pseudo_thread_id of the transaction''s BEGIN',
    schema_name     VARCHAR(64)      NOT NULL,
    table_name      VARCHAR(64)      NOT NULL,
    event_type      TINYINT UNSIGNED NOT NULL COMMENT '1=INSERT, 2=UPDATE, 3=DELETE',
    pk_values       VARCHAR(512)     DEFAULT NULL COMMENT 'silver pk_values; over 512 chars: prefix, backslash-hash, sha256 of the full value',
    pk_hash         VARCHAR(64)      AS (SHA2(pk_values, 256)) STORED,
    changed_columns JSON             DEFAULT NULL,
    row_before      JSON             DEFAULT NULL,
    row_after       JSON             DEFAULT NULL,
    schema_version  INT UNSIGNED     NOT NULL DEFAULT 0 COMMENT 'schema_snapshots.snapshot_id; 0 = named from the binlog',
""" + "".join(f"    {name:<15} {definition},\n" for name, definition in ADDED_COLUMNS) + """\
    PRIMARY KEY (event_id, event_timestamp),
    UNIQUE KEY uq_event_row (source_id, binlog_file, start_pos, row_in_event, event_timestamp),
    INDEX idx_row_lookup (schema_name, table_name, event_timestamp),
    INDEX idx_pk_hash    (schema_name, table_name, pk_hash, event_timestamp),
    INDEX idx_gtid       (gtid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""

# The number each (source_id, binlog base name) has in this gold database's event_ids
# (event_ids.py): assigned once, 1 up, never reused; a database filled again from scratch
# numbers afresh.
CREATE_SOURCES = f"""CREATE TABLE IF NOT EXISTS {quote_ident(SOURCES_TABLE)} (
    source_number TINYINT UNSIGNED NOT NULL PRIMARY KEY COMMENT 'top bits of event_id',
    source_id     VARCHAR(64)      NOT NULL,
    binlog_base   VARCHAR(255)     NOT NULL COMMENT 'binlog name before .NNNNNN',
    UNIQUE KEY uq_source_binlogs (source_id, binlog_base)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""

# One row per exported Delta table. silver_version is the watermark: every row of that
# silver version is in gold. rotated_before: rows older than this were rotated away and are
# never exported again.
CREATE_STATE = f"""CREATE TABLE IF NOT EXISTS {quote_ident(STATE_TABLE)} (
    export_name     VARCHAR(64)     NOT NULL PRIMARY KEY,
    silver_table_id VARCHAR(64)     DEFAULT NULL COMMENT 'Delta table id the watermark refers to',
    silver_path     VARCHAR(1024)   DEFAULT NULL,
    silver_version  BIGINT          NOT NULL DEFAULT -1 COMMENT 'watermark: this version is fully in gold',
    target_version  BIGINT          DEFAULT NULL COMMENT 'version of the run in progress',
    status          VARCHAR(16)     NOT NULL DEFAULT 'never' COMMENT 'never, running, completed, failed',
    last_rows_read  BIGINT UNSIGNED NOT NULL DEFAULT 0,
    last_rows_inserted BIGINT UNSIGNED NOT NULL DEFAULT 0,
    last_pk_marked  BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'pk_values over 512 chars stored marked',
    last_method     VARCHAR(16)     DEFAULT NULL,
    rotated_before  DATETIME        DEFAULT NULL,
    started_at      DATETIME        DEFAULT NULL,
    finished_at     DATETIME        DEFAULT NULL,
    error           TEXT            DEFAULT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""


def utc_now() -> dt.datetime:
    """The current UTC time as a naive datetime (gold's DATETIME convention)."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def hour_floor(t: dt.datetime) -> dt.datetime:
    if t.tzinfo is not None:
        t = t.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return t.replace(minute=0, second=0, microsecond=0)


def partition_name(hour: dt.datetime) -> str:
    return hour.strftime("p_%Y%m%d%H")


_NAME = re.compile(r"^p_(\d{10})$")


def partition_hour(name: str) -> dt.datetime | None:
    """The hour a ``p_YYYYMMDDHH`` partition holds; None for ``p_future`` and other names."""
    m = _NAME.match(name)
    if not m:
        return None
    try:
        return dt.datetime.strptime(m.group(1), "%Y%m%d%H")
    except ValueError:
        return None


def partition_clause(hour: dt.datetime) -> str:
    nxt = hour + dt.timedelta(hours=1)
    return (f"PARTITION {partition_name(hour)} VALUES LESS THAN "
            f"(TO_SECONDS('{nxt:%Y-%m-%d %H:%M:%S}'))")


def _future_clause() -> str:
    return f"PARTITION {FUTURE} VALUES LESS THAN MAXVALUE"


# bintrail's types of columns an older binlake declared otherwise: column → (its
# information_schema DATA_TYPE, the definition). schema_version's values must already be
# numbers (snapshots.migrate runs first).
BINTRAIL_TYPES = (
    ("connection_id", "int", "INT UNSIGNED DEFAULT NULL COMMENT 'pseudo_thread_id of the "
                             "transaction''s BEGIN'"),
    ("schema_version", "int", "INT UNSIGNED NOT NULL DEFAULT 0 COMMENT "
                              "'schema_snapshots.snapshot_id; 0 = named from the binlog'"),
)


def match_bintrail_types(conn, database: str) -> list[str]:
    """Give :data:`BINTRAIL_TYPES` to the columns of a ``binlog_events`` made before them, in
    one ``ALTER TABLE`` (one rebuild of the table); idempotent. Returns the columns changed."""
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (database, EVENTS_TABLE))
        have = {str(c).lower(): str(t).lower() for c, t in cur.fetchall()}
        todo = [(name, definition) for name, kind, definition in BINTRAIL_TYPES
                if name in have and have[name] != kind]
        if todo:
            cur.execute(f"ALTER TABLE {quote_ident(EVENTS_TABLE)} " + ", ".join(
                f"MODIFY {quote_ident(name)} {definition}" for name, definition in todo))
    return [name for name, _ in todo]


def add_missing_columns(conn, database: str) -> list[str]:
    """Add :data:`ADDED_COLUMNS` a ``binlog_events`` made before them lacks (idempotent:
    a column another process added meanwhile, error 1060, counts as there); return the
    names added."""
    import pymysql

    added = []
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (database, EVENTS_TABLE))
        have = {str(r[0]).lower() for r in cur.fetchall()}
        after = "schema_version"
        for name, definition in ADDED_COLUMNS:
            if name not in have:
                try:
                    cur.execute(f"ALTER TABLE {quote_ident(EVENTS_TABLE)} ADD COLUMN "
                                f"{quote_ident(name)} {definition} AFTER {quote_ident(after)}")
                    added.append(name)
                except pymysql.err.OperationalError as exc:
                    if not exc.args or exc.args[0] != 1060:  # ER_DUP_FIELDNAME
                        raise
            after = name
    return added


def source_numbers(conn, keys) -> dict[SourceKey, int]:
    """Every ``(source_id, binlog base)`` of ``binlake_sources`` with its number, ``keys``
    numbered after the highest when new (committed on ``conn``). Raises EventIdError past
    :data:`~pipelines.gold.event_ids.MAX_SOURCES`. Callers hold the gold lock, so two
    exports never number at once (a race would fail on the primary key, not reuse one)."""
    t = quote_ident(SOURCES_TABLE)
    with conn.cursor() as cur:
        cur.execute(f"SELECT source_id, binlog_base, source_number FROM {t}")
        have = {(str(s), str(b)): int(n) for s, b, n in cur.fetchall()}
        new = sorted({(str(s), str(b)) for s, b in keys} - set(have))
        for key in new:
            number = max(have.values(), default=0) + 1
            if number > MAX_SOURCES:
                raise EventIdError(f"gold's event_id holds {MAX_SOURCES} sources; source_id "
                                   f"{key[0]!r} with binlogs {key[1]!r} would be the "
                                   f"{number}th ({SOURCES_TABLE})")
            cur.execute(f"INSERT INTO {t} (source_number, source_id, binlog_base) "
                        "VALUES (%s, %s, %s)", (number, *key))
            have[key] = number
    if new:
        conn.commit()
    return have


def renumber_events(conn) -> int:
    """Give the rows a ``binlog_events`` numbered by AUTO_INCREMENT (binlake before computed ids,
    or rows written without an id) their computed ``event_id`` (``event_ids.py``); idempotent
    (only ids below :data:`~pipelines.gold.event_ids.FIRST_ID` change). Returns the rows
    renumbered."""
    t = quote_ident(EVENTS_TABLE)
    with conn.cursor() as cur:
        cur.execute(f"SELECT DISTINCT source_id, binlog_file FROM {t} WHERE event_id < %s",
                    (FIRST_ID,))
        keys = {(str(s), binlog_base(str(f))) for s, f in cur.fetchall()}
    if not keys:
        return 0
    source_numbers(conn, keys)
    with conn.cursor() as cur:
        n = cur.execute(f"UPDATE {t} e JOIN {quote_ident(SOURCES_TABLE)} s ON s.source_id = "
                        f"e.source_id AND s.binlog_base = {binlog_base_sql('e.binlog_file')} "
                        f"SET e.event_id = {event_id_sql('s.source_number')} "
                        f"WHERE e.event_id < %s", (FIRST_ID,))
    conn.commit()
    return int(n)


def create_events_sql(first_hour: dt.datetime, count: int) -> str:
    """``CREATE TABLE IF NOT EXISTS binlog_events`` with ``count`` hours from ``first_hour``."""
    hours = [first_hour + dt.timedelta(hours=i) for i in range(count)]
    parts = ",\n    ".join([partition_clause(h) for h in hours] + [_future_clause()])
    return (f"CREATE TABLE IF NOT EXISTS {quote_ident(EVENTS_TABLE)} {_EVENTS_BODY}\n"
            f"PARTITION BY RANGE (TO_SECONDS(event_timestamp)) (\n    {parts}\n)")


@dataclass(frozen=True)
class Partition:
    name: str
    hour: dt.datetime | None  # None for p_future
    estimated_rows: int


def read_partitions(conn, database: str) -> list[Partition]:
    """``binlog_events``' partitions in order, with InnoDB's estimated row counts."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT PARTITION_NAME, TABLE_ROWS FROM information_schema.PARTITIONS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND PARTITION_NAME IS NOT NULL "
            "ORDER BY PARTITION_ORDINAL_POSITION", (database, EVENTS_TABLE))
        return [Partition(str(n), partition_hour(str(n)), int(r or 0)) for n, r in cur.fetchall()]


@dataclass(frozen=True)
class PartitionPlan:
    """Hours to split off the oldest hourly partition (``below``) and off ``p_future``
    (``above``), each ascending."""

    below: list[dt.datetime] = field(default_factory=list)
    above: list[dt.datetime] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.below or self.above)


def plan_partitions(existing: list[dt.datetime], lo: dt.datetime, hi: dt.datetime, *,
                    floor: dt.datetime | None = None,
                    max_partitions: int = MAX_PARTITIONS) -> PartitionPlan:
    """Partitions to add so every hour in ``[lo, hi]`` has its own partition.

    ``existing``: the hourly partitions' hours, ascending. Hours after the newest existing
    one are split off ``p_future`` (starting at ``lo`` when ``lo`` is later: the empty hours
    between need no partition of their own); hours before the oldest are split off it, never
    below ``floor`` (rotated away). The total stays within ``max_partitions`` (``p_future``
    counted): when the span is wider, its oldest hours share the oldest partition.
    """
    lo, hi = hour_floor(lo), hour_floor(hi)
    if floor is not None:
        lo = max(lo, hour_floor(floor))
    if hi < lo:
        return PartitionPlan()
    room = max_partitions - len(existing) - 1
    above: list[dt.datetime] = []
    below: list[dt.datetime] = []
    start = lo if not existing else max(existing[-1] + dt.timedelta(hours=1), lo)
    h = start
    while h <= hi:
        above.append(h)
        h += dt.timedelta(hours=1)
    above = above[max(0, len(above) - room):] if room > 0 else []
    room -= len(above)
    if existing and lo < existing[0]:
        h = existing[0] - dt.timedelta(hours=1)
        while h >= lo and room > 0:
            below.append(h)
            room -= 1
            h -= dt.timedelta(hours=1)
        below.reverse()
    return PartitionPlan(below=below, above=above)


def apply_plan(conn, plan: PartitionPlan, existing: list[dt.datetime]) -> None:
    """Run ``plan`` as at most two ``ALTER TABLE … REORGANIZE PARTITION`` statements."""
    table = quote_ident(EVENTS_TABLE)
    with conn.cursor() as cur:
        if plan.below:
            first = existing[0]
            parts = [partition_clause(h) for h in plan.below] + [partition_clause(first)]
            cur.execute(f"ALTER TABLE {table} REORGANIZE PARTITION {partition_name(first)} "
                        f"INTO ({', '.join(parts)})")
        if plan.above:
            parts = [partition_clause(h) for h in plan.above] + [_future_clause()]
            cur.execute(f"ALTER TABLE {table} REORGANIZE PARTITION {FUTURE} "
                        f"INTO ({', '.join(parts)})")
