"""The replication connection: register as a replica, ask for a binlog dump, read raw events.

mysql-replication (``pymysqlreplication.BinLogStreamReader``) sets the connection up: the
checksum handshake (``@master_binlog_checksum``), the heartbeat period
(``@master_heartbeat_period``), ``@mariadb_slave_capability``, COM_REGISTER_SLAVE, and the
dump command — COM_BINLOG_DUMP from a file and position (MySQL and MariaDB), MySQL's
COM_BINLOG_DUMP_GTID, or MariaDB's ``@slave_connect_state`` + COM_BINLOG_DUMP for a GTID
position. Its row decoding is never used: each network packet is ``0x00`` + one event exactly
as it is in the binlog file (header, body, checksum trailer), which :func:`packet_event`
frames for binlake's own :class:`~pipelines.binlog.parser.BinlogParser` — the decoder of
file mode.

Where an event sits in its file: the header's ``next_pos`` (``log_pos``) is the end of the
event, so it starts at ``next_pos - event_length``, exactly the offset file mode reads.
Events the server makes up for the replica (the ROTATE naming the file at the start of a
dump, a FORMAT_DESCRIPTION re-sent when the dump starts mid-file, MariaDB's fake GTID_LIST,
heartbeats) carry ``LOG_EVENT_ARTIFICIAL_F`` or ``log_pos = 0`` and sit nowhere in the file
(MySQL ``binlog_sender.cc``; MariaDB ``sql_repl.cc``, ``fake_rotate_event``).
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass

from pipelines.binlog.framing import EVENT_HEADER, HEADER_SIZE, EventHeader, RawEvent
from pipelines.errors import BinlogGone, ConnectionLost, SourceError
from pipelines.mysql.client import ServerUnreachable, open_binlog_dump, read_packet
from pipelines.mysql.dsn import Dsn, error_text, redact

__all__ = ["StartAt", "StreamEvent", "ReplicationConnection", "ConnectionLost", "BinlogGone",
           "packet_event", "LOG_EVENT_ARTIFICIAL_F"]

log = logging.getLogger(__name__)

LOG_EVENT_ARTIFICIAL_F = 0x20
# ER_MASTER_FATAL_ERROR_READING_BINLOG: the requested file/position/GTID is not (any longer)
# on the server, among other fatal dump errors.
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236


@dataclass(frozen=True)
class StartAt:
    """Where a dump starts: a file and position, or (``gtid`` set) a GTID position/set."""

    file: str | None = None
    pos: int = 4
    gtid: str | None = None

    @property
    def mode(self) -> str:
        return "gtid" if self.gtid else "position"

    def __str__(self) -> str:
        return f"gtid {self.gtid}" if self.gtid else f"{self.file}:{self.pos}"


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event off the wire: framed like file mode; ``artificial`` = not at a file offset."""

    raw: RawEvent
    artificial: bool


def packet_event(data: bytes) -> StreamEvent:
    """Frame one dump packet (``0x00`` + event) as a :class:`StreamEvent`.

    Raises :class:`SourceError` for a packet that is not an event.
    """
    if len(data) < 1 + HEADER_SIZE or data[0] != 0:
        raise SourceError(f"replication packet is not an event (first byte {data[:1].hex()}, "
                          f"{len(data)} bytes)")
    ts, type_code, server_id, length, next_pos, flags = EVENT_HEADER.unpack_from(data, 1)
    if length != len(data) - 1:
        raise SourceError(f"replication packet of {len(data) - 1} bytes holds an event of "
                          f"declared length {length} (type {type_code})")
    artificial = bool(flags & LOG_EVENT_ARTIFICIAL_F) or next_pos == 0
    pos = 0 if artificial or next_pos < length else next_pos - length
    header = EventHeader(ts, type_code, server_id, length, next_pos, flags, pos)
    return StreamEvent(RawEvent(header, data[1 + HEADER_SIZE:]), artificial)


class ReplicationConnection:
    """One dump connection to ``dsn`` as replica ``server_id``.

    ``heartbeat`` (seconds) asks the server for a HEARTBEAT event whenever it has had nothing
    to send that long; ``read_timeout`` (should be a few heartbeats) detects a dead peer.
    """

    def __init__(self, dsn: Dsn, server_id: int, *, is_mariadb: bool, heartbeat: float = 1.0,
                 read_timeout: float = 30.0) -> None:
        self.dsn = dsn
        self.server_id = server_id
        self.is_mariadb = is_mariadb
        self.heartbeat = heartbeat
        self.read_timeout = read_timeout
        self._conn = None

    def open(self, start: StartAt) -> None:
        """Connect, register and send the dump command for ``start``.

        Raises :class:`ConnectionLost` when the server cannot be reached (retry later).
        """
        import pymysql

        self.close()
        kwargs = dict(server_id=self.server_id, blocking=True, resume_stream=True,
                      enable_logging=False, slave_heartbeat=self.heartbeat,
                      report_slave="binlake-stream")
        if start.gtid:
            # MariaDB: @slave_connect_state; MySQL: COM_BINLOG_DUMP_GTID with the set.
            kwargs.update(auto_position=start.gtid, is_mariadb=self.is_mariadb)
        else:
            # COM_BINLOG_DUMP with file and position works on both flavours (the library's
            # MariaDB branch would ignore the position).
            kwargs.update(log_file=start.file, log_pos=start.pos, is_mariadb=False)
        where = f"{self.dsn.host}:{self.dsn.port}"
        try:
            self._conn = open_binlog_dump(self.dsn, kwargs,
                                          read_timeout=max(self.read_timeout, 2 * self.heartbeat))
        except ServerUnreachable as exc:  # down or restarting: retry
            raise ConnectionLost(str(exc)) from None
        except SourceError:  # TLS, login: retrying cannot help (an OSError, so caught first)
            raise
        except pymysql.err.MySQLError as exc:
            raise ConnectionLost(f"{where}: cannot start the binlog dump: "
                                 f"{error_text(exc, self.dsn)}") from None
        except OSError as exc:
            raise ConnectionLost(f"{where}: {redact(str(exc), self.dsn.password)}") from None

    def read(self) -> StreamEvent | None:
        """The next event (blocking; a heartbeat at least every ``heartbeat`` seconds).

        ``None`` when the server ended the dump (EOF). Raises :class:`BinlogGone` for error
        1236 and :class:`ConnectionLost` for a dropped or timed-out connection.
        """
        import pymysql

        if self._conn is None:
            raise ConnectionLost("not connected")
        try:
            pkt = read_packet(self._conn)
        except pymysql.err.MySQLError as exc:
            code = exc.args[0] if exc.args else None
            self.close()
            if code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
                raise BinlogGone(f"{self.dsn.host}:{self.dsn.port}: the server cannot send "
                                 f"the binlog from there: {error_text(exc, self.dsn)}") from None
            raise ConnectionLost(f"{self.dsn.host}:{self.dsn.port}: replication connection "
                                 f"lost: {error_text(exc, self.dsn)}") from None
        except (OSError, socket.timeout) as exc:
            self.close()
            raise ConnectionLost(f"{self.dsn.host}:{self.dsn.port}: replication connection "
                                 f"lost: {exc}") from None
        data = pkt.get_all_data()
        if pkt.is_eof_packet():
            self.close()
            return None
        return packet_event(data)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - closing a broken socket
                pass
        self._conn = None
