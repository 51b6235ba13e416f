"""binlake's one MySQL/MariaDB client: DSNs, credentials, TLS, connecting, redaction.

Every server connection — the source's snapshot and control connections, the stream's
replication connection, gold's DDL and export connections — is opened by :func:`connect`
from a :class:`Dsn`, so TLS, credentials, timeouts and error messages are the same everywhere.

DSN: ``mysql://user[:password]@host[:port]/[db]`` with optional query parameters
``?ssl_mode=…&ssl_ca=PATH&ssl_cert=PATH&ssl_key=PATH``.

TLS (``ssl_mode``, MySQL's client names): ``DISABLED`` plain; ``PREFERRED`` (the default
without ``ssl_ca``) TLS when the server offers it, certificate not checked; ``REQUIRED`` TLS or
fail, certificate not checked; ``VERIFY_CA`` (the default when ``ssl_ca`` is given) the chain
must verify against ``ssl_ca`` (else the system's CAs); ``VERIFY_IDENTITY`` also the host name
must be in the certificate. ``ssl_cert`` + ``ssl_key`` present a client certificate (users
created ``REQUIRE X509``). The SSL context is built here, never left to the driver's defaults:
pymysql without settings negotiates TLS but verifies nothing.

Credentials (:func:`resolve_dsn`), first found wins: the DSN's own password; the section's
``password`` (``BINLAKE_SOURCE_PASSWORD`` / ``BINLAKE_GOLD_PASSWORD``); ``password_file`` (its
first line); the ``[client]`` section of ``defaults_file`` (``--defaults-file``), else of
``~/.my.cnf``. A password never appears in ``str``/``repr`` of a :class:`Dsn`, in error
messages (:func:`redact`) or in logs; :attr:`Dsn.password_from` says where it came from.

Prepared statements (:func:`prepare_statement`, :func:`send_command`, :func:`read_ok`) are
the packets of MariaDB's bulk INSERT, which gold's export sends (``gold/bulk.py``); a
connection asks for it at login with ``connect(..., bulk=True)``.
"""

from __future__ import annotations

import configparser
import contextlib
import os
import re
import struct
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping, Protocol
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from pipelines.errors import ConfigError, SourceError

__all__ = [
    "SSL_MODES", "Tls", "Dsn", "ServerSettings", "resolve_dsn",
    "read_option_file", "redact", "redact_urls", "error_text", "ssl_context", "connect",
    "allow_local_file", "LocalFileRefused", "ServerUnreachable", "open_binlog_dump",
    "read_dump_packet", "offers_bulk_operations", "prepare_statement", "send_command", "read_ok",
]

SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
_TLS_KEYS = ("ssl_mode", "ssl_ca", "ssl_cert", "ssl_key")
_ACCESS_DENIED = 1045
_INSECURE_TRANSPORT = 3159  # MySQL: ER_SECURE_TRANSPORT_REQUIRED (MariaDB answers 1045)
# CR_CONN_HOST_ERROR, CR_SERVER_GONE_ERROR, CR_SERVER_LOST, CR_CONNECTION_ERROR
_NETWORK_ERRORS = (2003, 2006, 2013, 2002)


@dataclass(frozen=True)
class Tls:
    """The TLS settings of one server; ``mode`` is one of :data:`SSL_MODES`."""

    mode: str = "PREFERRED"
    ca: str = ""
    cert: str = ""
    key: str = ""

    @classmethod
    def of(cls, values: Mapping[str, str], *, setting: str) -> "Tls":
        """From ``ssl_*`` keys (empty = unset); ConfigError names ``setting``.``key``."""
        ca, cert, key = (str(values.get(k) or "") for k in ("ssl_ca", "ssl_cert", "ssl_key"))
        mode = str(values.get("ssl_mode") or ("VERIFY_CA" if ca else "PREFERRED")).upper()
        if mode not in SSL_MODES:
            raise ConfigError(f"{setting}ssl_mode: expected one of {', '.join(SSL_MODES)}, "
                              f"got {values.get('ssl_mode')!r}")
        if bool(cert) != bool(key):
            raise ConfigError(f"{setting}ssl_cert and {setting}ssl_key go together "
                              "(a client certificate needs its key)")
        if mode == "DISABLED" and (ca or cert):
            raise ConfigError(f"{setting}ssl_mode: DISABLED contradicts ssl_ca/ssl_cert")
        return cls(mode, ca, cert, key)

    @property
    def verifies(self) -> bool:
        return self.mode in ("VERIFY_CA", "VERIFY_IDENTITY")


