"""What follows a stream commit: silver (and gold when configured) every
``stream.silver_lag_seconds``, and a schema snapshot after a commit that holds DDL.

Following never stops the stream: bronze is the record, silver and gold are derived from it
exactly once by their own watermarks, so a failed follow is logged and the next one catches
up. A snapshot is taken only after the DDL's commit, so its coordinates lie past the DDL.
"""

from __future__ import annotations

import logging
import time

from pipelines.config import Config
from pipelines.errors import SourceError
from pipelines.mysql_client import Dsn

__all__ = ["Follower"]

log = logging.getLogger(__name__)


class Follower:
    """Silver/gold following and post-DDL snapshots for one stream (module docstring)."""

    def __init__(self, spark, cfg: Config, *, dsn: Dsn, gold_dsn: str | None = None) -> None:
        self.spark = spark
        self.cfg = cfg
        self.dsn = dsn
        self.gold_dsn = gold_dsn
        self.lag_seconds = cfg.stream.silver_lag_seconds
        self.silver_pending = False  # bronze holds commits silver has not seen
        self.ddl_pending = False  # the open micro-batch holds DDL
        self.last_silver = time.monotonic()
        self.mirror = False  # `binlake stream --mirror`

    def start(self) -> None:
        """The stream is starting. When silver follows, its compiled render loops load now,
        on a thread of their own, where this process renders them (``render_warm``): a
        stream lives long, so every follow after the first few seconds renders with them
        whatever its size (``silver/job._compiled``)."""
        if self.lag_seconds > 0:
            from pipelines.silver.render_warm import warm_in_background

            warm_in_background(self.cfg)

    def saw_ddl(self) -> None:
        self.ddl_pending = True

    def committed(self) -> None:
        """A commit happened: silver has something to follow; snapshot after DDL."""
        self.silver_pending = True
        if self.ddl_pending:
            self.ddl_pending = False
            self.snapshot()

    def due(self, now: float) -> bool:
        """Follow now? Something is pending, following is on, and the lag has passed."""
        return (self.silver_pending and self.lag_seconds > 0
                and now - self.last_silver >= self.lag_seconds)

    def snapshot(self) -> None:
        """A schema snapshot through the source; a failure is a warning (silver may
        quarantine rows of the changed tables until the next snapshot)."""
        from pipelines.silver.snapshot_source import take_snapshot
        from pipelines.silver.snapshot_store import save_snapshot

        source_id = self.cfg.source.name
        try:
            snap, checks = take_snapshot(self.dsn, source_id=source_id)
            save_snapshot(self.spark, self.cfg, snap, checks)
            log.info("schema snapshot %s at %s:%s", snap.snapshot_id, snap.binlog_file,
                     snap.binlog_pos)
        except SourceError as exc:
            log.warning("schema snapshot after DDL failed (silver may quarantine until the "
                        "next one): %s", exc)

    def follow(self) -> bool:
        """Bring silver (and gold) up to date with bronze; True when it all succeeded."""
        from pipelines.silver.job import run_silver

        ok = True
        try:
            res = run_silver(self.spark, self.cfg)
            log.info("silver: %d appended, %d in quarantine", res.appended, res.quarantined)
            if self.gold_dsn:
                from pipelines.gold.job import run_gold

                run_gold(self.spark, self.cfg, gold_dsn=self.gold_dsn)
            if self.mirror:
                from pipelines.mirror.job import run_mirror

                run_mirror(self.spark, self.cfg)
        except Exception as exc:  # noqa: BLE001 - following must not stop the stream
            log.warning("following silver/gold failed (bronze keeps streaming): %s", exc)
            ok = False
        self.silver_pending = False
        self.last_silver = time.monotonic()
        return ok
