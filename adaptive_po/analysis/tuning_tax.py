"""The tuning tax: how much each algorithm's score depends on its knobs, and what keeping the
configuration that was best on fresh data costs under stale or mismatched data.

A *configuration* is one knob setting of an algorithm (a variant; ``""`` = the tuned defaults).
Its score under a condition is the mean over envs of its mean normalized score over seeds
(:func:`adaptive_po.analysis.stats.mean_of_task_means`). Every interval comes from one bootstrap per
algorithm and condition (:func:`adaptive_po.analysis.stats.bootstrap`): seeds resampled within each env,
independently for each configuration; the best, median and worst configuration and the tuning
profile are functions of the same resamples (:meth:`adaptive_po.analysis.stats.Bootstrap.map`).

A failed run (``FAILED``) is a run of its configuration scored at the random score (normalized
0, see :mod:`adaptive_po.analysis.load`): a configuration that failed is scored with its failures, so no env
is dropped from a cell because one configuration failed there. An env is dropped from a cell only
where a configuration has no run at all (named in :attr:`TuningCell.dropped_envs`). The runs of a
cell must share one budget per env (:func:`adaptive_po.analysis.paper_data.one_budget_per_env`): two budgets
of one env and configuration are refused, never averaged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .conditions import FRESH, NamedCondition
from .labels import condition_label, config_name
from .load import CONDITION_KEYS
from .stats import CI, DEFAULT_RESAMPLES, Bootstrap, bootstrap, mean_of_task_means

__all__ = ["TuningCell", "config_scores", "tuning_spread", "tuning_profile", "paired_difference_ci", "retuning_cost"]


@dataclass
class TuningCell:
    """One base algorithm under one condition: its configurations' scores and their bootstrap."""

    base_algo: str
    condition: str
    cond_label: str
    configs: list[str]  # variants ("" = default knobs)
    result: Bootstrap  # of the (configs,) scores: mean over envs of the mean over seeds
    envs: list[str]
    seeds: dict[str, dict[str, pd.Series]]  # variant -> env -> scores indexed by seed
    dropped_envs: list[str] = field(default_factory=list)
    failed: dict[str, dict[str, int]] = field(default_factory=dict)  # variant -> env -> failed runs (scored 0)

    @property
    def scores(self) -> np.ndarray:
        """(configs,) each configuration's score."""
        return self.result.estimate

    def config_ci(self, k: int, confidence: float | None = None) -> CI:
        """The score of configuration ``k`` with its interval."""
        return self.result.map(lambda s: s[..., k], confidence).ci


def config_scores(
    df: pd.DataFrame, n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0, confidence: float = 0.95,
) -> list[TuningCell]:
    """For each base algorithm and condition of ``df`` (normalized runs with variants): each
    configuration's score, the mean over envs of its mean normalized score over seeds, with
    one bootstrap of them all (seeds resampled within each env, independently per configuration).
    Failed runs (``failed`` True) count at their score (the random score, 0). Only the envs every
    configuration of the cell has a run in are used. Raises ``ValueError`` where an env of a cell
    holds several budgets (``total_timesteps``): select one per env first."""
    cells = []
    for (base, cond), g in df.groupby(["base_algo", "condition"], sort=True):
        if "total_timesteps" in g:
            budgets = g.groupby("env")["total_timesteps"].nunique()
            if (budgets > 1).any():
                env = budgets[budgets > 1].index[0]
                tt = sorted(int(t) for t in g.loc[g["env"] == env, "total_timesteps"].unique())
                raise ValueError(
                    f"tuning cell {base} at {cond}: {env} has runs at budgets {', '.join(f'{t:,}' for t in tt)}; "
                    "select one budget per env first (adaptive_po.analysis.paper_data.one_budget_per_env)")
        configs = sorted(g["variant"].unique(), key=lambda v: (v != "", v))
        env_sets = [set(g[g["variant"] == v]["env"]) for v in configs]
        envs = sorted(set.intersection(*env_sets))
        dropped = sorted(set.union(*env_sets) - set(envs))
        if not envs:
            continue
        strata, seeds, failed = [], {}, {}
        for v in configs:
            gv = g[(g["variant"] == v) & g["env"].isin(envs)]
            by_env = {e: ge.set_index("seed")["score"].astype(float) for e, ge in gv.groupby("env", sort=True)}
            seeds[v] = by_env
            failed[v] = ({e: int(n) for e, n in gv.groupby("env", sort=True)["failed"].sum().items() if n}
                         if "failed" in gv else {})
            strata += [s.to_numpy() for s in by_env.values()]
        k = len(envs)

        def per_config(strata, n=len(configs), k=k):
            return np.stack([mean_of_task_means(strata[i * k:(i + 1) * k]) for i in range(n)], axis=-1)

        result = bootstrap(strata, per_config, n_resamples=n_resamples, confidence=confidence, seed=seed)
        values = dict(zip(CONDITION_KEYS, g[CONDITION_KEYS].iloc[0]))
        cells.append(TuningCell(base, cond, condition_label(values), configs, result, envs, seeds, dropped, failed))
    return cells


