"""The paper's analysis: the ESS objective vs tuned objectives under stale and mismatched data.

``python -m analysis.paper RUNS_ROOT [RUNS_ROOT ...] --out DIR`` (see :func:`main`) reads one or
more suite roots (e.g. ``runs/paper runs/sensitivity runs/staleness``) and writes into ``DIR``:

* ``report.md``: every table below with its CIs and run counts, the normalization references and
  a list of the conditions where the ESS objective wins, ties and loses;
* ``iqm_conditions.png``: aggregate IQM of the normalized final score vs the headline data
  conditions (:data:`HEADLINE_CONDITIONS`), one line per algorithm (default knobs) with a CI band;
* ``iqm_staleness.png``: the same vs policy lag, from the roots that hold a lag sweep;
* ``iqm_mismatch.png``: the same vs every other condition axis that varies (temperature,
  precision, ...), one panel per axis;
* ``profiles.png``: performance profiles (fraction of runs above each normalized score), one
  panel per headline condition;
* ``tuning_profiles.png`` and ``retuning_cost.png``: the tuning tax, from the roots with knob
  variants (the sensitivity suite): fraction of *configurations* above each score, and what the
  configuration that was best on fresh data loses under each other condition;
* the tables as CSV files.

**Normalization** is external (never the PPO arm of the same sweep): each run's final evaluation
return is mapped to ``(return - random_score) / (solved_threshold - random_score)`` with the two
values of that run's own ``config.json``; runs without a usable pair are left out and listed.

**Several roots.** The headline figures and the mismatch figure pool the runs at the default knobs
(``variant == ""``) of every root and count a run key (env, algorithm, variant, condition, seed)
found in several roots once, from the first root given: list the main suite first. An
environment enters a figure only if it has runs at every level on that figure's x axis. The
staleness figure uses only the roots whose fresh-sampler runs hold a lag sweep (3 lags or more,
else 2), the tuning tax only the roots that hold knob variants.

Only :mod:`adaptive_po.harness.contract` of the training package is imported (never torch).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from adaptive_po.harness.contract import atomic_write, atomic_write_text  # noqa: E402

from .load import CONDITION_KEYS, RUN_KEYS, load_runs, pretty_condition, run_reporting  # noqa: E402
from .plots import algo_colors  # noqa: E402
from .stats import DEFAULT_RESAMPLES, CI, add_bootstrap_arguments, parse_report_arguments, iqm  # noqa: E402
from .tables import to_markdown  # noqa: E402

__all__ = [
    "ESS_ALGO",
    "FRESH",
    "HEADLINE_CONDITIONS",
    "Condition",
    "PaperData",
    "PaperReport",
    "load_paper_runs",
    "normalize_runs",
    "reference_table",
    "iqm_by_level",
    "performance_profile",
    "iqm_difference_ci",
    "wins_ties_losses",
    "config_scores",
    "tuning_spread",
    "tuning_profile",
    "retuning_cost",
    "make_paper_report",
    "main",
]

#: the objective the paper proposes; drawn emphasized and compared against the best other one
ESS_ALGO = "esspo"
#: fresh data: no lag, no noise, no replay, the sampler at T = 1 and fp32, its own log-probs
FRESH: dict[str, Any] = {
    "policy_lag": 0, "action_noise": 0.0, "replay": 0, "behaviour_log_prob": "actual",
    "sampler_temperature": 1.0, "sampler_precision": "fp32",
}
#: the sampler's number formats from the learner's own to the coarsest (mismatch increases)
PRECISION_ORDER: tuple[str, ...] = ("fp32", "fp16", "bf16", "fp8-e4m3", "fp8-e5m2")
#: the axes of the mismatch-level figure (policy lag has a figure of its own)
MISMATCH_AXES: tuple[str, ...] = (
    "sampler_temperature", "sampler_precision", "behaviour_log_prob", "action_noise", "replay",
)
_AXIS_LABELS = {
    "policy_lag": "policy lag k (updates behind)",
    "sampler_temperature": "sampler temperature T",
    "sampler_precision": "sampler precision (learner fp32)",
    "behaviour_log_prob": "recorded behaviour log-prob",
    "action_noise": "action noise sigma",
    "replay": "replayed batches",
}


@dataclass(frozen=True)
class Condition:
    """A named data condition: a value for every key of :data:`CONDITION_KEYS`."""

    label: str
    values: Mapping[str, Any]

    def mask(self, df: pd.DataFrame) -> pd.Series:
        m = pd.Series(True, index=df.index)
        for key, val in self.values.items():
            m &= _equal(df[key], val)
        return m

    def matches(self, values: Mapping[str, Any]) -> bool:
        return all(_same(values[k], v) for k, v in self.values.items())


#: the paper's headline conditions, in the order of the x axis of ``iqm_conditions.png``
HEADLINE_CONDITIONS: tuple[Condition, ...] = (
    Condition("fresh", FRESH),
    Condition("lag 16", {**FRESH, "policy_lag": 16}),
    Condition("T=1.2", {**FRESH, "sampler_temperature": 1.2}),
    Condition("fp8-e4m3", {**FRESH, "sampler_precision": "fp8-e4m3"}),
    Condition("fp8-e4m3, learner log-prob", {**FRESH, "sampler_precision": "fp8-e4m3", "behaviour_log_prob": "policy"}),
)


def _same(a, b) -> bool:
    if isinstance(b, str) or isinstance(a, str):
        return a == b
    return bool(np.isclose(float(a), float(b)))


def _equal(series: pd.Series, val) -> pd.Series:
    if isinstance(val, str):
        return series == val
    return pd.Series(np.isclose(series.to_numpy(dtype=float), float(val)), index=series.index)


def condition_label(values: Mapping[str, Any]) -> str:
    """The headline label of a condition (``fresh``, ``lag 16``, ...) or :func:`pretty_condition`."""
    for cond in HEADLINE_CONDITIONS:
        if cond.matches(values):
            return cond.label
    return pretty_condition(*(values[k] for k in CONDITION_KEYS))


def _condition_sort_key(values: Mapping[str, Any]) -> tuple:
    for i, cond in enumerate(HEADLINE_CONDITIONS):
        if cond.matches(values):
            return (0, i)
    return (1,) + tuple(_level_key(k, values[k]) for k in CONDITION_KEYS)


def _level_key(axis: str, level) -> tuple:
    """Sort key of an axis level: precision by :data:`PRECISION_ORDER`, blp ``actual`` first."""
    if axis == "sampler_precision":
        return (PRECISION_ORDER.index(level), "") if level in PRECISION_ORDER else (len(PRECISION_ORDER), str(level))
    if axis == "behaviour_log_prob":
        return (0 if level == "actual" else 1, str(level))
    return (float(level), "")


def _fmt_level(axis: str, level) -> str:
    if axis in ("sampler_precision", "behaviour_log_prob"):
        return "learner" if level == "policy" else str(level)
    return format(float(level), "g")


def _config_name(variant: str) -> str:
    return variant if variant else "default"


def _order_algos(algos, ess_algo: str = ESS_ALGO) -> list[str]:
    algos = sorted(set(algos))
    first = [a for a in (ess_algo, "ppo") if a in algos]
    return first + [a for a in algos if a not in first]


# --------------------------------------------------------------------------------------------
# loading and normalization


@dataclass
class PaperData:
    """The complete runs of every root, normalized.

    ``finals`` is :attr:`LoadedRuns.finals` of all roots, in the order of the roots (a run key may
    appear once per root; see :func:`_first_root`), with ``root`` (the root it came from),
    ``score`` (the externally normalized final score; NaN when the run has no usable reference)
    and ``cond_label``. ``references`` is :func:`reference_table`.
    """

    roots: list[Path]
    finals: pd.DataFrame
    references: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    @property
    def scored(self) -> pd.DataFrame:
        return self.finals[np.isfinite(self.finals["score"])]


def normalize_runs(finals: pd.DataFrame) -> pd.Series:
    """Per run: ``(final_eval_return_mean - random_score) / (solved_threshold - random_score)``
    from the run's own config; NaN where either value is missing or they are equal."""
    rnd = finals["random_score"].to_numpy(dtype=float)
    ref = finals["solved_threshold"].to_numpy(dtype=float)
    ret = finals["final_eval_return_mean"].to_numpy(dtype=float)
    span = ref - rnd
    ok = np.isfinite(rnd) & np.isfinite(ref) & (span != 0)
    out = np.full(len(finals), np.nan)
    out[ok] = (ret[ok] - rnd[ok]) / span[ok]
    return pd.Series(out, index=finals.index, name="score")


