"""The Spark-session factory: the embedded engine, and clear errors for the other paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.engine import session
from pipelines.config import EngineConfig
from pipelines.errors import EngineError
from tests.support.python_run import run_python


@pytest.mark.spark
def test_embedded_engine_reads_and_writes_delta(spark, tmp_path: Path) -> None:
    assert session.engine_name() == "sail"
    path = str(tmp_path / "t")
    spark.createDataFrame([(1, "a")], "id int, v string").write.format("delta").save(path)
    spark.createDataFrame([(2, "b")], "id int, v string").write.format("delta").mode("append").save(path)
    assert spark.read.format("delta").load(path).count() == 2
    v0 = spark.sql(f"SELECT count(*) AS n FROM delta.`{path}` VERSION AS OF 0").collect()[0]["n"]
    assert v0 == 1


_TWICE = """
from pipelines.engine.session import engine_name, get_spark
first = get_spark()
made = engine_name()
print(made, get_spark() is first, engine_name())
"""


def test_the_embedded_engine_stays_itself_when_asked_again() -> None:
    # `binlake index` asks for the session per stage. The Sail session binlake made is then
    # pyspark's active one; it must still count as the embedded engine, or silver takes the
    # JVM engines' paths (null lists masked, no compiled loops loaded in this process).
    out = run_python(_TWICE, timeout=300)
    assert out.stdout.split() == ["sail", "True", "sail"]


_RESTART = """
from pipelines.engine.session import engine_name, get_spark, stop_engine
first = get_spark()
print(first.range(3).count())
stop_engine()
second = get_spark()
print(engine_name(), second is first, second.range(4).count())
"""


def test_a_stopped_embedded_engine_is_started_again() -> None:
    # stop_engine() frees the embedded server (a notebook's memory, a test's engine); the
    # next get_spark() must start one, not hand back the session of the stopped server
    # (its calls waited on the gone server until the client gave up, minutes later).
    out = run_python(_RESTART, timeout=120)
    assert out.stdout.split() == ["3", "sail", "False", "4"]


def test_unreachable_spark_connect_is_a_clear_error() -> None:
    with pytest.raises(EngineError, match=r"cannot reach Spark Connect at sc://127.0.0.1:1"):
        session._connect("sc://127.0.0.1:1")


def test_local_spark_without_delta_jars_is_a_clear_error(tmp_path: Path) -> None:
    # Machines without Maven give engine.delta_jars; a directory without jars is named.
    with pytest.raises(EngineError, match="engine.delta_jars"):
        session._local_spark(EngineConfig(kind="spark", delta_jars=str(tmp_path)))


_IDLE = """
import time
from pipelines.engine.session import get_spark
spark = get_spark()
assert spark.range(3).count() == 3
time.sleep(5)
print("after idle:", spark.range(4).count())
"""


def test_embedded_session_outlives_sails_idle_timeout(tmp_path: Path) -> None:
    # Sail drops a session idle for spark.session_timeout_secs (15 min by default; 2 s here):
    # every later call failed with "session … is not running" (a waiting stream, serve, CI).
    import os
    env = {**os.environ, "SAIL_SPARK__SESSION_TIMEOUT_SECS": "2"}
    for var in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE"):
        env.pop(var, None)
    out = run_python(_IDLE, env=env, timeout=120)
    assert "after idle: 4" in out.stdout


_SIGINT = """
import ctypes, signal
from pipelines.config import load_config
from pipelines.engine.session import get_spark

libc = ctypes.CDLL(None)


class Action(ctypes.Structure):
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]


def handler():
    act = Action()
    libc.sigaction(signal.SIGINT, None, ctypes.byref(act))
    return act.handler


before = handler()
spark = get_spark(load_config(env={}, overrides={"lake.root": "/nonexistent"}).engine)
spark.range(3).count()
print("same handler:", handler() == before)
"""


def test_embedded_engine_leaves_ctrl_c_to_python() -> None:
    # Starting Sail in-process installed its runtime's SIGINT handler at the C level (its own
    # shutdown), so Ctrl-C no longer reached the shell or the stream: the handler before the
    # engine started must be the one after (read with sigaction, not signal.getsignal).
    import os
    env = dict(os.environ)
    for var in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE"):
        env.pop(var, None)
    out = run_python(_SIGINT, env=env, timeout=120)
    assert "same handler: True" in out.stdout, out.stdout
