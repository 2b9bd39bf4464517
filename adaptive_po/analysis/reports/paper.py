"""The paper's analysis: the ESS objective vs tuned objectives under stale and mismatched data.

``python -m adaptive_po.analysis.reports.paper RUNS_ROOT [RUNS_ROOT ...] --out DIR`` (see :func:`main`) reads one or
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

**Failures are scored, never dropped.** A failed run (``FAILED`` with a readable ``config.json``)
is scored at its environment's random score (its config's ``random_score``, normalized 0) and
counted wherever its cell is: in the IQMs, the profiles and the tuning tax, where a configuration
with a failed run is scored with it, so no environment is dropped from a tuning cell because one
configuration failed there.

**Several roots.** The headline figures and the mismatch figure pool the runs at the default knobs
(``variant == ""``) of every root and count a run key (env, algorithm, variant, condition, budget,
seed) found in several roots once, from the first root given: list the main suite first. No
comparison mixes budgets: every section keeps one budget (``total_timesteps``) per env, the budget
of the first root holding it, and names the runs at other budgets it leaves out; a run missing at
that budget is missing, never borrowed from another budget. An environment enters a figure only if
it has runs at every level on that figure's x axis. The staleness figure uses only the roots whose
fresh-sampler runs hold a lag sweep (3 lags or more, else 2), the tuning tax only the roots that
hold knob variants.

How it is built: the report is a list of sections (:data:`SECTIONS`), each a small function of a
:class:`PaperContext` that returns its Markdown and registers its tables and figures with the
context; :func:`make_paper_report` runs them in one loop. The analyses two sections share (the
headline conditions, the staleness sweep) are computed once, on first use. The analysis itself is
the core's: :mod:`adaptive_po.analysis.paper_data` (several roots loaded, pooled, normalized),
:mod:`adaptive_po.analysis.comparisons` (IQM per level, wins/ties/losses),
:mod:`adaptive_po.analysis.tuning_tax` and :mod:`adaptive_po.analysis.plots`. Only
:mod:`adaptive_po.contract` of the training package is imported (never torch).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from adaptive_po.contract import atomic_write_text, report_folder

from ..comparisons import iqm_by_level, tau_grid, wins_ties_losses
from ..conditions import HEADLINE_CONDITIONS, MISMATCH_AXES, fresh_except
from ..labels import (
    AXIS_LABELS,
    BASELINE_ALGO,
    ESS_ALGO,
    algo_markdown,
    condition_sort_key,
    config_name,
    fmt_level,
    level_key,
    order_algos,
)
from ..load import CONDITION_KEYS, run_reporting
from ..paper_data import PaperData, budget_notes, consistent_envs, first_root, load_paper_runs, one_budget_per_env, per_env
from ..plots import algo_colors, plot_iqm_axes, plot_iqm_levels, plot_profiles, plot_retuning
from ..output import save_csv, save_figure
from ..stats import DEFAULT_RESAMPLES, add_bootstrap_arguments, parse_report_arguments, performance_profile
from ..tables import fmt_interval, to_markdown
from ..tuning_tax import config_scores, retuning_cost, tuning_profile, tuning_spread

__all__ = ["PaperReport", "PaperContext", "SECTIONS", "make_paper_report", "wtl_lines", "main"]


def _ci_text(est, lo, hi) -> str:
    return fmt_interval(est, lo, hi, 2)


def _counts_text(row) -> str:
    return f"{row.n_envs}×{row.seeds_per_env}" if "-" not in str(row.seeds_per_env) \
        else f"{row.n_runs} runs / {row.n_envs} envs"


def _wide_iqm(table: pd.DataFrame, levels: Sequence, headers: Sequence[str], ess_algo: str) -> pd.DataFrame:
    """Rows: algorithms; columns: levels; cells ``IQM [CI] (envs×seeds)``."""
    out = []
    for algo in order_algos(table["algo"], ess_algo):
        t = table[table["algo"] == algo].set_index("level")
        row = {"algorithm": algo_markdown(algo, ess_algo)}
        for lv, h in zip(levels, headers):
            row[h] = (f"{_ci_text(t.at[lv, 'iqm'], t.at[lv, 'low'], t.at[lv, 'high'])} ({_counts_text(t.loc[lv])})"
                      if lv in t.index else "—")
        out.append(row)
    return pd.DataFrame(out, columns=["algorithm", *headers])


def wtl_lines(wtl: pd.DataFrame, fmt_level: Callable, ess_algo: str) -> list[str]:
    """One sentence per level of a :func:`adaptive_po.analysis.comparisons.wins_ties_losses` table."""
    lines = []
    for r in wtl.itertuples():
        word = {"win": "**wins**", "loss": "**loses**", "tie": "ties"}[r.verdict]
        lines.append(f"- {fmt_level(r.level)}: {ess_algo} {word} against {r.best_other} (the best other "
                     f"algorithm there): IQM {r.ess_iqm:.2f} vs {r.other_iqm:.2f}, difference "
                     f"{_ci_text(r.diff, r.low, r.high)} over {r.n_envs} env(s)")
    return lines


def _headline_label(i) -> str:
    return HEADLINE_CONDITIONS[i].label


def _lag_label(v) -> str:
    return f"lag {int(v)}"


@dataclass
class PaperReport:
    """What :func:`make_paper_report` wrote and computed."""

    out_dir: Path
    report_md: Path
    figures: dict[str, Path]
    tables: dict[str, pd.DataFrame]
    data: PaperData
    skipped: list[str] = field(default_factory=list)


@dataclass
class PaperContext:
    """The loaded runs, the report's settings, and what the sections have produced so far."""

    data: PaperData
    out_dir: Path
    confidence: float = 0.95
    n_resamples: int = DEFAULT_RESAMPLES
    seed: int | None = 0
    ess_algo: str = ESS_ALGO
    profile_taus: Sequence[float] = (0.5, 1.0)
    dpi: int = 120
    figures: dict[str, Path] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.notes = list(self.data.notes)
        scored = self.data.scored
        self.scored = scored
        self.default = scored[scored["variant"] == ""]
        # the sections that pool roots keep one budget per env and count a run key once
        pooled, notes = one_budget_per_env(self.default, "headline and mismatch")
        self.notes += notes
        self.pooled = first_root(pooled)
        self.colors = algo_colors(sorted(set(scored["algo"]) | set(scored["base_algo"])), BASELINE_ALGO, self.ess_algo)

    @property
    def kw(self) -> dict:
        return dict(confidence=self.confidence, n_resamples=self.n_resamples, seed=self.seed)

    @property
    def pct(self) -> str:
        return f"{round(self.confidence * 100)}%"

    @property
    def method(self) -> str:
        return (f"IQM = interquartile mean of the normalized final scores of all runs (envs × seeds) of the cell; "
                f"{self.pct} CIs are percentile intervals of a stratified bootstrap ({self.n_resamples} resamples; runs "
                f"resampled within each env). Cells read `IQM [CI] (envs×seeds)`.")

    def figure(self, name: str, fig) -> None:
        self.figures[name] = save_figure(fig, self.out_dir / name, self.dpi)

    # ---- analyses shared by several sections, computed on first use

    @cached_property
    def headline(self) -> SimpleNamespace:
        """The pooled default-knob runs under the headline conditions: IQM table, figure, verdicts."""
        pct, ess = self.pct, self.ess_algo
        head = self.pooled.copy()
        head["hl"] = -1
        for i, cond in enumerate(HEADLINE_CONDITIONS):
            head.loc[cond.mask(head), "hl"] = i
        head = head[head["hl"] >= 0]
        levels = sorted(head["hl"].unique())
        head, dropped = consistent_envs(head, "hl", levels)
        if dropped:
            self.notes.append(f"headline: env(s) {', '.join(dropped)} left out (no runs at every headline condition present)")
        self.notes += budget_notes(head, "headline")
        labels = [_headline_label(i) for i in levels]
        out = SimpleNamespace(frame=head, levels=levels, labels=labels, md="", wtl_md="")
        if head.empty:
            self.skipped.append("iqm_conditions.png: no run at default knobs under a headline condition")
            return out
        t = iqm_by_level(head, "hl", levels, ess_algo=ess, **self.kw)
        self.tables["iqm_conditions"] = t.assign(condition=t["level"].map(_headline_label))
        self.figure("iqm_conditions.png", plot_iqm_levels(
            t, levels, labels, "data condition", "Aggregate IQM vs data condition",
            f"default knobs; {head['env'].nunique()} envs ({', '.join(sorted(head['env'].unique()))}); "
            f"{pct} stratified bootstrap CI band", self.colors, ess))
        out.md = to_markdown(_wide_iqm(t, levels, labels, ess))
        wtl = wins_ties_losses(head, "hl", levels, ess, **self.kw)
        self.tables["wins_conditions"] = wtl.assign(condition=wtl["level"].map(_headline_label))
        out.wtl_md = "\n".join(wtl_lines(wtl, _headline_label, ess))
        return out

    @cached_property
    def staleness(self) -> SimpleNamespace:
        """The roots that hold a lag sweep (fresh sampler): IQM table, figure, verdicts."""
        pct, ess = self.pct, self.ess_algo
        fresh_sampler = fresh_except(self.default, "policy_lag")
        lags_per_root = fresh_sampler.groupby("root")["policy_lag"].nunique()
        roots = list(lags_per_root[lags_per_root >= 3].index) or list(lags_per_root[lags_per_root >= 2].index)
        out = SimpleNamespace(roots=roots, md="", wtl_md="")
        if not roots:
            self.skipped.append("iqm_staleness.png: no root holds runs at two or more policy lags (fresh sampler)")
            return out
        st, notes = one_budget_per_env(fresh_sampler[fresh_sampler["root"].isin(roots)], "staleness")
        self.notes += notes
        st = first_root(st)
        lags = sorted(int(v) for v in st["policy_lag"].unique())
        st, dropped = consistent_envs(st, "policy_lag", lags)
        if dropped:
            self.notes.append(f"staleness: env(s) {', '.join(dropped)} left out (not run at every lag {lags})")
        self.notes += budget_notes(st, "staleness")
        t = iqm_by_level(st, "policy_lag", lags, ess_algo=ess, **self.kw)
        self.tables["iqm_staleness"] = t
        self.figure("iqm_staleness.png", plot_iqm_levels(
            t, lags, [str(v) for v in lags], AXIS_LABELS["policy_lag"] + " (categorical axis)",
            "Aggregate IQM vs staleness",
            f"default knobs, fresh sampler; {st['env'].nunique()} envs; roots {', '.join(roots)}; "
            f"{pct} stratified bootstrap CI band", self.colors, ess))
        out.md = to_markdown(_wide_iqm(t, lags, [_lag_label(v) for v in lags], ess))
        wtl = wins_ties_losses(st, "policy_lag", lags, ess, **self.kw)
        self.tables["wins_staleness"] = wtl
        out.wtl_md = "\n".join(wtl_lines(wtl, _lag_label, ess))
        return out


