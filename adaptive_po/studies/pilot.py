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

from .plan import Rule, Stressor, StudyPlan


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


def criteria(rule: Rule, names: tuple[Any, Any], fresh: np.ndarray, stale: np.ndarray, fresh_returns: np.ndarray, stale_returns: np.ndarray,
             saturated: bool = False) -> dict[str, Any]:
    """The registered rule on one candidate's normalized fresh and stale scores: the pilot algorithm
    *learns* (fresh mean at least ``rule.learns_at_least``), the stale condition *hurts* it (by at
    least ``rule.hurt_at_least`` and ``rule.hurt_at_least_se`` Welch standard errors), and it
    qualifies where both hold and it is not ``saturated`` (reported only where the rule has a
    saturation test). ``names``: the fresh and the stale condition (two lags, keyed ``lag<k>_...``,
    or two condition names: ``lag0``, ``T1.2``)."""
    a, b = (f"lag{x}" if isinstance(x, int) else x for x in names)
    hurt = float(fresh.mean() - stale.mean())
    se = float(math.sqrt(fresh.var(ddof=1) / len(fresh) + stale.var(ddof=1) / len(stale)))
    learns = float(fresh.mean()) >= rule.learns_at_least
    hurts = hurt >= rule.hurt_at_least and hurt >= rule.hurt_at_least_se * se
    out = {
        f"{a}_mean": float(fresh.mean()), f"{a}_sd": float(fresh.std(ddof=1)), f"{b}_mean": float(stale.mean()),
        f"{b}_sd": float(stale.std(ddof=1)), "hurt": hurt, "hurt_se": se,
        f"{a}_return": float(fresh_returns.mean()), f"{b}_return": float(stale_returns.mean()),
        "learns": learns, "saturated": saturated, "hurts": hurts, "qualifies": learns and not saturated and hurts,
    }
    if rule.saturation_fraction is None:
        del out["saturated"]
    return out


def fresh_name(plan: StudyPlan) -> str:
    """The pilot's fresh condition as its rows name it: ``lag<k>``."""
    return f"lag{plan.pilot.lags[0]}"


def pilot_runs(plan: StudyPlan, table: Mapping[Any, Mapping[str, Any]], task: str, stressor: Stressor | None = None) -> list[Mapping[str, Any] | None]:
    """The pilot's rows of ``task`` per seed (None where the table lacks one): under ``stressor``,
    or fresh (lag 0 or the plan's fresh lag, read from ``fresh_from``'s folder where given)."""
    p = plan.pilot
    if stressor is None:
        folder = p.fresh_from.folder if p.fresh_from else p.folder
        return [table.get((folder, task, p.algo, "", p.lags[0], s, p.budget, "")) for s in p.seeds]
    return [table.get((p.folder, task, p.algo, "", stressor.lag, s, p.budget, stressor.sampler)) for s in p.seeds]


def fresh_from_rows(plan: StudyPlan) -> dict[Any, dict[str, Any]]:
    """The pilot's fresh runs from another study's committed table (``fresh_from``; empty where the
    plan has none): every one of its tasks and seeds at lag 0, the clean sampler and the pilot's
    budget, in that table's folder; a ``ValueError`` naming the table and the first one missing."""
    p = plan.pilot
    if p.fresh_from is None:
        return {}
    path = plan.path.parent / p.fresh_from.table
    if not path.is_file():
        raise ValueError(f"{plan.path}: pilot.fresh_from: {path} is not a file (the fresh runs' committed table)")
    table = contract.read_frozen_table(path)
    wanted = [(p.fresh_from.folder, task, p.algo, "", p.lags[0], s, p.budget, "") for task in p.tasks for s in p.seeds]
    missing = [k for k in wanted if k not in table]
    if missing:
        raise ValueError(f"{path}: the pilot's fresh run {missing[0]} is not in the table ({len(missing)} of {len(wanted)} missing)")
    return {k: table[k] for k in wanted}


