"""Small, pure statistics over numpy arrays, in the spirit of rliable (Agarwal et al., 2021).

"Deep Reinforcement Learning at the Edge of the Statistical Precipice" recommends, for few runs per
task: the interquartile mean (IQM) as the aggregate, stratified bootstrap confidence intervals
(resample runs within each task independently), and the probability of improvement. These are
computed here with numpy and scipy only (the ``rliable`` package is not a dependency).

Conventions
-----------
* A *score collection* over tasks is either a 2-D array ``(runs, tasks)`` (same number of runs per
  task), a dict ``task -> 1-D array`` (seed counts may differ), or a 1-D array (a single task).
* Every interval comes from one primitive, :func:`bootstrap` (strata resampled independently, a
  percentile interval of any statistic of them); the functions below only choose the strata and
  the statistic. Every confidence interval is returned as :class:`CI` ``(estimate, low, high)``.
* Random streams come from ``numpy.random.default_rng(seed)``: the same seed gives the same interval.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np
import scipy.integrate
import scipy.special
import scipy.stats

__all__ = [
    "CI",
    "Bootstrap",
    "bootstrap",
    "NO_INTERVAL",
    "one_run_per_stratum",
    "without_interval",
    "iqm",
    "bootstrap_ci",
    "stratified_bootstrap_ci",
    "iqm_ci",
    "iqm_difference_ci",
    "mean_of_task_means",
    "performance_profile",
    "probability_of_improvement",
    "probability_of_improvement_ci",
    "normalize_score",
    "interpolate_to_grid",
    "auc",
    "common_grid",
    "mean_ci_over_runs",
]

DEFAULT_RESAMPLES = 2000


class CI(NamedTuple):
    """A point estimate with a confidence interval ``[low, high]``."""

    estimate: float
    low: float
    high: float


# --------------------------------------------------------------------------------------------
# helpers


def _as_1d(samples, name: str = "samples") -> np.ndarray:
    x = np.asarray(samples, dtype=float).ravel()
    if np.isnan(x).any():
        raise ValueError(f"{name} contains NaN; drop missing values before computing statistics")
    return x


def _as_tasks(scores) -> list[np.ndarray]:
    """Normalize a score collection to a list of 1-D float arrays, one per task."""
    if isinstance(scores, Mapping):
        tasks = [np.asarray(v, dtype=float).ravel() for v in scores.values()]
    else:
        arr = np.asarray(scores, dtype=float)
        if arr.ndim == 1:
            tasks = [arr]
        elif arr.ndim == 2:
            tasks = [arr[:, j] for j in range(arr.shape[1])]
        else:
            raise ValueError(f"scores must be 1-D, 2-D (runs x tasks) or a dict; got shape {arr.shape}")
    if not tasks:
        raise ValueError("scores contain no task")
    for i, t in enumerate(tasks):
        if t.size == 0:
            raise ValueError(f"task {i} has no runs")
        if np.isnan(t).any():
            raise ValueError(f"task {i} contains NaN scores")
    return tasks


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _percentile_interval(draws: np.ndarray, confidence: float) -> tuple:
    """The central ``confidence`` percentile interval of bootstrap draws (along axis 0)."""
    _check_confidence(confidence)
    alpha = 1.0 - confidence
    low = np.percentile(draws, 100 * alpha / 2, axis=0)
    high = np.percentile(draws, 100 * (1 - alpha / 2), axis=0)
    return low, high


def _apply_rowwise(statistic: Callable, data: np.ndarray) -> np.ndarray:
    """``statistic(data, axis=1)`` when the statistic supports ``axis``, else a loop over rows."""
    try:
        out = np.asarray(statistic(data, axis=1), dtype=float)
        if out.shape == (data.shape[0],):
            return out
    except TypeError:
        pass
    return np.array([float(statistic(row)) for row in data])


def _pooled(statistic: Callable) -> Callable:
    """A :func:`bootstrap` statistic: ``statistic`` of the pooled runs of every (1-D) stratum;
    ``statistic`` takes a 1-D array (and, to be vectorized over resamples, ``axis``)."""

    def pooled(strata: Sequence[np.ndarray]):
        runs = np.concatenate(strata, axis=-1)
        return statistic(runs) if runs.ndim == 1 else _apply_rowwise(statistic, runs)

    return pooled


# --------------------------------------------------------------------------------------------
# the bootstrap primitive


@dataclass(frozen=True)
class Bootstrap:
    """What :func:`bootstrap` found: the point ``estimate`` and its ``[low, high]`` interval (floats,
    or arrays shaped like the statistic), and ``draws``, the statistic on every resample
    (``(n_resamples, ...)``; None when nothing was resampled because every stratum has one row)."""

    estimate: Any
    low: Any
    high: Any
    draws: np.ndarray | None
    confidence: float

    @property
    def ci(self) -> CI:
        """A scalar statistic's result as :class:`CI` of floats."""
        return CI(float(self.estimate), float(self.low), float(self.high))

    def map(self, func: Callable, confidence: float | None = None) -> "Bootstrap":
        """``func`` of the statistic, with the percentile interval of ``func`` over the same resamples
        (e.g. the best of several configurations' scores), at ``confidence`` (default: this one's).
        ``func`` gets the estimate as it is and the draws with a leading resample axis: write it
        with negative axes."""
        confidence = self.confidence if confidence is None else confidence
        est = func(self.estimate)
        if self.draws is None:
            return Bootstrap(est, est, est, None, confidence)
        draws = np.asarray(func(self.draws), dtype=float)
        low, high = _percentile_interval(draws, confidence)
        return Bootstrap(est, low, high, draws, confidence)


