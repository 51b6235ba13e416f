"""A throwaway Spark standalone cluster on loopback: one master and N workers, real JVMs.

:class:`StandaloneCluster` starts ``org.apache.spark.deploy.master.Master`` and
``org.apache.spark.deploy.worker.Worker`` processes with pyspark's own ``bin/spark-class``
(each its own JVM, bound to ``127.0.0.1`` on free ports, ``--cores`` and ``--memory`` per
worker, a work directory of its own), waits until the master's JSON page lists every worker
alive, and stops them all (their process groups) at the end. ``env`` is given to the workers,
so the executors they launch inherit it (e.g. the object store's ``AWS_*`` settings: never
put on a command line). :attr:`url` is the ``spark://`` master URL for ``spark-submit``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Mapping

__all__ = ["StandaloneCluster", "ClusterStartError"]


class ClusterStartError(RuntimeError):
    """The master or a worker did not come up; the message ends with their logs' tails."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandaloneCluster:
    def __init__(self, workers: int = 2, *, cores: int = 1, memory: str = "1g",
                 env: Mapping[str, str] | None = None, timeout: float = 120.0) -> None:
        self.workers, self.cores, self.memory = workers, cores, memory
        self.env = dict(env or {})
        self.timeout = timeout
        self.port = self.web_port = 0
        self._procs: list[subprocess.Popen] = []
        self._dir: tempfile.TemporaryDirectory | None = None

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spark_class(self) -> str:
        import pyspark

        return str(Path(pyspark.__file__).parent / "bin" / "spark-class")

    def _spawn(self, name: str, *args: str) -> None:
        import pyspark

        assert self._dir is not None
        log = open(Path(self._dir.name) / f"{name}.log", "wb")
        env = {**os.environ, **self.env, "SPARK_HOME": str(Path(pyspark.__file__).parent),
               "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
               "SPARK_WORKER_DIR": str(Path(self._dir.name) / f"{name}-work")}
        for var in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
            env.pop(var, None)
        self._procs.append(subprocess.Popen([self._spark_class(), *args], stdout=log,
                                            stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True))

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json/",
                                        timeout=2) as resp:
                state = json.load(resp)
        except (OSError, ValueError):
            return 0
        return int(state.get("aliveworkers", 0))

    def start(self) -> "StandaloneCluster":
        self._dir = tempfile.TemporaryDirectory(prefix="binlake-spark-cluster-")
        self.port, self.web_port = _free_port(), _free_port()
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.web_port))
        for i in range(self.workers):
            self._spawn(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url,
                        "--host", "127.0.0.1", "--cores", str(self.cores), "--memory",
                        self.memory, "--webui-port", str(_free_port()))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.alive_workers() == self.workers:
                return self
            if any(p.poll() is not None for p in self._procs):
                break
            time.sleep(0.5)
        logs = self.logs()
        self.stop()
        raise ClusterStartError(f"the standalone cluster did not come up: {logs}")

    def logs(self, lines: int = 15) -> str:
        if self._dir is None:
            return ""
        out = []
        for f in sorted(Path(self._dir.name).glob("*.log")):
            tail = f.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {f.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def stop(self) -> None:
        for p in self._procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self._procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self._procs.clear()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
