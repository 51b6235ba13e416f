"""The mirror's pure parts: column types, widening, value conversion, version pairing.

Version pairing runs on the embedded engine with small DataFrames; the expected versions are
written out by hand from the change lists.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest

from pipelines.errors import SchemaMismatchError
from pipelines.mirror.plan import Layout, TableTyping, plan_layout, versions
from pipelines.mirror.types import STRING, MirrorType, converter, type_of_column, widen

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("data_type, column_type, spark", [
    ("tinyint", "tinyint(4)", "tinyint"), ("tinyint", "tinyint(3) unsigned", "smallint"),
    ("int", "int(10) unsigned", "bigint"), ("bigint", "bigint(20) unsigned", "decimal(20,0)"),
    ("mediumint", "mediumint(8) unsigned", "int"), ("decimal", "decimal(10,2)", "decimal(10,2)"),
    ("decimal", "decimal(65,30)", "string"), ("float", "float", "float"),
    ("double", "double", "double"), ("date", "date", "date"),
    ("datetime", "datetime(3)", "timestamp_ntz"), ("timestamp", "timestamp(6)", "timestamp"),
    ("time", "time(6)", "string"), ("varchar", "varchar(10)", "string"),
    ("blob", "blob", "binary"), ("binary", "binary(4)", "binary"),
    ("enum", "enum('a','b')", "string"), ("set", "set('a')", "string"),
    ("json", "longtext", "string"), ("bit", "bit(1)", "bigint"),
    ("bit", "bit(64)", "decimal(20,0)"), ("year", "year(4)", "int"),
])
def test_type_of_column(data_type: str, column_type: str, spark: str) -> None:
    assert type_of_column(data_type, column_type).spark == spark


@pytest.mark.parametrize("a, b, want", [
    ("int", "bigint", "bigint"), ("decimal(10,2)", "decimal(14,3)", "decimal(14,3)"),
    ("decimal(10,2)", "decimal(5,4)", "decimal(12,4)"), ("int", "decimal(10,2)", "decimal(12,2)"),
    ("bigint", "decimal(20,0)", "decimal(20,0)"), ("float", "double", "double"),
    ("int", "double", "double"), ("bigint", "double", "string"), ("int", "string", "string"),
    ("date", "timestamp_ntz", "timestamp_ntz"), ("binary", "string", "string"),
    ("decimal(38,0)", "decimal(10,5)", "string"),
])
def test_widen_holds_both_exactly_or_falls_back_to_text(a: str, b: str, want: str) -> None:
    from pipelines.mirror.plan import mirror_type_of_spark as m

    assert widen(m(a), m(b)).spark == want
    assert widen(m(b), m(a)).spark == want


def test_converters_are_exact_and_refuse_what_does_not_fit() -> None:
    u64 = MirrorType("decimal(20,0)", "decimal")
    assert converter(u64, u64, "c")(18446744073709551615) == Decimal("18446744073709551615")
    dec = MirrorType("decimal(10,2)", "decimal")
    assert converter(dec, dec, "c")("-0.50") == Decimal("-0.50")
    ts = MirrorType("timestamp", "timestamp")
    assert converter(ts, ts, "c")("2038-01-19 03:14:07.999999") == dt.datetime(
        2038, 1, 19, 3, 14, 7, 999999, tzinfo=dt.timezone.utc)
    assert converter(ts, ts, "c")("0000-00-00 00:00:00") is None
    date = MirrorType("date", "date")
    assert converter(date, date, "c")("2024-00-00") is None
    assert converter(date, MirrorType("timestamp_ntz", "datetime"), "c")("2024-02-29") == \
        dt.datetime(2024, 2, 29)
    binary = MirrorType("binary", "binary")
    assert converter(binary, binary, "c")("AP8=") == b"\x00\xff"
    assert converter(binary, STRING, "c")("AP8=") == "AP8="
    assert converter(MirrorType("int", "int"), STRING, "c")(5) == "5"
    js = MirrorType("string", "json")
    assert converter(js, js, "c")({"a": [1, Decimal("2.50")], "b": "é"}) == \
        '{"a": [1, 2.50], "b": "é"}'
    with pytest.raises(SchemaMismatchError, match="column qty"):
        converter(MirrorType("int", "int"), MirrorType("int", "int"), "qty")("x7")


def test_layout_keeps_dropped_columns_adds_new_ones_and_widens() -> None:
    typing = TableTyping(
        by_version={"s1": {"id": MirrorType("int", "int"), "total": MirrorType("decimal(10,2)", "decimal")}},
        latest={"id": MirrorType("int", "int"), "total": MirrorType("decimal(14,3)", "decimal"),
                "region": STRING},
        order=("id", "total", "region"), pk=("id",))
    layout = plan_layout([("id", "int"), ("total", "decimal(10,2)"), ("note", "string")],
                         typing, [("s1", "id"), ("binlog", "total"), ("binlog", "region")])
    assert [(n, t.spark) for n, t in layout.columns] == [
        ("id", "int"), ("total", "decimal(14,3)"), ("note", "string"), ("region", "string")]
    assert layout.key == ("id",) and layout.has_pk


def _events(spark, rows, layout: Layout):
    ddl = ("__kind string, __seq bigint, __gtid string, __event_timestamp timestamp, "
           "__event_type string, " + layout.ddl())
    ts = dt.datetime(2024, 1, 1)
    return spark.createDataFrame([(k, s, None, ts, e, *v) for k, s, e, *v in rows], ddl)


def _pairs(spark, layout, recs, opens0=()):
    r = _events(spark, recs, layout)
    o = _events(spark, list(opens0), layout)
    out = versions(r, o, layout).collect()
    return sorted((row["__start"], row["__end"], row["__existing"]) for row in out)


@pytest.mark.spark
def test_versions_with_a_key_end_at_the_next_close(spark) -> None:
    layout = Layout((("id", MirrorType("int", "int")), ("v", STRING)), ("id",), True)
    recs = [("close", 20, "UPDATE", 1, "a"), ("open", 20, "UPDATE", 1, "b"),
            ("close", 30, "DELETE", 1, "b"),
            ("open", 25, "INSERT", 2, "x"),
            ("close", 40, "UPDATE", 3, "p"), ("open", 40, "UPDATE", 4, "p")]  # key 3 -> 4
    opens0 = [("open", 10, None, 1, "a"), ("open", 5, None, 3, "p")]
    assert _pairs(spark, layout, recs, opens0) == [
        (5, 40, True), (10, 20, True), (20, 30, False), (25, None, False), (40, None, False)]


@pytest.mark.spark
def test_versions_without_a_key_pair_identical_rows_first_in_first_out(spark) -> None:
    layout = Layout((("k", STRING), ("v", MirrorType("int", "int"))), ("k", "v"), False)
    recs = [("open", 11, "INSERT", "a", 1), ("close", 12, "DELETE", "a", 1),
            ("open", 13, "INSERT", None, None), ("close", 14, "DELETE", None, None)]
    opens0 = [("open", 3, None, "a", 1)]
    assert _pairs(spark, layout, recs, opens0) == [
        (3, 12, True), (11, None, False), (13, 14, False)]


@pytest.mark.spark
def test_index_mirror_on_the_sample_binlogs(spark, tmp_path: Path, capsys, caplog) -> None:
    from pipelines.cli.main import main

    lake = tmp_path / "lake"
    assert main(["--lake", str(lake), "index", "--binlog-dir", str(ROOT / "samples" / "binlogs"),
                 "--all", "--mirror"]) == 0
    out = capsys.readouterr().out
    assert "mirror:" in out and "row changes" in out
    # the sample binlogs come without a schema snapshot: said, not silently strings
    assert "no schema snapshot describes shop.orders: its columns are typed as strings" in \
        caplog.text
    assert (lake / "mirror" / "shop" / "orders" / "_delta_log").is_dir()
    assert main(["--lake", str(lake), "mirror"]) == 0
    assert "up to date" in capsys.readouterr().out


@pytest.mark.spark
def test_catalog_names_with_lake_catalog(spark, tmp_path: Path, capsys) -> None:
    """``--catalog``: ``binlake index --mirror`` registers ``<schema>__<table>`` and
    ``…__history`` in the catalog schema, external at the mirror paths."""
    import uuid

    from pipelines.cli.main import main

    lake = tmp_path / "lake"
    catalog = f"spark_catalog.mirror_{uuid.uuid4().hex[:8]}"
    assert main(["--lake", str(lake), "--catalog", catalog, "index", "--binlog-dir",
                 str(ROOT / "samples" / "binlogs"), "--all", "--mirror"]) == 0
    n = spark.read.format("delta").load(str(lake / "mirror" / "shop" / "orders")).count()
    assert n > 0
    assert spark.sql(f"SELECT count(*) FROM {catalog}.shop__orders").collect()[0][0] == n
    assert spark.sql(f"SELECT count(*) FROM {catalog}.shop__orders__history "
                     "WHERE __END_AT IS NULL").collect()[0][0] == n
    names = {t.name for t in spark.catalog.listTables(catalog)}
    assert {"shop__orders", "shop__orders__history", "silver_binlog_events"} <= names
    capsys.readouterr()
    assert main(["--lake", str(lake), "--catalog", catalog, "sql",
                 "SELECT count(*) AS n FROM shop__orders"]) == 0
    assert f"| {n} " in capsys.readouterr().out


@pytest.mark.spark
def test_stream_follow_runs_the_mirror_after_silver(spark, tmp_path: Path) -> None:
    """``binlake stream --mirror``: the stream's silver step also brings the mirror up to
    date (the stream job on a lake whose bronze came from files; no source is contacted)."""
    from pipelines.bronze.job import run_bronze
    from pipelines.cli.main import build_parser
    from pipelines.config import load_config
    from pipelines.mysql.dsn import Dsn
    from pipelines.stream.follower import Follower

    assert build_parser().parse_args(["stream", "--server-id", "9", "--mirror"]).mirror
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    run_bronze(spark, cfg, binlog_dir=str(ROOT / "samples" / "binlogs"), all_files=True)
    follower = Follower(spark, cfg, dsn=Dsn.parse("mysql://repl@127.0.0.1:9/"))
    follower.mirror = True
    assert follower.follow()
    silver = spark.read.format("delta").load(cfg.table_path("silver", "binlog_events"))
    orders = silver.where("table_name = 'orders'").select("pk_values").distinct().count()
    current = spark.read.format("delta").load(str(tmp_path / "lake" / "mirror" / "shop" / "orders"))
    assert 0 < current.count() <= orders


@pytest.mark.spark
def test_vacuum_covers_the_mirror_tables(spark, tmp_path: Path) -> None:
    from pipelines.cli.main import main
    from pipelines.config import load_config
    from pipelines.gold.job import run_vacuum

    lake = tmp_path / "lake"
    assert main(["--lake", str(lake), "index", "--binlog-dir", str(ROOT / "samples" / "binlogs"),
                 "--all", "--mirror"]) == 0
    done = {r["table"] for r in run_vacuum(load_config(env={}, overrides={"lake.root": str(lake)}),
                                           dry_run=True, spark=spark)}
    assert {"mirror/shop/orders", "mirror_history/shop/orders", "mirror_state/tables",
            "mirror_state/records/shop/orders", "mirror_state/work/shop/orders",
            "silver/binlog_events"} <= done


@pytest.mark.spark
def test_first_mirror_survives_a_checkpoint_landing_meanwhile(spark, tmp_path: Path,
                                                             monkeypatch) -> None:
    """The mirror's first run reads silver's whole snapshot at the version it pins, while a
    stream may commit (the mirror holds its own lease, not silver's). The embedded engine
    checkpoints every tenth commit and cannot then time-travel to the pinned version: the run
    reads the snapshot's data files (``delta_ops.version_files``). Another source's rows land
    as version 10 right after the run read its batch."""
    from deltalake import DeltaTable

    from devtools.silver_rows import write_silver
    from pipelines.cli.main import main
    from pipelines.config import load_config
    from pipelines.mirror import job as mirror_job

    lake = tmp_path / "lake"
    assert main(["--lake", str(lake), "index", "--binlog-dir", str(ROOT / "samples" / "binlogs"),
                 "--all"]) == 0
    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    silver = cfg.table_path("silver", "binlog_events")
    while DeltaTable(silver).version() < 9:  # another source's commits: nothing to mirror
        write_silver(spark, silver, 3, source_id="other")
    real, landed = mirror_job._silver_batch, []

    def concurrent_commit(*args, **kwargs):
        batch = real(*args, **kwargs)
        if not landed:  # version 10: the engine writes a checkpoint
            write_silver(spark, silver, 3, source_id="other")
            landed.append(DeltaTable(silver).version())
        return batch

    monkeypatch.setattr(mirror_job, "_silver_batch", concurrent_commit)
    res = mirror_job.run_mirror(spark, cfg)
    assert landed == [10] and res.to_version == 9
    rows = spark.read.format("delta").load(silver)
    orders = rows.where("table_name = 'orders'").select("pk_values").distinct().count()
    current = spark.read.format("delta").load(str(lake / "mirror" / "shop" / "orders"))
    assert 0 < current.count() <= orders
