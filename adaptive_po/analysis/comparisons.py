"""The paper's comparisons over normalized runs: the aggregate IQM of each algorithm at each level
of a condition axis, and where the ESS objective wins, ties and loses against the best other one.
Every interval is a stratified bootstrap over envs (:mod:`adaptive_po.analysis.stats`)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from .labels import ESS_ALGO, order_algos
from .paper_data import per_env, seeds_text
from .stats import DEFAULT_RESAMPLES, iqm, iqm_ci, iqm_difference_ci

__all__ = ["iqm_by_level", "wins_ties_losses", "tau_grid"]


def iqm_by_level(
    df: pd.DataFrame, level_col: str, levels: Sequence | None = None, confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0, ess_algo: str = ESS_ALGO,
) -> pd.DataFrame:
    """Per algorithm and level of ``level_col``: aggregate IQM of ``score`` over all (env, seed)
    runs with a stratified bootstrap CI (strata = envs), and the run counts."""
    levels = list(levels) if levels is not None else sorted(df[level_col].unique())
    rows = []
    for algo in order_algos(df["algo"], ess_algo):
        ga = df[df["algo"] == algo]
        for lv in levels:
            g = ga[ga[level_col] == lv]
            if g.empty:
                continue
            ci = iqm_ci(per_env(g), confidence=confidence, n_resamples=n_resamples, seed=seed)
            rows.append(dict(algo=algo, level=lv, n_envs=g["env"].nunique(), n_runs=len(g),
                             seeds_per_env=seeds_text(g), iqm=ci.estimate, low=ci.low, high=ci.high))
    return pd.DataFrame(rows, columns=["algo", "level", "n_envs", "n_runs", "seeds_per_env", "iqm", "low", "high"])


def tau_grid(scores: np.ndarray, n: int = 101) -> np.ndarray:
    """The thresholds of a profile: from min(0, lowest score) to max(1.05, highest + 0.02)."""
    finite = scores[np.isfinite(scores)]
    lo = min(0.0, float(finite.min())) if finite.size else 0.0
    hi = max(1.05, float(finite.max()) + 0.02) if finite.size else 1.05
    return np.linspace(lo, hi, n)


def wins_ties_losses(
    df: pd.DataFrame, level_col: str, levels: Sequence, ess_algo: str = ESS_ALGO, confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
) -> pd.DataFrame:
    """Per level: the ESS objective vs the best other algorithm there (highest IQM): the IQM
    difference with its CI and the verdict (win: CI above 0; loss: below 0; tie: it covers 0)."""
    rows = []
    for lv in levels:
        g = df[df[level_col] == lv]
        mine = g[g["algo"] == ess_algo]
        others = g[g["algo"] != ess_algo]
        if mine.empty or others.empty:
            continue
        best, best_iqm = None, -math.inf
        for algo, go in others.groupby("algo", sort=True):
            v = iqm(go["score"].to_numpy(dtype=float))
            if v > best_iqm:
                best, best_iqm = algo, v
        d = iqm_difference_ci(per_env(mine), per_env(others[others["algo"] == best]), confidence, n_resamples, seed)
        verdict = "win" if d.low > 0 else "loss" if d.high < 0 else "tie"
        rows.append(dict(level=lv, best_other=best, ess_iqm=float(iqm(mine["score"].to_numpy(dtype=float))),
                         other_iqm=float(best_iqm), diff=d.estimate, low=d.low, high=d.high, verdict=verdict,
                         n_envs=len(set(mine["env"]) & set(others[others["algo"] == best]["env"]))))
    return pd.DataFrame(rows, columns=["level", "best_other", "ess_iqm", "other_iqm", "diff", "low", "high",
                                       "verdict", "n_envs"])
