"""The frozen study's extension under the ESS objective's own update: its report, from the committed tables alone.

``python -m adaptive_po.analysis.reports.frozen_schedule --results docs/results/frozen-schedule
--published docs/results/frozen`` (``make frozen-schedule-from-table``) reads this study's
``per_run.csv``, ``selected.json`` and ``cuts.json`` and the published study's ``per_run.csv`` and
``selected.json`` (its ``ppo``, ``decoupled-ppo`` and ``esspo`` runs are the comparators), and
writes ``verdicts.md`` and ``staleness.png`` into ``--results``.

The endpoints, the Holm family of seven and the decision rule are those of
``docs/results/frozen-schedule/preregistration.md``; the tests and their words are the published
report's (:mod:`adaptive_po.analysis.reports.frozen`), reused here. A study in progress is reported
as far as its runs go: each endpoint over the tasks whose runs are all in the tables, the missing
tasks named, and every answer "not decided (the study is not complete)" until its endpoints have
every planned task.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from adaptive_po import contract

from adaptive_po.studies.plan import PLAN_FILE, StudyPlan, load_plan as load_plan_file

from ..endpoints import (
    SLOPE_LAGS, SLOPE_MARGIN, check_searched_picks, decide, deviations, format_difference, format_p, fresh_scores, frozen_scores,
    half_width as _half, head_to_head, lag_name, log_lag, per_task_family, pick_at as _pick, plan_rows, read_study_table as read_table, row_cells,
    slope, slope_difference as slope_between, tax_sum, tested,
)
from ..hypothesis import ALPHA, MARGIN, Difference, mean_of_differences, welch

#: the study's plan file (its endpoints, margins, Holm family and decision rules are read from it)
PLAN = f"{contract.SCHEDULE_RESULTS}/{PLAN_FILE}"

#: the arms, labelled apart: this study's arms by what they are, a schedule their own search chose from a space built
#: around the authors' (whole-rollout steps; it mostly chose one pass of minibatches), not by the schedule they were meant
#: to test; the published ones ran the Zoo's
ARM1 = "esspo (schedule search)"
ARM2 = "ppo (schedule search)"
PUB_ESSPO = "esspo (Zoo schedule)"
PPO = "ppo (Zoo schedule)"
DPPO = "decoupled-ppo (Zoo schedule)"
ARMS: tuple[str, ...] = (ARM1, ARM2, PUB_ESSPO, PPO, DPPO)
#: the published study's score folder (its sweep and tax runs)
PUBLISHED_SCORE_FOLDER = contract.FROZEN_SCORE_FOLDER
#: what an answer reads while its endpoints lack a planned task
NOT_COMPLETE = "not decided (the study is not complete)"

#: the seven primary endpoints: (name, kind, comparator, text)
ENDPOINTS: tuple[tuple[str, str, str, str], ...] = (
    ("A1", "slope", PPO, "A1. slope per unit log2(1 + lag), lags 0-8: arm 1 - ppo"),
    ("A2", "lag0", PPO, "A2. lag 0: arm 1 - ppo (non-inferiority at -0.1)"),
    ("A3", "tax", PPO, "A3. retuning tax at lag 8: arm 1's - ppo's"),
    ("B1", "slope", DPPO, "B1. slope per unit log2(1 + lag), lags 0-8: arm 1 - decoupled-ppo"),
    ("B2", "lag0", DPPO, "B2. lag 0: arm 1 - decoupled-ppo (non-inferiority at -0.1)"),
    ("B3", "tax", DPPO, "B3. retuning tax at lag 8: arm 1's - decoupled-ppo's"),
    ("C", "schedule", PUB_ESSPO, "C. lag 0: arm 1 - published esspo (two-sided; equivalence ±0.1)"),
)
FAMILIES: dict[str, tuple[str, str, str]] = {"A": ("A1", "A2", "A3"), "B": ("B1", "B2", "B3")}
FAMILY_CLAIMS = {"A": "against PPO (family A: arm 1 vs the published tuned `ppo`)",
                 "B": "against the proximal correction (family B: arm 1 vs the published tuned `decoupled-ppo`)"}
C_WORDS = {"win": "closed", "loss": "widened", "equivalent": "equivalent", "inconclusive": "not decided"}

LIMITS = (
    "Advantages are GAE as in the published study, not the authors' GRPO (group-normalized returns need several samples "
    "per prompt, which control tasks do not have).",
    "The optimizer is Adam with the Zoo's gradient-norm clip (0.5), not AdamW.",
    "One configuration space cannot hold every schedule the authors might use; the space's corners are the pre-registration's table.",
    "The comparators (`ppo`, `decoupled-ppo` and `esspo` under the Zoo schedule) are the published study's runs, made by this "
    "code base on 2026-12-01/02; this study's runs were made by the code of its own dates. The engine changes since then are "
    "tested to compute the same update, but a comparison across the two is also one across code versions.",
)


# ----------------------------------------------------------------------------------------------
# the plan, from the committed files


@dataclass(frozen=True)
class Plan:
    """What the report needs of the study's plan: the committed ``selected.json``'s record once a
    search is done, else the pre-registered sub-plans less the committed cuts."""

    parts: Mapping[str, Mapping[str, Any]]
    cuts: Mapping[str, Sequence[Any]]

    @property
    def main(self) -> Mapping[str, Any]:
        return self.parts.get("main", {})

    @property
    def tasks(self) -> tuple[tuple[str, int], ...]:
        return tuple((t["env"], int(t["budget"])) for t in self.main.get("tasks", ()))

    @property
    def lags(self) -> tuple[int, ...]:
        return tuple(int(lag) for lag in self.main.get("lags", ()))

    @property
    def tax_lag(self) -> int:
        return int(self.main.get("tax_lag", 8))

    @property
    def score_seeds(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.main.get("score_seeds", ()))

    def planned(self, part: str) -> tuple[int, int]:
        """(search runs, scoring runs) of ``part`` over its tasks; (0, 0) for a part cut."""
        record = self.parts.get(part)
        if not record:
            return 0, 0
        arms = list(record["arms"])
        fresh = list(record.get("fresh_arms", arms))
        tax = list(record.get("tax_arms", ()))
        search = sum((a in fresh) + (a in tax) for a in arms) * int(record["trials"]) * len(record["search_seeds"])
        score = (len(fresh) * len(record["lags"]) + len(tax)) * len(record["score_seeds"])
        return len(record["tasks"]) * search, len(record["tasks"]) * score

    @property
    def total(self) -> int:
        return sum(sum(self.planned(part)) for part in self.parts)


def load_plan(results: Path, selected: Mapping[str, Any]) -> Plan:
    cuts_path = results / contract.SCHEDULE_CUTS_FILE
    cuts = json.loads(contract.read_regular_text(cuts_path)) if cuts_path.is_file() else {}
    parts = selected.get("plan")
    plan_path = results / contract.SCHEDULE_PLAN_FILE
    if not parts and plan_path.is_file():  # written when the first slice starts, before its first search ends
        parts = json.loads(contract.read_regular_text(plan_path))
    if not parts or not isinstance(parts, Mapping):  # nothing says what the study plans: no report to make
        raise ValueError(f"{results}: neither {contract.FROZEN_SELECTION_FILE} nor {contract.SCHEDULE_PLAN_FILE} holds the study's plan "
                         "(its first slice writes it): nothing to report")
    return Plan(parts=parts, cuts=cuts)


def _json(path: Path) -> dict[str, Any]:
    return contract.read_committed_json(path) if path.is_file() else {}


def load(results: Path, published: Path) -> tuple[dict, dict, dict, dict, Plan]:
    table = read_table(results / contract.FROZEN_TABLE_FILE)
    selected = _json(results / contract.FROZEN_SELECTION_FILE) or {"selected": {}}
    published_table = read_table(published / contract.FROZEN_TABLE_FILE)
    published_selected = _json(published / contract.FROZEN_SELECTION_FILE) or {"selected": {}}
    plan = load_plan(results, selected)
    check_picks(results / contract.FROZEN_SELECTION_FILE, table, selected, plan, results / contract.FROZEN_TRIALS_FILE)
    return table, selected, published_table, published_selected, plan


#: each part's search folder in the table
SEARCH_FOLDERS = {"main": contract.SCHEDULE_SEARCH_FOLDER, "dppo-tax": contract.SCHEDULE_DPPO_SEARCH_FOLDER, "luck": contract.SCHEDULE_LUCK_SEARCH_FOLDER}


def check_picks(where: Path, table: Mapping, selected: Mapping[str, Any], plan: Plan, where_trials: Path | None = None) -> None:
    """Each selected configuration of each part is a best one of that part's search in the table,
    its trial, return and score those of ``trials.csv`` (``where_trials``) and the table, each part
    a registered one, and every search of ``trials.csv`` one that ``selected.json`` chose from
    (:func:`~adaptive_po.analysis.endpoints.check_searched_picks`)."""
    parts = {part: (folder, plan.parts.get(part, {}).get("search_seeds", ()), int(plan.parts.get(part, {}).get("tax_lag", 8)))
             for part, folder in SEARCH_FOLDERS.items()}
    check_searched_picks(where, table, selected, parts, where_trials)


def load_and_analyse(results: Path, published: Path) -> tuple[dict, dict, dict, dict, Plan, dict[str, Any]]:
    table, selected, published_table, published_selected, plan = load(results, published)
    return table, selected, published_table, published_selected, plan, analyse(table, selected, published_table, published_selected, plan)


# ----------------------------------------------------------------------------------------------
# the numbers


def in_folder(table: Mapping, folder: str) -> dict:
    """The rows of ``folder``, keyed as the published score folder's: the published report's
    :func:`~adaptive_po.analysis.endpoints.fresh_scores` reads any folder through this."""
    return {(PUBLISHED_SCORE_FOLDER, *key[1:]): row for key, row in table.items() if key[0] == folder}


def analyse(table: Mapping, selected: Mapping[str, Any], published_table: Mapping, published_selected: Mapping[str, Any], plan: Plan) -> dict[str, Any]:
    """Every number of the report: per task the five arms' curves, the three taxes, the slopes, the
    seven endpoints per task and over the tasks that have them, and the search-luck line."""
    seeds, lags, tax_lag = plan.score_seeds, plan.lags, plan.tax_lag
    ours, theirs = in_folder(table, contract.SCHEDULE_SCORE_FOLDER), in_folder(published_table, PUBLISHED_SCORE_FOLDER)
    fresh: dict[str, dict[tuple[str, int], np.ndarray]] = {}
    taxed: dict[str, dict[str, tuple[bool, np.ndarray]]] = {}
    tuned_variants: dict[str, dict[str, str]] = {}
    cells: list[dict[str, Any]] = []
    for env, budget in plan.tasks:
        fresh[env], taxed[env], tuned_variants[env] = {}, {}, {}
        sources = [
            (ours, {ARM1: _pick(selected, env, "main", "esspo", "fresh"), ARM2: _pick(selected, env, "main", "ppo", "fresh")}),
            (theirs, {PUB_ESSPO: _pick(published_selected, env, "esspo", "fresh"), PPO: _pick(published_selected, env, "ppo", "fresh"),
                      DPPO: _pick(published_selected, env, "decoupled-ppo", "fresh")}),
        ]
        for source, picks in sources:
            algo_of = {ARM1: "esspo", ARM2: "ppo", PUB_ESSPO: "esspo", PPO: "ppo", DPPO: "decoupled-ppo"}
            for label, pick in picks.items():
                if pick is None:
                    continue
                got = fresh_scores(source, [(env, budget)], {env: {algo_of[label]: pick["variant"]}}, lags, seeds)[env]
                fresh[env].update({(label, lag): scores for (_, lag), scores in got.items()})
        # the taxes: the lag-8-tuned configuration at lag 8 (the fresh-tuned runs are the sweep's)
        tax_picks = [
            (ARM1, ours, "esspo", _pick(selected, env, "main", "esspo", lag_name(tax_lag)), _pick(selected, env, "main", "esspo", "fresh")),
            (PPO, theirs, "ppo", _pick(published_selected, env, "ppo", lag_name(tax_lag)), _pick(published_selected, env, "ppo", "fresh")),
            (DPPO, ours, "decoupled-ppo", _pick(selected, env, "dppo-tax", "decoupled-ppo", lag_name(tax_lag)),
             _pick(published_selected, env, "decoupled-ppo", "fresh")),
        ]
        for label, source, algo, tuned, fresh_pick in tax_picks:
            if tuned is None or fresh_pick is None:
                continue
            tuned_variants[env][label] = tuned["variant"]
            got = frozen_scores(source, env, budget, algo, tuned["variant"], tax_lag, seeds)
            if got is not None:
                taxed[env][label] = (tuned["variant"] == fresh_pick["variant"], got)
        for (label, lag), x in fresh[env].items():
            cells.append({"env": env, "arm": label, "tuned": "fresh", "lag": lag, "mean": float(x.mean()), "half": _half(x), "n": len(x)})
        for label, (_, x) in taxed[env].items():
            cells.append({"env": env, "arm": label, "tuned": lag_name(tax_lag), "lag": tax_lag, "mean": float(x.mean()), "half": _half(x), "n": len(x)})

    slopes: dict[tuple[str, str], tuple[float, float, float]] = {}
    for env, got in fresh.items():
        for label in ARMS:
            if all((label, lag) in got for lag in SLOPE_LAGS):
                xs = [(lag, v) for lag in SLOPE_LAGS for v in got[(label, lag)]]
                slopes[(env, label)] = slope([a for a, _ in xs], [b for _, b in xs])

    def tax_groups(env: str, label: str) -> list[tuple[np.ndarray, float]] | None:
        if label not in taxed.get(env, {}) or (label, tax_lag) not in fresh.get(env, {}):
            return None
        same, tuned = taxed[env][label]
        return [] if same else [(tuned, 1.0), (fresh[env][(label, tax_lag)], -1.0)]

    def tax(envs: Sequence[str], signs: Mapping[str, float]) -> Difference:
        """sum over ``envs`` and arms of sign x tax / len(envs), as the published report: a lag-8
        choice that is the fresh one has a tax of exactly 0 (no terms)."""
        return tax_sum({env: {label: tax_groups(env, label) or [] for label in signs} for env in envs}, envs, signs)

    def slope_difference(envs: Sequence[str], a: str, b: str) -> Difference:
        return slope_between(slopes, envs, a, b)

    endpoints: dict[str, dict[str, Any]] = {}
    for name, kind, comparator, text in ENDPOINTS:
        planned = not (name == "B3" and "dppo-tax" not in plan.parts)
        if kind == "slope":
            envs = [env for env, _ in plan.tasks if (env, ARM1) in slopes and (env, comparator) in slopes]
            by_task = {env: slope_difference([env], ARM1, comparator) for env in envs}
            agg = slope_difference(envs, ARM1, comparator)
        elif kind in ("lag0", "schedule"):
            envs = [env for env, _ in plan.tasks if (ARM1, 0) in fresh[env] and (comparator, 0) in fresh[env]]
            pairs = {env: (fresh[env][(ARM1, 0)], fresh[env][(comparator, 0)]) for env in envs}
            by_task = {env: welch(*pair) for env, pair in pairs.items()}
            agg = mean_of_differences(list(pairs.values())) if pairs else Difference(math.nan, math.nan, math.nan)
        else:
            envs = [env for env, _ in plan.tasks if planned and tax_groups(env, ARM1) is not None and tax_groups(env, comparator) is not None]
            by_task = {env: tax([env], {ARM1: 1.0, comparator: -1.0}) for env in envs}
            agg = tax(envs, {ARM1: 1.0, comparator: -1.0})
        endpoints[name] = {"name": name, "kind": kind, "comparator": comparator, "text": text, "planned": planned, "agg": agg,
                           "tasks": by_task, "missing": [env for env, _ in plan.tasks if env not in by_task] if planned else []}
    taxes = {label: {env: tax([env], {label: 1.0}) for env, _ in plan.tasks if tax_groups(env, label) is not None} for label in (ARM1, PPO, DPPO)}
    # arm 1's own tax over each family's endpoint-3 tasks (the "tax equivalent to 0" line of the rule)
    arm1_tax = {family: tax(list(endpoints[f"{family}3"]["tasks"]), {ARM1: 1.0}) for family in FAMILIES}
    comparator_tax = {"A": tax(list(endpoints["A3"]["tasks"]), {PPO: 1.0}), "B": tax(list(endpoints["B3"]["tasks"]), {DPPO: 1.0})}
    # decoupled-ppo's lag-8 choice that is its published fresh one: tax 0 by the rule; the rerun's drift from the published runs
    drift = {env: welch(taxed[env][DPPO][1], fresh[env][(DPPO, tax_lag)]) for env in taxed
             if DPPO in taxed[env] and taxed[env][DPPO][0] and (DPPO, tax_lag) in fresh[env]}
    return {"fresh": fresh, "taxed": taxed, "tuned_variants": tuned_variants, "cells": cells, "slopes": slopes, "endpoints": endpoints,
            "taxes": taxes, "arm1_tax": arm1_tax, "comparator_tax": comparator_tax, "dppo_drift": drift,
            "luck": luck(table, selected, plan, fresh, endpoints)}


def luck(table: Mapping, selected: Mapping[str, Any], plan: Plan, fresh: Mapping[str, Mapping[tuple[str, int], np.ndarray]],
         endpoints: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The search-luck line: on the luck task, the second search's selection minus the first's at
    lag 0 (the same configuration: the same runs, a difference of exactly 0), beside A2 there."""
    env = contract.SCHEDULE_LUCK_TASK
    out: dict[str, Any] = {"env": env, "planned": "luck" in plan.parts, "d": Difference(math.nan, math.nan, math.nan),
                           "a2": endpoints["A2"]["tasks"].get(env), "main": _pick(selected, env, "main", contract.SCHEDULE_LUCK_ARM, "fresh"),
                           "second": _pick(selected, env, "luck", contract.SCHEDULE_LUCK_ARM, "fresh"), "same": False}
    budget = dict(plan.tasks).get(env)
    if out["main"] is None or out["second"] is None or budget is None:
        return out
    out["same"] = out["second"]["variant"] == out["main"]["variant"]
    second = frozen_scores(in_folder(table, contract.SCHEDULE_SCORE_FOLDER), env, budget, contract.SCHEDULE_LUCK_ARM, out["second"]["variant"], 0, plan.score_seeds)
    first = fresh.get(env, {}).get((ARM1, 0))
    if second is not None and first is not None:
        out["scores"] = second
        out["d"] = Difference(0.0, 0.0, math.inf) if out["same"] else welch(second, first)
    return out


