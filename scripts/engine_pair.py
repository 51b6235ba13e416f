"""A virtual environment for one Spark + Delta pair, for the JVM engine tests on it.

``python scripts/engine_pair.py PYSPARK:DELTA [--root .venv-pairs]`` creates (once)
``<root>/spark-PYSPARK-delta-DELTA/``: this checkout installed editable with its test
extras, ``pyspark[connect]==PYSPARK``, ``delta-spark==DELTA`` and the embedded engine, and
the Delta jars matching the pair fetched with Maven into its ``delta-jars/``
(``scripts/fetch_delta_jars.py``); then prints the environment's Python. ``make test-pairs``
runs the engine matrix's JVM legs with it for each pair binlake supports (docs/engines.md).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-8:]
        raise SystemExit(f"engine_pair: {' '.join(cmd[:4])} … failed:\n" + "\n".join(tail))


def ensure(pyspark: str, delta: str, root: Path) -> Path:
    """The pair's environment (made when missing or half made); its Python."""
    where = root / f"spark-{pyspark}-delta-{delta}"
    py = where / "bin" / "python"
    stamp = where / ".installed"
    if stamp.is_file():
        return py
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    _run([str(py), "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    _run([str(py), "-m", "pip", "install", "--quiet", "-e", f"{REPO}[test]",
          f"pyspark[connect]=={pyspark}", f"delta-spark=={delta}", "pysail>=0.7,<0.8"])
    _run([str(py), str(REPO / "scripts" / "fetch_delta_jars.py"), str(where / "delta-jars")])
    stamp.write_text(f"pyspark {pyspark}, delta-spark {delta}\n")
    return py


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pair", help="PYSPARK:DELTA, e.g. 4.0.1:4.0.1")
    ap.add_argument("--root", default=str(REPO / ".venv-pairs"))
    args = ap.parse_args(argv)
    pyspark, _, delta = args.pair.partition(":")
    if not pyspark or not delta:
        ap.error("the pair is PYSPARK:DELTA, e.g. 4.0.1:4.0.1")
    print(ensure(pyspark, delta, Path(args.root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
