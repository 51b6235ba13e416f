"""The one Spark-session factory.

Order: an active SparkSession (Databricks job, spark-submit with delta-spark) → a Spark Connect
URL (``engine.remote`` / ``--spark-remote``) → ``engine.kind = "spark"``: a local JVM Spark
with Delta, its jars from ``engine.delta_jars`` or else the cache ``make setup`` fills with
Maven (``.venv/delta-jars``, see ``scripts/fetch_delta_jars.py`` and docs/engines.md) → the
embedded default: a Sail Spark Connect server (``pysail``) started in this process on loopback.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from pipelines.config import EngineConfig
from pipelines.lake.delta_ops import session_key
from pipelines.errors import EngineError
from pipelines.engine.memory import fix_mmap_threshold, limit_malloc_arenas, use_system_allocator

__all__ = ["get_spark", "engine_name", "engine_cores", "launched_by_spark", "stop_engine",
           "start_sail_server", "delta_jar_paths", "delta_spark_conf", "local_spark_conf",
           "default_delta_jars_dir"]

log = logging.getLogger(__name__)

_SAIL_SERVER = None
_DELTA_EXTENSIONS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}

# A laptop/CI-sized local JVM: Delta's 50 snapshot partitions and 200 shuffle partitions cost
# more than the work on small lakes; no UI port, no progress bars in the CLI's output.
_LOCAL_CONF = {
    "spark.sql.shuffle.partitions": "8",
    "spark.databricks.delta.snapshotPartitions": "4",
    # VACUUM lists files with this many tasks (default 10,000: minutes on a small table)
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "8",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}


@dataclass(frozen=True)
class _Made:
    spark: object
    engine: str


_CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


def _drop_connect_env() -> None:
    """A Spark Connect client in a parent process (or the user's shell) leaves these set; with
    them pyspark's classic builder turns into a Connect client."""
    for var in _CONNECT_ENV:
        os.environ.pop(var, None)


def _active():
    if launched_by_spark():
        return _launcher_session()
    try:
        from pyspark.sql import SparkSession

        return SparkSession.getActiveSession()
    except Exception:  # noqa: BLE001 - no classic Spark installed/started
        return None


def _launcher_session():
    """The session of the JVM that spark-submit or Databricks started this Python in."""
    from pyspark.sql import SparkSession

    _drop_connect_env()
    try:
        return SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - py4j/JVM errors of many kinds
        raise EngineError(f"could not attach to the Spark that launched binlake: {exc}") from exc


def launched_by_spark() -> bool:
    """True in a Python that spark-submit (its JVM passes the gateway port) or a Databricks
    job started: the session to use is the platform's, not one binlake makes."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT") or os.environ.get("DATABRICKS_RUNTIME_VERSION"))


# Sail drops a Spark Connect session idle for 15 minutes (its spark.session_timeout_secs), and
# every later call on it fails with "session … is not running": a stream waiting for the source,
# `binlake serve` between queries, a long job's JVM step. binlake's servers keep sessions 30 days.
_SAIL_SESSION_TIMEOUT_SECS = str(30 * 24 * 3600)


def start_sail_server(host: str = "127.0.0.1", port: int = 0):
    """Start a Sail Spark Connect server in this process (background threads); return it.

    Raises :class:`EngineError` when pysail is missing or the server cannot listen.
    """
    try:
        from pysail.spark import SparkConnectServer
    except ImportError as exc:
        raise EngineError("the embedded engine needs the pysail package "
                          "(pip install pysail)") from exc
    os.environ.setdefault("RUST_LOG", "error")  # Sail's own logging: errors only
    os.environ["SAIL_SPARK__SESSION_TIMEOUT_SECS"] = _SAIL_SESSION_TIMEOUT_SECS
    use_system_allocator()  # the engine runs binlake's Arrow UDFs in this process
    limit_malloc_arenas()  # before the engine's threads exist
    fix_mmap_threshold()  # the batches' freed buffers go back, not into the arenas
    try:
        server = SparkConnectServer(ip=host, port=port)
        server.start(background=True)
    except Exception as exc:  # noqa: BLE001 - pysail raises plain RuntimeError
        raise EngineError(f"could not start the embedded Sail engine on {host}:{port}: "
                          f"{exc}") from exc
    return server


def _python_keeps_sigint() -> None:
    """Give SIGINT (Ctrl-C) back to Python's own handler: making a Connect session here
    leaves another SIGINT handler installed at the C level (seen with the embedded engine:
    its runtime's, which waits for the running work), so Ctrl-C no longer reached the shell,
    the stream or the caller's code. Only the main thread may set a handler; elsewhere
    nothing changes."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.getsignal(signal.SIGINT))


def _start_sail() -> str:
    """Start (once per process) the embedded Sail server; return its sc:// URL."""
    global _SAIL_SERVER
    if _SAIL_SERVER is None:
        _SAIL_SERVER = start_sail_server()
        atexit.register(_stop_server)  # at exit the session needs no goodbye
    host, port = _SAIL_SERVER.listening_address
    return f"sc://{host}:{port}"


def stop_engine() -> None:
    """Stop the embedded Sail server if this process started one, and the session binlake
    made on it: the next :func:`get_spark` starts a new one (the old session's calls would
    otherwise wait on a server that is gone)."""
    global _CURRENT
    if _CURRENT is not None and _CURRENT.engine == "sail":
        try:
            _CURRENT.spark.stop()
        except Exception:  # noqa: BLE001 - the server may be gone already
            pass
        _CURRENT = None
    _stop_server()


def _stop_server() -> None:
    global _SAIL_SERVER
    if _SAIL_SERVER is not None:
        try:
            _SAIL_SERVER.stop()
        except Exception:  # noqa: BLE001
            pass
        _SAIL_SERVER = None


def _reachable(url: str, timeout: float = 5.0) -> None:
    """Fail fast (the Connect client retries for minutes) when nothing listens at ``url``."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.replace("sc://", "http://", 1))
    host, port = parts.hostname or "localhost", parts.port or 15002
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise EngineError(f"cannot reach Spark Connect at sc://{host}:{port}: "
                          f"{exc.strerror or exc}") from exc


def _connect(url: str):
    from pyspark.sql import SparkSession

    _reachable(url)
    try:
        spark = SparkSession.builder.remote(url).getOrCreate()
    except Exception as exc:  # noqa: BLE001 - grpc/pyspark raise many kinds
        raise EngineError(f"cannot reach Spark Connect at {url}: {exc}") from exc
    _python_keeps_sigint()
    return spark


def default_delta_jars_dir() -> Path | None:
    """The Delta jar cache of the running environment (``<sys.prefix>/delta-jars``: ``make
    setup``'s ``.venv``, or a Spark + Delta pair's of ``scripts/engine_pair.py``), else the
    checkout's ``.venv/delta-jars`` (an install elsewhere); ``None`` when neither holds a jar.
    The environment's own come first: its pyspark is the one they were fetched for."""
    for d in (Path(sys.prefix) / "delta-jars",
              Path(__file__).resolve().parents[2] / ".venv" / "delta-jars"):
        if any(d.glob("*.jar")):
            return d
    return None


def delta_jar_paths(cfg: EngineConfig) -> list[str]:
    """The Delta jars for a JVM Spark: ``engine.delta_jars``, else the ``make setup`` cache.

    Raises :class:`EngineError` naming ``engine.delta_jars`` when there are none.
    """
    where = Path(cfg.delta_jars).expanduser() if cfg.delta_jars else default_delta_jars_dir()
    if where is None:
        raise EngineError("engine.delta_jars is not set and no Delta jar cache exists "
                          "(.venv/delta-jars): run `make setup` (fetches them with Maven) or set "
                          "engine.delta_jars to a directory holding delta-spark_2.13 and "
                          "delta-storage jars")
    jars = sorted(str(p) for p in where.glob("*.jar"))
    if not jars:
        raise EngineError(f"engine.delta_jars: no .jar files in {where}")
    if not any(Path(j).name.startswith("delta-spark_") for j in jars):
        raise EngineError(f"engine.delta_jars: no delta-spark_*.jar in {where}")
    return jars


def local_spark_conf() -> dict[str, str]:
    """binlake's confs for a small local JVM Spark (partitions, VACUUM listing, no UI)."""
    return dict(_LOCAL_CONF)


def delta_spark_conf(cfg: EngineConfig) -> dict[str, str]:
    """Spark confs for a JVM Spark with Delta (jars, SQL extension, catalog)."""
    return {"spark.jars": ",".join(delta_jar_paths(cfg)), **_DELTA_EXTENSIONS}


def _local_spark(cfg: EngineConfig):
    from pyspark.sql import SparkSession

    conf = delta_spark_conf(cfg)  # raises EngineError (no jars) before anything changes
    os.environ["PYSPARK_PYTHON"] = sys.executable  # JVM workers run this venv's Python
    _drop_connect_env()
    builder = SparkSession.builder.master(cfg.master).appName("binlake")
    for key, value in conf.items():
        builder = builder.config(key, value)
    for key, value in local_spark_conf().items():
        builder = builder.config(key, value)
    try:
        return builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - py4j/JVM start-up errors
        raise EngineError(f"could not start local Spark with Delta: {exc}") from exc


_CURRENT: _Made | None = None


def get_spark(cfg: EngineConfig | None = None):
    """Return a SparkSession for binlake, making one as the module docstring says.

    Raises :class:`EngineError` when the chosen engine cannot be started or reached.
    """
    global _CURRENT
    cfg = cfg or EngineConfig()
    active = _active()
    if active is not None:
        # A Spark Connect session binlake made is the active one after it (pyspark turns on
        # its Connect mode): it stays what it was made as; any other is the platform's.
        if _CURRENT is None or active is not _CURRENT.spark:
            _CURRENT = _Made(active, "active")
        return active
    if _CURRENT is not None and _CURRENT.engine == "active":
        _CURRENT = None  # that session was stopped: make one as below
    if _CURRENT is not None:
        return _CURRENT.spark
    if cfg.remote:
        spark, engine = _connect(cfg.remote), "connect"
    elif cfg.kind == "spark":
        spark, engine = _local_spark(cfg), "spark"
    elif cfg.kind == "connect":
        raise EngineError("engine.kind=connect needs engine.remote (--spark-remote sc://HOST:PORT)")
    else:
        spark, engine = _connect(_start_sail()), "sail"
    _CURRENT = _Made(spark, engine)
    return spark


def engine_name() -> str:
    """``sail``, ``connect``, ``spark`` or ``active``: what :func:`get_spark` made."""
    return _CURRENT.engine if _CURRENT else "none"


_CORES: dict[object, int] = {}


def engine_cores(spark) -> int:
    """How many tasks the engine runs at once: this machine's cores for the embedded engine
    (it runs here); elsewhere the engine's default parallelism (a cluster's cores, not the
    driver's), asked once per session: the partitions of a range the engine splits by it."""
    if _CURRENT is not None and _CURRENT.engine == "sail" and spark is _CURRENT.spark:
        return max(os.cpu_count() or 1, 1)
    key = session_key(spark)
    if key not in _CORES:
        from pyspark.sql import functions as F

        try:
            parts = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
            top = parts.agg(F.max("p")).collect()[0][0]
            _CORES[key] = max(int(top) + 1, 1)
        except Exception:  # noqa: BLE001 - an engine that cannot say: this machine's cores
            _CORES[key] = max(os.cpu_count() or 1, 1)
    return _CORES[key]
