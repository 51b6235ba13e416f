"""Row images decoded by compiled code straight into Arrow buffers (numba).

The Python decoders (``values.py`` and the generated loops of ``rowcodegen.py``) build one
``bytes`` object per value and one list per image, which ``records.flush`` then converts to
Arrow: about 60k row changes/s per core. Here one compiled loop (``numba``, built once per
machine and cached on disk) walks the rows of a rows event and writes each value's bronze
text into an :class:`~pipelines.binlog.fast.image_sink.ImageSink` — the data, offsets and validity
buffers of the ``list<binary>`` column itself — so no Python object is made per value.

A table's columns become a *program* (:func:`program`): per column whether it is present,
an operation and its parameters. Operations cover every type whose bronze text the loop can
write byte for byte as ``values.py`` does (integers, YEAR, ENUM, SET, BIT, strings and blobs,
DECIMAL, DATE, DATETIME2, TIMESTAMP[2], TIME2). For FLOAT, DOUBLE, JSON and the pre-5.6
TIME/DATETIME the loop only measures the value and leaves a *fix-up*: right after the loop
the column's Python decoder renders those values (``FIX_*``). Anything else — a type with no
decoder, impossible bytes (a negative DATETIME2, a fraction or decimal digit group out of
range), a value running past the event, a sink that needs more room — makes the loop stop at
the start of that row and say why; the caller grows the sink and goes on, or lets the Python
decoding finish the event (raising its exact error). So the loop only ever writes what the
reference decoding would return: ``tests/binlog/test_rows_kernel.py`` holds the two against each
other value by value, on mutated and truncated rows and over the whole corpus.

Without numba (or with ``BINLAKE_ROW_KERNEL=off``, a switch for comparing the two paths)
:func:`available` is false and bronze decodes in Python. When it is worth loading is the
stage's setting (``bronze.compiled_min_mb``), for callers without one :data:`MIN_BYTES`.
"""

from __future__ import annotations

import os

import numpy as np

from pipelines.binlog import coltypes as T
from pipelines.binlog.fast.opcodes import (DONE, GIVE_UP, NEED_ROOM, OP_BYTES, OP_DATE,
                                           OP_DATETIME2, OP_DECIMAL, OP_FIX_FIXED,
                                           OP_FIX_PREFIXED, OP_GIVE_UP, OP_INT, OP_NULL_TYPE,
                                           OP_TIME2, OP_TIMESTAMP, OP_TIMESTAMP2, OP_UINT,
                                           OP_UINT_BE, OP_YEAR, ROOM_DATA, ROOM_FIX, ROOM_ROWS,
                                           ROOM_VALUES)
from pipelines.config import BronzeConfig
from pipelines.errors import EngineError

__all__ = ["available", "installed", "jit_module", "warm", "warmed", "program", "run",
           "new_state", "MIN_BYTES", "DONE", "NEED_ROOM", "GIVE_UP", "ROOM_ROWS",
           "ROOM_VALUES", "ROOM_DATA", "ROOM_FIX"]

# The loop costs a process about 0.6 s to load (numba, then the cached machine code) and saves
# about 0.25 s per 40 MB of binlog on two cores (the engine's own costs stay): a chunk of
# less than this, decoded with no setting (``decode_file_batches(columnar=None)``), stays in
# Python unless the process has the loop loaded already. It is ``bronze.compiled_min_mb``'s
# default (measured with whole `binlake index` commands, docs/performance.md).
MIN_BYTES = int(BronzeConfig.compiled_min_mb * 2**20)




