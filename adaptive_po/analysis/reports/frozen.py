"""The frozen-tuning staleness study's report, from its committed tables alone.

``python -m adaptive_po.analysis.reports.frozen --results docs/results/frozen`` (``make
frozen-from-table``) reads ``per_run.csv``, ``selected.json`` and ``selection.json`` and writes
``verdicts.md`` and ``staleness.png`` beside them. The endpoints and the decision rule are those of
``preregistration.md``; a study still in progress is reported as far as it goes (each endpoint over
the tasks whose runs are all in the table), and says so.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats

from adaptive_po import contract
from adaptive_po.contract import FROZEN_CUT_ORDER, FROZEN_REGISTERED as REGISTERED
from adaptive_po.contract import FROZEN_PILOT_SELECTION_FILE, FROZEN_SCORE_FOLDER, FROZEN_SEARCH_FOLDER, FROZEN_SELECTION_FILE, FROZEN_TABLE_FILE, FROZEN_TRIALS_FILE

from adaptive_po.studies.plan import PLAN_FILE, StudyPlan, load_plan

from ..endpoints import (
    SLOPE_LAGS, SLOPE_MARGIN, check_no_stray_trials, check_pick, decide, deviations, family, format_difference, format_p, fresh_scores,
    frozen_scores, head_to_head, lag_name, log_lag, per_task_family, plan_rows, read_search_trials, row_cells, slope,
)
from ..hypothesis import ALPHA, MARGIN, Difference, mean_of_differences, weighted_sum, welch

#: the study's plan file (its endpoints, margins, Holm families and decision rule are read from it)
PLAN = f"{contract.FROZEN_RESULTS}/{PLAN_FILE}"


class _Plan:
    """What the report needs of the study's plan, read from its committed files alone:
    ``selection.json`` (the pilot's tasks) and, once a search is done, ``selected.json``'s record
    (arms, lags, seeds, trials); before that, the pre-registered values."""

    def __init__(self, selection: Mapping[str, Any], record: Mapping[str, Any]) -> None:
        self.tasks = tuple((t["env"], int(t["budget"])) for t in selection["tasks"])
        cuts = selection.get("cuts", {})
        self.arms = tuple(a for a in record.get("arms", REGISTERED["arms"]) if a not in cuts.get("arms", []))
        self.tax_arms = tuple(record.get("tax_arms", REGISTERED["tax_arms"]))
        self.lags = tuple(lag for lag in record.get("lags", REGISTERED["lags"]) if lag not in cuts.get("lags", []))
        self.tax_lag = int(record.get("tax_lag", REGISTERED["tax_lag"]))
        self.score_seeds = tuple(record.get("score_seeds", REGISTERED["score_seeds"]))
        self.search_seeds = tuple(record.get("search_seeds", REGISTERED["search_seeds"]))
        search_seeds = len(self.search_seeds)
        trials = int(record.get("trials", REGISTERED["trials"]))
        self.search_runs = sum(2 if a in self.tax_arms else 1 for a in self.arms) * trials * search_seeds
        self.score_runs = (len(self.arms) * len(self.lags) + len(self.tax_arms)) * len(self.score_seeds)


def _load(results: Path) -> tuple[dict, dict, dict]:
    table = contract.read_frozen_table(results / FROZEN_TABLE_FILE)
    contract.check_table_normalization(results / FROZEN_TABLE_FILE, table)  # random score and reference: the environment files'
    if table:  # a published table's digest is committed with it (read_frozen_table checked it where present)
        contract.check_table_digest(results / FROZEN_TABLE_FILE, required=True)
    selected = contract.read_committed_json(results / FROZEN_SELECTION_FILE) if (results / FROZEN_SELECTION_FILE).is_file() else {"selected": {}}
    selection = contract.read_committed_json(results / FROZEN_PILOT_SELECTION_FILE)
    return table, selected, selection


def check_plan(results: Path, table: Mapping, selected: Mapping[str, Any], selection: Mapping[str, Any]) -> None:
    """The committed plan against the pre-registration and the table, before anything is computed
    (a ``ValueError`` naming the file and the value otherwise): ``selected.json``'s recorded plan
    is the registered one (:data:`~adaptive_po.contract.FROZEN_REGISTERED`) but for the cuts, which
    follow the registered order; ``selection.json``'s tasks are pilot tasks that qualified, with
    the pilot's means those of the table's pilot runs; and each selected configuration is a best
    one of its search in the table (its variant was trained, so the bench checked it, and no run of
    another configuration did better)."""
    where_plan, where_tasks = results / FROZEN_SELECTION_FILE, results / FROZEN_PILOT_SELECTION_FILE
    cuts = selection.get("cuts", {})
    for kind, values in cuts.items():
        allowed = FROZEN_CUT_ORDER.get(kind, ()) if kind != "tasks" else tuple(str(r.get("env")) for r in selection.get("pilot", ()))
        if kind not in ("lags", "arms", "tasks") or any(v not in allowed for v in values):
            raise ValueError(f"{where_tasks}: cuts {kind} {values!r} are not in the registered cut order {dict(FROZEN_CUT_ORDER)}")
    record = selected.get("plan", {})
    for key, registered in REGISTERED.items():
        if key not in record:
            continue
        expected: Any = registered
        if key in ("arms", "lags"):
            expected = [v for v in registered if v not in cuts.get(key, [])]
        if (list(record[key]) if isinstance(registered, tuple) else record[key]) != (list(expected) if isinstance(registered, tuple) else expected):
            raise ValueError(f"{where_plan}: the plan's {key} {record[key]!r} is not the registered {expected!r}")
    tasks = _tasks(selection, where_tasks)
    if "tasks" in record and [(t.get("env"), t.get("budget")) for t in record["tasks"]] != tasks:
        raise ValueError(f"{where_plan}: the plan's tasks {record['tasks']!r} are not {where_tasks.name}'s")
    pilot = {(r.get("env"), r.get("budget")): r for r in selection.get("pilot", ())}
    qualified: list[tuple[str, int]] = []  # per task, its first budget that qualified (the pilot's order is the registered one)
    for key, entry in pilot.items():
        if entry.get("qualifies") is True and key[0] not in {e for e, _ in qualified}:
            qualified.append(key)
    expected_tasks = [t for t in qualified if t[0] not in cuts.get("tasks", [])]
    if pilot and sorted(tasks) != sorted(expected_tasks):
        raise ValueError(f"{where_tasks}: the tasks {tasks} are not the pilot's qualifying tasks less the cuts, {expected_tasks}")
    for env, budget in tasks:
        entry = pilot.get((env, budget))
        if entry is None or entry.get("qualifies") is not True:
            raise ValueError(f"{where_tasks}: the task {env} at {budget:,} steps is not a pilot task that qualified")
        for lag, name in ((0, "lag0_mean"), (8, "lag8_mean")):
            scores = [r["score"] for k, r in table.items() if k[0].startswith("frozen-pilot") and k[1:3] == (env, "ppo") and k[4] == lag and k[6] == budget]
            if not scores or not math.isclose(float(np.mean(scores)), float(entry.get(name, math.nan)), rel_tol=1e-9, abs_tol=1e-12):
                raise ValueError(f"{where_tasks}: the pilot's {name} {entry.get(name)!r} of {env} at {budget:,} steps is not the mean of "
                                 f"its {len(scores)} pilot runs in the table")
    plan = _Plan(selection, record)
    where_trials = results / FROZEN_TRIALS_FILE
    trials = read_search_trials(where_trials, selected)
    searched = set()
    for env, chosen in selected.get("selected", {}).items():
        budget = int(chosen.get("budget", 0))
        if (env, budget) not in plan.tasks:
            raise ValueError(f"{where_plan}: {env} at {budget:,} steps is not a selected task")
        for algo in plan.arms:
            for tuned, pick in chosen.get(algo, {}).items():
                searched.add(("", env, budget, algo, tuned))
                check_pick(where_plan, table, FROZEN_SEARCH_FOLDER, plan.search_seeds, plan.tax_lag, (env, budget, algo, tuned), pick,
                           trials.get(("", env, budget, algo, tuned), []), where_trials)
    check_no_stray_trials(where_trials, trials, searched)


def _tasks(selection: Mapping[str, Any], where: Path) -> list[tuple[str, int]]:
    tasks = []
    for t in selection.get("tasks", ()):
        budget = t.get("budget")
        if not isinstance(budget, int) or isinstance(budget, bool) or not 0 < budget <= contract.MAX_TIMESTEPS:
            raise ValueError(f"{where}: the budget {budget!r} of {t.get('env')!r} is not a whole number of steps in [1, {contract.MAX_TIMESTEPS:,}]")
        tasks.append((str(t.get("env")), budget))
    return tasks


def load_and_analyse(results: Path) -> tuple[dict, dict, dict, _Plan, dict[str, Any]]:
    """The committed files read once, checked (:func:`check_plan`), and every number of the
    report and the figure from them."""
    table, selected, selection = _load(results)
    check_plan(results, table, selected, selection)
    plan = _Plan(selection, selected.get("plan", {}))
    return table, selected, selection, plan, analyse(table, selected, plan)


def analyse(table: Mapping, selected: Mapping, plan: _Plan) -> dict[str, Any]:
    """Every number of the report: per task and arm the curves, the slopes, the three endpoints."""
    seeds = plan.score_seeds
    cells: list[dict[str, Any]] = []
    slopes: dict[tuple[str, str], tuple[float, float, float]] = {}
    per_task: dict[str, dict[str, Any]] = {}
    chosen_by_task = {env: selected.get("selected", {}).get(env) for env, _ in plan.tasks}
    variants = {env: {algo: chosen[algo]["fresh"]["variant"] for algo in plan.arms} for env, chosen in chosen_by_task.items() if chosen}
    fresh = fresh_scores(table, plan.tasks, variants, plan.lags, seeds)
    for env, budget in plan.tasks:
        chosen = chosen_by_task[env]
        if not chosen:
            continue
        data: dict[str, Any] = {"budget": budget, "fresh": fresh[env], "tax": {}}
        for algo in plan.arms:
            for lag in plan.lags:
                got = data["fresh"].get((algo, lag))
                if got is not None:
                    half = float(stats.t.ppf(0.975, len(got) - 1) * got.std(ddof=1) / math.sqrt(len(got)))
                    cells.append({"env": env, "algo": algo, "tuned": "fresh", "lag": lag, "mean": float(got.mean()), "half": half, "n": len(got)})
            xs = [(lag, v) for lag in SLOPE_LAGS if (algo, lag) in data["fresh"] for v in data["fresh"][(algo, lag)]]
            if all((algo, lag) in data["fresh"] for lag in SLOPE_LAGS if lag in plan.lags):
                slopes[(env, algo)] = slope([a for a, _ in xs], [b for _, b in xs])
        for algo in plan.tax_arms:
            variant = chosen[algo][lag_name(plan.tax_lag)]["variant"]
            got = frozen_scores(table, env, budget, algo, variant, plan.tax_lag, seeds)
            if got is not None:
                data["tax"][algo] = (variant == chosen[algo]["fresh"]["variant"], got)
                half = float(stats.t.ppf(0.975, len(got) - 1) * got.std(ddof=1) / math.sqrt(len(got)))
                cells.append({"env": env, "algo": algo, "tuned": lag_name(plan.tax_lag), "lag": plan.tax_lag, "mean": float(got.mean()), "half": half, "n": len(got)})
        per_task[env] = data

    # endpoint 1: slope difference esspo - ppo
    e1_tasks = {}
    for env in per_task:
        if (env, "esspo") in slopes and (env, "ppo") in slopes:
            be, se_e, df_e = slopes[(env, "esspo")]
            bp, se_p, df_p = slopes[(env, "ppo")]
            e1_tasks[env] = weighted_sum([(be, se_e, df_e, 1.0), (bp, se_p, df_p, -1.0)])
    # the mean over tasks, each slope a term of its own (for the Welch-Satterthwaite degrees of freedom)
    e1 = weighted_sum([(*slopes[(env, algo)], w / len(e1_tasks)) for env in e1_tasks for algo, w in (("esspo", 1.0), ("ppo", -1.0))]) \
        if e1_tasks else Difference(math.nan, math.nan, math.nan)

    # endpoint 2: esspo - ppo at lag 0
    e2_pairs = {env: (d["fresh"][("esspo", 0)], d["fresh"][("ppo", 0)]) for env, d in per_task.items()
                if ("esspo", 0) in d["fresh"] and ("ppo", 0) in d["fresh"]}
    e2_tasks = {env: welch(*pair) for env, pair in e2_pairs.items()}
    e2 = mean_of_differences(list(e2_pairs.values())) if e2_pairs else Difference(math.nan, math.nan, math.nan)

    # endpoint 3: tax(esspo) - tax(ppo); tax = lag-tuned minus fresh-tuned at the tax lag
    def tax_groups(d: Mapping[str, Any], algo: str) -> list[tuple[np.ndarray, float]] | None:
        if algo not in d["tax"] or (algo, plan.tax_lag) not in d["fresh"]:
            return None
        same, tuned = d["tax"][algo]
        return [] if same else [(tuned, 1.0), (d["fresh"][(algo, plan.tax_lag)], -1.0)]

    def groups_difference(groups: Sequence[tuple[np.ndarray, float]], weight: float = 1.0) -> list[tuple[float, float, float, float]]:
        return [(float(g.mean()), float(g.std(ddof=1) / math.sqrt(len(g))), float(len(g) - 1), sign * weight) for g, sign in groups]

    complete3 = [env for env, d in per_task.items() if all(tax_groups(d, a) is not None for a in ("esspo", "ppo"))]

    def tax(envs: Sequence[str], signs: Mapping[str, float]) -> Difference:
        """sum over ``envs`` and arms of sign x tax / len(envs); an arm whose lag-tuned choice is its
        fresh one has a tax of exactly 0 (no terms); no task at all: NaN."""
        if not envs:
            return Difference(math.nan, math.nan, math.nan)
        terms = [t for env in envs for algo, sign in signs.items()
                 for t in groups_difference(tax_groups(per_task[env], algo) or [], sign / len(envs))]
        return weighted_sum(terms) if terms else Difference(0.0, 0.0, math.inf)

    difference = {"esspo": 1.0, "ppo": -1.0}
    tax_tasks = {(env, algo): tax([env], {algo: 1.0}) for env in complete3 for algo in difference}
    e3_tasks = {env: tax([env], difference) for env in complete3}
    e3, esspo_tax, ppo_tax = tax(complete3, difference), tax(complete3, {"esspo": 1.0}), tax(complete3, {"ppo": 1.0})
    return {
        "cells": cells, "slopes": slopes, "per_task": per_task, "e1": e1, "e1_tasks": e1_tasks, "e2": e2, "e2_tasks": e2_tasks,
        "e3": e3, "e3_tasks": e3_tasks, "tax_tasks": tax_tasks, "esspo_tax": esspo_tax, "ppo_tax": ppo_tax,
    }


def committed_plan(path: str | Path = PLAN) -> StudyPlan:
    """The study's plan file (``docs/results/frozen/plan.toml``): the endpoints, their margins and
    Holm families, and the decision rule this report reads (the rest of it comes with the port)."""
    return load_plan(path)


#: the endpoints this report computes (``result["e1"]``, ...), in their order
COMPUTED: tuple[str, ...] = ("1", "2", "3")


def primary(result: Mapping[str, Any], study: StudyPlan | None = None) -> list[dict[str, Any]]:
    """Endpoints 1-3 with their verdicts, Holm within the plan's families (the three in one,
    pre-registered; :func:`~adaptive_po.analysis.endpoints.plan_rows`)."""
    study = study or committed_plan()
    rows = plan_rows(study, {i: result[f"e{i}"] for i in COMPUTED})
    return [{**row, "margin": study.endpoint(i).test_margin} for i, row in zip(COMPUTED, rows)]


def per_task_verdicts(result: Mapping[str, Any], study: StudyPlan | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Each endpoint per task, Holm over that endpoint's per-task tests (pre-registered):
    ``{endpoint: {task: row}}`` for the tasks the endpoint has."""
    study = study or committed_plan()
    return {i: per_task_family(study.endpoint(i), result[f"e{i}_tasks"]) for i in COMPUTED}