def committed_plan(path: str | Path = PLAN) -> StudyPlan:
    """The study's plan file (``docs/results/frozen-schedule/plan.toml``): the endpoints, their
    margins and Holm family, and the decision rules this report reads (the rest of it comes with
    the port)."""
    return load_plan_file(path)


def primary(result: Mapping[str, Any], study: StudyPlan | None = None) -> list[dict[str, Any]]:
    """The plan's primary family (the seven endpoints) with Holm over the seven
    (:func:`~adaptive_po.analysis.endpoints.family`): A1/B1/A3/B3/C two-sided (their equivalence
    tests Holm-adjusted over the same five), A2/B2 one-sided non-inferiority at -0.1, each read
    "inferior" where its mirror test rejects after the same Holm (in its place among the seven).
    Each row has its verdict word; C also its own words."""
    study = study or committed_plan()
    eps = [result["endpoints"][name] for name, *_ in ENDPOINTS]
    return [{**row, "name": ep["name"], "kind": ep["kind"], "p_adj": float(row["p_adj"]), "p_equivalence_adj": float(row["p_equivalence_adj"]),
             "margin": study.endpoint(ep["name"]).test_margin, "tasks": len(ep["tasks"]), "missing": ep["missing"], "planned": ep["planned"]}
            for row, ep in zip(plan_rows(study, {ep["name"]: ep["agg"] for ep in eps}), eps)]


