"""Acceptance of gold over a real server's binlogs: a MariaDB 10.11 runs the mixed workload
(every common type, unsigned extremes, DDL), binlake indexes its binlogs (bronze → silver),
then exports to a gold database on the same server: gold holds every silver row once,
``pk_hash = SHA2(pk_values, 256)`` on the server, partitions hourly with an empty
``p_future``, and a second export adds nothing."""

from __future__ import annotations

import pytest

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.gold.job import run_gold
from pipelines.silver.job import run_silver
from tests.support.mariadb import MariaDBServer
from tests.support.workload import run_mixed_workload

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]


def test_index_then_gold_over_a_real_server(spark, tmp_path) -> None:
    with MariaDBServer(binlog_row_metadata="FULL") as server:
        with server.connect() as conn:
            run_mixed_workload(conn)
        server.flush_logs()
        cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake"),
                                             "gold.dsn": server.dsn("gold_accept")})
        run_bronze(spark, cfg, binlog_dir=str(server.binlog_dir), all_files=True)
        run_silver(spark, cfg)
        silver = spark.read.format("delta").load(cfg.table_path("silver", "binlog_events"))
        n = silver.count()
        assert n >= 300

        res = run_gold(spark, cfg)
        assert (res.rows_read, res.rows_inserted) == (n, n)
        db = "gold_accept"
        total, distinct, bad_hash, p_future = server.execute(
            "SELECT COUNT(*), COUNT(DISTINCT source_id, binlog_file, start_pos, row_in_event), "
            "SUM(NOT (pk_hash <=> SHA2(pk_values, 256))), "
            "(SELECT COUNT(*) FROM binlog_events PARTITION (p_future)) FROM binlog_events",
            db=db)[0]
        assert (total, distinct, int(bad_hash), p_future) == (n, n, 0, 0)
        misplaced = server.execute(
            "SELECT COUNT(*) FROM information_schema.PARTITIONS p JOIN binlog_events e "
            "ON DATE_FORMAT(e.event_timestamp, 'p_%%Y%%m%%d%%H') = p.PARTITION_NAME "
            "WHERE p.TABLE_SCHEMA = %s AND p.TABLE_NAME = 'binlog_events'", (db,), db=db)[0][0]
        assert misplaced == n  # every row's hour has its partition
        # silver's JSON text arrives byte for byte
        silver_json = {(r["binlog_file"], r["start_pos"], r["row_in_event"]):
                       (r["row_before"], r["row_after"], r["pk_values"])
                       for r in silver.collect()}
        gold_json = {(f, int(s), int(i)): (b, a, p) for f, s, i, b, a, p in server.execute(
            "SELECT binlog_file, start_pos, row_in_event, row_before, row_after, pk_values "
            "FROM binlog_events", db=db)}
        assert gold_json == silver_json

        again = run_gold(spark, cfg)
        assert again.rows_inserted == 0 and again.mode == "none"
        assert server.execute("SELECT COUNT(*) FROM binlog_events", db=db)[0][0] == n