#: the comparators of the secondary tables: ``ppo`` (pre-registered) and ``decoupled-ppo`` (added after the study)
COMPARATORS: tuple[str, ...] = ("ppo", "decoupled-ppo")
PREREGISTERED_COMPARATORS: tuple[str, ...] = ("ppo",)


def secondary(result: Mapping[str, Any], plan: _Plan, comparator: str = "ppo") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The secondary comparisons of the study: every other arm against ``comparator`` at every lag
    (both tuned on fresh data), per task and over tasks (:func:`head_to_head`, Holm within each
    table). Returns ``(per_task_rows, aggregate_rows)``."""
    fresh = {env: result["per_task"][env]["fresh"] for env, _ in plan.tasks if env in result["per_task"]}
    return head_to_head(fresh, comparator, plan.arms, plan.lags)


def complete_tasks(result: Mapping[str, Any], plan: _Plan) -> list[str]:
    """The planned tasks that every one of the three endpoints has (a task missing from any one, a
    scoring row deleted or moved to a seed outside the plan, makes the answer interim)."""
    return [env for env, _ in plan.tasks if all(env in result[name] for name in ("e1_tasks", "e2_tasks", "e3_tasks"))]


def decision(rows: Sequence[Mapping[str, Any]], esspo_tax: Difference, study: StudyPlan | None = None, complete: bool = True) -> str:
    """The plan's decision rule on the primary family's rows (in its order) and esspo's own tax
    (its equivalence test alone: :func:`~adaptive_po.analysis.endpoints.decide`); the rule's
    undecided answer, "not decided (the study is not complete)", until each endpoint has every
    planned task (``complete``: :func:`complete_tasks`)."""
    study = study or committed_plan()
    if not complete:
        return study.decisions[0].undecided
    by_id = dict(zip(COMPUTED, rows))
    tax = study.endpoint("esspo-tax")
    by_id[tax.id] = family([tax], [esspo_tax])[0]
    return decide(study.decisions[0], by_id)


def report(results: Path, study: StudyPlan | None = None) -> str:
    return report_text(*load_and_analyse(results), results=results, study=study)


def report_text(table: Mapping, selected: Mapping[str, Any], selection: Mapping[str, Any], plan: _Plan, result: Mapping[str, Any],
                results: Path | None = None, study: StudyPlan | None = None) -> str:
    study = study or committed_plan()
    planned = len(plan.tasks) * (plan.search_runs + plan.score_runs)
    done = sum(1 for k in table if k[0] in (FROZEN_SEARCH_FOLDER, FROZEN_SCORE_FOLDER))
    rows = primary(result, study)
    complete = complete_tasks(result, plan)
    answer = decision(rows, result["esspo_tax"], study, complete=len(complete) == len(plan.tasks))
    comparisons = {c: secondary(result, plan, c) for c in COMPARATORS if c in plan.arms}
    lines = [
        "# Tune once, freeze, sweep staleness: verdicts",
        "",
        "Pre-registered in [`preregistration.md`](preregistration.md) before any run; tasks chosen by the PPO-only pilot "
        "([`pilot.md`](pilot.md)). Rebuilt from the committed tables by `make frozen-from-table`.",
        "",
        f"**Progress:** {done} of about {planned} runs in [`per_run.csv`](per_run.csv) "
        f"({sum(1 for k in table if k[0] == FROZEN_SEARCH_FOLDER)} search, {sum(1 for k in table if k[0] == FROZEN_SCORE_FOLDER)} scoring); "
        f"tasks {', '.join(f'{e} ({b:,} steps)' for e, b in plan.tasks)}.",
    ]
    cuts = selection.get("cuts", {})
    if any(cuts.values()):
        lines.append(f"Cut by the pre-registered order: {cuts}.")
    if results is not None:
        lines += ["", *deviations(results)]
    lines += [
        "",
        "## The answer",
        "",
        (f"**Interim, {len(complete)} of {len(plan.tasks)} tasks complete: the answer is not final, and no "
         "verdict here is the study's until every task is in.** " if len(complete) < len(plan.tasks) else "")
        + f"**The claim (robust to staleness without retuning) is {answer}.** "
        f"Endpoints over {len(result['e1_tasks'])} task(s) for the slope, {len(result['e2_tasks'])} for lag 0, "
        f"{len(result['e3_tasks'])} for the tax.",
        "",
        "| claim | tasks complete | answer by the pre-registered rule |",
        "|---|---:|---|",
        f"| robust to staleness without retuning | {len(complete)} of {len(plan.tasks)} | {answer} |",
        "",
        "| endpoint | estimate [95% CI] | p | p (Holm over the three) | detectable (80% power) | verdict |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        d = r["d"]
        lines.append(
            f"| {r['endpoint']} | {format_difference(d, 4 if r['endpoint'].startswith('1') else 3)} | {r['p']:.3g} | {r['p_adj']:.3g} | "
            f"{d.detectable():.3g} | {r['verdict'] or 'n/a'} |"
        )
    et, pt = result["esspo_tax"], result["ppo_tax"]
    lines += [
        f"| 3b. esspo's tax (equivalent to 0 within ±{MARGIN:g}?) | {format_difference(et)} | | | {et.detectable():.3g} | "
        f"{'equivalent' if et.testable and et.p_equivalence(MARGIN) < ALPHA else ('n/a' if not et.testable else 'not shown')} |",
        f"| 3c. ppo's tax | {format_difference(pt)} | | | {pt.detectable():.3g} | |",
        "",
        "Endpoint 1's equivalence margin is 0.1 over lags 0-8 (0.1 / log2 9 = "
        f"{SLOPE_MARGIN:.4f} per unit); endpoint 2 is one-sided (p of \"esspo is worse by 0.1 or more\"); endpoint 3's "
        "sign: negative means retuning at lag 8 buys `esspo` less than it buys `ppo`, a win for the claim. Endpoint 2 reads "
        "inferior where the mirror test (p of \"esspo is worse by less than 0.1\") rejects after the same Holm over the three: "
        f"p {format_p(rows[1]['p_inferior'])}, Holm {format_p(rows[1]['p_inferior_adj'])}.",
        "",
        *_head_to_head_lines({c: agg for c, (_, agg) in comparisons.items()}, "esspo", (0, plan.tax_lag), len(plan.tasks)),
        "## Per task",
        "",
        "| task | slope esspo | slope ppo | slope difference | lag 0: esspo - ppo | tax esspo | tax ppo | tax difference |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for env, _ in plan.tasks:
        if env not in result["per_task"]:
            lines.append(f"| {env} | (not run yet) | | | | | | |")
            continue

        def sl(algo: str) -> str:
            b = result["slopes"].get((env, algo))
            return f"{b[0]:+.4f} ({b[1]:.4f})" if b and math.isfinite(b[0]) else "n/a"

        lines.append(
            f"| {env} | {sl('esspo')} | {sl('ppo')} | {format_difference(result['e1_tasks'][env], 4) if env in result['e1_tasks'] else 'n/a'} | "
            f"{format_difference(result['e2_tasks'][env]) if env in result['e2_tasks'] else 'n/a'} | "
            f"{format_difference(result['tax_tasks'][(env, 'esspo')]) if (env, 'esspo') in result['tax_tasks'] else 'n/a'} | "
            f"{format_difference(result['tax_tasks'][(env, 'ppo')]) if (env, 'ppo') in result['tax_tasks'] else 'n/a'} | "
            f"{format_difference(result['e3_tasks'][env]) if env in result['e3_tasks'] else 'n/a'} |"
        )
    lines += ["", "Slopes: normalized score per unit of log2(1 + lag) over lags 0-8 (standard error).", ""]
    lines += _per_task_verdict_lines(result, plan, study)
    for comparator, tables in comparisons.items():
        lines += _secondary_lines(comparator, tables, plan)
    lines += _configurations(selected, plan)
    lines += _cells(result, plan)
    return "\n".join(lines) + "\n"


def _head_to_head_lines(aggregates: Mapping[str, Sequence[Mapping[str, Any]]], arm: str, lags: Sequence[int], tasks: int) -> list[str]:
    """The head to head near the top: ``arm`` minus each comparator over tasks at ``lags``, the rows
    of the comparators' over-tasks tables (``{comparator: aggregate_rows}`` of :func:`head_to_head`)
    with the Holm p of their own table."""
    found = [(c, r) for c, rows in aggregates.items() for lag in lags for r in rows if r["algo"] == arm and r["lag"] == lag]
    if not found:
        return []
    lines = [
        f"## Head to head (secondary): {arm} against {' and '.join(aggregates)}", "",
        f"`{arm}` minus each comparator over the tasks at lags {' and '.join(map(str, lags))}: rows of the over-tasks tables of the "
        "secondary sections below, each with the Holm p of its own table (" + "; ".join(
            f"`{c}`: {len(rows)} comparisons" for c, rows in aggregates.items()) + "). Secondary and descriptive, not a decision rule: "
        "the answer above is the pre-registered rule's alone"
        + (", and " + ", ".join(f"`{c}`" for c in aggregates if c not in PREREGISTERED_COMPARATORS)
           + " as a comparator was added after the study." if any(c not in PREREGISTERED_COMPARATORS for c in aggregates) else "."), "",
        "| comparison | lag | tasks | estimate [95% CI] | p | p (Holm over its table) | detectable (80% power) | verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += [f"| {arm} - {c} | {r['lag']} | {r['tasks']} of {tasks} | " + row_cells(r) for c, r in found]
    return lines + [""]


def _per_task_verdict_lines(result: Mapping[str, Any], plan: _Plan, study: StudyPlan) -> list[str]:
    names = {
        "1": "1. slope difference (equivalence ±0.0315 per unit)",
        "2": "2. lag 0: esspo - ppo (non-inferiority at -0.1)",
        "3": "3. tax difference (negative favours esspo)",
    }
    by_endpoint = per_task_verdicts(result, study)
    lines = [
        "### Per-task verdicts", "",
        "Each endpoint per task, Holm over that endpoint's per-task tests (pre-registered: the per-task results are "
        "secondary; the answer above is the aggregates').", "",
        "| endpoint | task | estimate [95% CI] | p | p (Holm over tasks) | detectable (80% power) | verdict |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for name, rows in by_endpoint.items():
        for env, _ in plan.tasks:
            if env in rows:
                lines.append(f"| {names[name]} | {env} | " + row_cells(rows[env], 4 if name == "1" else 3))
    inferior = by_endpoint["2"]
    if inferior:
        lines += [
            "", "Endpoint 2's p is that of \"esspo is worse by 0.1 or more\" (non-inferior where it rejects after Holm over the tasks); "
            "it reads inferior where the mirror test (p of \"esspo is worse by less than 0.1\") rejects after Holm over the tasks the "
            "same way: " + "; ".join(f"{env} p {format_p(inferior[env]['p_inferior'])} (Holm {format_p(inferior[env]['p_inferior_adj'])})"
                                     for env, _ in plan.tasks if env in inferior) + ".",
        ]
    return lines + [""]


def _secondary_lines(comparator: str, tables: tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]], plan: _Plan) -> list[str]:
    """One comparator's section: its over-tasks and per-task tables of :func:`head_to_head`."""
    task_rows, agg_rows = tables
    lines = [
        f"## Secondary: every arm against {comparator} at every lag", "",
        ("Pre-registered as secondary and descriptive" if comparator in PREREGISTERED_COMPARATORS
         else "Added after the study (not pre-registered), secondary and descriptive like the comparison against `ppo`")
        + f": each arm's frozen fresh-data configuration minus `{comparator}`'s, at each lag, "
        f"on the {len(plan.score_seeds)} held-out seeds (Welch's t; equivalence within ±{MARGIN:g} by two one-sided tests). "
        "Each table has its own Holm adjustment. Lags 16 and 64 are a stress test beyond the realistic range.", "",
        "### Over tasks", "",
        "The mean over the tasks that have both cells of the per-task differences, every task weighing the same:", "",
        f"| arm | lag | tasks | arm - {comparator} [95% CI] | p | p (Holm over the table) | detectable (80% power) | verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += [f"| {r['algo']} | {r['lag']} | {r['tasks']} of {len(plan.tasks)} | " + row_cells(r) for r in agg_rows]
    lines += [
        "", "### Per task, secondary", "",
        f"| task | arm | lag | arm - {comparator} [95% CI] | p | p (Holm over the table) | detectable (80% power) | verdict |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    lines += [f"| {r['env']} | {r['algo']} | {r['lag']} | " + row_cells(r) for r in task_rows]
    return lines + [""]


def _configurations(selected: Mapping[str, Any], plan: _Plan) -> list[str]:
    updates = {env: selected.get("selected", {}).get(env, {}).get("updates_per_run") for env, _ in plan.tasks}
    updates = {env: n for env, n in updates.items() if n is not None}
    beyond = {env: [lag for lag in plan.lags if lag >= n] for env, n in updates.items()}
    lines = [
        "## Frozen configurations", "",
        "Each lag is also counted in optimizer steps: lag x epochs x minibatches per update of that configuration. "
        "Updates per run: " + ", ".join(f"{env} {n}" for env, n in updates.items()) + ". An actor `lag` updates old acts with "
        "the initial policy until the learner has made `lag` updates, so a lag at or above a task's updates per run ("
        + "; ".join(f"{env}: {', '.join(map(str, lags))}" for env, lags in beyond.items() if lags)
        + ") means data from the initial policy for the whole run: learning from a fixed behaviour policy.", "",
        "| task | arm | tuned on | configuration | search return | optimizer steps per update | lag 8 in optimizer steps |", "|---|---|---|---|---:|---:|---:|",
    ]
    for env, _ in plan.tasks:
        chosen = selected.get("selected", {}).get(env)
        if not chosen:
            continue
        for algo in plan.arms:
            for name, pick in chosen.get(algo, {}).items():
                steps = pick.get("optimizer_steps_per_update")
                lines.append(f"| {env} | {algo} | {name} | `{pick['variant'] or 'Zoo default'}` (trial {pick['trial']}) | {pick['search_return']:.1f} | "
                             f"{steps if steps is not None else 'n/a'} | {f'{8 * steps:,}' if steps is not None else 'n/a'} |")
    return lines + [""]


def _cells(result: Mapping[str, Any], plan: _Plan) -> list[str]:
    lines = ["## Every cell", "", "Mean normalized score [95% t-interval] over the scoring seeds.", "",
             "| task | arm | tuned on | " + " | ".join(f"lag {lag}" for lag in plan.lags) + " |",
             "|---|---|---|" + "---:|" * len(plan.lags)]
    by = {(c["env"], c["algo"], c["tuned"], c["lag"]): c for c in result["cells"]}
    for env, _ in plan.tasks:
        for algo in plan.arms:
            for tuned in ("fresh", lag_name(plan.tax_lag)):
                if not any((env, algo, tuned, lag) in by for lag in plan.lags):
                    continue
                cells = [by.get((env, algo, tuned, lag)) for lag in plan.lags]
                lines.append(f"| {env} | {algo} | {tuned} | " + " | ".join(f"{c['mean']:.3f} ± {c['half']:.3f}" if c else "" for c in cells) + " |")
    return lines + [""]


def figure(result: Mapping[str, Any], plan: _Plan, out: Path) -> None:
    from ..plots import lag_axes

    import matplotlib.pyplot as plt  # after plots, which sets the Agg backend

    envs = [env for env, _ in plan.tasks if env in result["per_task"]] or [plan.tasks[0][0]]
    cols = 2 if len(envs) <= 4 else 3  # two columns leave room for the title and the legend with one task
    rows = math.ceil(len(envs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.8 * cols, 3.4 * rows + 0.8), squeeze=False)
    colors = {"esspo": "tab:red", "ppo": "tab:blue", "decoupled-ppo": "tab:green", "vtrace": "tab:purple"}
    by = {(c["env"], c["algo"], c["tuned"], c["lag"]): c for c in result["cells"]}
    for ax, env in zip(axes.flat, envs):
        ax.axvspan(log_lag(1), log_lag(8), color="0.92", zorder=0, label="realistic lags 1-8")
        for algo in plan.arms:
            got = [(lag, by[(env, algo, "fresh", lag)]) for lag in plan.lags if (env, algo, "fresh", lag) in by]
            if got:
                x = [log_lag(lag) for lag, _ in got]
                ax.errorbar(x, [c["mean"] for _, c in got], yerr=[c["half"] for _, c in got], color=colors.get(algo), marker="o",
                            ms=3.5, capsize=2.5, lw=1.4, label=f"{algo} (tuned fresh)")
            tuned = by.get((env, algo, lag_name(plan.tax_lag), plan.tax_lag))
            if tuned:
                ax.errorbar([log_lag(plan.tax_lag) + 0.08], [tuned["mean"]], yerr=[tuned["half"]], color=colors.get(algo), marker="*", ms=9,
                            capsize=2.5, ls="none", label=f"{algo} (tuned at lag {plan.tax_lag})")
        lag_axes(ax, plan.lags, env)
    for ax in list(axes.flat)[len(envs):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    ncol = 4 if cols < 3 else 5
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    fig.suptitle(f"Tuned once on fresh data, frozen, run at every lag (mean and 95% CI over {len(plan.score_seeds)} held-out seeds)", fontsize=11)
    fig.tight_layout(rect=(0, (0.2 + 0.17 * math.ceil(len(labels) / ncol)) / fig.get_figheight(), 1, 1 - 0.3 / fig.get_figheight()))
    tmp = out.with_name(f".{out.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(out)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; a bad input is one line on stderr with exit status 2."""
    return contract.one_line_errors("frozen report", lambda: _main(argv))


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adaptive_po.analysis.reports.frozen", description="the frozen-tuning study's verdicts and figure, from its committed tables")
    parser.add_argument("--results", default="docs/results/frozen")
    parser.add_argument("--plan", default=PLAN, help="the study's plan file (its endpoints, margins, Holm families and decision rule)")
    args = parser.parse_args(argv)
    results = contract.existing_folder(args.results, "the study's results folder")  # a report makes no folder
    study = committed_plan(args.plan)
    loaded = load_and_analyse(results)
    contract.atomic_write_text(results / "verdicts.md", report_text(*loaded, results=results, study=study))
    searched = (results / FROZEN_SELECTION_FILE).is_file()
    if searched:
        figure(loaded[4], loaded[3], results / "staleness.png")
    print(f"wrote {results / 'verdicts.md'}" + (f" and {results / 'staleness.png'}" if searched else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
