"""``binlake silver`` on the command line: its handler (the command has no options of its own).

``pipelines.cli.main`` wires it (``binlake index`` runs :func:`report_silver` after bronze);
``python -m pipelines.silver`` runs the same command on its own (``pipelines.cli.entry``).
"""

from __future__ import annotations

import argparse

from pipelines.config import Config

__all__ = ["HELP", "add_silver_arguments", "cmd_silver", "report_silver"]

HELP = "name new bronze row changes into the silver table"


def add_silver_arguments(p: argparse.ArgumentParser) -> None:
    """None: silver reads what bronze holds and has no options of its own."""


def report_silver(cfg: Config):
    """Run silver and print its line; the ``SilverResult``."""
    from pipelines.lake.tables import SILVER_EVENTS, Lake
    from pipelines.engine.session import get_spark
    from pipelines.silver.job import run_silver

    res = run_silver(get_spark(cfg.engine), cfg)
    print(f"silver: {len(res.files)} bronze file(s) considered, {res.appended} row changes "
          f"appended, {res.quarantined} in quarantine, version {res.silver_version} in "
          f"{res.seconds:.1f}s -> {Lake.of(cfg).where(SILVER_EVENTS)}")
    return res


def cmd_silver(args: argparse.Namespace, cfg: Config) -> int:
    report_silver(cfg)
    return 0
