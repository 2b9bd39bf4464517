"""Small, pure statistics over numpy arrays, in the spirit of rliable (Agarwal et al., 2021).

"Deep Reinforcement Learning at the Edge of the Statistical Precipice" recommends, for few runs per
task: the interquartile mean (IQM) as the aggregate, stratified bootstrap confidence intervals
(resample runs within each task independently), and the probability of improvement. These are
computed here with numpy and scipy only (the ``rliable`` package is not a dependency).

Conventions
-----------
* A *score collection* over tasks is either a 2-D array ``(runs, tasks)`` (same number of runs per
  task), a dict ``task -> 1-D array`` (seed counts may differ), or a 1-D array (a single task).
* Every confidence interval is returned as :class:`CI` ``(estimate, low, high)``.
* Random streams come from ``numpy.random.default_rng(seed)``: the same seed gives the same interval.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Callable, Mapping, NamedTuple, Sequence

import numpy as np
import scipy.integrate
import scipy.stats

__all__ = [
    "CI",
    "iqm",
    "bootstrap_ci",
    "stratified_bootstrap_ci",
    "iqm_ci",
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


def _task_keys(scores) -> list:
    if isinstance(scores, Mapping):
        return list(scores.keys())
    arr = np.asarray(scores)
    return [0] if arr.ndim == 1 else list(range(arr.shape[1]))


def _percentile_interval(boot: np.ndarray, confidence: float, axis: int = 0) -> tuple:
    _check_confidence(confidence)
    alpha = 1.0 - confidence
    low = np.percentile(boot, 100 * alpha / 2, axis=axis)
    high = np.percentile(boot, 100 * (1 - alpha / 2), axis=axis)
    return low, high


# scipy >= 1.15 takes ``rng``; older releases (the project allows scipy >= 1.11) ``random_state``.
_BOOTSTRAP_RNG_KW = "rng" if "rng" in inspect.signature(scipy.stats.bootstrap).parameters else "random_state"


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _apply_rowwise(statistic: Callable, data: np.ndarray) -> np.ndarray:
    """``statistic(data, axis=1)`` when the statistic supports ``axis``, else a loop over rows."""
    try:
        out = np.asarray(statistic(data, axis=1), dtype=float)
        if out.shape == (data.shape[0],):
            return out
    except TypeError:
        pass
    return np.array([float(statistic(row)) for row in data])


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
    """Bootstrap confidence interval of ``statistic(samples)`` with ``scipy.stats.bootstrap``.

    ``method`` is ``"percentile"`` (default; robust with few seeds) or ``"BCa"``/``"basic"``.
    Degenerate cases never crash: no sample gives NaNs; one sample, or all samples equal, gives the
    degenerate interval ``[estimate, estimate]``; a BCa interval that scipy cannot compute falls
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
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DegenerateDataWarning / invalid divide in BCa
        res = scipy.stats.bootstrap(
            (x,), statistic, n_resamples=n_resamples, confidence_level=confidence,
            method=method, **{_BOOTSTRAP_RNG_KW: rng},
        )
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if not (np.isfinite(low) and np.isfinite(high)):
            res = scipy.stats.bootstrap(
                (x,), statistic, n_resamples=n_resamples, confidence_level=confidence,
                method="percentile", **{_BOOTSTRAP_RNG_KW: np.random.default_rng(seed)},
            )
            low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return CI(estimate, low, high)


def _stratified_resample(tasks: Sequence[np.ndarray], n_resamples: int, rng) -> list[np.ndarray]:
    """For each task, ``(n_resamples, n_runs)`` runs drawn with replacement from that task only."""
    return [t[rng.integers(0, t.size, size=(n_resamples, t.size))] for t in tasks]


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
    estimate = float(statistic(pooled))
    if all(t.size == 1 for t in tasks) or np.all(pooled == pooled[0]):
        return CI(estimate, estimate, estimate)
    rng = np.random.default_rng(seed)
    boot = np.concatenate(_stratified_resample(tasks, n_resamples, rng), axis=1)
    stats = _apply_rowwise(statistic, boot)
    low, high = _percentile_interval(stats, confidence)
    return CI(estimate, float(low), float(high))


def iqm_ci(scores, confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0) -> CI:
    """Aggregate IQM over tasks with its stratified bootstrap CI."""
    return stratified_bootstrap_ci(scores, iqm, confidence=confidence, n_resamples=n_resamples, seed=seed)


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


def probability_of_improvement(x, y) -> float:
    """Average over tasks of P(X > Y) + 0.5 P(X = Y), X a run of algorithm x and Y one of y.

    Per task it is the Mann-Whitney U statistic of x divided by ``n_x * n_y``. ``x`` and ``y`` are
    1-D arrays (one task), ``(runs, tasks)`` matrices with the same tasks, or dicts with the same
    task keys (run counts may differ between x and y and between tasks).
    """
    tx, ty = _paired_tasks(x, y)
    return float(np.mean([_poi_per_task(a, b) for a, b in zip(tx, ty)]))


def probability_of_improvement_ci(
    x, y, confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0
) -> CI:
    """:func:`probability_of_improvement` with a stratified percentile-bootstrap CI.

    Each resample draws the runs of x and of y independently within every task.
    """
    _check_confidence(confidence)
    tx, ty = _paired_tasks(x, y)
    estimate = float(np.mean([_poi_per_task(a, b) for a, b in zip(tx, ty)]))
    rng = np.random.default_rng(seed)
    bx = _stratified_resample(tx, n_resamples, rng)
    by = _stratified_resample(ty, n_resamples, rng)
    per_task = np.stack([_poi_per_task(a, b) for a, b in zip(bx, by)], axis=1)  # (B, tasks)
    stats = per_task.mean(axis=1)
    low, high = _percentile_interval(stats, confidence)
    return CI(estimate, float(low), float(high))


# --------------------------------------------------------------------------------------------
# normalization and curves


def normalize_score(score, random, reference):
    """``(score - random) / (reference - random)``: 0 is the random policy, 1 the reference.

    Broadcasts like numpy; raises ``ValueError`` if ``reference == random`` anywhere.
    """
    s = np.asarray(score, dtype=float)
    r = np.asarray(random, dtype=float)
    ref = np.asarray(reference, dtype=float)
    span = ref - r
    if np.any(span == 0):
        raise ValueError("reference score equals random score: normalization undefined")
    out = (s - r) / span
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
    # Group grid points by which runs cover them (usually one or two patterns).
    patterns, inverse = np.unique(avail.T, axis=0, return_inverse=True)
    for p_idx, pattern in enumerate(patterns):
        cols = np.flatnonzero(inverse.ravel() == p_idx)
        rows = np.flatnonzero(pattern)
        if rows.size == 0:
            continue
        sub = c[np.ix_(rows, cols)]  # (k, C)
        mean[cols] = sub.mean(axis=0)
        if rows.size == 1:
            low[cols] = high[cols] = sub[0]
            continue
        idx = rng.integers(0, rows.size, size=(n_resamples, rows.size))
        boot = sub[idx].mean(axis=1)  # (B, C)
        lo, hi = _percentile_interval(boot, confidence, axis=0)
        low[cols], high[cols] = lo, hi
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