@dataclass(frozen=True)
class Dsn:
    """A MySQL/MariaDB DSN ``mysql://user:password@host:port/[db][?ssl_mode=…]``.

    The password never prints (``str`` is redacted, ``repr`` leaves it out).
    """

    host: str
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    database: str | None = None
    tls: Tls = Tls()
    user_given: bool = field(default=True, repr=False, compare=False)
    password_from: str = field(default="dsn", repr=False, compare=False)

    @classmethod
    def parse(cls, url: str, *, setting: str = "dsn") -> "Dsn":
        """Parse ``url``; :class:`ConfigError` names ``setting`` (never echoes the URL)."""
        parts = urlsplit(url)
        if parts.scheme not in ("mysql", "mariadb"):
            raise ConfigError(f"{setting}: expected mysql://user:password@host:port/[db], "
                              f"got scheme {parts.scheme!r}")
        try:
            port = parts.port or 3306
        except ValueError as exc:
            raise ConfigError(f"{setting}: invalid port") from exc
        if not parts.hostname:
            raise ConfigError(f"{setting}: no host in DSN")
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        unknown = sorted(set(query) - set(_TLS_KEYS))
        if unknown:
            raise ConfigError(f"{setting}: unknown DSN parameter(s) {', '.join(unknown)} "
                              f"(known: {', '.join(_TLS_KEYS)})")
        db = parts.path.lstrip("/") or None
        return cls(parts.hostname, port, unquote(parts.username or "root"),
                   unquote(parts.password or ""), unquote(db) if db else None,
                   Tls.of(query, setting=f"{setting}: ?"), user_given=bool(parts.username),
                   password_from="dsn" if parts.password else "")

    def url(self) -> str:
        """The full URL again, password and TLS parameters included (for engine tasks)."""
        auth = quote(self.user, safe="")
        if self.password:
            auth += ":" + quote(self.password, safe="")
        out = f"mysql://{auth}@{self.host}:{self.port}/{quote(self.database or '', safe='')}"
        params = {k: v for k, v in (("ssl_mode", self.tls.mode), ("ssl_ca", self.tls.ca),
                                    ("ssl_cert", self.tls.cert), ("ssl_key", self.tls.key)) if v}
        return out + ("?" + urlencode(params) if params else "")

    def __str__(self) -> str:
        pw = ":***" if self.password else ""
        tls = "" if self.tls.mode == "PREFERRED" else f"?ssl_mode={self.tls.mode}"
        return f"mysql://{self.user}{pw}@{self.host}:{self.port}/{self.database or ''}{tls}"


class ServerSettings(Protocol):
    """The config section keys :func:`resolve_dsn` reads (``[source]``, ``[gold]``)."""

    ssl_mode: str
    ssl_ca: str
    ssl_cert: str
    ssl_key: str
    password: str
    password_file: str
    defaults_file: str


def read_option_file(path: str, *, setting: str) -> dict[str, str]:
    """The ``[client]`` keys of a MySQL option file (``my.cnf`` syntax; quotes stripped).

    Raises :class:`ConfigError` naming ``setting`` and the file when it cannot be read.
    """
    parser = configparser.ConfigParser(allow_no_value=True, strict=False, interpolation=None,
                                       comment_prefixes=("#", ";"), inline_comment_prefixes=None)
    try:
        with open(path, encoding="utf-8") as fh:
            text = "\n".join(ln for ln in fh.read().splitlines()
                             if not ln.lstrip().startswith("!"))  # !include: not followed
        parser.read_string(text, source=path)
    except (OSError, UnicodeDecodeError, configparser.Error) as exc:
        raise ConfigError(f"{setting} {path}: cannot read the option file "
                          f"({type(exc).__name__})") from None
    if not parser.has_section("client"):
        return {}
    out = {}
    for key, value in parser.items("client"):
        value = (value or "").strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key.replace("-", "_")] = value
    return out


def _password_file(path: str, setting: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            first = fh.readline()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{setting} {path}: cannot read ({type(exc).__name__})") from None
    return first.rstrip("\r\n")


def resolve_dsn(url: str, settings: ServerSettings | None, *, setting: str, section: str,
                env: Mapping[str, str] | None = None) -> Dsn:
    """Parse ``url`` and complete it from ``settings`` (the ``[section]`` config keys).

    TLS: the DSN's ``?ssl_*`` parameters win over the section's ``ssl_*`` keys. Password and
    (when the DSN names none) user: the module docstring's order. Raises :class:`ConfigError`
    naming the setting or file at fault.
    """
    dsn = Dsn.parse(url, setting=setting)
    if settings is None:
        return dsn
    query = dict(parse_qsl(urlsplit(url).query))
    if not any(k in query for k in _TLS_KEYS):
        values = {k: getattr(settings, k, "") for k in _TLS_KEYS}
        dsn = replace(dsn, tls=Tls.of(values, setting=f"{section}."))
    if dsn.password:
        return dsn
    if settings.password:
        return replace(dsn, password=settings.password,
                       password_from=f"{section}.password / BINLAKE_{section.upper()}_PASSWORD")
    if settings.password_file:
        return replace(dsn, password=_password_file(settings.password_file,
                                                    f"{section}.password_file"),
                       password_from=f"{section}.password_file {settings.password_file}")
    env = os.environ if env is None else env
    path, what = settings.defaults_file, f"{section}.defaults_file"
    if not path:
        home = env.get("HOME") or os.path.expanduser("~")
        path, what = os.path.join(home, ".my.cnf"), "~/.my.cnf"
        if not os.path.isfile(path):
            return dsn
    client = read_option_file(path, setting=what)
    user = dsn.user if dsn.user_given else client.get("user") or dsn.user
    if "password" not in client:
        return replace(dsn, user=user)
    return replace(dsn, user=user, password=client["password"],
                   password_from=f"[client] of {what} {path}")


# -- redaction ---------------------------------------------------------------------------

def redact(text: str, *secrets: str) -> str:
    """``text`` with every secret (and its URL-quoted form) replaced by ``***``; secrets
    under 4 characters are left alone (masking them would garble every message)."""
    for secret in secrets:
        if len(secret) >= 4:
            for form in {secret, quote(secret, safe="")}:
                text = text.replace(form, "***")
    return text


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*):[^@\s]*@")
_PASSWORD_FLAG = re.compile(r"(--?password[= ])\S+")


