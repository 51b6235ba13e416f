"""``pk_hash`` = SHA2(pk_values, 256): lowercase hex, NULL for NULL, as the engines' ``sha2``.

Where binlake's tasks write silver's data files (``task_files``) the hash is computed in the
task, after rendering. Python's own SHA-256 (``_sha2``/``_sha256``, what ``hashlib`` falls
back to) costs ~0.9 µs a row under the GIL on this project's 2-core machine, against ~1.5 µs
through ``hashlib.sha256`` (OpenSSL 3 looks its implementation up on every construction);
for runs rendered by the compiled loops (``compiled``) a compiled loop (numba,
``pk_hash_jit``) calls OpenSSL's SHA-256 (the library ``hashlib`` uses) on each value without
the GIL: ~0.11 µs a row. Where numba or OpenSSL's ``SHA256_*`` calls are missing, Python
hashes.
"""

from __future__ import annotations

import hashlib
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["pk_hash", "python_pk_hash", "compiled_available"]

_HEX_LEN = 64


def _python_sha256():
    """CPython's built-in SHA-256 constructor (``_sha2`` from 3.12, ``_sha256`` before: the
    one ``hashlib`` falls back to), else ``hashlib.sha256``. The same digests; the built-in
    skips OpenSSL's per-object lookup, which is most of a short value's cost."""
    for module in ("_sha2", "_sha256"):
        try:
            return getattr(__import__(module), "sha256")
        except (ImportError, AttributeError):
            continue
    return hashlib.sha256


_SHA256 = _python_sha256()


def _loop():
    """The compiled loop (``pk_hash_jit``: OpenSSL's SHA-256, cached on disk by numba), or
    None where numba or the library is missing or ``BINLAKE_ROW_KERNEL`` is off; imported
    once per process (``rowkernel.jit_module``)."""
    from pipelines.binlog.fast.rowkernel import jit_module

    module = jit_module("pipelines.silver.pk_hash_jit")
    return module.sha256_hex if module is not None else None


def compiled_available() -> bool:
    """Whether the compiled loop hashes in this process (loading it the first time)."""
    return _loop() is not None


def python_pk_hash(values: pa.Array) -> pa.Array:
    """:func:`pk_hash` by Python's SHA-256, a value at a time under the GIL."""
    sha256 = _SHA256
    return pa.array([None if v is None else sha256(v.encode()).hexdigest()
                     for v in values.to_pylist()], pa.string())


def pk_hash(values: pa.Array, compiled: bool = False) -> pa.Array:
    """SHA-256 of each UTF-8 value of ``values`` (a string array) as 64 lowercase hex digits;
    NULL stays NULL. ``compiled`` (or numba loaded in this process already): by the compiled
    loop where it is available."""
    compiled = compiled or "numba" in sys.modules  # loaded here: the loop loads from its cache
    if not (compiled and len(values) and compiled_available()):
        return python_pk_hash(values)
    if not pa.types.is_large_string(values.type):
        values = values.cast(pa.string())
    n = len(values)
    width = np.int64 if pa.types.is_large_string(values.type) else np.int32
    _, off_buf, data_buf = values.buffers()
    offsets = np.frombuffer(off_buf, width, n + 1, values.offset * np.dtype(width).itemsize)
    # one byte more than the values hold: the loop takes the address of data[offsets[i]:]
    data = np.zeros((data_buf.size if data_buf is not None else 0) + 1, np.uint8)
    if data_buf is not None and data_buf.size:
        data[:-1] = np.frombuffer(data_buf, np.uint8)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    out = np.zeros(n * _HEX_LEN, np.uint8)
    _loop()(offsets.astype(np.int64), data, valid, out)
    bitmap = pc.is_valid(values).buffers()[1] if values.null_count else None
    return pa.StringArray.from_buffers(
        n, pa.py_buffer(np.arange(0, (n + 1) * _HEX_LEN, _HEX_LEN, dtype=np.int32)),
        pa.py_buffer(out), bitmap, values.null_count)
