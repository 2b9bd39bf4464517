"""Figures: learning curves, staleness (policy lag) and action-noise ablations, ESS over training.

Every function returns a matplotlib ``Figure`` (Agg backend) and leaves saving to the caller
(:func:`analysis.report.make_report` saves them atomically). Colours are fixed per algorithm
through one palette (:func:`algo_colors`) shared by all figures; legends sit below the axes,
outside the data.
"""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from .load import CONDITION_KEYS, LoadedRuns, pretty_condition  # noqa: E402
from .stats import DEFAULT_RESAMPLES, bootstrap_ci, common_grid, interpolate_to_grid, mean_ci_over_runs  # noqa: E402

__all__ = [
    "algo_colors",
    "steps_formatter",
    "ablation_slice",
    "curve_band",
    "plot_learning_curves",
    "plot_staleness",
    "plot_noise",
    "plot_ess",
]

_LINESTYLES = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 2))]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]


def algo_colors(algos: Sequence[str], baseline: str = "ppo") -> dict[str, tuple]:
    """One colour per algorithm (tab10, baseline first), to be shared by every figure."""
    algos = sorted(set(algos))
    ordered = ([baseline] if baseline in algos else []) + [a for a in algos if a != baseline]
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


def _fmt_level(v: float) -> str:
    return format(float(v), "g")


#: condition keys whose baseline is not their smallest value
_BASELINE_VALUES = {"behaviour_log_prob": "actual", "sampler_temperature": 1.0, "sampler_precision": "fp32"}


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
            fixed.append(f"noise {_fmt_level(val)}")
        elif key == "replay":
            fixed.append(f"replay {int(val)}")
        elif val != _BASELINE_VALUES[key]:
            fixed.append(f"blp {val}" if key == "behaviour_log_prob" else
                         f"T={_fmt_level(val)}" if key == "sampler_temperature" else str(val))
    return df, ", ".join(fixed)


def curve_band(
    frame: pd.DataFrame, value: str, grid: np.ndarray, confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
) -> dict[str, np.ndarray]:
    """Interpolate each run (grouped by ``run_dir``) of ``frame[value]`` onto ``grid`` and return
    the mean across runs with a bootstrap CI band (see :func:`analysis.stats.mean_ci_over_runs`)."""
    curves = [
        interpolate_to_grid(g["timesteps"].to_numpy(), g[value].to_numpy(), grid)
        for _, g in frame.groupby("run_dir", sort=True)
    ]
    if not curves:
        empty = np.full(len(grid), np.nan)
        return {"mean": empty, "low": empty, "high": empty, "n": np.zeros(len(grid), int)}
    return mean_ci_over_runs(np.vstack(curves), confidence=confidence, n_resamples=n_resamples, seed=seed)


def _suptitle(fig, main: str, detail: str) -> None:
    """A two-line figure title: the subject, then the statistics shown (keeps narrow figures readable)."""
    fig.suptitle(f"{main}\n{detail}", fontsize=11)


def _legend_below(fig, handles, labels, title: str | None = None, ncol: int | None = None) -> None:
    ncol = ncol or min(len(labels), 8)
    fig.legend(handles, labels, loc="outside lower center", ncol=max(ncol, 1), title=title, frameon=False)


def _conditions(df: pd.DataFrame) -> list[tuple]:
    return sorted({tuple(r) for r in df[CONDITION_KEYS].itertuples(index=False)})


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
    """Eval return vs environment steps for one env: one panel per condition, one line per
    algorithm (mean over seeds, bootstrap CI band), all runs interpolated onto one step grid."""
    ev = runs.evals[runs.evals["env"] == env]
    if ev.empty:
        raise ValueError(f"no evaluation data for env {env!r}")
    grid = common_grid([g["timesteps"].to_numpy() for _, g in ev.groupby("run_dir")], max_points=max_points)
    conds = _conditions(ev)
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
        for k, v in zip(CONDITION_KEYS, cond):
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
        ax.set_title(pretty_condition(*cond), fontsize=10)
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
    _suptitle(fig, f"{env}: evaluation return", f"mean over {_seed_note(seed_counts)}, {pct}% bootstrap CI band")
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
    style_keys: list = []
    algos_present: list[str] = []
    fixed_desc = set()
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
            ga = sub[sub["algo"] == algo]
            if vary == "action_noise":
                for lag, gl in ga.groupby("policy_lag", sort=True):
                    if gl[vary].nunique() > 1 or len(levels) == 1:
                        lines.append((algo, int(lag), gl))
            else:
                lines.append((algo, None, ga))
        n_lines = max(len(lines), 1)
        width = 0.5
        for li, (algo, lag, g) in enumerate(lines):
            if lag not in style_keys:
                style_keys.append(lag)
            if algo not in algos_present:
                algos_present.append(algo)
            offset = (li - (n_lines - 1) / 2) * (width / n_lines) if n_lines > 1 else 0.0
            ls = _LINESTYLES[style_keys.index(lag) % len(_LINESTYLES)]
            mk = _MARKERS[style_keys.index(lag) % len(_MARKERS)]
            for c_idx, metric in enumerate(("final_eval_return_mean", "auc")):
                xs, ys, lo, hi = [], [], [], []
                for lv, gl in g.groupby(vary, sort=True):
                    ci = bootstrap_ci(gl[metric].to_numpy(), np.mean, confidence=confidence,
                                      n_resamples=n_resamples, seed=seed)
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
            ax.set_xticks(range(len(levels)), [_fmt_level(v) for v in levels])
            ax.set_xlim(-0.5, len(levels) - 0.5)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("eval return")
            ax.set_title(f"{env}: {what}", fontsize=10)
            ax.grid(alpha=0.3, axis="y")
    fixed = "; ".join(sorted(d for d in fixed_desc if d))
    _suptitle(fig, title, f"mean over seeds, {pct}% bootstrap CI{'; ' + fixed if fixed else ''}")
    handles = [Line2D([], [], color=colors[a], lw=2, marker="o") for a in algos_present]
    labels = list(algos_present)
    if vary == "action_noise" and any(k is not None for k in style_keys):
        for k in style_keys:
            handles.append(Line2D([], [], color="0.3", lw=1.6, ls=_LINESTYLES[style_keys.index(k) % len(_LINESTYLES)],
                                  marker=_MARKERS[style_keys.index(k) % len(_MARKERS)]))
            labels.append(f"lag {k}")
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
    one line per policy lag (mean over seeds, bootstrap CI band), noise/replay at baseline."""
    envs = runs.envs
    algos = [a for a in colors if a in set(runs.finals["algo"])]
    fixed_finals, desc = ablation_slice(runs.finals, "policy_lag")
    keep = set(fixed_finals["run_dir"])
    pr = runs.progress[runs.progress["run_dir"].isin(keep)]
    lags = sorted(pr["policy_lag"].unique())
    cmap = plt.get_cmap("viridis")
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
            for lag in lags:
                g = g_algo[g_algo["policy_lag"] == lag]
                if g.empty:
                    continue
                band = curve_band(g, "ess", grid, confidence, n_resamples, seed)
                ax.plot(grid, band["mean"], color=lag_colors[lag], lw=1.6)
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
              f"mean over seeds, {pct}% bootstrap CI band{'; ' + desc if desc else ''}")
    handles = [Line2D([], [], color=lag_colors[lag], lw=2) for lag in lags]
    _legend_below(fig, handles, [f"lag {int(lag)}" for lag in lags], title="policy lag k")
    return fig
