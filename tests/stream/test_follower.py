"""``stream.follower``: silver follows bronze on its lag, a failing gold never stops the
stream, and a snapshot follows a commit that held DDL — on the embedded engine and a lake
built from a real binlog."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import pytest

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.mysql.dsn import Dsn
from pipelines.stream.follower import Follower

pytestmark = pytest.mark.spark

CRC32_FILE = "osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.checksum-crc32"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cfg(tmp_path: Path, lag: int = 30):
    return load_config(env={}, overrides={"lake.root": str(tmp_path / "lake"),
                                          "stream.silver_lag_seconds": lag})


def test_due_before_the_oldest_commits_bound_by_the_follows_length(tmp_path: Path) -> None:
    # freshness 5 s, heartbeat 1 s: a follow guessed at 2.5 s must start 3.5 s before the
    # bound of the oldest commit a stage lacks; measured follows move that.
    f = Follower(None, _cfg(tmp_path), dsn=Dsn("127.0.0.1"))
    fresh = f.fresh
    assert not f.due(10**6)  # nothing committed
    fresh.committed(100.0, f.stages)
    fresh.committed(103.0, f.stages)  # the oldest lack counts
    assert not f.due(101.4) and f.due(101.5)
    fresh.took(0.5)
    fresh.runs.popleft()  # only the measured one
    assert fresh.margin == 1.5 and not f.due(103.4) and f.due(103.5)
    fresh.ran("silver", True, 104.0)
    assert not f.silver_pending and fresh.lag("silver", 200.0) == 0.0
    fresh.committed(300.0, ["silver", "gold"])
    fresh.ran("gold", False, 300.0)  # a failed stage waits RETRY_SECONDS; silver does not
    assert fresh.waiting(301.0) == ["silver"] and fresh.waiting(330.0) == ["silver", "gold"]
    assert fresh.lag("gold", 310.0) == 10.0
    off = Follower(None, _cfg(tmp_path, lag=0), dsn=Dsn("127.0.0.1"))
    off.committed(None)
    assert off.stages == [] and not off.due(10**6)  # silver_lag_seconds = 0: never


def test_a_commit_made_during_a_follow_is_still_lacking_when_it_ends(tmp_path: Path) -> None:
    # The follow thread runs beside the reader: a follow begun at 10 holds the commit of 9,
    # not that of 11, so silver still lacks 11 (from 11) when the follow ends at 12.
    f = Follower(None, _cfg(tmp_path), dsn=Dsn("127.0.0.1"))
    fresh = f.fresh
    assert fresh.wait_seconds(0.0) == float("inf")
    fresh.committed(9.0, f.stages)
    assert fresh.wait_seconds(9.0) == pytest.approx(9.0 + 5 - 3.5 - 9.0)
    run, _ = f.begin()
    assert run == ["silver"]
    fresh.committed(11.0, f.stages)
    fresh.ran("silver", True, 12.0)
    assert f.silver_pending and fresh.lag("silver", 12.0) == 1.0
    assert fresh.wait_seconds(12.0) == pytest.approx(11.0 + 5 - 3.5 - 12.0)
    f.begin()
    fresh.ran("silver", True, 13.0)  # nothing committed meanwhile: caught up
    assert not f.silver_pending and fresh.wait_seconds(13.0) == float("inf")
    fresh.committed(20.0, f.stages)
    f.begin()
    fresh.ran("silver", False, 21.0)  # failed: the next try after RETRY_SECONDS
    assert fresh.wait_seconds(21.0) == pytest.approx(30.0)


def test_a_following_stream_loads_silvers_loops_at_its_start(tmp_path: Path,
                                                              monkeypatch) -> None:
    # Every follow of a long stream then renders through them (silver/job._compiled); a
    # stream whose silver does not follow loads nothing. Where they load (this process or
    # not) is render_warm.renders_here's (tests/silver/test_render_warm.py).
    from pipelines.silver import render_warm

    started = []
    monkeypatch.setattr(render_warm, "warm_in_background", lambda cfg: started.append(cfg))
    Follower(None, _cfg(tmp_path, lag=0), dsn=Dsn("127.0.0.1")).start()
    assert started == []
    cfg = _cfg(tmp_path, lag=30)
    Follower(None, cfg, dsn=Dsn("127.0.0.1")).start()
    assert started == [cfg]


def test_follow_runs_silver_and_survives_a_dead_gold(spark, tmp_path: Path, corpus: Path,
                                                     caplog) -> None:
    cfg = _cfg(tmp_path)
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    (binlogs / "mysql-bin.000001").write_bytes((corpus / CRC32_FILE).read_bytes())
    run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True)
    dead_gold = f"mysql://u:pw@127.0.0.1:{_closed_port()}/g"
    f = Follower(spark, cfg, dsn=Dsn("127.0.0.1"), gold_dsn=dead_gold)
    f.committed(None)
    with caplog.at_level(logging.WARNING):
        assert f.follow() is False  # silver ran, gold failed: logged, not raised
    assert "following gold failed" in caplog.text and "pw" not in caplog.text
    # silver holds bronze; gold (the readers' lane) still lacks what silver added and is
    # tried again in RETRY_SECONDS
    assert f.fresh.behind == {} and f.behind() == ["gold"]
    assert list(f.readers.behind) == ["gold"] and f.readers.waiting(time.monotonic()) == []
    assert f.last_error[1] == "gold" and "pw" not in f.last_error[2]
    silver = spark.read.format("delta").load(cfg.table_path("silver", "binlog_events"))
    quarantine = spark.read.format("delta").load(cfg.table_path("silver", "quarantine"))
    assert silver.count() + quarantine.count() == 63  # MANIFEST: 63 row changes


def test_a_commit_with_ddl_takes_a_snapshot_after_it(spark, tmp_path: Path, caplog) -> None:
    cfg = _cfg(tmp_path)
    f = Follower(spark, cfg, dsn=Dsn("127.0.0.1", _closed_port()))
    f.committed(None)
    assert f.silver_pending and "snapshot" not in caplog.text  # no DDL: no snapshot
    with caplog.at_level(logging.WARNING):
        f.committed(("mysql-bin.000002", 900))  # the source is down: a warning
    assert "schema snapshot after DDL failed" in caplog.text
    # Still owed, tried again only after RETRY_SECONDS (not at every commit).
    assert f.snapshot_owed(("mysql-bin.000002", 900)) and f.retry_at > time.monotonic() + 20
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        f.committed(("mysql-bin.000002", 900))
    assert "snapshot" not in caplog.text


@pytest.mark.mariadb
def test_the_snapshot_a_ddl_owes_is_stored_once(spark, tmp_path: Path, mariadb) -> None:
    cfg = _cfg(tmp_path)
    f = Follower(spark, cfg, dsn=Dsn.parse(mariadb.dsn()))
    file, end = mariadb.execute("SHOW MASTER STATUS")[0][:2]
    f.committed((file, int(end)))
    snaps = spark.read.format("delta").load(cfg.table_path("silver", "schema_snapshots"))
    assert snaps.select("snapshot_id").distinct().count() == 1
    f.committed((file, int(end)))  # paid: the next commit takes none
    # A new follower (a restarted stream) reads the debt as paid from the lake.
    again = Follower(spark, cfg, dsn=Dsn.parse(mariadb.dsn()))
    assert not again.snapshot_owed((file, int(end)))
    assert again.snapshot_owed((file, int(end) + 10**6))  # a DDL past the snapshot
    assert snaps.select("snapshot_id").distinct().count() == 1


def test_the_readers_of_silver_lack_what_silvers_follows_added(tmp_path: Path) -> None:
    # Two lanes: silver lacks bronze's commits; the mirror lacks what silver's follows added,
    # counted from the bronze commit it came from (its bound is to that commit).
    from pipelines.stream.follower import _Followed

    f = Follower(None, _cfg(tmp_path), dsn=Dsn("127.0.0.1"))
    f.mirror = True
    assert f.lane(False)[1] == ["silver"] and f.lane(True)[1] == ["mirror"]
    f.fresh.committed(100.0, ["silver"])
    assert f.behind() == ["silver"] and f.readers.behind == {}
    run, at = f.begin(["silver"])  # the silver thread's follow
    assert run == ["silver"]
    _Followed(f, at, run, 100.0).ran("silver", True)
    assert f.fresh.behind == {} and f.readers.behind == {"mirror": 100.0}
    assert f.lag("mirror", 103.0) == 3.0 and f.lag("silver", 103.0) == 0.0
    # The mirror's follow begins; silver adds commits of 105 meanwhile: still lacking after.
    run, at = f.begin(["mirror"])
    _Followed(f, at, ["silver"], 105.0).ran("silver", True)
    _Followed(f, at, run, None).ran("mirror", True)
    assert f.readers.behind == {"mirror": 105.0}
    run, at = f.begin(["mirror"])
    _Followed(f, at, run, None).ran("mirror", True)
    assert f.readers.behind == {} and not f.silver_pending
    # A mirror lacking nothing silver holds still lags as much as silver does.
    f.fresh.committed(200.0, ["silver"])
    assert f.lag("mirror", 204.0) == f.lag("silver", 204.0) > 0


def test_a_follow_of_both_lanes_begins_the_readers_when_its_silver_is_done(
        tmp_path: Path) -> None:
    # The stop's catch-up follows silver then the mirror in one go: the mirror holds what
    # that silver added. Silver failing, the mirror waits out RETRY_SECONDS.
    from pipelines.stream.follower import _Followed

    f = Follower(None, _cfg(tmp_path), dsn=Dsn("127.0.0.1"))
    f.mirror = True
    f.fresh.committed(100.0, ["silver"])
    run, at = f.begin()
    assert run == ["silver", "mirror"] and f.readers.running == set()
    told = _Followed(f, at, run, 100.0)
    told.ran("silver", True)
    assert f.readers.running == {"mirror"}
    told.ran("mirror", True)
    assert f.fresh.behind == {} and f.readers.behind == {}
    f.fresh.committed(300.0, ["silver"])
    run, at = f.begin()
    told = _Followed(f, at, run, 300.0)
    told.ran("silver", False)
    told.ran("mirror", False)
    assert f.fresh.behind == {"silver": 300.0} and f.readers.behind == {}
    assert f.behind(waiting=True) == []  # silver waits out its failure
