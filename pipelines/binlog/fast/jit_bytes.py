"""A byte copy for the compiled loops (numba): ``memcpy(dst, at, src, start, n)`` copies
``src[start:start + n]`` to ``dst[at:]`` with one ``llvm.memcpy``.

A slice assignment in a loop (``dst[a:b] = src[c:d]``) checks the shapes and the overlap
and copies element by element: for the loops' many short copies (a column's name and its
value, a string value) that cost a quarter of silver's ``render_side``
(docs/performance.md, Silver render). The caller has made room; the arrays are distinct. Imported
only by the loops' modules (it imports numba); the copy is compiled into their cached code.
"""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["memcpy"]


@intrinsic
def memcpy(typingctx, dst, at, src, start, n):
    def codegen(context, builder, sig, args):
        d = context.make_array(sig.args[0])(context, builder, args[0])
        s = context.make_array(sig.args[2])(context, builder, args[2])
        at_, start_, n_ = (context.cast(builder, v, t, types.intp)
                           for v, t in zip((args[1], args[3], args[4]),
                                           (sig.args[1], sig.args[3], sig.args[4])))
        cgutils.raw_memcpy(builder, builder.gep(d.data, [at_]), builder.gep(s.data, [start_]),
                           n_, 1)
        return context.get_dummy_value()

    return types.void(dst, at, src, start, n), codegen
