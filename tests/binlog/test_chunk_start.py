"""Chunks of a file start framing at a known event (``reader.chunk_start``), not at byte 4:
the same bronze rows as framing everything before the chunk, and as the file decoded whole.

Why: bronze commits every ``bronze.commit_mb`` of binlog, so a 1 GB file is split into ~32
chunks; without ``start_at`` each chunk framed all the events before it (quadratic).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.bronze.decode_task import decode_file_batches
from pipelines.binlog.framing import event_starts_before, iter_raw_events
from pipelines.binlog.reader import chunk_start
from tests.support.bronze_maps import split_maps

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
CORPUS_FILES = [  # MySQL 5.7 (checksum CRC32 and OFF)
    "zalora__binlog-parser/data__fixtures__mysql-bin.01",
    "osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.checksum-crc32",
]


def _files(corpus: Path) -> list[Path]:
    return [SAMPLES / "mariadb-bin.000002", SAMPLES / "mariadb-bin.000003",
            *(corpus / f for f in CORPUS_FILES)]


def _decode(path: Path, chunk: int = 0, chunks: int = 1, start_at: int = 4) -> pa.Table:
    return pa.Table.from_batches(list(decode_file_batches(
        str(path), source_id="t", subprocess=False, chunk=chunk, chunks=chunks,
        start_at=start_at)))


def _changes(t: pa.Table) -> list[dict]:
    rows = t.to_pylist()
    return [r for r in rows if r["event_type"] not in ("END", "ERROR", "TABLE_MAP")]


def test_event_starts_before_finds_the_last_event_at_or_before(corpus: Path) -> None:
    for path in _files(corpus):
        with open(path, "rb") as fh:
            starts = [raw.header.pos for raw in iter_raw_events(fh, file=path.name)]
        size = path.stat().st_size
        offsets = sorted({4, 5, starts[1], starts[1] + 1, size // 3, size // 2, size - 1})
        with open(path, "rb") as fh:
            got = event_starts_before(fh, offsets)
        assert got == [max(s for s in starts if s <= o) for o in offsets], path.name


@pytest.mark.parametrize("chunks", [2, 5, 11])
def test_chunks_from_their_start_equal_the_whole_file(corpus: Path, chunks: int) -> None:
    for path in _files(corpus):
        whole = _changes(_decode(path))
        pieces, maps = [], set()
        for k in range(chunks):
            at = chunk_start(str(path), k, chunks)
            assert at >= 4
            from_start = _decode(path, k, chunks, start_at=at)
            assert from_start.equals(_decode(path, k, chunks)), (path.name, k)
            pieces += _changes(from_start)
            maps.update(split_maps(from_start.to_pylist())[1])
        assert pieces == whole, path.name
        assert sorted(maps) == split_maps(_decode(path).to_pylist())[1], path.name
        assert whole, path.name  # the file has row changes to compare
