"""What follows a stream commit: silver (then mirror and gold when on) within
``stream.freshness_seconds`` of every bronze commit (``freshness.py`` says when), and a
schema snapshot after a commit that holds DDL.

Two lanes, each with its own :class:`Freshness`: silver lacks bronze's commits; the stages
that read silver (mirror, gold) lack what silver's follows add, each counted from the bronze
commit it came from, so their bound is still to the bronze commit. The follow thread runs the
lanes on a thread each (``following.py``): silver's next follow never waits for a mirror or
gold export of the rows before (measured: with the mirror in silver's follow, silver's
latency held the mirror's too). A follow of both (the stop's catch-up) begins the readers'
lane when its silver is done, so they hold what it added.

Following never stops the stream: bronze is the record, silver, mirror and gold are derived
from it exactly once by their own watermarks, so a failed stage is logged, tried again later
(``freshness.RETRY_SECONDS``) and then catches up.

A snapshot is owed while the last DDL streamed lies past the latest stored snapshot of the
source. Each CHECKPOINT carries where that DDL ends (``Checkpoint.last_ddl``), in the same
commit as the DDL, so the debt survives a kill -9 between the commit and the snapshot: the
restarted stream pays it before it reads on and before silver follows (the snapshot is then
of the server's schema at its current position, past the DDL). The snapshot is taken just
before the commit that holds the DDL, under the commit lock: the DDL has run on the server
(the stream read it), so the snapshot's coordinates lie past it, and no silver follow can see
the DDL's rows in bronze before the snapshot that names them is stored. A failed one is
tried again at a commit at least ``RETRY_SECONDS`` later (the debt is then in the commit).
"""

from __future__ import annotations

import logging
import time

from pipelines.binlog.names import position_key
from pipelines.config import Config
from pipelines.errors import SourceError
from pipelines.index.stages import Outcomes, run_stages
from pipelines.mysql.dsn import Dsn
from pipelines.stream.freshness import RETRY_SECONDS, Freshness

__all__ = ["Follower", "READERS"]

READERS = ("mirror", "gold")  # the stages that read silver: their lane follows silver's

log = logging.getLogger(__name__)


