"""Verdicts on paired comparisons: the one rule every study of this repository judges its seeds by.

Two variants measured on the same seeds (or, generally, on the same pairing units) give one difference per seed.
A verdict reads the 95% Student-t interval of the mean difference (df = n - 1) against a practical margin m:

    "on par"     the interval lies inside [-m, +m] (ends included);
    "trails"     the interval lies entirely beyond the margin on the bad side (the first variant is worse);
    "ahead"      the interval lies entirely beyond the margin on the good side (the first variant is better);
    "left open"  anything else, and always with fewer than two differences (no interval exists).

"Beyond" is strict: an interval that ends exactly on the margin is not beyond it. With m = 0 "on par" needs every
difference to be zero, so a study with no practical margin gets "trails", "ahead" or "left open".

Why t and not mean +- 2 SE: at the 3-5 seeds of these studies the 95% factor is 4.30 (n = 3) or 2.78 (n = 5), not
2; a rule with 2 SE calls differences decided that a 95% interval leaves open.

API (the module imports only the standard library; scipy, where installed, gives the exact t quantiles, else a
table for df 1-30, 40, 60, 120 and infinity to 6 decimals, interpolated in 1/df between its entries):

    paired_comparison(a, b=None, *, margin, higher_is_better, confidence=0.95) -> Comparison
        a, b: per-seed values as {seed: value} mappings (paired by the seeds both have) or equal-length sequences
        (paired by position); b None: a already holds the differences. Differences are a - b, so "trails" means
        a is worse than b. Comparison fields: seeds, differences, n, mean, standard_error, degrees_of_freedom,
        t_quantile, interval (low, high) or None, confidence, margin, higher_is_better, verdict;
        .as_dict() for a results file, .verdict_at(factor) for the verdict with mean +- factor * SE instead
        (factor=2 gives the old "2 SE" rule, for listing what changed).

    unpaired_difference(first, second, *, margin, higher_is_better, confidence=0.95) -> Comparison
        second.mean - first.mean of two independent Comparisons (say a gap at two model sizes), SE = sqrt(SE1^2 +
        SE2^2), Welch-Satterthwaite degrees of freedom; no per-seed differences.

    gap_closure(candidate, reference, baseline, *, share=0.5, margin, higher_is_better, min_n=2) -> GapClosure
        Does `candidate` close at least `share` of the gap by which `reference` trails `baseline`? Per seed the
        excess e = (candidate - baseline) - share * (reference - baseline); its interval, with margin 0, decides:
        "closes at least half" if it lies entirely on the good side of 0, "closes less than half" if entirely on
        the bad side, "left open" otherwise, with fewer than min_n seeds, or where `reference` does not "trail"
        `baseline` by paired_comparison with `margin` (no gap to close). Fields: gap and excess (Comparisons),
        share, share_closed (the point estimate 1 - mean(candidate - baseline) / mean(reference - baseline), None
        without a gap), verdict; .as_dict().

    interval_verdict(low, high, margin, higher_is_better) -> the four words for an interval.
    t_quantile(df, confidence=0.95) -> the two-sided Student-t factor (12.71 at df 1, 4.30 at 2, 2.78 at 4).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

ON_PAR, TRAILS, AHEAD, LEFT_OPEN = "on par", "trails", "ahead", "left open"
VERDICTS = (ON_PAR, TRAILS, AHEAD, LEFT_OPEN)

# Two-sided 95% Student-t quantiles t(0.975, df), to 6 decimals (scipy.stats.t.ppf); math.inf: the normal's.
T_TABLE_95 = {
    1: 12.706205, 2: 4.302653, 3: 3.182446, 4: 2.776445, 5: 2.570582, 6: 2.446912, 7: 2.364624, 8: 2.306004,
    9: 2.262157, 10: 2.228139, 11: 2.200985, 12: 2.178813, 13: 2.160369, 14: 2.144787, 15: 2.131450, 16: 2.119905,
    17: 2.109816, 18: 2.100922, 19: 2.093024, 20: 2.085963, 21: 2.079614, 22: 2.073873, 23: 2.068658, 24: 2.063899,
    25: 2.059539, 26: 2.055529, 27: 2.051831, 28: 2.048407, 29: 2.045230, 30: 2.042272, 40: 2.021075, 60: 2.000298,
    120: 1.979930, math.inf: 1.959964,
}


def _table_quantile(df: float) -> float:
    """T_TABLE_95 at df, linear in 1/df between its entries (exact at each entry)."""
    if df in T_TABLE_95:
        return T_TABLE_95[df]
    keys = sorted(T_TABLE_95)
    upper = next(key for key in keys if key > df)
    lower = keys[keys.index(upper) - 1]
    weight = (1 / lower - 1 / df) / (1 / lower - (0 if upper == math.inf else 1 / upper))
    return T_TABLE_95[lower] + weight * (T_TABLE_95[upper] - T_TABLE_95[lower])


def t_quantile(df: float, confidence: float = 0.95) -> float:
    """The factor k of a two-sided `confidence` interval mean +- k * SE with `df` degrees of freedom (df >= 1)."""
    if not df >= 1:
        raise ValueError(f"a t interval needs at least 1 degree of freedom, got {df}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    try:
        from scipy.stats import t as student_t
    except ImportError:
        if confidence != 0.95:
            raise ValueError("without scipy only the 95% interval is available (its table)") from None
        return _table_quantile(df)
    return float(student_t.ppf(0.5 + confidence / 2, df))


def interval_verdict(low: float, high: float, margin: float, higher_is_better: bool) -> str:
    """The four words for an interval of differences (first variant minus second) against the margin."""
    if margin < 0:
        raise ValueError(f"the margin is a size, got {margin}")
    if -margin <= low and high <= margin:
        return ON_PAR
    worse_beyond = high < -margin if higher_is_better else low > margin
    better_beyond = low > margin if higher_is_better else high < -margin
    return TRAILS if worse_beyond else AHEAD if better_beyond else LEFT_OPEN


@dataclass(frozen=True)
class Comparison:
    """A difference judged by its t interval; see the module's docstring."""

    seeds: tuple | None
    differences: tuple[float, ...]
    n: int
    mean: float | None
    standard_error: float | None
    degrees_of_freedom: float | None
    t_quantile: float | None
    interval: tuple[float, float] | None
    confidence: float
    margin: float
    higher_is_better: bool
    verdict: str

    def verdict_at(self, factor: float) -> str:
        """The verdict of the interval mean +- factor * SE (factor=2: the old "2 SE" rule)."""
        if self.standard_error is None:
            return LEFT_OPEN
        return interval_verdict(self.mean - factor * self.standard_error, self.mean + factor * self.standard_error,
                                self.margin, self.higher_is_better)

    def as_dict(self) -> dict:
        """Plain lists and numbers, for a JSON results file."""
        record = asdict(self)
        record["seeds"] = list(self.seeds) if self.seeds is not None else None
        record["differences"] = list(self.differences)
        record["interval"] = list(self.interval) if self.interval is not None else None
        return record


