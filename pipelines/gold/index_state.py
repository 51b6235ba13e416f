"""bintrail's ``index_state`` in gold: one row per binlog file, kept true by every export.

``bintrail status`` requires the table (``internal/status``: ``LoadIndexState`` selects
``binlog_file, status, events_indexed, file_size, last_position, started_at, completed_at,
error_message, bintrail_id`` and fails without it; its partition section reads
``information_schema.PARTITIONS`` of ``binlog_events``, which gold already has). The columns
and types here are bintrail's.

What binlake writes (gold has no file sizes; it knows the rows it holds): after a run, for
each binlog file the run exported rows of, ``events_indexed`` = the row changes of that file
gold holds (all sources; fewer after ``binlake rotate`` dropped hours), ``last_position`` =
the largest ``end_pos`` among them, ``file_size`` the same (the extent gold covers), ``status``
``completed``, ``started_at`` the first run that wrote the file, ``completed_at`` the latest.
Counted on ``uq_event_row``'s ``(source_id, binlog_file, …)`` prefix, so each file costs an
index range scan, not a table scan.
"""

from __future__ import annotations

import datetime as dt
from typing import Iterable

from pipelines.gold.ddl import EVENTS_TABLE, utc_now
from pipelines.vocabulary import quote_ident

__all__ = ["INDEX_STATE_TABLE", "CREATE_INDEX_STATE", "refresh"]

INDEX_STATE_TABLE = "index_state"
_T = quote_ident(INDEX_STATE_TABLE)

CREATE_INDEX_STATE = f"""CREATE TABLE IF NOT EXISTS {_T} (
    binlog_file    VARCHAR(255) PRIMARY KEY,
    file_size      BIGINT UNSIGNED NOT NULL,
    last_position  BIGINT UNSIGNED NOT NULL COMMENT 'last parsed position',
    events_indexed BIGINT UNSIGNED NOT NULL DEFAULT 0,
    status         ENUM('in_progress','completed','failed') NOT NULL,
    started_at     DATETIME NOT NULL,
    completed_at   DATETIME DEFAULT NULL,
    error_message  TEXT     DEFAULT NULL,
    bintrail_id    CHAR(36) NULL DEFAULT NULL,
    INDEX idx_bintrail_id (bintrail_id)
) ENGINE=InnoDB"""


def refresh(conn, source_ids: Iterable[str], files: Iterable[str],
            started_at: dt.datetime) -> int:
    """Rewrite the ``index_state`` rows of ``files`` from what gold holds of them
    (``source_ids``: every source gold numbers); commits; returns the rows written."""
    sources = sorted(set(source_ids))
    names = sorted(set(files))
    if not sources or not names:
        return 0
    ev = quote_ident(EVENTS_TABLE)
    marks = ", ".join(["%s"] * len(sources))
    now = utc_now()
    written = 0
    with conn.cursor() as cur:
        for name in names:
            where = f"WHERE source_id IN ({marks}) AND binlog_file = %s"
            cur.execute(f"SELECT COUNT(*), MAX(start_pos) FROM {ev} {where}", (*sources, name))
            count, start = cur.fetchone()  # both from the index alone
            last = 0
            if start is not None:
                cur.execute(f"SELECT MAX(end_pos) FROM {ev} {where} AND start_pos = %s",
                            (*sources, name, start))
                last = cur.fetchone()[0]
            cur.execute(
                f"INSERT INTO {_T} (binlog_file, file_size, last_position, events_indexed, "
                "status, started_at, completed_at) VALUES (%s, %s, %s, %s, 'completed', %s, %s) "
                "ON DUPLICATE KEY UPDATE file_size = VALUES(file_size), last_position = "
                "VALUES(last_position), events_indexed = VALUES(events_indexed), "
                "status = 'completed', completed_at = VALUES(completed_at), error_message = NULL",
                (name, int(last or 0), int(last or 0), int(count or 0), started_at, now))
            written += 1
    conn.commit()
    return written