def family_rule(v1: str, v2: str, v3: str | None, tax_equivalent: bool, name: str = "A", study: StudyPlan | None = None) -> str:
    """The registered rule (the plan's decision ``name``) on a family's three verdicts: supported
    where 1 is a win, 2 non-inferior and 3 a win or arm 1's tax equivalent to 0; contradicted where
    1 is a loss, 2 inferior or 3 a loss; else not decided. ``v3`` None: endpoint 3 cut (decided on
    1 and 2 alone, never supported)."""
    study = study or committed_plan()
    rule = next(d for d in study.decisions if d.name == name)
    names = [name for name, *_ in ENDPOINTS]
    primaries = [i for i in names if i in rule.endpoints()]
    tax = next(e.id for e in study.endpoints if e.id in rule.endpoints() and e.id not in names)
    rows: dict[str, dict[str, Any]] = {primaries[0]: {"verdict": v1}, primaries[1]: {"verdict": v2}}
    if v3 is not None:
        rows[primaries[2]] = {"verdict": v3}
        rows[tax] = {"verdict": "equivalent" if tax_equivalent else "inconclusive", "within_margin": tax_equivalent}
    return decide(rule, rows)


def tax_equivalent(d: Difference) -> bool:
    return d.testable and d.p_equivalence(MARGIN) < ALPHA