# --------------------------------------------------------------------------------------------
# the sections, in the order of report.md


def section_runs(ctx: PaperContext) -> list[str]:
    """Title, the command, and what each root holds."""
    f = ctx.data.finals
    root_lines = []
    for root in ctx.data.roots:
        g = f[f["root"] == str(root)]
        if g.empty:
            continue
        budgets = "; ".join(f"{env} {', '.join(f'{int(t):,}' for t in sorted(ge['total_timesteps'].unique()))}"
                            for env, ge in g.groupby("env", sort=True))
        n_failed = int(g["failed"].sum())
        root_lines.append(
            f"- `{root}`: {len(g)} runs"
            + (f" ({n_failed} failed, scored at the random score)" if n_failed else "")
            + f"; envs {', '.join(sorted(g['env'].unique()))}; "
            f"{g['base_algo'].nunique()} algorithms"
            + (f" in {g['algo'].nunique()} configurations" if g["algo"].nunique() > g["base_algo"].nunique() else "")
            + "; "
            f"{g['condition'].nunique()} conditions; seeds {', '.join(str(int(s)) for s in sorted(g['seed'].unique()))}; "
            f"budgets (env steps) {budgets}")
    cmd = "python -m adaptive_po.analysis.reports.paper " + " ".join(str(r) for r in ctx.data.roots) + f" --out {ctx.out_dir}"
    return [
        "# Paper analysis: the ESS objective vs tuned objectives under stale and mismatched data\n",
        f"Generated by `{cmd}`.\n",
        "**Runs.** The headline and mismatch sections pool the roots and count a run key found in several "
        "roots once, from the first root given; the staleness section uses the roots with a lag sweep, the "
        "tuning tax the roots with knob variants (their own default-knob runs included). The budget "
        "(`total_timesteps`) is part of a run's key, and no comparison mixes budgets: each section keeps one "
        "budget per env (that of the first root holding it) and names the runs at other budgets it leaves "
        "out; a run missing at that budget is never borrowed from another.\n\n"
        + "\n".join(root_lines) + "\n",
    ]


