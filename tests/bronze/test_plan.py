"""How bronze splits its files into decoding tasks (``plan_chunks``) and commits
(``plan_commits``), with the shipped defaults: the tasks are what keep every core busy (silver
reads a bronze data file per task too), the commits what bound the embedded engine's memory
(``BOUNDED_COMMIT_MB``; engines whose writers stream commit once per run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.bronze.job import plan_chunks, plan_commits
from pipelines.config import BronzeConfig
from pipelines.lake.delta_ops import BOUNDED_COMMIT_MB

MB = 2**20
DEFAULT = BronzeConfig()


def _files(tmp_path: Path, sizes: list[int]) -> list[str]:
    out = []
    for i, size in enumerate(sizes, 1):
        path = tmp_path / f"mariadb-bin.{i:06d}"
        with open(path, "wb") as fh:
            fh.truncate(size)  # sparse: only the size matters to the plan
        out.append(str(path))
    return out


@pytest.mark.parametrize("sizes, cores, chunks", [
    ([3 * MB], 2, [1]),  # below two minimum chunks: one task
    ([4 * MB], 2, [2]),  # the default minimum (2 MB): a 4 MB file on both cores
    ([20 * MB], 2, [2]),
    ([60 * MB], 2, [2]),
    ([20 * MB], 8, [8]),  # at most one chunk per idle core
    ([20 * MB, 20 * MB], 2, [1, 1]),  # as many files as cores: whole files
    ([1024 * MB], 2, [32]),  # commit_mb 64 → chunks of at most 32 MB
    ([100_000], 2, [1]),  # a small file, whatever the cores
])
def test_default_chunks(tmp_path: Path, sizes, cores, chunks) -> None:
    paths = _files(tmp_path, sizes)
    plan = plan_chunks(paths, cores, DEFAULT.min_chunk_mb * MB, int(BOUNDED_COMMIT_MB * MB))
    per_file = [sum(1 for p, *_ in plan if p == path) for path in paths]
    assert per_file == chunks
    for path, size in zip(paths, sizes):
        mine = [t for t in plan if t[0] == path]
        assert [t[1] for t in mine] == list(range(len(mine)))  # chunk numbers in order
        assert all(t[2] == len(mine) for t in mine)  # each knows how many
        assert sum(t[3] for t in mine) == size - size % len(mine)


def test_commits_hold_at_most_commit_mb_in_order(tmp_path: Path) -> None:
    paths = _files(tmp_path, [1024 * MB, 10 * MB, 10 * MB])
    commit = int(BOUNDED_COMMIT_MB * MB)
    plan = plan_chunks(paths, 2, DEFAULT.min_chunk_mb * MB, commit)
    waves = plan_commits(plan, commit)
    assert [t for w in waves for t in w] == plan  # every task once, in order
    assert all(sum(t[3] for t in w) <= commit for w in waves)
    assert len(waves) == 17  # 32 chunks of 32 MB two by two, then both small files
    assert plan_commits(plan, 0) == [plan]  # commit_mb = 0: one commit


@pytest.mark.parametrize("cores, chunks", [(2, 2), (8, 8)])
def test_one_commit_per_run_splits_a_file_among_the_cores_only(tmp_path: Path, cores,
                                                                chunks) -> None:
    """commit_mb 0 (an engine whose writer streams): no commit bound cuts the file further."""
    paths = _files(tmp_path, [1024 * MB])
    plan = plan_chunks(paths, cores, DEFAULT.min_chunk_mb * MB, 0)
    assert len(plan) == chunks
    assert plan_commits(plan, 0) == [plan]
