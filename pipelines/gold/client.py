"""Connections to the gold MySQL/MariaDB server (pymysql), with binlake's session settings.

Every connection runs in strict mode (an over-long or invalid value is an error, never a
silent truncation), with backslash escapes on (the INSERT literals and LOAD DATA files rely on
them) and UTC as the session time zone. Connecting (timeouts, errors) is
:mod:`pipelines.mysql.client`'s, the DSN's TLS, credentials and redaction
:mod:`pipelines.mysql.dsn`'s; errors surface as :class:`SourceError` naming the server by host
and port, never the password.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.errors import ConfigError
from pipelines.mysql import client as mysql_client
from pipelines.mysql import dsn as mysql_dsn
from pipelines.mysql.dsn import DEFAULT_DATABASE, Dsn, database_of

if TYPE_CHECKING:
    from pipelines.config import Config

__all__ = ["DEFAULT_DATABASE", "connect", "database_of", "resolve_dsn"]

SESSION_SQL_MODE = "STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION"


def resolve_dsn(cfg: "Config", gold_dsn: str | None = None) -> Dsn:
    """The gold DSN from the argument, else ``gold.dsn``, completed with the ``[gold]`` TLS
    and password settings (``mysql_dsn.resolve_dsn``); ConfigError when neither is set."""
    url = gold_dsn or cfg.gold.dsn
    if not url:
        raise ConfigError("gold.dsn: no gold database (give --gold-dsn mysql://user:pw@host:port/db, "
                          "BINLAKE_GOLD_DSN or [gold] dsn)")
    return mysql_dsn.resolve_dsn(url, cfg.gold, section="gold",
                                 setting="--gold-dsn" if gold_dsn else "gold.dsn")


def connect(dsn: Dsn, *, database: bool = True, local_infile: bool = False,
            autocommit: bool = True, section: str = "gold", bulk: bool = False):
    """A connection to ``dsn`` (its database unless ``database=False``) through
    :func:`pipelines.mysql.client.connect`: the DSN's TLS and credentials, strict mode, UTC.

    With ``local_infile`` the server gets only the bytes given under their name by
    :func:`~pipelines.mysql.client.allow_local_file`. With ``bulk`` it asks a MariaDB server
    for bulk operations (``gold/bulk.py``; ``conn.bulk_operations``). Raises
    :class:`SourceError` when the server cannot be reached or refuses the login (a TLS failure names the ``gold.ssl_*``
    setting; ``section`` names whose settings they are).
    """
    return mysql_client.connect(
        dsn, section=section, database=database_of(dsn) if database else None,
        autocommit=autocommit, local_infile=local_infile, bulk=bulk,
        init_command=f"SET SESSION sql_mode = '{SESSION_SQL_MODE}', time_zone = '+00:00'")