def section_normalization(ctx: PaperContext) -> list[str]:
    """The external references of every env."""
    refs = ctx.data.references
    refs_md = to_markdown(pd.DataFrame({
        "env": refs["env"], "random score (0)": refs["random_values"], "solved threshold (1)": refs["reference_values"],
        "runs normalized": [f"{r.n_normalized} of {r.n_runs}" + (f" ({r.n_failed} failed, scored 0)" if r.n_failed else "")
                            for r in refs.itertuples()],
        "note": refs["note"],
    }))
    return [
        "## Normalization (external references)\n",
        "Each run's final evaluation return (`final_eval_return_mean`, the last deterministic evaluation) "
        "is normalized with its own `config.json`: score = (return − `random_score`) / "
        "(`solved_threshold` − `random_score`), so 0 is the random policy and 1 the environment's solved "
        "threshold. No arm of the sweep is the reference: every algorithm, PPO included, has the "
        "uncertainty of its own runs, and the references are constants. A failed run (`FAILED`) is scored, "
        "never dropped: its final return is its config's `random_score` (score 0), and it counts in every "
        "table, the tuning tax included.\n\n" + refs_md,
    ]


def section_verdicts(ctx: PaperContext) -> list[str]:
    """Where the ESS objective wins, ties and loses (headline conditions, then staleness)."""
    head, stale, ess = ctx.headline, ctx.staleness, ctx.ess_algo
    md = [f"## Where {ess} wins, ties and loses\n",
          f"Against the best other algorithm at its default knobs under each condition (highest IQM there): "
          f"win = the {ctx.pct} CI of the IQM difference lies above 0, loss = below 0, tie = it covers 0 "
          "(stratified bootstrap, the two algorithms' runs resampled independently within each env). "
          "Descriptive only: a pooled-IQM percentile bootstrap with no multiplicity control is anti-conservative at these seed "
          "counts (`docs/results/calibration.md`); the verdicts are `verdicts.md`'s (`make classic-from-table`).\n"]
    if head.wtl_md:
        md.append("Headline conditions:\n\n" + head.wtl_md + "\n")
    if stale.wtl_md:
        md.append("Staleness (policy lag):\n\n" + stale.wtl_md + "\n")
    if not (head.wtl_md or stale.wtl_md):
        md.append(f"_No condition has runs of both {ess} and another algorithm._\n")
    return md