def _judged(seeds, differences, mean, standard_error, df, margin, higher_is_better, confidence) -> Comparison:
    if standard_error is None or df is None or df < 1:
        factor, interval, verdict = None, None, LEFT_OPEN
    else:
        factor = t_quantile(df, confidence)
        interval = (mean - factor * standard_error, mean + factor * standard_error)
        verdict = interval_verdict(*interval, margin, higher_is_better)
    return Comparison(seeds=seeds, differences=tuple(differences), n=len(differences), mean=mean,
                      standard_error=standard_error, degrees_of_freedom=df, t_quantile=factor, interval=interval,
                      confidence=confidence, margin=margin, higher_is_better=higher_is_better, verdict=verdict)


def _pair(a, b) -> tuple[tuple | None, list[float]]:
    """(seeds, differences a - b): by the keys both mappings have, in sorted order, or by position."""
    if isinstance(a, Mapping) != isinstance(b, Mapping) and b is not None:
        raise TypeError("pair two mappings {seed: value} or two sequences, not one of each")
    if b is None:
        if isinstance(a, Mapping):
            seeds = tuple(sorted(a))
            return seeds, [float(a[seed]) for seed in seeds]
        return None, [float(value) for value in a]
    if isinstance(a, Mapping):
        seeds = tuple(sorted(set(a) & set(b)))
        return seeds, [float(a[seed]) - float(b[seed]) for seed in seeds]
    if not isinstance(a, Sequence) or len(a) != len(b):
        raise ValueError("sequences paired by position must have the same length")
    return None, [float(x) - float(y) for x, y in zip(a, b)]


