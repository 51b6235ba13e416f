"""``pk_hash``'s compiled loop (numba, cached on disk): OpenSSL's SHA-256 of every value.

The loop calls ``SHA256_Init/Update/Final`` of the library ``hashlib`` uses (SHA-NI where the
CPU has it) by their symbol names, resolved when the machine code is linked, not by
addresses baked into it: so numba caches it on disk like the render loops, and a run loads
it instead of compiling it (~0.7 s on the 2-core machine). Importing this module makes the
library's symbols visible to numba's linker; it raises :class:`ImportError` where numba or
the library is missing (``rowkernel.jit_module`` then answers None).
"""

from __future__ import annotations

import ctypes
import ctypes.util

import numba as nb
import numpy as np
from numba import types

__all__ = ["sha256_hex"]


def _load_crypto() -> None:
    name = ctypes.util.find_library("crypto")
    if not name:
        raise ImportError("pk_hash_jit: OpenSSL's libcrypto not found")
    try:
        lib = ctypes.CDLL(name)
        lib.SHA256_Init, lib.SHA256_Update, lib.SHA256_Final  # noqa: B018 - present?
    except (OSError, AttributeError) as exc:
        raise ImportError(f"pk_hash_jit: {name}: {exc}") from exc
    import llvmlite.binding as llvm

    llvm.load_library_permanently(name)


_load_crypto()
# int SHA256_Init(SHA256_CTX *); int SHA256_Update(SHA256_CTX *, const void *, size_t);
# int SHA256_Final(unsigned char *md, SHA256_CTX *)  (openssl/sha.h)
_init = types.ExternalFunction("SHA256_Init", types.intc(types.voidptr))
_update = types.ExternalFunction("SHA256_Update",
                                 types.intc(types.voidptr, types.voidptr, types.uintp))
_final = types.ExternalFunction("SHA256_Final", types.intc(types.voidptr, types.voidptr))
_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)


@nb.njit(cache=True, nogil=True)
def sha256_hex(offsets, data, valid, out):
    """Value ``i`` is ``data[offsets[i]:offsets[i + 1]]``; where ``valid[i]``, its digest in
    64 lowercase hex digits goes to ``out[64 * i:64 * (i + 1)]``. ``data`` holds a byte past
    the last value (the loop takes the address of ``data[offsets[i]:]``)."""
    ctx = np.empty(256, np.uint8)  # SHA256_CTX is 112 bytes
    md = np.empty(32, np.uint8)
    for i in range(len(offsets) - 1):
        if not valid[i]:
            continue
        _init(ctx.ctypes.data)
        _update(ctx.ctypes.data, data[offsets[i]:].ctypes.data, offsets[i + 1] - offsets[i])
        _final(md.ctypes.data, ctx.ctypes.data)
        for j in range(32):
            out[64 * i + 2 * j] = _DIGITS[md[j] >> 4]
            out[64 * i + 2 * j + 1] = _DIGITS[md[j] & 15]
