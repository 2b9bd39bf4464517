"""Figures of the suite report (learning curves, staleness and action-noise ablations, ESS over
training) and of the paper report (aggregate IQM vs condition, staleness and mismatch level,
performance and tuning profiles, retuning cost).

Every function returns a matplotlib ``Figure`` (Agg backend) and leaves saving to the caller
(:func:`adaptive_po.analysis.output.save_figure` saves atomically). Colours are fixed per algorithm through one
palette (:func:`algo_colors`) shared by all figures, algorithms are drawn in the order of
:func:`adaptive_po.analysis.labels.order_algos`; legends sit below the axes, outside the data.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from adaptive_po.dials import DIAL_DEFAULTS  # noqa: E402

from .labels import (  # noqa: E402
    AXIS_LABELS,
    BASELINE_ALGO,
    ESS_ALGO,
    algo_legend,
    fmt_level,
    order_algos,
    pretty_condition,
)
from .load import CONDITION_KEYS, LoadedRuns  # noqa: E402
from .stats import (  # noqa: E402
    DEFAULT_RESAMPLES,
    NO_INTERVAL,
    bootstrap_ci,
    common_grid,
    interpolate_to_grid,
    mean_ci_over_runs,
    without_interval,
)

__all__ = [
    "algo_colors",
    "steps_formatter",
    "ablation_slice",
    "curve_band",
    "plot_learning_curves",
    "plot_staleness",
    "plot_noise",
    "plot_ess",
    "plot_iqm_levels",
    "plot_iqm_axes",
    "plot_profiles",
    "plot_retuning",
]

_LINESTYLES = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 2))]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]


def algo_colors(algos: Sequence[str], baseline: str = BASELINE_ALGO, ess_algo: str = ESS_ALGO) -> dict[str, tuple]:
    """One colour per algorithm (tab10, in the order of :func:`adaptive_po.analysis.labels.order_algos`), to be
    shared by every figure; the dict iterates in that order."""
    ordered = order_algos(algos, ess_algo, baseline)
    cmap = plt.get_cmap("tab10" if len(ordered) <= 10 else "tab20")
    return {a: cmap(i % cmap.N) for i, a in enumerate(ordered)}


def _fmt_steps(x: float, _pos=None) -> str:
    ax = abs(x)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if ax >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:.0f}"


steps_formatter = FuncFormatter(_fmt_steps)


def _steps_axis(ax) -> None:
    ax.xaxis.set_major_formatter(steps_formatter)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5, min_n_ticks=3))


#: condition keys whose baseline (default) is not their smallest value
_BASELINE_VALUES = {k: DIAL_DEFAULTS[k] for k in ("behaviour_log_prob", "sampler_temperature", "sampler_precision")}


def ablation_slice(finals: pd.DataFrame, vary: str | Sequence[str]) -> tuple[pd.DataFrame, str]:
    """Rows of ``finals`` where every condition key not in ``vary`` is at its baseline value
    (the smallest present for numbers, i.e. 0 when run; when present, ``"actual"`` for the
    behaviour log-prob, temperature 1 and ``"fp32"`` for the sampler), and a short description of
    the fixed values for titles."""
    vary = {vary} if isinstance(vary, str) else set(vary)
    df = finals
    fixed = []
    for key in CONDITION_KEYS:
        if key in vary:
            continue
        values = df[key].unique()
        if key in _BASELINE_VALUES:
            base = _BASELINE_VALUES[key]
            val = base if base in values else sorted(values)[0]
        else:
            val = min(values) if len(values) else 0
        df = df[df[key] == val]
        if key == "policy_lag":
            fixed.append(f"lag {int(val)}")
        elif key == "action_noise":
            fixed.append(f"noise {fmt_level(key, val)}")
        elif key == "replay":
            fixed.append(f"replay {int(val)}")
        elif val != _BASELINE_VALUES[key]:
            fixed.append(f"blp {val}" if key == "behaviour_log_prob" else
                         f"T={fmt_level(key, val)}" if key == "sampler_temperature" else str(val))
    return df, ", ".join(fixed)


def curve_band(
    frame: pd.DataFrame, value: str, grid: np.ndarray, confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
) -> dict[str, np.ndarray]:
    """Interpolate each run (grouped by ``run_dir``) of ``frame[value]`` onto ``grid`` and return
    the mean across runs with a bootstrap CI band (see :func:`adaptive_po.analysis.stats.mean_ci_over_runs`);
    no band (NaN) where one run covers a point."""
    curves = [
        interpolate_to_grid(g["timesteps"].to_numpy(), g[value].to_numpy(), grid)
        for _, g in frame.groupby("run_dir", sort=True)
    ]
    if not curves:
        empty = np.full(len(grid), np.nan)
        return {"mean": empty, "low": empty, "high": empty, "n": np.zeros(len(grid), int)}
    band = mean_ci_over_runs(np.vstack(curves), confidence=confidence, n_resamples=n_resamples, seed=seed)
    single = band["n"] < 2
    return {**band, "low": np.where(single, np.nan, band["low"]), "high": np.where(single, np.nan, band["high"])}


def _suptitle(fig, main: str, detail: str, wrap: bool = False) -> None:
    """The figure title: the subject, then the statistics shown (keeps narrow figures readable),
    with ``wrap`` wrapped to the figure's width."""
    if wrap:
        detail = textwrap.fill(detail, max(40, int(fig.get_figwidth() * 13)))
    fig.suptitle(f"{main}\n{detail}", fontsize=11)


