"""The verdict rule the reports used until the calibrated tests, kept only to list in each report
what the new rule changed: a per-task difference is a win or a loss when its 95% percentile
bootstrap CI (each arm's runs resampled independently) excludes 0, else a tie; an aggregate is a
verdict when the stratified bootstrap CIs of the mean of per-task normalized means and of the IQM
difference agree, over the tasks where not every arm of the suite is saturated.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .stats import bootstrap, iqm_difference_ci, mean_of_task_means, normalize_score, without_interval

SATURATED = 0.95


def _word(low: float, high: float) -> str:
    if not (np.isfinite(low) and np.isfinite(high)):
        return "n = 1, no verdict"
    return "win" if low > 0 else "loss" if high < 0 else "tie"


def task_verdict(x: np.ndarray, base: np.ndarray, seed: int = 0) -> str:
    ci = without_interval(bootstrap([x, base], lambda s: s[0].mean(axis=-1) - s[1].mean(axis=-1), seed=seed).ci, x, base)
    return _word(ci.low, ci.high)


def aggregate_verdict(table: pd.DataFrame, tasks: pd.DataFrame, baseline: str, condition: str, algo: str, seed: int = 0) -> str:
    cond = table[table["condition"] == condition]
    score = normalize_score(cond["final_eval_return"].to_numpy(float), cond["random_score"].to_numpy(float), cond["solved_threshold"].to_numpy(float))
    cond = cond.assign(score=score)
    means = cond.groupby(["env", "algo"])["score"].mean()
    envs = [e for e in sorted(cond["env"].unique()) if not all(means[e] >= SATURATED)]
    runs = {(e, a): c["score"].to_numpy() for (e, a), c in cond.groupby(["env", "algo"])}
    envs = [e for e in envs if (e, algo) in runs and (e, baseline) in runs]
    if not envs:
        return ""
    arm, base = {e: runs[(e, algo)] for e in envs}, {e: runs[(e, baseline)] for e in envs}
    a, b, k = list(arm.values()), list(base.values()), len(envs)
    m = without_interval(bootstrap(a + b, lambda s: mean_of_task_means(s[:k]) - mean_of_task_means(s[k:]), seed=seed).ci, a, b)
    i = without_interval(iqm_difference_ci(arm, base, seed=seed), a, b)
    first, second = _word(m.low, m.high), _word(i.low, i.high)
    return first if first == second else "depends on aggregation"