def section_headline(ctx: PaperContext) -> list[str]:
    """Aggregate IQM vs the headline conditions."""
    head = ctx.headline
    if head.md:
        return ["## Aggregate IQM vs data condition\n",
                "![Aggregate IQM vs data condition](iqm_conditions.png)\n\n" + head.md + "\n" + ctx.method + "\n"]
    return ["## Aggregate IQM vs data condition\n", "_No run at default knobs under a headline condition._\n"]


def section_staleness(ctx: PaperContext) -> list[str]:
    """Aggregate IQM vs policy lag, from the roots with a lag sweep."""
    stale = ctx.staleness
    return ["## Aggregate IQM vs staleness\n",
            ("![Aggregate IQM vs staleness](iqm_staleness.png)\n\n" + stale.md + "\n"
             + f"From the roots with a lag sweep ({', '.join(stale.roots)}); fresh sampler (T = 1, fp32, own log-probs).\n")
            if stale.md else "_No root holds a lag sweep._\n"]


def section_mismatch(ctx: PaperContext) -> list[str]:
    """Aggregate IQM vs every other dial that was run at two levels or more."""
    panels, mism_md = [], []
    for axis in MISMATCH_AXES:
        sl = fresh_except(ctx.pooled, axis)
        levels = sorted(sl[axis].unique(), key=lambda v: level_key(axis, v))
        if len(levels) < 2:
            continue
        sl, dropped = consistent_envs(sl, axis, levels)
        if dropped:
            ctx.notes.append(f"mismatch ({axis}): env(s) {', '.join(dropped)} left out (not run at every level)")
        if sl.empty:
            continue
        t = iqm_by_level(sl, axis, levels, ess_algo=ctx.ess_algo, **ctx.kw)
        ctx.tables[f"iqm_{axis}"] = t
        panels.append((axis, t, levels))
        mism_md.append(f"**{AXIS_LABELS[axis]}** ({sl['env'].nunique()} envs; other dials fresh)\n\n"
                       + to_markdown(_wide_iqm(t, levels, [fmt_level(axis, lv) for lv in levels], ctx.ess_algo)))
    if panels:
        ctx.figure("iqm_mismatch.png", plot_iqm_axes(
            panels, ctx.colors, f"default knobs, the other dials at fresh values; {ctx.pct} stratified bootstrap CI band",
            ctx.ess_algo))
    else:
        ctx.skipped.append("iqm_mismatch.png: no sampler temperature, precision or other dial was run at two levels")
    return ["## Aggregate IQM vs mismatch level\n",
            ("![Aggregate IQM vs mismatch level](iqm_mismatch.png)\n\n" + "\n".join(mism_md) + "\n")
            if mism_md else "_No sampler dial was run at two levels._\n"]


