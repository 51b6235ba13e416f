"""Every classic (JVM) Spark session the tests start in-process comes from one fixture.

pyspark launches one JVM per Python process and keeps it after ``stop()``, with the first
launch's classpath. ``tests/support/jvm_spark.py`` launches it with the Delta jars; a module
that built its own session without them, and happened to launch first, left every later
classic test without ``delta.DefaultSource`` (CI, stop 26). Sessions in subprocesses
(``--engine spark``) and Spark Connect clients (``.remote(...)``) do not count.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
_CLASSIC = re.compile(r"\.master\(|SparkContext\(|\bSparkConf\(")


def test_only_the_jvm_spark_fixture_builds_a_classic_session() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == TESTS / "support" / "jvm_spark.py" or path == Path(__file__).resolve():
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if _CLASSIC.search(line):
                found.append(f"{path.relative_to(TESTS)}:{n}: {line.strip()}")
    assert found == []
