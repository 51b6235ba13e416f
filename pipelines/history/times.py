"""Pure: the points a history command names — times, GTID sets, binlog positions.

Times accept ``YYYY-MM-DD HH:MM:SS[.ffffff]`` (UTC) and ISO 8601 with an offset
(``2026-11-23T10:00:00+01:00``, ``…Z``); they are returned as naive UTC datetimes, the form
silver's ``event_timestamp`` has. A bad value raises :class:`ConfigError` naming the flag.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from pipelines.binlog.names import split_binlog_name
from pipelines.errors import ConfigError
from pipelines.silver.naming import position_key

__all__ = ["parse_time", "GtidSet", "parse_gtid_set", "parse_position"]

_PLAIN = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)?$")
_MARIADB_GTID = re.compile(r"^(\d+)-(\d+)-(\d+)$")
_MYSQL_GTID = re.compile(r"^([0-9a-fA-F-]{36})((?::\d+(?:-\d+)?)+)$")


def parse_time(text: str, flag: str) -> dt.datetime:
    """``text`` as a naive UTC datetime; :class:`ConfigError` naming ``flag`` when invalid."""
    value = (text or "").strip()
    try:
        if _PLAIN.match(value):
            return dt.datetime.fromisoformat(value.replace(" ", "T"))
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise ConfigError(f"{flag} {text!r}: expected 'YYYY-MM-DD HH:MM:SS[.ffffff]' (UTC) or "
                          "ISO 8601 with an offset, e.g. 2026-11-23T10:00:00+01:00")
    return parsed.astimezone(dt.timezone.utc).replace(tzinfo=None)


@dataclass(frozen=True)
class GtidSet:
    """MariaDB ``d-s-n`` GTIDs (exact) and MySQL ``uuid:a-b`` intervals."""

    mariadb: tuple[str, ...] = ()
    mysql: tuple[tuple[str, int, int], ...] = ()

    def contains(self, gtid: str | None) -> bool:
        if not gtid:
            return False
        if gtid in self.mariadb:
            return True
        uuid, _, n = gtid.rpartition(":")
        return any(u == uuid.lower() and a <= int(n) <= b for u, a, b in self.mysql
                   if n.isdigit())

    def sql_predicate(self, column: str = "gtid") -> str:
        """A Spark SQL predicate selecting rows whose ``column`` is in the set."""
        parts = []
        if self.mariadb:
            parts.append(f"{column} IN (" + ", ".join(f"'{g}'" for g in self.mariadb) + ")")
        for uuid, a, b in self.mysql:
            parts.append(f"(lower(substring_index({column}, ':', 1)) = '{uuid}' AND "
                         f"CAST(substring_index({column}, ':', -1) AS BIGINT) "
                         f"BETWEEN {a} AND {b})")
        return "(" + " OR ".join(parts) + ")"


def parse_gtid_set(text: str, flag: str = "--gtid") -> GtidSet:
    """One GTID or a set: ``0-1-5,0-1-9`` (MariaDB) or ``uuid:1-5:9,uuid2:3`` (MySQL)."""
    mariadb: list[str] = []
    mysql: list[tuple[str, int, int]] = []
    for item in (text or "").replace("\n", "").split(","):
        item = item.strip()
        if not item:
            continue
        m = _MARIADB_GTID.match(item)
        if m:
            mariadb.append(f"{int(m.group(1))}-{int(m.group(2))}-{int(m.group(3))}")
            continue
        m = _MYSQL_GTID.match(item)
        if m:
            for interval in m.group(2).strip(":").split(":"):
                a, _, b = interval.partition("-")
                lo, hi = int(a), int(b or a)
                if lo > hi:
                    raise ConfigError(f"{flag} {text!r}: interval {interval} runs backwards")
                mysql.append((m.group(1).lower(), lo, hi))
            continue
        raise ConfigError(f"{flag} {text!r}: {item!r} is neither a MariaDB GTID (domain-server-"
                          "seq) nor a MySQL one (uuid:n or uuid:a-b)")
    if not mariadb and not mysql:
        raise ConfigError(f"{flag}: empty GTID set")
    return GtidSet(tuple(mariadb), tuple(mysql))


def parse_position(text: str, flag: str = "--pos") -> tuple[str, int, int]:
    """``FILE:POS`` → (file, pos, key on silver's seq scale); :class:`ConfigError` if invalid."""
    name, sep, pos = (text or "").rpartition(":")
    if not sep or not name or not pos.isdigit():
        raise ConfigError(f"{flag} {text!r}: expected FILE:POS, e.g. mysql-bin.000042:1234")
    if split_binlog_name(name) is None:
        raise ConfigError(f"{flag} {text!r}: the file name needs its numeric suffix "
                          "(mysql-bin.000042)")
    return name, int(pos), position_key(name, int(pos))
