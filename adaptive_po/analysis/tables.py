"""Result tables: per env/algo/condition/budget finals, normalization references and the aggregate table.

All intervals are 95% percentile-bootstrap intervals by default (see :mod:`adaptive_po.analysis.stats`).

Failed runs are rows of ``runs.finals`` (:mod:`adaptive_po.analysis.load`), scored at their environment's
random score (final return and AUC = the config's ``random_score``, normalized 0): every table
counts them, and the per-cell table has a ``failed`` column. The budget (``total_timesteps``) is
part of a cell: runs of one env, algorithm and condition at two budgets are two rows, never
averaged together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from .conditions import FRESH, NamedCondition
from .labels import BASELINE_ALGO, ESS_ALGO, order_algos, pretty_condition
from .load import CONDITION_KEYS, LoadedRuns, mixed_budget_cells
from .stats import (
    DEFAULT_RESAMPLES,
    NO_INTERVAL,
    bootstrap_ci,
    iqm_ci,
    normalize_score,
    probability_of_improvement_ci,
    without_interval,
)

__all__ = [
    "BASELINE_CONDITION",
    "Aggregate",
    "condition_table",
    "reference_scores",
    "normalized_finals",
    "aggregate_table",
    "to_markdown",
    "format_condition_table",
    "format_aggregate_table",
    "format_references",
    "fmt_num",
    "fmt_interval",
]

#: The reference condition: fresh data, every data dial at its default (:data:`adaptive_po.analysis.conditions.FRESH`).
BASELINE_CONDITION = FRESH


def condition_table(
    runs: LoadedRuns,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    baseline: str = BASELINE_ALGO,
    ess_algo: str = ESS_ALGO,
) -> pd.DataFrame:
    """One row per env x algo x condition x budget (sorted: env, algorithm in the order of
    :func:`adaptive_po.analysis.labels.order_algos`, the condition keys, then the budget): runs (``n_seeds``,
    failed runs included), ``n_failed`` (failed runs, scored at the random score), final return
    mean/std/CI, AUC mean/CI, mean ESS (of the runs that completed). Runs of one cell at two
    budgets (``total_timesteps``) are two rows, never averaged together. A cell of one run has no
    interval: its bounds are NaN."""
    rows = []
    group_cols = ["env", "algo", "condition", "total_timesteps"] + CONDITION_KEYS
    for key, g in runs.finals.groupby(group_cols, sort=True):
        row = dict(zip(group_cols, key))
        final = g["final_eval_return_mean"].to_numpy()
        # one run: no interval (NaN bounds), never a point dressed as one
        ci = without_interval(bootstrap_ci(final, np.mean, confidence=confidence, n_resamples=n_resamples, seed=seed), final)
        auc_ci = without_interval(bootstrap_ci(g["auc"].to_numpy(), np.mean, confidence=confidence,
                                               n_resamples=n_resamples, seed=seed), final)
        row["total_timesteps"] = int(row["total_timesteps"])
        row.update(
            n_seeds=len(g),
            n_failed=int(g["failed"].sum()),
            seeds=",".join(str(s) for s in sorted(g["seed"])),
            final_mean=ci.estimate,
            final_std=float(np.std(final, ddof=1)) if len(final) > 1 else float("nan"),
            final_ci_low=ci.low,
            final_ci_high=ci.high,
            auc_mean=auc_ci.estimate,
            auc_ci_low=auc_ci.low,
            auc_ci_high=auc_ci.high,
            ess=float(g["ess"].mean()),
        )
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    order = {a: i for i, a in enumerate(order_algos(table["algo"], ess_algo, baseline))}
    return table.sort_values(
        ["env", "algo"] + CONDITION_KEYS + ["total_timesteps"], key=lambda s: s.map(order) if s.name == "algo" else s,
        kind="stable",
    ).reset_index(drop=True)


def reference_scores(runs: LoadedRuns, baseline: str = BASELINE_ALGO, reference: str = "solved") -> pd.DataFrame:
    """Per env: the random score (0) and the reference score (1) used to normalize.

    ``reference``: ``"solved"`` (default) uses the config's ``solved_threshold``, a reference
    from outside the sweep (gymnasium's reward threshold, or a published score), so that no arm of
    the sweep scores 1 by construction; ``"auto"`` uses the mean final return of ``baseline`` at
    lag 0, noise 0, replay 0 when those runs exist, else the threshold; ``"baseline"`` only the
    former. Envs without a usable
    pair get NaN and a ``source`` explaining why; they are left out of the aggregate.
    """
    if reference not in ("auto", "baseline", "solved"):
        raise ValueError(f"reference must be 'auto', 'baseline' or 'solved', got {reference!r}")
    f = runs.finals
    rows = []
    for env, g in f.groupby("env", sort=True):
        randoms = g["random_score"].dropna().unique()
        random = float(randoms[0]) if len(randoms) else float("nan")
        solved = g["solved_threshold"].dropna().unique()
        solved_v = float(solved[0]) if len(solved) else float("nan")
        notes = []
        if len(randoms) > 1:
            notes.append(f"configs disagree on random_score {sorted(randoms)}; used {random:g}")
        base = g[(g["algo"] == baseline) & NamedCondition("fresh", BASELINE_CONDITION).mask(g)]
        ref, source = float("nan"), ""
        if reference in ("auto", "baseline") and len(base):
            ref = float(base["final_eval_return_mean"].mean())
            source = f"{baseline} lag 0 mean final return ({len(base)} seeds)"
            if math.isfinite(random) and ref == random:
                notes.append(f"{baseline} lag 0 mean equals random_score")
                ref, source = float("nan"), ""
        if not source and reference in ("auto", "solved") and math.isfinite(solved_v):
            ref, source = solved_v, "solved_threshold (config)"
        if not source:
            source = "none available"
        if not math.isfinite(random):
            notes.append("no random_score in config")
        usable = math.isfinite(random) and math.isfinite(ref) and ref != random
        rows.append(dict(env=env, random=random, reference=ref, source=source, usable=usable,
                         note="; ".join(notes)))
    return pd.DataFrame(rows)


def normalized_finals(runs: LoadedRuns, refs: pd.DataFrame) -> pd.DataFrame:
    """``runs.finals`` of usable envs with ``score_norm`` (final) and ``auc_norm`` columns."""
    usable = refs[refs["usable"]].set_index("env")
    f = runs.finals[runs.finals["env"].isin(usable.index)].copy()
    rnd = f["env"].map(usable["random"]).to_numpy(dtype=float)
    ref = f["env"].map(usable["reference"]).to_numpy(dtype=float)
    f["score_norm"] = normalize_score(f["final_eval_return_mean"].to_numpy(dtype=float), rnd, ref)
    f["auc_norm"] = normalize_score(f["auc"].to_numpy(dtype=float), rnd, ref)
    return f


_AGG_COLUMNS = [
    "algo", "condition", *CONDITION_KEYS, "n_envs", "n_runs", "iqm", "iqm_low", "iqm_high",
    "iqm_auc", "iqm_auc_low", "iqm_auc_high", "poi", "poi_low", "poi_high", "poi_n_envs",
]


@dataclass
class Aggregate:
    """The aggregate table with the per-env references and a sentence on the normalization.
    ``baseline_ran`` is False where no run of ``baseline`` was found: there is then nothing to
    compare with, and no report names the baseline."""

    table: pd.DataFrame
    references: pd.DataFrame
    normalization: str
    baseline: str = BASELINE_ALGO
    notes: list[str] = field(default_factory=list)
    baseline_ran: bool = True


def _normalization_sentence(refs: pd.DataFrame, baseline: str) -> str:
    parts = []
    used = refs[refs["usable"]]
    for source, g in used.groupby("source", sort=True):
        parts.append(f"{source} for {', '.join(g['env'])}")
    text = (
        "Scores are normalized per environment as (return - random) / (reference - random), with "
        "random = the config's `random_score` and reference: " + ("; ".join(parts) or "none") + ". "
        "A failed run (`FAILED`) is scored, never dropped: its final return and AUC are its config's "
        "`random_score` (normalized 0), and it counts in every table (column `failed` per cell)."
    )
    left = refs[~refs["usable"]]
    if len(left):
        text += " Left out of the aggregate (no usable random/reference pair): " + ", ".join(left["env"]) + "."
    return text


def aggregate_table(
    runs: LoadedRuns,
    baseline: str = BASELINE_ALGO,
    reference: str = "solved",
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    ess_algo: str = ESS_ALGO,
) -> Aggregate:
    """Across environments, per algorithm x condition: IQM of normalized final return and of
    normalized AUC with stratified bootstrap CIs (runs resampled within each env), and the
    probability of improvement over ``baseline`` at the same condition (envs where both ran).
    An interval that would rest on one run per env (on either side) is left out (NaN bounds).
    Failed runs count at normalized 0. An env whose runs hold several budgets is named in the
    notes (the aggregate pools its budgets; the per-cell table keeps them apart)."""
    refs = reference_scores(runs, baseline=baseline, reference=reference)
    notes = [f"{r.env}: left out of the aggregate ({r.source}{'; ' + r.note if r.note else ''})"
             for r in refs.itertuples() if not r.usable]
    norm = normalized_finals(runs, refs)
    for env, g in norm.groupby("env", sort=True):
        budgets = sorted(int(t) for t in g["total_timesteps"].unique())
        if len(budgets) > 1:
            cells = mixed_budget_cells(g)
            notes.append(f"{env}: runs at budgets {', '.join(f'{b:,}' for b in budgets)} steps enter the aggregate "
                         "together (the per-cell table keeps the budgets apart)"
                         + (f"; cells holding several budgets: {'; '.join(cells)}" if cells else ""))
    cols = ["algo", "condition"] + CONDITION_KEYS
    rows = []
    if not norm.empty:
        groups = dict(tuple(norm.groupby(cols, sort=True)))
        for key, g in groups.items():
            algo = key[0]
            per_env = {env: ge["score_norm"].to_numpy() for env, ge in g.groupby("env", sort=True)}
            per_env_auc = {env: ge["auc_norm"].to_numpy() for env, ge in g.groupby("env", sort=True)}
            ci = without_interval(iqm_ci(per_env, confidence=confidence, n_resamples=n_resamples, seed=seed), per_env)
            ci_auc = without_interval(iqm_ci(per_env_auc, confidence=confidence, n_resamples=n_resamples, seed=seed), per_env)
            row = dict(zip(cols, key))
            row.update(
                n_envs=len(per_env), n_runs=len(g),
                iqm=ci.estimate, iqm_low=ci.low, iqm_high=ci.high,
                iqm_auc=ci_auc.estimate, iqm_auc_low=ci_auc.low, iqm_auc_high=ci_auc.high,
                poi=np.nan, poi_low=np.nan, poi_high=np.nan, poi_n_envs=0,
            )
            base_key = (baseline,) + tuple(key[1:])
            if algo != baseline and base_key in groups:
                b = groups[base_key]
                base_env = {env: gb["score_norm"].to_numpy() for env, gb in b.groupby("env", sort=True)}
                common = [e for e in per_env if e in base_env]
                if common:
                    arm_runs, base_runs = {e: per_env[e] for e in common}, {e: base_env[e] for e in common}
                    poi = without_interval(probability_of_improvement_ci(
                        arm_runs, base_runs, confidence=confidence, n_resamples=n_resamples, seed=seed,
                    ), arm_runs, base_runs)
                    row.update(poi=poi.estimate, poi_low=poi.low, poi_high=poi.high, poi_n_envs=len(common))
            rows.append(row)
    table = pd.DataFrame(rows, columns=_AGG_COLUMNS)
    if not table.empty:
        order = {a: i for i, a in enumerate(order_algos(table["algo"], ess_algo, baseline))}
        table = table.sort_values(
            CONDITION_KEYS + ["algo"], key=lambda s: s.map(order) if s.name == "algo" else s, kind="stable"
        ).reset_index(drop=True)
    return Aggregate(table=table, references=refs, normalization=_normalization_sentence(refs, baseline),
                     baseline=baseline, notes=notes, baseline_ran=bool((runs.finals["algo"] == baseline).any()))


# --------------------------------------------------------------------------------------------
# formatting


def _decimals(x) -> int:
    """Decimals for a value of this magnitude: 0 from 1000 up, 1 from 100, else 2."""
    try:
        ax = abs(float(x))
    except (TypeError, ValueError):
        return 2
    if not math.isfinite(ax):
        return 2
    return 0 if ax >= 1000 else 1 if ax >= 100 else 2


def fmt_num(x, digits: int | None = None) -> str:
    """Readable number: thousands without decimals (with separators), smaller values with 1-2
    decimals; ``digits`` forces the number of decimals. NaN/None give an em dash."""
    if x is None or not math.isfinite(float(x)):
        return "—"
    x = float(x)
    d = _decimals(x) if digits is None else digits
    return f"{x:,.{d}f}"


def _no_bounds(lo, hi) -> bool:
    return any(v is None or not math.isfinite(float(v)) for v in (lo, hi))


def fmt_interval(est, lo, hi, digits: int | None = None) -> str:
    """``est [lo, hi]`` with the bounds at the estimate's precision; ``est (n = 1, no interval)``
    where the bounds are NaN (an interval that would rest on one run)."""
    if est is None or not math.isfinite(float(est)):
        return "—"
    d = _decimals(est) if digits is None else digits
    if _no_bounds(lo, hi):
        return f"{fmt_num(est, d)} ({NO_INTERVAL})"
    return f"{fmt_num(est, d)} [{fmt_num(lo, d)}, {fmt_num(hi, d)}]"


def to_markdown(df: pd.DataFrame, align: Sequence[str] | None = None) -> str:
    """A GitHub-flavoured Markdown table (no extra dependency). ``align``: 'l'/'r' per column."""
    cols = [str(c) for c in df.columns]
    align = list(align) if align is not None else ["l"] * len(cols)

    def esc(v) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(c) for c in cols) + " |",
             "|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(esc(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def format_aggregate_table(agg: Aggregate, confidence: float = 0.95) -> pd.DataFrame:
    """The aggregate table with readable columns (strings), ready for Markdown or the terminal. The
    column of the probability of improvement is there only where the baseline ran."""
    t = agg.table
    pct = f"{round(confidence * 100):d}%"
    out = pd.DataFrame({
        "algorithm": t["algo"],
        "condition": [pretty_condition(*r) for r in t[CONDITION_KEYS].itertuples(index=False)],
        "envs": t["n_envs"],
        "runs": t["n_runs"],
        f"IQM normalized final return [{pct} CI]": [
            fmt_interval(r.iqm, r.iqm_low, r.iqm_high, 2) for r in t.itertuples()],
        f"IQM normalized AUC [{pct} CI]": [
            fmt_interval(r.iqm_auc, r.iqm_auc_low, r.iqm_auc_high, 2) for r in t.itertuples()],
        f"P(algorithm > {agg.baseline}) [{pct} CI]": [
            ("(baseline)" if r.algo == agg.baseline else
             fmt_interval(r.poi, r.poi_low, r.poi_high, 2) + (f" ({r.poi_n_envs} envs)" if r.poi_n_envs else ""))
            for r in t.itertuples()],
    }) if not t.empty else pd.DataFrame()
    if not agg.baseline_ran and not out.empty:
        out = out.drop(columns=out.columns[-1])
    return out


def format_condition_table(ct: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """The per-cell table with readable columns: the budget (``steps``), the runs (``seeds``, failed
    ones included) and the failed runs among them (``failed``, bold where not 0)."""
    pct = f"{round(confidence * 100):d}%"
    return pd.DataFrame({
        "env": ct["env"],
        "algorithm": ct["algo"],
        "condition": [pretty_condition(*r) for r in ct[CONDITION_KEYS].itertuples(index=False)],
        "steps": [f"{int(t):,}" for t in ct["total_timesteps"]],
        "seeds": ct["n_seeds"],
        "failed": [f"**{n}**" if n else "0" for n in ct["n_failed"]],
        "final return mean ± std": [
            f"{fmt_num(r.final_mean)} ± {fmt_num(r.final_std, _decimals(r.final_mean))}" for r in ct.itertuples()],
        f"final return {pct} CI": [
            NO_INTERVAL if _no_bounds(r.final_ci_low, r.final_ci_high) else
            f"[{fmt_num(r.final_ci_low, _decimals(r.final_mean))}, {fmt_num(r.final_ci_high, _decimals(r.final_mean))}]"
            for r in ct.itertuples()],
        f"AUC mean [{pct} CI]": [fmt_interval(r.auc_mean, r.auc_ci_low, r.auc_ci_high) for r in ct.itertuples()],
        "mean ESS": [fmt_num(r.ess, 3) for r in ct.itertuples()],
    })


def format_references(refs: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "env": refs["env"],
        "random (0)": [fmt_num(v) for v in refs["random"]],
        "reference (1)": [fmt_num(v) for v in refs["reference"]],
        "reference source": refs["source"],
        "used": ["yes" if u else "no" for u in refs["usable"]],
        "note": refs["note"],
    })