def _legend_below(fig, handles, labels, title: str | None = None, ncol: int | None = None) -> None:
    ncol = ncol or min(len(labels), 8)
    fig.legend(handles, labels, loc="outside lower center", ncol=max(ncol, 1), title=title, frameon=False)


def _band_note(counts: Sequence[int], shown: str) -> str:
    """What a figure's intervals are: ``shown`` (e.g. ``mean over 5 seeds, 95% bootstrap CI band``),
    or that there are none where every line or point is one run."""
    return f"1 seed ({NO_INTERVAL})" if counts and max(counts) < 2 else shown


def _seed_note(counts: Sequence[int]) -> str:
    counts = sorted(set(int(c) for c in counts))
    if not counts:
        return ""
    if len(counts) == 1:
        return f"{counts[0]} seed" + ("s" if counts[0] != 1 else "")
    return f"{counts[0]}-{counts[-1]} seeds"


def plot_learning_curves(
    runs: LoadedRuns, env: str, colors: dict[str, tuple], confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0, max_points: int = 200,
):
    """Eval return vs environment steps for one env: one panel per condition (and per budget, where
    the env's runs hold several: runs of two budgets never share a band), one line per algorithm
    (mean over seeds, bootstrap CI band), all runs interpolated onto one step grid. Failed runs
    have no curve (they are scored in the tables)."""
    ev = runs.evals[runs.evals["env"] == env]
    if ev.empty:
        raise ValueError(f"no evaluation data for env {env!r}")
    grid = common_grid([g["timesteps"].to_numpy() for _, g in ev.groupby("run_dir")], max_points=max_points)
    budgets = ev["total_timesteps"].nunique() > 1 if "total_timesteps" in ev else False
    panel_keys = CONDITION_KEYS + (["total_timesteps"] if budgets else [])
    conds = sorted({tuple(r) for r in ev[panel_keys].itertuples(index=False)})
    ncols = min(3, len(conds))
    nrows = math.ceil(len(conds) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(max(4.3 * ncols, 6.0), 3.2 * nrows + 1.2), sharex=True, sharey=True,
        squeeze=False, layout="constrained",
    )
    algos_present: list[str] = []
    seed_counts = []
    for ax, cond in zip(axes.flat, conds):
        sel = ev
        for k, v in zip(panel_keys, cond):
            sel = sel[sel[k] == v]
        for algo in [a for a in colors if a in set(sel["algo"])]:
            g = sel[sel["algo"] == algo]
            band = curve_band(g, "return", grid, confidence, n_resamples, seed)
            seed_counts.append(g["run_dir"].nunique())
            c = colors[algo]
            ax.plot(grid, band["mean"], color=c, lw=1.8, label=algo)
            ax.fill_between(grid, band["low"], band["high"], color=c, alpha=0.2, lw=0)
            if algo not in algos_present:
                algos_present.append(algo)
        title = pretty_condition(*cond[:len(CONDITION_KEYS)])
        ax.set_title(title + (f" ({int(cond[-1]):,} steps)" if budgets else ""), fontsize=10)
        ax.grid(alpha=0.3)
        _steps_axis(ax)
    for ax in axes.flat[len(conds):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("eval return")
    for c_idx in range(ncols):
        # the lowest visible axis of each column carries the x label
        col_axes = [axes[r, c_idx] for r in range(nrows) if axes[r, c_idx].get_visible()]
        col_axes[-1].set_xlabel("environment steps")
        col_axes[-1].xaxis.set_tick_params(labelbottom=True)
    pct = round(confidence * 100)
    _suptitle(fig, f"{env}: evaluation return", _band_note(seed_counts, f"mean over {_seed_note(seed_counts)}, {pct}% bootstrap CI band"))
    handles = [Line2D([], [], color=colors[a], lw=2) for a in algos_present]
    _legend_below(fig, handles, algos_present, title="algorithm")
    return fig


def _ablation_figure(
    runs: LoadedRuns, vary: str, xlabel: str, colors: dict[str, tuple], title: str,
    confidence: float, n_resamples: int, seed: int | None,
):
    """Final return and AUC vs a condition key (categorical x), per env, one line per algorithm
    (and, for the noise ablation, one line style per lag that has several noise levels)."""
    envs = runs.envs
    fig, axes = plt.subplots(
        len(envs), 2, figsize=(10.5, 3.3 * len(envs) + 1.4), squeeze=False, layout="constrained",
    )
    pct = round(confidence * 100)
    style_keys: list = []  # (lag or None, budget or None): one line style each
    point_counts: list[int] = []  # runs behind each point
    algos_present: list[str] = []
    fixed_desc = set()
    # runs of two budgets never share a line: where an env holds several, one line style per budget
    by_budget = bool((runs.finals.groupby("env")["total_timesteps"].nunique() > 1).any())
    for r, env in enumerate(envs):
        f_env = runs.finals[runs.finals["env"] == env]
        if vary == "action_noise":
            # lines: algorithm x lag, for every lag run at several noise levels
            sub, desc = ablation_slice(f_env, (vary, "policy_lag"))
        else:
            sub, desc = ablation_slice(f_env, vary)
        fixed_desc.add(desc)
        levels = sorted(sub[vary].unique())
        xpos = {lv: i for i, lv in enumerate(levels)}
        lines = []
        for algo in [a for a in colors if a in set(sub["algo"])]:
            for budget, gb in sub[sub["algo"] == algo].groupby("total_timesteps", sort=True):
                budget = int(budget) if by_budget else None
                if vary == "action_noise":
                    for lag, gl in gb.groupby("policy_lag", sort=True):
                        if gl[vary].nunique() > 1 or len(levels) == 1:
                            lines.append((algo, (int(lag), budget), gl))
                else:
                    lines.append((algo, (None, budget), gb))
        n_lines = max(len(lines), 1)
        width = 0.5
        for li, (algo, style, g) in enumerate(lines):
            if style not in style_keys:
                style_keys.append(style)
            if algo not in algos_present:
                algos_present.append(algo)
            offset = (li - (n_lines - 1) / 2) * (width / n_lines) if n_lines > 1 else 0.0
            ls = _LINESTYLES[style_keys.index(style) % len(_LINESTYLES)]
            mk = _MARKERS[style_keys.index(style) % len(_MARKERS)]
            for c_idx, metric in enumerate(("final_eval_return_mean", "auc")):
                xs, ys, lo, hi = [], [], [], []
                for lv, gl in g.groupby(vary, sort=True):
                    values = gl[metric].to_numpy()
                    ci = without_interval(bootstrap_ci(values, np.mean, confidence=confidence,
                                                       n_resamples=n_resamples, seed=seed), values)
                    if metric == "auc":
                        point_counts.append(len(values))
                    xs.append(xpos[lv] + offset)
                    ys.append(ci.estimate)
                    lo.append(ci.estimate - ci.low)
                    hi.append(ci.high - ci.estimate)
                axes[r, c_idx].errorbar(
                    xs, ys, yerr=[lo, hi], color=colors[algo], ls=ls, marker=mk, ms=5, lw=1.6,
                    capsize=3, elinewidth=1.1,
                )
        for c_idx, what in enumerate(("final eval return", "AUC: mean eval return over training")):
            ax = axes[r, c_idx]
            ax.set_xticks(range(len(levels)), [fmt_level(vary, v) for v in levels])
            ax.set_xlim(-0.5, len(levels) - 0.5)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("eval return")
            ax.set_title(f"{env}: {what}", fontsize=10)
            ax.grid(alpha=0.3, axis="y")
    fixed = "; ".join(sorted(d for d in fixed_desc if d))
    _suptitle(fig, title, _band_note(point_counts, f"mean over seeds, {pct}% bootstrap CI") + (f"; {fixed}" if fixed else ""))
    handles = [Line2D([], [], color=colors[a], lw=2, marker="o") for a in algos_present]
    labels = list(algos_present)
    if any(k != (None, None) for k in style_keys):
        for k in style_keys:
            handles.append(Line2D([], [], color="0.3", lw=1.6, ls=_LINESTYLES[style_keys.index(k) % len(_LINESTYLES)],
                                  marker=_MARKERS[style_keys.index(k) % len(_MARKERS)]))
            lag, budget = k
            labels.append(", ".join(([f"lag {lag}"] if lag is not None else [])
                                    + ([f"{budget:,} steps"] if budget is not None else [])))
    _legend_below(fig, handles, labels, ncol=min(len(labels), 6))
    return fig


def plot_staleness(
    runs: LoadedRuns, colors: dict[str, tuple], confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
):
    """Final return and AUC vs policy lag (categorical axis), per env, one line per algorithm,
    with bootstrap CI error bars; noise/replay fixed at their baseline values."""
    return _ablation_figure(runs, "policy_lag", "policy lag k (updates behind; categorical axis)", colors,
                            "Staleness ablation", confidence, n_resamples, seed)


def plot_noise(
    runs: LoadedRuns, colors: dict[str, tuple], confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
):
    """Final return and AUC vs action noise sigma (categorical axis), per env, one line per
    algorithm (line style per lag when several lags were run at several noise levels)."""
    return _ablation_figure(runs, "action_noise", "action noise sigma (categorical axis)", colors,
                            "Action-noise ablation", confidence, n_resamples, seed)


def plot_ess(
    runs: LoadedRuns, colors: dict[str, tuple], confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0, max_points: int = 200,
):
    """Normalized ESS (``ess`` of progress.csv) over training: one panel per env x algorithm,
    one line per policy lag (and line style per budget, where an env holds several: runs of two
    budgets never share a band; mean over seeds, bootstrap CI band), noise/replay at baseline.
    Failed runs have no progress rows and no line."""
    envs = runs.envs
    algos = [a for a in colors if a in set(runs.finals["algo"])]
    fixed_finals, desc = ablation_slice(runs.finals, "policy_lag")
    keep = set(fixed_finals["run_dir"])
    pr = runs.progress[runs.progress["run_dir"].isin(keep)]
    lags = sorted(pr["policy_lag"].unique())
    cmap = plt.get_cmap("viridis")
    line_counts: list[int] = []
    lag_colors = {lag: cmap(0.0 if len(lags) == 1 else 0.85 * i / (len(lags) - 1)) for i, lag in enumerate(lags)}
    fig, axes = plt.subplots(
        len(envs), len(algos), figsize=(max(3.9 * len(algos), 6.0), 3.0 * len(envs) + 1.3), squeeze=False,
        sharey=True, sharex="row", layout="constrained",
    )
    for r, env in enumerate(envs):
        p_env = pr[pr["env"] == env]
        grid = common_grid([g["timesteps"].to_numpy() for _, g in p_env.groupby("run_dir")], max_points=max_points)
        for c, algo in enumerate(algos):
            ax = axes[r, c]
            g_algo = p_env[p_env["algo"] == algo]
            budgets = sorted(p_env["total_timesteps"].unique())
            for lag in lags:
                for b, budget in enumerate(budgets):
                    g = g_algo[(g_algo["policy_lag"] == lag) & (g_algo["total_timesteps"] == budget)]
                    if g.empty:
                        continue
                    band = curve_band(g, "ess", grid, confidence, n_resamples, seed)
                    line_counts.append(g["run_dir"].nunique())
                    ax.plot(grid, band["mean"], color=lag_colors[lag], lw=1.6, ls=_LINESTYLES[b % len(_LINESTYLES)])
                    ax.fill_between(grid, band["low"], band["high"], color=lag_colors[lag], alpha=0.2, lw=0)
            ax.set_title(f"{env}: {algo}", fontsize=10, color=colors[algo], fontweight="bold")
            ax.set_ylim(0, 1.05)
            ax.grid(alpha=0.3)
            _steps_axis(ax)
            if r == len(envs) - 1:
                ax.set_xlabel("environment steps")
            if c == 0:
                ax.set_ylabel("normalized ESS (mean per update)")
    pct = round(confidence * 100)
    _suptitle(fig, "Effective sample size of the policy ratios over training",
              _band_note(line_counts, f"mean over seeds, {pct}% bootstrap CI band") + (f"; {desc}" if desc else ""))
    handles = [Line2D([], [], color=lag_colors[lag], lw=2) for lag in lags]
    labels = [f"lag {int(lag)}" for lag in lags]
    if (pr.groupby("env")["total_timesteps"].nunique() > 1).any():  # line styles: the budgets of each env
        for env, budgets in pr.groupby("env", sort=True)["total_timesteps"].unique().items():
            for b, budget in enumerate(sorted(budgets)):
                handles.append(Line2D([], [], color="0.3", lw=1.6, ls=_LINESTYLES[b % len(_LINESTYLES)]))
                labels.append(f"{env} {int(budget):,} steps")
    _legend_below(fig, handles, labels, title="policy lag k")
    return fig


# --------------------------------------------------------------------------------------------
# the paper's figures (normalized scores over several suites)


def _style(algo: str, ess_algo: str) -> dict:
    if algo == ess_algo:
        return dict(lw=3.2, ms=8, zorder=10, alpha=1.0, band=0.28)
    return dict(lw=1.5, ms=5, zorder=3, alpha=0.85, band=0.10)


def _algo_legend(fig, algos, colors, ess_algo, ncol=None) -> None:
    """A legend below the axes: one line and marker per algorithm, styled as drawn."""
    handles = [Line2D([], [], color=colors[a], lw=_style(a, ess_algo)["lw"], marker="o",
                      ms=_style(a, ess_algo)["ms"] * 0.8) for a in algos]
    labels = [algo_legend(a, ess_algo) for a in algos]
    _legend_below(fig, handles, labels, ncol=ncol or min(len(labels), 6))


def _lines_vs_level(ax, table: pd.DataFrame, levels: Sequence, colors, ess_algo: str) -> list[str]:
    xpos = {lv: i for i, lv in enumerate(levels)}
    drawn = []
    for algo in order_algos(table["algo"], ess_algo):
        t = table[table["algo"] == algo]
        t = t.assign(x=t["level"].map(xpos)).sort_values("x")
        st = _style(algo, ess_algo)
        ax.plot(t["x"], t["iqm"], color=colors[algo], lw=st["lw"], marker="o", ms=st["ms"], zorder=st["zorder"],
                alpha=st["alpha"])
        ax.fill_between(t["x"], t["low"], t["high"], color=colors[algo], alpha=st["band"], lw=0, zorder=st["zorder"] - 1)
        drawn.append(algo)
    ax.set_xticks(range(len(levels)))
    ax.set_xlim(-0.3, len(levels) - 0.7)
    ax.axhline(1.0, color="0.5", lw=0.8, ls=":")
    ax.axhline(0.0, color="0.5", lw=0.8, ls=":")
    ax.grid(alpha=0.3, axis="y")
    return drawn


def plot_iqm_levels(
    table: pd.DataFrame, levels: Sequence, tick_labels: Sequence[str], xlabel: str, title: str, detail: str,
    colors: Mapping[str, Any], ess_algo: str = ESS_ALGO,
):
    """IQM normalized score vs a categorical x (one line per algorithm, CI band)."""
    fig, ax = plt.subplots(figsize=(max(6.5, 1.6 * len(levels) + 2.5), 5.2), layout="constrained")
    drawn = _lines_vs_level(ax, table, levels, colors, ess_algo)
    ax.set_xticklabels(tick_labels, rotation=0 if max(len(t) for t in tick_labels) < 12 else 15)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("IQM normalized final score\n(0 = random, 1 = solved threshold)")
    _suptitle(fig, title, detail, wrap=True)
    _algo_legend(fig, drawn, colors, ess_algo)
    return fig


def plot_iqm_axes(panels: Sequence[tuple[str, pd.DataFrame, list]], colors, detail: str, ess_algo: str = ESS_ALGO):
    """One panel per condition axis: IQM vs that axis's levels, the other axes at fresh values."""
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(max(5.0 * n, 6.5), 5.0), squeeze=False, sharey=True, layout="constrained")
    drawn: list[str] = []
    for ax, (axis, table, levels) in zip(axes.flat, panels):
        for a in _lines_vs_level(ax, table, levels, colors, ess_algo):
            if a not in drawn:
                drawn.append(a)
        ax.set_xticklabels([fmt_level(axis, lv) for lv in levels])
        ax.set_xlabel(AXIS_LABELS.get(axis, axis))
    axes[0, 0].set_ylabel("IQM normalized final score")
    _suptitle(fig, "Aggregate IQM vs mismatch level", detail, wrap=True)
    _algo_legend(fig, order_algos(drawn, ess_algo), colors, ess_algo)
    return fig


