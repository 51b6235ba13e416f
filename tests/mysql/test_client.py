"""``pipelines.mysql`` (``dsn``, ``client``): DSN parsing with TLS parameters, where a password
comes from, redaction, the one event-header struct, and the LOAD DATA LOCAL guard on a real
server."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pipelines.mysql import client as mysql_client
from pipelines.config import GoldConfig, SourceConfig, load_config
from pipelines.errors import ConfigError
from pipelines.mysql.client import LocalFileRefused, allow_local_file, connect
from pipelines.mysql.dsn import (
    Dsn, Tls, error_text, read_option_file, redact, redact_urls, resolve_dsn,
)


def test_dsn_tls_parameters_and_defaults() -> None:
    assert Dsn.parse("mysql://u:p@h/").tls == Tls("PREFERRED")
    d = Dsn.parse("mysql://u:p@h:3307/db?ssl_ca=/ca.pem")
    assert d.tls == Tls("VERIFY_CA", "/ca.pem")  # a CA given means: verify with it
    d = Dsn.parse("mysql://u@h/?ssl_mode=verify_identity&ssl_ca=/c&ssl_cert=/x&ssl_key=/k")
    assert d.tls == Tls("VERIFY_IDENTITY", "/c", "/x", "/k")
    assert str(d) == "mysql://u@h:3306/?ssl_mode=VERIFY_IDENTITY"


@pytest.mark.parametrize("url, match", [
    ("mysql://u@h/?ssl_mode=SOMETIMES", r"--gold-dsn: \?ssl_mode: expected one of DISABLED"),
    ("mysql://u@h/?sslmode=require", "unknown DSN parameter"),
    ("mysql://u@h/?ssl_key=/k", "ssl_cert and"),
    ("mysql://u@h/?ssl_mode=DISABLED&ssl_ca=/c", "DISABLED contradicts"),
])
def test_bad_tls_parameters_name_the_setting(url: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Dsn.parse(url, setting="--gold-dsn")


def test_url_round_trips_password_and_tls_for_engine_tasks() -> None:
    d = Dsn.parse("mysql://a%40b:p%2Fw%3Ax@h:1/my%20db?ssl_mode=REQUIRED&ssl_cert=/c&ssl_key=/k")
    again = Dsn.parse(d.url())
    assert again == d and again.password == "p/w:x" and again.database == "my db"


def test_config_sections_carry_tls_and_validate_them() -> None:
    cfg = load_config(env={"BINLAKE_GOLD_SSL_MODE": "REQUIRED", "BINLAKE_GOLD_PASSWORD": "pw1"})
    assert (cfg.gold.ssl_mode, cfg.gold.password) == ("REQUIRED", "pw1")
    assert "pw1" not in repr(cfg)
    with pytest.raises(ConfigError, match=r"source\.ssl_mode"):
        load_config(env={"BINLAKE_SOURCE_SSL_MODE": "maybe"})


def test_password_precedence(tmp_path: Path) -> None:
    pwfile = tmp_path / "pw"
    pwfile.write_text("from-file\nsecond line ignored\n")
    cnf = tmp_path / "my.cnf"
    cnf.write_text("[mysql]\npassword=not-this\n[client]\nuser = optuser\n"
                   "password = \"from cnf\"\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".my.cnf").write_text("[client]\npassword=from-home\n")
    env = {"HOME": str(home)}
    full = GoldConfig(password="from-env", password_file=str(pwfile), defaults_file=str(cnf))

    def pw(url: str, section: GoldConfig) -> tuple[str, str, str]:
        d = resolve_dsn(url, section, setting="gold.dsn", section="gold", env=env)
        return d.user, d.password, d.password_from

    assert pw("mysql://u:in-url@h/", full)[1] == "in-url"
    assert pw("mysql://u@h/", full)[1:] == (
        "from-env", "gold.password / BINLAKE_GOLD_PASSWORD")
    assert pw("mysql://u@h/", replace(full, password=""))[1] == "from-file"
    assert pw("mysql://h/", replace(full, password="", password_file="")) == (
        "optuser", "from cnf", f"[client] of gold.defaults_file {cnf}")
    assert pw("mysql://u@h/", GoldConfig())[:2] == ("u", "from-home")
    with pytest.raises(ConfigError, match=r"gold\.defaults_file .*none\.cnf"):
        pw("mysql://u@h/", GoldConfig(defaults_file=str(tmp_path / "none.cnf")))
    # no password anywhere (and no ~/.my.cnf): none
    assert resolve_dsn("mysql://u@h/", GoldConfig(), setting="s", section="gold",
                       env={"HOME": str(tmp_path)}).password == ""


def test_unreadable_password_sources_name_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"source\.password_file .*nope"):
        resolve_dsn("mysql://u@h/", SourceConfig(password_file=str(tmp_path / "nope")),
                    setting="source.dsn", section="source")
    bad = tmp_path / "bad.cnf"
    bad.write_text("[client\npassword=x\n")
    with pytest.raises(ConfigError, match="source.defaults_file .*bad.cnf") as info:
        resolve_dsn("mysql://u@h/", SourceConfig(defaults_file=str(bad)),
                    setting="source.dsn", section="source")
    assert "password=x" not in str(info.value)


def test_option_file_skips_includes_and_keeps_only_client(tmp_path: Path) -> None:
    cnf = tmp_path / "c.cnf"
    cnf.write_text("!includedir /etc/mysql/conf.d/\n# comment\n[client]\nssl-ca=/x\n"
                   "password='q#1'\n[mysqld]\nport=1\n")
    assert read_option_file(str(cnf), setting="s") == {"ssl_ca": "/x", "password": "q#1"}


def test_dsn_tls_wins_over_the_section() -> None:
    section = SourceConfig(ssl_mode="VERIFY_CA", ssl_ca="/section.pem")
    d = resolve_dsn("mysql://u:p@h/?ssl_mode=REQUIRED", section, setting="s", section="source")
    assert d.tls == Tls("REQUIRED")
    d = resolve_dsn("mysql://u:p@h/", section, setting="s", section="source")
    assert d.tls == Tls("VERIFY_CA", "/section.pem")


def test_redaction() -> None:
    assert redact("pw=s3cr/t or s3cr%2Ft", "s3cr/t") == "pw=*** or ***"
    d = Dsn.parse("mysql://u:hunter22@h/")
    err = OSError(1045, "user u typed hunter22")
    assert error_text(err, d) == "(1045) user u typed ***"
    assert "hunter22" not in str(d) and "hunter22" not in repr(d)


@pytest.mark.mariadb
def test_load_data_local_sends_only_the_file_allowed(mariadb, tmp_path: Path) -> None:
    mariadb.execute("CREATE DATABASE IF NOT EXISTS lfile")
    mariadb.execute("CREATE TABLE IF NOT EXISTS lfile.t (id INT PRIMARY KEY, v TEXT)")
    private = tmp_path / "private.txt"
    private.write_text("1\tprivate\n")
    export = tmp_path / "export.tsv"
    export.write_text("2\texport\n")
    conn = connect(Dsn.parse(mariadb.dsn("lfile")), section="gold", database="lfile",
                   local_infile=True)
    load = "LOAD DATA LOCAL INFILE %s INTO TABLE t"
    try:
        with conn.cursor() as cur:
            with allow_local_file(conn, str(export), export.read_bytes()):
                assert cur.execute(load, (str(export),)) == 1
                with pytest.raises(LocalFileRefused, match="private.txt"):
                    cur.execute(load, (str(private),))  # the server asks for another name
            with pytest.raises(LocalFileRefused):
                cur.execute(load, (str(export),))  # outside the block: nothing at all
            cur.execute("SELECT 1")  # the connection is still in step
            assert cur.fetchone() == (1,)
            assert conn.refused_local_files == [str(private), str(export)]
    finally:
        conn.close()
    assert mariadb.execute("SELECT id, v FROM lfile.t") == [(2, "export")]



@pytest.mark.mariadb
def test_load_data_local_from_memory_sends_the_bytes_in_packets(mariadb) -> None:
    # The gold export's way: the body is sent from memory under the name the statement uses,
    # in 1 MiB packets (this body needs three); no file of that name exists.
    mariadb.execute("CREATE DATABASE IF NOT EXISTS lmem")
    mariadb.execute("CREATE TABLE IF NOT EXISTS lmem.t (id INT PRIMARY KEY, v TEXT)")
    rows = [(i, f"v{i:06d}" + "x" * 200) for i in range(12_000)]
    body = "".join(f"{i}\t{v}\n" for i, v in rows).encode()
    assert len(body) > 2 * mysql_client._LOCAL_PACKET
    conn = connect(Dsn.parse(mariadb.dsn("lmem")), section="gold", database="lmem",
                   local_infile=True)
    try:
        with conn.cursor() as cur:
            with allow_local_file(conn, "no-such-file.tsv", body):
                assert cur.execute("LOAD DATA LOCAL INFILE %s INTO TABLE t",
                                   ("no-such-file.tsv",)) == len(rows)
            with pytest.raises(LocalFileRefused):  # the bytes are gone with the block
                cur.execute("LOAD DATA LOCAL INFILE %s INTO TABLE t", ("no-such-file.tsv",))
            assert conn.local_file_data is None
    finally:
        conn.close()
    assert mariadb.execute("SELECT COUNT(*), MIN(v), MAX(v) FROM lmem.t") == [
        (len(rows), rows[0][1], rows[-1][1])]

def test_redact_urls_masks_dsn_passwords_and_password_flags() -> None:
    line = ("binlake gold --gold-dsn mysql://u:p%40ss@h:3306/db --source-dsn mysql://r@h/ "
            "--password hunter22 --password=hunter23")
    assert redact_urls(line) == ("binlake gold --gold-dsn mysql://u:***@h:3306/db --source-dsn "
                                 "mysql://r@h/ --password *** --password=***")


# What only one module may do: mysql/client.py connects, reads raw packets and reuses
# mysql-replication's private dump set-up; mysql/dsn.py masks DSN passwords; the decoder's
# framing.py defines the event header (files and wire). A second copy anywhere in pipelines/
# is sprawl (three connect wrappers, redactions and header structs were once written out).
_ONLY_IN = {
    "pymysql.connect(": ("a pymysql connection", "mysql/client.py"),
    "connections.Connection(": ("a pymysql connection", "mysql/client.py"),
    "_read_packet(": ("pymysql's private packet read", "mysql/client.py"),
    "__connect_to_stream": ("mysql-replication's private dump set-up", "mysql/client.py"),
    "BinLogStreamReader(": ("mysql-replication's reader", "mysql/client.py"),
    '"<IBIIIH"': ("the binlog event header struct", "binlog/framing.py"),
    ":***@": ("DSN password masking", "mysql/dsn.py"),
}


def test_only_one_module_connects_reads_packets_defines_the_header_or_masks_passwords() -> None:
    root = Path(__file__).resolve().parents[2] / "pipelines"
    found = []
    for path in sorted(root.rglob("*.py")):
        text, here = path.read_text(), path.relative_to(root).as_posix()
        found += [f"{here}: {what} ({needle})"
                  for needle, (what, home) in _ONLY_IN.items() if needle in text and here != home]
    assert found == []
    assert all((root / home).is_file() for _, home in _ONLY_IN.values())  # no stale home
    assert '"<IBIIIH"' in (root / "binlog" / "framing.py").read_text()
