"""Acceptance of the bronze stage against a real MariaDB server and its own tool.

A throwaway MariaDB 10.11 runs the mixed workload (every common type, unsigned extremes,
multi-row statements, a 200-row transaction, NULLs, rotations into several files). Bronze,
built by ``binlake bronze --all`` on the embedded engine, must hold exactly the row changes
``mariadb-binlog -vv`` prints: same files, positions, GTIDs, tables, kinds and values.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from tests.support.binlog_verbose import is_unsigned, printed_matches, read_row_changes
from tests.support.mariadb import MariaDBServer
from tests.support.workload import run_mixed_workload

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "binlogs"


@pytest.fixture(scope="module")
def server_binlogs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("server-binlogs")
    with MariaDBServer(binlog_row_metadata="FULL") as server:
        with server.connect() as conn:
            summary = run_mixed_workload(conn)
        server.flush_logs()
        files = server.binlog_files()
        assert len(files) >= 4 and summary.total_row_changes >= 300
        for f in files:
            shutil.copy(f, out / f.name)
    return out


def _bronze_rows(spark, lake: Path) -> dict[tuple, dict]:
    rows = spark.sql(
        "SELECT binlog_file, start_pos, end_pos, row_in_event, gtid, schema_name, table_name, "
        "event_type, row_before, row_after FROM delta.`%s` "
        "WHERE event_type IN ('INSERT','UPDATE','DELETE')" % (lake / "bronze" / "binlog_events")
    ).collect()
    return {(r["binlog_file"], r["start_pos"], r["row_in_event"]): r.asDict() for r in rows}


def _compare(bronze: dict[tuple, dict], reference: list) -> None:
    ref = {(rc.file, rc.start_pos, rc.row_in_event): rc for rc in reference}
    assert sorted(bronze) == sorted(ref), "bronze and mariadb-binlog list different row changes"
    mismatches = []
    for key, rc in ref.items():
        b = bronze[key]
        assert (b["end_pos"], b["gtid"], b["schema_name"], b["table_name"], b["event_type"]) == (
            rc.end_pos, rc.gtid, rc.schema, rc.table, rc.event_type), key
        unsigned = [is_unsigned(t) for t in rc.column_types] if rc.column_types else None
        for side, printed, types in (("before", rc.before, rc.before_types),
                                     ("after", rc.after, rc.after_types)):
            image = b[f"row_{side}"]
            assert (image is None) == (printed is None), (key, side)
            if printed is None:
                continue
            assert len(image) == len(printed), (key, side)
            for i, (text, comment) in enumerate(zip(printed, types)):
                value = None if image[i] is None else bytes(image[i])
                if not printed_matches(text, comment, value,
                                       unsigned=unsigned[i] if unsigned else None):
                    mismatches.append((key, side, i, comment, text, value))
    assert not mismatches, f"{len(mismatches)} values differ, first: {mismatches[:5]}"


def test_bronze_equals_mariadb_binlog_on_server_workload(spark, server_binlogs: Path,
                                                          tmp_path: Path) -> None:
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    res = run_bronze(spark, cfg, binlog_dir=str(server_binlogs), all_files=True)
    # The last file was copied while the server was still writing it.
    assert [f.status for f in res.files] == ["completed"] * (len(res.files) - 1) + ["partial"]
    reference = [rc for f in sorted(server_binlogs.iterdir()) for rc in read_row_changes(f)]
    assert res.row_changes == len(reference) >= 300
    # The 200-row transaction is one GTID holding 200+ row changes.
    per_gtid: dict[str, int] = {}
    for rc in reference:
        per_gtid[rc.gtid] = per_gtid.get(rc.gtid, 0) + 1
    assert max(per_gtid.values()) >= 200
    _compare(_bronze_rows(spark, tmp_path / "lake"), reference)


def test_bronze_equals_mariadb_binlog_on_shipped_samples(spark, tmp_path: Path) -> None:
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    run_bronze(spark, cfg, binlog_dir=str(SAMPLES), all_files=True)
    reference = [rc for f in sorted(SAMPLES.glob("*.0*")) for rc in read_row_changes(f)]
    _compare(_bronze_rows(spark, tmp_path / "lake"), reference)


def test_mariadb_compressed_binlog_equals_mariadb_binlog(spark, tmp_path: Path) -> None:
    """log_bin_compress=ON: QUERY_COMPRESSED and *_ROWS_COMPRESSED events from a real server."""
    out = tmp_path / "compressed"
    out.mkdir()
    with MariaDBServer(extra_options={"log_bin_compress": "ON",
                                      "log_bin_compress_min_len": 10}) as server:
        with server.connect() as conn:
            run_mixed_workload(conn)
        server.flush_logs()
        for f in server.binlog_files():
            shutil.copy(f, out / f.name)
    types = set()
    from pipelines.bronze.reader import BinlogFileReader

    for f in sorted(out.iterdir()):
        types |= {e.header.type_code for e in BinlogFileReader(str(f))}
    assert {165, 169} & types or {165, 166} & types, f"no compressed events: {sorted(types)}"
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    res = run_bronze(spark, cfg, binlog_dir=str(out), all_files=True)
    assert not res.failed
    reference = [rc for f in sorted(out.iterdir()) for rc in read_row_changes(f)]
    assert res.row_changes == len(reference) >= 300
    _compare(_bronze_rows(spark, tmp_path / "lake"), reference)
