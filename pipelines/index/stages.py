"""The stages after bronze: silver, then what reads silver (quality, gold, mirror), in the
order the caller lists them.

``binlake index`` runs them once, after bronze, and stops at the first error (``command.py``);
the live stream's follower runs them after bronze commits, goes on when one fails and leaves
the stages that read silver waiting when silver failed (``pipelines/stream/follower.py``).
What a run tells of each stage, and whether an error stops it, is the caller's
(:class:`Outcomes`); the stages and their order here are one for both.
"""

from __future__ import annotations

from typing import Sequence

from pipelines.config import Config

__all__ = ["Outcomes", "run_stages"]


class Outcomes:
    """What a run of :func:`run_stages` tells; the caller's subclass prints or logs. Here
    every outcome is left untold and an error stops the run."""

    def silver(self, res) -> None:
        """Silver ran (``silver.job.SilverResult``)."""

    def quality(self, res) -> None:
        """The quality rules ran over the rows this run's silver added (``QualityResult``)."""

    def gold(self, res) -> None:
        """Gold exported (``gold.job.GoldResult``)."""

    def mirror(self, res) -> None:
        """The mirror ran (``mirror.job.MirrorResult``)."""

    def failed(self, stage: str, exc: Exception) -> bool:
        """``stage`` raised ``exc``: whether the run goes on (False: ``exc`` is raised)."""
        return False

    def ran(self, stage: str, done: bool) -> None:
        """``stage`` is over: ``done`` when it succeeded (not when it failed, nor when it did
        not run because silver failed)."""


def run_stages(spark, cfg: Config, stages: Sequence[str], told: Outcomes, *,
               quality: bool = False, gold_dsn: str | None = None,
               source: str | None = None) -> bool:
    """Run ``stages`` (of ``silver``, ``gold``, ``mirror``) in the order given; True when all
    succeeded. Silver failing, the stages after it do not run (they read silver).

    ``quality``: the quality rules also run over every row this run's silver added (silver
    commits once per ``silver.commit_mb``): on a thread while gold exports them, when gold
    runs (neither waits on the other: quality reports, it does not hold gold back; the gold
    server's inserts leave binlake's process mostly idle, docs/performance.md, Gold export),
    else right after silver. ``gold_dsn``: gold's server (default ``gold.dsn``); ``source``:
    the source whose rows the mirror takes (default ``source.name``)."""
    steps: list[str] = []
    for stage in stages:
        steps.append(stage)
        if stage == "silver" and quality and "gold" not in stages:
            steps.append("quality")
    ok = silver_ok = True
    window = None  # quality's: the rows this run's silver added
    for step in steps:
        done = False
        if silver_ok:
            try:
                window = _step(spark, cfg, step, told, window, quality=quality,
                               gold_dsn=gold_dsn, source=source)
                done = True
            except Exception as exc:  # noqa: BLE001 - the caller says whether the run goes on
                if not told.failed(step, exc):
                    raise
        told.ran(step, done)
        ok = ok and done
        silver_ok = silver_ok and (done or step != "silver")
    return ok


def _step(spark, cfg: Config, step: str, told: Outcomes, window, *, quality: bool,
          gold_dsn: str | None, source: str | None):
    """Run ``step``; quality's window from then on (silver's run sets it)."""
    if step == "silver":
        from pipelines.silver.job import run_silver

        res = run_silver(spark, cfg)
        if quality:
            from pipelines.quality import Window

            window = Window(since=res.version_before if res.version_before is not None
                            else -1)
        told.silver(res)
    elif step == "quality":
        from pipelines.quality import run_quality

        told.quality(run_quality(spark, cfg, window=window))
    elif step == "gold":
        _gold(spark, cfg, told, window if quality else None, gold_dsn)
    elif step == "mirror":
        from pipelines.mirror.job import run_mirror

        told.mirror(run_mirror(spark, cfg, source=source))
    else:
        raise ValueError(f"no stage {step!r} after bronze")
    return window


def _gold(spark, cfg: Config, told: Outcomes, window, gold_dsn: str | None) -> None:
    """Gold; with a quality ``window``, quality over it on a thread meanwhile. Quality is
    told before gold; gold's error wins over quality's."""
    from pipelines.gold.job import run_gold

    if window is None:
        told.gold(run_gold(spark, cfg, gold_dsn=gold_dsn))
        return
    from concurrent.futures import ThreadPoolExecutor

    from pipelines.quality import run_quality

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-quality") as pool:
        checked = pool.submit(run_quality, spark, cfg, window=window)
        try:
            gold = run_gold(spark, cfg, gold_dsn=gold_dsn)
        except BaseException:
            if checked.exception() is None:
                told.quality(checked.result())
            raise
        told.quality(checked.result())
    told.gold(gold)