def section_profiles(ctx: PaperContext) -> list[str]:
    """Performance profiles under the headline conditions."""
    head, pct, ess = ctx.headline, ctx.pct, ctx.ess_algo
    md = ["## Performance profiles\n"]
    if head.frame.empty:
        ctx.skipped.append("profiles.png: no run at default knobs under a headline condition")
        return md + ["_No run at default knobs under a headline condition._\n"]
    frame = head.frame
    taus = tau_grid(frame["score"].to_numpy(dtype=float))
    prof_panels, prof_rows, at_rows = [], [], []
    for i, label in zip(head.levels, head.labels):
        g = frame[frame["hl"] == i]
        curves = {}
        for algo, ga in g.groupby("algo", sort=True):
            curves[algo] = performance_profile(per_env(ga), taus, **ctx.kw)
            prof_rows.append(pd.DataFrame({"condition": label, "algo": algo, **curves[algo]}))
            at = performance_profile(per_env(ga), ctx.profile_taus, **ctx.kw)
            row = {"condition": label, "algorithm": algo_markdown(algo, ess),
                   "runs": len(ga), "_order": order_algos(g["algo"], ess).index(algo)}
            for k, tau in enumerate(ctx.profile_taus):
                row[f"runs > {tau:g} [{pct} CI]"] = _ci_text(at["fraction"][k], at["low"][k], at["high"][k])
            at_rows.append(row)
        prof_panels.append((label, curves))
    ctx.tables["profiles"] = pd.concat(prof_rows, ignore_index=True)
    ctx.figure("profiles.png", plot_profiles(
        prof_panels, ctx.colors, "fraction of runs with score > tau", "Performance profiles",
        f"default knobs; fraction of runs above tau, mean over envs; {pct} stratified bootstrap CI band", ess))
    at_df = pd.DataFrame(at_rows)
    at_df["_c"] = at_df["condition"].map({lb: k for k, lb in enumerate(head.labels)})
    prof_md = to_markdown(at_df.sort_values(["_c", "_order"]).drop(columns=["_c", "_order"]))
    return md + ["![Performance profiles](profiles.png)\n\n"
                 "Fraction of runs whose normalized score exceeds tau (per env, then averaged over envs), as rliable "
                 f"draws them; {pct} stratified bootstrap CIs. At selected tau:\n\n" + prof_md]


