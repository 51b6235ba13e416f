"""``errors.raised_in_task``: a binlake error raised in an engine task, given back from the
engine's exception text (the end-to-end case, silver's ``LakeChangedError`` on the embedded
engine, is in ``test_silver_slices.py``)."""

from __future__ import annotations

import pytest

from pipelines.errors import (LakeChangedError, LakeFaultError, SchemaMismatchError,
                              raised_in_task)

_TRACE = ("An exception was thrown from the Python worker. Please see the stack trace below.\n"
          "Traceback (most recent call last):\n"
          '  File "/work/pipelines/silver/transform.py", line 76, in on_day\n'
          "    raise LakeChangedError(\n")


@pytest.mark.parametrize("text, want", [
    (_TRACE + "pipelines.errors.LakeChangedError: silver: f.1 at 4: run silver again\n",
     LakeChangedError("silver: f.1 at 4: run silver again")),
    # the innermost of two (a chained traceback prints the cause first)
    (_TRACE + "pipelines.errors.LakeFaultError: first\n\nDuring handling ...\n"
     "pipelines.errors.SchemaMismatchError: second\n", SchemaMismatchError("second")),
    ("pipelines.errors.LakeFaultError: a file is missing\n", LakeFaultError("a file is missing")),
    # not binlake's: a Python error, an unknown name, a DecodeError (its fields are not text)
    (_TRACE + "ValueError: bad\n", None),
    (_TRACE + "pipelines.errors.NoSuchError: x\n", None),
    (_TRACE + "pipelines.errors.DecodeError: f.1 at 4: truncated\n", None),
    ("[TABLE_OR_VIEW_NOT_FOUND] The table or view `x` cannot be found.", None),
])
def test_raised_in_task(text, want):
    got = raised_in_task(RuntimeError(text))
    if want is None:
        assert got is None
    else:
        assert type(got) is type(want) and str(got) == str(want)
