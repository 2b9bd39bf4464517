"""The paper's runs: several suite roots loaded, pooled and externally normalized.

**Normalization** is external (never the PPO arm of the same sweep): each run's final evaluation
return is mapped to ``(return - random_score) / (solved_threshold - random_score)`` with the two
values of that run's own ``config.json`` (:func:`adaptive_po.analysis.stats.normalize_score`); runs without a
usable pair are left out and listed. A failed run (``FAILED``) is scored, never dropped: the
loader gives it its config's ``random_score`` as final return (:mod:`adaptive_po.analysis.load`), so its
score is 0.

**Several roots.** A run key (env, algorithm, variant, condition, budget, seed) found in several
roots is kept once per root; the sections that pool roots count it once, from the first root given
(:func:`first_root`). The budget (``total_timesteps``) is part of the key: the same cell at two
budgets is two runs. A comparison never mixes budgets: the sections keep one budget per env
(:func:`one_budget_per_env`: the budget of the first root holding the env) and name the runs at
other budgets they leave out; a run missing at that budget is missing (an env not run at every
level is named and left out), never borrowed from another budget.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .labels import condition_label
from .load import CONDITION_KEYS, RUN_KEYS, load_runs
from .stats import normalize_score

__all__ = [
    "PaperData",
    "normalize_runs",
    "reference_table",
    "load_paper_runs",
    "first_root",
    "per_env",
    "seeds_text",
    "consistent_envs",
    "budget_notes",
    "one_budget_per_env",
]


@dataclass
class PaperData:
    """The complete runs of every root, normalized.

    ``finals`` is :attr:`LoadedRuns.finals` of all roots, in the order of the roots (a run key may
    appear once per root; see :func:`first_root`), failed runs included (``failed`` True, scored at
    the random score), with ``root`` (the root it came from),
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
    out = normalize_score(finals["final_eval_return_mean"].to_numpy(dtype=float),
                          finals["random_score"].to_numpy(dtype=float),
                          finals["solved_threshold"].to_numpy(dtype=float), undefined="nan")
    return pd.Series(np.atleast_1d(out), index=finals.index, name="score")


def reference_table(finals: pd.DataFrame) -> pd.DataFrame:
    """Per env: the random score (0) and solved threshold (1) the configs give, how many runs were
    normalized (``n_failed`` of them failed runs, scored 0) and left out, and a note where configs
    disagree (each run uses its own pair)."""
    rows = []
    for env, g in finals.groupby("env", sort=True):
        rnd = sorted(g["random_score"].dropna().unique())
        sol = sorted(g["solved_threshold"].dropna().unique())
        usable = int(np.isfinite(g["score"]).sum())
        n_failed = int((g["failed"] & np.isfinite(g["score"])).sum()) if "failed" in g else 0
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
            n_runs=len(g), n_normalized=usable, n_failed=n_failed, note="; ".join(notes),
        ))
    return pd.DataFrame(rows)


def load_paper_runs(roots: Sequence[str | os.PathLike]) -> PaperData:
    """Load every root with :func:`adaptive_po.analysis.load.load_runs` (failed runs included, scored at the
    random score), keep one row per run key and root (the budget is part of the key) and add the
    external normalization. Raises ``ValueError`` as ``load_runs``."""
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
    finals["failed"] = finals["failed"].astype(bool)
    finals["score"] = normalize_runs(finals)
    finals["cond_label"] = [condition_label(dict(zip(CONDITION_KEYS, r)))
                            for r in finals[CONDITION_KEYS].itertuples(index=False)]
    refs = reference_table(finals)
    for r in refs.itertuples():
        if r.n_normalized < r.n_runs:
            notes.append(f"{r.env}: {r.n_runs - r.n_normalized} run(s) left out (no usable random_score / solved_threshold)")
    return PaperData(roots=paths, finals=finals, references=refs, notes=notes)


# --------------------------------------------------------------------------------------------
# selecting and counting runs


def first_root(df: pd.DataFrame) -> pd.DataFrame:
    """One row per run key (the budget included): the row of the first root given (rows are in the
    order of the roots). Runs of one cell at two budgets are two keys: select one budget per env
    first (:func:`one_budget_per_env`) where they must not meet."""
    return df[~df.duplicated(RUN_KEYS, keep="first")]


def one_budget_per_env(df: pd.DataFrame, section: str) -> tuple[pd.DataFrame, list[str]]:
    """The rows of ``df`` at one budget (``total_timesteps``) per env, and a note per env naming
    the runs left out at other budgets.

    An env's budget is that of the first root (in the order of the rows, i.e. of the roots given)
    holding the env; where that root holds the env at several budgets, the one with the most runs
    (the larger on a tie). Runs at other budgets are left out of the section, never pooled with it:
    a cell missing at the env's budget stays missing."""
    if df.empty:
        return df, []
    keep = pd.Series(False, index=df.index)
    notes = []
    root_order = list(pd.unique(df["root"]))
    for env, g in df.groupby("env", sort=True):
        first = min(g["root"].unique(), key=root_order.index)
        counts = g[g["root"] == first].groupby("total_timesteps").size()
        budget = max(counts.index, key=lambda t: (counts[t], t))
        at = g["total_timesteps"] == budget
        keep[g.index[at]] = True
        other = g[~at]
        if len(other):
            parts = [f"{int(t):,} steps in {r} ({n} run{'s' if n != 1 else ''})"
                     for (t, r), n in other.groupby(["total_timesteps", "root"], sort=True).size().items()]
            notes.append(f"{section}: {env} at {int(budget):,} steps (the budget of {first}, the first root holding it); "
                         f"left out {len(other)} run(s) at other budgets: {'; '.join(parts)}")
    return df[keep], notes


def per_env(df: pd.DataFrame, value: str = "score") -> dict[str, np.ndarray]:
    """``value`` of the runs of each env (the strata of the stratified bootstrap), envs sorted."""
    return {env: g[value].to_numpy(dtype=float) for env, g in df.groupby("env", sort=True)}


def seeds_text(df: pd.DataFrame) -> str:
    """Runs per env: ``4``, or ``2-4`` when envs differ."""
    counts = df.groupby("env").size()
    if counts.empty:
        return "0"
    lo, hi = int(counts.min()), int(counts.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


def consistent_envs(df: pd.DataFrame, level_col: str, levels: Sequence) -> tuple[pd.DataFrame, list[str]]:
    """Rows of the envs that have runs at every level; and the envs dropped."""
    keep, dropped = [], []
    for env, g in df.groupby("env", sort=True):
        present = set(g[level_col])
        (keep if all(lv in present for lv in levels) else dropped).append(env)
    return df[df["env"].isin(keep)], dropped


def budget_notes(df: pd.DataFrame, section: str) -> list[str]:
    """A note per env whose runs mix budgets (``total_timesteps``), naming their roots."""
    notes = []
    for env, g in df.groupby("env", sort=True):
        tt = sorted(g["total_timesteps"].unique())
        if len(tt) > 1:
            notes.append(f"{section}: {env} mixes budgets {', '.join(f'{int(t):,}' for t in tt)} (runs from "
                         f"{', '.join(sorted(g['root'].unique()))})")
    return notes