def _jackknife_acceleration(strata: list[np.ndarray], statistic: Callable) -> float:
    """The BCa acceleration from leave-one-run-out values of the statistic, stratum by stratum."""
    nums, dens = 0.0, 0.0
    for j, s in enumerate(strata):
        n = len(s)
        keep = ~np.eye(n, dtype=bool)
        batched = [np.broadcast_to(o, (n, *o.shape)) for o in strata]
        batched[j] = np.stack([s[keep[i]] for i in range(n)])
        theta_i = np.asarray(statistic(batched), dtype=float)
        u = (n - 1) * (theta_i.mean() - theta_i)
        nums += np.sum(u ** 3) / n ** 3
        dens += np.sum(u ** 2) / n ** 2
    return float(nums / 6.0 / dens ** 1.5)


def _bca_interval(estimate: float, draws: np.ndarray, strata, statistic, confidence: float) -> tuple:
    """Bias-corrected and accelerated percentile interval (Efron and Tibshirani 1993, 14.3)."""
    alpha = (1.0 - confidence) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        z0 = scipy.special.ndtri(((draws < estimate).sum() + (draws <= estimate).sum()) / (2 * draws.size))
        a = _jackknife_acceleration(strata, statistic)
        z = scipy.special.ndtri(alpha)
        q_low = scipy.special.ndtr(z0 + (z0 + z) / (1 - a * (z0 + z)))
        q_high = scipy.special.ndtr(z0 + (z0 - z) / (1 - a * (z0 - z)))
    if not (np.isfinite(q_low) and np.isfinite(q_high)):
        return float("nan"), float("nan")
    return np.percentile(draws, 100 * q_low), np.percentile(draws, 100 * q_high)


