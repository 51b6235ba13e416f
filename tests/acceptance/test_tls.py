"""TLS to the source and to gold, against a MariaDB that requires it.

The server serves a certificate made by ``openssl`` at test time (``tests/support/tls.py``)
for the name ``localhost`` only, with ``require_secure_transport=ON``. Every command works with
the right CA and fails clearly (exit 1, the message naming the ``ssl_*`` setting, never the
password) with an unrelated CA, with a host-name mismatch under VERIFY_IDENTITY, and with TLS
off. "It connected" proves nothing on its own (pymysql negotiates TLS unverified by default),
so the failures are the half that shows the settings are applied.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest

from pipelines.cli.main import main
from pipelines.errors import ConfigError, SourceError
from pipelines.mysql.client import connect
from pipelines.mysql.dsn import Dsn
from pipelines.stream.protocol import ConnectionLost, ReplicationConnection, StartAt
from devtools.mariadb import MariaDBServer
from tests.support.tls import Pki, make_pki, tls_options

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

CLIENT_PW = "Cl1ent-Cert-Pw-4711"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(pki: Pki):
    with MariaDBServer(binlog_row_metadata="FULL", extra_options=tls_options(pki)) as s:
        s.execute("CREATE DATABASE app")
        s.execute("CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20))")
        s.execute("INSERT INTO app.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        s.execute("CREATE USER 'certuser'@'127.0.0.1' IDENTIFIED BY %s REQUIRE X509",
                  (CLIENT_PW,))
        s.execute("GRANT SELECT ON *.* TO 'certuser'@'127.0.0.1'")
        s.flush_logs()
        yield s


def _url(server: MariaDBServer, db: str | None = None, host: str = "127.0.0.1",
         **params: str) -> str:
    url = server.dsn(db).replace("@127.0.0.1:", f"@{host}:")
    return url + ("?" + "&".join(f"{k}={quote(v, safe='/')}" for k, v in params.items())
                  if params else "")


def _password(server: MariaDBServer) -> str:
    from urllib.parse import unquote, urlsplit

    return unquote(urlsplit(server.dsn()).password or "")


def _tls_in_use(conn) -> str:
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
        return str(cur.fetchone()[1])


# -- the client ------------------------------------------------------------------------------

def test_verify_ca_checks_the_chain_and_verify_identity_the_name(server, pki) -> None:
    conn = connect(Dsn.parse(_url(server, ssl_ca=pki.ca)))
    assert _tls_in_use(conn).startswith("TLS")
    conn.close()
    with pytest.raises(SourceError, match=r"source\.ssl_ca") as info:
        connect(Dsn.parse(_url(server, ssl_ca=pki.other_ca)))
    assert "does not verify" in str(info.value) and _password(server) not in str(info.value)
    with pytest.raises(SourceError, match="VERIFY_IDENTITY") as info:
        connect(Dsn.parse(_url(server, ssl_mode="VERIFY_IDENTITY", ssl_ca=pki.ca)),
                section="gold")
    assert "'127.0.0.1'" in str(info.value) and "gold.ssl_mode" in str(info.value)
    conn = connect(Dsn.parse(_url(server, host="localhost", ssl_mode="VERIFY_IDENTITY",
                                  ssl_ca=pki.ca)))
    assert _tls_in_use(conn).startswith("TLS")
    conn.close()


def test_required_encrypts_without_verifying_and_disabled_is_refused(server, pki) -> None:
    conn = connect(Dsn.parse(_url(server, ssl_mode="REQUIRED")))
    assert _tls_in_use(conn).startswith("TLS")
    conn.close()
    with pytest.raises(SourceError, match=r"ssl_mode=DISABLED \(source\.ssl_mode") as info:
        connect(Dsn.parse(_url(server, ssl_mode="DISABLED")))
    assert "require_secure_transport" in str(info.value)


def test_client_certificate(server, pki) -> None:
    base = f"mysql://certuser:{CLIENT_PW}@127.0.0.1:{server.port}/"
    conn = connect(Dsn.parse(f"{base}?ssl_ca={pki.ca}&ssl_cert={pki.client_cert}"
                             f"&ssl_key={pki.client_key}"))
    assert _tls_in_use(conn).startswith("TLS")
    conn.close()
    with pytest.raises(SourceError, match="Access denied") as info:
        connect(Dsn.parse(f"{base}?ssl_ca={pki.ca}"))
    assert CLIENT_PW not in str(info.value)
    with pytest.raises(ConfigError, match="ssl_cert and .*ssl_key"):
        Dsn.parse(f"{base}?ssl_cert={pki.client_cert}")


def test_unreadable_ca_file_is_a_config_error(server, tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"gold\.ssl_ca"):
        connect(Dsn.parse(_url(server, ssl_ca=str(tmp_path / "missing.pem"))), section="gold")


def test_replication_connection_has_the_same_tls(server, pki) -> None:
    first = server.binlog_files()[0].name
    good = ReplicationConnection(Dsn.parse(_url(server, ssl_ca=pki.ca)), 4242, is_mariadb=True)
    try:
        good.open(StartAt(first, 4))
        assert good.read() is not None  # the server's ROTATE to the first file
    finally:
        good.close()
    for params, expected in (({"ssl_ca": pki.other_ca}, "ssl_ca"),
                             ({"ssl_mode": "DISABLED"}, "ssl_mode=DISABLED")):
        conn = ReplicationConnection(Dsn.parse(_url(server, **params)), 4242, is_mariadb=True)
        with pytest.raises(SourceError, match=expected) as info:
            conn.open(StartAt(first, 4))
        assert not isinstance(info.value, ConnectionLost)  # not retried forever


# -- every command ---------------------------------------------------------------------------

def _binlogs(server: MariaDBServer) -> list[str]:
    """``--binlog-dir DIR --files F,...``: the server's closed binlogs."""
    server.flush_logs()
    names = [p.name for p in server.binlog_files()[:-1]]
    return ["--binlog-dir", str(server.binlog_dir), "--files", ",".join(names)]