def section_tuning(ctx: PaperContext) -> list[str]:
    """The tuning tax: spread over configurations, retuning cost, every configuration's score."""
    pct, ess, scored = ctx.pct, ctx.ess_algo, ctx.scored
    md = ["## The tuning tax\n"]
    var_roots = sorted(scored.loc[scored["variant"] != "", "root"].unique())
    tv, notes = one_budget_per_env(scored[scored["root"].isin(var_roots)], "tuning")
    ctx.notes += notes
    tv = first_root(tv)
    cells = config_scores(tv, n_resamples=ctx.n_resamples, seed=ctx.seed, confidence=ctx.confidence) if var_roots else []
    if not cells:
        ctx.skipped.append("tuning_profiles.png, retuning_cost.png: no root holds knob variants (the sensitivity suite)")
        return md + ["_No root holds knob variants (run the sensitivity suite)._\n"]

    def cond_key(condition: str) -> tuple:
        return condition_sort_key(dict(zip(CONDITION_KEYS, tv[tv["condition"] == condition][CONDITION_KEYS].iloc[0])))

    def algo_rank(algos) -> dict:
        return {a: i for i, a in enumerate(order_algos(algos, ess))}

    ctx.notes += budget_notes(tv, "tuning")
    for c in cells:
        if c.dropped_envs:
            ctx.notes.append(f"tuning: {c.base_algo} at {c.cond_label}: env(s) {', '.join(c.dropped_envs)} left out "
                             "(not run with every configuration)")
        for v, per_env_failed in c.failed.items():
            if per_env_failed:
                counts = ", ".join(f"{n} failed run(s) on {e}" for e, n in per_env_failed.items())
                ctx.notes.append(f"tuning: {c.base_algo} ({config_name(v)}) at {c.cond_label}: {counts} "
                                 "scored at the random score (0)")
    spread = tuning_spread(cells, ctx.confidence)
    spread["_c"] = [cond_key(c) for c in spread["condition"]]
    spread["_a"] = spread["base_algo"].map(algo_rank(spread["base_algo"]))
    spread = spread.sort_values(["_c", "_a"]).drop(columns=["_c", "_a"]).reset_index(drop=True)
    ctx.tables["tuning_spread"] = spread
    tune_md = to_markdown(pd.DataFrame({
        "condition": spread["cond_label"],
        "algorithm": [algo_markdown(a, ess) for a in spread["base_algo"]],
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
            ci = c.config_ci(k, ctx.confidence)
            cfg_rows.append(dict(base_algo=c.base_algo, condition=c.condition, cond_label=c.cond_label,
                                 config=config_name(v), variant=v, n_envs=len(c.envs),
                                 n_runs=int(sum(len(s) for s in c.seeds[v].values())),
                                 n_failed=int(sum(c.failed[v].values())),
                                 score=ci.estimate, low=ci.low, high=ci.high))
    cfg_table = pd.DataFrame(cfg_rows)
    ctx.tables["tuning_configs"] = cfg_table
    cond_order = sorted(dict.fromkeys(zip(cfg_table["condition"], cfg_table["cond_label"])), key=lambda cl: cond_key(cl[0]))
    rank = algo_rank(cfg_table["base_algo"])
    cfg_wide = []
    for (base, cfg), g in sorted(cfg_table.groupby(["base_algo", "config"]),
                                 key=lambda kv: (rank[kv[0][0]], kv[0][1] != "default", kv[0][1])):
        row = {"algorithm": base, "configuration": cfg}
        for cond, label in cond_order:
            h = g[g["condition"] == cond]
            failed = int(h["n_failed"].iloc[0]) if len(h) else 0
            row[label] = (f"{_ci_text(h['score'].iloc[0], h['low'].iloc[0], h['high'].iloc[0])} ({h['n_runs'].iloc[0]}"
                          + (f", {failed} failed" if failed else "") + ")") if len(h) else "—"
        cfg_wide.append(row)
    configs_md = to_markdown(pd.DataFrame(cfg_wide))

    taus = tau_grid(np.concatenate([c.scores for c in cells]))
    by_cond: dict[tuple, dict] = {}
    for c in cells:
        by_cond.setdefault((c.condition, c.cond_label), {})[c.base_algo] = tuning_profile(c, taus, ctx.confidence)
    tp_panels = [(label, curves) for (cond, label), curves in sorted(by_cond.items(), key=lambda kv: cond_order.index(kv[0]))]
    ctx.figure("tuning_profiles.png", plot_profiles(
        tp_panels, ctx.colors, "fraction of configurations with score > tau",
        "Tuning profiles: spread over each algorithm's configurations",
        f"score of a configuration = mean over envs of its mean normalized score over seeds; "
        f"roots {', '.join(var_roots)}; {pct} bootstrap CI band", ess))

    cost = retuning_cost(cells, **ctx.kw)
    cost["_c"] = [[o[0] for o in cond_order].index(c) for c in cost["condition"]]
    cost["_a"] = cost["base_algo"].map(algo_rank(cost["base_algo"]))
    cost = cost.sort_values(["_c", "_a"]).drop(columns=["_c", "_a"]).reset_index(drop=True)
    ctx.tables["retuning_cost"] = cost
    retune_md = ""
    if not cost.empty:
        ctx.figure("retuning_cost.png", plot_retuning(
            cost, ctx.colors, f"mean normalized score over envs × seeds; paired bootstrap {pct} CI "
            f"(seeds resampled within each env); roots {', '.join(var_roots)}", ess))
        retune_md = to_markdown(pd.DataFrame({
            "condition": cost["cond_label"],
            "algorithm": [algo_markdown(a, ess) for a in cost["base_algo"]],
            "envs": cost["n_envs"],
            "fresh-best configuration": cost["fresh_best_config"],
            f"its score here [{pct} CI]": [_ci_text(r.fresh_best_score, r.fresh_best_low, r.fresh_best_high) for r in cost.itertuples()],
            "best configuration here": cost["best_config"],
            f"best score here [{pct} CI]": [_ci_text(r.best_score, r.best_low, r.best_high) for r in cost.itertuples()],
            f"retuning cost [{pct} CI]": [_ci_text(r.cost, r.cost_low, r.cost_high) for r in cost.itertuples()],
        }))
    else:
        ctx.skipped.append("retuning_cost.png: no algorithm with knob variants was run both fresh and under another condition")

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
              + (retune_md + "\n![Retuning cost](retuning_cost.png)\n" if retune_md
                 else "_No algorithm with knob variants ran both fresh and under another condition._\n"))
    md.append("### Score of every configuration\n\nCells: score [CI] (runs, of which failed: scored 0).\n\n"
              + configs_md)
    return md


def section_notes(ctx: PaperContext) -> list[str]:
    """Figures not drawn and everything left out."""
    if not (ctx.skipped or ctx.notes):
        return []
    return ["## Notes\n\n" + "\n".join([f"- not drawn: {s}" for s in ctx.skipped] + [f"- {n}" for n in ctx.notes]) + "\n"]


def section_tables(ctx: PaperContext) -> list[str]:
    """Every table as CSV (and all runs as ``runs.csv``)."""
    ctx.tables["references"] = ctx.data.references
    paths = [save_csv(df, ctx.out_dir / f"{name}.csv") for name, df in ctx.tables.items()]
    save_csv(ctx.data.finals, ctx.out_dir / "runs.csv")
    return ["Tables as CSV: " + ", ".join(f"`{p.name}`" for p in paths) + ", `runs.csv`.\n"]


#: the sections of report.md, in order
SECTIONS: tuple[Callable[[PaperContext], list[str]], ...] = (
    section_runs, section_normalization, section_verdicts, section_headline, section_staleness,
    section_mismatch, section_profiles, section_tuning, section_notes, section_tables,
)


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
    """Load ``roots``, run every section (tables, figures and Markdown) and write ``report.md``
    into ``out`` (atomically). Raises ``ValueError`` when a root cannot be loaded."""
    data = load_paper_runs(roots)
    out_dir = Path(out)
    report_folder(out_dir)
    ctx = PaperContext(data, out_dir, confidence=confidence, n_resamples=n_resamples, seed=seed, ess_algo=ess_algo,
                       profile_taus=profile_taus, dpi=dpi)
    md: list[str] = []
    for section in SECTIONS:
        md += section(ctx)
    report_md = atomic_write_text(out_dir / "report.md", "\n".join(md))
    return PaperReport(out_dir=out_dir, report_md=report_md, figures=ctx.figures, tables=ctx.tables, data=data,
                       skipped=ctx.skipped)


# --------------------------------------------------------------------------------------------
# command line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m adaptive_po.analysis.reports.paper",
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
            print("\n".join(wtl_lines(wtl, fmt, args.ess_algo)))
    for s in rep.skipped:
        print(f"not drawn: {s}")
    print(f"Wrote {len(rep.figures)} figure(s), {len(rep.tables)} table(s) and report.md to {rep.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
