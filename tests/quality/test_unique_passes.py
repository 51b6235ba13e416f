"""Uniqueness counted in passes of bounded size (``quality.unique_passes``, issue 13).

On the embedded engine a grouped aggregate holds every key it groups, so a UNIQUE rule over a
window of more than ``PASS_ROWS`` rows is grouped in several passes: ranges of the key's
first integer column (and its NULLs), or buckets of the key's hash. Here ``PASS_ROWS`` is made
tiny so that frames of a few hundred rows take many passes, and the counts are checked
against what the rows say (counted in Python from the rows themselves) and against
great-expectations over the whole frame.
"""

from __future__ import annotations

from collections import Counter

import pytest
from pyspark.sql import functions as F

from pipelines.quality import checks, unique_passes
from pipelines.quality.checks import validate, validate_with_ge
from pipelines.quality.rules import Action, Expect, Rule


def _rows() -> list[tuple]:
    """k bigint, g string, n bigint: 300 rows; duplicates of k at both ends of its range,
    in the middle, and among NULL k; duplicate (k, g) pairs with a NULL part; all-NULL keys."""
    out = [(k, f"g{k % 7}", k) for k in range(1, 241)]
    out += [(1, "g1", 1001), (240, "x", 1002), (240, "y", 1003), (120, "g1", 1004)]
    out += [(None, "a", 2000 + i) for i in range(20)]  # NULL k, g "a" twenty times
    out += [(None, None, 3000 + i) for i in range(16)]  # all-NULL keys: never duplicates
    out += [(500 + i, None, 4000 + i) for i in range(20)]
    return out


ROWS = _rows()


def _expected(cols: tuple[int, ...], when=lambda r: True) -> tuple[int, int]:
    """(rows considered, rows whose key another row shares), as GE counts: a key whose parts
    are all NULL is never a duplicate."""
    keys = [tuple(r[c] for c in cols) for r in ROWS if when(r)]
    seen = Counter(keys)
    return len(keys), sum(n for key, n in seen.items() if n > 1 and any(v is not None
                                                                           for v in key))


RULES = [  # rule, expected (considered, duplicated)
    (Rule("k_unique", "silver", Expect.UNIQUE, Action.WARN, columns=("k",)), _expected((0,))),
    (Rule("kg_unique", "silver", Expect.UNIQUE, Action.WARN, columns=("g", "k")),
     _expected((1, 0))),
    (Rule("g_unique", "silver", Expect.UNIQUE, Action.WARN, columns=("g",)), _expected((1,))),
    (Rule("k_when", "silver", Expect.UNIQUE, Action.WARN, columns=("k",),
          when="n < 2000 OR n >= 4000"),
     _expected((0,), lambda r: r[2] < 2000 or r[2] >= 4000)),
]


@pytest.fixture(scope="module")
def frame(spark):
    return spark.createDataFrame(ROWS, "k bigint, g string, n bigint")


def test_expected_counts_are_not_trivial() -> None:
    """By hand: k 1 twice, 240 three times, 120 twice (NULL k is all-NULL: never a
    duplicate); (g, k): (g1, 1) and (g1, 120) twice, (a, NULL) twenty times; g: the 240
    rows in seven groups, two more g1 and twenty a (x, y once; NULL never)."""
    assert [e for _, e in RULES] == [(300, 7), (300, 24), (300, 262), (264, 7)]


def _considered_rows(frame, rule, where) -> int:
    return frame.where(checks.considered(rule) & where).count()


