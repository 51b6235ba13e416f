"""Quality's one-pass counting against great-expectations (issue 13, goal 4).

``checks.validate`` counts every rule in one aggregate pass and hands only the rules with
failing rows to great-expectations. Differential: on a frame with NULLs, duplicates and
``when`` conditions, every rule kind, passing and failing, must get the same rows-checked and
rows-failed counts from the one pass as from great-expectations itself
(``checks.validate_with_ge``), and a passing rule must not reach great-expectations.
"""

from __future__ import annotations

import pytest

from pipelines.quality import checks
from pipelines.quality.checks import validate, validate_with_ge
from pipelines.quality.rules import Action, Expect, Rule

ROWS = [  # k, g, v, n
    (1, "a", "x", 1), (2, "a", None, 2), (3, "b", "y", None), (3, "b", "y", 4),
    (None, "c", "z", 5), (None, "c", None, 6), (7, None, "x", 7), (8, "d", "w", 8),
]


def _rules() -> list[Rule]:
    def r(name, expect, action=Action.WARN, **kw):
        return Rule(name, "silver", expect, action, **kw)

    return [
        r("nn_fails", Expect.NOT_NULL, column="v"),
        r("nn_when_passes", Expect.NOT_NULL, column="v", when="g = 'b'"),
        r("null_fails", Expect.NULL, column="n", when="k > 2"),
        r("in_set_fails", Expect.IN_SET, column="v", values=("x", "y", "z")),
        r("in_set_passes", Expect.IN_SET, column="g", values=("a", "b", "c", "d")),
        r("equal_passes", Expect.EQUAL, column="n", expr="n * 1"),
        r("equal_fails", Expect.EQUAL, column="k", expr="n", action=Action.QUARANTINE),
        r("condition_fails", Expect.CONDITION, condition="n > k"),
        r("condition_passes", Expect.CONDITION, condition="coalesce(n, 0) >= 0",
          when="g IS NOT NULL"),
        r("unique_fails", Expect.UNIQUE, columns=("k",)),
        r("unique_compound_passes", Expect.UNIQUE, columns=("k", "n")),
        r("unique_when_passes", Expect.UNIQUE, columns=("g",), when="k = 8 OR k = 7"),
    ]


@pytest.fixture(scope="module")
def frame(spark):
    return spark.createDataFrame(ROWS, "k bigint, g string, v string, n bigint")


def test_one_pass_counts_as_great_expectations(frame) -> None:
    rules = _rules()
    ours = validate(frame, rules, report_columns=["k"], name="one-pass")
    theirs = validate_with_ge(frame, rules, report_columns=["k"], name="ge")
    for i, rule in enumerate(rules):
        assert (ours[i].checked, ours[i].failed) == (theirs[i].checked, theirs[i].failed), \
            rule.name
        assert ours[i].expectation == theirs[i].expectation, rule.name
        assert (ours[i].failed > 0) == rule.name.endswith("_fails"), rule.name
    # The failing rules' keys still come from great-expectations.
    assert ours[6].failing == theirs[6].failing and ours[6].failing


def test_passing_rules_skip_great_expectations(frame, monkeypatch) -> None:
    calls = []
    real = checks._run_suite

    def spy(df, items, **kw):
        calls.append([rule.name for _, rule in items])
        return real(df, items, **kw)

    monkeypatch.setattr(checks, "_run_suite", spy)
    validate(frame, [r for r in _rules() if r.name.endswith("_passes")], report_columns=["k"])
    assert calls == []
    validate(frame, _rules(), report_columns=["k"])
    assert sorted(n for c in calls for n in c) == sorted(
        r.name for r in _rules() if r.name.endswith("_fails"))


def test_a_uniqueness_rule_alone_is_one_engine_query(frame, monkeypatch) -> None:
    """After a history, each uniqueness rule is checked alone over its window and the older
    rows sharing its keys, given as its passes (``unique_groups``, the job measures them over
    the window): its counts take one grouped query per pass (the hashes'; no two rows of
    these passing rules share one), no aggregate pass besides (a failing one then goes to great-expectations for its keys, as before)."""
    collected = []
    cls = type(frame)
    real = cls.collect

    def spy(self):
        collected.append(1)
        return real(self)

    monkeypatch.setattr(cls, "collect", spy)
    passing = [r for r in _rules() if r.expect is Expect.UNIQUE and r.name.endswith("_passes")]
    assert len(passing) == 2
    for rule in passing:
        collected.clear()
        (o,) = validate(frame, [rule], report_columns=["k"], name="alone",
                        unique_groups=[checks.key_pass(frame, rule)])
        assert (len(collected), o.failed) == (1, 0), rule.name
        collected.clear()
        (o,) = validate(frame, [rule], report_columns=["k"], name="alone",
                        unique_groups=[checks.key_pass(frame.where(w), rule) for w in
                                       ("k <= 3", "k > 3", "k IS NULL")])
        checked = {"unique_compound_passes": 8, "unique_when_passes": 2}[rule.name]
        assert (len(collected), o.failed, o.checked) == (3, 0, checked), rule.name
