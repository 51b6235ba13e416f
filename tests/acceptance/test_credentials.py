"""Passwords without the command line, and no password anywhere it could leak.

A MariaDB account ``app`` with a distinctive password; DSNs without it. The password comes
from ``BINLAKE_GOLD_PASSWORD`` / ``BINLAKE_SOURCE_PASSWORD``, ``password_file``,
``--defaults-file`` or ``~/.my.cnf``. Then every command runs (verbose, logs at DEBUG, the
process's file descriptors captured) — including a wrong password and a gold export whose
Spark tasks fail — and the password is in none of stdout, stderr, the logs, ``status --format
json``, the error messages, the lake's files or gold's state table.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from pipelines.cli.main import main
from devtools.mariadb import MariaDBServer

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

PW = "Pw-Zq81-Unique-x7"
WRONG = "Wr0ng-Pw-Unique-q9"


@pytest.fixture(scope="module")
def server():
    with MariaDBServer(binlog_row_metadata="FULL") as s:
        with s.connect() as conn, conn.cursor() as cur:
            # Not in the binlog: MariaDB logs CREATE USER's password as typed, and bronze
            # records the source's binlog faithfully (that is the source's secret, not ours).
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY %s", (PW,))
            cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'app'@'127.0.0.1' WITH GRANT OPTION")
        s.execute("CREATE DATABASE shop")
        s.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(20))")
        s.execute("INSERT INTO shop.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        s.flush_logs()
        yield s


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No BINLAKE_* variables from outside, and a HOME without a .my.cnf."""
    for var in list(os.environ):
        if var.startswith("BINLAKE_"):
            monkeypatch.delenv(var)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def _dsn(server: MariaDBServer, db: str = "", user: str = "app@") -> str:
    return f"mysql://{user}127.0.0.1:{server.port}/{db}"


def test_passwords_from_env_file_and_option_files(server, clean_env, monkeypatch, tmp_path,
                                                  capsys) -> None:
    lake = ["--lake", str(tmp_path / "lake")]
    # nowhere: the login is refused and the message says no password was found
    assert main(lake + ["snapshot", "--source-dsn", _dsn(server)]) == 1
    assert "[password from: none given]" in capsys.readouterr().err
    # the environment
    monkeypatch.setenv("BINLAKE_GOLD_PASSWORD", PW)
    assert main(lake + ["init", "--gold-dsn", _dsn(server, "g_env")]) == 0
    monkeypatch.delenv("BINLAKE_GOLD_PASSWORD")
    # password_file from the conf
    pwfile = tmp_path / "source.pw"
    pwfile.write_text(PW + "\n")
    conf = tmp_path / "c.toml"
    conf.write_text(f'[source]\npassword_file = "{pwfile}"\n')
    assert main(["--conf", str(conf)] + lake + ["snapshot", "--source-dsn", _dsn(server)]) == 0
    # --defaults-file: user and password from its [client] section
    cnf = tmp_path / "binlake.cnf"
    cnf.write_text(f"[client]\nuser=app\npassword={PW}\n")
    assert main(lake + ["--defaults-file", str(cnf), "init", "--gold-dsn",
                        _dsn(server, "g_cnf", user="")]) == 0
    # ~/.my.cnf
    (clean_env / ".my.cnf").write_text(f'[client]\npassword="{PW}"\n')
    assert main(lake + ["snapshot", "--source-dsn", _dsn(server)]) == 0
    assert PW not in capsys.readouterr().out
    dbs = {r[0] for r in server.execute("SHOW DATABASES")}
    assert {"g_env", "g_cnf"} <= dbs


def _lake_files_hold(root: Path, secret: str) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and secret.encode() in path.read_bytes():
            hits.append(str(path))
    return hits


def test_no_password_in_output_logs_status_errors_or_task_failures(
        spark, server, clean_env, monkeypatch, tmp_path, capfd, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("BINLAKE_SOURCE_PASSWORD", PW)
    monkeypatch.setenv("BINLAKE_GOLD_PASSWORD", PW)
    lake = tmp_path / "lake"
    g = ["-v", "--lake", str(lake)]
    closed = [p.name for p in server.binlog_files()[:-1]]
    assert main(g + ["snapshot", "--source-dsn", _dsn(server)]) == 0
    assert main(g + ["index", "--binlog-dir", str(server.binlog_dir), "--files",
                     ",".join(closed), "--gold-dsn", _dsn(server, "g_leak")]) == 0
    assert main(g + ["rotate", "--gold-dsn", _dsn(server, "g_leak")]) == 0
    assert main(["-v", "--lake", str(tmp_path / "stream"), "stream", "--source-dsn",
                 _dsn(server), "--server-id", "5151", "--stop-after", "2"]) == 0
    monkeypatch.setenv("BINLAKE_GOLD_DSN", _dsn(server, "g_leak"))
    before = capfd.readouterr()
    assert main(g + ["status", "--format", "json"]) == 0
    status = capfd.readouterr().out
    assert PW not in status and "error" not in json.loads(status)["gold"]

    # a wrong password: refused, and neither password shows
    monkeypatch.setenv("BINLAKE_GOLD_PASSWORD", WRONG)
    assert main(g + ["init", "--gold-dsn", _dsn(server, "g_leak")]) == 1
    monkeypatch.setenv("BINLAKE_GOLD_PASSWORD", PW)
    assert main(g + ["status", "--format", "json"]) == 0
    # Spark tasks that fail: the driver holds the two connections `app` may have (the export
    # lock's and the watermark's), so every export task's own connection is refused inside
    # the engine.
    server.execute("ALTER USER 'app'@'127.0.0.1' WITH MAX_USER_CONNECTIONS 2")
    try:
        assert main(g + ["gold", "--gold-dsn", _dsn(server, "g_tasks")]) == 1
    finally:
        server.execute("ALTER USER 'app'@'127.0.0.1' WITH MAX_USER_CONNECTIONS 0")
    out = capfd.readouterr()
    out = type(out)(before.out + status + out.out, before.err + out.err)
    assert "max_user_connections" in out.err and "gold export" in out.err, out.err
    state = server.execute("SELECT error FROM g_tasks.binlake_export_state")
    assert state and "max_user_connections" in str(state[0][0])

    for secret in (PW, WRONG):
        assert secret not in out.out and secret not in out.err
        assert secret not in caplog.text
        assert secret not in str(state)
        assert _lake_files_hold(lake, secret) == []
        assert _lake_files_hold(tmp_path / "stream", secret) == []