@pytest.mark.parametrize("rule,expected", RULES, ids=[r.name for r, _ in RULES])
def test_passes_count_what_one_pass_counts(frame, monkeypatch, unique_pass_counts, rule,
                                           expected) -> None:
    monkeypatch.setattr(unique_passes, "PASS_ROWS", 40)
    # The counts validate starts from (a failing rule then goes to great-expectations,
    # whose counts replace them).
    assert checks._counts(frame, [rule]) == [expected]
    # at least ceil(rows / 40) passes: ranges of k (and its NULLs), or buckets of g's hash
    (passes,) = unique_pass_counts
    assert passes >= -(-expected[0] // 40) and (passes == 8 if rule.name == "g_unique"
                                                 else passes <= 2 * -(-expected[0] // 40) + 1)
    (o,) = validate(frame, [rule], report_columns=["n"], name="passes")
    assert (o.checked, o.failed) == expected
    # great-expectations over the whole frame agrees
    (theirs,) = validate_with_ge(frame, [rule], report_columns=["n"], name="ge").values()
    assert (theirs.checked, theirs.failed) == expected


def test_each_row_falls_in_exactly_one_pass(frame) -> None:
    """The filters partition the rows: ranges of ``k`` (half-open, the last one open) plus
    its NULLs; hash buckets of ``g`` (NULL included). A range holds at most 40 rows: sized
    by the histogram, not equally wide (k bunches: 1..240 and 500..519)."""
    for rule in (RULES[0][0], RULES[2][0]):
        seen = checks.considered(rule)
        (totals,) = frame.agg(*unique_passes.bounds(frame, rule, seen, 0)).collect()
        filters = unique_passes.passes(frame, rule, totals.asDict(), 0, 40, seen)
        hits = Counter()
        for where in filters:
            hits.update(r["n"] for r in frame.where(where).select("n").collect())
        assert sorted(hits) == sorted(r[2] for r in ROWS) and set(hits.values()) == {1}
        if rule.name == "k_unique":  # 264 k values, 36 NULLs: at least 7 ranges + NULLs
            sizes = [_considered_rows(frame, rule, w) for w in filters]
            assert len(filters) >= 8 and max(sizes) <= 40 and sizes[-1] == 36
        else:
            assert len(filters) == 8  # ceil(300 / 40) buckets of the hash


@pytest.mark.parametrize("rows,lo,hi,nulls,per_pass,count", [
    (300, 1, 599, 36, 300, 1),       # fits one pass: no histogram
    (1000, None, None, 1000, 100, 1),  # every value NULL: the NULL pass alone
])
def test_passes_without_a_histogram(spark, rows, lo, hi, nulls, per_pass, count) -> None:
    df = spark.createDataFrame([(1,)], "k bigint")
    rule = Rule("r", "silver", Expect.UNIQUE, Action.WARN, columns=("k",))
    totals = {"__urows_0": rows, "__ulo_0": lo, "__uhi_0": hi, "__unull_0": nulls}
    filters = unique_passes.passes(df, rule, totals, 0, per_pass, checks.considered(rule))
    assert len(filters) == count
    assert (filters[0] is None) == (rows <= per_pass)  # None: one pass over every row


@pytest.mark.parametrize("sizes,lo,width,per_pass,ranges", [
    ({0: 5, 1: 5, 2: 5}, 10, 3, 10, [(10, 16), (16, None)]),   # two buckets fill a pass
    ({0: 50}, 0, 1, 10, [(0, None)]),                          # a fuller bucket alone
    ({0: 3, 5: 20, 6: 1}, 100, 10, 10,                         # gaps; 20 rows alone
     [(100, 150), (150, 160), (160, None)]),
    ({}, 7, 1, 10, [(7, None)]),                               # nothing counted: one range
    ({0: 10, 2**40: 10}, 0, 2**20, 10, [(0, 2**60), (2**60, None)]),  # wide bigint range
])
def test_pack(sizes, lo, width, per_pass, ranges) -> None:
    assert unique_passes.pack(sizes, lo, width, per_pass) == ranges


N_UNIQUE = Rule("n_unique", "silver", Expect.UNIQUE, Action.WARN, columns=("n",))


def test_a_pass_without_a_shared_hash_is_answered_by_the_hashes(frame) -> None:
    """No two rows share ``n``: no hash is shared, so the keys are not asked (here they are
    the keys of no row, which would say 0 rows)."""
    assert _expected((2,)) == (300, 0)
    nothing = checks.key_counts(frame.limit(0), N_UNIQUE)
    p = checks.KeyPass(nothing, checks.hashed_key_counts(frame, N_UNIQUE))
    assert checks._unique_counts(N_UNIQUE, [p]) == (300, 0)


def test_keys_whose_parts_are_all_null_share_no_hash(spark) -> None:
    """Two rows without a ``g`` (never duplicates), two distinct ones: answered by the
    hashes."""
    df = spark.createDataFrame([(1, None), (2, None), (3, "a"), (4, "b")], "n bigint, g string")
    rule = RULES[2][0]  # g_unique
    p = checks.KeyPass(checks.key_counts(df.limit(0), rule), checks.hashed_key_counts(df, rule))
    assert checks._unique_counts(rule, [p]) == (4, 0)


@pytest.mark.parametrize("rule,expected", [(RULES[0][0], RULES[0][1]), (N_UNIQUE, (300, 0))],
                         ids=["k_unique", "n_unique"])
def test_a_shared_hash_is_settled_by_the_keys(frame, rule, expected) -> None:
    """Every row given one hash (as if all collided): the keys settle the pass, whether it
    holds duplicates (k: 7 rows) or none (n)."""
    collided = frame.where(checks.considered(rule)).groupBy(F.lit(1).alias("__h")).count()
    p = checks.KeyPass(checks.key_counts(frame, rule), collided)
    assert checks._unique_counts(rule, [p]) == expected


def test_engines_that_spill_keep_one_pass(spark, monkeypatch) -> None:
    """The embedded engine (Sail) holds aggregates: passes; an engine answering ``version()``
    as Spark does (JVM Spark, Databricks) spills them: one pass."""
    df = spark.range(1)
    assert unique_passes.pass_rows(df) == unique_passes.PASS_ROWS
    monkeypatch.setattr(unique_passes, "sail_engine", lambda spark: False)
    assert unique_passes.pass_rows(df) == 0
    assert checks.unique_measures(df, RULES[0][0]) == []
