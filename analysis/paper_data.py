"""The paper's runs: several suite roots loaded, pooled and externally normalized.

**Normalization** is external (never the PPO arm of the same sweep): each run's final evaluation
return is mapped to ``(return - random_score) / (solved_threshold - random_score)`` with the two
values of that run's own ``config.json`` (:func:`analysis.stats.normalize_score`); runs without a
usable pair are left out and listed.

**Several roots.** A run key (env, algorithm, variant, condition, seed) found in several roots is
kept once per root; the sections that pool roots count it once, from the first root given
(:func:`first_root`).
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
]


@dataclass
class PaperData:
    """The complete runs of every root, normalized.

    ``finals`` is :attr:`LoadedRuns.finals` of all roots, in the order of the roots (a run key may
    appear once per root; see :func:`first_root`), with ``root`` (the root it came from),
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
# selecting and counting runs


def first_root(df: pd.DataFrame) -> pd.DataFrame:
    """One row per run key: the row of the first root given (rows are in the order of the roots)."""
    return df[~df.duplicated(RUN_KEYS, keep="first")]


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
