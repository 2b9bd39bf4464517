"""The generic report of a searched design, from its plan file and the committed files alone.

``python -m adaptive_po.analysis.searched_report --results docs/results/<study>`` (or
``python -m adaptive_po.analysis.study_report``, which hands a searched plan here) reads the plan
(``<results>/plan.toml``, :mod:`adaptive_po.studies.plan`; ``--plan`` names another), this study's
table, picks, trials and cuts (the files of its ``[files]``), and each ``[[comparators]]`` study's
committed table and picks; checks every row of the table against the plan after its cuts and every
pick against its search (a run or a pick the plan does not have is one line, exit 2, nothing
written); and writes the verdicts and ``staleness.png``.

What it computes is what the published frozen reports compute, for any searched plan:

- each design arm at its fresh pick (the first part, in the plan's order, that tunes it fresh)
  swept over the lags no cut removes, on the scoring seeds no cut removes; its retuning tax (its
  lag-k pick minus its fresh pick, both at the tax lag ``k``, exactly 0 where the lag-k pick is the
  fresh one) from the part holding its lag-k pick (the endpoint's ``part`` where that part tunes it
  at lag k). An arm that no part tunes fresh (only taxed here) is taxed against the fresh pick of a
  comparator's arm of the same algorithm (the study this one extends);
- each comparator arm (``{label: arm}``) from its study's table (its ``folder``) at that study's
  fresh and lag-k picks, on the same tasks, lags and seeds;
- the endpoints by kind (slope, non-inferiority, difference, tax; an own tax with no ``versus``
  is tested for equivalence to 0 within its margin by two one-sided tests), over tasks the mean of
  per-task differences with Welch standard errors and Welch-Satterthwaite degrees of freedom, Holm
  within each family (:func:`~adaptive_po.analysis.endpoints.plan_rows`), the decisions by
  :func:`~adaptive_po.analysis.endpoints.decide`, and a decision's ``undecided`` answer while one
  of its endpoints lacks a planned task (each endpoint is reported over the tasks whose runs are
  all in, the missing ones named);
- per task beside the endpoints: each endpoint (Holm over the tasks; a non-inferiority endpoint's
  mirror test too), a single-endpoint decision's line (which tasks carry its aggregate), each tax
  and slope, and each tax over the tasks that have it;
- the secondary tables of the plan: head-to-head (each arm minus each comparator at every lag),
  difference (one arm minus another at some lags and in slope), the learning rate (each arm at x1,
  its sweep's runs on the part's seeds, and at each factor, with the drop at the largest factor,
  Holm within the table) and the search-luck line (a second search's pick minus the first's, beside
  an endpoint); where an arm taxed only here chose its comparator's fresh pick, the drift of the
  rerun from the comparator's runs.

The plan's ``[report]`` words (an intro, the design arms' labels, the answer table's claims) change
what the text says, never what it computes; a "schedule" search's picks are named by their
optimizer steps per update, and where this study's picks record them, each pick's optimizer steps
per update (and at the tax lag), updates per run and search return are in its table.

After a pilot of candidate budgets (the frozen study) the design's tasks are those its committed
selection chose (``[files] selection``, a candidate at one of its budgets), the cuts may be recorded
in that selection (``"cuts"``), the table may hold the pilot's runs (its folders, algorithm, lags and
seeds, out of the progress counts), and a plan without ``[[parts]]`` may have its picks written flat
(``{task: {arm: ...}}``, read as its one part's).
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
from adaptive_po.studies.cuts import Runs, apply_cuts, check_cuts, cut_key
from adaptive_po.studies.plan import MAIN_PART, PLAN_FILE, Endpoint, StudyPlan, load_plan

from .endpoints import (
    check_searched_picks, decide, deviations, format_difference, format_p, frozen_scores, half_width, head_to_head, lag_name, log_lag,
    per_task_family, pick_at, plan_rows, read_study_table, row_cells, slope, slope_difference, tax_sum, tested,
)
from .hypothesis import ALPHA, Difference, holm, mean_of_differences, welch

NAN = Difference(math.nan, math.nan, math.nan)


@dataclass(frozen=True)
class Source:
    """Where one arm's runs and picks are: a study's ``table`` and score ``folder``, the arm's
    algorithm there, that study's picks (``selected.json``), and its name in the texts."""

    table: Mapping
    folder: str
    algo: str
    selected: Mapping[str, Any]
    name: str


