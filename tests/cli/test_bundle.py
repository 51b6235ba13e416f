"""The Databricks bundle calls the wheel's own entry points with parameters the CLI accepts.

``conf/databricks/databricks.yml`` is loaded as YAML; every task's ``python_wheel_task`` must
name a console script of ``setup.cfg`` and its parameters (``${var.…}`` replaced by the
variables' defaults) must parse with that script's argparse parser. The runtime must bring
Spark 4 (the wheel's core leaves pyspark to it).
"""

from __future__ import annotations

import configparser
import importlib
import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from pipelines.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "conf" / "databricks" / "databricks.yml"
_VAR = re.compile(r"\$\{var\.(\w+)\}")


@pytest.fixture(scope="module")
def bundle() -> dict:
    return YAML(typ="safe").load(BUNDLE.read_text())


def _console_scripts() -> dict[str, str]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = cfg["options.entry_points"]["console_scripts"].strip().splitlines()
    return dict((part.strip() for part in line.split("=", 1)) for line in lines)


def _resolve(value: str, variables: dict) -> str:
    for _ in range(5):  # defaults may refer to other variables
        value = _VAR.sub(lambda m: str(variables[m.group(1)]["default"]), value)
    assert "${" not in value or "${bundle." in value, value
    return value


def _tasks(bundle: dict):
    for job_name, job in bundle["resources"]["jobs"].items():
        for task in job["tasks"]:
            yield job_name, job, task


def _parse(script: str, target: str, params: list[str]):
    """Parse ``params`` with the parser of the console script ``script`` (``binlake``, or a
    stage's job entry point and its own flat parser)."""
    if target == "pipelines.cli.main:command":
        return build_parser().parse_args(params)
    module = re.fullmatch(r"(pipelines\.\w+\.__main__):main", target).group(1)
    return importlib.import_module(module).build_parser().parse_args(params)


def test_every_task_calls_a_console_script_with_parameters_it_parses(bundle: dict) -> None:
    scripts = _console_scripts()
    variables = bundle["variables"]
    seen = []
    for job_name, _job, task in _tasks(bundle):
        wheel_task = task["python_wheel_task"]
        assert wheel_task["package_name"] == "binlake"
        script = wheel_task["entry_point"]
        assert script in scripts, f"{job_name}.{task['task_key']}: no console script {script}"
        params = [_resolve(p, variables) for p in wheel_task.get("parameters", [])]
        assert not any("dsn" in p.lower() for p in params), "DSNs come from secrets, not parameters"
        try:
            args = _parse(script, scripts[script], params)
        except SystemExit as exc:  # argparse's way of refusing
            pytest.fail(f"{job_name}.{task['task_key']}: {script} {params} does not parse ({exc})")
        seen.append(args.command)
        assert [w["whl"] for w in task["libraries"]] == ["../../dist/*.whl"]
    assert seen[:5] == ["bronze", "silver", "quality", "gold", "optimize"]
    assert "rotate" in seen


def test_task_dependencies_run_the_stages_in_order(bundle: dict) -> None:
    for job_name, job, _ in _tasks(bundle):
        keys = [t["task_key"] for t in job["tasks"]]
        for i, task in enumerate(job["tasks"]):
            deps = [d["task_key"] for d in task.get("depends_on", [])]
            assert deps == ([] if i == 0 else [keys[i - 1]]), f"{job_name}.{task['task_key']}"
            assert task["job_cluster_key"] in {c["job_cluster_key"] for c in job["job_clusters"]}


def test_runtime_brings_spark_4_and_the_wheel_is_built(bundle: dict) -> None:
    version = bundle["variables"]["spark_version"]["default"]
    major = int(version.split(".")[0])
    assert major >= 17 and "scala2.13" in version, version  # DBR 17.x = Spark 4.0, Scala 2.13
    for _, job, _ in _tasks(bundle):
        for cluster in job["job_clusters"]:
            assert cluster["new_cluster"]["spark_version"] == "${var.spark_version}"
    artifact = bundle["artifacts"]["binlake_wheel"]
    assert artifact["type"] == "whl" and "-w dist" in artifact["build"]
    assert all((BUNDLE.parent / p).exists() for p in bundle["sync"]["paths"])
