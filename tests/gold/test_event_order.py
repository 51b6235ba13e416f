"""Gold's ``event_id`` follows binlog order (issue 43), end to end: a real MariaDB source runs
key histories (multi-row INSERT, UPDATE, DELETE, re-INSERT of the same keys, many rows per
rows event), ``binlake index`` and ``binlake gold`` (the commands, several export tasks) fill
a gold database on another MariaDB; then

* ordered by ``event_id``, gold's rows are in ``(file number, start_pos, row_in_event)`` order;
* every key's history as bintrail reads it (its ``query --pk`` SQL below, then its sort by
  ``(event_timestamp, event_id)``) is the key's binlog order;
* a re-export (watermark lost) and a later run over new binlogs keep every id and put the new
  rows after the old ones.

On the AUTO_INCREMENT event_id (before issue 43) the rows came out in the order the export
tasks wrote them.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from devtools.mariadb import MariaDBServer
from pipelines.binlog.names import file_number
from pipelines.gold.event_ids import FIRST_ID, event_id

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

# bintrail's `query --schema S --table T --pk P` (internal/query/query.go, buildQuery): the
# narrow key select, then the join back on the primary key; Fetch sorts the rows by
# (event_timestamp, event_id) in Go (sortResults). Copied as facts.
BINTRAIL_PK_QUERY = (
    "SELECT be.event_id, be.binlog_file, be.start_pos, be.end_pos, be.event_timestamp, "
    "be.gtid, be.connection_id, be.schema_name, be.table_name, be.event_type, be.pk_values, "
    "be.changed_columns, be.row_before, be.row_after, be.schema_version, be.query_text, "
    "be.query_hash, be.commit_ts_us FROM binlog_events AS be JOIN (SELECT event_id, "
    "event_timestamp FROM binlog_events WHERE schema_name = %s AND table_name = %s AND "
    "pk_hash = SHA2(%s, 256) AND pk_values = %s) AS k ON be.event_id = k.event_id AND "
    "be.event_timestamp = k.event_timestamp")


def _workload(server: MariaDBServer, first_key: int, keys: int) -> None:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS shop")
        cur.execute("CREATE TABLE IF NOT EXISTS shop.products (id INT PRIMARY KEY, "
                    "qty INT NOT NULL, note VARCHAR(40))")
        ids = range(first_key, first_key + keys)
        values = ", ".join(f"({i}, {i % 7}, 'n{i}')" for i in ids)
        lo, hi = first_key, first_key + keys - 1
        cur.execute(f"INSERT INTO shop.products VALUES {values}")  # many rows per event
        conn.commit()
        cur.execute(f"UPDATE shop.products SET qty = qty + 1 WHERE id BETWEEN {lo} AND {hi}")
        cur.execute(f"DELETE FROM shop.products WHERE id BETWEEN {lo} AND {hi} AND id % 2 = 0")
        conn.commit()
        cur.execute(f"INSERT INTO shop.products SELECT id + 0, 100, 'again' FROM "
                    f"(SELECT seq AS id FROM shop.seq_{lo}_to_{hi} WHERE seq % 2 = 0) s")
        cur.execute(f"UPDATE shop.products SET note = CONCAT(note, '!') "
                    f"WHERE id BETWEEN {lo} AND {hi}")
        conn.commit()


def _gold_rows(mariadb, db: str) -> list[tuple]:
    return [(str(s), str(f), int(p), int(e), int(r), str(k), t, int(i))
            for s, f, p, e, r, k, t, i in mariadb.execute(
                "SELECT source_id, binlog_file, start_pos, end_pos, row_in_event, pk_values, "
                "event_timestamp, event_id FROM binlog_events", db=db)]


def _binlog_key(row: tuple) -> tuple:
    _, f, p, _, r, _, _, _ = row
    return (file_number(f), p, r)


def _assert_binlog_order(rows: list[tuple]) -> None:
    by_id = sorted(rows, key=lambda r: r[-1])
    wrong = sum(1 for a, b in zip(by_id, by_id[1:]) if _binlog_key(a) >= _binlog_key(b))
    assert wrong == 0, f"{wrong} of {len(rows)} rows out of binlog order by event_id"
    histories = defaultdict(list)
    for row in rows:
        histories[row[5]].append(row)
    bad = [k for k, h in histories.items()
           if sorted(h, key=lambda r: (r[6], r[7])) != sorted(h, key=_binlog_key)]
    assert not bad, f"{len(bad)} of {len(histories)} keys' histories out of binlog order"


def _binlake(*args: str) -> None:
    from pipelines.cli.main import main

    assert main(list(args)) == 0


def test_event_id_follows_binlog_order_across_tasks_runs_and_re_exports(
        spark, mariadb, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BINLAKE_GOLD_PARALLELISM", "3")
    monkeypatch.setenv("BINLAKE_GOLD_BATCH_ROWS", "64")
    db = "gold_order_" + uuid.uuid4().hex[:8]
    dsn = mariadb.dsn(db)
    lake, binlogs = str(tmp_path / "lake"), tmp_path / "binlogs"
    with MariaDBServer() as source:
        _workload(source, 1, 1200)
        copied = source.copy_closed_binlogs(binlogs)
        _binlake("--lake", lake, "index", "--binlog-dir", str(binlogs), "--all")
        _binlake("--lake", lake, "gold", "--gold-dsn", dsn)
        first = _gold_rows(mariadb, db)
        assert len(first) == 1200 * 4 and max(r[4] for r in first) > 100
        _assert_binlog_order(first)
        assert all(r[-1] == event_id(1, r[1], r[2], r[3], r[4]) >= FIRST_ID for r in first)

        # bintrail's own SQL for one key, sorted as bintrail sorts: INSERT, UPDATE, DELETE,
        # INSERT, UPDATE
        got = mariadb.execute(BINTRAIL_PK_QUERY, ("shop", "products", "228", "228"), db=db)
        got = sorted(got, key=lambda r: (r[4], r[0]))
        assert [int(r[9]) for r in got] == [1, 2, 3, 1, 2]

        # The watermark lost: the whole of silver again, every row a no-op, every id kept.
        mariadb.execute("UPDATE binlake_export_state SET silver_version = -1, "
                        "silver_table_id = NULL", db=db)
        _binlake("--lake", lake, "gold", "--gold-dsn", dsn)
        assert sorted(_gold_rows(mariadb, db)) == sorted(first)

        # New binlogs: their rows come after every earlier one.
        _workload(source, 5000, 300)
        source.copy_closed_binlogs(binlogs, first=copied[-1].name)
        _binlake("--lake", lake, "index", "--binlog-dir", str(binlogs), "--all")
        _binlake("--lake", lake, "gold", "--gold-dsn", dsn)
    rows = _gold_rows(mariadb, db)
    assert len(rows) == len(first) + 300 * 4
    _assert_binlog_order(rows)
    old = {r[:5] for r in first}
    assert min(r[-1] for r in rows if r[:5] not in old) > max(r[-1] for r in first)
