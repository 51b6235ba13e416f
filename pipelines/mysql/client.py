"""binlake's one MySQL/MariaDB client: connecting.

Every server connection — the source's snapshot and control connections, the stream's
replication connection, gold's DDL and export connections — is opened by :func:`connect`
from a :class:`~pipelines.mysql.dsn.Dsn` (``dsn.py``: its TLS, credentials and redaction), so
TLS, credentials, timeouts and error messages are the same everywhere.

A connection made with ``local_infile`` answers LOAD DATA LOCAL only with the bytes
:func:`allow_local_file` gives; one made with ``bulk`` asks a MariaDB server for bulk
operations at login (their packets are ``bulk.py``'s). :func:`open_binlog_dump` sets up the
stream's replication connection; :func:`read_packet` is the one read of a raw packet.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, Iterator, Mapping

from pipelines.errors import SourceError
from pipelines.mysql.dsn import Dsn, error_text, ssl_context

__all__ = [
    "connect", "allow_local_file", "LocalFileRefused", "ServerUnreachable", "open_binlog_dump",
    "read_packet", "offers_bulk_operations",
]

# -- connecting --------------------------------------------------------------------------

_ACCESS_DENIED = 1045
_INSECURE_TRANSPORT = 3159  # MySQL: ER_SECURE_TRANSPORT_REQUIRED (MariaDB answers 1045)
# CR_CONN_HOST_ERROR, CR_SERVER_GONE_ERROR, CR_SERVER_LOST, CR_CONNECTION_ERROR
_NETWORK_ERRORS = (2003, 2006, 2013, 2002)
_LOCAL_PACKET = 1 << 20  # LOAD DATA LOCAL packets sent from memory


class ServerUnreachable(SourceError):
    """The server could not be reached at all (network; not TLS, not the login): a later
    attempt may succeed."""


class LocalFileRefused(SourceError):
    """The server asked for a local file other than the one the client is sending."""


def _bulk_connection_class():
    """A pymysql Connection that asks a MariaDB server for ``COM_STMT_BULK_EXECUTE``
    (``gold/bulk.py``). MariaDB reads a client's extended capabilities from the last 4 of the
    23 reserved bytes of its handshake response, when the response leaves out ``CLIENT_MYSQL``
    (bit 0, pymysql's ``LONG_PASSWORD``, which no server since 4.1 reads); pymysql sends zeros
    there and sets the bit. This subclass sets ``MARIADB_CLIENT_STMT_BULK_OPERATIONS`` and
    clears the bit, only for a server that takes bulk commands (:func:`offers_bulk_operations`,
    from its greeting); ``conn.bulk_operations`` says it did. Others get pymysql's response."""
    import pymysql

    class _BulkConnection(pymysql.connections.Connection):
        bulk_operations = False
        _asking = False

        def _request_authentication(self):
            self._asking = self.bulk_operations = offers_bulk_operations(self)
            try:
                return super()._request_authentication()
            finally:
                self._asking = False

        def write_packet(self, payload):
            # The handshake response (and before TLS its first 32 bytes alone, the SSL request)
            # begins with flags, packet size, charset and the 23 reserved bytes.
            if self._asking and len(payload) >= _HANDSHAKE_HEAD:
                head = bytearray(payload[:_HANDSHAKE_HEAD])
                head[0] &= ~_CLIENT_MYSQL & 0xFF
                head[28:32] = (_BULK_OPERATIONS >> 32).to_bytes(4, "little")
                payload = bytes(head) + bytes(payload[_HANDSHAKE_HEAD:])
                self._asking = len(payload) == _HANDSHAKE_HEAD  # the SSL request: one more
            return super().write_packet(payload)

    return _BulkConnection


def offers_bulk_operations(conn) -> bool:
    """Whether ``conn``'s server takes ``COM_STMT_BULK_EXECUTE``: it greeted as MariaDB
    10.2.7 or later (its version after the ``5.5.5-`` replication prefix) with extended
    capabilities (it leaves ``CLIENT_MYSQL`` out)."""
    version = conn.server_version
    if "MariaDB" not in version or conn.server_capabilities & _CLIENT_MYSQL:
        return False
    m = re.match(r"(?:5\.5\.5-)?(\d+)\.(\d+)\.(\d+)", version)
    return m is not None and tuple(int(x) for x in m.groups()) >= (10, 2, 7)


_CLIENT_MYSQL = 1
_BULK_OPERATIONS = 1 << 34  # MARIADB_CLIENT_STMT_BULK_OPERATIONS
_HANDSHAKE_HEAD = 32


def _guarded_connection_class():
    """A pymysql Connection that answers a LOAD DATA LOCAL request only for the one name
    :func:`allow_local_file` gives, with its bytes. pymysql has no public hook for its
    local-infile handler (``MySQLResult._read_load_local_packet``); this subclass is the one
    place that replaces it."""
    import pymysql
    from pymysql.connections import MySQLResult
    from pymysql.protocol import LoadLocalPacketWrapper

    class _OneFileResult(MySQLResult):
        def _read_load_local_packet(self, first_packet):
            conn = self.connection
            asked = LoadLocalPacketWrapper(first_packet).filename.decode("utf-8", "replace")
            if conn.allowed_local_file is not None and asked == conn.allowed_local_file:
                return self._send_from_memory(conn, memoryview(conn.local_file_data))
            conn.refused_local_files.append(asked)
            conn.write_packet(b"")  # an empty file: the server gets nothing
            conn._read_packet()  # its OK for zero rows (an error packet raises here)
            raise LocalFileRefused(f"the server asked for local file {asked!r}, which this "
                                   "client did not send: refused, nothing was read")

        def _send_from_memory(self, conn, data: memoryview) -> None:
            # As pymysql's own sender, but from memory and in packets of up to 1 MiB (it reads
            # a file in 16 KiB ones): fewer round trips through Python and the server's reader.
            step = max(min(conn.max_allowed_packet, _LOCAL_PACKET), 1)
            try:
                for at in range(0, len(data), step):
                    conn.write_packet(data[at:at + step])
            finally:
                conn.write_packet(b"")  # the end of the file
                ok = conn._read_packet()
            if not ok.is_ok_packet():
                raise pymysql.err.OperationalError(2014, "Commands out of sync")
            self._read_ok_packet(ok)

    class GuardedConnection(pymysql.connections.Connection):
        allowed_local_file: str | None = None
        local_file_data: bytes | None = None

        def __init__(self, *args, **kwargs):
            self.refused_local_files: list[str] = []
            super().__init__(*args, **kwargs)

        def _read_query_result(self, unbuffered=False):
            self._result = None
            result = _OneFileResult(self)
            if unbuffered:
                result.init_unbuffered_query()
            else:
                result.read()
            self._result = result
            if result.server_status is not None:
                self.server_status = result.server_status
            return result.affected_rows

    return GuardedConnection


@contextlib.contextmanager
def allow_local_file(conn, name: str, data: bytes) -> Iterator[None]:
    """Within the block, a ``LOAD DATA LOCAL INFILE`` on ``conn`` that asks for ``name`` —
    only that name — gets ``data``, sent from memory: no file is ever read or written, so a
    server asking for another path gets nothing (:class:`LocalFileRefused`)."""
    conn.allowed_local_file, conn.local_file_data = name, data
    try:
        yield
    finally:
        conn.allowed_local_file = conn.local_file_data = None


def connect(dsn: Dsn, *, section: str = "source", database: str | None = None,
            autocommit: bool = True, connect_timeout: float = 10,
            read_timeout: float | None = None, local_infile: bool = False,
            init_command: str | None = None, charset: str = "utf8mb4", bulk: bool = False):
    """A pymysql connection to ``dsn`` with its TLS and credentials.

    ``section`` (``source`` / ``gold``) names the settings in error messages. With
    ``local_infile`` the connection sends only the bytes :func:`allow_local_file` gives.
    With ``bulk`` it asks a MariaDB server for bulk operations (:func:`_bulk_connection_class`;
    ``conn.bulk_operations`` says whether it did).
    Raises :class:`SourceError` (host:port, never the password; a TLS failure names the
    ``ssl_*`` setting) or :class:`ConfigError` for unreadable certificate files.
    """
    import pymysql

    ctx = ssl_context(dsn.tls, section=section)
    kwargs: dict[str, Any] = dict(
        host=dsn.host, port=dsn.port, user=dsn.user, password=dsn.password,
        database=database, charset=charset, autocommit=autocommit,
        connect_timeout=connect_timeout, read_timeout=read_timeout,
        local_infile=local_infile, init_command=init_command)
    if ctx is not None:
        kwargs["ssl"] = ctx
    elif dsn.tls.mode == "DISABLED":
        kwargs["ssl_disabled"] = True
    cls = (_guarded_connection_class() if local_infile else _bulk_connection_class() if bulk
           else pymysql.connections.Connection)
    try:
        return cls(**kwargs)
    except pymysql.err.MySQLError as exc:
        tls = _tls_message(dsn, section, exc)
        args = getattr(exc, "args", ())
        kind = (ServerUnreachable if tls is None and args and args[0] in _NETWORK_ERRORS
                else SourceError)
        raise kind(f"{section} {dsn.host}:{dsn.port}: cannot connect as {dsn.user}: "
                   f"{tls or _login_message(dsn, section, exc)}") from None


def _login_message(dsn: Dsn, section: str, exc: BaseException) -> str:
    text = error_text(exc, dsn)
    args = getattr(exc, "args", ())
    if args and args[0] == _INSECURE_TRANSPORT:  # MySQL names the cause itself
        text += f" (set ssl_mode: {section}.ssl_mode / ?ssl_mode=REQUIRED or VERIFY_*)"
    if args and args[0] == _ACCESS_DENIED:
        where = dsn.password_from or "none given"
        text += f" [password from: {where}]"
        if dsn.tls.mode == "DISABLED":
            text += (f"; ssl_mode=DISABLED ({section}.ssl_mode / ?ssl_mode=): a server with "
                     "require_secure_transport=ON refuses plain connections this same way")
    return text


def _tls_message(dsn: Dsn, section: str, exc: BaseException) -> str | None:
    """What to say when the TLS handshake (not the login) failed; None when it did not."""
    import ssl

    orig = getattr(exc, "original_exception", None)
    if isinstance(orig, ssl.SSLCertVerificationError):
        why = orig.verify_message or str(orig)
        if "mismatch" in why.lower() or "hostname" in why.lower():
            return (f"TLS: the server's certificate is not valid for host {dsn.host!r} "
                    f"(ssl_mode=VERIFY_IDENTITY; {section}.ssl_mode / ?ssl_mode=): {why}")
        return (f"TLS: the server's certificate does not verify against "
                f"{dsn.tls.ca or 'the system CAs'} ({section}.ssl_ca / ?ssl_ca=, "
                f"ssl_mode={dsn.tls.mode}): {why}")
    if isinstance(orig, ssl.SSLError):
        return f"TLS handshake failed (ssl_mode={dsn.tls.mode}; {section}.ssl_*): {orig}"
    args = getattr(exc, "args", ())
    if args and args[0] == 2026:  # CR_SSL_CONNECTION_ERROR: the server offers no TLS
        return (f"TLS: ssl_mode={dsn.tls.mode} ({section}.ssl_mode / ?ssl_mode=) but the "
                f"server does not offer TLS")
    return None


# -- the replication connection ----------------------------------------------------------

def open_binlog_dump(dsn: Dsn, reader_kwargs: Mapping[str, Any], *, read_timeout: float):
    """Open a replication connection to ``dsn`` and send the dump command; return it.

    mysql-replication (1.0.17) does the set-up (checksum handshake, heartbeat period,
    MariaDB capability, COM_REGISTER_SLAVE, COM_BINLOG_DUMP[_GTID]). Its public API only
    yields decoded events (``fetchone``, which also opens an information_schema connection);
    no public call sets the dump up and hands back raw packets, so the name-mangled
    ``__connect_to_stream`` is used — here only. The connection itself is made by
    :func:`connect` through the public ``pymysql_wrapper`` hook, so it has the DSN's TLS.
    Raises pymysql errors and ``OSError`` as they come (the caller maps them).
    """
    from pymysqlreplication import BinLogStreamReader

    made: list[Any] = []

    def wrapper(**_settings):
        conn = connect(dsn, section="source", read_timeout=read_timeout,
                       charset=str(_settings.get("charset") or "utf8mb4"))
        made.append(conn)
        return conn

    reader = BinLogStreamReader({}, pymysql_wrapper=wrapper, **reader_kwargs)
    set_up = getattr(reader, "_BinLogStreamReader__connect_to_stream", None)
    if set_up is None:  # pragma: no cover - a mysql-replication without it
        raise SourceError("this mysql-replication version has no dump set-up to reuse "
                          "(need 1.0.17)")
    try:
        set_up()
    except BaseException:
        for conn in made:
            with contextlib.suppress(Exception):
                conn.close()
        raise
    return made[-1]


def read_packet(conn):
    """The next packet of a connection (a dump's; a prepared statement's answers). pymysql
    exposes no public packet read: its ``_read_packet`` is used here only."""
    return conn._read_packet()