def answers(result: Mapping[str, Any], rows: Sequence[Mapping[str, Any]] | None = None, study: StudyPlan | None = None) -> dict[str, dict[str, Any]]:
    """Per family (A, B) and for C: ``{"answer", "interim", "complete"}``. The answer is the rule's
    once the family's endpoints have every planned task, else :data:`NOT_COMPLETE`; ``interim`` is
    the rule's reading over the tasks so far (not the answer)."""
    study = study or committed_plan()
    rows = rows if rows is not None else primary(result, study)
    by = {r["name"]: r for r in rows}
    out: dict[str, dict[str, Any]] = {}
    for family, names in FAMILIES.items():
        v1, v2 = by[names[0]]["verdict"], by[names[1]]["verdict"]
        v3 = by[names[2]]["verdict"] if by[names[2]]["planned"] else None
        reading = family_rule(v1, v2, v3, tax_equivalent(result["arm1_tax"][family]), family, study)
        complete = all(not by[n]["missing"] and (by[n]["planned"] is False or by[n]["tasks"] > 0) for n in names)
        out[family] = {"answer": reading if complete else NOT_COMPLETE, "interim": reading, "complete": complete}
    c = by["C"]
    reading = decide(next(d for d in study.decisions if d.name == "C"), {"C": c})
    complete = not c["missing"] and c["tasks"] > 0
    out["C"] = {"answer": reading if complete else NOT_COMPLETE, "interim": reading, "complete": complete}
    return out


