"""``conf/spark-submit.sh`` run as users run it: local JVM Spark with delta-spark, every stage.

The script submits bronze → silver → quality → gold → optimize over the shipped sample binlogs,
gold into a throwaway MariaDB (its DSN only in the environment). Delta comes from the jar
cache ``make setup`` fills (``.venv/delta-jars``) when present, else from Maven through Ivy.
Checked from outside the engine: silver's rows read with delta-rs, gold's with SQL on the
server, and the OPTIMIZE that delta-spark itself ran (``via sql``) recorded in silver's log.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "binlogs"
# A small lake on a 2-core machine: Delta's 50 snapshot partitions and 200 shuffle partitions
# cost more than the work; the log at WARN.
SMALL = ("--conf spark.sql.shuffle.partitions=4 --conf spark.databricks.delta.snapshotPartitions=2 "
         "--conf spark.ui.enabled=false --conf spark.log.level=WARN")


def _spark_env(tmp_path: Path) -> dict[str, str]:
    import pyspark

    env = dict(os.environ)
    env["SPARK_HOME"] = os.path.dirname(pyspark.__file__)
    env["PATH"] = f"{env['SPARK_HOME']}/bin:{os.path.dirname(sys.executable)}:{env['PATH']}"
    env["PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["SPARK_MASTER"] = "local[2]"
    env["SPARK_SUBMIT_EXTRA"] = SMALL
    jars = Path(sys.prefix) / "delta-jars"
    if not any(jars.glob("*.jar")):
        jars = ROOT / ".venv" / "delta-jars"
    if any(jars.glob("*.jar")):
        env["DELTA_JARS"] = str(jars)
    env.pop("BINLAKE_GOLD_DSN", None)
    # A shell (or this pytest process, after any embedded-engine test) holding Spark Connect
    # settings: the classic job must not become a Connect client (CI failed on exactly this).
    env.update(SPARK_REMOTE="sc://127.0.0.1:1", SPARK_CONNECT_MODE_ENABLED="1")
    return env


@pytest.mark.classic
@pytest.mark.mariadb
def test_spark_submit_runs_every_stage_on_jvm_spark(tmp_path: Path) -> None:
    from devtools.mariadb import MariaDBServer

    lake = tmp_path / "lake"
    env = _spark_env(tmp_path)
    with MariaDBServer() as gold:
        env["BINLAKE_GOLD_DSN"] = gold.dsn("binlake_gold")
        proc = subprocess.run(["sh", str(ROOT / "conf" / "spark-submit.sh"), str(lake),
                               str(SAMPLES)], capture_output=True, text=True, env=env,
                              timeout=3600, cwd=tmp_path)
        out = proc.stdout
        assert proc.returncode == 0, (out[-3000:], proc.stderr[-5000:])
        n, bad = gold.execute("SELECT count(*), sum(pk_hash <> SHA2(pk_values, 256)) "
                              "FROM binlake_gold.binlog_events")[0]
    password = env["BINLAKE_GOLD_DSN"].split("@")[0].split(":")[-1]
    assert password not in out and password not in proc.stderr
    assert "bronze: 5 file(s), 340 row changes" in out
    assert "silver: 5 bronze file(s) considered, 340 row changes appended" in out
    assert "quality: PASSED" in out
    assert (n, bad) == (340, 0)  # samples/binlogs/README.md: 340 row changes
    assert "optimize: silver/binlog_events: z-order via sql" in out, out
    silver = DeltaTable(str(lake / "silver" / "binlog_events"))
    assert silver.history(1)[0]["operation"] == "OPTIMIZE"
    assert silver.to_pyarrow_table(columns=["seq"]).num_rows == 340
