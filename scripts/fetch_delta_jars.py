"""Fetch the Delta Lake jars that match the installed delta-spark into a local cache.

``make setup`` runs this once: Maven resolves ``io.delta:delta-spark_<scala>:<delta-spark
version>`` and its dependencies (delta-storage, unitycatalog-client) and copies them into
``.venv/delta-jars/`` (``mvn dependency:copy-dependencies``). Jars that pyspark already ships
(Scala library, SLF4J, Log4j, JSR-305) are left out so the JVM sees one copy of each.
``pipelines.session`` uses that directory when ``engine.delta_jars`` is empty.

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
    <groupId>io.delta</groupId><artifactId>delta-spark_{scala}</artifactId>
    <version>{version}</version>
  </dependency></dependencies>
</project>
"""


def default_dest() -> Path:
    """``<venv>/delta-jars``: where :mod:`pipelines.session` looks by default."""
    return Path(sys.prefix) / "delta-jars"


def _scala_version() -> str:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    found = sorted(jars.glob("spark-core_*.jar"))
    return found[0].name.split("_")[1].split("-")[0] if found else "2.13"


def fetch(dest: Path, maven_args: list[str] | None = None) -> list[Path]:
    """Resolve and copy the jars into ``dest`` (replaced atomically); return them."""
    version = metadata.version("delta-spark")
    if shutil.which("mvn") is None:
        raise SystemExit("fetch_delta_jars: Maven (mvn) is not installed; install it or set "
                         "engine.delta_jars to a directory holding the Delta jars")
    with tempfile.TemporaryDirectory() as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_text(_POM.format(scala=_scala_version(), version=version))
        out = Path(tmp) / "jars"
        cmd = ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
               f"-DoutputDirectory={out}", "-DincludeScope=runtime",
               f"-DexcludeGroupIds={_PROVIDED_GROUPS}", *(maven_args or [])]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        jars = sorted(out.glob("*.jar"))
        if proc.returncode != 0 or not jars:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            raise SystemExit(f"fetch_delta_jars: Maven could not fetch io.delta:delta-spark "
                             f"{version}; set engine.delta_jars to a directory holding the "
                             f"Delta jars. Maven said: " + " | ".join(tail))
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