class Follower:
    """Silver/gold following and post-DDL snapshots for one stream (module docstring)."""

    def __init__(self, spark, cfg: Config, *, dsn: Dsn, gold_dsn: str | None = None) -> None:
        self.spark = spark
        self.cfg = cfg
        self.dsn = dsn
        self.gold_dsn = gold_dsn
        self.on = cfg.stream.silver_lag_seconds > 0  # 0: nothing follows bronze
        self.fresh = Freshness(cfg.stream.freshness_seconds, tick=tick_seconds(cfg))  # silver
        self.readers = Freshness(cfg.stream.freshness_seconds, tick=tick_seconds(cfg))
        self.on_silver = lambda: None  # silver's follow added rows (the readers' thread wakes)
        self.snapshot_seq: int | None = None  # the latest stored snapshot's coordinate
        self.snapshots_read = False  # snapshot_seq was read from the lake
        self.retry_at = 0.0  # no snapshot attempt before (after a failed one)
        self.last_error: tuple[float, str, str] | None = None  # epoch, stage, message
        self.mirror = False  # `binlake stream --mirror`
        self.bronze_at: str | None = None  # bronze's last committed position, "file:pos"
        self.positions: dict[str, str] = {}  # stage → the bronze position its last follow held
        self.seconds: dict[str, float] = {}  # stage → how long its last follow took

    @property
    def stages(self) -> list[str]:
        """What follows bronze, in the order it runs (mirror and gold read silver)."""
        if not self.on:
            return []
        return ["silver"] + ["mirror"] * self.mirror + ["gold"] * bool(self.gold_dsn)

    @property
    def silver_pending(self) -> bool:
        """Bronze holds commits some stage has not followed."""
        return bool(self.fresh.behind or self.readers.behind)

    def lane(self, readers: bool) -> tuple[Freshness, list[str]]:
        """Silver's lane, or the readers' (``readers``): its freshness and its stages."""
        return ((self.readers, [s for s in self.stages if s in READERS]) if readers
                else (self.fresh, [s for s in self.stages if s not in READERS]))

    def fresh_of(self, stage: str) -> Freshness:
        return self.readers if stage in READERS else self.fresh

    def lag(self, stage: str, now: float) -> float:
        """Seconds ``stage`` has lacked a bronze commit: a reader of silver lacks at least
        what silver lacks."""
        lag = self.fresh_of(stage).lag(stage, now)
        return max(lag, self.fresh.lag("silver", now)) if stage in READERS else lag

    def start(self) -> None:
        """The stream is starting. Bronze may hold commits of earlier runs the stages lack
        (a kill, a cut catch-up): they count as made now, so the stages hold them within
        the bound even when the source stays idle. When silver follows, its compiled render
        loops load now, on a thread of their own, where this process renders them
        (``render_warm``): a stream lives long, so every follow after the first few seconds
        renders with them whatever its size (``silver/job._compiled``)."""
        now = time.monotonic()
        self.fresh.committed(now, self.lane(False)[1])
        self.readers.committed(now, self.lane(True)[1])
        if self.on:
            from pipelines.silver.render_warm import warm_in_background

            warm_in_background(self.cfg)

    def committed(self, last_ddl: tuple[str, int] | None, at: str | None = None) -> None:
        """A commit (up to bronze position ``at``) happened: the stages lack it from now; the
        snapshot a DDL owes."""
        self.bronze_at = at or self.bronze_at
        self.fresh.committed(time.monotonic(), self.lane(False)[1])
        self.pay_snapshot(last_ddl)

    def snapshot_owed(self, last_ddl: tuple[str, int] | None) -> bool:
        """Whether no stored snapshot of the source lies past ``last_ddl`` (file, end)."""
        if last_ddl is None:
            return False
        if not self.snapshots_read:
            from pipelines.silver.snapshot_store import latest_snapshot_seq

            self.snapshot_seq = latest_snapshot_seq(self.spark, self.cfg, self.cfg.source.name)
            self.snapshots_read = True
        return self.snapshot_seq is None or self.snapshot_seq < position_key(*last_ddl)

    def pay_snapshot(self, last_ddl: tuple[str, int] | None) -> None:
        """Take the snapshot ``last_ddl`` owes, if it owes one (module docstring)."""
        if time.monotonic() >= self.retry_at and self.snapshot_owed(last_ddl):
            self.snapshot(last_ddl)

    def due(self, now: float) -> bool:
        """Follow now? A stage lacks a commit whose bound comes close (``freshness.py``)."""
        return self.fresh.due(now) or self.readers.due(now)

    def snapshot(self, last_ddl: tuple[str, int]) -> None:
        """A schema snapshot through the source; a failure is a warning (silver may
        quarantine rows of the changed tables until the next snapshot)."""
        from pipelines.source.schema import take_snapshot
        from pipelines.silver.snapshot_store import save_snapshot

        source_id = self.cfg.source.name
        try:
            snap, checks = take_snapshot(self.dsn, source_id=source_id)
            save_snapshot(self.spark, self.cfg, snap, checks)
            log.info("schema snapshot %s at %s:%s", snap.snapshot_id, snap.binlog_file,
                     snap.binlog_pos)
        except SourceError as exc:
            self.retry_at = time.monotonic() + RETRY_SECONDS
            self.last_error = (time.time(), "snapshot", str(exc)[:300])
            log.warning("schema snapshot after DDL failed (silver may quarantine until the "
                        "next one): %s", exc)
            return
        # Taken after the DDL's commit: past it even when the server names no coordinates.
        self.snapshot_seq = max(snap.seq or 0, position_key(*last_ddl), self.snapshot_seq or 0)

    def behind(self, *, waiting: bool = False) -> list[str]:
        """The stages lacking bronze commits, in run order (``waiting``: only those not
        waiting out a failure)."""
        now = time.monotonic()
        lacking = ({*self.fresh.waiting(now), *self.readers.waiting(now)} if waiting
                   else {*self.fresh.behind, *self.readers.behind})
        return [s for s in self.stages if s in lacking]

    def begin(self, stages: list[str] | None = None) -> tuple[list[str], str | None]:
        """A follow of ``stages`` (default: all that follow bronze) starts now: (the stages
        in run order, the bronze position it holds). Called with the stream's commit lock
        held, so no commit is half made (``following.py``). The readers of silver begin
        now only when silver is not in the follow (else when its silver is done)."""
        run = [s for s in self.stages if stages is None or s in stages]
        self.fresh.begin([s for s in run if s not in READERS])
        if "silver" not in run:
            self.readers.begin([s for s in run if s in READERS])
        return run, self.bronze_at

    def follow(self, stages: list[str] | None = None,
               begun: tuple[list[str], str | None] | None = None) -> bool:
        """Bring ``stages`` (default: all that follow bronze) up to date with bronze as of
        the follow's start (``begun``: :meth:`begin`'s answer when already begun); True when
        all succeeded. Silver failing, the stages that read it wait for the next try
        (``run_stages``, as ``binlake index`` runs them)."""
        since = self.fresh.behind.get("silver")  # the oldest commit silver lacks
        run, at = begun or self.begin(stages)
        ok = run_stages(self.spark, self.cfg, run, _Followed(self, at, run, since),
                        gold_dsn=self.gold_dsn)
        for fresh, lane in (self.lane(False), self.lane(True)):
            if any(s in run for s in lane):
                fresh.took(sum(self.seconds.get(s, 0.0) for s in lane if s in run))
        return ok


class _Followed(Outcomes):
    """A follow's stages: each one's freshness and the bronze position ``at`` it holds once
    done; silver's counts logged; a failure logged and kept (``last_error``), never raised:
    following must not stop the stream."""

    def __init__(self, follower: Follower, at: str | None, run: list[str],
                 since: float | None) -> None:
        self.follower = follower
        self.at = at
        self.run = run  # the follow's stages
        self.since = since  # the oldest bronze commit silver lacked when the follow began
        self.mark = time.monotonic()  # when the stage now running began

    def silver(self, res) -> None:
        log.info("silver: %d appended, %d in quarantine", res.appended, res.quarantined)

    def failed(self, stage: str, exc: Exception) -> bool:
        self.follower.last_error = (time.time(), stage, str(exc).strip().split("\n")[0][:300])
        log.warning("following %s failed (bronze keeps streaming; tried again in %.0f s): "
                    "%s", stage, RETRY_SECONDS, exc)
        return True

    def ran(self, stage: str, done: bool) -> None:
        f, now = self.follower, time.monotonic()
        f.fresh_of(stage).ran(stage, done, now)
        f.seconds[stage], self.mark = now - self.mark, now
        log.info("followed %s in %.2f s (%s)", stage, f.seconds[stage],
                 "done" if done else "not done")
        if stage == "silver":
            readers = f.lane(True)[1]
            if done and self.since is not None and readers:
                f.readers.committed(self.since, readers)  # what silver added, from then
                f.on_silver()
            f.readers.begin([s for s in self.run if s in READERS])
        if done and self.at is not None:
            self.follower.positions[stage] = self.at


def tick_seconds(cfg: Config) -> float:
    """The longest the stream's loop goes without looking at the clock while following: the
    server's heartbeat period, at most half the freshness bound (``job.py`` asks for it)."""
    return min(float(cfg.stream.heartbeat_seconds), cfg.stream.freshness_seconds / 2)
