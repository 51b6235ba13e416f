"""Small non-table files under the lake root (quality reports): a path or an ``s3://`` URL."""

from __future__ import annotations

import os

from pipelines.lake import is_url_root

__all__ = ["write_lake_file"]


def write_lake_file(storage: object, path: str, data: bytes) -> None:
    """Write ``data`` at ``path`` whole: a temporary file renamed over it on a filesystem, one
    PUT on an object store (``storage`` is the ``[storage]`` section, ``pipelines/s3_client``)."""
    if is_url_root(path):
        from pipelines.s3_client import S3Client, S3Settings, parse_s3_url

        loc = parse_s3_url(path)
        kind = "text/html" if path.endswith(".html") else "application/octet-stream"
        S3Client(S3Settings.resolve(storage), loc.bucket).put(loc.prefix, data,
                                                              content_type=kind)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
