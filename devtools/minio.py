"""A throwaway MinIO server (S3 API) for the object-store tests.

:class:`MinioServer` starts ``minio server`` on ``127.0.0.1`` with a free port, a fresh
temporary data directory and a root user and password generated at start (never printed;
``repr`` leaves them out), waits for ``/minio/health/live``, and on :meth:`stop` terminates it
and deletes the directory. :meth:`make_bucket` creates a bucket with the S3 API itself.

The binary is the pinned build ``make minio`` makes (``go install
github.com/minio/minio@MINIO_VERSION`` into ``~/.cache/binlake/minio-<version>/``); the
environment variable ``BINLAKE_MINIO_BIN`` names another one. Start takes ~1-2 s. While
``make test`` builds it in the background (``build.pid`` beside the binary, ``build.rc`` once
it ended), a start waits for the build (:func:`wait_for_build`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType

__all__ = ["MinioServer", "MinioStartError", "MINIO_VERSION", "find_minio", "wait_for_build"]

# The Makefile reads this line (target `minio`): change the version here only.
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"
START_TIMEOUT_S = 60.0
BUILD_TIMEOUT_S = 30 * 60.0  # the longest a start waits for a background build


class MinioStartError(RuntimeError):
    """The binary is missing or the server did not come up; the message ends with its log."""


def default_binary() -> Path:
    return Path.home() / ".cache" / "binlake" / f"minio-{MINIO_VERSION}" / "minio"


def find_minio() -> str | None:
    """``BINLAKE_MINIO_BIN``, else the pinned build of ``make minio``; None when neither."""
    for path in (os.environ.get("BINLAKE_MINIO_BIN", ""), str(default_binary())):
        if path and os.access(path, os.X_OK):
            return path
    return None


def _building(where: Path) -> bool:
    """Whether a background build (``make minio-background``) into ``where`` still runs."""
    try:
        pid = int((where / "build.pid").read_text().strip())
    except (OSError, ValueError):
        return False
    if (where / "build.rc").exists():
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def wait_for_build(timeout: float = BUILD_TIMEOUT_S) -> None:
    """Wait while ``make test``'s background build of the binary (``BINLAKE_MINIO_BIN``, else
    the pinned one) runs (a line on stderr says so); raise :class:`MinioStartError` with its log's end when it failed."""
    where = Path(os.environ.get("BINLAKE_MINIO_BIN", "").strip() or default_binary()).parent
    if not _building(where):
        return
    import sys

    print(f"\nminio: waiting for its build in the background (log {where / 'build.log'})",
          file=sys.stderr, flush=True)
    began = time.monotonic()
    while _building(where):
        if time.monotonic() - began > timeout:
            raise MinioStartError(f"the MinIO build into {where} did not end within "
                                  f"{timeout / 60:.0f} min")
        time.sleep(2.0)
    rc = (where / "build.rc").read_text().strip() if (where / "build.rc").exists() else "?"
    if rc != "0":
        tail = (where / "build.log").read_text(errors="replace")[-2000:] \
            if (where / "build.log").exists() else ""
        raise MinioStartError(f"the MinIO build into {where} failed (exit {rc}):\n{tail}")
    print(f"minio: built in the background, waited {time.monotonic() - began:.0f} s",
          file=sys.stderr, flush=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MinioServer:
    """One private ``minio server`` process; use as a context manager."""

    def __init__(self, region: str = "us-east-1", *,
                 tls: tuple[str, str] | None = None) -> None:
        """``tls``: (certificate, key) PEM files to serve HTTPS with, for the name
        ``localhost`` (the endpoint is then ``https://localhost:PORT``)."""
        self.region = region
        self.tls = tls
        self.user = "binlake-" + secrets.token_hex(4)
        self._password = secrets.token_urlsafe(24)
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self.port: int | None = None

    def __repr__(self) -> str:  # never shows the password
        state = f"port={self.port}" if self.running else "stopped"
        return f"<MinioServer {state}>"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def endpoint(self) -> str:
        if self.tls:
            return f"https://localhost:{self.port}"
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The AWS environment a client of this server needs (credentials, endpoint, region)."""
        return {"AWS_ACCESS_KEY_ID": self.user, "AWS_SECRET_ACCESS_KEY": self._password,
                "AWS_REGION": self.region, "AWS_ENDPOINT_URL": self.endpoint}

    @property
    def secret(self) -> str:
        """The root password (for tests asserting it never shows up)."""
        return self._password

    def start(self) -> "MinioServer":
        wait_for_build()
        if find_minio() is None:
            raise MinioStartError(f"no minio binary: run `make minio` (builds {MINIO_VERSION} "
                                  f"into {default_binary().parent}) or set BINLAKE_MINIO_BIN")
        self._workdir = Path(tempfile.mkdtemp(prefix="binlake-minio-"))
        for _ in range(5):  # a free port can be taken between probing and binding
            self.port = _free_port()
            if self._launch():
                return self
            self._kill()
        tail = (self._workdir / "minio.log").read_text(errors="replace")[-3000:]
        self.stop()
        raise MinioStartError(f"minio did not come up within {START_TIMEOUT_S:.0f}s:\n{tail}")

    def _launch(self) -> bool:
        """Start the process on ``self.port`` with the data directory; True once it is live."""
        env = dict(os.environ, MINIO_ROOT_USER=self.user, MINIO_ROOT_PASSWORD=self._password,
                   MINIO_REGION=self.region, MINIO_BROWSER="off", MINIO_UPDATE="off",
                   MINIO_CI_CD="1")
        certs = []
        if self.tls:
            (self._workdir / "certs").mkdir(exist_ok=True)
            shutil.copyfile(self.tls[0], self._workdir / "certs" / "public.crt")
            shutil.copyfile(self.tls[1], self._workdir / "certs" / "private.key")
            certs = ["--certs-dir", str(self._workdir / "certs")]
        with open(self._workdir / "minio.log", "ab") as log:
            self._proc = subprocess.Popen(
                [find_minio(), "server", str(self._workdir / "data"), "--quiet",
                 "--address", f"127.0.0.1:{self.port}",
                 "--console-address", f"127.0.0.1:{_free_port()}", *certs],
                env=env, stdout=log, stderr=subprocess.STDOUT)
        return self._wait_live()

    def restart(self, down_seconds: float = 0.0) -> None:
        """Kill the server (SIGKILL), stay down ``down_seconds``, start it again on the same
        port and data: an object store that goes away for a while."""
        self._kill()
        time.sleep(down_seconds)
        if not self._launch():
            raise MinioStartError("minio did not come back on port "
                                  f"{self.port} within {START_TIMEOUT_S:.0f}s")

    def _wait_live(self) -> bool:
        end = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < end:
            if self._proc is None or self._proc.poll() is not None:
                return False
            try:
                # Liveness only: the tests check the certificate with the client itself.
                ctx = ssl._create_unverified_context() if self.tls else None
                with urllib.request.urlopen(f"{self.endpoint}/minio/health/live", timeout=2,
                                            context=ctx):
                    return True
            except OSError:
                time.sleep(0.1)
        return False

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._kill()
        self._proc = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def make_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh random name unless given) and return its name."""
        from pipelines.lake.s3_client import S3Client, S3Settings

        name = name or "lake-" + secrets.token_hex(6)
        S3Client(S3Settings.resolve(env=self.env()), name).create_bucket()
        return name

    def __enter__(self) -> "MinioServer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
