"""``pk_hash``: SHA2(pk_values, 256) computed in silver's tasks equals the engine's ``sha2``,
by ``hashlib`` and by the compiled loop over OpenSSL, for every length around SHA-256's
64-byte blocks, multi-byte UTF-8, empty values, NULLs and sliced arrays."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sys

from pipelines.silver import pk_hash as pk_hash_module
from pipelines.silver.pk_hash import compiled_available, pk_hash, python_pk_hash

# Lengths around the padding's edges: 55 bytes fit the length in one block, 56 do not.
VALUES = [None, "", "a", "1|SKU-000002994", "é€😀" * 30, *("x" * n for n in (55, 56, 63, 64,
                                                                            65, 119, 120, 128))]


def _expected(values):
    return [None if v is None else hashlib.sha256(v.encode()).hexdigest() for v in values]


@pytest.mark.parametrize("compiled", [False, True])
def test_pk_hash_is_sha256_hex(compiled: bool) -> None:
    if compiled:
        assert compiled_available()  # numba and OpenSSL are both on this machine
    arr = pa.array(VALUES, pa.string())
    assert pk_hash(arr, compiled).to_pylist() == _expected(VALUES)
    assert pk_hash(arr.slice(3, 6), compiled).to_pylist() == _expected(VALUES[3:9])
    assert pk_hash(pa.array(VALUES, pa.large_string()), compiled).to_pylist() == _expected(VALUES)
    assert pk_hash(pa.array([], pa.string()), compiled).to_pylist() == []


def test_python_hashes_as_hashlib_with_cpythons_own_sha256() -> None:
    """The path without numba (where ``pk_hash(…, False)`` goes in a process that has not
    loaded numba) hashes by CPython's built-in SHA-256, not OpenSSL's per-object lookup."""
    builtin = sys.modules.get("_sha2") or sys.modules.get("_sha256")
    assert builtin is not None and pk_hash_module._SHA256 is builtin.sha256
    for values in (VALUES, VALUES[3:9], []):
        assert python_pk_hash(pa.array(values, pa.string())).to_pylist() == _expected(values)
    assert python_pk_hash(pa.array(VALUES, pa.string()).slice(3, 6)).to_pylist() == \
        _expected(VALUES[3:9])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=300)), max_size=40))
def test_the_compiled_loop_hashes_as_hashlib(values) -> None:
    assert pk_hash(pa.array(values, pa.string()), True).to_pylist() == _expected(values)
    assert python_pk_hash(pa.array(values, pa.string())).to_pylist() == _expected(values)


@pytest.mark.spark
def test_pk_hash_equals_the_engines_sha2(spark) -> None:
    rows = [(v,) for v in VALUES]
    got = spark.createDataFrame(rows, "pk_values string").selectExpr(
        "sha2(pk_values, 256) AS h").collect()
    engine = [r["h"] for r in got]
    assert pk_hash(pa.array(VALUES, pa.string()), True).to_pylist() == engine
