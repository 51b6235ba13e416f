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
from devtools.mariadb import MariaDBServer
from tests.support.scenarios import assert_gold_equals_silver
from devtools.mixed_workload import run_mixed_workload

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]


def test_index_then_gold_over_a_real_server(spark, tmp_path) -> None:
    with MariaDBServer(binlog_row_metadata="FULL") as server:
        with server.connect() as conn:
            run_mixed_workload(conn)
        server.flush_logs()
        cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake"),
                                             "gold.dsn": server.dsn("gold_accept"),
                                             "bronze.statement_text": True})
        run_bronze(spark, cfg, binlog_dir=str(server.binlog_dir), all_files=True)
        run_silver(spark, cfg)
        silver = spark.read.format("delta").load(cfg.table_path("silver", "binlog_events"))
        n = silver.count()
        assert n >= 300

        res = run_gold(spark, cfg)
        assert (res.rows_read, res.rows_inserted) == (n, n)
        assert_gold_equals_silver(server, "gold_accept", [r.asDict() for r in silver.collect()])

        again = run_gold(spark, cfg)
        assert again.rows_inserted == 0 and again.mode == "none"
        assert server.execute("SELECT COUNT(*) FROM binlog_events", db="gold_accept")[0][0] == n