def test_gold_bulk_commands_go_over_tls(server, pki) -> None:
    # The bulk method's login asks for bulk operations twice over TLS: in the SSL request and
    # in the response after it; the server then takes bulk commands on the encrypted channel.
    import datetime as dt

    import pyarrow as pa

    from pipelines.gold import ddl
    from pipelines.gold.client import connect as gold_connect
    from pipelines.gold.exporter import write_chunk

    server.execute("CREATE DATABASE tls_bulk")
    server.execute(ddl.create_events_sql(dt.datetime(2024, 3, 10, 11), 4), db="tls_bulk")
    row = {c: None for c in ddl.EVENT_COLUMNS}
    row.update(source_id="default", binlog_file="mariadb-bin.000001", start_pos=4, end_pos=90,
               row_in_event=0, event_timestamp="2024-03-10 12:30:05", schema_name="app",
               table_name="t", event_type=1, row_after='{"v":"a"}', schema_version="0")
    batch = pa.RecordBatch.from_pylist([row], pa.schema(
        [(c, pa.int64() if isinstance(row[c], int) else pa.string())
         for c in ddl.EVENT_COLUMNS]))
    conn = gold_connect(Dsn.parse(_url(server, "tls_bulk", ssl_ca=pki.ca)), autocommit=False,
                        bulk=True)
    try:
        assert conn.bulk_operations and _tls_in_use(conn).startswith("TLS")
        assert write_chunk(conn, batch, "bulk") == 1
    finally:
        conn.close()
    assert server.execute("SELECT row_after FROM binlog_events", db="tls_bulk") == [
        ('{"v":"a"}',)]


def test_every_command_works_with_the_right_ca(spark, server, pki, tmp_path, capsys) -> None:
    source = _url(server, ssl_ca=pki.ca)  # TLS from the DSN's parameters
    conf = tmp_path / "binlake.toml"  # ... and gold's from the [gold] section
    conf.write_text(f'[gold]\nssl_mode = "VERIFY_CA"\nssl_ca = "{pki.ca}"\n')
    gold = _url(server, "tls_gold")
    lake = str(tmp_path / "lake")
    g = ["--conf", str(conf), "--lake", lake]
    assert main(g + ["snapshot", "--source-dsn", source]) == 0
    assert main(g + ["index", *_binlogs(server), "--gold-dsn", gold]) == 0
    assert main(g + ["init", "--gold-dsn", gold]) == 0
    assert main(g + ["gold", "--gold-dsn", gold]) == 0
    assert main(g + ["rotate", "--gold-dsn", gold]) == 0
    silver = spark.read.format("delta").load(f"{lake}/silver/binlog_events").count()
    assert silver > 0
    assert server.execute("SELECT COUNT(*) FROM tls_gold.binlog_events")[0][0] == silver
    capsys.readouterr()
    assert main(g + ["status", "--format", "json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert "error" not in status["gold"], status["gold"]
    stream_lake = str(tmp_path / "stream")
    assert main(["--conf", str(conf), "--lake", stream_lake, "stream", "--source-dsn", source,
                 "--server-id", "4243", "--stop-after", "3"]) == 0
    ids = spark.read.format("delta").load(f"{stream_lake}/bronze/binlog_events").where(
        "event_type = 'INSERT' AND table_name = 't'").count()
    assert ids == 3


_BAD = {
    "wrong_ca": (lambda s, p: _url(s, ssl_ca=p.other_ca), "ssl_ca"),
    "host_name": (lambda s, p: _url(s, ssl_mode="VERIFY_IDENTITY", ssl_ca=p.ca),
                  "VERIFY_IDENTITY"),
    "tls_off": (lambda s, p: _url(s, ssl_mode="DISABLED"), "ssl_mode=DISABLED"),
}
_COMMANDS = {
    "snapshot": lambda url, d: ["snapshot", "--source-dsn", url],
    "stream": lambda url, d: ["stream", "--source-dsn", url, "--server-id", "4244",
                              "--stop-after", "2"],
    "init": lambda url, d: ["init", "--gold-dsn", url],
    "gold": lambda url, d: ["gold", "--gold-dsn", url],
    "rotate": lambda url, d: ["rotate", "--gold-dsn", url],
    "index": lambda url, d: ["index", *d, "--gold-dsn", url],
}


@pytest.mark.parametrize("bad", sorted(_BAD))
@pytest.mark.parametrize("command", sorted(_COMMANDS))
def test_every_command_fails_clearly(spark, server, pki, tmp_path, capsys, bad, command) -> None:
    make_url, expected = _BAD[bad]
    d = _binlogs(server) if command == "index" else []
    argv = _COMMANDS[command](make_url(server, pki), d)
    assert main(["--lake", str(tmp_path / "lake")] + argv) == 1
    err = capsys.readouterr().err
    assert "binlake: error:" in err and expected in err, err
    assert f"127.0.0.1:{server.port}" in err
    assert _password(server) not in err
