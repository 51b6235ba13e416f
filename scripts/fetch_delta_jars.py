"""Fetch the Delta Lake jars that match the installed delta-spark into a local cache.

``make setup`` runs this once: Maven resolves ``io.delta:delta-spark_<scala>:<delta-spark
version>`` and its dependencies (delta-storage, unitycatalog-client) and copies them into
``.venv/delta-jars/`` (``mvn dependency:copy-dependencies``). Jars that pyspark already ships
(Scala library, SLF4J, Log4j, JSR-305) are left out so the JVM sees one copy of each, and so is any other jar whose
artifact pyspark's ``jars/`` already holds (Delta 4.4 brings Hadoop, Jackson and Parquet
builds older than Spark 4.2's own).
``pipelines.engine.session`` uses that directory when ``engine.delta_jars`` is empty.

Usage: ``python scripts/fetch_delta_jars.py [DEST] [-- MAVEN ARGS…]`` (default DEST:
``<venv>/delta-jars``; Maven arguments such as ``--settings FILE`` or ``--offline`` are passed on).
Exits non-zero, naming ``engine.delta_jars``, when Maven is missing or cannot resolve.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

# Provided by pyspark's own jars/ directory: never copied twice.
_PROVIDED_GROUPS = "org.scala-lang,org.slf4j,org.apache.logging.log4j,com.google.code.findbugs"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>binlake</groupId><artifactId>delta-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies><dependency>
    <groupId>io.delta</groupId><artifactId>{artifact}</artifactId>
    <version>{version}</version>
  </dependency></dependencies>
</project>
"""


def default_dest() -> Path:
    """``<venv>/delta-jars``: where :mod:`pipelines.engine.session` looks by default."""
    return Path(sys.prefix) / "delta-jars"


def _scala_version() -> str:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    found = sorted(jars.glob("spark-core_*.jar"))
    return found[0].name.split("_")[1].split("-")[0] if found else "2.13"


def _artifact(jar_name: str) -> str:
    """``jackson-core-2.13.5.jar`` → ``jackson-core`` (the name without its version)."""
    stem = jar_name[:-4] if jar_name.endswith(".jar") else jar_name
    parts = stem.split("-")
    while len(parts) > 1 and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)


def _pyspark_artifacts() -> set[str]:
    """The artifacts pyspark's ``jars/`` directory already holds."""
    import pyspark

    return {_artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}


def _spark_minor() -> str:
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2])


def artifacts(version: str) -> list[str]:
    """The Maven artifacts to try, in order, for delta-spark ``version`` on the installed
    Spark: from Delta 4.2 on, Delta publishes one build per Spark minor
    (``delta-spark_4.2_2.13``) beside the generic ``delta-spark_2.13`` (whose Spark is one
    of them), and the one built for the installed Spark comes first; earlier releases have
    the generic artifact only (the pinned 4.1.0 pair's, docs/engines.md)."""
    generic = f"delta-spark_{_scala_version()}"
    major_minor = tuple(int(x) for x in version.split(".")[:2])
    if major_minor < (4, 2):
        return [generic]
    return [f"delta-spark_{_spark_minor()}_{_scala_version()}", generic]


def fetch(dest: Path, maven_args: list[str] | None = None) -> list[Path]:
    """Resolve and copy the jars into ``dest`` (replaced atomically); return them."""
    version = metadata.version("delta-spark")
    failures = []
    for artifact in artifacts(version):
        try:
            return _fetch(dest, artifact, version, maven_args)
        except SystemExit as exc:
            failures.append(str(exc))
    raise SystemExit(" / ".join(failures))


def _fetch(dest: Path, artifact: str, version: str, maven_args: list[str] | None
           ) -> list[Path]:
    if shutil.which("mvn") is None:
        raise SystemExit("fetch_delta_jars: Maven (mvn) is not installed; install it or set "
                         "engine.delta_jars to a directory holding the Delta jars")
    with tempfile.TemporaryDirectory() as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_text(_POM.format(artifact=artifact, version=version))
        out = Path(tmp) / "jars"
        cmd = ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
               f"-DoutputDirectory={out}", "-DincludeScope=runtime",
               f"-DexcludeGroupIds={_PROVIDED_GROUPS}", *(maven_args or [])]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        jars = sorted(out.glob("*.jar"))
        if proc.returncode != 0 or not jars:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            raise SystemExit(f"fetch_delta_jars: Maven could not fetch io.delta:{artifact}:"
                             f"{version}; set engine.delta_jars to a directory holding the "
                             f"Delta jars. Maven said: " + " | ".join(tail))
        for jar in jars:  # pyspark ships its own (newer) Hadoop, Jackson, Parquet …: one copy
            if _artifact(jar.name) in _pyspark_artifacts():
                jar.unlink()
        staged = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(out, staged)
    shutil.rmtree(dest, ignore_errors=True)
    staged.rename(dest)
    return sorted(dest.glob("*.jar"))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    maven = args[args.index("--") + 1:] if "--" in args else []
    args = args[:args.index("--")] if "--" in args else args
    dest = Path(args[0]) if args else default_dest()
    for jar in fetch(dest.resolve(), maven):
        print(jar)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
