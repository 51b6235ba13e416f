"""Which files of a directory are binlogs (pipelines/binlog/directory.py, ``select_files``):
the server's index file when there is one, else the binlog magic; a real MariaDB data
directory as ``binlake index --binlog-dir DATADIR --all``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from pipelines.binlog.directory import list_binlogs
from pipelines.bronze.files import select_files
from pipelines.errors import ConfigError

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
# The first bytes of a real MariaDB 10.11 aria_log.00000001 and aria_log_control.
ARIA_LOG = b"\xfe\xfe\x0b\x01" + bytes(60)


def _names(paths: list[str]) -> list[str]:
    return [os.path.basename(p) for p in paths]


@pytest.fixture
def datadir(tmp_path: Path) -> Path:
    """Three real binlogs among the files a MariaDB data directory holds beside them."""
    d = tmp_path / "data"
    d.mkdir()
    for n in (1, 2, 3):
        shutil.copy(SAMPLES / f"mariadb-bin.00000{n}", d / f"mariadb-bin.00000{n}")
    (d / "aria_log.00000001").write_bytes(ARIA_LOG)  # a binlog's name, not a binlog
    (d / "aria_log_control").write_bytes(b"\xfe\xfe\x0c\x01" + bytes(48))
    (d / "ib_logfile0").write_bytes(b"Phys" + bytes(60))
    (d / "notes.000001").write_text("a text file named like a binlog\n")
    (d / "mariadb-bin.state").write_text("0-1-42\n")
    (d / "mysql").mkdir()
    return d


def test_without_an_index_only_files_with_the_binlog_magic(datadir: Path) -> None:
    (datadir / "mariadb-bin.000004").write_bytes(b"")  # the server has only just created it
    assert _names(select_files(str(datadir), all_files=True)) == [
        "mariadb-bin.000001", "mariadb-bin.000002", "mariadb-bin.000003"]


def test_the_index_file_decides_for_its_base(datadir: Path) -> None:
    # As the server writes it: "./name" with a relative log-bin, absolute paths with an
    # absolute one (here a directory since copied elsewhere); a purged file still listed; a
    # stray mariadb-bin.000003 the index does not list.
    (datadir / "mariadb-bin.index").write_text(
        "./mariadb-bin.000001\n/var/lib/mysql/mariadb-bin.000002\n\n./mariadb-bin.000005\n")
    (datadir / "mariadb-bin.000004").write_bytes(b"")
    (datadir / "other-bin.000007").write_bytes((SAMPLES / "mariadb-bin.000004").read_bytes())
    assert select_files(str(datadir), all_files=True) == [
        str(datadir / "mariadb-bin.000001"), str(datadir / "mariadb-bin.000002"),
        str(datadir / "other-bin.000007")]  # no index for its base: by its magic


def test_an_index_may_list_files_at_their_own_path(tmp_path: Path, datadir: Path) -> None:
    elsewhere = tmp_path / "logs"
    elsewhere.mkdir()
    shutil.copy(SAMPLES / "mariadb-bin.000005", elsewhere / "mariadb-bin.000005")
    (datadir / "mariadb-bin.index").write_text(
        f".\\mariadb-bin.000002\n{elsewhere / 'mariadb-bin.000005'}\n"  # a Windows line
        "./mariadb-bin.000010\n")  # 10 after 5: server order, not text order
    shutil.copy(SAMPLES / "mariadb-bin.000001", datadir / "mariadb-bin.000010")
    assert list_binlogs(str(datadir)) == [str(datadir / "mariadb-bin.000002"),
                                          str(elsewhere / "mariadb-bin.000005"),
                                          str(datadir / "mariadb-bin.000010")]


def test_an_index_of_another_program_is_not_a_binlog_index(datadir: Path) -> None:
    (datadir / "search.index").write_text("word 1 2 3\n")
    (datadir / "empty.index").write_text("")
    assert _names(list_binlogs(str(datadir))) == [
        "mariadb-bin.000001", "mariadb-bin.000002", "mariadb-bin.000003"]


def test_a_named_file_that_is_not_a_binlog_is_an_error_naming_it(datadir: Path) -> None:
    d = str(datadir)
    with pytest.raises(ConfigError) as e:
        select_files(d, names=["mariadb-bin.000001", "aria_log.00000001"])
    assert str(e.value) == (f"--files: {d}/aria_log.00000001 is not a binlog (it begins with "
                            "0xfefe0b01, a binlog with 0xfe62696e)")
    (datadir / "mariadb-bin.000004").write_bytes(b"")
    with pytest.raises(ConfigError) as e:
        select_files(d, names=["mariadb-bin.000004"])
    assert str(e.value) == f"--files: {d}/mariadb-bin.000004 is not a binlog (it is empty)"
    with pytest.raises(ConfigError) as e:
        select_files(d, names=["mariadb-bin.000009"])
    assert str(e.value) == f"--files: {d}/mariadb-bin.000009 does not exist"
    assert select_files(d, names=["mariadb-bin.000002"]) == [f"{d}/mariadb-bin.000002"]


@pytest.mark.parametrize("command", ["bronze", "index"])
def test_the_command_names_a_file_that_is_not_a_binlog_and_creates_no_lake(
        tmp_path: Path, datadir: Path, capsys, command: str) -> None:
    from pipelines.cli.main import main

    lake = tmp_path / "lake"
    assert main(["--lake", str(lake), command, "--binlog-dir", str(datadir), "--files",
                 "mariadb-bin.000001,aria_log.00000001"]) == 2
    assert capsys.readouterr() == ("", (
        f"binlake: configuration error: --files: {datadir}/aria_log.00000001 is not a binlog "
        "(it begins with 0xfefe0b01, a binlog with 0xfe62696e)\n"))
    assert not lake.exists()


def test_a_replicas_relay_logs_are_left_out(datadir: Path) -> None:
    # As a MariaDB 10.11 replica writes them (tests below: a real one): relay-log.info's
    # second line names the relay log; its base and index are left out; --files reads one.
    for n in (1, 2):
        shutil.copy(SAMPLES / f"mariadb-bin.00000{n}", datadir / f"db2-relay.00000{n}")
    (datadir / "db2-relay.index").write_text("./db2-relay.000001\n./db2-relay.000002\n")
    (datadir / "relay-log.info").write_text("5\n./db2-relay.000002\n2353\nmariadb-bin.000001\n"
                                           "2052\n0\n")
    shutil.copy(SAMPLES / "mariadb-bin.000004", datadir / "mysqld-relay-bin.000003")  # default
    assert _names(select_files(str(datadir), all_files=True)) == [
        "mariadb-bin.000001", "mariadb-bin.000002", "mariadb-bin.000003"]
    assert _names(select_files(str(datadir), names=["db2-relay.000002"])) == ["db2-relay.000002"]


@pytest.mark.mariadb
def test_a_real_replicas_data_directory_gives_its_own_binlogs(tmp_path: Path) -> None:
    """A real replica (log_slave_updates) of a real primary: ``--all`` over its data
    directory selects the binlogs ``SHOW BINARY LOGS`` lists, not its relay logs (which hold
    the same row changes again)."""
    import time

    from devtools.mariadb import MariaDBServer

    with MariaDBServer(server_id=1) as primary, \
            MariaDBServer(server_id=2, extra_options={"log_slave_updates": 1}) as replica:
        primary.execute("CREATE USER 'repl'@'127.0.0.1' IDENTIFIED BY 'repl-pw'")
        primary.execute("GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1'")
        primary.execute("CREATE DATABASE d")
        primary.execute("CREATE TABLE d.t (id INT PRIMARY KEY)")
        replica.execute("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%s, "
                        "MASTER_USER='repl', MASTER_PASSWORD='repl-pw', MASTER_USE_GTID=no, "
                        "MASTER_LOG_FILE='mariadb-bin.000001', MASTER_LOG_POS=4",
                        (primary.port,))
        replica.execute("START SLAVE")
        primary.execute("INSERT INTO d.t VALUES (1), (2), (3)")
        deadline = time.monotonic() + 30
        while replica.execute("SELECT COUNT(*) FROM d.t")[0][0] != 3:
            assert time.monotonic() < deadline, "the replica did not apply the rows"
            time.sleep(0.2)
        replica.execute("FLUSH BINARY LOGS")
        own = [row[0] for row in replica.execute("SHOW BINARY LOGS")]
        relays = sorted(p.name for p in replica.datadir.glob("*relay-bin.0*"))
        assert relays  # the replica does write relay logs there
        assert _names(select_files(str(replica.datadir), all_files=True)) == own


@pytest.mark.spark
@pytest.mark.mariadb
def test_index_all_on_a_real_mariadb_data_directory(spark, tmp_path: Path, capsys) -> None:
    """The server's own data directory, while it runs: aria_log.00000001 and the rest are not
    selected, every binlog the server lists is, and the run succeeds (it exited 1 and left
    a ``failed`` aria_log.00000001 in ``status``)."""
    from devtools.mariadb import MariaDBServer
    from pipelines.cli.main import main

    lake = str(tmp_path / "lake")
    with MariaDBServer() as server:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE shop")
            cur.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute("INSERT INTO shop.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
            conn.commit()
            server.flush_logs()
            cur.execute("UPDATE shop.t SET v = 'bb' WHERE id = 2")
            cur.execute("DELETE FROM shop.t WHERE id = 3")
            conn.commit()
        data = server.datadir
        listed = [p.name for p in server.binlog_files()]
        assert (data / "aria_log.00000001").is_file()
        assert (data / "mariadb-bin.index").is_file()
        assert len(listed) == 2
        assert _names(select_files(str(data), all_files=True)) == listed
        capsys.readouterr()
        assert main(["--lake", lake, "index", "--binlog-dir", str(data), "--all"]) == 0
        out = capsys.readouterr().out
        assert main(["--lake", lake, "status", "--format", "json"]) == 0
        st = json.loads(capsys.readouterr().out)

        # Without the index file (a copy of the directory's files): by the binlog magic.
        copy = tmp_path / "copy"
        copy.mkdir()
        for f in data.iterdir():
            if f.is_file() and f.name != "mariadb-bin.index":
                shutil.copy(f, copy / f.name)
        assert _names(select_files(str(copy), all_files=True)) == listed
    bronze_lines = [line.split(",")[0] for line in out.splitlines()
                    if line.startswith("bronze: mariadb-bin")]
    # The first file was closed by the FLUSH; the server still writes the second.
    assert bronze_lines == [f"bronze: {listed[0]}: completed", f"bronze: {listed[1]}: partial"]
    assert "aria_log" not in out
    assert [(f["binlog_file"], f["status"], f["row_changes"]) for f in st["files"]] == [
        (listed[0], "completed", 3), (listed[1], "partial", 2)]


@pytest.mark.spark
def test_a_failed_entry_an_older_run_left_for_a_non_binlog_is_retracted(
        spark, tmp_path: Path, datadir: Path, capsys, monkeypatch) -> None:
    """A lake an older binlake indexed the directory into (every ``<base>.NNNNNN`` name
    taken: aria_log.00000001 decoded, ``failed`` at pos 0, its ERROR row in bronze): the next
    bronze run retracts that entry and the row, once; status then shows only binlogs."""
    from pipelines.binlog.names import binlog_order, is_binlog_file
    from pipelines.bronze import job
    from pipelines.cli.main import main
    from pipelines.config import load_config

    def older_selection(binlog_dir: str, *, all_files: bool = False, names=None, **_) -> list:
        found = sorted((n for n in os.listdir(binlog_dir) if is_binlog_file(n)),
                       key=binlog_order)
        return [os.path.join(binlog_dir, n) for n in found]

    lake = str(tmp_path / "lake")
    cfg = load_config(env={}, overrides={"lake.root": lake})
    with monkeypatch.context() as m:
        m.setattr(job, "select_files", older_selection)
        res = job.run_bronze(spark, cfg, binlog_dir=str(datadir), all_files=True)
    assert [(f.binlog_file, f.status) for f in res.failed] == [("aria_log.00000001", "failed"),
                                                               ("notes.000001", "failed")]
    capsys.readouterr()
    assert main(["--lake", lake, "bronze", "--binlog-dir", str(datadir), "--all"]) == 0
    out = capsys.readouterr().out.splitlines()
    retracted = "not a binlog: the failed entry an older run left retracted"
    assert out[:5] == ["bronze: mariadb-bin.000001: already completed, skipped",
                       "bronze: mariadb-bin.000002: already completed, skipped",
                       "bronze: mariadb-bin.000003: already completed, skipped",
                       f"bronze: aria_log.00000001: {retracted}",
                       f"bronze: notes.000001: {retracted}"]
    assert main(["--lake", lake, "status", "--format", "json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert [(f["binlog_file"], f["status"]) for f in st["files"]] == [
        ("mariadb-bin.000001", "completed"), ("mariadb-bin.000002", "completed"),
        ("mariadb-bin.000003", "completed")]
    files = spark.sql(f"SELECT DISTINCT binlog_file FROM delta.`{lake}/bronze/binlog_events` "
                      "ORDER BY 1").collect()
    assert [r[0] for r in files] == ["mariadb-bin.000001", "mariadb-bin.000002",
                                     "mariadb-bin.000003"]
    assert main(["--lake", lake, "bronze", "--binlog-dir", str(datadir), "--all"]) == 0
    assert "retracted" not in capsys.readouterr().out
