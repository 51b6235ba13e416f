"""Small non-table files under the lake root, on a filesystem or an ``s3://`` object store.

Quality reports are written here, and ``pipelines/lake/check.py`` reads Delta logs and sizes
data files through these calls. On an object store the client's settings are the
``[storage]`` section when given, else the ``AWS_*`` environment (``binlake`` exports the
resolved settings there at start, :func:`pipelines.lake.s3_client.export_engine_env`).
"""

from __future__ import annotations

import glob
import os
import shutil

from pipelines.config import is_url_root

__all__ = ["write_lake_file", "read_lake_file", "list_lake_dir", "lake_file_sizes",
           "lake_path_exists", "move_lake_path", "delta_tables_under"]


def _s3(path: str, storage: object | None):
    from pipelines.lake.s3_client import S3Client, S3Settings, parse_s3_url

    loc = parse_s3_url(path, setting=path)
    return S3Client(S3Settings.resolve(storage), loc.bucket), loc.prefix


def write_lake_file(storage: object | None, path: str, data: bytes) -> None:
    """Write ``data`` at ``path`` whole: a temporary file renamed over it on a filesystem, one
    PUT on an object store (``storage`` is the ``[storage]`` section, ``pipelines/s3_client``)."""
    if is_url_root(path):
        client, key = _s3(path, storage)
        kind = "text/html" if path.endswith(".html") else "application/octet-stream"
        client.put(key, data, content_type=kind)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def read_lake_file(path: str, storage: object | None = None) -> bytes:
    """The bytes at ``path``; :class:`FileNotFoundError` when there is nothing there."""
    if not is_url_root(path):
        with open(path, "rb") as fh:
            return fh.read()
    client, key = _s3(path, storage)
    got = client.get(key)
    if got is None:
        raise FileNotFoundError(2, "No such object", path)
    return got[0]


def list_lake_dir(path: str, storage: object | None = None) -> list[str] | None:
    """The names directly in directory ``path`` (on S3: under the prefix ``path/``, one level);
    None when there is no such directory (no key under the prefix)."""
    if not is_url_root(path):
        try:
            return os.listdir(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
    client, key = _s3(path, storage)
    base = key.rstrip("/") + "/"
    names = {k[len(base):].split("/", 1)[0] for k in client.list(base)} - {""}  # "dir/" markers
    return sorted(names) or None


def lake_file_sizes(path: str, storage: object | None = None) -> dict[str, int] | None:
    """For an object-store directory: every file under it (relative name → bytes), from one
    listing; None for a filesystem path (``os.path.getsize`` per file is as cheap)."""
    if not is_url_root(path):
        return None
    client, key = _s3(path, storage)
    base = key.rstrip("/") + "/"
    return {k[len(base):]: n for k, n in client.sizes(base).items()}


def lake_path_exists(path: str, storage: object | None = None) -> bool:
    """A file or a non-empty directory at ``path``."""
    if not is_url_root(path):
        return os.path.exists(path)
    client, key = _s3(path, storage)
    return client.get(key) is not None or bool(client.list(key.rstrip("/") + "/"))


def move_lake_path(src: str, dest: str, storage: object | None = None) -> None:
    """Move a file or a whole directory (on S3: every key under it, copied then deleted)."""
    if not is_url_root(src):
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.move(src, dest)
        return
    client, key = _s3(src, storage)
    _, dest_key = _s3(dest, storage)
    moves = [(key, dest_key)] if client.get(key) is not None else []
    base = key.rstrip("/") + "/"
    moves += [(k, dest_key.rstrip("/") + "/" + k[len(base):]) for k in client.list(base)]
    for old, new in moves:
        client.copy(old, new)
        client.delete(old)


def delta_tables_under(base: str, depth: int, storage: object | None = None) -> list[str]:
    """The Delta tables exactly ``depth`` directories below ``base`` (``<base>/a/b`` for 2),
    found by their ``_delta_log``; on S3 from one listing of the prefix."""
    if not is_url_root(base):
        pattern = os.path.join(base, *["*"] * depth, "_delta_log")
        return sorted(os.path.dirname(p) for p in glob.glob(pattern) if os.path.isdir(p))
    client, key = _s3(base, storage)
    prefix = key.rstrip("/") + "/"
    found = set()
    for k in client.list(prefix):
        parts = k[len(prefix):].split("/")
        if len(parts) > depth + 1 and parts[depth] == "_delta_log":
            found.add(base.rstrip("/") + "/" + "/".join(parts[:depth]))
    return sorted(found)
