"""``binlake stream --mirror`` (issue 12 §1): the stream follows a live MariaDB and brings the
typed mirror tables up to date after silver, across an ALTER, with no other command.

A throwaway MariaDB 10.11; ``binlake snapshot`` then ``binlake stream --mirror`` as
subprocesses (the DSN, with its password, only in the environment). Inserts, updates, a
delete, an ``ALTER TABLE … ADD COLUMN`` (the stream snapshots the schema after it) and more
changes; the mirror's current table must come to equal the server's ``SELECT``, typed, and
the history hold each key's versions. SIGTERM stops the stream cleanly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from devtools.mariadb import MariaDBServer

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

ROOT = Path(__file__).resolve().parents[2]
DDL = """CREATE TABLE feed.acct (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  amount DECIMAL(12,4) NOT NULL,
  label VARCHAR(20) CHARACTER SET latin1 NULL,
  opened DATE NULL
) ENGINE=InnoDB"""


def _env(server: MariaDBServer) -> dict[str, str]:
    env = dict(os.environ, BINLAKE_SOURCE_DSN=server.dsn(), PYTHONPATH=str(ROOT),
               BINLAKE_STREAM_BATCH_INTERVAL_MS="200", BINLAKE_STREAM_SILVER_LAG_SECONDS="1")
    env.pop("BINLAKE_CONF", None)
    return env


def _server_rows(server: MariaDBServer) -> list[tuple]:
    rows = server.execute("SELECT id, amount, label, CAST(opened AS CHAR), region "
                          "FROM feed.acct ORDER BY id")
    return [(int(r[0]), Decimal(r[1]), r[2], r[3], r[4]) for r in rows]


def _mirror_rows(spark, lake: Path) -> list[tuple] | None:
    path = lake / "mirror" / "feed" / "acct"
    if not (path / "_delta_log").is_dir():
        return None
    df = spark.read.format("delta").load(str(path))
    if "region" not in df.columns:
        return None
    return sorted((int(r["id"]), r["amount"], r["label"],
                   r["opened"].isoformat() if r["opened"] else None, r["region"])
                  for r in df.collect())


def test_stream_mirror_follows_the_server_across_an_alter(spark, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    log = tmp_path / "stream.log"
    with MariaDBServer(binlog_row_metadata="FULL") as server:
        server.execute("CREATE DATABASE feed")
        server.execute(DDL)
        env = _env(server)
        snap = subprocess.run([sys.executable, "-m", "pipelines.cli.main", "--lake", str(lake),
                               "snapshot"], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
        assert snap.returncode == 0, snap.stdout + snap.stderr
        proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli.main", "--lake", str(lake),
                                 "stream", "--server-id", "4243", "--mirror"], cwd=ROOT,
                                env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        try:
            with server.connect() as conn, conn.cursor() as cur:
                cur.executemany("INSERT INTO feed.acct VALUES (%s, %s, %s, %s)",
                                [(2 ** 64 - i, f"{i}.{i:04d}", f"caf\u00e9 {i}",
                                  f"2024-01-{i:02d}") for i in range(1, 21)])
                cur.execute("UPDATE feed.acct SET amount = amount * 3 WHERE id > %s",
                            (2 ** 64 - 6,))
                cur.execute("DELETE FROM feed.acct WHERE id = %s", (2 ** 64 - 20,))
                cur.execute("ALTER TABLE feed.acct ADD COLUMN region VARCHAR(10) NULL")
                cur.execute("UPDATE feed.acct SET region = 'eu' WHERE id > %s", (2 ** 64 - 4,))
                cur.execute("INSERT INTO feed.acct VALUES (7, '-0.5000', NULL, NULL, 'us')")
            want = _server_rows(server)
            deadline = time.monotonic() + 180
            while _mirror_rows(spark, lake) != want:
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, (
                    f"mirror never equalled the server:\n{_mirror_rows(spark, lake)}\n{want}\n"
                    + log.read_text()[-3000:])
                time.sleep(0.5)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(60)
            finally:
                if proc.poll() is None:
                    proc.kill()
        assert rc == 0, log.read_text()[-3000:]
    assert server.dsn().split("@")[0].split(":")[-1] not in log.read_text()  # no password

    current = spark.read.format("delta").load(str(lake / "mirror" / "feed" / "acct"))
    types = {f.name: f.dataType.simpleString() for f in current.schema.fields}
    assert types == {"id": "decimal(20,0)", "amount": "decimal(12,4)", "label": "string",
                     "opened": "date", "region": "string", "__seq": "bigint",
                     "__gtid": "string", "__event_timestamp": "timestamp"}
    hist = spark.read.format("delta").load(str(lake / "mirror_history" / "feed" / "acct"))
    # key 2^64-1: INSERT, the amount UPDATE, the region UPDATE; only the last is open
    one = sorted((r["__START_AT"], r["__END_AT"], r["__event_type"], r["region"])
                 for r in hist.where(f"id = {2 ** 64 - 1}").collect())
    assert [(t, reg) for _, _, t, reg in one] == [("INSERT", None), ("UPDATE", None),
                                                   ("UPDATE", "eu")]
    assert [e for _, e, _, _ in one][2] is None and all(e is not None for _, e, _, _ in one[:2])
    # each version ends where the next starts
    assert one[0][1] == one[1][0] and one[1][1] == one[2][0]
    # the deleted key: its one version closed, gone from the current table
    gone = hist.where(f"id = {2 ** 64 - 20}").collect()
    assert len(gone) == 1 and gone[0]["__END_AT"] is not None
    assert current.where(f"id = {2 ** 64 - 20}").count() == 0