@dataclass(frozen=True)
class Study:
    """A searched study's plan with its committed files, and its comparators' (``{label: Source}``)."""

    plan: StudyPlan
    results: Path
    table: Mapping
    selected: Mapping[str, Any]
    cuts: Mapping[str, Sequence[Any]]
    comparators: Mapping[str, Source]
    design_tasks: tuple[tuple[str, int], ...] = ()


    def cut(self, what: str) -> Sequence[Any]:
        return self.cuts.get(cut_key(self.plan, what), ())

    @property
    def runs(self) -> Runs:
        """The design's tasks, arms, lags and scoring seeds that the committed cuts leave."""
        return apply_cuts(self.plan, self.design_tasks, self.cuts)

    @property
    def tasks(self) -> tuple[tuple[str, int], ...]:
        return self.runs.tasks

    @property
    def lags(self) -> tuple[int, ...]:
        return self.runs.lags

    @property
    def seeds(self) -> tuple[int, ...]:
        return self.runs.seeds

    @property
    def tax_lag(self) -> int:
        return int(self.plan.tax["lag"]) if self.plan.tax else 8

    def parts(self, kind: str = "search") -> list[dict[str, Any]]:
        """The parts of ``kind`` no cut removes, in the plan's order, their arms less the arms cut."""
        out = []
        for p in self.plan.part_specs():
            if p["kind"] != kind or p["name"] in self.cut("parts"):
                continue
            keep = {k: tuple(a for a in p[k] if a not in self.cut("arms")) for k in ("arms", "fresh_arms", "tax_arms") if k in p}
            out.append({**p, **keep})
        return out

    def part(self, name: str) -> dict[str, Any] | None:
        return next((p for kind in ("search", "learning-rate") for p in self.parts(kind) if p["name"] == name), None)

    def part_tasks(self, part: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
        return tuple(t for t in self.tasks if part.get("tasks") is None or t[0] in part["tasks"])

    def own(self, arm: str) -> Source:
        return Source(self.table, self.plan.design.folder, arm, self.selected, "this study")

    @property
    def arms(self) -> tuple[str, ...]:
        """The design's arms that a part tunes fresh (each swept at its fresh pick)."""
        fresh = {a for p in self.parts() for a in p["fresh_arms"]}
        return tuple(a for a in self.plan.design.arms if a in fresh)

    @property
    def labels(self) -> tuple[str, ...]:
        """Every swept arm: the design's, then the comparators'."""
        return (*self.arms, *self.comparators)

    @property
    def taxed_only(self) -> tuple[str, ...]:
        """The design's arms that a part taxes but none tunes fresh (taxed against a comparator's fresh pick)."""
        return tuple(dict.fromkeys(a for p in self.parts() for a in p["tax_arms"] if a not in self.arms))

    def name(self, label: str) -> str:
        """An arm's name in the texts: a design arm's label in the plan's ``[report] labels``, else the arm."""
        return self.plan.words.labels.get(label, label)

    def space(self, arm: str) -> str:
        """The search space of the part that tunes ``arm`` fresh ("" where none does)."""
        return next((p["space"] for p in self.parts() if arm in p["fresh_arms"]), "")


# ----------------------------------------------------------------------------------------------
# the files


def _json(path: Path) -> dict[str, Any]:
    return contract.read_committed_json(path) if path.is_file() or path.is_symlink() else {}


def load(results: Path, plan_file: str | Path | None = None) -> Study:
    """The plan, this study's files and its comparators', each checked (:func:`check_table`,
    :func:`check_picks`): a ``ValueError`` of one line otherwise."""
    plan = load_plan(plan_file or results / PLAN_FILE)
    if plan.design.configurations != "searched":
        raise ValueError(f"{plan.path}: design.configurations is {plan.design.configurations!r}: this report reads a searched design")
    files = plan.files
    table = read_study_table(results / files["table"])
    selected = _json(results / files["picks"]) or {"selected": {}}
    if not plan.parts:  # one search's picks written flat, by task and arm (the frozen study's): read as its one part's
        selected = {**selected, "selected": {env: {**{k: v for k, v in c.items() if not isinstance(v, Mapping)},
                                                   MAIN_PART: {k: v for k, v in c.items() if isinstance(v, Mapping)}} if isinstance(c, Mapping) else c
                                             for env, c in selected.get("selected", {}).items()}}
    tasks = plan.design.tasks or selected_tasks(plan, results / files["selection"])
    cuts_path = results / files["cuts"]
    written = _json(cuts_path)
    if plan.pilot is not None and files["cuts"] == files["selection"]:  # the pilot's selection records the cuts (the frozen study)
        written = written.get("cuts", {}) if written else written
    cuts = check_cuts(plan, written, cuts_path) if cuts_path.is_file() or cuts_path.is_symlink() else {}
    comparators: dict[str, Source] = {}
    for c in plan.comparators:
        if c.kind != "study":
            continue
        folder = (plan.path.parent / c.results).resolve()
        theirs = load_plan(folder / PLAN_FILE).files if (folder / PLAN_FILE).is_file() else {}
        their_table = read_study_table(folder / theirs.get("table", contract.FROZEN_TABLE_FILE))
        their_picks = _json(folder / theirs.get("picks", contract.FROZEN_SELECTION_FILE)) or {"selected": {}}
        comparators.update({label: Source(their_table, c.folder, arm, their_picks, c.name) for label, arm in c.arms.items()})
    study = Study(plan, results, table, selected, {k: list(v) for k, v in cuts.items()}, comparators, tasks)
    check_table(results / files["table"], study)
    check_picks(study)
    return study


def selected_tasks(plan: StudyPlan, path: Path) -> tuple[tuple[str, int], ...]:
    """After a pilot of candidate budgets, the tasks its committed selection chose (``{"tasks":
    [{"env", "budget"}, ...]}``), each a candidate of the pilot at one of its budgets; none until the
    pilot's selection is committed, a ``ValueError`` naming the file otherwise."""
    record = _json(path)
    try:
        tasks = tuple((t["env"], t["budget"]) for t in record.get("tasks", ()))
    except (KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a selection of this study ({err!r})") from None
    candidates = plan.pilot.candidates if plan.pilot is not None else {}
    for task, budget in tasks:
        if not isinstance(task, str) or not isinstance(budget, int) or isinstance(budget, bool) or budget not in candidates.get(task, ()):
            raise ValueError(f"{path}: ({task!r}, {budget}) is not one of the pilot's candidate tasks and budgets ({plan.path})")
    return tasks


def check_table(path: Path, study: Study) -> None:
    """Every run of the table is one the plan has after its cuts: a search run of a part (its
    folder, arms, search seeds, lag 0 for an arm tuned fresh and the tax lag for one taxed), a
    scoring run (the design's folder: an arm a part sweeps at one of its lags or taxes at the tax
    lag, on a scoring seed), or a learning-rate part's run (its folder, arms, lags and seeds), on a
    task of the part at its budget, with no sampler."""
    budgets = dict(study.tasks)
    search_seeds = set((study.plan.search or {}).get("seeds", ()))
    by_folder: dict[str, list[dict[str, Any]]] = {}
    for p in (*study.parts(), *study.parts("learning-rate")):
        by_folder.setdefault(p["folder"], []).append(p)
    pilot = study.plan.pilot
    pilot_runs = {(f, task, b) for task, bs in pilot.candidates.items() for f, b in zip(pilot.folders, bs)} if pilot is not None else set()
    for key in study.table:
        folder, task, algo, _, lag, seed, budget, sampler = key
        if folder in (pilot.folders if pilot is not None else ()):  # a candidate-budget pilot's run (before the selection)
            why = ("sampler" if sampler else "task or budget" if (folder, task, budget) not in pilot_runs else "arm" if algo != pilot.algo else
                   "lag" if lag not in pilot.lags else "seed" if seed not in pilot.seeds else "")
        else:
            why = ("sampler" if sampler else "task (not in the plan after its cuts)" if task not in budgets else
                   "budget" if budget != budgets[task] else _why(study, folder, task, algo, lag, seed, by_folder, search_seeds))
        if why:
            raise ValueError(f"{path}: the run {key} is not in the plan {study.plan.path} (its {why})")


def _why(study: Study, folder: str, task: str, algo: str, lag: int, seed: int, by_folder: Mapping[str, list[dict[str, Any]]],
         search_seeds: set[int]) -> str:
    """What of a run on a planned task no part of the plan has ("" where one has it)."""
    if folder == study.plan.design.folder:
        cells = {(a, x) for p in study.parts() if task in dict(study.part_tasks(p)) for a in p["fresh_arms"] for x in p["lags"]
                 if x not in study.cut("lags")}
        cells |= {(a, study.tax_lag) for p in study.parts() if task in dict(study.part_tasks(p)) for a in p["tax_arms"]}
        return "arm" if algo not in {a for a, _ in cells} else "lag" if (algo, lag) not in cells else "seed" if seed not in study.seeds else ""
    parts = [p for p in by_folder.get(folder, ()) if task in dict(study.part_tasks(p))]
    if not parts:
        return "folder"
    if parts[0]["kind"] == "learning-rate":
        p = parts[0]
        return ("arm" if algo not in (*p["arms"], *p["from_arms"]) else "lag" if lag not in p["lags"] or lag in study.cut("lags") else
                "seed" if seed not in p["seeds"] or seed in study.cut("seeds") else "")
    lags = {(a, 0) for p in parts for a in p["fresh_arms"]} | {(a, study.tax_lag) for p in parts for a in p["tax_arms"]}
    return "arm" if algo not in {a for a, _ in lags} else "lag" if (algo, lag) not in lags else "seed" if seed not in search_seeds else ""


def check_picks(study: Study) -> None:
    """Each pick of ``selected.json`` is of a planned task at its budget and a best one of its
    part's search in the table (:func:`~adaptive_po.analysis.endpoints.check_searched_picks`)."""
    where = study.results / study.plan.files["picks"]
    budgets = dict(study.design_tasks)
    for env, chosen in study.selected.get("selected", {}).items():
        if not isinstance(chosen, Mapping) or budgets.get(env) != chosen.get("budget"):
            raise ValueError(f"{where}: {env!r} at {chosen.get('budget') if isinstance(chosen, Mapping) else chosen!r} steps is not a task of "
                             f"the plan at its budget ({study.plan.path})")
    seeds = (study.plan.search or {}).get("seeds", ())
    flat = "" if not study.plan.parts else None  # a flat trials file names no part
    parts = {flat if flat is not None else p["name"]: (p["folder"], seeds, study.tax_lag) for p in study.parts()}
    selected = study.selected if flat is None else {"selected": {env: {("" if k == MAIN_PART else k): v for k, v in c.items() if k != "updates_per_run"}
                                                                 for env, c in study.selected.get("selected", {}).items()}}
    check_searched_picks(where, study.table, selected, parts, study.results / study.plan.files["trials"])


# ----------------------------------------------------------------------------------------------
# the picks and the numbers


def comparator_pick(selected: Mapping[str, Any], env: str, algo: str, tuned: str) -> Mapping[str, Any] | None:
    """A study's pick of ``algo`` on ``env`` tuned ``tuned``, its picks by arm (``{task: {arm:
    ...}}``) or by part (``{task: {part: {arm: ...}}}``, the first part holding it)."""
    node = (selected.get("selected", {}) or {}).get(env, {})
    if isinstance(node.get(algo), Mapping) and tuned in node[algo]:
        return node[algo][tuned]
    return next((v[algo][tuned] for v in node.values() if isinstance(v, Mapping) and isinstance(v.get(algo), Mapping) and tuned in v[algo]), None)


def pick(study: Study, label: str, env: str, tuned: str, part: str = "") -> tuple[Mapping[str, Any] | None, Source, str] | None:
    """(the pick, where its runs are, its part) of arm ``label`` on ``env`` tuned ``tuned``
    ("fresh" or "lag<k>"), None where the plan has no such pick: a comparator's from its study; a
    design arm's fresh pick from the first part tuning it fresh (else a comparator's arm of its
    algorithm), its lag-k pick from ``part`` where that part tunes it at lag k, else the first part that does."""
    if label in study.comparators:
        source = study.comparators[label]
        return comparator_pick(source.selected, env, source.algo, tuned), source, ""
    key = "fresh_arms" if tuned == "fresh" else "tax_arms"
    parts = [p for p in study.parts() if label in p[key]]
    if not parts and tuned == "fresh":
        label = next((c for c, source in study.comparators.items() if source.algo == label), "")
        return pick(study, label, env, tuned) if label else None
    chosen = next((p for p in parts if p["name"] == part), parts[0] if parts else None)
    if chosen is None or env not in dict(study.part_tasks(chosen)):
        return None
    return pick_at(study.selected, env, chosen["name"], label, tuned), study.own(label), chosen["name"]


def scores(source: Source, env: str, budget: int, variant: str, lag: int, seeds: Sequence[int], folder: str | None = None) -> np.ndarray | None:
    return frozen_scores(source.table, env, budget, source.algo, variant, lag, seeds, folder or source.folder)


def analyse(study: Study) -> dict[str, Any]:
    """Every number of the report: per task each arm's curve at its fresh pick and its taxes, the
    slopes, each endpoint per task and over the tasks that have it (with the planned tasks it
    lacks), and the secondary tables."""
    tax = lag_name(study.tax_lag)
    fresh: dict[str, dict[tuple[str, int], np.ndarray]] = {}
    for env, budget in study.tasks:
        fresh[env] = {}
        for label in study.labels:
            got = pick(study, label, env, "fresh")
            if got is None or got[0] is None:
                continue
            for lag in study.lags:
                x = scores(got[1], env, budget, got[0]["variant"], lag, study.seeds)
                if x is not None:
                    fresh[env][(label, lag)] = x

    def tax_groups(env: str, label: str, part: str) -> list[tuple[np.ndarray, float]] | None:
        """The tax's terms on ``env`` (:func:`~adaptive_po.analysis.endpoints.tax_sum`); None until its runs are in."""
        tuned, first = pick(study, label, env, tax, part), pick(study, label, env, "fresh")
        if tuned is None or first is None or tuned[0] is None or first[0] is None:
            return None
        budget = dict(study.tasks)[env]
        before = scores(first[1], env, budget, first[0]["variant"], study.tax_lag, study.seeds)
        if before is None:
            return None
        if tuned[0]["variant"] == first[0]["variant"]:
            return []
        after = scores(tuned[1], env, budget, tuned[0]["variant"], study.tax_lag, study.seeds)
        return None if after is None else [(after, 1.0), (before, -1.0)]

    slopes: dict[tuple[str, str, tuple[int, ...]], tuple[float, float, float]] = {}
    for lags in dict.fromkeys([*(e.lags for e in study.plan.endpoints if e.kind == "slope"), *(s.slope for s in study.plan.secondary if s.slope)]):
        for env, cells in fresh.items():
            for label in study.labels:
                if all((label, lag) in cells for lag in lags):
                    pts = [(lag, v) for lag in lags for v in cells[(label, lag)]]
                    slopes[(env, label, lags)] = slope([a for a, _ in pts], [b for _, b in pts])
    endpoints: dict[str, dict[str, Any]] = {}
    for e in study.plan.endpoints:
        planned_tasks = study.part_tasks(study.part(e.part) or {"tasks": ()}) if e.part else study.tasks
        planned = not (e.part and study.part(e.part) is None) and not ({e.arm, e.versus} & set(study.cut("arms")))
        by_task, agg = _endpoint(e, fresh, slopes, tax_groups, [env for env, _ in planned_tasks] if planned else [])
        endpoints[e.id] = {"endpoint": e, "planned": planned, "agg": agg, "tasks": by_task,
                           "missing": [env for env, _ in planned_tasks if env not in by_task] if planned else []}
    groups = {(label, part): {env: g for env, _ in study.tasks for g in [tax_groups(env, label, part)] if g is not None}
              for label, part in dict.fromkeys((*[(c, "") for c in study.comparators],
                                                *[(a, p["name"]) for p in study.parts() for a in p["tax_arms"]]))}
    taxes = {k: {env: tax_sum({env: {k[0]: g}}, [env], {k[0]: 1.0}) for env, g in by_env.items()} for k, by_env in groups.items()}
    # each tax over the tasks that have it (the mean of per-task taxes)
    tax_over = {k: tax_sum({env: {k[0]: g} for env, g in by_env.items()}, list(by_env), {k[0]: 1.0}) for k, by_env in groups.items() if by_env}
    return {"fresh": fresh, "slopes": slopes, "endpoints": endpoints, "taxes": taxes, "tax_over": tax_over}


def _endpoint(e: Endpoint, fresh: Mapping, slopes: Mapping, tax_groups: Any, envs: Sequence[str]) -> tuple[dict[str, Difference], Difference]:
    """One endpoint per task of ``envs`` whose runs are all in, and over those tasks."""
    if e.kind == "slope":
        mine = {(env, label): b for (env, label, lags), b in slopes.items() if lags == e.lags}
        done = [env for env in envs if (env, e.arm) in mine and (env, e.versus) in mine]
        return {env: slope_difference(mine, [env], e.arm, e.versus) for env in done}, slope_difference(mine, done, e.arm, e.versus)
    if e.kind == "tax":
        signs = {e.arm: 1.0, **({e.versus: -1.0} if e.versus else {})}
        groups = {env: {label: tax_groups(env, label, e.part) for label in signs} for env in envs}
        done = [env for env in envs if all(g is not None for g in groups[env].values())]
        return {env: tax_sum(groups, [env], signs) for env in done}, tax_sum(groups, done, signs)
    pairs = {env: (fresh[env][(e.arm, e.lag)], fresh[env][(e.versus, e.lag)]) for env in envs
             if (e.arm, e.lag) in fresh.get(env, {}) and (e.versus, e.lag) in fresh.get(env, {})}
    return {env: welch(*p) for env, p in pairs.items()}, mean_of_differences(list(pairs.values())) if pairs else NAN


def own_tax(e: Endpoint) -> bool:
    """An arm's own retuning tax outside any family: tested for equivalence to 0 alone."""
    return e.kind == "tax" and not e.versus and not e.family


def primary(study: Study, result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every endpoint with its verdict, in the plan's order: Holm within its family
    (:func:`~adaptive_po.analysis.endpoints.plan_rows`; an endpoint cut with its part is NaN, out
    of the adjustment); an own tax outside a family by two one-sided tests within its margin
    (equivalent, else not shown)."""
    eps = result["endpoints"]
    rows = plan_rows(study.plan, {i: ep["agg"] for i, ep in eps.items()})
    for row in rows:
        ep = eps[row["id"]]
        row.update(kind=ep["endpoint"].kind, planned=ep["planned"], tasks=len(ep["tasks"]), missing=ep["missing"])
        if own_tax(ep["endpoint"]):
            d = row["d"]
            row["p"] = row["p_adj"] = d.p_equivalence(ep["endpoint"].margin)
            row["verdict"] = ("equivalent" if row["within_margin"] else "not shown") if d.testable else ""
    return rows


def answers(study: Study, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per decision, in the plan's order: ``{"decision", "answer", "reading", "complete"}``: the
    rule's reading on the endpoints not cut (the reading so far), the answer that reading once
    every endpoint it names has every planned task, else its ``undecided`` answer."""
    by = {r["id"]: r for r in rows if r["planned"]}
    out = []
    for d in study.plan.decisions:
        named = [by[i] for i in d.endpoints() if i in by]
        complete = all(not r["missing"] and r["tasks"] > 0 for r in named)
        reading = decide(d, by)
        out.append({"decision": d, "reading": reading, "complete": complete, "answer": reading if complete else d.undecided})
    return out


def per_task_verdicts(study: Study, result: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Each endpoint not cut per task, Holm over that endpoint's tasks."""
    return {i: per_task_family(ep["endpoint"], ep["tasks"]) for i, ep in result["endpoints"].items() if ep["planned"]}


def head_to_heads(study: Study, result: Mapping[str, Any]) -> list[tuple[Any, str, list[dict[str, Any]], list[dict[str, Any]]]]:
    """Each head-to-head table of the plan: ``(secondary, comparator, per-task rows, rows over tasks)``."""
    return [(s, c, *head_to_head(result["fresh"], c, (*s.arms, c), study.lags, s.margin))
            for s in study.plan.secondary if s.kind == "head-to-head" for c in s.comparators]


def difference(study: Study, result: Mapping[str, Any], s: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A difference table of the plan: its arm minus its comparator at each of its lags no cut
    removes and in slope over its slope lags (``"what"``: "lag 0", "slope, lags 0-8"), per task
    (Welch; task by task) and over the tasks that have both (the mean of per-task differences),
    each of the two tables with its own Holm (equivalence within the margin, a slope's per unit of
    log2(1 + lag)). Returns ``(per_task_rows, aggregate_rows)``."""
    arm, versus = s.arms[0], s.comparators[0]
    fresh = result["fresh"]
    slopes = {(env, label): b for (env, label, lags), b in result["slopes"].items() if lags == s.slope}
    comparisons: list[tuple[str, float, dict[str, Difference], Difference]] = []
    for lag in (x for x in s.lags if x in study.lags):
        pairs = {env: (fresh[env][(arm, lag)], fresh[env][(versus, lag)]) for env, _ in study.tasks
                 if (arm, lag) in fresh.get(env, {}) and (versus, lag) in fresh.get(env, {})}
        comparisons.append((f"lag {lag}", s.margin, {env: welch(*x) for env, x in pairs.items()}, mean_of_differences(list(pairs.values())) if pairs else NAN))
    if s.slope:
        envs = [env for env, _ in study.tasks if (env, arm) in slopes and (env, versus) in slopes]
        comparisons.append((f"slope, lags {min(s.slope)}-{max(s.slope)}", s.margin / math.log2(1 + max(s.slope)),
                            {env: slope_difference(slopes, [env], arm, versus) for env in envs}, slope_difference(slopes, envs, arm, versus)))
    cells = [(env, what, margin, by_task[env]) for env, _ in study.tasks for what, margin, by_task, _ in comparisons if env in by_task]
    over = [(what, len(by_task), margin, agg) for what, margin, by_task, agg in comparisons if by_task]
    task_rows = [{"env": env, "what": what, **r} for (env, what, _, _), r in zip(cells, tested([c[3] for c in cells], [c[2] for c in cells]))]
    agg_rows = [{"what": what, "tasks": n, **r} for (what, n, _, _), r in zip(over, tested([c[3] for c in over], [c[2] for c in over]))]
    return task_rows, agg_rows


def search_luck(study: Study, result: Mapping[str, Any], s: Any) -> list[dict[str, Any]] | None:
    """A search-luck line of the plan, per task of its part (None: the part is cut): the second
    search's fresh pick of its arm (the part ``s.part``) and the first's (the arm's fresh pick),
    and at the line's lag, on the scoring seeds, the second minus the first (Welch; exactly 0 where
    both searches chose one configuration: the same runs), NaN until its runs are in."""
    part = study.part(s.part)
    if part is None:
        return None
    arm, lag = s.arms[0], s.lags[0]
    out = []
    for env, budget in study.part_tasks(part):
        first, second = pick(study, arm, env, "fresh"), pick_at(study.selected, env, s.part, arm, "fresh")
        row = {"env": env, "lag": lag, "first": first[0] if first else None, "second": second, "d": NAN, "same": False}
        if row["first"] and second:
            row["same"] = second["variant"] == row["first"]["variant"]
            x, y = scores(study.own(arm), env, budget, second["variant"], lag, study.seeds), result["fresh"].get(env, {}).get((arm, lag))
            if x is not None and y is not None:
                row.update(scores=x, d=Difference(0.0, 0.0, math.inf) if row["same"] else welch(x, y))
        out.append(row)
    return out


def drift(study: Study) -> dict[tuple[str, str], Difference]:
    """``{(arm, task): difference}`` where an arm taxed only here (against a comparator's fresh
    pick) chose that very configuration at the tax lag (its tax 0 by the rule): this study's rerun
    of it at the tax lag minus the comparator study's runs of it (the code versions' drift)."""
    out = {}
    tax = lag_name(study.tax_lag)
    for arm in study.taxed_only:
        for env, budget in study.tasks:
            tuned, first = pick(study, arm, env, tax), pick(study, arm, env, "fresh")
            if not (tuned and first and tuned[0] and first[0]) or tuned[0]["variant"] != first[0]["variant"]:
                continue
            x = scores(tuned[1], env, budget, tuned[0]["variant"], study.tax_lag, study.seeds)
            y = scores(first[1], env, budget, first[0]["variant"], study.tax_lag, study.seeds)
            if x is not None and y is not None:
                out[(arm, env)] = welch(x, y)
    return out


def learning_rate(study: Study, arms: Sequence[str], part_name: str) -> dict[str, Any]:
    """The learning-rate table of ``part_name``: per task, lag and arm, the scores at x1 (the arm's
    sweep at its fresh pick, on the part's seeds) and at each factor (the part's runs), and the drop
    at the largest factor minus x1 (Welch), Holm over the table's drops: "lower" or "higher" where
    the adjusted test rejects, else "not shown"."""
    part = study.part(part_name)
    if part is None:
        return {"part": None, "rows": []}
    factors = sorted(part["factors"])
    seeds = tuple(s for s in part["seeds"] if s not in study.cut("seeds"))
    lags = tuple(lag for lag in part["lags"] if lag not in study.cut("lags"))
    rows = []
    for env, budget in study.part_tasks(part):
        for lag in lags:
            for label in arms:
                got = pick(study, label, env, "fresh")
                if got is None or got[0] is None:
                    rows.append({"env": env, "lag": lag, "arm": label, "at": {}})
                    continue
                variant, source = got[0]["variant"], got[1]
                at = {1.0: scores(source, env, budget, variant, lag, seeds)}
                for f in factors:
                    at[f] = frozen_scores(study.table, env, budget, source.algo, contract.scaled_learning_rate(variant, f), lag, seeds, part["folder"])
                rows.append({"env": env, "lag": lag, "arm": label, "variant": variant, "at": {f: x for f, x in at.items() if x is not None}})
    top = factors[-1] if factors else None
    tested_rows = [r for r in rows if 1.0 in r["at"] and top in r["at"]]
    diffs = [welch(r["at"][top], r["at"][1.0]) for r in tested_rows]
    p = [d.p_value() for d in diffs]
    for r, d, pi, adjusted in zip(tested_rows, diffs, p, holm(p)):
        r.update(d=d, p=pi, p_adj=float(adjusted), verdict=("lower" if d.estimate < 0 else "higher") if adjusted < ALPHA else "not shown")
    return {"part": part, "factors": factors, "seeds": seeds, "rows": rows}


def progress(study: Study) -> list[dict[str, Any]]:
    """Per part: its kind, folder, runs planned on its tasks after the cuts (search, scoring; a
    learning-rate part's runs are its own) and the runs its folder has."""
    seeds, search = study.seeds, study.plan.search or {}
    out = []
    for p in study.plan.part_specs():
        row = {"part": p["name"], "kind": p["kind"], "folder": p["folder"], "cut": p["name"] in study.cut("parts")}
        if p["kind"] == "learning-rate":
            q = study.part(p["name"]) or p
            runs = (len(q["arms"]) + len(q["from_arms"])) * len(q["factors"]) * len([x for x in q["lags"] if x not in study.cut("lags")]) \
                * len([s for s in q["seeds"] if s not in study.cut("seeds")])
            row.update(search=0, score=runs * len(study.part_tasks(q)))
        else:
            q = next((x for x in study.parts() if x["name"] == p["name"]), p)
            lags = [x for x in q["lags"] if x not in study.cut("lags")]
            tasks = len(study.part_tasks(q))
            row.update(search=tasks * (len(q["fresh_arms"]) + len(q["tax_arms"])) * int(search.get("trials", 0)) * len(search.get("seeds", ())),
                       score=tasks * (len(q["fresh_arms"]) * len(lags) + len(q["tax_arms"])) * len(seeds))
        row["done"] = sum(1 for k in study.table if k[0] == p["folder"])
        out.append(row)
    return out


# ----------------------------------------------------------------------------------------------
# the text

#: a variant's knobs in words, the Zoo's shared ones first
KNOB_WORDS = {"learning_rate": "learning rate", "n_epochs": "epochs", "batch_size": "minibatch", "n_steps": "rollout length"}


def configuration_words(variant: str) -> str:
    """What a search chose, in words: its learning-rate factor, epochs, minibatch and rollout
    (factors of the Zoo's values, x1 where not named), then the arm's own knobs."""
    if not variant:
        return "the Zoo's values (the registered default)"
    pairs = dict(pair.partition("=")[::2] for pair in variant.split(","))
    words = []
    for name in sorted(pairs, key=lambda n: (list(KNOB_WORDS).index(n) if n in KNOB_WORDS else len(KNOB_WORDS), n)):
        value = pairs[name]
        if name == "batch_size" and value == "rollout":
            words.append("whole-rollout batches")
        elif name == "n_epochs" and not value.startswith("x"):
            words.append(f"{value} epoch{'' if value == '1' else 's'}")
        else:
            words.append(f"{KNOB_WORDS.get(name, name.replace('_', ' '))} {value}")
    return ", ".join(words)


def schedule_words(chosen: Mapping[str, Any] | None) -> str:
    """What a pick of the "schedule" space is, in words: whole-rollout steps or passes of
    minibatches, with its optimizer steps per update."""
    if not chosen:
        return "not searched yet"
    knobs = dict(kv.split("=", 1) for kv in (chosen.get("variant") or "").split(",") if "=" in kv)
    epochs, steps = knobs.get("n_epochs"), chosen.get("optimizer_steps_per_update")
    if knobs.get("batch_size") == "rollout":
        return f"{epochs or 'the Zoo epochs of'} whole-rollout step{'' if epochs == '1' else 's'} per update"
    passes = "one pass" if epochs == "1" else f"{epochs} passes" if epochs else "the Zoo's epochs"
    return f"{passes} of minibatches ({f'{steps:,}' if steps is not None else 'n/a'} optimizer steps per update)"


def chosen_words(study: Study, arm: str, chosen: Mapping[str, Any] | None) -> str:
    """A pick in words: by its schedule where its arm's search space is "schedule", else by its knobs."""
    if study.space(arm) == "schedule":
        return schedule_words(chosen)
    return configuration_words(chosen["variant"]) if chosen else "not searched yet"


def _chosen_lines(study: Study) -> list[str]:
    """Each design arm named by what its search chose on fresh data, per task (a schedule search's
    arm by its schedule, with the tasks where it chose whole-rollout steps)."""
    parts = []
    for arm in study.arms:
        cells = [(env, got[0]) for env, _ in study.tasks for got in [pick(study, arm, env, "fresh")] if got and got[0]]
        if cells and study.space(arm) == "schedule":
            whole = [env for env, p in cells if "batch_size=rollout" in (p.get("variant") or "")]
            parts.append(f"`{study.name(arm)}`: " + "; ".join(f"{env} {schedule_words(p)}" for env, p in cells)
                         + f" (whole-rollout steps on {len(whole)} of {len(cells)} {study.plan.tasks_word}{': ' + ', '.join(whole) if whole else ''})")
        elif cells:
            parts.append(f"`{study.name(arm)}`: " + "; ".join(f"{env} {configuration_words(p['variant'])} (trial {p.get('trial', 'n/a')})" for env, p in cells))
    if not parts:
        return ["**What the searches chose:** nothing yet (no search is done).", ""]
    if all(study.space(arm) == "schedule" for arm in study.arms):
        return ["**What the searches chose** (fresh data; the configurations are under \"Chosen configurations\"): " + ". ".join(parts) + ".", ""]
    return ["**The arms as their searches chose them** (fresh data; each arm is what its search chose, not what it was meant to test; "
            "factors are of the RL Zoo's values, the rest the Zoo's): " + ". ".join(parts) + ".", ""]


def _tasks_cell(row: Mapping[str, Any], n: int) -> str:
    if not row["planned"]:
        return "cut"
    return f"{row['tasks']} of {n}" + (f" (missing: {', '.join(row['missing'])})" if row["missing"] else "")


def _verdict(row: Mapping[str, Any], undecided: str) -> str:
    if not row["planned"]:
        return "cut (pre-registered cut order)"
    return row["verdict"] or undecided


def _limits(study: Study) -> list[str]:
    """The plan's ``design.limits`` and the pre-registration's section on limits, quoted."""
    lines = [study.plan.design.limits] if study.plan.design.limits else []
    path = study.results / "preregistration.md"
    text = contract.read_regular_text(path) if path.is_file() else ""
    head = next((h for h in text.split("\n## ")[1:] if h.lower().startswith("limits")), "")
    body = head.split("\n", 1)[1].strip() if "\n" in head else ""
    if body:
        lines += ["As stated in the pre-registration:", "", *[f"> {line}" if line else ">" for line in body.splitlines()]]
    return lines or ["None stated in the plan or the pre-registration."]


def report_text(study: Study, result: Mapping[str, Any]) -> str:
    plan, files = study.plan, study.plan.files
    rows = primary(study, result)
    decided = answers(study, rows)
    n = len(study.tasks)
    undecided = plan.decisions[0].undecided if plan.decisions else "not decided"
    tasks = ", ".join(f"{t} ({b:,} steps)" for t, b in study.tasks)
    comparators = "; ".join(f"{c.name} ([`{c.results}/`]({c.results}/)): " + ", ".join(f"`{label}`" for label in c.arms)
                            for c in plan.comparators if c.kind == "study")
    intro = [x for paragraph in plan.words.intro for x in (paragraph, "")] or [
        f"Pre-registered in [`preregistration.md`](preregistration.md) and its plan file [`{PLAN_FILE}`]({PLAN_FILE}) before any run: "
        f"a searched design, each arm tuned once by its search, frozen, swept over the lags, and tuned again at lag {study.tax_lag} for its "
        f"retuning tax. Comparators: {comparators or 'none'}. Rebuilt from the committed files by the generic report of a searched design "
        f"(`python -m adaptive_po.analysis.searched_report --results <this folder>`; the plan's report command: `{plan.commands['report']}`).", ""]
    lines = [f"# {plan.title}: verdicts", "", *intro, *_chosen_lines(study)]
    counts = progress(study)
    pilot_folders = study.plan.pilot.folders if study.plan.pilot is not None else ()
    total, done = sum(r["search"] + r["score"] for r in counts if not r["cut"]), sum(1 for k in study.table if k[0] not in pilot_folders)
    if not study.table:
        lines.append(f"**Progress: no runs yet** ([`{files['table']}`]({files['table']}) has no rows): every answer below is "
                     f"\"{undecided}\"; the plan has {total:,} runs after the cuts committed so far.")
    else:
        lines.append(f"**Progress:** {done:,} of {total:,} planned runs in [`{files['table']}`]({files['table']}) (at most: a lag-"
                     f"{study.tax_lag} pick that is the fresh one shares that one's runs).")
    lines += ["", f"{plan.task_noun.capitalize()}s {tasks}; lags {', '.join(map(str, study.lags))}; scoring seeds "
              f"{', '.join(map(str, study.seeds))}.", "",
              f"| part | kind | folder | runs in the folder | search runs planned | scoring runs planned (`{plan.design.folder}`) |",
              "|---|---|---|---:|---:|---:|"]
    for r in counts:
        planned = ("cut", "cut") if r["cut"] else (f"{r['search']:,}", f"{r['score']:,}" if r["kind"] == "search" else f"{r['score']:,} (in its folder)")
        lines.append(f"| {r['part']} | {r['kind']} | `{r['folder']}` | {r['done']:,} | {planned[0]} | {planned[1]} |")
    score_done = sum(1 for k in study.table if k[0] == plan.design.folder)
    lines += ["", f"Scoring runs in `{plan.design.folder}`: {score_done:,}.", ""]
    cuts_file = files["cuts"]
    if any(study.cuts.values()):
        lines.append(f"Cut by the pre-registered order (`{cuts_file}`): {json.dumps(dict(study.cuts), sort_keys=True)}.")
    elif (study.results / cuts_file).is_file():
        lines.append(f"Cuts (`{cuts_file}`): none.")
    else:
        lines.append(f"Cuts: none committed yet (the first slice writes `{cuts_file}`; until then the whole design is planned here).")
    lines += ["", *deviations(study.results), "", "## The answer", ""]
    if not all(a["complete"] for a in decided):
        lines += [f"**Interim: the study is not complete, and no answer here is the study's until every planned {plan.task_noun} of an "
                  "answer's endpoints is in.** The \"reading so far\" column applies the registered rule to the tasks that are complete; "
                  "it is not an answer.", ""]
    lines += ["| decision | endpoints' tasks complete | answer by the pre-registered rule | reading so far |", "|---|---|---|---|"]
    by = {r["id"]: r for r in rows}
    for a in decided:
        d = a["decision"]
        named = [e.id for e in plan.endpoints if e.id in d.endpoints()]
        counts_cell = ", ".join(f"{i} {by[i]['tasks']}/{n}" if by[i]["planned"] else f"{i} cut" for i in named)
        reading = "(final)" if a["complete"] else "nothing to read yet" if a["reading"] == d.undecided else f"{a['reading']} (interim, not the answer)"
        lines.append(f"| {plan.words.claims.get(d.name, d.name)} | {counts_cell} | **{a['answer']}** | {reading} |")
    lines += ["", " ".join(f"**{a['decision'].sentence.format(answer=a['answer'])}**" for a in decided), ""]
    lines += _by_task_lines(study, result, rows)
    families = plan.families()
    lines += [
        "### Endpoints (Holm within each family)" if families else "### Endpoints", "",
        "| endpoint | family | tasks | estimate [95% CI] | p | p (Holm within its family) | detectable (80% power) | verdict |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        e = result["endpoints"][r["id"]]["endpoint"]
        lines.append(f"| {r['endpoint']} | {e.family or '(none)'} | {_tasks_cell(r, n)} | {format_difference(r['d'], r['digits'])} | "
                     f"{format_p(r['p'])} | {format_p(r['p_adj']) if e.family else ''} | {format_p(r['d'].detectable())} | {_verdict(r, undecided)} |")
    lines += ["", *_notes(study, rows), ""]
    lines += _drift_lines(study)
    lines += [x for s in plan.secondary if s.kind == "search-luck" for x in _luck_lines(study, result, s, undecided)]
    lines += _per_task_lines(study, result)
    lines += _secondary_lines(study, result)
    lines += _configurations(study)
    lines += _cells(study, result)
    lines += ["## Limits", "", *_limits(study), "",
              "Figure: [`staleness.png`](staleness.png) (normalized score against lag per task, each arm and comparator at its fresh pick "
              f"with its 95% band; stars: the lag-{study.tax_lag} picks at lag {study.tax_lag})."]
    return "\n".join(lines) + "\n"


def _notes(study: Study, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    notes = []
    sloped = next((e for e in study.plan.endpoints if e.kind == "slope"), None)
    if sloped is not None:
        notes.append(f"Slopes are in normalized score per unit of log2(1 + lag) over lags {', '.join(map(str, sloped.lags))}; their equivalence "
                     f"margin is {sloped.margin:g} over that range ({sloped.test_margin:.4f} per unit).")
    for r in rows:
        e = study.plan.endpoint(r["id"])
        if e.kind == "non-inferiority" and "p_inferior" in r:
            notes.append(f"{e.id} is one-sided (p of \"{study.name(e.arm)} is worse by {e.margin:g} or more\"; non-inferior where it rejects after Holm); it "
                         f"reads inferior where the mirror test rejects after the same Holm: p {format_p(r['p_inferior'])}, Holm "
                         f"{format_p(r['p_inferior_adj'])}.")
    if any(e.kind == "tax" and e.versus for e in study.plan.endpoints):
        notes.append(f"A tax is the lag-{study.tax_lag} pick minus the fresh pick, both at lag {study.tax_lag} (exactly 0 where the lag-{study.tax_lag} "
                     "pick is the fresh one); a tax difference below 0 means retuning buys the arm less than the comparator (a win for the arm).")
    own = [e for e in study.plan.endpoints if own_tax(e)]
    if own:
        notes.append(", ".join(e.id for e in own) + ": an arm's own tax outside the families, its p that of two one-sided tests of "
                     f"equivalence to 0 within ±{own[0].margin:g} (equivalent where it rejects, else not shown; a rule's \"within-margin\").")
    return [" ".join(notes)] if notes else []


def _by_task_lines(study: Study, result: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Beside a decision on one endpoint: that endpoint per task (Holm over the tasks), and which
    tasks carry the aggregate's win or loss (each with what its arm's search chose there)."""
    by, verdicts, lines = {r["id"]: r for r in rows}, per_task_verdicts(study, result), []
    for d in study.plan.decisions:
        if not d.endpoint or d.endpoint not in verdicts or not by[d.endpoint]["verdict"]:
            continue
        e, v, per = study.plan.endpoint(d.endpoint), by[d.endpoint]["verdict"], verdicts[d.endpoint]
        text = (f"**{e.short} per {study.plan.task_noun}** (Holm over the {study.plan.tasks_word}): "
                + "; ".join(f"{env} {format_difference(per[env]['d'], e.digits)} ({per[env]['verdict']})" for env, _ in study.tasks if env in per) + ".")
        carrying = [env for env, _ in study.tasks if env in per and per[env]["verdict"] == v]
        if v in ("win", "loss") and len(carrying) < len(per):
            alone = " alone" if len(carrying) == 1 else ""
            picks = {env: pick(study, e.arm, env, "fresh") for env in carrying}
            text += (f" The aggregate's {v} ({d.words.get(v, v)}) rests on "
                     + ("; ".join(f"{env}{alone}, where the search of `{study.name(e.arm)}` chose "
                                  f"{chosen_words(study, e.arm, picks[env][0] if picks[env] else None)}" for env in carrying)
                        or f"no single {study.plan.task_noun}'s (none is one per {study.plan.task_noun})") + ".")
        lines += [text, ""]
    return lines


def _drift_lines(study: Study) -> list[str]:
    """The drift note (:func:`drift`), where an arm taxed only here chose its comparator's fresh pick."""
    found = drift(study)
    lines = []
    for arm in dict.fromkeys(a for a, _ in found):
        envs = {env: d for (a, env), d in found.items() if a == arm}
        source = pick(study, arm, next(iter(envs)), "fresh")[1].name
        lines += [f"`{study.name(arm)}`'s lag-{study.tax_lag} search chose the fresh pick of {source} on {', '.join(envs)}: its tax there is 0 "
                  f"by the rule (as for a lag-{study.tax_lag} pick that is the fresh one); this study's rerun minus {source}'s runs of that "
                  f"configuration at lag {study.tax_lag} (the code versions' drift): " + "; ".join(f"{env} {format_difference(d)}" for env, d in envs.items()) + ".", ""]
    return lines


def _luck_lines(study: Study, result: Mapping[str, Any], s: Any, undecided: str) -> list[str]:
    """A search-luck line per task of its part (:func:`search_luck`), beside its endpoint there."""
    rows = search_luck(study, result, s)
    if rows is None:
        return [f"**Search luck (part `{s.part}`):** cut by the pre-registered order.", ""]
    lines = []
    for r in rows:
        head = f"**Search luck ({r['env']}, lag {r['lag']}):** "
        if s.beside:
            e = study.plan.endpoint(s.beside)
            there = result["endpoints"][e.id]["tasks"].get(r["env"])
            beside = f"; beside {e.short}'s estimate there: {format_difference(there, e.digits) if there is not None else 'n/a (not run yet)'}"
        else:
            beside = ""
        if not r["d"].testable:
            lines += [head + f"{undecided} (the second search's selection at lag {r['lag']} is not in the table yet){beside}.", ""]
            continue
        if r["same"]:
            what = f"the second search chose the first's configuration (`{r['second']['variant']}`): the same runs, a difference of exactly 0"
        else:
            what = (f"the second search's selection (`{r['second']['variant']}`, trial {r['second'].get('trial', 'n/a')}) minus the first's "
                    f"(`{r['first']['variant']}`, trial {r['first'].get('trial', 'n/a')}): {format_difference(r['d'])}")
        lines += [head + what + beside + ". How far two searches of one arm land apart, to set the primary gaps against.", ""]
    return lines


def _per_task_lines(study: Study, result: Mapping[str, Any]) -> list[str]:
    verdicts = per_task_verdicts(study, result)
    lines = ["## Per task", "", "Each endpoint per task, Holm over that endpoint's tasks (secondary; the answer is the aggregates').", "",
             "| endpoint | task | estimate [95% CI] | p | p (Holm over tasks) | detectable (80% power) | verdict |",
             "|---|---|---:|---:|---:|---:|---|"]
    for e in study.plan.endpoints:
        ep = result["endpoints"][e.id]
        if not ep["planned"]:
            lines.append(f"| {e.label} | (all) | cut | | | | |")
            continue
        for env, _ in study.tasks:
            row = verdicts[e.id].get(env)
            lines.append(f"| {e.label} | {env} | " + (row_cells(row, e.digits) if row else "n/a | | | | not run yet |"))
    mirror = [(e, env, r) for e in study.plan.endpoints if e.kind == "non-inferiority" for env, r in verdicts.get(e.id, {}).items() if "p_inferior" in r]
    if mirror:
        lines += ["", f"{'/'.join(dict.fromkeys(e.id for e, _, _ in mirror))}'s mirror test (p of \"the arm is worse by less than the margin\"; inferior "
                  f"where it rejects after Holm over the {study.plan.tasks_word}): "
                  + "; ".join(f"{e.id} {env} p {format_p(r['p_inferior'])} (Holm {format_p(r['p_inferior_adj'])})" for e, env, r in mirror) + "."]
    sloped = next((e for e in study.plan.endpoints if e.kind == "slope"), None)
    taxes = {k: v for k, v in result["taxes"].items() if v}
    names = {k: f"{study.name(k[0])}'s tax" + (f" ({k[1]})" if k[1] and sum(x[0] == k[0] for x in taxes) > 1 else "") for k in taxes}
    head = list(names.values())
    slope_labels = [label for label in study.labels if sloped and any(k[1:] == (label, sloped.lags) for k in result["slopes"])]
    lines += ["", "| task | " + " | ".join([*head, *[f"slope {study.name(label)}" for label in slope_labels]]) + " |",
              "|---|" + "---:|" * (len(head) + len(slope_labels))]
    for env, _ in study.tasks:
        cells = [format_difference(t[env]) if env in t else "n/a" for t in taxes.values()]
        for label in slope_labels:
            b = result["slopes"].get((env, label, sloped.lags))
            cells.append(f"{b[0]:+.4f} ({b[1]:.4f})" if b and math.isfinite(b[0]) else "n/a")
        lines.append(f"| {env} | " + " | ".join(cells) + " |")
    lines += ["", f"Taxes: the lag-{study.tax_lag} pick minus the fresh pick, both at lag {study.tax_lag}. Slopes: normalized score per unit "
              f"of log2(1 + lag) over lags {', '.join(map(str, sloped.lags)) if sloped else 'n/a'} (standard error).", ""]
    over = result["tax_over"]
    if over:
        lines += [f"Each tax over the {study.plan.tasks_word} that have it (the mean of per-{study.plan.task_noun} taxes, Welch):", "",
                  f"| tax | {study.plan.tasks_word} | estimate [95% CI] | detectable (80% power) |", "|---|---:|---:|---:|"]
        lines += [f"| {names[k]} | {len(result['taxes'][k])} of {len(study.tasks)} | {format_difference(d)} | {format_p(d.detectable())} |" for k, d in over.items()]
        lines.append("")
    return lines


def _secondary_lines(study: Study, result: Mapping[str, Any]) -> list[str]:
    """The plan's secondary tables, in its order (a search-luck line stands beside the endpoints)."""
    lines: list[str] = []
    tables = head_to_heads(study, result)
    for s in study.plan.secondary:
        if s.kind == "head-to-head":
            lines += [x for t in tables if t[0] is s for x in _head_to_head_lines(study, *t)]
        elif s.kind == "difference":
            lines += _difference_lines(study, s, *difference(study, result, s))
        elif s.kind == "learning-rate":
            lines += _learning_rate_lines(study, s)
    return lines


def _provenance(s: Any) -> str:
    return "Pre-registered as secondary and descriptive" if s.preregistered else "Added after the results (not pre-registered)"


def _head_to_head_lines(study: Study, s: Any, comparator: str, task_rows: Sequence[Mapping[str, Any]], agg_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    n, versus = len(study.tasks), study.name(comparator)
    lines = [f"## Secondary: each arm minus `{versus}` at every lag", "",
             f"{_provenance(s)}: each arm at its fresh pick minus `{versus}` at its fresh pick, on the {len(study.seeds)} scoring seeds (Welch's t; "
             f"over tasks the mean of per-task differences; equivalence within ±{s.margin:g} by two one-sided tests). Each table has its own Holm "
             "adjustment.", "", "### Over tasks", "",
             f"| arm | lag | tasks | arm - {versus} [95% CI] | p | p (Holm over the table) | detectable (80% power) | verdict |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {study.name(r['algo'])} | {r['lag']} | {r['tasks']} of {n} | " + row_cells(r) for r in agg_rows] or ["| (no runs yet) | | | | | | | |"]
    lines += ["", "### Per task", "", f"| task | arm | lag | arm - {versus} [95% CI] | p | p (Holm over the table) | detectable (80% power) | verdict |",
              "|---|---|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {r['env']} | {study.name(r['algo'])} | {r['lag']} | " + row_cells(r) for r in task_rows] or ["| (no runs yet) | | | | | | | |"]
    return lines + [""]


def _difference_lines(study: Study, s: Any, task_rows: Sequence[Mapping[str, Any]], agg_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    lags = [lag for lag in s.lags if lag in study.lags]
    where = ([f"at lag{'s' if len(lags) > 1 else ''} {', '.join(map(str, lags))}"] if lags else []) + (
        [f"in slope over lags {min(s.slope)}-{max(s.slope)}"] if s.slope else [])
    margins = f"±{s.margin:g}" + (f" at a lag, ±{s.margin / math.log2(1 + max(s.slope)):.4f} per unit of log2(1 + lag) in slope" if s.slope else "")
    head = "| estimate [95% CI] | p | p (Holm over the table) | detectable (80% power) | verdict |"
    lines = [f"## Secondary: {s.title}", "",
             f"{_provenance(s)}: `{study.name(s.arms[0])}` minus `{study.name(s.comparators[0])}`, each at its fresh pick, {' and '.join(where)} "
             f"(equivalence within {margins} by two one-sided tests); Holm within each table.", "",
             f"| comparison | tasks {head}", "|---|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {r['what']} | {r['tasks']} of {len(study.tasks)} | " + row_cells(r, 4 if r["what"].startswith("slope") else 3) for r in agg_rows] or [
        "| (no runs yet) | | | | | | |"]
    lines += ["", f"| task | comparison {head}", "|---|---|---:|---:|---:|---:|---|"]
    lines += [f"| {r['env']} | {r['what']} | " + row_cells(r, 4 if r["what"].startswith("slope") else 3) for r in task_rows] or [
        "| (no runs yet) | | | | | | |"]
    return lines + [""]


def _learning_rate_lines(study: Study, s: Any) -> list[str]:
    table = learning_rate(study, s.arms, s.part)
    lines = [f"## Secondary: the learning rate (part `{s.part}`)", ""]
    if table["part"] is None:
        return lines + [f"The part `{s.part}` is cut by the pre-registered order: no table.", ""]
    factors = table["factors"]
    top = f"x{factors[-1]:g}"
    lines += [f"Each arm at its fresh pick with its learning rate x1 (its sweep's runs) and x{', x'.join(f'{f:g}' for f in factors)} (the "
              f"part's runs, folder `{table['part']['folder']}`), on seeds {', '.join(map(str, table['seeds']))}: mean normalized score "
              f"[95% CI]; the drop is {top} minus x1 (Welch), Holm over the table's drops; \"not shown\" where the adjusted test does not "
              "reject.", "",
              "| task | lag | arm | x1 | " + " | ".join(f"x{f:g}" for f in factors) + f" | {top} - x1 [95% CI] | p | p (Holm over the table) | verdict |",
              "|---|---:|---|---:|" + "---:|" * len(factors) + "---:|---:|---:|---|"]
    for r in table["rows"]:
        cells = [f"{x.mean():.3f} [{x.mean() - half_width(x):.3f}, {x.mean() + half_width(x):.3f}]" if x is not None else "n/a"
                 for x in (r["at"].get(f) for f in (1.0, *factors))]
        test = (f"{format_difference(r['d'])} | {format_p(r['p'])} | {format_p(r['p_adj'])} | {r['verdict']}" if "d" in r else "n/a | | | not run yet")
        lines.append(f"| {r['env']} | {r['lag']} | {study.name(r['arm'])} | " + " | ".join(cells) + f" | {test} |")
    return lines + [""]


def _configurations(study: Study) -> list[str]:
    """Each pick per task, with its search return where this study's picks record it; a plan with a
    "schedule" search, or whose picks record their optimizer steps per update, also gives each pick's
    optimizer steps per update, at the tax lag, and updates per run (as its search recorded them),
    and where each task's updates per run are recorded, the lags that reach past them."""
    rows_by_env = {env: _pick_rows(study, env) for env, _ in study.tasks}
    picks = [got for rows in rows_by_env.values() for *_, source, got, _ in rows if source == "this study"]  # what this study's searches record
    counted = any(p["space"] == "schedule" for p in study.parts()) or any("optimizer_steps_per_update" in got for got in picks)
    returned = any("search_return" in got for got in picks)
    k = study.tax_lag
    extra = ((f" optimizer steps per update | lag {k} in optimizer steps | updates per run |", "---:|---:|---:|") if counted else ("", ""))
    extra = (extra[0] + (" search return |" if returned else ""), extra[1] + ("---:|" if returned else ""))
    lines = ["## Chosen configurations", "",
             "Each pick (the best trial of its search on the search seeds) per task, named by what the search chose: this study's by "
             "part, the comparators' from their studies.", "",
             f"| task | arm | tuned on | part | source | configuration (trial) | in words |{extra[0]} search score |", f"|---|---|---|---|---|---|---|{extra[1]}---:|"]
    for env, rows in rows_by_env.items():
        if not rows:
            lines.append(f"| {env} | (not searched yet) | | | | | |{' | | |' if counted else ''}{' |' if returned else ''} |")
        for label, tuned, part, source, got, selected in rows:
            score = got.get("search_score")
            steps = ""
            if counted:
                per = got.get("optimizer_steps_per_update")
                counts = per, per * k if isinstance(per, int) else None, got.get("updates_per_run", (pick_at(selected, env) or {}).get("updates_per_run"))
                steps = "".join(f" {f'{c:,}' if isinstance(c, int) else 'n/a'} |" for c in counts)
            if returned:
                steps += f" {_number(got.get('search_return'), '.1f')} |"
            lines.append(f"| {env} | {study.name(label)} | {tuned} | {part} | {source} | `{got['variant'] or 'Zoo default'}` ({got.get('trial', 'n/a')}) | "
                         f"{configuration_words(got['variant'])} |{steps} {_number(score, '.3f')} |")
    return lines + ["", *_fixed_behaviour(study)]


def _number(x: Any, spec: str) -> str:
    return format(x, spec) if isinstance(x, (int, float)) else "n/a"


def _pick_rows(study: Study, env: str) -> list[tuple[str, str, str, str, Mapping[str, Any], Mapping[str, Any]]]:
    """``env``'s picks: ``(arm, tuned on, part, source, pick, that study's picks)``, this study's by part, then the comparators'."""
    rows = [(arm, tuned, p["name"], "this study", got, study.selected) for p in study.parts() for arm in p["arms"]
            for tuned, got in (pick_at(study.selected, env, p["name"], arm) or {}).items()]
    return rows + [(label, tuned, "", source.name, got, source.selected) for label, source in study.comparators.items()
                   for tuned in ("fresh", lag_name(study.tax_lag)) for got in [comparator_pick(source.selected, env, source.algo, tuned)] if got]


def _fixed_behaviour(study: Study) -> list[str]:
    """Where the picks record each task's updates per run: the lags at or above them, whose actors act
    with the initial policy for the whole run."""
    runs = {env: n for env, _ in study.tasks for n in [(pick_at(study.selected, env) or {}).get("updates_per_run")] if isinstance(n, int)}
    if not runs:
        return []
    past = {env: [lag for lag in study.lags if lag >= n] for env, n in runs.items()}
    return [f"Updates per run: {', '.join(f'{env} {n}' for env, n in runs.items())}. An actor `lag` updates old acts with the initial policy until "
            "the learner has made `lag` updates, so a lag at or above a task's updates per run ("
            + "; ".join(f"{env}: {', '.join(map(str, lags))}" for env, lags in past.items() if lags)
            + ") means data from the initial policy for the whole run: learning from a fixed behaviour policy.", ""]


def _cells(study: Study, result: Mapping[str, Any]) -> list[str]:
    """Each arm's cells at its fresh pick, and after them its lag-k picks at lag k (the tax's runs)."""
    lines = ["## Every cell", "", "Mean normalized score ± the 95% t-interval's half width over the scoring seeds, each arm at its fresh pick.", "",
             "| task | arm | " + " | ".join(f"lag {lag}" for lag in study.lags) + " |", "|---|---|" + "---:|" * len(study.lags)]
    for env, budget in study.tasks:
        for label in (*study.labels, *study.taxed_only):
            cells = [result["fresh"][env].get((label, lag)) for lag in study.lags]
            if any(c is not None for c in cells):
                lines.append(f"| {env} | {study.name(label)} | " + " | ".join(f"{c.mean():.3f} ± {half_width(c):.3f}" if c is not None else "" for c in cells) + " |")
            for part, y in _tuned_cells(study, env, budget, label):
                lines.append(f"| {env} | {study.name(label)}, tuned at lag {study.tax_lag}{f' ({part})' if part else ''} | "
                             + " | ".join(f"{y.mean():.3f} ± {half_width(y):.3f}" if lag == study.tax_lag else "" for lag in study.lags) + " |")
    return lines + [""]


def _tuned_cells(study: Study, env: str, budget: int, label: str) -> list[tuple[str, np.ndarray]]:
    """``label``'s lag-k picks on ``env`` at lag k, each with its part where more than one part taxes it."""
    parts = [""] if label in study.comparators else [p["name"] for p in study.parts() if label in p["tax_arms"]]
    out = []
    for part in parts:
        got = pick(study, label, env, lag_name(study.tax_lag), part)
        y = scores(got[1], env, budget, got[0]["variant"], study.tax_lag, study.seeds) if got and got[0] else None
        if y is not None:
            out.append((part if len(parts) > 1 else "", y))
    return out


# ----------------------------------------------------------------------------------------------
# the figure


def figure(study: Study, result: Mapping[str, Any], out: Path) -> Path:
    """Normalized score against lag per task: each arm and comparator at its fresh pick (mean and 95%
    band; the design's arms solid, the comparators dashed), and each lag-k pick at lag k (a star)."""
    from .output import save_figure
    from .plots import finish_panels, lag_axes

    import matplotlib.pyplot as plt  # after plots, which sets the Agg backend

    envs = [env for env, _ in study.tasks] or ["(no tasks)"]
    cols = min(2, len(envs))
    rows = math.ceil(len(envs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.4 * cols, 3.6 * rows + 1.2), squeeze=False)
    palette = plt.get_cmap("tab10").colors
    colors = {label: study.plan.design.colors.get(label, palette[i % len(palette)]) for i, label in enumerate(study.labels)}
    budgets = dict(study.tasks)
    taxed_only = study.taxed_only
    colors.update({arm: palette[(len(study.labels) + i) % len(palette)] for i, arm in enumerate(taxed_only)})
    for ax, env in zip(axes.flat, envs):
        got = result["fresh"].get(env, {})
        for i, label in enumerate((*study.labels, *taxed_only)):
            cells = [(lag, got[(label, lag)]) for lag in study.lags if (label, lag) in got]
            if cells:
                _curve(ax, cells, colors[label], "--" if label in study.comparators else "-", f"{study.name(label)}, tuned fresh")
            tuned = pick(study, label, env, lag_name(study.tax_lag))
            if tuned and tuned[0] and env in budgets:
                y = scores(tuned[1], env, budgets[env], tuned[0]["variant"], study.tax_lag, study.seeds)
                if y is not None:
                    ax.errorbar([log_lag(study.tax_lag) + 0.1 + 0.04 * i], [y.mean()], yerr=[half_width(y)], color=colors[label], marker="*",
                                ms=9, capsize=2.5, ls="none", label=f"{study.name(label)}, tuned at lag {study.tax_lag}")
        if not got:
            ax.text(0.5, 0.5, "no runs yet", transform=ax.transAxes, ha="center", va="center", color="0.4")
        lag_axes(ax, study.lags, env)
    finish_panels(fig, axes, len(envs), f"{study.plan.title}\nmean and 95% CI over {len(study.seeds)} scoring seeds (this study solid, comparators "
                  "dashed)" + ("; no runs of this study yet" if not study.table else ""), top=0.35)
    return save_figure(fig, out, dpi=110)


def _curve(ax: Any, cells: Sequence[tuple[int, np.ndarray]], color: Any, style: str, label: str) -> None:
    """One arm's mean score against log2(1 + lag) with its 95% band."""
    x = [log_lag(lag) for lag, _ in cells]
    m = np.array([c.mean() for _, c in cells])
    h = np.array([half_width(c) for _, c in cells])
    ax.plot(x, m, style, color=color, marker="o", ms=3.5, lw=1.5, label=label)
    ax.fill_between(x, m - h, m + h, color=color, alpha=0.15, lw=0)


# ----------------------------------------------------------------------------------------------
# the command


def build(results: Path, plan_file: str | Path | None = None) -> list[Path]:
    """Check, analyse and write the verdicts and ``staleness.png`` into ``results`` (nothing is
    written where a check fails)."""
    study = load(results, plan_file)
    result = analyse(study)
    text = report_text(study, result)
    verdicts = contract.atomic_write_text(results / study.plan.files["verdicts"], text)
    return [verdicts, figure(study, result, results / "staleness.png")]


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; a bad input (the plan file, a run or a pick the plan does not have) is one
    line on stderr with exit status 2."""
    return contract.one_line_errors("searched report", lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adaptive_po.analysis.searched_report",
                                     description="a searched design's verdicts and figure, from its plan and the committed files")
    parser.add_argument("--results", required=True, help="the study's folder (its plan.toml, table, picks, trials and cuts)")
    parser.add_argument("--plan", default=None, help="the study's plan file (default: the results folder's plan.toml)")
    args = parser.parse_args(argv)
    results = contract.existing_folder(args.results, "the study's results folder")  # a report makes no folder
    print("wrote " + ", ".join(str(p) for p in build(results, args.plan)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
