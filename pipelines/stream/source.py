"""The source server's control side: start-up checks, binlog list, GTID positions, gaps.

Checks at start (``validate``), as file mode's snapshot does (``source.checks.server_checks``:
``log_bin``, ``binlog_format`` ROW, ``binlog_row_image``, PARTIAL_JSON, row metadata), plus
what a replica needs: the REPLICATION SLAVE grant (refuse without it: the dump is refused)
and REPLICATION CLIENT / BINLOG MONITOR (warn without it: ``SHOW BINARY LOGS`` fails, so
purged binlogs cannot be detected), and a replica ``server_id`` other than the source's own.

Gaps (:func:`find_gap`): a resume point the server no longer has. By position: the file is
not in ``SHOW BINARY LOGS`` (purged, or the binlogs were reset). By GTID: MySQL's
``@@gtid_purged`` is not inside the GTID set already streamed; MariaDB's first binlog starts
(``BINLOG_GTID_POS(first file, 4)``) beyond a domain's last streamed sequence number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from pipelines.binlog.names import binlog_order
from pipelines.mysql.client import connect
from pipelines.mysql.dsn import Dsn, error_text
from pipelines.errors import SourceError
from pipelines.source.model import SourceCheck
from pipelines.source.checks import server_checks
from pipelines.stream.gtid import GtidState
from pipelines.stream.protocol import StartAt

__all__ = ["SourceServer", "Gap"]

_VARIABLES = ("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata",
              "binlog_row_value_options", "server_id", "server_uuid", "version",
              "binlog_checksum", "gtid_mode")


@dataclass(frozen=True)
class Gap:
    """Binlogs the server no longer has between ``wanted`` and ``resume``."""

    wanted: StartAt
    resume: StartAt
    reason: str


class SourceServer:
    """A pymysql control connection to the source (never the dump connection)."""

    def __init__(self, dsn: Dsn) -> None:
        self.dsn = dsn
        self._conn = None
        self.variables: dict[str, str] = {}
        self.version = ""

    # -- connection --------------------------------------------------------------------------
    def _cursor(self):
        if self._conn is None:
            self._conn = connect(self.dsn, section="source", read_timeout=60)
        return self._conn.cursor()

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        """Rows of one statement; text values decoded. Raises :class:`SourceError`."""
        import pymysql

        try:
            with self._cursor() as cur:
                cur.execute(sql, params)
                return [tuple(v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray))
                              else v for v in row) for row in cur.fetchall()]
        except pymysql.err.MySQLError as exc:
            self.close()
            raise SourceError(f"{self.dsn.host}:{self.dsn.port}: {sql.split()[0]} ... failed: "
                              f"{error_text(exc, self.dsn)}") from None

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001
                pass
            self._conn = None

    # -- facts ---------------------------------------------------------------------------------
    def load(self) -> "SourceServer":
        marks = ", ".join(["%s"] * len(_VARIABLES))
        self.variables = {str(k).lower(): str(v) for k, v in self.query(
            f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({marks})", list(_VARIABLES))}
        self.version = str(self.query("SELECT VERSION()")[0][0])
        return self

    @property
    def is_mariadb(self) -> bool:
        return "mariadb" in self.version.lower()

    @property
    def server_id(self) -> int | None:
        v = self.variables.get("server_id")
        return int(v) if v not in (None, "") else None

    @property
    def checksum(self) -> bool:
        return self.variables.get("binlog_checksum", "NONE").upper() not in ("NONE", "")

    def grants(self) -> list[str]:
        return [str(r[0]) for r in self.query("SHOW GRANTS")]

    def checks(self, replica_server_id: int) -> list[SourceCheck]:
        """Every start-up verdict (module docstring); ``refuse`` ones stop the stream."""
        out = server_checks(self.variables)
        text = " ".join(self.grants()).upper()
        everything = "ALL PRIVILEGES ON *.*" in text
        if everything or "REPLICATION SLAVE" in text or "REPLICATION REPLICA" in text:
            out.append(SourceCheck("ok", "grant_replication_slave", "REPLICATION SLAVE granted"))
        else:
            out.append(SourceCheck("refuse", "grant_replication_slave",
                                   f"{self.dsn.user} lacks REPLICATION SLAVE: the server refuses "
                                   "the binlog dump"))
        if everything or any(g in text for g in ("REPLICATION CLIENT", "BINLOG MONITOR",
                                                   "SUPER")):
            out.append(SourceCheck("ok", "grant_replication_client",
                                   "REPLICATION CLIENT / BINLOG MONITOR granted"))
        else:
            out.append(SourceCheck("warn", "grant_replication_client",
                                   f"{self.dsn.user} lacks REPLICATION CLIENT (MariaDB: BINLOG "
                                   "MONITOR): SHOW BINARY LOGS fails, purged binlogs cannot be "
                                   "detected on resume"))
        if self.server_id == replica_server_id:
            out.append(SourceCheck("refuse", "server_id",
                                   f"--server-id {replica_server_id} is the source's own "
                                   "server_id; choose an id no server or replica uses"))
        return out

    def binary_logs(self) -> list[tuple[str, int]]:
        """``SHOW BINARY LOGS``: (file, size), oldest first."""
        return [(str(r[0]), int(r[1])) for r in self.query("SHOW BINARY LOGS")]

    def master_status(self) -> tuple[str, int] | None:
        for sql in ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"):
            try:
                rows = self.query(sql)
            except SourceError:
                continue
            return (str(rows[0][0]), int(rows[0][1])) if rows else None
        return None

    def gtid_at(self, file: str, pos: int) -> str | None:
        """MariaDB: the GTID position at exactly ``file:pos``; MySQL: ``None`` (not derivable)."""
        if not self.is_mariadb:
            return None
        try:
            value = self.query("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))[0][0]
        except SourceError:
            return None
        return str(value) if value is not None else None

    def gtid_purged(self) -> str:
        """MySQL ``@@GLOBAL.gtid_purged`` (empty on MariaDB)."""
        if self.is_mariadb:
            return ""
        return str(self.query("SELECT @@GLOBAL.gtid_purged")[0][0] or "").replace("\n", "")

    # -- gaps ----------------------------------------------------------------------------------
    def find_gap(self, want: StartAt, gtid_state: GtidState | None = None) -> Gap | None:
        """A :class:`Gap` when the server no longer has what ``want`` asks for, else ``None``.

        Raises :class:`SourceError` when the binlog list cannot be read.
        """
        logs = self.binary_logs()
        if not logs:
            raise SourceError(f"{self.dsn.host}:{self.dsn.port}: the server lists no binlogs")
        first = logs[0][0]
        resume = StartAt(first, 4, gtid=self.gtid_at(first, 4) if want.gtid else None)
        if want.gtid:
            purged_from = self._gtid_gap(want, gtid_state, first)
            if purged_from:
                return Gap(want, resume, purged_from)
            return None
        sizes = dict(logs)
        if want.file in sizes:
            if want.pos > sizes[want.file]:
                return Gap(want, resume, f"{want.file} is only {sizes[want.file]} bytes long, "
                                         f"not {want.pos} (binlogs reset?)")
            return None
        if binlog_order(want.file or "") < binlog_order(first):
            reason = f"{want.file} was purged (the oldest binlog is {first})"
        else:
            reason = f"{want.file} is unknown to the server (binlogs reset?)"
        return Gap(want, resume, reason)

    def _gtid_gap(self, want: StartAt, state: GtidState | None, first: str) -> str | None:
        state = state or GtidState.parse(want.gtid or "", mariadb=self.is_mariadb)
        if self.is_mariadb:
            start = GtidState.parse(self.gtid_at(first, 4) or "", mariadb=True)
            behind = state.behind(start)
            if behind:
                return (f"GTIDs after {', '.join(behind)} were purged (the oldest binlog "
                        f"{first} starts at {start})")
            return None
        purged = GtidState.parse(self.gtid_purged(), mariadb=False)
        if not purged.issubset(state):
            return f"@@gtid_purged {purged} is not inside the streamed set {state}"
        return None