def bootstrap(
    strata: Sequence,
    statistic: Callable[[list[np.ndarray]], Any],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = 0,
    method: str = "percentile",
    estimate: Any = None,
) -> Bootstrap:
    """The one bootstrap every interval of :mod:`adaptive_po.analysis` goes through (rliable's
    ``get_interval_estimates(scores, func, reps)`` with the strata explicit).

    ``strata`` is a sequence of arrays, each resampled along its first axis (its runs): every
    resample draws, for each stratum independently and in the order given, as many rows as it has,
    with replacement, from its own rows only. So the run count of every stratum (task) is kept, and
    several arms are resampled independently by giving each its own strata. A stratum of shape
    ``(runs, k)`` is resampled by whole rows: its k columns stay together (paired arms that share
    seeds, or the points of a learning curve), which is the paired, joint resampling.

    ``statistic(strata)`` is called once on the strata as given (the estimate) and once on all
    resamples at once: each stratum then has a leading resample axis, ``(n_resamples, runs, ...)``.
    It must therefore reduce the run axis by a negative index (``axis=-1`` for 1-D strata). It
    returns a float or an array (one interval per element).

    ``seed`` is an int, None or a ``numpy.random.Generator`` (to continue one stream over several
    calls). ``method`` is ``"percentile"`` (default), ``"basic"`` or ``"BCa"`` (scalar statistics).
    ``estimate`` overrides the point estimate where it uses more than the resampled strata. When
    every stratum has one row nothing is drawn and the interval is ``[estimate, estimate]``.
    """
    _check_confidence(confidence)
    if method not in ("percentile", "basic", "BCa"):
        raise ValueError(f"method must be 'percentile', 'basic' or 'BCa', got {method!r}")
    strata = [np.asarray(s, dtype=float) for s in strata]
    if not strata or any(len(s) == 0 for s in strata):
        raise ValueError("bootstrap needs at least one stratum, each with at least one run")
    est = statistic(strata) if estimate is None else estimate
    if all(len(s) == 1 for s in strata):  # every resample is the data itself
        return Bootstrap(est, est, est, None, confidence)
    rng = np.random.default_rng(seed)
    resampled = [s[rng.integers(0, len(s), size=(n_resamples, len(s)))] for s in strata]
    draws = np.asarray(statistic(resampled), dtype=float)
    low, high = _percentile_interval(draws, confidence)
    if method == "basic":
        low, high = 2 * est - high, 2 * est - low
    elif method == "BCa":
        if draws.ndim != 1:
            raise ValueError("the BCa interval needs a scalar statistic")
        bca = _bca_interval(float(est), draws, strata, statistic, confidence)
        if np.all(np.isfinite(bca)):  # else (a degenerate bootstrap distribution): the percentile interval
            low, high = bca
    return Bootstrap(est, low, high, draws, confidence)


# --------------------------------------------------------------------------------------------
# aggregates and intervals


def iqm(scores, axis: int | None = None):
    """Interquartile mean: the mean of the middle 50% of scores (``scipy.stats.trim_mean(x, 0.25)``).

    With ``axis=None`` (default) all scores are pooled, as in rliable's aggregate IQM over a
    ``(runs, tasks)`` matrix. Example: ``iqm(range(1, 9)) == mean(3, 4, 5, 6) == 4.5``.
    """
    x = np.asarray(scores, dtype=float)
    if axis is None:
        x = x.ravel()
        if x.size == 0:
            return float("nan")
        return float(scipy.stats.trim_mean(x, 0.25))
    return scipy.stats.trim_mean(x, 0.25, axis=axis)


def bootstrap_ci(
    samples,
    statistic: Callable = np.mean,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    method: str = "percentile",
) -> CI:
    """Bootstrap confidence interval of ``statistic(samples)`` (one stratum, :func:`bootstrap`).

    ``method`` is ``"percentile"`` (default; robust with few seeds) or ``"BCa"``/``"basic"``.
    Degenerate cases never crash: no sample gives NaNs; one sample, or all samples equal, gives the
    degenerate interval ``[estimate, estimate]``; a BCa interval that cannot be computed falls
    back to the percentile interval.
    """
    _check_confidence(confidence)
    x = _as_1d(samples)
    if x.size == 0:
        nan = float("nan")
        return CI(nan, nan, nan)
    estimate = float(statistic(x))
    if x.size == 1 or np.all(x == x[0]):
        return CI(estimate, estimate, estimate)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid divide in a degenerate BCa
        res = bootstrap([x], _pooled(statistic), n_resamples=n_resamples, confidence=confidence, seed=seed,
                        method=method, estimate=estimate)
    return res.ci


def stratified_bootstrap_ci(
    scores,
    statistic: Callable = iqm,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
) -> CI:
    """Stratified percentile-bootstrap CI of an aggregate over tasks.

    Each resample draws, for every task independently, as many runs as that task has, with
    replacement, from that task's runs only; ``statistic`` is applied to the pooled resampled
    scores (a 1-D array; if it accepts ``axis`` it is vectorized over resamples). ``scores`` is a
    ``(runs, tasks)`` matrix, a dict ``task -> runs`` (seed counts may differ) or a 1-D array.
    The estimate is ``statistic`` of all pooled scores.
    """
    _check_confidence(confidence)
    tasks = _as_tasks(scores)
    pooled = np.concatenate(tasks)
    if np.all(pooled == pooled[0]):
        estimate = float(statistic(pooled))
        return CI(estimate, estimate, estimate)
    return bootstrap(tasks, _pooled(statistic), n_resamples=n_resamples, confidence=confidence, seed=seed).ci


