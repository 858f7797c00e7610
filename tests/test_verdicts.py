"""sharedbert.verdicts: the one verdict rule of the studies (95% Student-t interval of paired differences against a
margin, four words), on made-up data whose intervals are worked out by hand."""

import builtins
import math
import subprocess
import sys

import pytest

from sharedbert import verdicts
from sharedbert.verdicts import gap_closure, interval_verdict, paired_comparison, t_quantile, unpaired_difference


@pytest.mark.parametrize("df, factor", [(1, 12.71), (2, 4.30), (4, 2.78), (29, 2.05)])
def test_the_t_factors_are_students(df, factor):
    assert round(t_quantile(df), 2) == factor


def test_the_table_without_scipy_gives_the_same_factors(monkeypatch):
    real_import = builtins.__import__

    def no_scipy(name, *args, **kwargs):
        if name.startswith("scipy"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    exact = {df: t_quantile(df) for df in (1, 2, 3, 4, 7.5, 30, 45, 1000)}
    monkeypatch.setattr(builtins, "__import__", no_scipy)
    for df in (1, 2, 3, 4, 30):
        assert t_quantile(df) == pytest.approx(exact[df], abs=1e-6)
    for df in (7.5, 45, 1000):  # between entries: interpolated in 1/df, close to the exact quantile
        assert t_quantile(df) == pytest.approx(exact[df], abs=3e-3)
    with pytest.raises(ValueError, match="without scipy"):
        t_quantile(4, confidence=0.9)
    with pytest.raises(ValueError, match="degree of freedom"):
        t_quantile(0)


def test_the_module_imports_only_the_standard_library():
    code = ("import sys, importlib.util; spec = importlib.util.spec_from_file_location('v', sys.argv[1]); "
            "m = importlib.util.module_from_spec(spec); sys.modules['v'] = m; spec.loader.exec_module(m); "
            "assert not {'torch', 'transformers', 'numpy', 'scipy'} & set(sys.modules), set(sys.modules)")
    subprocess.run([sys.executable, "-c", code, verdicts.__file__], check=True)


def test_n2_n3_n5_intervals_use_their_t_factor():
    # n = 2: differences 0.1, 0.3: mean 0.2, sd 0.1414, SE 0.1; t 12.71 -> (-1.07, 1.47): left open
    two = paired_comparison([1.1, 1.3], [1.0, 1.0], margin=0.02, higher_is_better=False)
    assert two.n == 2 and two.mean == pytest.approx(0.2) and two.standard_error == pytest.approx(0.1)
    assert two.t_quantile == pytest.approx(12.7062, abs=1e-4)
    assert two.interval == pytest.approx((0.2 - 1.27062, 0.2 + 1.27062), abs=1e-5)
    assert two.verdict == "left open" and two.verdict_at(2) == "left open"
    # n = 3: differences 0.30, 0.35, 0.40 -> SE 0.0289, t 4.30: (0.176, 0.524), beyond +0.02: trails
    three = paired_comparison({1: 2.30, 2: 2.35, 3: 2.40}, {1: 2.0, 2: 2.0, 3: 2.0}, margin=0.02,
                              higher_is_better=False)
    assert three.seeds == (1, 2, 3) and three.differences == pytest.approx((0.30, 0.35, 0.40))
    assert three.t_quantile == pytest.approx(4.3027, abs=1e-4)
    assert three.interval[0] == pytest.approx(0.35 - 4.302653 * 0.05 / math.sqrt(3), abs=1e-6)
    assert three.verdict == "trails"
    # n = 5: a difference 2 SE calls beyond the margin and the t interval (2.78 SE) does not
    five = paired_comparison([0.028 + x for x in (-0.01, -0.005, 0.0, 0.005, 0.01)], margin=0.02,
                             higher_is_better=False)
    se = five.standard_error
    assert five.t_quantile == pytest.approx(2.7764, abs=1e-4)
    assert five.mean - 2 * se > 0.02 > five.mean - 2.7764 * se
    assert five.verdict_at(2) == "trails" and five.verdict == "left open"


def test_higher_is_better_turns_the_words_around():
    diffs = [0.5, 0.6, 0.7]  # a - b clearly positive
    assert paired_comparison(diffs, margin=0.1, higher_is_better=True).verdict == "ahead"
    assert paired_comparison(diffs, margin=0.1, higher_is_better=False).verdict == "trails"
    negative = [-d for d in diffs]
    assert paired_comparison(negative, margin=0.1, higher_is_better=True).verdict == "trails"
    assert paired_comparison(negative, margin=0.1, higher_is_better=False).verdict == "ahead"
    small = [0.001, -0.001, 0.0]
    for better in (True, False):
        assert paired_comparison(small, margin=0.1, higher_is_better=better).verdict == "on par"


def test_exact_boundaries():
    # on par includes its ends; trails and ahead need the whole interval strictly beyond the margin
    assert interval_verdict(-0.02, 0.02, 0.02, False) == "on par"
    assert interval_verdict(0.02, 0.05, 0.02, False) == "left open"
    assert interval_verdict(0.0200001, 0.05, 0.02, False) == "trails"
    assert interval_verdict(-0.05, -0.02, 0.02, False) == "left open"
    assert interval_verdict(-0.05, -0.0200001, 0.02, False) == "ahead"
    assert interval_verdict(-0.05, -0.0200001, 0.02, True) == "trails"
    assert interval_verdict(-0.01, 0.03, 0.02, False) == "left open"
    # margin 0: "on par" only for identical values, otherwise strictly signed intervals decide
    assert paired_comparison([0.0, 0.0, 0.0], margin=0, higher_is_better=True).verdict == "on par"
    assert paired_comparison([0.1, 0.11, 0.12], margin=0, higher_is_better=True).verdict == "ahead"
    assert paired_comparison([0.1, 0.2, 0.3], margin=0, higher_is_better=True).verdict == "left open"  # 0.2 +- 0.25
    with pytest.raises(ValueError):
        interval_verdict(0, 1, -0.1, False)


def test_too_few_seeds_leave_it_open_and_mappings_pair_by_seed():
    one = paired_comparison({1: 2.0}, {1: 1.0, 2: 1.0}, margin=0.02, higher_is_better=False)
    assert one.n == 1 and one.verdict == "left open" and one.interval is None and one.standard_error is None
    none = paired_comparison([], margin=0.02, higher_is_better=False)
    assert none.n == 0 and none.mean is None and none.verdict == "left open"
    paired = paired_comparison({3: 2.4, 1: 2.0, 2: 2.2}, {1: 1.0, 2: 1.0, 3: 1.0, 4: 9.0}, margin=0.0,
                               higher_is_better=True)
    assert paired.seeds == (1, 2, 3) and paired.differences == pytest.approx((1.0, 1.2, 1.4))
    with pytest.raises(TypeError):
        paired_comparison({1: 1.0}, [1.0], margin=0, higher_is_better=True)
    with pytest.raises(ValueError):
        paired_comparison([1.0, 2.0], [1.0], margin=0, higher_is_better=True)
    record = paired.as_dict()
    assert record["differences"] == pytest.approx([1.0, 1.2, 1.4]) and record["verdict"] == "ahead"
    assert record["margin"] == 0.0 and record["higher_is_better"] is True and len(record["interval"]) == 2


def test_unpaired_difference_uses_welchs_degrees_of_freedom():
    first = paired_comparison([0.19, 0.20, 0.21], margin=0.02, higher_is_better=False)
    second = paired_comparison([0.18, 0.20, 0.22], margin=0.02, higher_is_better=False)
    change = unpaired_difference(first, second, margin=0.02, higher_is_better=False)
    v1, v2 = first.standard_error ** 2, second.standard_error ** 2
    assert change.mean == pytest.approx(0.0, abs=1e-12)
    assert change.standard_error == pytest.approx(math.sqrt(v1 + v2))
    assert change.degrees_of_freedom == pytest.approx((v1 + v2) ** 2 / (v1 ** 2 / 2 + v2 ** 2 / 2))
    assert change.degrees_of_freedom == pytest.approx(2.94, abs=0.01)  # fewer than the 4 of equal variances
    assert change.interval[1] == pytest.approx(change.t_quantile * change.standard_error)
    assert change.interval[1] == pytest.approx(0.0416, abs=0.0001)  # wider than the 0.02 margin: left open
    assert change.verdict == "left open" and change.differences == ()
    tight = unpaired_difference(paired_comparison([0.2, 0.2001, 0.1999], margin=0.02, higher_is_better=False),
                                paired_comparison([0.2, 0.2002, 0.1998], margin=0.02, higher_is_better=False),
                                margin=0.02, higher_is_better=False)
    assert tight.verdict == "on par"


def test_gap_closure_judges_the_excess_over_the_share_of_the_gap():
    baseline = {1: 2.0, 2: 2.0, 3: 2.0}
    reference = {1: 2.2, 2: 2.2, 3: 2.2}  # trails by 0.2 on every seed
    closes_most = gap_closure({1: 2.05, 2: 2.06, 3: 2.04}, reference, baseline, margin=0.02, higher_is_better=False)
    assert closes_most.verdict == "closes at least half" and closes_most.share_closed == pytest.approx(0.75)
    assert closes_most.excess.mean == pytest.approx(-0.05) and closes_most.excess.margin == 0.0
    closes_little = gap_closure({1: 2.15, 2: 2.16, 3: 2.14}, reference, baseline, margin=0.02, higher_is_better=False)
    assert closes_little.verdict == "closes less than half"
    noisy = gap_closure({1: 2.0, 2: 2.2, 3: 2.1}, reference, baseline, margin=0.02, higher_is_better=False)
    assert noisy.verdict == "left open"  # e = -0.1, +0.1, 0: the interval straddles 0
    no_gap = gap_closure({1: 2.0, 2: 2.0, 3: 2.0}, baseline, baseline, margin=0.02, higher_is_better=False)
    assert no_gap.gap.verdict == "on par" and no_gap.verdict == "left open" and no_gap.share_closed is None
    too_few = gap_closure({1: 2.05, 2: 2.06}, reference, baseline, margin=0.02, higher_is_better=False, min_n=3)
    assert too_few.verdict == "left open"
    # accuracies: higher is better; the reference is 4 points behind, the candidate 1 behind: closes 75%
    accuracy = gap_closure({1: 0.79, 2: 0.795, 3: 0.785}, {1: 0.76, 2: 0.76, 3: 0.76}, {1: 0.80, 2: 0.80, 3: 0.80},
                           margin=0.0, higher_is_better=True, share=0.6)
    assert accuracy.verdict == "closes at least 60%" and accuracy.share_closed == pytest.approx(0.75)
    assert accuracy.as_dict()["gap"]["verdict"] == "trails"
