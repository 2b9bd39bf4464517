"""The verdicts' tests (adaptive_po.analysis.hypothesis) against scipy and by simulation, and the
calibration table (docs/results/calibration.md): rebuilt from the committed per-run tables, the
chosen test within its level, the rule of before shown anti-conservative, the exact A/A pair never
a win or a loss."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from adaptive_po.analysis import calibration, hypothesis, verdicts

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"


def test_welch_matches_scipy():
    rng = np.random.default_rng(0)
    x, y = rng.normal(1.0, 1.0, 5), rng.normal(0.0, 3.0, 7)
    d = hypothesis.welch(x, y)
    ref = stats.ttest_ind(x, y, equal_var=False)
    assert d.p_value() == pytest.approx(ref.pvalue, rel=1e-9)
    low, high = d.ci()
    ci = ref.confidence_interval(0.95)
    assert (low, high) == pytest.approx((ci.low, ci.high), rel=1e-9)


def test_a_mean_over_tasks_of_one_task_is_welch_and_a_paired_sample_is_a_one_sample_t():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=6), rng.normal(size=4)
    assert hypothesis.mean_of_differences([(x, y)]) == hypothesis.welch(x, y)
    d = hypothesis.mean_of_differences([(x, None)])
    assert d.p_value() == pytest.approx(stats.ttest_1samp(x, 0.0).pvalue, rel=1e-9)


def test_a_weighted_sum_of_independent_estimates_is_the_mean_over_tasks_below_both():
    """weighted_sum, the formula under mean_of_differences and the frozen study's slope and tax
    endpoints: sum w_i x_i, variance sum w_i^2 se_i^2, Welch-Satterthwaite degrees of freedom."""
    rng = np.random.default_rng(3)
    groups = [rng.normal(m, s, n) for m, s, n in ((1.0, 1.0, 5), (0.2, 2.0, 8), (0.5, 0.5, 6), (0.0, 1.5, 10))]
    se = [g.std(ddof=1) / np.sqrt(len(g)) for g in groups]
    terms = [(g.mean(), e, len(g) - 1, w) for g, e, w in zip(groups, se, (0.5, -0.5, 0.5, -0.5))]
    d = hypothesis.weighted_sum(terms)
    variances = [(w * e) ** 2 for (_, e, _, w) in terms]
    assert d.estimate == pytest.approx(0.5 * (groups[0].mean() - groups[1].mean() + groups[2].mean() - groups[3].mean()))
    assert d.se == pytest.approx(np.sqrt(sum(variances)))
    assert d.df == pytest.approx(sum(variances) ** 2 / sum(v ** 2 / (len(g) - 1) for v, g in zip(variances, groups)))
    pooled = hypothesis.mean_of_differences([(groups[0], groups[1]), (groups[2], groups[3])])
    assert (pooled.estimate, pooled.se, pooled.df) == pytest.approx((d.estimate, d.se, d.df), rel=1e-12)
    assert np.isnan(hypothesis.weighted_sum([]).estimate)
    assert not hypothesis.weighted_sum([(1.0, np.nan, 0.0, 1.0)]).testable  # one run: no standard error
    assert hypothesis.weighted_sum([(2.0, 0.0, 4.0, 1.0), (1.0, 0.0, 4.0, -1.0)]) == hypothesis.Difference(1.0, 0.0, np.inf)


def test_holm_against_a_worked_example_and_nan_left_out():
    p = [0.01, 0.04, 0.03, np.nan, 0.005]
    # sorted 0.005, 0.01, 0.03, 0.04 (m = 4): 0.02, 0.03, 0.06, 0.06 (monotone)
    assert hypothesis.holm(p)[[4, 0, 2, 1]] == pytest.approx([0.02, 0.03, 0.06, 0.06])
    assert np.isnan(hypothesis.holm(p)[3])


def test_equivalence_needs_a_tight_interval_inside_the_margin():
    tight = hypothesis.Difference(0.01, 0.02, 20)
    wide = hypothesis.Difference(0.01, 0.2, 20)
    assert tight.p_equivalence(0.1) < 0.05 < wide.p_equivalence(0.1)
    assert hypothesis.verdict(0.01, 1.0, tight.p_equivalence(0.1)) == "equivalent"
    assert hypothesis.verdict(0.01, 1.0, wide.p_equivalence(0.1)) == "inconclusive"
    assert hypothesis.verdict(-0.5, 0.001, 1.0) == "loss"


def test_equivalence_is_refused_outside_the_margin_on_either_side():
    # a tight interval around +-0.5 is far outside +-0.1: one one-sided test rejects, the other
    # cannot, and equivalence needs both (the larger p)
    for estimate in (0.5, -0.5):
        far = hypothesis.Difference(estimate, 0.02, 20)
        assert far.p_equivalence(0.1) > 0.99
        assert hypothesis.verdict(estimate, 0.2, far.p_equivalence(0.1)) == "inconclusive"


def test_the_detectable_difference_is_found_with_80_percent_power():
    rng = np.random.default_rng(2)
    n, sd = 10, 1.0
    probe = hypothesis.welch(rng.normal(0, sd, (n,)), rng.normal(0, sd, (n,)))
    mde = float((stats.t.ppf(0.975, 2 * n - 2) + stats.t.ppf(0.8, 2 * n - 2)) * sd * np.sqrt(2 / n))
    assert probe.detectable() == pytest.approx(mde, rel=0.6)  # the observed spread, not sd itself
    hits = [hypothesis.welch(rng.normal(mde, sd, n), rng.normal(0, sd, n)).p_value() < 0.05 for _ in range(2000)]
    assert 0.74 < np.mean(hits) < 0.86


def test_no_spread_is_an_exact_difference():
    same = hypothesis.welch([500.0] * 5, [500.0] * 5)
    assert same.p_value() == 1.0 and same.p_equivalence(50.0) == 0.0
    apart = hypothesis.welch([500.0] * 5, [400.0] * 5)
    assert apart.p_value() == 0.0 and apart.ci() == (100.0, 100.0)


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    out = tmp_path_factory.mktemp("calibration") / "calibration.md"
    assert calibration.main(["--results", str(RESULTS), "--out", str(out)]) == 0
    return out.read_text()


def test_the_calibration_table_rebuilds_from_the_committed_tables(rebuilt):
    assert rebuilt == (RESULTS / "calibration.md").read_text()


def _rates(text: str) -> list[tuple[str, str, int, float, float, float]]:
    rows = []
    for m in re.finditer(r"^\| ([^|]+) \| ([^|]+) \| (\d+) \| \d+ \| \d+ \| ([\d.]+) \[([\d.]+), ([\d.]+)\] \|$", text, re.M):
        rows.append((m[1], m[2], int(m[3]), float(m[4]), float(m[5]), float(m[6])))
    return rows


def test_the_chosen_test_holds_its_level_and_the_rule_of_before_does_not(rebuilt):
    rows = _rates(rebuilt)
    assert {(n, what) for t, what, n, *_ in rows if t.startswith("Welch")} >= {(5, "per task"), (10, "per task"), (5, "aggregate"), (10, "aggregate")}
    for test, what, n, rate, low, high in rows:
        if test.startswith("Welch"):
            # within 5% plus Monte Carlo error: the interval reaches down to 5% or below
            assert low <= hypothesis.ALPHA, f"{test}, {what}, n = {n}: false-positive rate {rate} [{low}, {high}]"
        if test.startswith("percentile bootstrap") and n == 5:
            assert low > hypothesis.ALPHA, "the A/A draws would not show the anti-conservative rule of before"


def test_the_exact_aa_pair_is_never_a_win_or_a_loss_in_any_published_grid(rebuilt):
    section = rebuilt.split("## The exact A/A pair", 1)[1]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ") and not line.startswith("| grid") and not line.startswith("|:")]
    assert {r[0].strip("| ") for r in rows} == {"staleness", "paper", "minatar"}
    for r in rows:
        words = set(r[-1].rstrip(" |").split(", "))
        assert words <= {"equivalent", "inconclusive"}, r


@pytest.mark.parametrize("name", ["staleness", "paper", "minatar"])
def test_decoupled_ppo_at_lag_0_is_never_a_win_or_loss_in_the_published_report(name):
    text = (RESULTS / name / "verdicts.md").read_text()
    rows = [line for line in text.splitlines() if "| decoupled-ppo |" in line and "fresh (lag 0)" in line]
    assert rows, f"{name}: no decoupled-ppo row at lag 0"
    for line in rows:
        assert not re.search(r"\| (win|loss) \(p", line), line


def test_the_simulated_welch_is_the_verdicts_welch():
    """The calibration's vectorised Welch rejects exactly where the verdicts' test does."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_t(3, size=(300, 5)), 1.5 * rng.standard_t(3, size=(300, 5))
    a[:5] = b[:5] = 1.0  # no spread in either arm
    a[5:10] = 2.0
    b[5:10] = 1.0
    simulated = calibration._welch_reject(a, b)
    expected = np.array([hypothesis.welch(x, y).p_value() < hypothesis.ALPHA for x, y in zip(a, b)])
    assert (simulated == expected).all() and 0 < expected[10:].sum() < 60
