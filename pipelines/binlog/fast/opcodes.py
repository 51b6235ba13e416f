"""The compiled row loop's codes, shared by ``rowkernel`` (which writes the column programs and
reads the outcomes) and ``rowkernel_jit`` (the numba loop, which compiles them to constants).

Imports nothing, so the loop's module needs neither the config nor ``rowkernel``.
"""

from __future__ import annotations

# Operations (column program, field 1).
OP_GIVE_UP, OP_NULL_TYPE, OP_INT, OP_UINT, OP_UINT_BE, OP_YEAR, OP_BYTES = range(7)
OP_DECIMAL, OP_DATETIME2, OP_TIMESTAMP2, OP_TIMESTAMP, OP_DATE, OP_TIME2 = range(7, 13)
OP_FIX_FIXED, OP_FIX_PREFIXED = 13, 14

# Outcomes of one call.
DONE, NEED_ROOM, GIVE_UP = 0, 1, 2
# What a NEED_ROOM lacks (``state[3]``; ``state[4]`` the sink, 0 before / 1 after;
# ``state[5]`` the size needed): the sink's rows (the rows buffers' size), values (the values
# buffers' size), data bytes (the data buffer's size), or fix-up slots (this call's fill).
ROOM_ROWS, ROOM_VALUES, ROOM_DATA, ROOM_FIX = 0, 1, 2, 3
