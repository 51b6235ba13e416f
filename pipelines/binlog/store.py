"""Where binlog files are read from: a local directory, or an object store read in place.

``--binlog-dir s3://bucket/prefix`` (or ``s3a://``) names binlogs archived on S3 or an S3 API
store (MinIO, R2, Ceph), with the credentials and endpoint of the ``[storage]`` section, as
for an ``s3://`` lake (``s3_client.S3Settings``). Nothing is copied through the driver: the
driver lists the objects (names and sizes), and each decoding task reads its file's bytes
from the store itself, in ranged GETs of :data:`BLOCK` bytes behind a buffered reader
(:class:`RangeReader`), so a chunk of a file split among tasks reads only its own range.
File names, sizes and positions in bronze are those of the objects, as for local files.

A path is either a local path or an ``s3://bucket/key`` URL; the functions here take either
(``storage``: the ``[storage]`` settings object, for URLs). A missing or unreadable object
raises ``OSError`` as a missing local file does (``FileNotFoundError`` for a missing key), so
callers treat both alike: the reader turns it into the file's located ERROR row.
"""

from __future__ import annotations

import io
import os
from typing import BinaryIO

from pipelines.binlog.framing import MAGIC
from pipelines.errors import BinlakeError
from pipelines.lake.s3_client import S3Client, S3Settings, is_s3_url, parse_s3_url

__all__ = ["is_remote", "join", "absolute", "size", "open_binlog", "head", "list_objects",
           "RangeReader", "BLOCK"]

BLOCK = 8 << 20  # bytes per ranged GET (one request per 8 MiB of binlog read)


def is_remote(path: str) -> bool:
    """Whether ``path`` names an object on a store (``s3://`` / ``s3a://``)."""
    return is_s3_url(path)


def join(binlog_dir: str, name: str) -> str:
    """The path of file ``name`` of ``binlog_dir`` (a URL stays a URL)."""
    if is_remote(binlog_dir):
        return binlog_dir.rstrip("/") + "/" + name
    return os.path.join(binlog_dir, name)


def absolute(path: str) -> str:
    """``path`` made absolute (a URL is already)."""
    return path if is_remote(path) else os.path.abspath(path)


def _client(url: str, storage: object | None) -> tuple[S3Client, str]:
    loc = parse_s3_url(url, setting="--binlog-dir")
    return S3Client(S3Settings.resolve(storage), loc.bucket), loc.key()


def list_objects(binlog_dir: str, storage: object | None = None) -> dict[str, int]:
    """The objects directly under ``binlog_dir`` (an ``s3://`` URL): name → size."""
    client, prefix = _client(binlog_dir, storage)
    prefix = prefix + "/" if prefix else ""
    return {key[len(prefix):]: n for key, n in client.sizes(prefix).items()
            if "/" not in key[len(prefix):] and key != prefix}


def remote_binlogs(binlog_dir: str, storage: object | None = None) -> list[str]:
    """The binlogs under an ``s3://`` ``binlog_dir``, in server order, chosen as
    ``binlog_dir.list_binlogs`` chooses a local directory's: per base name the objects a
    ``<base>.index`` object lists, else the binlog-named objects that begin with the magic."""
    from pipelines.binlog.names import binlog_order, is_binlog_file, split_binlog_name
    from pipelines.binlog.directory import INDEX_SUFFIX

    objects = list_objects(binlog_dir, storage)
    listed: dict[str, set[str]] = {}
    for name in sorted(n for n in objects if n.endswith(INDEX_SUFFIX)):
        text = head(join(binlog_dir, name), objects[name], storage)
        entries = [line.strip() for line in text.decode("utf-8", "replace").splitlines()
                   if line.strip()]
        names = [e.replace("\\", "/").rsplit("/", 1)[-1] for e in entries]
        if names and all(is_binlog_file(n) for n in names):
            for n in names:
                if n in objects:
                    listed.setdefault(split_binlog_name(n)[0], set()).add(n)
    chosen = [n for n in objects if is_binlog_file(n) and (
        n in listed.get(split_binlog_name(n)[0], ())
        if split_binlog_name(n)[0] in listed
        else objects[n] >= len(MAGIC) and head(join(binlog_dir, n), len(MAGIC), storage) == MAGIC)]
    return [join(binlog_dir, n) for n in sorted(chosen, key=lambda n: (binlog_order(n), n))]


def size(path: str, storage: object | None = None) -> int:
    """The file's size in bytes. Raises ``FileNotFoundError`` when there is no such file."""
    if not is_remote(path):
        return os.path.getsize(path)
    client, key = _client(path, storage)
    found = client.sizes(key).get(key)  # a listing of that one key (and longer names)
    if found is None:
        raise FileNotFoundError(2, "no such object", path)
    return found


def open_binlog(path: str, storage: object | None = None, *, buffering: int = 1 << 20,
                known_size: int | None = None) -> BinaryIO:
    """The file opened for reading (binary, buffered, seekable). Raises ``OSError``."""
    if not is_remote(path):
        return open(path, "rb", buffering=buffering)
    client, key = _client(path, storage)
    total = size(path, storage) if known_size is None else known_size
    return io.BufferedReader(RangeReader(client, key, total, path), buffer_size=BLOCK)


def head(path: str, n: int = len(MAGIC), storage: object | None = None) -> bytes:
    """The file's first ``n`` bytes. Raises ``OSError``."""
    if not is_remote(path):
        with open(path, "rb") as f:
            return f.read(n)
    client, key = _client(path, storage)
    data = client.get_range(key, 0, n)
    if data is None:
        raise FileNotFoundError(2, "no such object", path)
    return data


class RangeReader(io.RawIOBase):
    """An object read by ranged GETs: a raw, seekable binary stream of ``total`` bytes.

    Errors from the store (:class:`BinlakeError`: refused credentials, a fault after
    retries) are raised as ``OSError`` naming the object, as a local read error would be."""

    def __init__(self, client: S3Client, key: str, total: int, name: str) -> None:
        super().__init__()
        self._client, self._key, self._total, self.name = client, key, total, name
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._total}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer) -> int:
        want = min(len(buffer), self._total - self._pos)
        if want <= 0:
            return 0
        try:
            data = self._client.get_range(self._key, self._pos, want)
        except BinlakeError as exc:
            raise OSError(5, str(exc), self.name) from exc
        if data is None:
            raise FileNotFoundError(2, "no such object (removed while read)", self.name)
        n = len(data)
        buffer[:n] = data
        self._pos += n
        return n
