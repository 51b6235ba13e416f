"""The codes the compiled silver render loop (``render_jit``) shares with ``render_fast``.

Imports nothing, so the numba module compiles them to constants without importing the rest.
"""

from __future__ import annotations

# How a column's text is written (``render_fast.column_kinds``): a number as is, ASCII text in
# double quotes, UTF-8 text (any / BMP only) escaped, rendered beforehand (its Arrow kernel),
# a JSON document.
KIND_NUM, KIND_QUOTED, KIND_UTF8, KIND_UTF8_BMP, KIND_PRE, KIND_JSON = range(6)

# ``render_jit.render_side``'s outcomes: done, ``out`` too small, a value cannot be rendered.
OUT_OK, OUT_ROOM, OUT_INVALID = 0, 1, 2
