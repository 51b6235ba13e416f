"""Data-quality expectations over silver and the quarantine, with great-expectations 1.x.

``rules`` loads ``conf/quality.toml`` (rule name → dataset → expectation → action),
``datasets`` selects the window and adds helper columns, ``checks`` runs the rules with GE
(``unique_passes``: uniqueness in passes of bounded size where the engine holds aggregates),
``result`` holds what a run found, ``report`` renders the HTML page, ``job`` stores results and exposes :func:`run_quality`.
"""

from __future__ import annotations

from pipelines.quality.datasets import Window
from pipelines.quality.job import last_quality, render_last, run_quality
from pipelines.quality.result import (
    QualityResult, RuleResult, exit_code, render_result, result_to_json, summary_line,
)
from pipelines.quality.rules import Action, Expect, Rule, RuleSet, load_rules, parse_rules

__all__ = ["run_quality", "summary_line", "exit_code", "result_to_json", "render_result",
           "last_quality", "render_last",
           "QualityResult", "RuleResult", "Window", "Action", "Expect", "Rule", "RuleSet",
           "load_rules", "parse_rules"]