def plot_profiles(panels: Sequence[tuple[str, dict[str, dict]]], colors, ylabel: str, title: str, detail: str,
                  ess_algo: str = ESS_ALGO):
    """One panel per condition: fraction above tau vs tau, one line per algorithm with a CI band."""
    n = len(panels)
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols + 0.6, 3.6 * nrows + 1.3), squeeze=False,
                             sharex=True, sharey=True, layout="constrained")
    drawn: list[str] = []
    for ax, (label, curves) in zip(axes.flat, panels):
        for algo in order_algos(curves, ess_algo):
            p = curves[algo]
            st = _style(algo, ess_algo)
            ax.plot(p["tau"], p["fraction"], color=colors[algo], lw=st["lw"] * 0.8, zorder=st["zorder"], alpha=st["alpha"])
            ax.fill_between(p["tau"], p["low"], p["high"], color=colors[algo], alpha=st["band"], lw=0)
            if algo not in drawn:
                drawn.append(algo)
        ax.axvline(1.0, color="0.5", lw=0.8, ls=":")
        ax.set_title(label, fontsize=10)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    for c in range(ncols):
        col = [axes[r, c] for r in range(nrows) if axes[r, c].get_visible()]
        col[-1].set_xlabel("normalized score tau")
        col[-1].xaxis.set_tick_params(labelbottom=True)
    _suptitle(fig, title, detail, wrap=True)
    _algo_legend(fig, order_algos(drawn, ess_algo), colors, ess_algo)
    return fig


