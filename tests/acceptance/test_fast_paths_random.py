"""Issue 40: every fast path against the reference, on workloads nobody chose.

The compiled paths (bronze's row loop ``rowkernel``, silver's render loops and pk_hash's
loop) were proven on the shapes they were tuned on; a 147 MB file of one wide table made the
row loop ask for 32 GiB. Here the shapes are drawn: random tables of every column type,
random widths and NULL rates, rows that grow and shrink between images, partial images
(``binlog_row_image`` FULL/NOBLOB/MINIMAL per statement), random statement mixes, random
batch sizes and binlog file sizes, on a real MariaDB. Each test prints its seed; a failure
is re-run with ``BINLAKE_FUZZ_SEED=<seed>``.

- bronze: each file decoded with and without the row loop gives equal Arrow tables, and as
  many row changes as ``mariadb-binlog -v`` prints;
- the whole path: ``binlake index`` with every compiled path forced on (thresholds 0) and
  with every one off (``BINLAKE_ROW_KERNEL=0``) writes equal bronze and silver, and folding
  silver replays the server's own SELECT;
- ``big`` (``make test-big``, CI): issue 40's file shape past every threshold at its default
  (157 MB, 1.05 M row changes), on against off, and the replay.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from devtools.mariadb import MariaDBServer
from devtools.random_workload import run_random_workload
from pipelines.bronze.decode_task import decode_file_batches
from tests.support.binlog_verbose import mariadb_binlog_path
from tests.support.lake_runs import binlake as _binlake
from tests.support.replay import replay_silver, server_tables

pytestmark = [pytest.mark.mariadb]

_SEED = int(os.environ.get("BINLAKE_FUZZ_SEED") or random.SystemRandom().randrange(2**31))
# Columns of a run, not of its rows: when and by which run a row was written.
_RUN_COLUMNS = {"ingested_at", "silver_run_id", "run_id", "indexed_at", "silver_at"}


def binlake(lake: Path, *args: str, env: dict | None = None) -> str:
    code, out, err = _binlake(lake, *args, env=env)
    assert code == 0, f"binlake {args[0]} exited {code}: {err[-2000:]}"
    return out


def _seed(offset: int) -> int:
    seed = _SEED + offset
    print(f"seed {seed} (re-run: BINLAKE_FUZZ_SEED={_SEED})")
    return seed


def _printed_row_changes(path: Path) -> int:
    """Row changes ``mariadb-binlog -v`` prints: one ``### INSERT/UPDATE/DELETE`` line each."""
    tool = mariadb_binlog_path()
    assert tool, "mariadb-binlog not found"
    out = subprocess.run([tool, "--no-defaults", "--base64-output=decode-rows", "-v",
                          str(path)], capture_output=True, check=True).stdout
    return len(re.findall(rb"^### (?:INSERT INTO|UPDATE|DELETE FROM) ", out, re.MULTILINE))


def _decoded(path: Path, columnar: bool, batch_rows: int) -> pa.Table:
    return pa.Table.from_batches(list(decode_file_batches(
        str(path), source_id="s", subprocess=False, columnar=columnar,
        batch_rows=batch_rows)))


def _row_changes(table: pa.Table) -> int:
    kinds = table.column("event_type").to_pylist()
    return sum(k in ("INSERT", "UPDATE", "DELETE") for k in kinds)


@pytest.mark.parametrize("offset", [0, 1, 2])
def test_random_tables_decode_alike_with_and_without_the_row_loop(offset: int) -> None:
    seed = _seed(offset)
    r = random.Random(seed)
    target = r.choice([1, 2, 4, 8]) << 20
    max_binlog = r.choice([64 << 10, 512 << 10, 4 << 20, 1 << 30])
    with MariaDBServer(max_binlog_size=max_binlog) as server:
        with server.connect() as conn:
            summary = run_random_workload(conn, target, seed=seed,
                                          row_images=("FULL", "NOBLOB", "MINIMAL"))
        server.flush_logs()
        files = server.binlog_files()
        total = 0
        for path in files:
            batch_rows = r.choice([1, 7, 333, 20000, r.randint(1, 50_000)])
            reference = _decoded(path, False, batch_rows)
            compiled = _decoded(path, True, batch_rows)
            assert compiled.column("event_type")[-1].as_py() == "END", path.name
            assert compiled.equals(reference), f"{path.name} (batch_rows {batch_rows})"
            n = _row_changes(compiled)
            assert n == _printed_row_changes(path), path.name
            total += n
    assert total == summary.row_changes > 0


def _table(lake: Path, stage: str) -> pa.Table:
    from deltalake import DeltaTable

    t = DeltaTable(str(lake / stage / "binlog_events")).to_pyarrow_table()
    t = t.drop_columns([c for c in t.column_names if c in _RUN_COLUMNS])
    keys = [c for c in ("binlog_file", "start_pos", "row_in_event", "event_type")
            if c in t.column_names]
    return t.sort_by([(k, "ascending") for k in keys])