def iqm_ci(scores, confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0) -> CI:
    """Aggregate IQM over tasks with its stratified bootstrap CI."""
    return stratified_bootstrap_ci(scores, iqm, confidence=confidence, n_resamples=n_resamples, seed=seed)


def iqm_difference_ci(
    a: Mapping[Any, Sequence[float]], b: Mapping[Any, Sequence[float]], confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
) -> CI:
    """IQM(a) - IQM(b) over the tasks both have, with a stratified bootstrap CI (the runs of a and
    of b resampled independently within each task)."""
    tasks = [t for t in a if t in b]
    if not tasks:
        nan = float("nan")
        return CI(nan, nan, nan)
    k = len(tasks)

    def difference(strata):
        return iqm(np.concatenate(strata[:k], axis=-1), axis=-1) - iqm(np.concatenate(strata[k:], axis=-1), axis=-1)

    strata = [a[t] for t in tasks] + [b[t] for t in tasks]
    return bootstrap(strata, difference, n_resamples=n_resamples, confidence=confidence, seed=seed).ci


#: what a report prints where an interval would rest on one run (per task): no spread was observed
NO_INTERVAL = "n = 1, no interval"


def one_run_per_stratum(*samples) -> bool:
    """True when one of ``samples`` holds a single run in each of its tasks. A sample is an array
    of runs, or a dict or list of them (one per task). Its bootstrap resamples nothing: an interval
    of it is a point, and one of its difference to another sample shows that other sample's spread
    alone. A report then prints :data:`NO_INTERVAL` (see :func:`without_interval`), never an interval."""
    for sample in samples:
        strata = list(sample.values()) if isinstance(sample, Mapping) else sample
        if len(strata) and np.ndim(strata[0]) == 0:  # a flat array of runs: one task
            strata = [strata]
        if len(strata) and all(len(s) == 1 for s in strata):
            return True
    return False


def without_interval(ci: CI, *samples) -> CI:
    """``ci`` as it is, or with NaN bounds where :func:`one_run_per_stratum` holds for ``samples``."""
    if one_run_per_stratum(*samples):
        nan = float("nan")
        return CI(ci.estimate, nan, nan)
    return ci


def mean_of_task_means(strata: Sequence[np.ndarray]):
    """A :func:`bootstrap` statistic: the mean over tasks of each task's mean (every task weighs the
    same, whatever its run count)."""
    return np.mean([s.mean(axis=-1) for s in strata], axis=0)


def performance_profile(
    per_task: Mapping[Any, Sequence[float]], taus: Sequence[float], confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
) -> dict[str, np.ndarray]:
    """Run-score distribution (rliable's performance profile): at each ``tau``, the fraction of
    runs whose score exceeds ``tau``, averaged over tasks (each task weighs the same), with a
    stratified bootstrap CI band. Returns ``tau``, ``fraction``, ``low``, ``high``."""
    taus = np.asarray(taus, dtype=float)

    def fraction_above(strata):
        return np.mean([(s[..., None] > taus).mean(axis=-2) for s in strata], axis=0)

    res = bootstrap(list(per_task.values()), fraction_above, n_resamples=n_resamples, confidence=confidence, seed=seed)
    return {"tau": taus, "fraction": res.estimate, "low": res.low, "high": res.high}


# --------------------------------------------------------------------------------------------
# probability of improvement


