"""Gold rotation: drop hourly partitions older than the retention, never an hour silver
does not hold.

:func:`plan_rotation` is pure. A partition is a candidate when its whole hour ends at or
before the cut-off (the current hour minus the retention). It is dropped only when, for
every hour of the partition's range that has gold rows, silver holds at least as many rows
of that hour — the oldest partition's range is open below, like RANGE partitioning itself,
and an hour compared alone cannot be masked by silver rows of hours rotated earlier — so a
rotated hour always still answers from silver (and from Delta time travel, within the
tables' retention). All drops go in one ``ALTER TABLE … DROP PARTITION a, b, …``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from pipelines.gold.ddl import EVENTS_TABLE, Partition
from pipelines.vocabulary import quote_ident

__all__ = ["Candidate", "RotationPlan", "plan_rotation", "gold_hour_counts",
           "silver_hour_counts", "drop_partitions", "epoch_hour"]

_EPOCH = dt.datetime(1970, 1, 1)


def epoch_hour(t: dt.datetime) -> int:
    return int((t - _EPOCH).total_seconds() // 3600)


@dataclass(frozen=True)
class Candidate:
    partition: Partition
    lo: dt.datetime | None  # inclusive; None = open below (the oldest partition)
    hi: dt.datetime  # exclusive
    gold_rows: int = 0
    silver_rows: int = 0


@dataclass
class RotationPlan:
    drop: list[Candidate] = field(default_factory=list)
    keep: list[Candidate] = field(default_factory=list)  # old enough, but silver lacks rows


def _hours_in(counts: dict[int, int], lo: dt.datetime | None, hi: dt.datetime):
    lo_h = epoch_hour(lo) if lo is not None else None
    hi_h = epoch_hour(hi)
    return [(h, n) for h, n in counts.items() if h < hi_h and (lo_h is None or h >= lo_h)]


def _in_range(counts: dict[int, int], lo: dt.datetime | None, hi: dt.datetime) -> int:
    return sum(n for _, n in _hours_in(counts, lo, hi))


def plan_rotation(partitions: list[Partition], cutoff: dt.datetime,
                  gold: dict[int, int], silver: dict[int, int]) -> RotationPlan:
    """Which hourly partitions to drop. ``gold``/``silver``: rows per epoch hour (only hours
    before ``cutoff`` matter)."""
    plan = RotationPlan()
    prev_hi: dt.datetime | None = None
    for p in partitions:
        if p.hour is None:
            continue
        hi = p.hour + dt.timedelta(hours=1)
        if hi > cutoff:
            break
        c = Candidate(p, prev_hi, hi, _in_range(gold, prev_hi, hi), _in_range(silver, prev_hi, hi))
        safe = all(silver.get(h, 0) >= n for h, n in _hours_in(gold, prev_hi, hi))
        (plan.drop if safe else plan.keep).append(c)
        prev_hi = hi
    return plan


def gold_hour_counts(conn, before: dt.datetime) -> dict[int, int]:
    """Exact gold rows per epoch hour before ``before`` (partition-pruned COUNT)."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT DATE_FORMAT(event_timestamp, '%%Y%%m%%d%%H') AS h, COUNT(*) "
                    f"FROM {quote_ident(EVENTS_TABLE)} WHERE event_timestamp < %s GROUP BY h",
                    (before,))
        return {epoch_hour(dt.datetime.strptime(h, "%Y%m%d%H")): int(n)
                for h, n in cur.fetchall()}


def silver_hour_counts(silver, before: dt.datetime) -> dict[int, int]:
    """Rows of the ``silver`` DataFrame per epoch hour before ``before``; time-zone
    independent (epoch seconds), pruned by the ``event_date`` partitions."""
    from pyspark.sql import functions as F

    cut = int((before - _EPOCH).total_seconds())
    secs = F.col("event_timestamp").cast("long")
    rows = (silver
            .where(F.col("event_date") <= F.lit(before.date()))
            .where(secs < F.lit(cut))
            .groupBy(F.floor(secs / F.lit(3600)).alias("h")).count().collect())
    return {int(r["h"]): int(r["count"]) for r in rows}


def drop_partitions(conn, names: list[str]) -> None:
    """Drop ``names`` in one DDL statement."""
    if names:
        with conn.cursor() as cur:
            cur.execute(f"ALTER TABLE {quote_ident(EVENTS_TABLE)} DROP PARTITION "
                        + ", ".join(quote_ident(n) for n in names))
