"""A throwaway MariaDB server for end-to-end tests, benchmarks and the sample-binlog script.

:class:`MariaDBServer` initialises a fresh data directory with ``mariadb-install-db`` in a
temporary directory, starts ``mariadbd`` on ``127.0.0.1`` with a free port (running as root,
``--user=root``), with the binary log in its data directory (``binlog_format=ROW``,
``binlog_row_image=FULL``) and the server time zone at UTC so TIMESTAMP values are
deterministic. Root gets a generated password, reachable only through :meth:`connect` and
:meth:`dsn`; it is never printed (``repr`` leaves it out).

Start takes about a second (``mariadb-install-db`` ~0.6 s, server up ~0.2 s); stop is a clean
SIGTERM shutdown with ``innodb_fast_shutdown=1`` (~0.1 s). A server that does not come up raises
:class:`MariaDBStartError` with the tail of the error log.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Mapping, Sequence
from urllib.parse import quote

import pymysql

__all__ = ["MariaDBServer", "MariaDBStartError", "find_mariadbd", "mariadb_available"]

MARIADBD_CANDIDATES = ("/usr/sbin/mariadbd", "mariadbd", "/usr/sbin/mysqld")
INSTALL_DB_CANDIDATES = ("/usr/bin/mariadb-install-db", "mariadb-install-db", "mysql_install_db")
BINLOG_BASENAME = "mariadb-bin"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
# Options shared by install-db and the server: small InnoDB files keep the data dir ~30 MB.
_INNODB_OPTIONS: dict[str, str] = {
    "innodb_buffer_pool_size": "32M",
    "innodb_log_file_size": "8M",
}


class MariaDBStartError(RuntimeError):
    """The server could not be initialised or started; the message ends with its error log."""


def _which(candidates: Sequence[str]) -> str | None:
    for name in candidates:
        path = name if os.path.isabs(name) else shutil.which(name)
        if path and os.access(path, os.X_OK):
            return path
    return None


def find_mariadbd() -> str | None:
    """The path of the ``mariadbd`` binary, or None when MariaDB is not installed."""
    return _which(MARIADBD_CANDIDATES)


def mariadb_available() -> bool:
    """True when both ``mariadbd`` and ``mariadb-install-db`` are installed."""
    return find_mariadbd() is not None and _which(INSTALL_DB_CANDIDATES) is not None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no error log)"
    return "\n".join(text.splitlines()[-lines:])


class MariaDBServer:
    """One private ``mariadbd`` process with the binary log on.

    Parameters are the binlog settings a test may vary; ``extra_options`` are more
    ``[mariadbd]`` options (name → value, None for a bare flag, False to leave a default out:
    ``{"log-bin": False}`` runs without a binary log), written to the server's ``my.cnf``
    after the defaults so they win. ``workdir`` keeps the files in a given directory
    instead of a fresh temporary one (which :meth:`stop` deletes unless ``keep=True``).
    """

    def __init__(
        self,
        *,
        binlog_row_metadata: Literal["MINIMAL", "FULL"] = "FULL",
        server_id: int = 1,
        max_binlog_size: int | None = None,
        binlog_checksum: Literal["CRC32", "NONE"] = "CRC32",
        extra_options: Mapping[str, str | int | bool | None] | None = None,
        workdir: str | os.PathLike[str] | None = None,
        keep: bool = False,
    ) -> None:
        if binlog_row_metadata not in ("MINIMAL", "FULL"):
            raise ValueError(f"binlog_row_metadata must be MINIMAL or FULL: {binlog_row_metadata!r}")
        if binlog_checksum not in ("CRC32", "NONE"):
            raise ValueError(f"binlog_checksum must be CRC32 or NONE: {binlog_checksum!r}")
        self.binlog_row_metadata = binlog_row_metadata
        self.server_id = server_id
        self.max_binlog_size = max_binlog_size
        self.binlog_checksum = binlog_checksum
        self.extra_options: dict[str, str | int | bool | None] = dict(extra_options or {})
        self._given_workdir = Path(workdir) if workdir is not None else None
        self._keep = keep or workdir is not None
        self._password = secrets.token_urlsafe(18)
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self.port: int | None = None
        self.start_seconds: float | None = None

    # -- paths ---------------------------------------------------------------------------

    @property
    def workdir(self) -> Path:
        """The directory holding the data dir, my.cnf, socket and error log."""
        if self._workdir is None:
            raise RuntimeError("server not started")
        return self._workdir

    @property
    def datadir(self) -> Path:
        return self.workdir / "data"

    @property
    def binlog_dir(self) -> Path:
        """Where the binlog files are (the data directory)."""
        return self.datadir

    @property
    def tmpdir(self) -> Path:
        """The server's own temporary directory (created on first use)."""
        path = self.workdir / "tmp"
        path.mkdir(exist_ok=True)
        return path

    @property
    def socket_path(self) -> Path:
        return self.workdir / "mariadb.sock"

    @property
    def error_log(self) -> Path:
        return self.workdir / "error.log"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The running server's process id (None when it is not running)."""
        return self._proc.pid if self.running else None

    def __repr__(self) -> str:  # never shows the password
        state = f"port={self.port}" if self.running else "stopped"
        return f"<MariaDBServer {state} metadata={self.binlog_row_metadata} id={self.server_id}>"

    # -- lifecycle -----------------------------------------------------------------------

    def _options(self) -> dict[str, str | int | None]:
        opts: dict[str, str | int | None] = {
            "datadir": str(self.datadir),
            "socket": str(self.socket_path),
            # Its own temporary directory: servers sharing /tmp collide on temp-table names.
            "tmpdir": str(self.tmpdir),
            "pid-file": str(self.workdir / "mariadbd.pid"),
            "log-error": str(self.error_log),
            "port": self.port,
            "bind-address": "127.0.0.1",
            "skip-name-resolve": None,
            "user": "root",
            "log-bin": str(self.datadir / BINLOG_BASENAME),
            "server-id": self.server_id,
            "binlog-format": "ROW",
            "binlog-row-image": "FULL",
            "binlog-row-metadata": self.binlog_row_metadata,
            "binlog-checksum": self.binlog_checksum,
            "default-time-zone": "+00:00",
            "character-set-server": "utf8mb4",
            "collation-server": "utf8mb4_general_ci",
            "sync-binlog": 0,
            "innodb-flush-log-at-trx-commit": 0,
            "innodb-doublewrite": 0,
            "innodb-fast-shutdown": 1,
            "performance-schema": "OFF",
            "loose-feedback": "OFF",
            "max-connections": 50,
        }
        opts.update(_INNODB_OPTIONS)
        if self.max_binlog_size is not None:
            opts["max-binlog-size"] = self.max_binlog_size
        opts.update(self.extra_options)
        return {k: v for k, v in opts.items() if v is not False}

    def _write_cnf(self) -> Path:
        lines = ["[mariadbd]"]
        for key, value in self._options().items():
            lines.append(key if value is None else f"{key}={value}")
        path = self.workdir / "my.cnf"
        path.write_text("\n".join(lines) + "\n")
        return path

    def _install(self) -> None:
        install = _which(INSTALL_DB_CANDIDATES)
        if install is None:
            raise MariaDBStartError("mariadb-install-db not found (run `make mariadb`)")
        cmd = [
            install,
            "--no-defaults",
            f"--datadir={self.datadir}",
            "--user=root",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            f"--tmpdir={self.tmpdir}",
            *(f"--{k.replace('_', '-')}={v}" for k, v in _INNODB_OPTIONS.items()),
        ]
        log = self.workdir / "install.log"
        with log.open("wb") as out:
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
        if rc != 0:
            raise MariaDBStartError(
                f"mariadb-install-db failed (exit {rc}):\n{_tail(log)}"
            )

    def start(self) -> "MariaDBServer":
        """Initialise (first time) and start the server; return self once it accepts SQL.

        Raises :class:`MariaDBStartError` (with the error log's tail) when it does not.
        """
        if self.running:
            return self
        mariadbd = find_mariadbd()
        if mariadbd is None:
            raise MariaDBStartError("mariadbd not found (run `make mariadb`)")
        t0 = time.monotonic()
        if self._workdir is None:
            if self._given_workdir is not None:
                self._given_workdir.mkdir(parents=True, exist_ok=True)
                self._workdir = self._given_workdir
            else:
                self._workdir = Path(tempfile.mkdtemp(prefix="binlake-mariadb-"))
        try:
            if not (self.datadir / "mysql").is_dir():
                self._install()
            self._spawn_on_free_port(mariadbd)
            self._secure_root()
        except BaseException:
            self.stop()  # the message already holds the error log's tail
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def _spawn_on_free_port(self, mariadbd: str) -> None:
        last_error: MariaDBStartError | None = None
        for _attempt in range(3):  # a free port can be taken between probe and bind
            self.port = _free_port()
            try:
                self._spawn(mariadbd)
                return
            except MariaDBStartError as exc:
                last_error = exc
                if "Address already in use" not in str(exc):
                    raise
        assert last_error is not None
        raise last_error

    def _spawn(self, mariadbd: str) -> None:
        cnf = self._write_cnf()
        self.error_log.unlink(missing_ok=True)
        self._proc = subprocess.Popen(
            [mariadbd, f"--defaults-file={cnf}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._proc = None
                raise MariaDBStartError(
                    f"mariadbd exited during start-up:\n{_tail(self.error_log)}"
                )
            if self.socket_path.exists():
                try:
                    self._socket_connect().close()
                    return
                except pymysql.err.OperationalError:
                    pass
            time.sleep(0.02)
        self._kill()
        raise MariaDBStartError(
            f"mariadbd did not accept connections within {START_TIMEOUT_S:.0f} s:\n"
            f"{_tail(self.error_log)}"
        )

    def _socket_connect(self) -> pymysql.connections.Connection:
        """Root over the unix socket: empty password until :meth:`_secure_root` ran."""
        password = self._password if self._root_secured() else ""
        return pymysql.connect(
            unix_socket=str(self.socket_path), user="root", password=password,
            autocommit=True, connect_timeout=5,
        )

    def _root_secured(self) -> bool:
        return (self.workdir / ".root-secured").exists()

    def _secure_root(self) -> None:
        """Give root a password and a 127.0.0.1 account, without writing to the binlog."""
        if self._root_secured():
            return
        conn = self._socket_connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_log_bin = 0")
                # install-db also makes root@<hostname> and root@::1 without a password.
                cur.execute("SELECT host FROM mysql.user WHERE user = 'root'")
                hosts = {str(row[0]) for row in cur.fetchall()}
                for host in hosts - {"localhost", "127.0.0.1"}:
                    cur.execute("DROP USER 'root'@%s", (host,))
                cur.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'")
                for host in ("localhost", "127.0.0.1"):
                    cur.execute("ALTER USER 'root'@%s IDENTIFIED BY %s", (host, self._password))
                cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
        finally:
            conn.close()
        (self.workdir / ".root-secured").touch()

    def stop(self) -> None:
        """Shut the server down cleanly (SIGTERM), then remove a temporary work dir."""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGTERM)
                try:
                    self._proc.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self._kill()
            self._proc = None
        if self._workdir is not None and not self._keep:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)
        self._proc = None

    def __enter__(self) -> "MariaDBServer":
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- client side ---------------------------------------------------------------------

    def connect(self, db: str | None = None, **kwargs: Any) -> pymysql.connections.Connection:
        """A new autocommit pymysql connection as root over TCP to 127.0.0.1."""
        if not self.running:
            raise RuntimeError("server not started")
        params: dict[str, Any] = dict(
            host="127.0.0.1", port=self.port, user="root", password=self._password,
            database=db, autocommit=True, charset="utf8mb4", connect_timeout=10,
        )
        params.update(kwargs)
        return pymysql.connect(**params)

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None,
                *, db: str | None = None) -> list[tuple[Any, ...]]:
        """Run one statement on a fresh connection; return its rows (empty for DML/DDL)."""
        conn = self.connect(db)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return list(cur.fetchall())
        finally:
            conn.close()

    def dsn(self, db: str | None = None) -> str:
        """``mysql://root:PASSWORD@127.0.0.1:PORT/db``; contains the password, do not print."""
        if self.port is None:
            raise RuntimeError("server not started")
        path = f"/{quote(db, safe='')}" if db else "/"
        return f"mysql://root:{quote(self._password, safe='')}@127.0.0.1:{self.port}{path}"

    def binlog_files(self) -> list[Path]:
        """The binlog files listed by SHOW BINARY LOGS, oldest first, as full paths."""
        rows = self.execute("SHOW BINARY LOGS")
        return [self.binlog_dir / str(row[0]) for row in rows]

    def flush_logs(self) -> None:
        """Rotate to a new binlog file (FLUSH BINARY LOGS)."""
        self.execute("FLUSH BINARY LOGS")

    def copy_closed_binlogs(self, dest: Path, first: str | None = None) -> list[Path]:
        """Rotate, then copy every closed binlog (from ``first`` on) into ``dest``; the copies."""
        self.flush_logs()
        dest.mkdir(parents=True, exist_ok=True)
        out = []
        for f in self.binlog_files()[:-1]:  # the last one is the file being written
            if first is None or f.name >= first:
                out.append(Path(shutil.copy(f, dest / f.name)))
        return out

    def version(self) -> str:
        """The server's ``VERSION()`` string."""
        return str(self.execute("SELECT VERSION()")[0][0])