def per_task_verdicts(result: Mapping[str, Any], study: StudyPlan | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Each endpoint per task, Holm over that endpoint's tasks (``inferior`` and ``non-inferior``
    both adjusted): ``{endpoint: {task: row}}``."""
    study = study or committed_plan()
    return {name: per_task_family(study.endpoint(name), result["endpoints"][name]["tasks"]) for name, *_ in ENDPOINTS}


def secondary(result: Mapping[str, Any], plan: Plan) -> dict[str, Any]:
    """The secondary tables, Holm within each: every arm against ``ppo`` and against
    ``decoupled-ppo`` at every lag; arm 2 against ``ppo`` at lag 0 and in slope (the schedule's
    effect on PPO); arm 1 against arm 2 at every lag (the objective's effect within one schedule)."""
    fresh = result["fresh"]
    out: dict[str, Any] = {
        "vs_ppo": head_to_head(fresh, PPO, ARMS, plan.lags),
        "vs_dppo": head_to_head(fresh, DPPO, ARMS, plan.lags),
        "objective": head_to_head({env: {k: v for k, v in cells.items() if k[0] in (ARM1, ARM2)} for env, cells in fresh.items()},
                                  ARM2, (ARM1, ARM2), plan.lags),
    }
    slopes = result["slopes"]
    lag0 = {env: (cells[(ARM2, 0)], cells[(PPO, 0)]) for env, cells in fresh.items() if (ARM2, 0) in cells and (PPO, 0) in cells}
    sl = [env for env in fresh if (env, ARM2) in slopes and (env, PPO) in slopes]

    def slope_diff(envs: Sequence[str]) -> Difference:
        return slope_between(slopes, envs, ARM2, PPO)

    agg_keys, agg_d, agg_m = [], [], []
    if lag0:
        agg_keys.append(("lag 0", len(lag0)))
        agg_d.append(mean_of_differences(list(lag0.values())))
        agg_m.append(MARGIN)
    if sl:
        agg_keys.append(("slope, lags 0-8", len(sl)))
        agg_d.append(slope_diff(sl))
        agg_m.append(SLOPE_MARGIN)
    task_keys, task_d, task_m = [], [], []
    for env in fresh:
        if env in lag0:
            task_keys.append((env, "lag 0"))
            task_d.append(welch(*lag0[env]))
            task_m.append(MARGIN)
        if env in sl:
            task_keys.append((env, "slope, lags 0-8"))
            task_d.append(slope_diff([env]))
            task_m.append(SLOPE_MARGIN)
    out["schedule_on_ppo"] = (
        [{"env": env, "what": what, **r} for (env, what), r in zip(task_keys, tested(task_d, task_m))],
        [{"what": what, "tasks": n, **r} for (what, n), r in zip(agg_keys, tested(agg_d, agg_m))],
    )
    return out


def progress(table: Mapping, selected: Mapping[str, Any], plan: Plan) -> dict[str, dict[str, int]]:
    """Runs in the table per part and kind (search, scoring): ``{part: {"search": n, "score": n}}``
    (rows of no part of the plan under ``"other"``). A scoring row is ``dppo-tax``'s if it is
    ``decoupled-ppo``'s, ``luck``'s if it is the luck selection at lag 0 (and not the main one's)."""
    search_parts = {contract.SCHEDULE_SEARCH_FOLDER: "main", contract.SCHEDULE_DPPO_SEARCH_FOLDER: "dppo-tax", contract.SCHEDULE_LUCK_SEARCH_FOLDER: "luck"}
    out = {part: {"search": 0, "score": 0} for part in (*contract.SCHEDULE_PARTS, "other")}
    for folder, env, algo, variant, lag, *_ in table:
        if folder in search_parts:
            out[search_parts[folder]]["search"] += 1
        elif folder == contract.SCHEDULE_SCORE_FOLDER:
            second = _pick(selected, env, "luck", contract.SCHEDULE_LUCK_ARM, "fresh")
            first = _pick(selected, env, "main", contract.SCHEDULE_LUCK_ARM, "fresh")
            if algo == contract.SCHEDULE_DPPO:
                part = "dppo-tax"
            elif (second is not None and algo == contract.SCHEDULE_LUCK_ARM and lag == 0 and variant == second["variant"]
                  and (first is None or variant != first["variant"])):
                part = "luck"
            else:
                part = "main"
            out[part]["score"] += 1
        else:
            out["other"]["search"] += 1
    return out


# ----------------------------------------------------------------------------------------------
# the text


def _reading(answer: Mapping[str, Any]) -> str:
    """The rule's reading over the tasks so far, beside an answer that is not yet the study's."""
    if answer["complete"]:
        return "(final)"
    return "nothing to read yet" if answer["interim"] == NOT_COMPLETE else f"{answer['interim']} (interim, not the answer)"


def _word(row: Mapping[str, Any]) -> str:
    if not row["planned"]:
        return "cut (pre-registered cut order)"
    if not row["verdict"]:
        return NOT_COMPLETE
    if row["name"] == "C":
        return f"{row['verdict']} ({C_WORDS[row['verdict']]})"
    return row["verdict"]


def _tasks_cell(row: Mapping[str, Any], n_tasks: int) -> str:
    if not row["planned"]:
        return "cut"
    text = f"{row['tasks']} of {n_tasks}"
    return text + (f" (missing: {', '.join(row['missing'])})" if row["missing"] else "")


def schedule_words(pick: Mapping[str, Any] | None) -> str:
    """What a selection's schedule is, in words: whole-rollout steps or passes of minibatches, with its optimizer steps
    per update."""
    if not pick:
        return "not searched yet"
    factors = dict(kv.split("=", 1) for kv in (pick.get("variant") or "").split(",") if "=" in kv)
    epochs = factors.get("n_epochs")
    steps = pick.get("optimizer_steps_per_update")
    if factors.get("batch_size") == "rollout":
        n = epochs or "the Zoo's epochs of"
        return f"{n} whole-rollout step{'' if epochs == '1' else 's'} per update"
    passes = "one pass" if epochs == "1" else f"{epochs} passes" if epochs else "the Zoo's epochs"
    return f"{passes} of minibatches ({f'{steps:,}' if steps is not None else 'n/a'} optimizer steps per update)"


def _chosen_lines(selected: Mapping[str, Any], plan: Plan) -> list[str]:
    """Per task, the schedule each of this study's searches chose on fresh data."""
    if not any(_pick(selected, env, "main") for env, _ in plan.tasks):
        return []
    parts = []
    for label, algo in ((ARM1, "esspo"), (ARM2, "ppo")):
        picks = {env: _pick(selected, env, "main", algo, "fresh") for env, _ in plan.tasks}
        whole = [env for env, pick in picks.items() if pick and "batch_size=rollout" in (pick.get("variant") or "")]
        parts.append(f"`{label}`: " + "; ".join(f"{env} {schedule_words(pick)}" for env, pick in picks.items())
                     + f" (whole-rollout steps on {len(whole)} of {len(picks)} tasks{': ' + ', '.join(whole) if whole else ''})")
    return ["**What the searches chose** (fresh data; the configurations are under \"Selected configurations\"): "
            + ". ".join(parts) + ".", ""]


def _c_by_task_lines(result: Mapping[str, Any], plan: Plan, selected: Mapping[str, Any], c: Mapping[str, Any], study: StudyPlan) -> list[str]:
    """C per task beside the aggregate, and which tasks carry the aggregate's verdict."""
    rows = per_task_verdicts(result, study).get("C", {})
    if not rows or not c.get("verdict"):
        return []
    cells = "; ".join(f"{env} {format_difference(rows[env]['d'])} ({rows[env]['verdict']})" for env, _ in plan.tasks if env in rows)
    text = f"**C per task** (Holm over the tasks): {cells}."
    if c["verdict"] in ("win", "loss"):
        carrying = [env for env, _ in plan.tasks if env in rows and rows[env]["verdict"] == c["verdict"]]
        if len(carrying) < len(rows):
            alone = " alone" if len(carrying) == 1 else ""
            text += (f" The aggregate's {c['verdict']} ({C_WORDS[c['verdict']]}) rests on "
                     + ("; ".join(f"{env}{alone}, where arm 1's search chose {schedule_words(_pick(selected, env, 'main', 'esspo', 'fresh'))}"
                                  for env in carrying) or "no single task's (none is one per task)") + ".")
    return [text]


def report_text(table: Mapping, selected: Mapping[str, Any], published_table: Mapping, published_selected: Mapping[str, Any], plan: Plan,
                result: Mapping[str, Any], results: Path | None = None, study: StudyPlan | None = None) -> str:
    study = study or committed_plan()
    rows = primary(result, study)
    answer = answers(result, rows, study)
    n_tasks = len(plan.tasks)
    done = progress(table, selected, plan)
    total_done = sum(v for part in done.values() for v in part.values())
    lines = [
        "# The paper's claim with the update schedule searched again: verdicts",
        "",
        "The frozen study's pre-registered extension ([`preregistration.md`](preregistration.md)): `esspo` tuned once over a "
        "space of update schedules built around its authors' (whole-rollout optimizer steps, the k3 KL; one pass of minibatches "
        "as the middle regime), frozen and swept over the lags, against the published study's tuned `ppo` and `decoupled-ppo` "
        "([`../frozen/`](../frozen/)). The question is the authors' schedule; the arms are what the searches chose. Rebuilt from "
        "the committed tables by `make frozen-schedule-from-table`.",
        "",
        "Arms: **arm 1** = `esspo` with the schedule its search chose (\"" + ARM1 + "\"), **arm 2** = `ppo` with the schedule "
        "its own search chose from the same space (\"" + ARM2 + "\"), both this study's; \"" + PUB_ESSPO + "\", \"" + PPO
        + "\" and \"" + DPPO + "\" are the published study's runs and configurations (the RL Zoo's schedule, tuned in its "
        "factor space).",
        "",
        *_chosen_lines(selected, plan),
    ]
    if total_done == 0:
        lines += ["**Progress: no runs yet** (`per_run.csv` has no rows). Every endpoint below is " + NOT_COMPLETE
                  + f"; the plan has {plan.total:,} runs.", ""]
    else:
        lines += [f"**Progress:** {total_done:,} of {plan.total:,} planned runs in [`per_run.csv`](per_run.csv) (at most: a "
                  "selection that is another's, e.g. a lag-8 choice that is the fresh one, shares that one's runs).", ""]
    lines += ["| part | search runs (folder) | scoring runs (`" + contract.SCHEDULE_SCORE_FOLDER + "`) |", "|---|---:|---:|"]
    folders = {"main": contract.SCHEDULE_SEARCH_FOLDER, "dppo-tax": contract.SCHEDULE_DPPO_SEARCH_FOLDER, "luck": contract.SCHEDULE_LUCK_SEARCH_FOLDER}
    for part in contract.SCHEDULE_PARTS:
        search, score = plan.planned(part)
        if part not in plan.parts:
            lines.append(f"| {part} | cut | cut |")
            continue
        lines.append(f"| {part} | {done[part]['search']:,} of {search:,} (`{folders[part]}`) | {done[part]['score']:,} of {score:,} |")
    if done["other"]["search"]:
        lines.append(f"| rows of no part | {done['other']['search']:,} | |")
    lines.append("")
    if any(plan.cuts.get(k) for k in ("lags", "parts", "tasks")):
        lines.append(f"Cut by the pre-registered order (`cuts.json`): {dict(plan.cuts)}.")
    else:
        lines.append("Cuts (`cuts.json`): none" + ("." if plan.cuts else " committed yet (the dry run planned none)."))
    if results is not None:
        lines += ["", *deviations(results)]

    complete = all(a["complete"] for a in answer.values())
    lines += ["", "## The answer", ""]
    if not complete:
        lines += ["**Interim: the study is not complete, and no answer here is the study's until every planned task of an "
                  "answer's endpoints is in.** The \"reading so far\" column applies the registered rule to the tasks that are "
                  "complete; it is not an answer. Until every endpoint has a test, Holm runs over the endpoints that have one (fewer than "
                  "seven), so the interim adjusted p's are no larger than the final ones will be.", ""]
    lines += ["| claim | endpoints' tasks complete | answer by the pre-registered rule | reading so far |", "|---|---|---|---|"]
    by = {r["name"]: r for r in rows}
    for family, names in FAMILIES.items():
        counts = ", ".join(f"{n} {by[n]['tasks']}/{n_tasks}" if by[n]["planned"] else f"{n} cut" for n in names)
        a = answer[family]
        lines.append(f"| {FAMILY_CLAIMS[family]} | {counts} | **{a['answer']}** | {_reading(a)} |")
    a = answer["C"]
    lines.append(f"| C. the searched schedule's effect on `esspo` at lag 0 | C {by['C']['tasks']}/{n_tasks} | **{a['answer']}** | {_reading(a)} |")
    lines += ["", *_c_by_task_lines(result, plan, selected, by["C"], study)]
    lines += [
        "",
        "### Primary endpoints (Holm over the seven)",
        "",
        "| endpoint | tasks | estimate [95% CI] | p | p (Holm over the seven) | detectable (80% power) | verdict |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        d = r["d"]
        lines.append(f"| {r['endpoint']} | {_tasks_cell(r, n_tasks)} | {format_difference(d, 4 if r['kind'] == 'slope' else 3)} | {format_p(r['p'])} | "
                     f"{format_p(r['p_adj'])} | {format_p(d.detectable())} | {_word(r)} |")
    for family, label in (("A", PPO), ("B", DPPO)):
        t, ct = result["arm1_tax"][family], result["comparator_tax"][family]
        eq = ("equivalent" if tax_equivalent(t) else "not shown") if t.testable else NOT_COMPLETE
        lines.append(f"| {family}3b. arm 1's tax over {family}3's tasks (equivalent to 0 within ±{MARGIN:g}?) | "
                     f"{len(result['endpoints'][f'{family}3']['tasks'])} of {n_tasks} | {format_difference(t)} | | | {format_p(t.detectable())} | {eq} |")
        lines.append(f"| {family}3c. {label}'s tax | | {format_difference(ct)} | | | {format_p(ct.detectable())} | |")
    lines += [
        "",
        f"A1/B1's equivalence margin is 0.1 over lags 0-8 ({SLOPE_MARGIN:.4f} per unit of log2(1 + lag)); A2/B2 are one-sided "
        "(p of \"arm 1 is worse by 0.1 or more\"; non-inferior where it rejects after Holm over the seven) and read **inferior** "
        "where the mirror test (p of \"arm 1 is worse by less than 0.1\") rejects after the same Holm, in the endpoint's place: "
        + "; ".join(f"{r['name']} p {format_p(r['p_inferior'])}, Holm {format_p(r['p_inferior_adj'])}" for r in rows if "p_inferior" in r)
        + ". A3/B3: a negative difference means retuning at lag 8 buys arm 1 less than it buys the comparator (a win for the "
        "claim). The equivalence tests (A1, A3, B1, B3 and C's two one-sided tests within ±0.1) are Holm-adjusted over those "
        "five: C " + format_p(by["C"]["p_equivalence_adj"]) + ". The rule: a family is **supported** where 1 is a win, 2 non-inferior "
        "and 3 a win or arm 1's tax equivalent to 0 (unadjusted, the descriptive line 3b); **contradicted** where 1 is a loss, "
        "2 inferior or 3 a loss (where both hold, 3 a loss while arm 1's tax is equivalent to 0, supported is read first, as in the "
        "published report); else **not decided**. C: a win is **closed** (the schedule closed part of the published "
        "gap), a loss **widened**, else equivalent or not decided.",
    ]
    if result["dppo_drift"]:
        lines += ["", "`decoupled-ppo`'s lag-8 search chose its published fresh configuration on "
                  + ", ".join(result["dppo_drift"]) + ": its tax there is 0 by the rule (as for a lag-8 choice that is the fresh one); "
                  "the rerun minus the published runs of that configuration at lag 8 (the code versions' drift): "
                  + "; ".join(f"{env} {format_difference(d)}" for env, d in result["dppo_drift"].items()) + "."]
    lines += ["", *_luck_lines(result["luck"])]
    lines += _per_task_lines(result, plan, study)
    lines += _secondary_lines(secondary(result, plan), plan)
    lines += _configurations(selected, published_selected, plan)
    lines += _cells(result, plan)
    lines += ["## Limits", "", *[f"- {limit}" for limit in LIMITS], ""]
    return "\n".join(lines) + "\n"


def _luck_lines(luck: Mapping[str, Any]) -> list[str]:
    head = f"**Search luck ({luck['env']}, lag 0):** "
    if not luck["planned"]:
        return [head + "cut by the pre-registered order.", ""]
    a2 = luck["a2"]
    beside = f"beside A2's lag-0 gap there (arm 1 - ppo): {format_difference(a2) if a2 is not None else 'n/a (not run yet)'}"
    if not luck["d"].testable:
        return [head + f"{NOT_COMPLETE} (the second search's selection at lag 0 is not in the table yet); " + beside + ".", ""]
    if luck["same"]:
        what = f"the second search chose the first's configuration (`{luck['second']['variant']}`): the same runs, a difference of exactly 0"
    else:
        what = (f"the second search's selection (`{luck['second']['variant']}`, trial {luck['second']['trial']}) minus the first's "
                f"(`{luck['main']['variant']}`, trial {luck['main']['trial']}): {format_difference(luck['d'])}")
    return [head + what + "; " + beside + ". How far two searches of one arm land apart, to set the primary gaps against.", ""]


def _per_task_lines(result: Mapping[str, Any], plan: Plan, study: StudyPlan) -> list[str]:
    by_endpoint = per_task_verdicts(result, study)
    lines = [
        "## Per task", "",
        "Each endpoint per task, Holm over that endpoint's tasks (pre-registered as secondary; the answer above is the "
        "aggregates'). A2/B2: non-inferior and inferior both Holm-adjusted over the tasks.", "",
        "| endpoint | task | estimate [95% CI] | p | p (Holm over tasks) | detectable (80% power) | verdict |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    texts = {name: text for name, _, _, text in ENDPOINTS}
    for name, kind, _, _ in ENDPOINTS:
        ep = result["endpoints"][name]
        if not ep["planned"]:
            lines.append(f"| {texts[name]} | (all) | cut | | | | |")
            continue
        for env, _ in plan.tasks:
            row = by_endpoint[name].get(env)
            if row is None:
                lines.append(f"| {texts[name]} | {env} | n/a | | | | {NOT_COMPLETE} |")
            else:
                lines.append(f"| {texts[name]} | {env} | " + row_cells(row, 4 if kind == "slope" else 3))
    notes = [f"{name} {env} p {format_p(r['p_inferior'])} (Holm {format_p(r['p_inferior_adj'])})"
             for name in ("A2", "B2") for env, r in by_endpoint[name].items()]
    if notes:
        lines += ["", "A2/B2's mirror test (p of \"arm 1 is worse by less than 0.1\"; inferior where it rejects after Holm over "
                  "the tasks): " + "; ".join(notes) + "."]
    lines += ["", "| task | arm 1's tax | ppo's tax | decoupled-ppo's tax | slope arm 1 | slope arm 2 | slope esspo (Zoo) | slope ppo | slope decoupled-ppo |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for env, _ in plan.tasks:
        taxes = [format_difference(result["taxes"][label][env]) if env in result["taxes"][label] else "n/a" for label in (ARM1, PPO, DPPO)]

        def sl(label: str) -> str:
            b = result["slopes"].get((env, label))
            return f"{b[0]:+.4f} ({b[1]:.4f})" if b and math.isfinite(b[0]) else "n/a"

        lines.append(f"| {env} | " + " | ".join(taxes) + " | " + " | ".join(sl(label) for label in ARMS) + " |")
    lines += ["", "Taxes: the lag-8-tuned configuration minus the fresh-tuned one, both at lag 8 (0 exactly where the lag-8 choice "
              "is the fresh one). Slopes: normalized score per unit of log2(1 + lag) over lags 0-8 (standard error).", ""]
    return lines


def _secondary_lines(tables: Mapping[str, Any], plan: Plan) -> list[str]:
    n = len(plan.tasks)
    lines: list[str] = []
    for key, comparator in (("vs_ppo", PPO), ("vs_dppo", DPPO)):
        task_rows, agg_rows = tables[key]
        lines += [
            f"## Secondary: every arm against {comparator} at every lag", "",
            f"Pre-registered as secondary and descriptive: each arm's frozen fresh-data configuration minus `{comparator}`'s, at "
            f"each lag, on the {len(plan.score_seeds)} held-out seeds (Welch's t; equivalence within ±{MARGIN:g} by two one-sided "
            "tests). Each table has its own Holm adjustment. Lags 16 and 64 are a stress test beyond the realistic range.", "",
            "### Over tasks", "",
            f"| arm | lag | tasks | arm - {comparator} [95% CI] | p | p (Holm over the table) | detectable (80% power) | verdict |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        lines += [f"| {r['algo']} | {r['lag']} | {r['tasks']} of {n} | " + row_cells(r) for r in agg_rows]
        lines += ["", "### Per task, secondary", "",
                  f"| task | arm | lag | arm - {comparator} [95% CI] | p | p (Holm over the table) | detectable (80% power) | verdict |",
                  "|---|---|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {r['env']} | {r['algo']} | {r['lag']} | " + row_cells(r) for r in task_rows]
        lines.append("")
    task_rows, agg_rows = tables["schedule_on_ppo"]
    lines += [
        "## Secondary: the schedule's effect on PPO (arm 2 - ppo)", "",
        f"`{ARM2}` minus `{PPO}` at lag 0 and in slope over lags 0-8 (equivalence ±{MARGIN:g} at lag 0, ±{SLOPE_MARGIN:.4f} per unit "
        "in slope); Holm within each table.", "",
        "| comparison | tasks | estimate [95% CI] | p | p (Holm over the table) | detectable (80% power) | verdict |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    lines += [f"| {r['what']} | {r['tasks']} of {n} | " + row_cells(r, 4 if r["what"].startswith("slope") else 3) for r in agg_rows]
    lines += ["", "| task | comparison | estimate [95% CI] | p | p (Holm over the table) | detectable (80% power) | verdict |",
              "|---|---|---:|---:|---:|---:|---|"]
    lines += [f"| {r['env']} | {r['what']} | " + row_cells(r, 4 if r["what"].startswith("slope") else 3) for r in task_rows]
    task_rows, agg_rows = tables["objective"]
    lines += [
        "", "## Secondary: the objective's effect within one schedule (arm 1 - arm 2)", "",
        f"`{ARM1}` minus `{ARM2}` at every lag; Holm within each table.", "",
        "| lag | tasks | arm 1 - arm 2 [95% CI] | p | p (Holm over the table) | detectable (80% power) | verdict |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += [f"| {r['lag']} | {r['tasks']} of {n} | " + row_cells(r) for r in agg_rows]
    lines += ["", "| task | lag | arm 1 - arm 2 [95% CI] | p | p (Holm over the table) | detectable (80% power) | verdict |",
              "|---|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {r['env']} | {r['lag']} | " + row_cells(r) for r in task_rows]
    return lines + [""]


def _configurations(selected: Mapping[str, Any], published_selected: Mapping[str, Any], plan: Plan) -> list[str]:
    lines = [
        "## Selected configurations", "",
        "Each arm's selection (the best trial on the search seeds), with the optimizer steps of one update (steps x minibatches "
        "per rollout) and the updates of one run (the budget in rollouts of the configuration's length).", "",
        "| task | arm | tuned on | source | configuration (trial) | optimizer steps per update | updates per run | search score |",
        "|---|---|---|---|---|---:|---:|---:|",
    ]
    ours = [(ARM1, "main", "esspo"), (ARM2, "main", "ppo"), ("decoupled-ppo (Zoo schedule), retuned at lag 8", "dppo-tax", "decoupled-ppo"),
            (f"{ARM1}, second search", "luck", "esspo")]
    theirs = [(PUB_ESSPO, "esspo"), (PPO, "ppo"), (DPPO, "decoupled-ppo")]
    for env, _ in plan.tasks:
        rows = []
        for label, part, algo in ours:
            for tuned, pick in (_pick(selected, env, part, algo) or {}).items():
                rows.append((label, tuned, "this study", pick, pick.get("updates_per_run")))
        for label, algo in theirs:
            for tuned, pick in (_pick(published_selected, env, algo) or {}).items():
                rows.append((label, tuned, "published", pick, pick.get("updates_per_run", (_pick(published_selected, env) or {}).get("updates_per_run"))))
        if not rows:
            lines.append(f"| {env} | (not searched yet) | | | | | | |")
        for label, tuned, source, pick, updates in rows:
            steps = pick.get("optimizer_steps_per_update")
            score = pick.get("search_score")
            lines.append(f"| {env} | {label} | {tuned} | {source} | `{pick['variant'] or 'Zoo default'}` ({pick['trial']}) | "
                         f"{f'{steps:,}' if steps is not None else 'n/a'} | {f'{updates:,}' if updates is not None else 'n/a'} | "
                         f"{f'{score:.3f}' if score is not None else 'n/a'} |")
    return lines + [""]


def _cells(result: Mapping[str, Any], plan: Plan) -> list[str]:
    lines = ["## Every cell", "", "Mean normalized score [95% t-interval] over the scoring seeds.", "",
             "| task | arm | tuned on | " + " | ".join(f"lag {lag}" for lag in plan.lags) + " |",
             "|---|---|---|" + "---:|" * len(plan.lags)]
    by = {(c["env"], c["arm"], c["tuned"], c["lag"]): c for c in result["cells"]}
    for env, _ in plan.tasks:
        for arm in ARMS:
            for tuned in ("fresh", lag_name(plan.tax_lag)):
                if not any((env, arm, tuned, lag) in by for lag in plan.lags):
                    continue
                cells = [by.get((env, arm, tuned, lag)) for lag in plan.lags]
                lines.append(f"| {env} | {arm} | {tuned} | " + " | ".join(f"{c['mean']:.3f} ± {c['half']:.3f}" if c else "" for c in cells) + " |")
    return lines + [""]


# ----------------------------------------------------------------------------------------------
# the figure


STYLE = {
    ARM1: dict(color="tab:red", ls="-"), ARM2: dict(color="tab:blue", ls="-"), PUB_ESSPO: dict(color="lightcoral", ls="--"),
    PPO: dict(color="cornflowerblue", ls="--"), DPPO: dict(color="tab:green", ls="--"),
}


def figure(result: Mapping[str, Any], plan: Plan, out: Path) -> None:
    from ..output import save_figure
    from ..plots import finish_panels, lag_axes

    import matplotlib.pyplot as plt  # after plots, which sets the Agg backend

    envs = [env for env, _ in plan.tasks] or ["(no tasks)"]
    cols = 2
    rows = math.ceil(len(envs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.5 * rows + 1.1), squeeze=False)
    by = {(c["env"], c["arm"], c["tuned"], c["lag"]): c for c in result["cells"]}
    tax = lag_name(plan.tax_lag)
    for ax, env in zip(axes.flat, envs):
        ax.axvspan(log_lag(1), log_lag(8), color="0.92", zorder=0, label="realistic lags 1-8")
        for i, arm in enumerate(ARMS):
            got = [(lag, by[(env, arm, "fresh", lag)]) for lag in plan.lags if (env, arm, "fresh", lag) in by]
            if got:
                ax.errorbar([log_lag(lag) + 0.03 * (i - 2) for lag, _ in got], [c["mean"] for _, c in got], yerr=[c["half"] for _, c in got],
                            marker="o", ms=3.5, capsize=2.5, lw=1.4, label=f"{arm}, tuned fresh", **STYLE[arm])
            tuned = by.get((env, arm, tax, plan.tax_lag))
            if tuned:
                ax.errorbar([log_lag(plan.tax_lag) + 0.12 + 0.03 * i], [tuned["mean"]], yerr=[tuned["half"]], color=STYLE[arm]["color"], marker="*",
                            ms=9, capsize=2.5, ls="none", label=f"{arm}, tuned at lag {plan.tax_lag}")
        luck = result["luck"]
        if env == luck["env"] and "scores" in luck:
            x = luck["scores"]
            ax.errorbar([-0.12], [float(x.mean())], yerr=[_half(x)], color="darkred", marker="D", ms=5, capsize=2.5, ls="none",
                        label=f"{ARM1}, second search (lag 0)")
        lag_axes(ax, plan.lags, env)
    finish_panels(fig, axes, len(envs), "Tuned once, frozen, run at every lag: the searched schedule (solid) against the published Zoo-schedule "
                  f"runs (dashed)\nmean and 95% CI over {len(plan.score_seeds)} held-out seeds")
    save_figure(fig, out, dpi=110)


def report(results: Path, published: Path, study: StudyPlan | None = None) -> str:
    table, selected, published_table, published_selected, plan, result = load_and_analyse(results, published)
    return report_text(table, selected, published_table, published_selected, plan, result, results, study)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; a bad input is one line on stderr with exit status 2."""
    return contract.one_line_errors("schedule report", lambda: _main(argv))


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adaptive_po.analysis.reports.frozen_schedule",
                                     description="the frozen study's extension (the update schedule searched again): verdicts and figure from the committed tables")
    parser.add_argument("--results", default=contract.SCHEDULE_RESULTS, help="this study's folder (per_run.csv, selected.json, cuts.json)")
    parser.add_argument("--published", default=contract.FROZEN_RESULTS, help="the published frozen study's folder (the comparators)")
    parser.add_argument("--plan", default=PLAN, help="the study's plan file (its endpoints, margins, Holm family and decision rules)")
    args = parser.parse_args(argv)
    results = contract.existing_folder(args.results, "the study's results folder")  # a report makes no folder
    published = Path(args.published)
    study = committed_plan(args.plan)
    table, selected, published_table, published_selected, plan, result = load_and_analyse(results, published)
    contract.atomic_write_text(results / "verdicts.md", report_text(table, selected, published_table, published_selected, plan, result, results, study))
    figure(result, plan, results / "staleness.png")
    print(f"wrote {results / 'verdicts.md'} and {results / 'staleness.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
