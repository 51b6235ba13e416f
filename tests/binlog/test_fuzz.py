"""Corrupted and truncated real binlogs: the decoder fails clearly or not at all, fast.

Each case mutates a real corpus file (flipped bytes, overwritten runs, truncation, inserted
bytes) and reads it with :class:`BinlogFileReader`. Properties:

* the only exceptions are :class:`DecodeError` subclasses naming the file and a position
  inside it (never IndexError, struct.error, UnicodeDecodeError, zstd errors, …);
* every case ends within a time bound (no hang on a corrupted length or count);
* no silent garbage: in a CRC32 file any single changed byte is detected (the one byte the
  checksum does not cover, the FORMAT_DESCRIPTION's in-use flag, aside), and a file cut
  short either fails with TruncatedError or, when its FORMAT_DESCRIPTION says "in use",
  reports a partial tail at the last complete event.

Iterations are fixed and seeded (reproducible) and small enough for the whole file to run
in a few seconds.
"""

from __future__ import annotations

import random
import signal
from contextlib import contextmanager
from pathlib import Path

import pytest

from pipelines.binlog.parser import ChecksumPolicy
from pipelines.binlog.reader import BinlogFileReader
from pipelines.errors import DecodeError, TruncatedError
from tests.conftest import CORPUS

BB = "blackbeam__rust_mysql_common/test-data__binlogs__"
SOURCES = [
    "osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.checksum-crc32",
    "osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.checksum-none",
    "osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.compressed",
    BB + "transaction_compression.000001",
    BB + "binlog_transaction_with_GTID_TAG.000001",
    BB + "json-opaque.binlog",
    BB + "json.binlog.000001",
    BB + "vector.binlog",
    BB + "mariadb-bin.000001",
    BB + "mysql-enum-string-set.000001",
    BB + "ver_5_1-wl2325_r.001",
    "go-mysql-org__go-mysql/replication__t__tcb-eval002c-bin.003320",
    "zalora__binlog-parser/data__fixtures__mysql-bin.07",
]
CASE_SECONDS = 2.0


class Hang(Exception):
    pass


@contextmanager
def _deadline(seconds: float):
    def on_alarm(signum, frame):
        raise Hang(f"decoding took more than {seconds}s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _read(path: Path, checksum: ChecksumPolicy) -> tuple[BinlogFileReader, DecodeError | None]:
    reader = BinlogFileReader(str(path), checksum=checksum)
    with _deadline(CASE_SECONDS):
        try:
            for _ in reader:
                pass
        except DecodeError as exc:
            return reader, exc
    return reader, None


def _check_error(exc: DecodeError | None, path: Path, size: int) -> None:
    if exc is None:
        return
    assert exc.file == path.name, str(exc)
    assert exc.pos is not None and 0 <= exc.pos <= size, str(exc)
    assert str(exc).startswith(f"{path.name}, pos {exc.pos}")


def _mutations(data: bytes, rng: random.Random, n: int):
    for _ in range(n):
        kind = rng.randrange(4)
        buf = bytearray(data)
        if kind == 0:  # flip a few bytes anywhere after the magic
            for _ in range(rng.randint(1, 4)):
                buf[rng.randrange(4, len(buf))] ^= rng.randrange(1, 256)
        elif kind == 1:  # overwrite a run with random or extreme bytes
            start = rng.randrange(4, len(buf))
            run = rng.randint(1, 12)
            fill = rng.choice([None, 0x00, 0xFF, 0x80])
            for i in range(start, min(start + run, len(buf))):
                buf[i] = rng.randrange(256) if fill is None else fill
        elif kind == 2:  # cut short
            del buf[rng.randrange(4, len(buf)):]
        else:  # insert bytes
            at = rng.randrange(4, len(buf))
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        yield kind, bytes(buf)


@pytest.mark.parametrize("name", SOURCES)
def test_corrupted_files_fail_clearly(corpus: Path, tmp_path: Path, name: str) -> None:
    data = (corpus / name).read_bytes()
    rng = random.Random(name)
    path = tmp_path / "fuzzed-bin.000001"
    for kind, mutated in _mutations(data, rng, 200):
        path.write_bytes(mutated)
        for policy in (ChecksumPolicy.RAISE, ChecksumPolicy.IGNORE):
            try:
                _, exc = _read(path, policy)
            except DecodeError:
                raise
            except Exception as other:  # the property under test
                pytest.fail(f"{name}: mutation {kind} ({policy.value}) raised "
                            f"{type(other).__name__}: {other}")
            _check_error(exc, path, len(mutated))


def _crc_files() -> list[str]:
    return [n for n in SOURCES if (CORPUS / n).is_file()
            and (CORPUS / n).read_bytes()[4 + 19 + 2:4 + 19 + 3] >= b"5"
            and n.endswith(("crc32", "compressed", "compression.000001", "GTID_TAG.000001",
                            "opaque.binlog", "json.binlog.000001", "vector.binlog",
                            "mariadb-bin.000001", "set.000001", "003320"))]


@pytest.mark.parametrize("name", _crc_files())
def test_any_changed_byte_of_a_crc32_file_is_detected(corpus: Path, tmp_path: Path,
                                                      name: str) -> None:
    data = (corpus / name).read_bytes()
    rng = random.Random("crc" + name)
    path = tmp_path / "flipped-bin.000001"
    flags_at = 4 + 17  # FORMAT_DESCRIPTION header flags, low byte
    for _ in range(250):
        at = rng.randrange(4, len(data))
        bit = 1 << rng.randrange(8)
        if at == flags_at and bit == 1:
            continue  # LOG_EVENT_BINLOG_IN_USE_F: outside the checksum by design
        buf = bytearray(data)
        buf[at] ^= bit
        path.write_bytes(bytes(buf))
        reader, exc = _read(path, ChecksumPolicy.RAISE)
        assert exc is not None or reader.partial_tail, f"{name}: flipped bit at {at} unnoticed"
        _check_error(exc, path, len(buf))


@pytest.mark.parametrize("name", SOURCES)
def test_truncated_files_end_in_truncated_error_or_a_partial_tail(corpus: Path, tmp_path: Path,
                                                                  name: str) -> None:
    data = (corpus / name).read_bytes()
    whole, _ = _read(corpus / name, ChecksumPolicy.RAISE)
    rng = random.Random("cut" + name)
    path = tmp_path / "cut-bin.000001"
    for _ in range(60):
        cut = rng.randrange(5, len(data))
        path.write_bytes(data[:cut])
        reader, exc = _read(path, ChecksumPolicy.RAISE)
        if exc is None:
            # Cut exactly at an event boundary, or a file the server was still writing.
            assert reader.end_pos == cut or (reader.partial_tail and reader.in_use)
        else:
            assert isinstance(exc, TruncatedError) or exc.pos is not None, str(exc)
            assert whole.in_use is False or isinstance(exc, DecodeError)
            _check_error(exc, path, cut)