def reference_table(finals: pd.DataFrame) -> pd.DataFrame:
    """Per env: the random score (0) and solved threshold (1) the configs give, how many runs were
    normalized and left out, and a note where configs disagree (each run uses its own pair)."""
    rows = []
    for env, g in finals.groupby("env", sort=True):
        rnd = sorted(g["random_score"].dropna().unique())
        sol = sorted(g["solved_threshold"].dropna().unique())
        usable = int(np.isfinite(g["score"]).sum())
        notes = []
        if len(rnd) > 1:
            notes.append(f"configs disagree on random_score {[float(v) for v in rnd]}")
        if len(sol) > 1:
            notes.append(f"configs disagree on solved_threshold {[float(v) for v in sol]}")
        if usable < len(g):
            notes.append(f"{len(g) - usable} run(s) without a usable random_score/solved_threshold left out")
        rows.append(dict(
            env=env,
            random=float(rnd[0]) if len(rnd) == 1 else float("nan"),
            reference=float(sol[0]) if len(sol) == 1 else float("nan"),
            random_values=", ".join(format(float(v), "g") for v in rnd) or "—",
            reference_values=", ".join(format(float(v), "g") for v in sol) or "—",
            source="config.json `solved_threshold` (1) and `random_score` (0) of each run",
            n_runs=len(g), n_normalized=usable, note="; ".join(notes),
        ))
    return pd.DataFrame(rows)


def load_paper_runs(roots: Sequence[str | os.PathLike]) -> PaperData:
    """Load every root with :func:`analysis.load.load_runs`, keep one row per run key (the first
    root given wins) and add the external normalization. Raises ``ValueError`` as ``load_runs``."""
    if not roots:
        raise ValueError("no runs root given")
    frames, notes = [], []
    paths = [Path(r) for r in roots]
    for root in paths:
        runs = load_runs(root)
        frames.append(runs.finals.assign(root=str(root)))
        notes += [f"{root}: {n}" for n in runs.notes]
    finals = pd.concat(frames, ignore_index=True)
    dup = finals.duplicated(RUN_KEYS, keep="first")
    if dup.any():
        by_root = finals[dup].groupby("root").size()
        notes.append(
            f"{int(dup.sum())} run key(s) are also in an earlier root ("
            + ", ".join(f"{n} in {r}" for r, n in by_root.items())
            + "); the sections that pool roots count them once, from the first root given"
        )
    finals["score"] = normalize_runs(finals)
    finals["cond_label"] = [condition_label(dict(zip(CONDITION_KEYS, r)))
                            for r in finals[CONDITION_KEYS].itertuples(index=False)]
    refs = reference_table(finals)
    for r in refs.itertuples():
        if r.n_normalized < r.n_runs:
            notes.append(f"{r.env}: {r.n_runs - r.n_normalized} run(s) left out (no usable random_score / solved_threshold)")
    return PaperData(roots=paths, finals=finals, references=refs, notes=notes)


# --------------------------------------------------------------------------------------------
# statistics


def _first_root(df: pd.DataFrame) -> pd.DataFrame:
    """One row per run key: the row of the first root given (rows are in the order of the roots)."""
    return df[~df.duplicated(RUN_KEYS, keep="first")]


def _per_env(df: pd.DataFrame, value: str = "score") -> dict[str, np.ndarray]:
    return {env: g[value].to_numpy(dtype=float) for env, g in df.groupby("env", sort=True)}


def _stratified(per_env: Mapping[str, np.ndarray], n_resamples: int, rng) -> list[np.ndarray]:
    """For each env, ``(n_resamples, n_runs)`` scores drawn with replacement within that env."""
    return [x[rng.integers(0, x.size, size=(n_resamples, x.size))] for x in per_env.values()]