def pilot_rows(plan: StudyPlan, table: Mapping[Any, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (task, stressor, budget read): the pilot's numbers and the registered criteria (where
    complete); a pilot of two lags has one stressor, the stale lag, and its rows name none."""
    p = plan.pilot
    out = []
    fresh = fresh_name(plan)
    for task in p.tasks:
        fresh_rows = pilot_runs(plan, table, task)
        for stressor in p.stressors:
            runs = {fresh: fresh_rows, stressor.name: pilot_runs(plan, table, task, stressor)}
            complete = all(r is not None for rows in runs.values() for r in rows)
            for read in p.reads:
                row: dict[str, Any] = {"env": task, **({"stressor": stressor.name} if p.by_stressor else {}), "budget": read.budget,
                                       "runs": sum(r is not None for rows in runs.values() for r in rows), "complete": complete,
                                       "failed": sum(r is not None and r["status"] == "failed" for rows in runs.values() for r in rows)}
                if complete:
                    got = {name: [read_score(plan, r, read.at) for r in rows] for name, rows in runs.items()}
                    scores = {name: np.array([s for _, s in got[name]], float) for name in runs}
                    returns = {name: np.array([v for v, _ in got[name]], float) for name in runs}
                    ceiling = p.rule.max_return.get(task)
                    saturated = (ceiling is not None and p.rule.saturation_fraction is not None
                                 and bool(np.all(returns[fresh] >= ceiling * (1 - p.rule.saturation_fraction))))
                    row.update(criteria(p.rule, (fresh, stressor.name), scores[fresh], scores[stressor.name], returns[fresh],
                                        returns[stressor.name], saturated))
                out.append(row)
    return out


def select(plan: StudyPlan, rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """Per task (per (task, stressor) pair in a pilot of stressors) the first budget read that
    qualifies, in the plan's order of tasks (and stressors); the others dropped: ``(task, budget)``
    or ``(task, stressor, budget)``."""
    chosen: dict[tuple[str, ...], int] = {}
    for r in rows:
        unit = _unit(plan, r)
        if r.get("qualifies") and unit not in chosen:
            chosen[unit] = int(r["budget"])
    units = [(task, *((x.name,) if plan.pilot.by_stressor else ())) for task in plan.pilot.tasks for x in plan.pilot.stressors]
    return [(*unit, chosen[unit]) for unit in dict.fromkeys(units) if unit in chosen]


def _unit(plan: StudyPlan, row: Mapping[str, Any]) -> tuple[str, ...]:
    return (row["env"], row["stressor"]) if plan.pilot.by_stressor else (row["env"],)


def fresh_returns(plan: StudyPlan, rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[int, float]]:
    """Per task, the pilot's mean fresh return at each budget read (complete tasks only)."""
    out: dict[str, dict[int, float]] = {}
    for r in rows:
        if r["complete"]:
            out.setdefault(r["env"], {})[int(r["budget"])] = float(r[f"{fresh_name(plan)}_return"])
    return out


def millions(steps: int) -> str:
    return f"{steps / 1e6:g}M"


def welch_interval(r: Mapping[str, Any], n: int, fresh: Any, stale: Any) -> str:
    """fresh - stale with its Welch 95% CI (Welch-Satterthwaite degrees of freedom from the two
    sd's); ``fresh``, ``stale``: lags, or condition names (:func:`criteria`)."""
    fresh, stale = (f"lag{x}" if isinstance(x, int) else x for x in (fresh, stale))
    a, b = r[f"{fresh}_sd"] ** 2 / n, r[f"{stale}_sd"] ** 2 / n
    df = (a + b) ** 2 / (a ** 2 / (n - 1) + b ** 2 / (n - 1)) if a + b > 0 else math.nan
    estimate, se = r["hurt"], r["hurt_se"]
    if not (math.isfinite(estimate) and math.isfinite(se)):
        return "n/a" if not math.isfinite(estimate) else f"{estimate:+.3f}"
    half = 0.0 if se == 0 else float(stats.t.ppf(0.975, df)) * se
    if not math.isfinite(half):
        return f"{estimate:+.3f}"
    return f"{estimate:+.3f} [{estimate - half:+.3f}, {estimate + half:+.3f}]"


def stressor_words(x: Stressor) -> str:
    """What a stressor does to the data, in words."""
    parts = [f"an actor {x.lag} updates old"] if x.lag else []
    for key, value in contract.sampler_dials(x.sampler).items():
        parts.append(f"the sampler's logits divided by {value:g}" if key == "sampler_temperature" else f"the sampler's network in {value}")
    return " and ".join(parts)


def pilot_text(plan: StudyPlan, rows: Sequence[Mapping[str, Any]], chosen: Sequence[tuple[Any, ...]], curves: Mapping[str, Mapping[int, float]]) -> str:
    p, noun = plan.pilot, plan.task_noun
    fresh, stale = p.lags if not p.by_stressor else (p.lags[0], "")
    run = plan.commands["run"]

    def f(x: Any, digits: int = 3) -> str:
        return f"{x:.{digits}f}" if isinstance(x, float) and math.isfinite(x) else ""

    reads = [f"{millions(r.budget)}{' is read' if i == 0 else ''} at " + (f"the evaluation of step {r.at:,}" if r.at is not None else "the final one")
             for i, r in enumerate(p.reads)]
    se = "one Welch standard error" if p.rule.hurt_at_least_se == 1 else f"{p.rule.hurt_at_least_se:g} Welch standard errors"
    if p.by_stressor:
        source = (f" (its runs read from [`{p.fresh_from.table}`]({p.fresh_from.table}), folder `{p.fresh_from.folder}`, not run again)"
                  if p.fresh_from else "")
        conditions = (f"under each stressor ({'; '.join(f'`{x.name}`: {stressor_words(x)}' for x in p.stressors)}) and at lag {fresh} "
                      f"with the clean sampler{source}")
        unit, stressed, per = f"({noun}, stressor, budget)", "the stressor", f"({noun}, stressor)"
    else:
        conditions, unit, stressed, per = f"lags {fresh} and {stale}", f"({noun}, budget)", f"lag {stale}", noun
    lines = [
        f"# {p.heading}", "",
        f"Made by `{run} pilot`; rebuilt from `{plan.files['table']}` by `{run} select`. The rule is the pre-registered one "
        f"([`preregistration.md`](preregistration.md)): `{p.algo}` alone {p.settings}, {conditions}, seeds "
        f"{', '.join(map(str, p.seeds))}, runs of {p.budget:,} steps; {', '.join(reads)}. A {unit} qualifies when `{p.algo}` at lag "
        f"{fresh} reaches a mean normalized score of at least {p.rule.learns_at_least:g} (*learns*) and {stressed} costs it at least "
        f"{p.rule.hurt_at_least:g} and at least {se} (*hurts*). Per {per} the first qualifying budget is used.", "",
        f"Normalized score: (return - random) / (reference - random), with each {noun}'s random score and reference "
        "(`solved_threshold`) from its YAML file.", "",
    ]
    if p.by_stressor:
        lines += [f"| {noun} | stressor | budget | runs (failed) | lag {fresh} (return) | lag {fresh} normalized (sd) | stressed normalized (sd) | "
                  f"lag {fresh} - stressed (se) | 95% CI of lag {fresh} - stressed (Welch) | learns | hurts | qualifies |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    else:
        lines += [f"| {noun} | budget | runs (failed) | lag {fresh} (return) | lag {fresh} normalized (sd) | lag {stale} normalized (sd) | "
                  f"lag {fresh} - lag {stale} (se) | 95% CI of lag {fresh} - lag {stale} (Welch) | learns | hurts | qualifies |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    yes = lambda b: "yes" if b else "no"  # noqa: E731
    a = fresh_name(plan)
    for r in rows:
        b = r.get("stressor", f"lag{stale}")
        head = f"| {r['env']} | {f'`{b}` | ' if p.by_stressor else ''}{r['budget']:,} | {r['runs']} ({r['failed']}) |"
        if not r["complete"]:
            lines.append(f"{head} not complete | | | | | | | |")
            continue
        lines.append(
            f"{head} {f(r[f'{a}_return'], 2)} | {f(r[f'{a}_mean'])} "
            f"({f(r[f'{a}_sd'])}) | {f(r[f'{b}_mean'])} ({f(r[f'{b}_sd'])}) | {r['hurt']:+.3f} ({f(r['hurt_se'])}) | "
            f"{welch_interval(r, len(p.seeds), a, b)} | {yes(r['learns'])} | {yes(r['hurts'])} | **{yes(r['qualifies'])}** |"
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
    if p.by_stressor:
        lines += [f"- {task} under `{name}` at {budget:,} steps" for task, name, budget in chosen] or ["- none"]
        dropped = [f"{task} under `{x.name}`" for task in p.tasks for x in p.stressors if (task, x.name) not in {c[:2] for c in chosen}]
        if dropped:
            lines += ["", f"Dropped (no budget qualifies): {', '.join(dropped)}."]
        if len(chosen) < p.rule.min_tasks:
            lines += ["", f"**{'No' if not chosen else f'Fewer than {p.rule.min_tasks}'} ({noun}, stressor) pair{'s' if chosen else ''} qualif"
                      f"{'ies' if not chosen else 'y'}: as registered, the study is not run.** The pilot is the result: {p.rule.not_run}"]
        return "\n".join(lines) + "\n"
    lines += [f"- {task} at {budget:,} steps" for task, budget in chosen] or ["- none"]
    dropped = [t for t in p.tasks if t not in dict(chosen)]
    if dropped:
        lines += ["", f"Dropped (no budget qualifies): {', '.join(dropped)}."]
    if len(chosen) < p.rule.min_tasks:
        lines += ["", f"**Fewer than {p.rule.min_tasks} {plan.tasks_word} qualify: as registered, the study is not run.** The pilot is the result."]
    return "\n".join(lines) + "\n"