def redact_urls(text: str) -> str:
    """``text`` (a command line, a log line) with the password of every ``scheme://user:pw@``
    URL and of every ``--password X`` / ``--password=X`` replaced by ``***``."""
    return _PASSWORD_FLAG.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", text))


def error_text(exc: BaseException, dsn: Dsn) -> str:
    """A driver error's message (``(code) text``), with the password masked."""
    args = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[0], int):
        text = f"({args[0]}) {args[1]}"
    else:
        text = str(args[-1] if args else exc)
    return redact(text, dsn.password)


# -- TLS ---------------------------------------------------------------------------------

def ssl_context(tls: Tls, *, section: str = "source"):
    """The ``ssl.SSLContext`` for ``tls`` (None for DISABLED / PREFERRED: the driver's own).

    Raises :class:`ConfigError` naming ``section.ssl_ca`` / ``ssl_cert`` when a file is bad.
    """
    import ssl

    if tls.mode in ("DISABLED", "PREFERRED") and not tls.cert:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls.verifies:
        try:
            if tls.ca:
                ctx.load_verify_locations(cafile=tls.ca)
            else:
                ctx.load_default_certs()
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{section}.ssl_ca {tls.ca}: not a readable PEM CA file "
                              f"({exc.__class__.__name__}: {exc})") from None
        # Server certificates made by older tools lack what X509_STRICT wants (as pymysql).
        ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
        ctx.check_hostname = tls.mode == "VERIFY_IDENTITY"
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.cert:
        try:
            ctx.load_cert_chain(tls.cert, tls.key)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{section}.ssl_cert/ssl_key {tls.cert}: not a readable PEM "
                              f"certificate and key ({exc.__class__.__name__})") from None
    return ctx


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


# -- connecting --------------------------------------------------------------------------

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


def read_dump_packet(conn):
    """The next packet of a dump connection. pymysql exposes no public packet read: its
    ``_read_packet`` is used here only."""
    return conn._read_packet()


# -- prepared statements and commands (MariaDB's bulk INSERT, gold/bulk.py) --------------------
# pymysql has no prepared statements; these speak the three packets gold's bulk method needs.

_COM_STMT_PREPARE = 0x16
_DEPRECATE_EOF = 1 << 24  # CLIENT_DEPRECATE_EOF: no EOF packet after column definitions
_MAX_PACKET = 0xFFFFFF  # a protocol packet's payload; a longer command continues in the next


def prepare_statement(conn, sql: str) -> tuple[int, int]:
    """COM_STMT_PREPARE on a pymysql connection: (statement id, parameter count). An error
    packet raises the server's error as pymysql does."""
    conn._execute_command(_COM_STMT_PREPARE, sql)
    first = conn._read_packet().get_all_data()
    stmt_id, columns, params = struct.unpack("<IHH", first[1:9])
    eof = not conn.client_flag & _DEPRECATE_EOF
    for count in (params, columns):  # their definitions, each list closed by an EOF packet
        for _ in range(count + (1 if count and eof else 0)):
            conn._read_packet()
    return stmt_id, params


def send_command(conn, command: int, head: bytes, body: memoryview) -> None:
    """As pymysql's ``_execute_command``: ``command``, then ``head`` and ``body`` as its
    payload, in packets of at most 16 MiB; but the body goes to the socket from the memory
    that holds it (an Arrow buffer), without being joined into one bytes object first."""
    pending = conn._result
    if conn._sock is None or (pending is not None and (pending.unbuffered_active
                                                       or pending.has_next)):
        conn._execute_command(command, head + bytes(body))  # pymysql settles those
        return
    conn._result = None
    first = bytes([command]) + head
    total, at, seq = len(first) + len(body), 0, 0
    while True:
        size = min(_MAX_PACKET, total - at)
        conn._write_bytes(struct.pack("<I", size)[:3] + bytes([seq]))
        end = at + size
        if at < len(first):  # only the first packet: the head is far below 16 MiB
            conn._write_bytes(first)
            at = len(first)
        if end > at:
            conn._write_bytes(body[at - len(first):end - len(first)])
        at, seq = end, (seq + 1) % 256
        if at == total and size < _MAX_PACKET:  # a full last packet is followed by an empty one
            break
    conn._next_seq_id = seq


def read_ok(conn) -> int:
    """The rows the server's OK packet reports affected; an error packet raises."""
    from pymysql.protocol import OKPacketWrapper

    return OKPacketWrapper(conn._read_packet()).affected_rows