def _interval(boot: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    alpha = 1.0 - confidence
    return (np.percentile(boot, 100 * alpha / 2, axis=0), np.percentile(boot, 100 * (1 - alpha / 2), axis=0))


def _iqm_ci(per_env: Mapping[str, np.ndarray], confidence: float, n_resamples: int, seed) -> CI:
    """IQM of the pooled scores with a stratified percentile-bootstrap CI (strata = envs)."""
    pooled = np.concatenate(list(per_env.values()))
    est = float(iqm(pooled))
    if all(x.size == 1 for x in per_env.values()) or np.all(pooled == pooled[0]):
        return CI(est, est, est)
    boot = iqm(np.concatenate(_stratified(per_env, n_resamples, np.random.default_rng(seed)), axis=1), axis=1)
    lo, hi = _interval(boot, confidence)
    return CI(est, float(lo), float(hi))


def iqm_difference_ci(
    a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
) -> CI:
    """IQM(a) - IQM(b) over the envs both have, with a stratified bootstrap CI (the runs of a and
    of b resampled independently within each env)."""
    envs = [e for e in a if e in b]
    if not envs:
        nan = float("nan")
        return CI(nan, nan, nan)
    a = {e: np.asarray(a[e], float) for e in envs}
    b = {e: np.asarray(b[e], float) for e in envs}
    est = float(iqm(np.concatenate(list(a.values()))) - iqm(np.concatenate(list(b.values()))))
    rng = np.random.default_rng(seed)
    ba = iqm(np.concatenate(_stratified(a, n_resamples, rng), axis=1), axis=1)
    bb = iqm(np.concatenate(_stratified(b, n_resamples, rng), axis=1), axis=1)
    lo, hi = _interval(ba - bb, confidence)
    return CI(est, float(lo), float(hi))


def _seeds_text(df: pd.DataFrame) -> str:
    counts = df.groupby("env").size()
    if counts.empty:
        return "0"
    lo, hi = int(counts.min()), int(counts.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _consistent_envs(df: pd.DataFrame, level_col: str, levels: Sequence) -> tuple[pd.DataFrame, list[str]]:
    """Rows of the envs that have runs at every level; and the envs dropped."""
    keep, dropped = [], []
    for env, g in df.groupby("env", sort=True):
        present = set(g[level_col])
        (keep if all(lv in present for lv in levels) else dropped).append(env)
    return df[df["env"].isin(keep)], dropped


def iqm_by_level(
    df: pd.DataFrame, level_col: str, levels: Sequence | None = None, confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
) -> pd.DataFrame:
    """Per algorithm and level of ``level_col``: aggregate IQM of ``score`` over all (env, seed)
    runs with a stratified bootstrap CI (strata = envs), and the run counts."""
    levels = list(levels) if levels is not None else sorted(df[level_col].unique())
    rows = []
    for algo in _order_algos(df["algo"]):
        ga = df[df["algo"] == algo]
        for lv in levels:
            g = ga[ga[level_col] == lv]
            if g.empty:
                continue
            ci = _iqm_ci(_per_env(g), confidence, n_resamples, seed)
            rows.append(dict(algo=algo, level=lv, n_envs=g["env"].nunique(), n_runs=len(g),
                             seeds_per_env=_seeds_text(g), iqm=ci.estimate, low=ci.low, high=ci.high))
    return pd.DataFrame(rows, columns=["algo", "level", "n_envs", "n_runs", "seeds_per_env", "iqm", "low", "high"])


def performance_profile(
    per_env: Mapping[str, np.ndarray], taus: Sequence[float], confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
) -> dict[str, np.ndarray]:
    """Run-score distribution (rliable's performance profile): at each ``tau``, the fraction of
    runs whose score exceeds ``tau``, averaged over envs (each env weighs the same), with a
    stratified bootstrap CI band. Returns ``tau``, ``fraction``, ``low``, ``high``."""
    taus = np.asarray(taus, dtype=float)
    frac = np.mean([(np.asarray(x)[:, None] > taus).mean(axis=0) for x in per_env.values()], axis=0)
    rng = np.random.default_rng(seed)
    boot = np.mean([(r[:, :, None] > taus).mean(axis=1) for r in _stratified(per_env, n_resamples, rng)], axis=0)
    lo, hi = _interval(boot, confidence)
    return {"tau": taus, "fraction": frac, "low": lo, "high": hi}


def _tau_grid(scores: np.ndarray, n: int = 101) -> np.ndarray:
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
        d = iqm_difference_ci(_per_env(mine), _per_env(others[others["algo"] == best]), confidence, n_resamples, seed)
        verdict = "win" if d.low > 0 else "loss" if d.high < 0 else "tie"
        rows.append(dict(level=lv, best_other=best, ess_iqm=float(iqm(mine["score"].to_numpy(dtype=float))),
                         other_iqm=float(best_iqm), diff=d.estimate, low=d.low, high=d.high, verdict=verdict,
                         n_envs=len(set(mine["env"]) & set(others[others["algo"] == best]["env"]))))
    return pd.DataFrame(rows, columns=["level", "best_other", "ess_iqm", "other_iqm", "diff", "low", "high",
                                       "verdict", "n_envs"])


# --------------------------------------------------------------------------------------------
# the tuning tax


def _env_mean_boot(per_env: Mapping[str, np.ndarray], n_resamples: int, rng) -> np.ndarray:
    """Bootstrap draws (``n_resamples``,) of the mean over envs of the per-env mean (seeds resampled
    within each env)."""
    return np.mean([r.mean(axis=1) for r in _stratified(per_env, n_resamples, rng)], axis=0)


@dataclass
class TuningCell:
    """One base algorithm under one condition: its configurations' scores and bootstrap draws."""

    base_algo: str
    condition: str
    cond_label: str
    configs: list[str]  # variants ("" = default knobs)
    scores: np.ndarray  # (configs,) mean over envs of the mean over seeds
    boot: np.ndarray  # (n_resamples, configs)
    envs: list[str]
    seeds: dict[str, dict[str, pd.Series]]  # variant -> env -> scores indexed by seed
    dropped_envs: list[str] = field(default_factory=list)


def config_scores(
    df: pd.DataFrame, n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
) -> list[TuningCell]:
    """For each base algorithm and condition of ``df`` (normalized runs with variants): each
    configuration's score, the mean over envs of its mean normalized score over seeds, with
    bootstrap draws (seeds resampled within each env, independently per configuration). Only the
    envs every configuration of the cell has are used."""
    cells = []
    for (base, cond), g in df.groupby(["base_algo", "condition"], sort=True):
        configs = sorted(g["variant"].unique(), key=lambda v: (v != "", v))
        env_sets = [set(g[g["variant"] == v]["env"]) for v in configs]
        envs = sorted(set.intersection(*env_sets))
        dropped = sorted(set.union(*env_sets) - set(envs))
        if not envs:
            continue
        rng = np.random.default_rng(seed)
        scores, boots, seeds = [], [], {}
        for v in configs:
            gv = g[(g["variant"] == v) & g["env"].isin(envs)]
            per_env = {e: ge.set_index("seed")["score"].astype(float) for e, ge in gv.groupby("env", sort=True)}
            seeds[v] = per_env
            arrays = {e: s.to_numpy() for e, s in per_env.items()}
            scores.append(float(np.mean([a.mean() for a in arrays.values()])))
            boots.append(_env_mean_boot(arrays, n_resamples, rng))
        values = dict(zip(CONDITION_KEYS, g[CONDITION_KEYS].iloc[0]))
        cells.append(TuningCell(base, cond, condition_label(values), configs, np.array(scores),
                                np.stack(boots, axis=1), envs, seeds, dropped))
    return cells


def _ci_of(est: float, draws: np.ndarray, confidence: float) -> CI:
    """``est`` with the percentile interval of its bootstrap ``draws``."""
    lo, hi = _interval(draws, confidence)
    return CI(est, float(lo), float(hi))


def tuning_spread(cells: Sequence[TuningCell], confidence: float = 0.95) -> pd.DataFrame:
    """Per base algorithm and condition: the best, median and worst configuration (by score) and
    the bootstrap CIs of the max, median and min over configurations."""
    rows = []
    for c in cells:
        order = np.argsort(-c.scores, kind="stable")
        n = len(c.configs)
        mid = [order[(n - 1) // 2]] if n % 2 else [order[n // 2 - 1], order[n // 2]]
        best = _ci_of(float(c.scores.max()), c.boot.max(axis=1), confidence)
        med = _ci_of(float(np.median(c.scores)), np.median(c.boot, axis=1), confidence)
        worst = _ci_of(float(c.scores.min()), c.boot.min(axis=1), confidence)
        nseeds = sorted({len(s) for per_env in c.seeds.values() for s in per_env.values()})
        rows.append(dict(
            base_algo=c.base_algo, condition=c.condition, cond_label=c.cond_label, n_configs=n,
            n_envs=len(c.envs), seeds_per_env=str(nseeds[0]) if len(nseeds) == 1 else f"{nseeds[0]}-{nseeds[-1]}",
            best_config=_config_name(c.configs[order[0]]), best=best.estimate, best_low=best.low, best_high=best.high,
            median_config=" / ".join(_config_name(c.configs[i]) for i in mid),
            median=med.estimate, median_low=med.low, median_high=med.high,
            worst_config=_config_name(c.configs[order[-1]]), worst=worst.estimate, worst_low=worst.low,
            worst_high=worst.high, spread=best.estimate - worst.estimate,
        ))
    return pd.DataFrame(rows)


def tuning_profile(cell: TuningCell, taus: Sequence[float], confidence: float = 0.95) -> dict[str, np.ndarray]:
    """Fraction of the cell's configurations whose score exceeds each ``tau``, with a bootstrap band."""
    taus = np.asarray(taus, dtype=float)
    frac = (cell.scores[:, None] > taus).mean(axis=0)
    boot = (cell.boot[:, :, None] > taus).mean(axis=1)
    lo, hi = _interval(boot, confidence)
    return {"tau": taus, "fraction": frac, "low": lo, "high": hi}


def _paired_difference_ci(
    a: Mapping[str, pd.Series], b: Mapping[str, pd.Series], confidence: float, n_resamples: int, seed,
) -> CI:
    """Mean over envs of (mean a - mean b), with a bootstrap CI that resamples seeds within each
    env, the same seeds for a and b (paired; independently where they share no seed)."""
    rng = np.random.default_rng(seed)
    est = float(np.mean([a[e].mean() - b[e].mean() for e in a]))
    draws = []
    for e in a:
        common = sorted(set(a[e].index) & set(b[e].index))
        if common:
            d = (a[e].loc[common] - b[e].loc[common]).to_numpy(dtype=float)
            draws.append(d[rng.integers(0, d.size, size=(n_resamples, d.size))].mean(axis=1))
        else:
            xa, xb = a[e].to_numpy(float), b[e].to_numpy(float)
            draws.append(xa[rng.integers(0, xa.size, (n_resamples, xa.size))].mean(axis=1)
                         - xb[rng.integers(0, xb.size, (n_resamples, xb.size))].mean(axis=1))
    return _ci_of(est, np.mean(draws, axis=0), confidence)


def retuning_cost(
    cells: Sequence[TuningCell], confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES, seed: int | None = 0,
) -> pd.DataFrame:
    """Per base algorithm and non-fresh condition: the score of the configuration that was best
    on fresh data, the score of that condition's best configuration, and the retuning cost (their
    difference, >= 0) with a paired bootstrap CI (seeds resampled within each env)."""
    fresh = Condition("fresh", FRESH)
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
            fb = _ci_of(float(c.scores[i_fb]), c.boot[:, i_fb], confidence)
            b = _ci_of(float(c.scores[i_b]), c.boot[:, i_b], confidence)
            if i_b == i_fb:
                cost = CI(0.0, 0.0, 0.0)
            else:
                cost = _paired_difference_ci(c.seeds[c.configs[i_b]], c.seeds[fresh_best], confidence, n_resamples, seed)
            rows.append(dict(
                base_algo=base, condition=c.condition, cond_label=c.cond_label, n_envs=len(c.envs),
                fresh_best_config=_config_name(fresh_best), fresh_best_score=fb.estimate,
                fresh_best_low=fb.low, fresh_best_high=fb.high,
                best_config=_config_name(c.configs[i_b]), best_score=b.estimate, best_low=b.low, best_high=b.high,
                cost=cost.estimate, cost_low=cost.low, cost_high=cost.high,
            ))
    return pd.DataFrame(rows, columns=[
        "base_algo", "condition", "cond_label", "n_envs", "fresh_best_config", "fresh_best_score", "fresh_best_low",
        "fresh_best_high", "best_config", "best_score", "best_low", "best_high", "cost", "cost_low", "cost_high"])


# --------------------------------------------------------------------------------------------
# figures


def _style(algo: str, ess_algo: str) -> dict:
    if algo == ess_algo:
        return dict(lw=3.2, ms=8, zorder=10, alpha=1.0, band=0.28)
    return dict(lw=1.5, ms=5, zorder=3, alpha=0.85, band=0.10)


def _suptitle(fig, title: str, detail: str) -> None:
    """The title, then the statistics shown, wrapped to the figure's width."""
    width = max(40, int(fig.get_figwidth() * 13))
    fig.suptitle(title + "\n" + textwrap.fill(detail, width), fontsize=11)


def _legend(fig, algos, colors, ess_algo, ncol=None) -> None:
    handles = [Line2D([], [], color=colors[a], lw=_style(a, ess_algo)["lw"], marker="o",
                      ms=_style(a, ess_algo)["ms"] * 0.8) for a in algos]
    labels = [f"{a} (ESS objective)" if a == ess_algo else a for a in algos]
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol or min(len(labels), 6), frameon=False)


def _lines_vs_level(ax, table: pd.DataFrame, levels: Sequence, colors, ess_algo: str) -> list[str]:
    xpos = {lv: i for i, lv in enumerate(levels)}
    drawn = []
    for algo in _order_algos(table["algo"], ess_algo):
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
    _suptitle(fig, title, detail)
    _legend(fig, drawn, colors, ess_algo)
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
        ax.set_xticklabels([_fmt_level(axis, lv) for lv in levels])
        ax.set_xlabel(_AXIS_LABELS.get(axis, axis))
    axes[0, 0].set_ylabel("IQM normalized final score")
    _suptitle(fig, "Aggregate IQM vs mismatch level", detail)
    _legend(fig, _order_algos(drawn, ess_algo), colors, ess_algo)
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
        for algo in _order_algos(curves, ess_algo):
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
    _suptitle(fig, title, detail)
    _legend(fig, _order_algos(drawn, ess_algo), colors, ess_algo)
    return fig


def plot_retuning(cost: pd.DataFrame, colors, detail: str, ess_algo: str = ESS_ALGO):
    """Left: retuning cost (best at the condition - fresh-best config at the condition) with CIs.
    Right: the two scores (hollow: fresh-best configuration; filled: the condition's best)."""
    labels = list(dict.fromkeys(cost["cond_label"]))
    algos = _order_algos(cost["base_algo"], ess_algo)
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
    _suptitle(fig, "Retuning cost", detail)
    _legend(fig, algos, colors, ess_algo)
    return fig


# --------------------------------------------------------------------------------------------
# report


def _ci_text(est, lo, hi, digits: int = 2) -> str:
    if est is None or not np.isfinite(est):
        return "—"
    return f"{est:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _counts_text(row) -> str:
    return f"{row.n_envs}×{row.seeds_per_env}" if "-" not in str(row.seeds_per_env) \
        else f"{row.n_runs} runs / {row.n_envs} envs"


def _wide_iqm(table: pd.DataFrame, levels: Sequence, headers: Sequence[str], ess_algo: str) -> pd.DataFrame:
    """Rows: algorithms; columns: levels; cells ``IQM [CI] (envs×seeds)``."""
    out = []
    for algo in _order_algos(table["algo"], ess_algo):
        t = table[table["algo"] == algo].set_index("level")
        row = {"algorithm": f"**{algo}**" if algo == ess_algo else algo}
        for lv, h in zip(levels, headers):
            row[h] = (f"{_ci_text(t.at[lv, 'iqm'], t.at[lv, 'low'], t.at[lv, 'high'])} ({_counts_text(t.loc[lv])})"
                      if lv in t.index else "—")
        out.append(row)
    return pd.DataFrame(out, columns=["algorithm", *headers])


def _wtl_lines(wtl: pd.DataFrame, fmt_level, ess_algo: str) -> list[str]:
    lines = []
    for r in wtl.itertuples():
        word = {"win": "**wins**", "loss": "**loses**", "tie": "ties"}[r.verdict]
        lines.append(f"- {fmt_level(r.level)}: {ess_algo} {word} against {r.best_other} (the best other "
                     f"algorithm there): IQM {r.ess_iqm:.2f} vs {r.other_iqm:.2f}, difference "
                     f"{_ci_text(r.diff, r.low, r.high)} over {r.n_envs} env(s)")
    return lines


@dataclass
class PaperReport:
    """What :func:`make_paper_report` wrote and computed."""

    out_dir: Path
    report_md: Path
    figures: dict[str, Path]
    tables: dict[str, pd.DataFrame]
    data: PaperData
    skipped: list[str] = field(default_factory=list)


def _save_figure(fig, path: Path, dpi: int) -> Path:
    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=dpi))
    finally:
        plt.close(fig)


def _save_csv(df: pd.DataFrame, path: Path) -> Path:
    return atomic_write(path, lambda tmp: df.to_csv(tmp, index=False))


def _fresh_except(df: pd.DataFrame, axis: str) -> pd.DataFrame:
    m = pd.Series(True, index=df.index)
    for key, val in FRESH.items():
        if key != axis:
            m &= _equal(df[key], val)
    return df[m]


def _budget_notes(df: pd.DataFrame, section: str) -> list[str]:
    notes = []
    for env, g in df.groupby("env", sort=True):
        tt = sorted(g["total_timesteps"].unique())
        if len(tt) > 1:
            notes.append(f"{section}: {env} mixes budgets {', '.join(f'{int(t):,}' for t in tt)} (runs from "
                         f"{', '.join(sorted(g['root'].unique()))})")
    return notes


def make_paper_report(
    roots: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    *,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    ess_algo: str = ESS_ALGO,
    profile_taus: Sequence[float] = (0.5, 1.0),
    dpi: int = 120,
) -> PaperReport:
    """Load ``roots``, compute every table, draw the figures and write them with ``report.md``
    into ``out`` (atomically). Raises ``ValueError`` when a root cannot be loaded."""
    data = load_paper_runs(roots)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    kw = dict(confidence=confidence, n_resamples=n_resamples, seed=seed)
    pct = f"{round(confidence * 100)}%"
    scored = data.scored
    default = scored[scored["variant"] == ""]
    pooled = _first_root(default)  # the sections that pool roots count a run key once
    colors = algo_colors(sorted(set(scored["algo"]) | set(scored["base_algo"])), baseline="ppo")
    figures: dict[str, Path] = {}
    tables: dict[str, pd.DataFrame] = {}
    skipped: list[str] = []
    notes = list(data.notes)
    md: list[str] = []
    method = (f"IQM = interquartile mean of the normalized final scores of all runs (envs × seeds) of the cell; "
              f"{pct} CIs are percentile intervals of a stratified bootstrap ({n_resamples} resamples; runs "
              f"resampled within each env). Cells read `IQM [CI] (envs×seeds)`.")

    # ---- headline conditions
    head = pooled.copy()
    head["hl"] = -1
    for i, cond in enumerate(HEADLINE_CONDITIONS):
        head.loc[cond.mask(head), "hl"] = i
    head = head[head["hl"] >= 0]
    hl_levels = sorted(head["hl"].unique())
    head, dropped = _consistent_envs(head, "hl", hl_levels)
    if dropped:
        notes.append(f"headline: env(s) {', '.join(dropped)} left out (no runs at every headline condition present)")
    notes += _budget_notes(head, "headline")
    hl_labels = [HEADLINE_CONDITIONS[i].label for i in hl_levels]
    head_md, wtl_md = "", ""
    if not head.empty:
        t = iqm_by_level(head, "hl", hl_levels, **kw)
        tables["iqm_conditions"] = t.assign(condition=t["level"].map(lambda i: HEADLINE_CONDITIONS[i].label))
        fig = plot_iqm_levels(t, hl_levels, hl_labels, "data condition", "Aggregate IQM vs data condition",
                              f"default knobs; {head['env'].nunique()} envs ({', '.join(sorted(head['env'].unique()))}); "
                              f"{pct} stratified bootstrap CI band", colors, ess_algo)
        figures["iqm_conditions.png"] = _save_figure(fig, out_dir / "iqm_conditions.png", dpi)
        head_md = to_markdown(_wide_iqm(t, hl_levels, hl_labels, ess_algo))
        wtl = wins_ties_losses(head, "hl", hl_levels, ess_algo, **kw)
        tables["wins_conditions"] = wtl.assign(condition=wtl["level"].map(lambda i: HEADLINE_CONDITIONS[i].label))
        wtl_md = "\n".join(_wtl_lines(wtl, lambda i: HEADLINE_CONDITIONS[i].label, ess_algo))
    else:
        skipped.append("iqm_conditions.png: no run at default knobs under a headline condition")

    # ---- staleness: roots that hold a lag sweep
    fresh_sampler = _fresh_except(default, "policy_lag")
    lags_per_root = fresh_sampler.groupby("root")["policy_lag"].nunique()
    sweep_roots = list(lags_per_root[lags_per_root >= 3].index) or list(lags_per_root[lags_per_root >= 2].index)
    stale_md, stale_wtl_md = "", ""
    if sweep_roots:
        st = _first_root(fresh_sampler[fresh_sampler["root"].isin(sweep_roots)])
        lags = sorted(int(v) for v in st["policy_lag"].unique())
        st, dropped = _consistent_envs(st, "policy_lag", lags)
        if dropped:
            notes.append(f"staleness: env(s) {', '.join(dropped)} left out (not run at every lag {lags})")
        notes += _budget_notes(st, "staleness")
        t = iqm_by_level(st, "policy_lag", lags, **kw)
        tables["iqm_staleness"] = t
        fig = plot_iqm_levels(t, lags, [str(v) for v in lags], _AXIS_LABELS["policy_lag"] + " (categorical axis)",
                              "Aggregate IQM vs staleness",
                              f"default knobs, fresh sampler; {st['env'].nunique()} envs; roots {', '.join(sweep_roots)}; "
                              f"{pct} stratified bootstrap CI band", colors, ess_algo)
        figures["iqm_staleness.png"] = _save_figure(fig, out_dir / "iqm_staleness.png", dpi)
        stale_md = to_markdown(_wide_iqm(t, lags, [f"lag {v}" for v in lags], ess_algo))
        wtl = wins_ties_losses(st, "policy_lag", lags, ess_algo, **kw)
        tables["wins_staleness"] = wtl
        stale_wtl_md = "\n".join(_wtl_lines(wtl, lambda v: f"lag {int(v)}", ess_algo))
    else:
        skipped.append("iqm_staleness.png: no root holds runs at two or more policy lags (fresh sampler)")

    # ---- mismatch levels: every other axis that varies
    panels, mism_md = [], []
    for axis in MISMATCH_AXES:
        sl = _fresh_except(pooled, axis)
        levels = sorted(sl[axis].unique(), key=lambda v: _level_key(axis, v))
        if len(levels) < 2:
            continue
        sl, dropped = _consistent_envs(sl, axis, levels)
        if dropped:
            notes.append(f"mismatch ({axis}): env(s) {', '.join(dropped)} left out (not run at every level)")
        if sl.empty:
            continue
        t = iqm_by_level(sl, axis, levels, **kw)
        tables[f"iqm_{axis}"] = t
        panels.append((axis, t, levels))
        mism_md.append(f"**{_AXIS_LABELS[axis]}** ({sl['env'].nunique()} envs; other dials fresh)\n\n"
                       + to_markdown(_wide_iqm(t, levels, [_fmt_level(axis, lv) for lv in levels], ess_algo)))
    if panels:
        fig = plot_iqm_axes(panels, colors, f"default knobs, the other dials at fresh values; {pct} stratified bootstrap CI band",
                            ess_algo)
        figures["iqm_mismatch.png"] = _save_figure(fig, out_dir / "iqm_mismatch.png", dpi)
    else:
        skipped.append("iqm_mismatch.png: no sampler temperature, precision or other dial was run at two levels")

    # ---- performance profiles (headline conditions)
    prof_md = ""
    if not head.empty:
        taus = _tau_grid(head["score"].to_numpy(dtype=float))
        prof_panels, prof_rows, at_rows = [], [], []
        for i, label in zip(hl_levels, hl_labels):
            g = head[head["hl"] == i]
            curves = {}
            for algo, ga in g.groupby("algo", sort=True):
                curves[algo] = performance_profile(_per_env(ga), taus, **kw)
                prof_rows.append(pd.DataFrame({"condition": label, "algo": algo, **curves[algo]}))
                at = performance_profile(_per_env(ga), profile_taus, **kw)
                row = {"condition": label, "algorithm": f"**{algo}**" if algo == ess_algo else algo,
                       "runs": len(ga), "_order": _order_algos(g["algo"], ess_algo).index(algo)}
                for k, tau in enumerate(profile_taus):
                    row[f"runs > {tau:g} [{pct} CI]"] = _ci_text(at["fraction"][k], at["low"][k], at["high"][k])
                at_rows.append(row)
            prof_panels.append((label, curves))
        tables["profiles"] = pd.concat(prof_rows, ignore_index=True)
        fig = plot_profiles(prof_panels, colors, "fraction of runs with score > tau", "Performance profiles",
                            f"default knobs; fraction of runs above tau, mean over envs; {pct} stratified bootstrap CI band",
                            ess_algo)
        figures["profiles.png"] = _save_figure(fig, out_dir / "profiles.png", dpi)
        at_df = pd.DataFrame(at_rows)
        at_df["_c"] = at_df["condition"].map({lb: k for k, lb in enumerate(hl_labels)})
        prof_md = to_markdown(at_df.sort_values(["_c", "_order"]).drop(columns=["_c", "_order"]))
    else:
        skipped.append("profiles.png: no run at default knobs under a headline condition")

    # ---- the tuning tax: roots with knob variants
    var_roots = sorted(scored.loc[scored["variant"] != "", "root"].unique())
    tune_md, retune_md, configs_md = "", "", ""
    tv = _first_root(scored[scored["root"].isin(var_roots)])
    cells = config_scores(tv, n_resamples=n_resamples, seed=seed) if var_roots else []
    if cells:
        notes += _budget_notes(tv, "tuning")
        for c in cells:
            if c.dropped_envs:
                notes.append(f"tuning: {c.base_algo} at {c.cond_label}: env(s) {', '.join(c.dropped_envs)} left out "
                             "(not run with every configuration)")
        spread = tuning_spread(cells, confidence)
        spread["_c"] = [_condition_sort_key(dict(zip(CONDITION_KEYS, tv[tv["condition"] == c][CONDITION_KEYS].iloc[0])))
                        for c in spread["condition"]]
        spread["_a"] = spread["base_algo"].map({a: i for i, a in enumerate(_order_algos(spread["base_algo"], ess_algo))})
        spread = spread.sort_values(["_c", "_a"]).drop(columns=["_c", "_a"]).reset_index(drop=True)
        tables["tuning_spread"] = spread
        tune_md = to_markdown(pd.DataFrame({
            "condition": spread["cond_label"],
            "algorithm": [f"**{a}**" if a == ess_algo else a for a in spread["base_algo"]],
            "configs": spread["n_configs"],
            "envs×seeds": [f"{r.n_envs}×{r.seeds_per_env}" for r in spread.itertuples()],
            f"best [{pct} CI]": [f"{_ci_text(r.best, r.best_low, r.best_high)} ({r.best_config})" for r in spread.itertuples()],
            f"median [{pct} CI]": [f"{_ci_text(r.median, r.median_low, r.median_high)} ({r.median_config})" for r in spread.itertuples()],
            f"worst [{pct} CI]": [f"{_ci_text(r.worst, r.worst_low, r.worst_high)} ({r.worst_config})" for r in spread.itertuples()],
            "best − worst": [f"{r.spread:.2f}" for r in spread.itertuples()],
        }))
        cfg_rows = []
        for c in cells:
            for k, v in enumerate(c.configs):
                ci = _ci_of(float(c.scores[k]), c.boot[:, k], confidence)
                cfg_rows.append(dict(base_algo=c.base_algo, condition=c.condition, cond_label=c.cond_label,
                                     config=_config_name(v), variant=v, n_envs=len(c.envs),
                                     n_runs=int(sum(len(s) for s in c.seeds[v].values())),
                                     score=ci.estimate, low=ci.low, high=ci.high))
        cfg_table = pd.DataFrame(cfg_rows)
        tables["tuning_configs"] = cfg_table
        cfg_wide = []
        cond_order = sorted(dict.fromkeys(zip(cfg_table["condition"], cfg_table["cond_label"])),
                            key=lambda cl: _condition_sort_key(dict(zip(CONDITION_KEYS, tv[tv["condition"] == cl[0]][CONDITION_KEYS].iloc[0]))))
        for (base, cfg), g in sorted(cfg_table.groupby(["base_algo", "config"]),
                                     key=lambda kv: (_order_algos(cfg_table["base_algo"], ess_algo).index(kv[0][0]),
                                                     kv[0][1] != "default", kv[0][1])):
            row = {"algorithm": base, "configuration": cfg}
            for cond, label in cond_order:
                h = g[g["condition"] == cond]
                row[label] = f"{_ci_text(h['score'].iloc[0], h['low'].iloc[0], h['high'].iloc[0])} ({h['n_runs'].iloc[0]})" \
                    if len(h) else "—"
            cfg_wide.append(row)
        configs_md = to_markdown(pd.DataFrame(cfg_wide))

        taus = _tau_grid(np.concatenate([c.scores for c in cells]))
        by_cond: dict[str, dict] = {}
        for c in cells:
            by_cond.setdefault((c.condition, c.cond_label), {})[c.base_algo] = tuning_profile(c, taus, confidence)
        tp_panels = [(label, curves) for (cond, label), curves in
                     sorted(by_cond.items(), key=lambda kv: [o for o in cond_order].index(kv[0]))]
        fig = plot_profiles(tp_panels, colors, "fraction of configurations with score > tau",
                            "Tuning profiles: spread over each algorithm's configurations",
                            f"score of a configuration = mean over envs of its mean normalized score over seeds; "
                            f"roots {', '.join(var_roots)}; {pct} bootstrap CI band", ess_algo)
        figures["tuning_profiles.png"] = _save_figure(fig, out_dir / "tuning_profiles.png", dpi)

        cost = retuning_cost(cells, **kw)
        cost["_c"] = [[o[0] for o in cond_order].index(c) for c in cost["condition"]]
        cost["_a"] = cost["base_algo"].map({a: i for i, a in enumerate(_order_algos(cost["base_algo"], ess_algo))})
        cost = cost.sort_values(["_c", "_a"]).drop(columns=["_c", "_a"]).reset_index(drop=True)
        tables["retuning_cost"] = cost
        if not cost.empty:
            fig = plot_retuning(cost, colors, f"mean normalized score over envs × seeds; paired bootstrap {pct} CI "
                                f"(seeds resampled within each env); roots {', '.join(var_roots)}", ess_algo)
            figures["retuning_cost.png"] = _save_figure(fig, out_dir / "retuning_cost.png", dpi)
            retune_md = to_markdown(pd.DataFrame({
                "condition": cost["cond_label"],
                "algorithm": [f"**{a}**" if a == ess_algo else a for a in cost["base_algo"]],
                "envs": cost["n_envs"],
                "fresh-best configuration": cost["fresh_best_config"],
                f"its score here [{pct} CI]": [_ci_text(r.fresh_best_score, r.fresh_best_low, r.fresh_best_high) for r in cost.itertuples()],
                "best configuration here": cost["best_config"],
                f"best score here [{pct} CI]": [_ci_text(r.best_score, r.best_low, r.best_high) for r in cost.itertuples()],
                f"retuning cost [{pct} CI]": [_ci_text(r.cost, r.cost_low, r.cost_high) for r in cost.itertuples()],
            }))
        else:
            skipped.append("retuning_cost.png: no algorithm with knob variants was run both fresh and under another condition")
    else:
        skipped.append("tuning_profiles.png, retuning_cost.png: no root holds knob variants (the sensitivity suite)")

    # ---- tables as CSV
    refs = data.references
    tables["references"] = refs
    csv_paths = {name: _save_csv(df, out_dir / f"{name}.csv") for name, df in tables.items()}
    _save_csv(data.finals, out_dir / "runs.csv")

    # ---- report.md
    f = data.finals
    root_lines = []
    for root in data.roots:
        g = f[f["root"] == str(root)]
        if g.empty:
            continue
        budgets = "; ".join(f"{env} {', '.join(f'{int(t):,}' for t in sorted(ge['total_timesteps'].unique()))}"
                            for env, ge in g.groupby("env", sort=True))
        root_lines.append(
            f"- `{root}`: {len(g)} runs; envs {', '.join(sorted(g['env'].unique()))}; "
            f"{g['base_algo'].nunique()} algorithms"
            + (f" in {g['algo'].nunique()} configurations" if g["algo"].nunique() > g["base_algo"].nunique() else "")
            + "; "
            f"{g['condition'].nunique()} conditions; seeds {', '.join(str(int(s)) for s in sorted(g['seed'].unique()))}; "
            f"budgets (env steps) {budgets}")
    refs_md = to_markdown(pd.DataFrame({
        "env": refs["env"], "random score (0)": refs["random_values"], "solved threshold (1)": refs["reference_values"],
        "runs normalized": [f"{r.n_normalized} of {r.n_runs}" for r in refs.itertuples()],
        "note": refs["note"],
    }))
    cmd = "python -m analysis.paper " + " ".join(str(r) for r in data.roots) + f" --out {out_dir}"
    md.append("# Paper analysis: the ESS objective vs tuned objectives under stale and mismatched data\n")
    md.append(f"Generated by `{cmd}`.\n")
    md.append("**Runs.** The headline and mismatch sections pool the roots and count a run key found in several "
              "roots once, from the first root given; the staleness section uses the roots with a lag sweep, the "
              "tuning tax the roots with knob variants (their own default-knob runs included).\n\n"
              + "\n".join(root_lines) + "\n")
    md.append("## Normalization (external references)\n")
    md.append("Each run's final evaluation return (`final_eval_return_mean`, the last deterministic evaluation) "
              "is normalized with its own `config.json`: score = (return − `random_score`) / "
              "(`solved_threshold` − `random_score`), so 0 is the random policy and 1 the environment's solved "
              "threshold. No arm of the sweep is the reference: every algorithm, PPO included, has the "
              "uncertainty of its own runs, and the references are constants.\n\n" + refs_md)
    md.append(f"## Where {ess_algo} wins, ties and loses\n")
    md.append(f"Against the best other algorithm at its default knobs under each condition (highest IQM there): "
              f"win = the {pct} CI of the IQM difference lies above 0, loss = below 0, tie = it covers 0 "
              "(stratified bootstrap, the two algorithms' runs resampled independently within each env).\n")
    if wtl_md:
        md.append("Headline conditions:\n\n" + wtl_md + "\n")
    if stale_wtl_md:
        md.append("Staleness (policy lag):\n\n" + stale_wtl_md + "\n")
    if not (wtl_md or stale_wtl_md):
        md.append(f"_No condition has runs of both {ess_algo} and another algorithm._\n")
    md.append("## Aggregate IQM vs data condition\n")
    if head_md:
        md.append("![Aggregate IQM vs data condition](iqm_conditions.png)\n\n" + head_md + "\n" + method + "\n")
    else:
        md.append("_No run at default knobs under a headline condition._\n")
    md.append("## Aggregate IQM vs staleness\n")
    md.append(("![Aggregate IQM vs staleness](iqm_staleness.png)\n\n" + stale_md + "\n"
               + f"From the roots with a lag sweep ({', '.join(sweep_roots)}); fresh sampler (T = 1, fp32, own log-probs).\n")
              if stale_md else "_No root holds a lag sweep._\n")
    md.append("## Aggregate IQM vs mismatch level\n")
    md.append(("![Aggregate IQM vs mismatch level](iqm_mismatch.png)\n\n" + "\n".join(mism_md) + "\n")
              if mism_md else "_No sampler dial was run at two levels._\n")
    md.append("## Performance profiles\n")
    md.append(("![Performance profiles](profiles.png)\n\n"
               "Fraction of runs whose normalized score exceeds tau (per env, then averaged over envs), as rliable "
               f"draws them; {pct} stratified bootstrap CIs. At selected tau:\n\n" + prof_md)
              if prof_md else "_No run at default knobs under a headline condition._\n")
    md.append("## The tuning tax\n")
    if tune_md:
        md.append(f"From the roots with knob variants ({', '.join(var_roots)}). A configuration is one knob setting "
                  "(`default` = the tuned Zoo values; one knob at a time away from it). Its score is the mean over "
                  "envs of its mean normalized score over seeds. Best / median / worst name the configurations by "
                  f"score; their {pct} CIs are percentile intervals of the max / median / min over configurations "
                  "under a bootstrap that resamples seeds within each env for each configuration.\n\n### Spread over "
                  "configurations\n\n" + tune_md
                  + "\n![Tuning profiles](tuning_profiles.png)\n\nFraction of each algorithm's configurations whose "
                  "score exceeds tau (a flat, high curve: insensitive to its knobs).\n")
        md.append("### Retuning cost\n\nThe configuration that was best on fresh data, scored under each other "
                  "condition, against the best configuration for that condition. Cost = best − fresh-best "
                  f"(0 when the fresh-best stays best), with a paired bootstrap {pct} CI (seeds resampled within each "
                  "env, the same seeds for both configurations).\n\n"
                  + (retune_md + "\n![Retuning cost](retuning_cost.png)\n" if retune_md else "_No algorithm with knob variants ran both fresh and under another condition._\n"))
        md.append("### Score of every configuration\n\nCells: score [CI] (runs).\n\n" + configs_md)
    else:
        md.append("_No root holds knob variants (run the sensitivity suite)._\n")
    if skipped or notes:
        md.append("## Notes\n\n" + "\n".join([f"- not drawn: {s}" for s in skipped] + [f"- {n}" for n in notes]) + "\n")
    md.append("Tables as CSV: " + ", ".join(f"`{p.name}`" for p in csv_paths.values()) + ", `runs.csv`.\n")
    report_md = atomic_write_text(out_dir / "report.md", "\n".join(md))
    return PaperReport(out_dir=out_dir, report_md=report_md, figures=figures, tables=tables, data=data, skipped=skipped)


# --------------------------------------------------------------------------------------------
# command line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m analysis.paper",
        description="The paper's analysis over one or more suite roots: IQM vs condition, staleness and mismatch "
                    "level, performance profiles, the tuning tax and the retuning cost, with external "
                    "normalization (each run's random_score and solved_threshold).",
    )
    p.add_argument("roots", nargs="+", type=Path, metavar="RUNS_ROOT",
                   help="suite folders, e.g. runs/paper runs/sensitivity runs/staleness (the first wins on duplicates)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: <first root>/paper)")
    add_bootstrap_arguments(p)
    p.add_argument("--ess-algo", default=ESS_ALGO, help=f"the objective drawn emphasized and judged (default {ESS_ALGO})")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_report_arguments(_parser(), argv)
    out = args.out if args.out is not None else args.roots[0] / "paper"
    rep = run_reporting(lambda: make_paper_report(
        args.roots, out, confidence=args.confidence, n_resamples=args.resamples, seed=args.seed, ess_algo=args.ess_algo,
    ))
    if rep is None:
        return 1
    for name in ("wins_conditions", "wins_staleness"):
        wtl = rep.tables.get(name)
        if wtl is not None and not wtl.empty:
            fmt = (lambda i: HEADLINE_CONDITIONS[i].label) if name == "wins_conditions" else (lambda v: f"lag {int(v)}")
            print("\n".join(_wtl_lines(wtl, fmt, args.ess_algo)))
    for s in rep.skipped:
        print(f"not drawn: {s}")
    print(f"Wrote {len(rep.figures)} figure(s), {len(rep.tables)} table(s) and report.md to {rep.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
