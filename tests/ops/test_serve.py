"""``binlake serve``: one engine keeps running with the lake's views; a client session in
another process connects to the printed Spark Connect URL and queries them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.python_run import run_python

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]

CLIENT = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
names = sorted(t.name for t in spark.catalog.listTables("global_temp"))
print("VIEWS", ",".join(names))
print("ORDERS", spark.sql("SELECT count(*) FROM global_temp.shop__orders").collect()[0][0])
print("OPEN", spark.sql("SELECT count(*) FROM global_temp.shop__orders__history "
                        "WHERE __END_AT IS NULL").collect()[0][0])
print("SILVER", spark.sql("SELECT count(*) FROM global_temp.silver_binlog_events").collect()[0][0])
"""


def _read_until(proc: subprocess.Popen, pattern: str, timeout: float = 180) -> re.Match:
    deadline, seen = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
        m = re.search(pattern, seen)
        if m:
            return m
    raise AssertionError(f"no {pattern!r} in serve output:\n{seen}")


def test_serve_shares_the_views_with_another_process(spark, tmp_path: Path) -> None:
    from pipelines.cli.main import main

    lake = tmp_path / "lake"
    assert main(["--lake", str(lake), "index", "--binlog-dir",
                 str(ROOT / "samples" / "binlogs"), "--all", "--mirror"]) == 0
    orders = spark.read.format("delta").load(str(lake / "mirror" / "shop" / "orders")).count()
    silver = spark.read.format("delta").load(str(lake / "silver" / "binlog_events")).count()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    server = subprocess.Popen([sys.executable, "-m", "pipelines.cli.main", "--lake", str(lake),
                               "serve", "--port", "0", "--refresh", "1"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        url = _read_until(server, r"Spark Connect at (sc://[\d.]+:\d+)").group(1)
        _read_until(server, r"views as global_temp")
        client = run_python(CLIENT, url, env=env, timeout=300)
        out = dict(line.split(" ", 1) for line in client.stdout.splitlines() if " " in line)
        views = out["VIEWS"].split(",")
        assert {"shop__orders", "shop__orders__history", "silver_binlog_events"} <= set(views)
        assert int(out["ORDERS"]) == orders and int(out["OPEN"]) == orders
        assert int(out["SILVER"]) == silver
    finally:
        server.send_signal(signal.SIGTERM)
        rest, _ = server.communicate(timeout=60)
    assert server.returncode == 0 and "stopped" in rest
