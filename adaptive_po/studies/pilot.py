"""The pilot every study starts with, as its plan gives it: the pilot algorithm alone at a fresh and
a stale lag, one or more budgets read off one set of runs, and the registered qualification rule.

:func:`pilot_rows` reads the committed table (a failed run scores its task's random score at every
budget read; a complete run without an evaluation at a budget's step is an error naming it),
:func:`criteria` applies the rule, :func:`select` keeps per task the first budget read that
qualifies, and :func:`pilot_text` writes ``pilot.md``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats

from adaptive_po import contract
from adaptive_po.contract import FROZEN_CURVE_COLUMN as CURVE_COLUMN, parse_curve

from .plan import Rule, StudyPlan


def normalized(value: float, random_score: float, reference: float) -> float:
    return (value - random_score) / (reference - random_score)


def read_score(plan: StudyPlan, row: Mapping[str, Any], at: int | None) -> tuple[float, float]:
    """(return, normalized score) of a pilot run at the evaluation step ``at`` (None: its final
    evaluation); a failed run scores its task's random score at every step. A complete run
    without an evaluation at ``at`` is an error naming the run (the table is not this study's)."""
    if row["status"] == "failed" or at is None:
        return float(row["final_eval_return"]), float(row["score"])
    points = dict(parse_curve(str(row.get(CURVE_COLUMN, ""))))
    if at not in points:
        raise ValueError(f"{plan.files['table']}: the run {contract.frozen_row_key(row)} has no evaluation at step {at:,} (its {CURVE_COLUMN!r})")
    value = points[at]
    return value, normalized(value, float(row["random_score"]), float(row["reference"]))


def criteria(rule: Rule, lags: tuple[int, int], fresh: np.ndarray, stale: np.ndarray, fresh_returns: np.ndarray, stale_returns: np.ndarray,
             saturated: bool = False) -> dict[str, Any]:
    """The registered rule on one candidate's normalized fresh and stale scores: the pilot algorithm
    *learns* (fresh mean at least ``rule.learns_at_least``), the stale lag *hurts* it (by at least
    ``rule.hurt_at_least`` and ``rule.hurt_at_least_se`` Welch standard errors), and it qualifies
    where both hold and it is not ``saturated`` (reported only where the rule has a saturation test)."""
    a, b = lags
    hurt = float(fresh.mean() - stale.mean())
    se = float(math.sqrt(fresh.var(ddof=1) / len(fresh) + stale.var(ddof=1) / len(stale)))
    learns = float(fresh.mean()) >= rule.learns_at_least
    hurts = hurt >= rule.hurt_at_least and hurt >= rule.hurt_at_least_se * se
    out = {
        f"lag{a}_mean": float(fresh.mean()), f"lag{a}_sd": float(fresh.std(ddof=1)), f"lag{b}_mean": float(stale.mean()),
        f"lag{b}_sd": float(stale.std(ddof=1)), "hurt": hurt, "hurt_se": se,
        f"lag{a}_return": float(fresh_returns.mean()), f"lag{b}_return": float(stale_returns.mean()),
        "learns": learns, "saturated": saturated, "hurts": hurts, "qualifies": learns and not saturated and hurts,
    }
    if rule.saturation_fraction is None:
        del out["saturated"]
    return out


def pilot_rows(plan: StudyPlan, table: Mapping[Any, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (task, budget read): the pilot's numbers and the registered criteria (where complete)."""
    p = plan.pilot
    out = []
    for task in p.tasks:
        runs = {lag: [table.get((p.folder, task, p.algo, "", lag, s, p.budget)) for s in p.seeds] for lag in p.lags}
        complete = all(r is not None for rows in runs.values() for r in rows)
        for read in p.reads:
            row: dict[str, Any] = {"env": task, "budget": read.budget, "runs": sum(r is not None for rows in runs.values() for r in rows),
                                   "complete": complete, "failed": sum(r is not None and r["status"] == "failed" for rows in runs.values() for r in rows)}
            if complete:
                got = {lag: [read_score(plan, r, read.at) for r in runs[lag]] for lag in p.lags}
                scores = {lag: np.array([s for _, s in got[lag]], float) for lag in p.lags}
                returns = {lag: np.array([v for v, _ in got[lag]], float) for lag in p.lags}
                fresh, stale = p.lags
                ceiling = p.rule.max_return.get(task)
                saturated = (ceiling is not None and p.rule.saturation_fraction is not None
                             and bool(np.all(returns[fresh] >= ceiling * (1 - p.rule.saturation_fraction))))
                row.update(criteria(p.rule, p.lags, scores[fresh], scores[stale], returns[fresh], returns[stale], saturated))
            out.append(row)
    return out


def select(plan: StudyPlan, rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """Per task the first budget read that qualifies, in the plan's order of tasks; the others dropped."""
    chosen: dict[str, int] = {}
    for r in rows:
        if r.get("qualifies") and r["env"] not in chosen:
            chosen[r["env"]] = int(r["budget"])
    return [(task, chosen[task]) for task in plan.pilot.tasks if task in chosen]


def fresh_returns(plan: StudyPlan, rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[int, float]]:
    """Per task, the pilot's mean fresh return at each budget read (complete tasks only)."""
    out: dict[str, dict[int, float]] = {}
    for r in rows:
        if r["complete"]:
            out.setdefault(r["env"], {})[int(r["budget"])] = float(r[f"lag{plan.pilot.lags[0]}_return"])
    return out


def millions(steps: int) -> str:
    return f"{steps / 1e6:g}M"


def welch_interval(r: Mapping[str, Any], n: int, fresh: int, stale: int) -> str:
    """fresh - stale with its Welch 95% CI (Welch-Satterthwaite degrees of freedom from the two sd's)."""
    a, b = r[f"lag{fresh}_sd"] ** 2 / n, r[f"lag{stale}_sd"] ** 2 / n
    df = (a + b) ** 2 / (a ** 2 / (n - 1) + b ** 2 / (n - 1)) if a + b > 0 else math.nan
    estimate, se = r["hurt"], r["hurt_se"]
    if not (math.isfinite(estimate) and math.isfinite(se)):
        return "n/a" if not math.isfinite(estimate) else f"{estimate:+.3f}"
    half = 0.0 if se == 0 else float(stats.t.ppf(0.975, df)) * se
    if not math.isfinite(half):
        return f"{estimate:+.3f}"
    return f"{estimate:+.3f} [{estimate - half:+.3f}, {estimate + half:+.3f}]"


def pilot_text(plan: StudyPlan, rows: Sequence[Mapping[str, Any]], chosen: Sequence[tuple[str, int]], curves: Mapping[str, Mapping[int, float]]) -> str:
    p, noun = plan.pilot, plan.task_noun
    fresh, stale = p.lags
    run = plan.commands["run"]

    def f(x: Any, digits: int = 3) -> str:
        return f"{x:.{digits}f}" if isinstance(x, float) and math.isfinite(x) else ""

    reads = [f"{millions(r.budget)}{' is read' if i == 0 else ''} at " + (f"the evaluation of step {r.at:,}" if r.at is not None else "the final one")
             for i, r in enumerate(p.reads)]
    se = "one Welch standard error" if p.rule.hurt_at_least_se == 1 else f"{p.rule.hurt_at_least_se:g} Welch standard errors"
    lines = [
        f"# {p.heading}", "",
        f"Made by `{run} pilot`; rebuilt from `{plan.files['table']}` by `{run} select`. The rule is the pre-registered one "
        f"([`preregistration.md`](preregistration.md)): `{p.algo}` alone {p.settings}, lags {fresh} and {stale}, seeds "
        f"{', '.join(map(str, p.seeds))}, runs of {p.budget:,} steps; {', '.join(reads)}. A ({noun}, budget) qualifies when `{p.algo}` at lag "
        f"{fresh} reaches a mean normalized score of at least {p.rule.learns_at_least:g} (*learns*) and lag {stale} costs it at least "
        f"{p.rule.hurt_at_least:g} and at least {se} (*hurts*). Per {noun} the first qualifying budget is used.", "",
        f"Normalized score: (return - random) / (reference - random), with each {noun}'s random score and reference "
        "(`solved_threshold`) from its YAML file.", "",
        f"| {noun} | budget | runs (failed) | lag {fresh} (return) | lag {fresh} normalized (sd) | lag {stale} normalized (sd) | lag {fresh} - lag {stale} (se) | "
        f"95% CI of lag {fresh} - lag {stale} (Welch) | learns | hurts | qualifies |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    yes = lambda b: "yes" if b else "no"  # noqa: E731
    for r in rows:
        if not r["complete"]:
            lines.append(f"| {r['env']} | {r['budget']:,} | {r['runs']} ({r['failed']}) | not complete | | | | | | | |")
            continue
        lines.append(
            f"| {r['env']} | {r['budget']:,} | {r['runs']} ({r['failed']}) | {f(r[f'lag{fresh}_return'], 2)} | {f(r[f'lag{fresh}_mean'])} "
            f"({f(r[f'lag{fresh}_sd'])}) | {f(r[f'lag{stale}_mean'])} ({f(r[f'lag{stale}_sd'])}) | {r['hurt']:+.3f} ({f(r['hurt_se'])}) | "
            f"{welch_interval(r, len(p.seeds), fresh, stale)} | {yes(r['learns'])} | {yes(r['hurts'])} | **{yes(r['qualifies'])}** |"
        )
    for c in plan.comparators:
        steps = next(iter(c.points.values()), ())
        lines += ["", f"## Our `{p.algo}` beside {c.heading}", "",
                  f"Mean lag-{fresh} evaluation return over the pilot's seeds, beside {c.name} ({c.note}) at about "
                  f"{' and '.join(millions(s) for s, _ in steps)} steps.", "",
                  f"| {noun} | " + " | ".join(f"ours at {millions(r.budget)} | published at {millions(s)}" for r, (s, _) in zip(p.reads, steps)) + " |",
                  "|---|" + "---:|---:|" * len(p.reads)]
        cell = lambda v: f"{v:.1f}" if v is not None else "not published"  # noqa: E731
        for task in p.tasks:
            ours, theirs = curves.get(task, {}), c.points.get(task)
            lines.append(f"| {task} | " + " | ".join(f"{cell(ours.get(r.budget))} | {cell(theirs[i][1] if theirs else None)}"
                                                     for i, r in enumerate(p.reads)) + " |")
    lines += ["", "## Selected", ""]
    lines += [f"- {task} at {budget:,} steps" for task, budget in chosen] or ["- none"]
    dropped = [t for t in p.tasks if t not in dict(chosen)]
    if dropped:
        lines += ["", f"Dropped (no budget qualifies): {', '.join(dropped)}."]
    if len(chosen) < p.rule.min_tasks:
        lines += ["", f"**Fewer than {p.rule.min_tasks} {plan.tasks_word} qualify: as registered, the study is not run.** The pilot is the result."]
    return "\n".join(lines) + "\n"