def plot_retuning(cost: pd.DataFrame, colors, detail: str, ess_algo: str = ESS_ALGO):
    """Left: retuning cost (best at the condition - fresh-best config at the condition) with CIs.
    Right: the two scores (hollow: fresh-best configuration; filled: the condition's best)."""
    labels = list(dict.fromkeys(cost["cond_label"]))
    algos = order_algos(cost["base_algo"], ess_algo)
    xpos = {lb: i for i, lb in enumerate(labels)}
    width = 0.7
    fig, axes = plt.subplots(1, 2, figsize=(max(11.0, 2.6 * len(labels) * 2), 5.0), layout="constrained")
    for k, algo in enumerate(algos):
        t = cost[cost["base_algo"] == algo]
        off = (k - (len(algos) - 1) / 2) * width / max(len(algos), 1)
        x = t["cond_label"].map(xpos).to_numpy(float) + off
        st = _style(algo, ess_algo)
        axes[0].errorbar(x, t["cost"], yerr=[t["cost"] - t["cost_low"], t["cost_high"] - t["cost"]], fmt="o",
                         color=colors[algo], ms=st["ms"], elinewidth=st["lw"] * 0.7, capsize=3, zorder=st["zorder"])
        axes[1].errorbar(x - 0.04, t["fresh_best_score"], yerr=[t["fresh_best_score"] - t["fresh_best_low"],
                         t["fresh_best_high"] - t["fresh_best_score"]], fmt="o", mfc="white", color=colors[algo],
                         ms=st["ms"], capsize=2, zorder=st["zorder"])
        axes[1].errorbar(x + 0.04, t["best_score"], yerr=[t["best_score"] - t["best_low"], t["best_high"] - t["best_score"]],
                         fmt="o", color=colors[algo], ms=st["ms"], capsize=2, zorder=st["zorder"])
    for ax in axes:
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlim(-0.6, len(labels) - 0.4)
        ax.grid(alpha=0.3, axis="y")
        ax.set_xlabel("data condition")
    axes[0].axhline(0, color="0.4", lw=0.8)
    axes[0].set_ylabel("retuning cost (normalized score)")
    axes[0].set_title("best configuration at the condition minus\nthe configuration that was best on fresh data", fontsize=10)
    axes[1].set_ylabel("mean normalized score")
    axes[1].set_title("hollow: fresh-best configuration; filled: the condition's best", fontsize=10)
    _suptitle(fig, "Retuning cost", detail, wrap=True)
    _algo_legend(fig, algos, colors, ess_algo)
    return fig


def lag_axes(ax, lags: Sequence[int], title: str) -> None:
    """A panel of normalized score against policy lag: ticks at log2(1 + lag) labelled by the lag,
    the axes' labels, the title and a light grid."""
    ax.set_xticks([math.log2(1 + lag) for lag in lags], [str(lag) for lag in lags])
    ax.set_xlabel("policy lag (updates), log2(1 + lag) scale")
    ax.set_ylabel("normalized score")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)


def finish_panels(fig, axes, used: int, title: str, ncol: int = 3, top: float = 0.3) -> None:
    """The panels after the first ``used`` turned off, one legend below them (each label once, in
    the order first drawn), the title above, and the layout that leaves room for both."""
    for ax in list(axes.flat)[used:]:
        ax.axis("off")
    seen: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=ncol, fontsize=7.5, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, (0.25 + 0.16 * math.ceil(len(seen) / ncol)) / fig.get_figheight(), 1, 1 - top / fig.get_figheight()))