_ON = {"BINLAKE_BRONZE_COMPILED_MIN_MB": "0", "BINLAKE_SILVER_COMPILED_MIN_MB": "0",
       "BINLAKE_SILVER_COMPILED_MIN_ROWS": "0"}
_OFF = {"BINLAKE_ROW_KERNEL": "0"}


def _index_both_ways(tmp_path: Path, binlogs: Path, snapshot: Path | None,
                     on: dict, batch_rows: int) -> tuple[Path, Path]:
    lakes = []
    for name, env in (("off", _OFF), ("on", on)):
        lake = tmp_path / f"lake-{name}"
        env = {**env, "BINLAKE_BRONZE_BATCH_ROWS": str(batch_rows)}
        if snapshot is not None:
            binlake(lake, "snapshot", "--import", str(snapshot), env=env)
        binlake(lake, "index", "--binlog-dir", str(binlogs), "--all", env=env)
        lakes.append(lake)
    return lakes[0], lakes[1]


def _assert_same_lakes(off: Path, on: Path) -> list[dict]:
    for stage in ("bronze", "silver"):
        a, b = _table(off, stage), _table(on, stage)
        assert a.column_names == b.column_names
        for c in a.column_names:
            assert a.column(c).equals(b.column(c)), f"{stage}.{c} differs (fast paths on/off)"
    return _table(on, "silver").to_pylist()


@pytest.mark.spark
@pytest.mark.parametrize("offset", [10, 11])
def test_random_workload_through_the_fast_paths_on_and_off_replays_the_server(
        tmp_path: Path, offset: int) -> None:
    seed = _seed(offset)
    r = random.Random(seed)
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    with MariaDBServer(max_binlog_size=r.choice([256 << 10, 2 << 20, 1 << 30])) as server:
        with server.connect() as conn:
            summary = run_random_workload(conn, r.choice([2, 4, 6]) << 20, seed=seed)
        server.flush_logs()
        snapshot = tmp_path / "snapshot.json"
        binlake(tmp_path / "lake-snap", "snapshot", "--source-dsn", server.dsn(),
                "--schemas", "fuzzdb", "--export", str(snapshot))
        for f in server.binlog_files():
            shutil.copy(f, binlogs / f.name)
        off, on = _index_both_ways(tmp_path, binlogs, snapshot, _ON,
                                   r.choice([1000, 20000, r.randint(100, 50_000)]))
        silver = _assert_same_lakes(off, on)
        assert len(silver) == summary.row_changes
        with server.connect() as conn:
            expected = server_tables(conn, summary.tables)
            replayed = replay_silver(silver, conn, summary.tables)
    _assert_replays(replayed, expected, summary)


def _assert_replays(replayed: dict, expected: dict, summary) -> None:
    """Each table's replay equals the server's rows; a difference names the first row and
    columns that differ (with the table's DDL) rather than two long lists."""
    for t in summary.tables:
        got, want = replayed[t], expected[t]
        if got == want:
            continue
        ddl = summary.ddl.get(t, "")
        for a, b in zip(got, want):
            if a != b:
                cols = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
                detail = [(i, repr(a[i])[:80], repr(b[i])[:80]) for i in cols]
                pytest.fail(f"{t}: silver replay differs from the server at row {a[:2]}: "
                            f"(column index, silver, server) {detail}; {ddl}")
        pytest.fail(f"{t}: silver replay has {len(got)} rows, the server {len(want)}")


@pytest.mark.big
@pytest.mark.spark
def test_issue_40s_file_past_every_threshold_decodes_and_replays(tmp_path: Path) -> None:
    """The issue's file (one wide table: DOUBLE, DECIMAL, DATETIME(6), a VARCHAR growing on
    UPDATE; 157 MB here, 1,050,000 row changes) with every threshold at its default: bronze's
    row loop (past ``bronze.compiled_min_mb``) and silver's loops (past
    ``silver.compiled_min_rows``) on, against every compiled path off."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from workload import fill_wide_binlog

    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    with MariaDBServer(max_binlog_size=1 << 30) as server:
        with server.connect() as conn:
            name, written = fill_wide_binlog(conn, 147_000_000)
        shutil.copy(server.binlog_dir / name, binlogs / name)
        size = (binlogs / name).stat().st_size
        assert size >= 150e6 and written.row_changes == 1_050_000
        assert _printed_row_changes(binlogs / name) == written.row_changes
        off, on = _index_both_ways(tmp_path, binlogs, None, {}, 20000)
        silver = _assert_same_lakes(off, on)
        assert len(silver) == written.row_changes
        with server.connect() as conn:
            tables = ["benchdb.events"]
            assert replay_silver(silver, conn, tables) == server_tables(conn, tables)
