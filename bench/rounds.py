"""Figures of a bench run in rounds, per stage: best and median seconds, median CPU, and the
ratio to a reference stage, best to best and paired.

The machine's speed drifts over minutes, so each round runs the reference and the other
stages within a minute of each other; the paired ratio (per round) is the one to read first.
"""

from __future__ import annotations

import statistics

__all__ = ["stage_cells"]


def stage_cells(runs: list[dict], reference: list[dict] | None) -> dict[str, str | float]:
    """Cells of one stage's rounds (dicts with ``seconds`` and ``cpu``): ``best`` (float),
    ``median``, ``cpu`` and ``busy`` (CPU over wall) medians, and against ``reference``'s
    rounds (``None``: the reference itself, ``-``) ``ratio`` (best to best) and ``paired``
    (the per-round ratios' median (min-max))."""
    seconds = [r["seconds"] for r in runs]
    out: dict[str, str | float] = {
        "best": min(seconds), "median": f"{statistics.median(seconds):.2f}",
        "cpu": f"{statistics.median(r['cpu'] for r in runs):.2f}",
        "busy": f"{statistics.median(r['cpu'] / r['seconds'] for r in runs):.2f}",
        "ratio": "-", "paired": "-"}
    if reference is not None:
        ref = [r["seconds"] for r in reference]
        paired = [a / b for a, b in zip(ref, seconds)]
        out["ratio"] = f"{min(ref) / min(seconds):.2f}x"
        out["paired"] = (f"{statistics.median(paired):.2f}x "
                         f"({min(paired):.2f}-{max(paired):.2f})")
    return out
