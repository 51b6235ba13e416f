"""A real Apache Spark Connect server (the JVM one shipped in pyspark's jars) for the tests.

:class:`SparkConnectJVM` runs ``pyspark/bin/spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer`` with the Delta jars and Delta's SQL
extension/catalog (:func:`pipelines.engine.session.delta_spark_conf`) on ``127.0.0.1`` at a free
port, waits until the port accepts connections, and stops the process group at the end.
Python work on the server (UDFs, ``mapInArrow``) runs in workers started with this venv's
Python and this checkout on ``PYTHONPATH``. ``spark_connect_url`` is the session-scoped
fixture: one JVM server for the whole test run; it fails (never skips) when the server does
not come up, showing the end of its log.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from pipelines.config import EngineConfig
from pipelines.engine.session import delta_spark_conf

__all__ = ["SparkConnectJVM", "spark_connect_url", "free_port"]

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SparkConnectJVM:
    """One Spark Connect server process on loopback (a context manager)."""

    def __init__(self, log_dir: Path, *, port: int | None = None, master: str = "local[2]",
                 start_timeout: float = 180.0) -> None:
        self.port = port or free_port()
        self.master = master
        self.log = Path(log_dir) / f"spark-connect-{self.port}.log"
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        import pyspark

        submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
        conf = {**delta_spark_conf(EngineConfig(kind="spark")),
                "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(self.port),
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "8",
                "spark.databricks.delta.snapshotPartitions": "4",
                "spark.sql.sources.parallelPartitionDiscovery.parallelism": "8",
                "spark.sql.session.timeZone": "UTC",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.driver.host": "127.0.0.1"}
        jars = conf.pop("spark.jars")
        cmd = [str(submit), "--master", self.master, "--class", SERVER_CLASS,
               "--name", "binlake-tests-spark-connect", "--jars", jars]
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        return cmd + ["spark-internal"]

    def start(self) -> "SparkConnectJVM":
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                   PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                              if p),
                   SPARK_LOCAL_IP="127.0.0.1")
        env.pop("SPARK_HOME", None)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         env=env, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Spark Connect server exited with {self.proc.returncode}:\n"
                                   + self.tail())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"Spark Connect server did not listen on {self.url} within "
                           f"{self.start_timeout:.0f}s:\n" + self.tail())

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def __enter__(self) -> "SparkConnectJVM":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@pytest.fixture(scope="session")
def spark_connect_url(tmp_path_factory) -> Iterator[str]:
    """``sc://127.0.0.1:PORT`` of one JVM Spark Connect server with Delta, for the session."""
    server = SparkConnectJVM(tmp_path_factory.mktemp("spark-connect"))
    try:
        server.start()
    except Exception as exc:  # noqa: BLE001 - EngineError (no jars) or the start-up failure
        pytest.fail(f"the JVM Spark Connect server did not start: {exc}")
    try:
        yield server.url
    finally:
        server.stop()