def paired_comparison(a, b=None, *, margin: float, higher_is_better: bool, confidence: float = 0.95) -> Comparison:
    """The verdict on a - b from the paired differences; see the module's docstring."""
    seeds, differences = _pair(a, b)
    if any(not math.isfinite(d) for d in differences):
        raise ValueError(f"a difference is not a finite number: {differences}")
    n = len(differences)
    mean = statistics.fmean(differences) if n else None
    standard_error = statistics.stdev(differences) / math.sqrt(n) if n > 1 else None
    return _judged(seeds, differences, mean, standard_error, n - 1 if n > 1 else None, margin, higher_is_better,
                   confidence)


def unpaired_difference(first: Comparison, second: Comparison, *, margin: float, higher_is_better: bool,
                        confidence: float = 0.95) -> Comparison:
    """second.mean - first.mean of two independent estimates, with Welch-Satterthwaite degrees of freedom."""
    if first.standard_error is None or second.standard_error is None:
        return _judged(None, (), None if first.mean is None or second.mean is None else second.mean - first.mean,
                       None, None, margin, higher_is_better, confidence)
    variances = (first.standard_error ** 2, second.standard_error ** 2)
    standard_error = math.sqrt(sum(variances))
    denominator = variances[0] ** 2 / (first.n - 1) + variances[1] ** 2 / (second.n - 1)
    df = sum(variances) ** 2 / denominator if denominator > 0 else float(first.n + second.n - 2)
    return _judged(None, (), second.mean - first.mean, standard_error, df, margin, higher_is_better, confidence)


CLOSES_AT_LEAST, CLOSES_LESS = "closes at least", "closes less than"


def _share_words(share: float) -> str:
    return "half" if share == 0.5 else f"{100 * share:g}%"


@dataclass(frozen=True)
class GapClosure:
    """Whether a candidate closes a share of the reference's gap to the baseline; see the module's docstring."""

    gap: Comparison
    excess: Comparison
    share: float
    share_closed: float | None
    verdict: str

    def as_dict(self) -> dict:
        return {"gap": self.gap.as_dict(), "excess": self.excess.as_dict(), "share": self.share,
                "share_closed": self.share_closed, "verdict": self.verdict}


def gap_closure(candidate: Mapping, reference: Mapping, baseline: Mapping, *, share: float = 0.5, margin: float,
                higher_is_better: bool, min_n: int = 2, confidence: float = 0.95) -> GapClosure:
    """Per seed the three have: e = (candidate - baseline) - share * (reference - baseline), judged with margin 0."""
    if not 0 < share < 1:
        raise ValueError(f"share must lie in (0, 1), got {share}")
    seeds = sorted(set(candidate) & set(reference) & set(baseline))
    gap = paired_comparison({s: reference[s] for s in seeds}, {s: baseline[s] for s in seeds}, margin=margin,
                            higher_is_better=higher_is_better, confidence=confidence)
    excess = paired_comparison({s: (candidate[s] - baseline[s]) - share * (reference[s] - baseline[s]) for s in seeds},
                               margin=0.0, higher_is_better=higher_is_better, confidence=confidence)
    has_gap = gap.verdict == TRAILS
    words = _share_words(share)
    if not has_gap or len(seeds) < max(min_n, 2):
        verdict = LEFT_OPEN
    else:
        verdict = {AHEAD: f"{CLOSES_AT_LEAST} {words}", TRAILS: f"{CLOSES_LESS} {words}"}.get(excess.verdict, LEFT_OPEN)
    gap_mean = statistics.fmean(reference[s] - baseline[s] for s in seeds) if seeds else 0.0
    closed = (1 - statistics.fmean(candidate[s] - baseline[s] for s in seeds) / gap_mean
              if has_gap and gap_mean else None)
    return GapClosure(gap=gap, excess=excess, share=share, share_closed=closed, verdict=verdict)