def _op(col_type: int, meta: int, unsigned: bool | None) -> tuple[int, int, int]:
    """(operation, a, b) for one column, mirroring ``values.column_decoder``'s dispatch."""
    if col_type in T.INTEGER_TYPES:
        return (OP_INT if not unsigned else OP_UINT), T.INTEGER_WIDTH[col_type], 0
    if col_type in T.VARCHAR_LIKE:
        if meta < 0 or meta > 0xFFFF:
            return OP_GIVE_UP, 0, 0
        return OP_BYTES, (1 if meta < 256 else 2), 0
    if col_type in T.BLOB_LIKE or col_type == T.JSON:
        if not 1 <= meta <= 4:
            return OP_GIVE_UP, 0, 0
        return (OP_FIX_PREFIXED if col_type == T.JSON else OP_BYTES), meta, 0
    if col_type == T.NEWDECIMAL:
        precision, scale = meta >> 8, meta & 0xFF
        if not (1 <= precision <= 96 and 0 <= scale <= precision):
            return OP_GIVE_UP, 0, 0
        return OP_DECIMAL, precision, scale
    if col_type in (T.DATETIME2, T.TIMESTAMP2, T.TIME2):
        if not 0 <= meta <= 6:
            return OP_GIVE_UP, 0, 0
        return {T.DATETIME2: OP_DATETIME2, T.TIMESTAMP2: OP_TIMESTAMP2,
                T.TIME2: OP_TIME2}[col_type], meta, 0
    if col_type == T.TIMESTAMP:
        return OP_TIMESTAMP, 0, 0
    if col_type == T.DATE:
        return OP_DATE, 0, 0
    if col_type == T.YEAR:
        return OP_YEAR, 0, 0
    if col_type in (T.TIME, T.DATETIME, T.FLOAT, T.DOUBLE):
        return OP_FIX_FIXED, {T.TIME: 3, T.DATETIME: 8, T.FLOAT: 4, T.DOUBLE: 8}[col_type], 0
    if col_type == T.BIT:
        if not 1 <= meta <= 64:
            return OP_GIVE_UP, 0, 0
        return OP_UINT_BE, (meta + 7) // 8, 0
    if col_type == T.ENUM:
        return (OP_UINT, meta, 0) if meta in (1, 2) else (OP_GIVE_UP, 0, 0)
    if col_type == T.SET:
        return (OP_UINT, meta, 0) if 1 <= meta <= 8 else (OP_GIVE_UP, 0, 0)
    if col_type == T.NULL:
        return OP_NULL_TYPE, 0, 0
    return OP_GIVE_UP, 0, 0


def program(types, metas, unsigned, present: list[bool] | None) -> np.ndarray:
    """The column program of one image: ``int32[ncols, 4]`` = (present, op, a, b)."""
    n = len(types)
    uns = unsigned or [None] * n
    prog = np.zeros((n, 4), np.int32)
    for i in range(n):
        op, a, b = _op(types[i], metas[i], uns[i])
        prog[i] = (1 if present is None or present[i] else 0, op, a, b)
    return prog


def _enabled() -> bool:
    setting = os.environ.get("BINLAKE_ROW_KERNEL", "on").strip().lower()
    return setting not in ("0", "false", "no", "off")


_KERNEL = None
_WARM = False
_MODULES: dict = {}


def installed() -> bool:
    """Whether numba is installed and the loop is not turned off (without importing numba)."""
    import importlib.util

    return _enabled() and importlib.util.find_spec("numba") is not None


def jit_module(name: str):
    """The module of compiled loops ``name`` (it imports numba), or ``None`` when numba is
    missing or ``BINLAKE_ROW_KERNEL`` is off; imported once per process."""
    if name not in _MODULES:
        module = None
        if _enabled():
            import importlib

            try:
                module = importlib.import_module(name)
            except ImportError:
                module = None
        _MODULES[name] = module
    return _MODULES[name]


def available() -> bool:
    """Whether the compiled loop can be used in this process (numba importable, not off)."""
    global _KERNEL
    if _KERNEL is None:
        module = jit_module("pipelines.binlog.fast.rowkernel_jit")
        _KERNEL = module.decode_rows if module is not None else None
    return _KERNEL is not None


def warm() -> bool:
    """Load (or, the first time on a machine, compile) the loop in this process now."""
    global _WARM
    if not _WARM and available():
        from pipelines.binlog.fast.image_sink import ImageSink

        sink = ImageSink(4, 16, 256)
        prog = program([T.LONG], [0], [False], None)
        run(np.zeros(8, np.uint8), 0, 0, 0, prog, prog, sink, sink, np.zeros((4, 4), np.int64),
            new_state())
        _WARM = True
    return _WARM


def warmed() -> bool:
    """Whether this process has the loop loaded (:func:`warm`, or a decoding that used it)."""
    return _WARM or (_KERNEL is not None and bool(_KERNEL.signatures))


def new_state() -> np.ndarray:
    """The state array :func:`run` reports in: (stop position, rows written, fix-ups
    written, what a NEED_ROOM lacks, for which sink, the size needed)."""
    return np.zeros(6, np.int64)


def run(buf: np.ndarray, pos: int, end: int, kind: int, prog_a: np.ndarray,
        prog_b: np.ndarray, before, after, fix: np.ndarray, state: np.ndarray) -> int:
    """Decode rows from ``pos`` into the sinks ``before``/``after`` (kind 0 INSERT, 1 DELETE,
    2 UPDATE); returns DONE, NEED_ROOM or GIVE_UP with ``state`` (:func:`new_state`).
    Only where :func:`available` is true."""
    if _KERNEL is None and not available():
        raise EngineError("the compiled row loop is not available (numba missing or off)")
    return _KERNEL(buf, pos, end, kind, prog_a, prog_b,
                   before.data, before.voff, before.vvalid, before.loff, before.lvalid,
                   before.cnt,
                   after.data, after.voff, after.vvalid, after.loff, after.lvalid, after.cnt,
                   fix, state)