def tuning_spread(cells: Sequence[TuningCell], confidence: float = 0.95) -> pd.DataFrame:
    """Per base algorithm and condition: the best, median and worst configuration (by score) and
    the bootstrap CIs of the max, median and min over configurations."""
    rows = []
    for c in cells:
        order = np.argsort(-c.scores, kind="stable")
        n = len(c.configs)
        mid = [order[(n - 1) // 2]] if n % 2 else [order[n // 2 - 1], order[n // 2]]
        best = c.result.map(lambda s: np.max(s, axis=-1), confidence).ci
        med = c.result.map(lambda s: np.median(s, axis=-1), confidence).ci
        worst = c.result.map(lambda s: np.min(s, axis=-1), confidence).ci
        nseeds = sorted({len(s) for per_env in c.seeds.values() for s in per_env.values()})
        rows.append(dict(
            base_algo=c.base_algo, condition=c.condition, cond_label=c.cond_label, n_configs=n,
            n_envs=len(c.envs), seeds_per_env=str(nseeds[0]) if len(nseeds) == 1 else f"{nseeds[0]}-{nseeds[-1]}",
            best_config=config_name(c.configs[order[0]]), best=best.estimate, best_low=best.low, best_high=best.high,
            median_config=" / ".join(config_name(c.configs[i]) for i in mid),
            median=med.estimate, median_low=med.low, median_high=med.high,
            worst_config=config_name(c.configs[order[-1]]), worst=worst.estimate, worst_low=worst.low,
            worst_high=worst.high, spread=best.estimate - worst.estimate,
        ))
    return pd.DataFrame(rows)


def tuning_profile(cell: TuningCell, taus: Sequence[float], confidence: float = 0.95) -> dict[str, np.ndarray]:
    """Fraction of the cell's configurations whose score exceeds each ``tau``, with a bootstrap band."""
    taus = np.asarray(taus, dtype=float)
    res = cell.result.map(lambda s: (s[..., :, None] > taus).mean(axis=-2), confidence)
    return {"tau": taus, "fraction": res.estimate, "low": res.low, "high": res.high}


def paired_difference_ci(
    a: Mapping[str, pd.Series], b: Mapping[str, pd.Series], confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
) -> CI:
    """Mean over envs of (mean a - mean b), with a bootstrap CI that resamples seeds within each
    env, the same seeds for a and b (paired: the per-seed differences are one stratum; a and b
    resampled independently in an env where they share no seed). ``a`` and ``b``: env -> scores
    indexed by seed."""
    strata, parts = [], []
    for e in a:
        common = sorted(set(a[e].index) & set(b[e].index))
        if common:
            parts.append((len(strata),))
            strata.append((a[e].loc[common] - b[e].loc[common]).to_numpy(dtype=float))
        else:
            parts.append((len(strata), len(strata) + 1))
            strata += [a[e].to_numpy(float), b[e].to_numpy(float)]

    def mean_difference(s):
        return np.mean([s[p[0]].mean(axis=-1) if len(p) == 1 else s[p[0]].mean(axis=-1) - s[p[1]].mean(axis=-1)
                        for p in parts], axis=0)

    # the estimate uses every seed of each arm, the interval the paired seeds
    estimate = float(np.mean([a[e].mean() - b[e].mean() for e in a]))
    return bootstrap(strata, mean_difference, n_resamples=n_resamples, confidence=confidence, seed=seed,
                     estimate=estimate).ci


def retuning_cost(
    cells: Sequence[TuningCell], confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
) -> pd.DataFrame:
    """Per base algorithm and non-fresh condition: the score of the configuration that was best
    on fresh data, the score of that condition's best configuration, and the retuning cost (their
    difference, >= 0) with a paired bootstrap CI (seeds resampled within each env)."""
    fresh = NamedCondition("fresh", FRESH)
    rows = []
    by_algo: dict[str, list[TuningCell]] = {}
    for c in cells:
        by_algo.setdefault(c.base_algo, []).append(c)
    for base, group in by_algo.items():
        f = [c for c in group if c.cond_label == fresh.label]
        if not f:
            continue
        fresh_best = f[0].configs[int(np.argmax(f[0].scores))]
        for c in group:
            if c is f[0] or fresh_best not in c.configs:
                continue
            i_fb = c.configs.index(fresh_best)
            i_b = int(np.argmax(c.scores))
            fb = c.config_ci(i_fb, confidence)
            b = c.config_ci(i_b, confidence)
            if i_b == i_fb:
                cost = CI(0.0, 0.0, 0.0)
            else:
                cost = paired_difference_ci(c.seeds[c.configs[i_b]], c.seeds[fresh_best], confidence, n_resamples, seed)
            rows.append(dict(
                base_algo=base, condition=c.condition, cond_label=c.cond_label, n_envs=len(c.envs),
                fresh_best_config=config_name(fresh_best), fresh_best_score=fb.estimate,
                fresh_best_low=fb.low, fresh_best_high=fb.high,
                best_config=config_name(c.configs[i_b]), best_score=b.estimate, best_low=b.low, best_high=b.high,
                cost=cost.estimate, cost_low=cost.low, cost_high=cost.high,
            ))
    return pd.DataFrame(rows, columns=[
        "base_algo", "condition", "cond_label", "n_envs", "fresh_best_config", "fresh_best_score", "fresh_best_low",
        "fresh_best_high", "best_config", "best_score", "best_low", "best_high", "cost", "cost_low", "cost_high"])