def _poi_per_task(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) + 0.5 P(X = Y) from the Mann-Whitney U statistic of x (vectorized over rows).

    ``scipy.stats.mannwhitneyu(x, y).statistic`` is U_x = #{x_i > y_j} + 0.5 #{x_i = y_j}
    (mid-ranks), so dividing by ``n_x * n_y`` gives the probability.
    """
    nx, ny = x.shape[-1], y.shape[-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # p-values of tied/tiny samples are not used
        u = scipy.stats.mannwhitneyu(x, y, axis=-1, method="asymptotic", use_continuity=False).statistic
    return np.asarray(u, dtype=float) / (nx * ny)


def _paired_tasks(x, y) -> tuple[list[np.ndarray], list[np.ndarray]]:
    if isinstance(x, Mapping) != isinstance(y, Mapping):
        raise ValueError("x and y must both be dicts or both be arrays")
    if isinstance(x, Mapping):
        if set(x) != set(y):
            raise ValueError(f"x and y cover different tasks: {sorted(map(str, x))} vs {sorted(map(str, y))}")
        keys = list(x)
        x = {k: x[k] for k in keys}
        y = {k: y[k] for k in keys}
    tx, ty = _as_tasks(x), _as_tasks(y)
    if len(tx) != len(ty):
        raise ValueError(f"x has {len(tx)} tasks but y has {len(ty)}")
    return tx, ty


def _poi_statistic(k: int) -> Callable:
    """A :func:`bootstrap` statistic over ``k`` tasks of x then ``k`` of y: the mean per-task P(X > Y)."""

    def poi(strata):
        return np.mean(np.stack([_poi_per_task(a, b) for a, b in zip(strata[:k], strata[k:])], axis=-1), axis=-1)

    return poi


def probability_of_improvement(x, y) -> float:
    """Average over tasks of P(X > Y) + 0.5 P(X = Y), X a run of algorithm x and Y one of y.

    Per task it is the Mann-Whitney U statistic of x divided by ``n_x * n_y``. ``x`` and ``y`` are
    1-D arrays (one task), ``(runs, tasks)`` matrices with the same tasks, or dicts with the same
    task keys (run counts may differ between x and y and between tasks).
    """
    tx, ty = _paired_tasks(x, y)
    return float(_poi_statistic(len(tx))(tx + ty))


def probability_of_improvement_ci(
    x, y, confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0
) -> CI:
    """:func:`probability_of_improvement` with a stratified percentile-bootstrap CI.

    Each resample draws the runs of x and of y independently within every task.
    """
    tx, ty = _paired_tasks(x, y)
    return bootstrap(tx + ty, _poi_statistic(len(tx)), n_resamples=n_resamples, confidence=confidence, seed=seed).ci


# --------------------------------------------------------------------------------------------
# normalization and curves


def normalize_score(score, random, reference, undefined: str = "raise"):
    """``(score - random) / (reference - random)``: 0 is the random policy, 1 the reference.

    The one normalization of the analysis (the suite tables and the paper's per-run scores).
    Broadcasts like numpy. Where ``reference == random``, or either is missing (NaN), the score is
    undefined: ``undefined="raise"`` (default) raises ``ValueError``, ``"nan"`` gives NaN there.
    """
    if undefined not in ("raise", "nan"):
        raise ValueError(f"undefined must be 'raise' or 'nan', got {undefined!r}")
    s = np.asarray(score, dtype=float)
    r = np.asarray(random, dtype=float)
    ref = np.asarray(reference, dtype=float)
    span = ref - r
    if undefined == "raise":
        if np.any(span == 0):
            raise ValueError("reference score equals random score: normalization undefined")
        out = (s - r) / span
    else:
        ok = np.isfinite(r) & np.isfinite(ref) & (span != 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(ok, (s - r) / np.where(ok, span, 1.0), np.nan)
    return float(out) if out.ndim == 0 else out


def interpolate_to_grid(steps, values, grid) -> np.ndarray:
    """Linear interpolation of a logged curve onto ``grid``.

    Grid points before the run's first logged step or beyond its last one are NaN: the curve is
    never extrapolated (a run that stopped early does not pretend to have a value there).
    Points with a NaN step or value are dropped first; repeated steps keep the last value logged;
    unsorted input is sorted by step.
    """
    s = np.asarray(steps, dtype=float).ravel()
    v = np.asarray(values, dtype=float).ravel()
    g = np.asarray(grid, dtype=float)
    if s.shape != v.shape:
        raise ValueError(f"steps and values differ in length: {s.size} vs {v.size}")
    keep = np.isfinite(s) & np.isfinite(v)
    s, v = s[keep], v[keep]
    out = np.full(g.shape, np.nan)
    if s.size == 0:
        return out
    order = np.argsort(s, kind="stable")
    s, v = s[order], v[order]
    last = np.r_[s[1:] != s[:-1], True]  # last occurrence of each step
    s, v = s[last], v[last]
    inside = (g >= s[0]) & (g <= s[-1])
    out[inside] = np.interp(g[inside], s, v)
    return out


def auc(grid, values) -> float:
    """Area under a curve by the trapezoid rule, divided by the step span: a mean return.

    NaN values (e.g. beyond a run's last step after :func:`interpolate_to_grid`) are left out and
    the span is that of the remaining points. One finite point gives its value; none gives NaN.
    """
    g = np.asarray(grid, dtype=float).ravel()
    v = np.asarray(values, dtype=float).ravel()
    if g.shape != v.shape:
        raise ValueError(f"grid and values differ in length: {g.size} vs {v.size}")
    keep = np.isfinite(g) & np.isfinite(v)
    g, v = g[keep], v[keep]
    if g.size == 0:
        return float("nan")
    if np.any(np.diff(g) < 0):
        order = np.argsort(g, kind="stable")
        g, v = g[order], v[order]
    span = g[-1] - g[0]
    if g.size == 1 or span == 0:
        return float(v.mean())
    return float(scipy.integrate.trapezoid(v, g) / span)


def common_grid(step_arrays: Sequence, max_points: int = 200) -> np.ndarray:
    """A shared step grid for several runs: the sorted union of their logged steps, or, if that
    has more than ``max_points`` points, ``max_points`` evenly spaced steps over the same range."""
    parts = [np.asarray(s, dtype=float).ravel() for s in step_arrays]
    allsteps = np.concatenate(parts) if parts else np.array([])
    allsteps = allsteps[np.isfinite(allsteps)]
    if allsteps.size == 0:
        return np.array([])
    union = np.unique(allsteps)
    if union.size <= max_points:
        return union
    return np.linspace(union[0], union[-1], max_points)


def mean_ci_over_runs(
    curves,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
) -> dict[str, np.ndarray]:
    """Mean across runs at each grid point with a percentile-bootstrap CI (runs resampled).

    ``curves`` is ``(runs, grid)``, NaN where a run does not cover a point. At each point the mean
    and interval use only the runs covering it (``n`` says how many); one run gives a degenerate
    interval, none gives NaN. Returns a dict of arrays ``mean``, ``low``, ``high``, ``n``.
    """
    _check_confidence(confidence)
    c = np.atleast_2d(np.asarray(curves, dtype=float))
    n_runs, n_points = c.shape
    avail = np.isfinite(c)
    n = avail.sum(axis=0)
    mean = np.full(n_points, np.nan)
    low = np.full(n_points, np.nan)
    high = np.full(n_points, np.nan)
    rng = np.random.default_rng(seed)
    # Group grid points by which runs cover them (usually one or two patterns); a run is resampled
    # whole (one stratum of shape (runs, points)), one random stream over the patterns.
    patterns, inverse = np.unique(avail.T, axis=0, return_inverse=True)
    for p_idx, pattern in enumerate(patterns):
        cols = np.flatnonzero(inverse.ravel() == p_idx)
        rows = np.flatnonzero(pattern)
        if rows.size == 0:
            continue
        res = bootstrap([c[np.ix_(rows, cols)]], lambda s: s[0].mean(axis=-2), n_resamples=n_resamples,
                        confidence=confidence, seed=rng)
        mean[cols], low[cols], high[cols] = res.estimate, res.low, res.high
    return {"mean": mean, "low": low, "high": high, "n": n}


def add_bootstrap_arguments(parser) -> None:
    """The command-line flags of the bootstrap every report shares: resamples, seed, confidence."""
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES,
                        help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap random seed (default 0)")
    parser.add_argument("--confidence", type=float, default=0.95, help="confidence level (default 0.95)")


def parse_report_arguments(parser, argv=None):
    """Parse a report's command line; bad bootstrap flags are a usage error (exit 2) naming them."""
    args = parser.parse_args(argv)
    if args.resamples < 1:
        parser.error(f"--resamples must be at least 1, got {args.resamples}")
    if not 0 < args.confidence < 1:
        parser.error(f"--confidence must be in (0, 1), got {args.confidence}")
    return args
