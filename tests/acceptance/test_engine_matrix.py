"""Issue 9's engine matrix: the acceptance scenarios on embedded Sail, local JVM Spark with
delta-spark (``--engine spark``) and the JVM Spark Connect server (``--spark-remote``).

Each engine runs the ``binlake`` CLI as a subprocess over the binlogs of one real MariaDB
10.11 workload per scenario (shared by the module, so every engine sees the same input):

- FULL row metadata, mid-stream ALTER, one final snapshot: ``snapshot``, then ``index
  --gold-dsn`` (bronze → silver → quality → gold in one process) killed -9 in the middle of
  gold's load and re-run, ``quality``, and on the two Connect engines ``status``, ``sql``,
  ``vacuum`` (each a JVM start on local Spark, where the capability tests cover them). Bronze
  equals ``mariadb-binlog -vv``; silver replays to the server's SELECT; gold holds every silver
  row once; quality passes.
- MINIMAL row metadata, mid-stream ALTER, only a late snapshot: exactly the unnamable
  ``shop.orders`` rows land in quarantine and ``quality`` fails on the column-count rule.

Quality's verdicts (rule → status) must be the same on every engine. The lakes the JVM
engines write are read back here by the embedded engine (the ``spark`` fixture).
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from pipelines.config import load_config
from tests.support.binlog_verbose import read_row_changes
from tests.support.engine_cli import ENGINES, binlake, binlake_popen, engine_flags
from devtools.mariadb import MariaDBServer
from tests.support.replay import replay_silver, server_tables
from tests.support.scenarios import (assert_bronze_equals_reference,
                                     assert_gold_equals_silver,
                                     assert_pre_alter_orders_quarantined, bronze_rows)
from devtools.mixed_workload import WORKLOAD_TABLES, WorkloadSummary, run_mixed_workload

pytestmark = [pytest.mark.matrix, pytest.mark.spark, pytest.mark.mariadb]

_VERDICTS: dict[str, dict] = {}  # scenario -> the first engine's quality verdicts


@dataclass
class Source:
    server: MariaDBServer
    binlogs: Path
    expected: dict
    summary: WorkloadSummary
    reference: list


def _source(tmp_path_factory, metadata: str) -> Iterator[Source]:
    binlogs = tmp_path_factory.mktemp(f"binlogs-{metadata.lower()}")
    with MariaDBServer(binlog_row_metadata=metadata) as server:
        with server.connect() as conn:
            summary = run_mixed_workload(conn, alter_mid_stream=True)
        server.copy_closed_binlogs(binlogs)
        with server.connect() as conn:
            expected = server_tables(conn, WORKLOAD_TABLES)
        reference = [rc for f in sorted(binlogs.iterdir()) for rc in read_row_changes(f)]
        yield Source(server, binlogs, expected, summary, reference)


@pytest.fixture(scope="module")
def full_source(tmp_path_factory) -> Iterator[Source]:
    yield from _source(tmp_path_factory, "FULL")


@pytest.fixture(scope="module")
def minimal_source(tmp_path_factory) -> Iterator[Source]:
    yield from _source(tmp_path_factory, "MINIMAL")


@pytest.fixture(params=ENGINES)
def engine(request) -> str:
    return request.param


@pytest.fixture
def flags(engine: str, request) -> list[str]:
    url = request.getfixturevalue("spark_connect_url") if engine == "connect" else None
    return engine_flags(engine, url)


def _silver_and_quarantine(spark, lake: Path) -> tuple[list[dict], list[dict]]:
    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    read = spark.read.format("delta")
    silver = [r.asDict() for r in read.load(cfg.table_path("silver", "binlog_events")).collect()]
    quarantine = [r.asDict() for r in read.load(cfg.table_path("silver", "quarantine")).collect()]
    return silver, quarantine


def _verdicts(flags: list[str], lake: Path, expect: int) -> dict[str, tuple]:
    out = binlake(flags, lake, "quality", "--window", "all", "--format", "json", expect=expect)
    doc = json.loads(out.stdout)
    return {f"{r['name']} ({r['dataset']})": (r["status"], r["failed_records"])
            for r in doc["rules"]}


def _same_verdicts(scenario: str, verdicts: dict[str, tuple]) -> None:
    first = _VERDICTS.setdefault(scenario, verdicts)
    assert verdicts == first, "quality verdicts differ between engines"


def _snapshot(flags: list[str], lake: Path, source: Source) -> None:
    binlake(flags, lake, "snapshot", "--schemas", "shop,ops",
            env={"BINLAKE_SOURCE_DSN": source.server.dsn()})


def _kill_index_mid_gold(flags: list[str], lake: Path, args: list[str], env: dict[str, str],
                         server, db: str, timeout: float = 900) -> str:
    """Start ``binlake index … --gold-dsn``, kill -9 it once gold holds its first rows (bronze
    and silver done, the export under way); say what was hit."""
    proc = binlake_popen(flags, lake, "index", *args, env=env)
    deadline = time.monotonic() + timeout
    hit = "finished before the kill"
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            rows = server.execute("SELECT COUNT(*) FROM binlog_events", db=db)[0][0]
        except Exception:  # noqa: BLE001 - database/table not created yet
            rows = 0
        if rows:
            os.killpg(proc.pid, signal.SIGKILL)
            hit = f"killed with {rows} row(s) in gold"
            break
        time.sleep(0.05)
    else:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            hit = "killed at the timeout"
    proc.wait()
    return hit


def test_full_metadata_every_stage(engine, flags, full_source: Source, spark,
                                   tmp_path: Path) -> None:
    lake, src, db = tmp_path / "lake", full_source, f"gold_{engine}"
    _snapshot(flags, lake, src)
    # One process runs bronze → silver → quality → gold; killed -9 during gold's load, re-run.
    # bronze.statement_text on: the statements reach gold, the one over 16 KiB cut (dbtrail).
    env = {"BINLAKE_GOLD_DSN": src.server.dsn(db), "BINLAKE_GOLD_BATCH_ROWS": "40",
           "BINLAKE_BRONZE_STATEMENT_TEXT": "true"}
    args = ["--binlog-dir", str(src.binlogs), "--all"]
    print(f"{engine} index:", _kill_index_mid_gold(flags, lake, args, env, src.server, db))
    rerun = binlake(flags, lake, "index", *args, env=env)
    assert src.server.dsn(db).split("@")[0].split(":")[-1] not in rerun.stdout + rerun.stderr

    assert_bronze_equals_reference(bronze_rows(spark, lake), src.reference)
    silver, quarantine = _silver_and_quarantine(spark, lake)
    assert quarantine == []
    assert len(silver) == src.summary.total_row_changes
    with src.server.connect() as conn:
        replayed = replay_silver(silver, conn, WORKLOAD_TABLES)
    for t in WORKLOAD_TABLES:
        assert replayed[t] == src.expected[t], f"{t}: silver replay differs from the server"
    assert_gold_equals_silver(src.server, db, silver)
    _same_verdicts("full", _verdicts(flags, lake, expect=0))
    if engine == "spark":
        return  # status/sql/vacuum: on the two Connect engines (a JVM start each here)
    status = json.loads(binlake(flags, lake, "status", "--format", "json", env=env).stdout)
    assert status["gold"]["configured"] is True, status
    count = binlake(flags, lake, "sql", "SELECT COUNT(*) AS n FROM silver_binlog_events")
    assert f"| {len(silver)}" in count.stdout, count.stdout
    vacuum = binlake(flags, lake, "vacuum")
    via = "sql" if engine == "connect" else "delta-rs"
    assert f"vacuum: silver/binlog_events: removed 0 file(s)" in vacuum.stdout, vacuum.stdout
    assert f"via {via}" in vacuum.stdout, vacuum.stdout


def test_minimal_metadata_late_snapshot_quarantines(flags, minimal_source: Source, spark,
                                                    tmp_path: Path) -> None:
    lake, src = tmp_path / "lake", minimal_source
    _snapshot(flags, lake, src)
    binlake(flags, lake, "index", "--binlog-dir", str(src.binlogs), "--all")
    assert_bronze_equals_reference(bronze_rows(spark, lake), src.reference)
    silver, quarantine = _silver_and_quarantine(spark, lake)
    assert_pre_alter_orders_quarantined(src.summary, silver, quarantine)
    with src.server.connect() as conn:
        replayed = replay_silver(silver, conn, WORKLOAD_TABLES)
    for t in WORKLOAD_TABLES:
        if t != "shop.orders":
            assert replayed[t] == src.expected[t], f"{t}: silver replay differs from the server"
    verdicts = _verdicts(flags, lake, expect=1)
    assert any(k.startswith("column_count") and v[0] == "failed"
               for k, v in verdicts.items()), verdicts
    _same_verdicts("minimal", verdicts)
