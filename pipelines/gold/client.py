"""Connections to the gold MySQL/MariaDB server (pymysql), with binlake's session settings.

Every connection runs in strict mode (an over-long or invalid value is an error, never a
silent truncation), with backslash escapes on (the INSERT literals and LOAD DATA files rely on
them) and UTC as the session time zone. Errors surface as :class:`SourceError` naming the
server by its redacted DSN; the password never appears.
"""

from __future__ import annotations

from typing import Any

from pipelines.config import Config, Dsn
from pipelines.errors import ConfigError, SourceError

__all__ = ["DEFAULT_DATABASE", "connect", "quote_ident", "database_of", "resolve_dsn"]

DEFAULT_DATABASE = "binlake"
SESSION_SQL_MODE = "STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION"


def quote_ident(name: str) -> str:
    """A MySQL identifier in backquotes (backquotes inside doubled)."""
    return "`" + name.replace("`", "``") + "`"


def resolve_dsn(cfg: Config, gold_dsn: str | None = None) -> Dsn:
    """The gold DSN from the argument, else ``gold.dsn``; ConfigError when neither is set."""
    url = gold_dsn or cfg.gold.dsn
    if not url:
        raise ConfigError("gold.dsn: no gold database (give --gold-dsn mysql://user:pw@host:port/db, "
                          "BINLAKE_GOLD_DSN or [gold] dsn)")
    return Dsn.parse(url, setting="--gold-dsn" if gold_dsn else "gold.dsn")


def database_of(dsn: Dsn) -> str:
    """The gold database: the DSN's, else :data:`DEFAULT_DATABASE`."""
    return dsn.database or DEFAULT_DATABASE


def connect(dsn: Dsn, *, database: bool = True, local_infile: bool = False,
            autocommit: bool = True, **kwargs: Any):
    """A pymysql connection to ``dsn`` (its database unless ``database=False``).

    Raises :class:`SourceError` when the server cannot be reached or refuses the login.
    """
    import pymysql

    try:
        return pymysql.connect(
            host=dsn.host, port=dsn.port, user=dsn.user, password=dsn.password,
            database=database_of(dsn) if database else None, charset="utf8mb4",
            autocommit=autocommit, local_infile=local_infile, connect_timeout=10,
            init_command=(f"SET SESSION sql_mode = '{SESSION_SQL_MODE}', "
                          "time_zone = '+00:00'"),
            **kwargs)
    except pymysql.err.MySQLError as exc:
        raise SourceError(f"gold {dsn}: cannot connect: {_message(exc)}") from exc


def _message(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    if len(args) >= 2:
        return f"({args[0]}) {args[1]}"
    return str(exc)
