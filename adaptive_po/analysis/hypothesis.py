"""The verdicts' tests: Welch's t for a difference of means, two one-sided tests for equivalence,
Holm's step-down adjustment for a family of tests, and the smallest difference a design detects.

Why Welch and not the percentile bootstrap the reports used before: at 5 runs per arm a percentile
bootstrap interval of a difference of means is too narrow (it divides by n, not n - 1, and ignores
that the spread itself is estimated), so it "excludes 0" in about 12% of A/A comparisons at a
nominal 5%. Welch's t has the level it claims on this project's own runs
(:mod:`adaptive_po.analysis.calibration` measures it, ``docs/results/calibration.md`` publishes it,
``tests/test_calibration.py`` holds it). A test with no resampling also gives the same verdict
under every bootstrap seed.

The aggregate over tasks (the mean over tasks of each task's difference of means) is tested the
same way: its variance is the sum of the tasks' Welch variances over T^2, its degrees of freedom
Welch-Satterthwaite's.

Everything here is plain numpy/scipy on arrays; nothing reads a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as _stats

#: the level of every test (two-sided for a difference, each side for equivalence)
ALPHA = 0.05
#: the power at which the smallest detectable difference is stated
POWER = 0.80
#: the equivalence margin, in normalized score (a tenth of the random-to-reference span)
MARGIN = 0.1

#: the verdict words, in the order the tables count them
WIN, LOSS, EQUIVALENT, INCONCLUSIVE = "win", "loss", "equivalent", "inconclusive"
VERDICTS = (WIN, EQUIVALENT, INCONCLUSIVE, LOSS)


@dataclass(frozen=True)
class Difference:
    """A difference of means (or a mean over tasks of differences) with its standard error and
    Welch-Satterthwaite degrees of freedom. ``se`` is NaN where an arm has fewer than two runs."""

    estimate: float
    se: float
    df: float

    @property
    def testable(self) -> bool:
        return bool(np.isfinite(self.estimate) and np.isfinite(self.se))

    def p_value(self) -> float:
        """Two-sided p of "the difference is 0"."""
        if not self.testable:
            return np.nan
        if self.se == 0:  # no spread in either arm: the difference is exact
            return 1.0 if self.estimate == 0 else 0.0
        return float(2 * _stats.t.sf(abs(self.estimate) / self.se, self.df))

    def ci(self, confidence: float = 1 - ALPHA) -> tuple[float, float]:
        if not self.testable:
            return np.nan, np.nan
        if self.se == 0:
            return self.estimate, self.estimate
        half = float(_stats.t.ppf(0.5 + confidence / 2, self.df)) * self.se
        return self.estimate - half, self.estimate + half

    def p_equivalence(self, margin: float) -> float:
        """p of two one-sided tests that the difference lies within ``(-margin, +margin)``: the larger
        of the two one-sided p-values (equivalence is shown where it is below the level)."""
        if not self.testable or not np.isfinite(margin):
            return np.nan
        if self.se == 0:
            return 0.0 if abs(self.estimate) < margin else 1.0
        lower = _stats.t.sf((self.estimate + margin) / self.se, self.df)  # H0: diff <= -margin
        upper = _stats.t.cdf((self.estimate - margin) / self.se, self.df)  # H0: diff >= +margin
        return float(max(lower, upper))

    def detectable(self, alpha: float = ALPHA, power: float = POWER) -> float:
        """The smallest true difference the two-sided test at ``alpha`` finds with probability
        ``power``, at this standard error and these degrees of freedom (the usual
        (t_{1-alpha/2} + t_power) x SE approximation)."""
        if not self.testable:
            return np.nan
        return float((_stats.t.ppf(1 - alpha / 2, self.df) + _stats.t.ppf(power, self.df)) * self.se) if self.se > 0 else 0.0


def _moments(x: np.ndarray) -> tuple[float, float, int]:
    x = np.asarray(x, float)
    n = len(x)
    return (float(x.mean()) if n else np.nan), (float(x.var(ddof=1)) / n if n >= 2 else np.nan), n


def welch(x: Sequence[float], y: Sequence[float]) -> Difference:
    """mean(x) - mean(y) with Welch's standard error and degrees of freedom."""
    return mean_of_differences([(x, y)])


def weighted_sum(terms: Sequence[tuple[float, float, float, float]]) -> Difference:
    """sum_i w_i x estimate_i over independent estimates ``(estimate, se, df, w)``: variance
    sum_i w_i^2 se_i^2 and Welch-Satterthwaite degrees of freedom. No terms: NaN."""
    if not terms:
        return Difference(np.nan, np.nan, np.nan)
    estimate = sum(w * e for e, _, _, w in terms)
    variances = [(w * se) ** 2 for _, se, _, w in terms]
    if not all(np.isfinite(v) for v in variances):
        return Difference(float(estimate), np.nan, np.nan)
    total = sum(variances)
    if total == 0:
        return Difference(float(estimate), 0.0, np.inf)
    df = total ** 2 / sum(v ** 2 / d for v, (_, _, d, _) in zip(variances, terms) if v > 0)
    return Difference(float(estimate), float(np.sqrt(total)), float(df))


def mean_of_differences(pairs: Sequence[tuple[Sequence[float], Sequence[float] | None]]) -> Difference:
    """The mean over tasks of (mean(x_t) - mean(y_t)): every task weighs the same; variance
    sum_t (s_xt^2 / n_xt + s_yt^2 / n_yt) / T^2 and Welch-Satterthwaite degrees of freedom
    (:func:`weighted_sum` of the group means with weights +-1/T). A ``y_t`` of None makes that task
    a one-sample mean of ``x_t`` (paired differences)."""
    k = len(pairs)
    terms = []
    for x, y in pairs:
        for group, sign in ((x, 1.0), (y, -1.0)):
            if group is None:  # a one-sample mean (paired differences)
                continue
            mean, var, n = _moments(group)
            terms.append((mean, float(np.sqrt(var)), float(n - 1), sign / k))
    return weighted_sum(terms)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error at the level), NaN entries left out of
    the family and returned as NaN."""
    p = np.asarray(p_values, float)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(np.isfinite(p))
    m = len(idx)
    if m == 0:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def verdict(estimate: float, p_adjusted: float, p_equivalence_adjusted: float, alpha: float = ALPHA) -> str:
    """win / loss where the (adjusted) difference test rejects, else equivalent where the
    (adjusted) equivalence test does, else inconclusive; "" where nothing could be tested."""
    if not np.isfinite(p_adjusted):
        return ""
    if p_adjusted < alpha:
        return WIN if estimate > 0 else LOSS
    if np.isfinite(p_equivalence_adjusted) and p_equivalence_adjusted < alpha:
        return EQUIVALENT
    return INCONCLUSIVE


def rules_text(family: str = "the report") -> str:
    """The rules, in one sentence a report prints before its tables."""
    return (
        f"A difference is a **win** or a **loss** where Welch's t-test rejects 0 at {ALPHA:g} after Holm's adjustment over {family}; "
        f"else **equivalent** where two one-sided Welch tests (Holm-adjusted the same way) put it within ±{MARGIN:g} normalized score "
        f"(±{MARGIN:g} x (reference - random) in return); else **inconclusive**. "
        f"Intervals are Welch 95% CIs (unadjusted). \"detectable\" is the smallest difference the unadjusted test finds with "
        f"{POWER:.0%} power at the cell's runs and observed spread, in normalized score. The test's measured level on this "
        "project's runs: [`calibration.md`](../calibration.md)."
    )
