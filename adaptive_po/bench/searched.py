"""A searched design, trained from its plan file: tune once, freeze, sweep the lags, tax.

A plan whose ``design.configurations`` is ``"searched"`` (:mod:`adaptive_po.studies.plan`) names
fixed tasks (``design.tasks``), a ``[search]`` (seeds, trials, rounds, sampler seed, space, each
arm's own knobs), a ``[tax]`` (the lag its tax arms are tuned at again) and, optionally,
``[[parts]]``: sub-plans with their own arms, search folder, space and sampler seed, that the cut
order can drop whole. Without parts, the plan is one part, ``main``: every arm tuned on fresh data
and swept, the tax arms also tuned at the tax lag.

Each part is a :class:`~adaptive_po.bench.frozen.StudyPlan` (the frozen study's search, sweep and
tax, :func:`~adaptive_po.bench.frozen.search_task` and :func:`~adaptive_po.bench.frozen.score_task`),
trained task by task in the plan's order, each part's search and then its sweep and tax. The
files, named by the plan's ``[files]``: ``trials`` (every trial of every search, with its part),
``picks`` (``{"plan": <parts' records>, "selected": {task: {part: {arm: {"fresh"|"lag<k>": ...}}}}}``,
rewritten after each search), ``record`` (the parts' records, written at each slice's start) and
``cuts`` (written once, before the first run). The cost model is the frozen study's, calibrated on
the runs of the study the tasks come from (``design.tasks_from``) until this study has runs of its own.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from adaptive_po import contract
from adaptive_po.bench import frozen
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.bench.study_table import SliceOver, TableRunner, spec_key, specs_for
from adaptive_po.bench.tuning import ScheduleSpace, ZooFactorSpace
from adaptive_po.studies import cuts as cut_order
from adaptive_po.studies.cuts import Runs, Task
from adaptive_po.studies.plan import MAIN_PART, PLAN_FILE, StudyPlan, load_plan

#: the part of a plan without ``[[parts]]``
MAIN = MAIN_PART
TRIAL_COLUMNS = ("part", "env", "budget", "algo", "tuned_at", "trial", "variant", "failed_runs", "search_return", "search_score")


def search_space(name: str, own: Mapping[str, Mapping[str, Sequence[float]]]) -> Any:
    """The plan's ``space`` by name, with each arm's own knobs ``{knob: (low, high, default)}``."""
    own = {arm: {knob: tuple(v) for knob, v in knobs.items()} for arm, knobs in own.items()}
    return ZooFactorSpace(own) if name == "zoo-factors" else ScheduleSpace(own=own)


def part_specs(plan: StudyPlan) -> list[dict[str, Any]]:
    """The plan's parts as written (a plan without ``[[parts]]``: one, :data:`MAIN`, on every task)."""
    return plan.part_specs()


def parts(plan: StudyPlan, tasks: Sequence[Task], cuts: Mapping[str, Sequence[Any]] | None = None, out: str = "runs",
          envs_dir: str | None = None) -> dict[str, frozen.StudyPlan]:
    """Each part not cut, as the frozen study's plan object, on the ``tasks`` and lags the cuts leave
    (a part left with no task or no arm is dropped)."""
    cuts = cuts or {}
    s, d = plan.search, plan.design
    kept_tasks = tuple(t for t in tasks if t[0] not in cuts.get(plan.tasks_word, ()))
    out_parts: dict[str, frozen.StudyPlan] = {}
    for p in part_specs(plan):
        if p["name"] in cuts.get("parts", ()) or p["kind"] != "search":
            continue
        arms = tuple(a for a in p["arms"] if a not in cuts.get("arms", ()))
        fresh = tuple(a for a in p["fresh_arms"] if a in arms)
        part = frozen.StudyPlan(
            tasks=tuple(t for t in kept_tasks if p["tasks"] is None or t[0] in p["tasks"]), arms=arms, tax_arms=tuple(a for a in p["tax_arms"] if a in arms),
            fresh_arms=None if fresh == arms else fresh, lags=tuple(lag for lag in p["lags"] if lag not in cuts.get("lags", ())),
            tax_lag=plan.tax["lag"] if plan.tax else 0, search_seeds=s["seeds"], score_seeds=tuple(x for x in d.seeds if x not in cuts.get("seeds", ())),
            trials=s["trials"], round_size=s["round_size"], sampler_seed=s["sampler_seed"] if p["sampler_seed"] is None else p["sampler_seed"],
            space=search_space(p["space"], p["own"]), own_space=p["own"], search_folder=p["folder"], score_folder=d.folder, out=out, envs_dir=envs_dir,
        )
        if part.tasks and part.arms:
            out_parts[p["name"]] = part
    return out_parts


@dataclass(frozen=True)
class LearningRatePart:
    """Tuned fresh configurations rerun with the learning rate x each of ``factors``: this study's
    ``arms`` (at its own fresh picks) and ``from_arms`` (at the fresh picks of the study in
    ``source``), at ``lags`` on ``tasks`` and ``seeds``, into ``folder``."""

    name: str
    arms: tuple[str, ...]
    from_arms: tuple[str, ...]
    source: Path | None
    factors: tuple[float, ...]
    tasks: tuple[Task, ...]
    lags: tuple[int, ...]
    seeds: tuple[int, ...]
    folder: str
    out: str = "runs"
    envs_dir: str | None = None
    #: ``source`` as the plan file writes it (relative to the plan's folder): the record's, so it
    #: is the same on every machine and in every worktree
    source_text: str = ""

    def runs(self) -> int:
        return (len(self.arms) + len(self.from_arms)) * len(self.factors) * len(self.lags) * len(self.seeds)

    def record(self) -> dict[str, Any]:
        return {"kind": "learning-rate", "arms": list(self.arms), "from_arms": list(self.from_arms), "from": self.source_text,
                "factors": list(self.factors), "tasks": [{"env": e, "budget": b} for e, b in self.tasks], "lags": list(self.lags),
                "seeds": list(self.seeds), "folder": self.folder}

    def source_picks(self) -> Mapping[str, Any]:
        """The source study's picks file's selections by task (its plan's ``files.picks``)."""
        if self.source is None:
            return {}
        source = load_plan(self.source / PLAN_FILE)
        return contract.read_committed_json(self.source / source.files["picks"]).get("selected", {})

    def specs(self, env: str, budget: int, own: Mapping[str, str], theirs: Mapping[str, str]) -> list[RunSpec]:
        """The runs on one task, from each arm's fresh variant (``own``: this study's; ``theirs``:
        the source study's); a ``ValueError`` naming the arm where a pick is missing."""
        picks = {**{a: own.get(a) for a in self.arms}, **{a: theirs.get(a) for a in self.from_arms}}
        missing = [a for a, v in picks.items() if v is None]
        if missing:
            raise ValueError(f"{self.name}: no fresh pick of {missing} on {env} (the searches come first)")
        return [s for algo, variant in picks.items() for f in self.factors
                for s in specs_for(env, algo, [scale_learning_rate(algo, variant, f)], self.lags, self.seeds, budget, self.folder, self.out, self.envs_dir)]


def scale_learning_rate(algo: str, variant: str, factor: float) -> str:
    """``variant`` with its learning-rate factor multiplied by ``factor`` (x1 where it names none)."""
    from adaptive_po.bench.variants import parse_variant

    kind, _ = parse_variant(algo, variant).get("learning_rate", ("scale", 1.0))
    if kind != "scale":
        raise ValueError(f"variant {variant!r}: its learning rate is not a factor")
    return contract.scaled_learning_rate(variant, factor)


def learning_rate_parts(plan: StudyPlan, tasks: Sequence[Task], cuts: Mapping[str, Sequence[Any]] | None = None, out: str = "runs",
                        envs_dir: str | None = None) -> dict[str, LearningRatePart]:
    """The plan's learning-rate parts not cut, on the tasks, arms, lags and seeds the cuts leave."""
    cuts = cuts or {}
    made = {}
    for p in part_specs(plan):
        if p["kind"] != "learning-rate" or p["name"] in cuts.get("parts", ()):
            continue
        part = LearningRatePart(
            name=p["name"], arms=tuple(a for a in p["arms"] if a not in cuts.get("arms", ())), from_arms=p["from_arms"],
            source=(plan.path.parent / p["from"]).resolve() if p["from"] else None, factors=p["factors"],
            tasks=tuple(t for t in tasks if t[0] in p["tasks"] and t[0] not in cuts.get(plan.tasks_word, ())),
            lags=tuple(x for x in p["lags"] if x not in cuts.get("lags", ())), seeds=tuple(x for x in p["seeds"] if x not in cuts.get("seeds", ())),
            folder=p["folder"], out=out, envs_dir=envs_dir, source_text=p["from"],
        )
        if part.tasks and part.runs():
            made[p["name"]] = part
    return made


Part = Any  # a frozen.StudyPlan (a search part) or a LearningRatePart


def all_parts(plan: StudyPlan, tasks: Sequence[Task], cuts: Mapping[str, Sequence[Any]] | None = None, out: str = "runs",
              envs_dir: str | None = None) -> dict[str, Part]:
    """Every part the cuts leave, search and learning-rate, in the plan's order."""
    made = {**parts(plan, tasks, cuts, out, envs_dir), **learning_rate_parts(plan, tasks, cuts, out, envs_dir)}
    return {p["name"]: made[p["name"]] for p in part_specs(plan) if p["name"] in made}


def record(made: Mapping[str, Part]) -> dict[str, Any]:
    """``{part: its record}``: the plan as trained (the ``record`` file; the report reads it)."""
    return {name: part.record() for name, part in made.items()}


# ----------------------------------------------------------------------------------------------
# the cost and the cut order


def source_ratios(plan: StudyPlan) -> tuple[float, float]:
    """(search, scoring): the time the runs of the study the tasks come from (``design.tasks_from``)
    took over what the cost model gave them; (1, 1) where there is none or it has no runs."""
    if not plan.design.tasks_from:
        return 1.0, 1.0
    results = (plan.path.parent / plan.design.tasks_from).resolve()
    source = load_plan(results / PLAN_FILE)
    made = parts(source, fixed_tasks(source, results))
    table = contract.read_frozen_table(results / source.files["table"])
    rows = [r for part in made.values() for r in frozen.estimate_hours(part, table)[:1]]
    ratios = (rows[0]["search_ratio"], rows[0]["score_ratio"]) if rows else (math.nan, math.nan)
    return tuple(r if math.isfinite(r) else 1.0 for r in ratios)  # type: ignore[return-value]


def fixed_tasks(plan: StudyPlan, results: Path) -> tuple[Task, ...]:
    """The design's tasks: the plan's own, or (after a pilot) its committed selection's."""
    if plan.design.tasks:
        return plan.design.tasks
    return frozen.read_selection(results / plan.files["selection"])[1]


def check_tasks_from(plan: StudyPlan) -> None:
    """The design's tasks must be those of the study they come from (``design.tasks_from``), in its
    order; a ``ValueError`` naming both otherwise."""
    if not plan.design.tasks_from:
        return
    results = (plan.path.parent / plan.design.tasks_from).resolve()
    theirs = fixed_tasks(load_plan(results / PLAN_FILE), results)
    if tuple(theirs) != plan.design.tasks:
        raise ValueError(f"{plan.path}: design.tasks {list(plan.design.tasks)} are not those of {results} ({list(theirs)})")


def estimate(made: Mapping[str, Part], table: Mapping[Any, Any], ratios: tuple[float, float] = (1.0, 1.0),
             selected: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Per part and task: runs, the part's planned runs in the table (by its selections, where made)
    and the core-hours left, by the model and calibrated (:func:`~adaptive_po.bench.frozen.estimate_hours`;
    a learning-rate part's runs at the scoring speed)."""
    out = []
    for name, part in made.items():
        if isinstance(part, LearningRatePart):
            for env, budget in part.tasks:
                done = sum(1 for k in table if k[0] == part.folder and k[1] == env and k[6] == budget and k[4] in part.lags and k[5] in part.seeds
                           and k[2] in (*part.arms, *part.from_arms))
                left = max(0, part.runs() - done) * budget / 1e6 * frozen.seconds_per_million(env) / 3600
                out.append({"part": name, "env": env, "budget": budget, "runs": part.runs(), "done": min(done, part.runs()),
                            "core_hours": left, "calibrated_core_hours": left * ratios[1], "search_ratio": math.nan, "score_ratio": math.nan})
            continue
        picks = {env: chosen.get(name) for env, chosen in (selected or {}).items()
                 if isinstance(chosen, Mapping) and isinstance(chosen.get(name), Mapping)}
        out += [{"part": name, **r} for r in frozen.estimate_hours(part, table, ratios, picks=picks)]
    return out


def plan_cuts(plan: StudyPlan, tasks: Sequence[Task], ratios: tuple[float, float], envs_dir: str | None = None,
              limit: float | None = None) -> tuple[dict[str, list[Any]], list[str]]:
    """The plan's registered cut order (:func:`adaptive_po.studies.cuts.plan_cuts`) on the model
    calibrated by ``ratios``; a task's cost is its budget at its recorded speed."""
    def made(runs: Runs) -> dict[str, Part]:
        return all_parts(plan, tasks, runs.cuts, envs_dir=envs_dir)

    def hours(runs: Runs) -> float:
        return sum(r["calibrated_core_hours"] for r in estimate(made(runs), {}, ratios))

    def count(runs: Runs) -> int:
        return sum(p.runs() * len(p.tasks) if isinstance(p, LearningRatePart) else (p.search_runs() + p.score_runs()) * len(p.tasks)
                   for p in made(runs).values())

    basis = (f"the model calibrated on the runs of {plan.design.tasks_from} (search x{ratios[0]:.2f}, scoring x{ratios[1]:.2f})"
             if plan.design.tasks_from else "the recorded speeds")
    return cut_order.plan_cuts(plan, tasks, hours, lambda t: t[1] * frozen.seconds_per_million(t[0]), limit, basis=basis, count=count)


# ----------------------------------------------------------------------------------------------
# the run


def write_trials(path: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = TRIAL_COLUMNS) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    contract.atomic_write_text(path, buf.getvalue())


def run(plan: StudyPlan, made: Mapping[str, Part], runner: TableRunner, results: Path, log: Callable[[str], None] = print) -> bool:
    """Task by task (the design's order), each part's search, then its sweep and tax; the trials and
    picks files are rewritten after every search. True when complete, False when the slice's time ran out.

    A plan without ``[[parts]]`` writes its one search's files flat, as the frozen study's did: no
    ``part`` column in the trials, the picks by task and arm (each task with its default
    configuration's updates per run, each pick with its optimizer steps per update) under the search's
    record; with parts, ``{task: {part: {arm: ...}}}`` under the parts' records."""
    flat = not plan.parts
    for part in made.values():
        if not isinstance(part, LearningRatePart):
            frozen.check_grids(part)
    theirs = {name: part.source_picks() for name, part in made.items() if isinstance(part, LearningRatePart)}
    trial_rows: list[dict[str, Any]] = []
    selection: dict[str, Any] = {}
    recorded = record(made)
    try:
        for env, budget in dict.fromkeys(t for part in made.values() for t in part.tasks):
            for name, part in made.items():
                if (env, budget) not in part.tasks:
                    continue
                if isinstance(part, LearningRatePart):  # after the searches of the task: its arms' fresh picks
                    own = {algo: picks["fresh"]["variant"] for chosen in selection.get(env, {}).values() if isinstance(chosen, dict)
                           for algo, picks in chosen.items() if isinstance(picks, dict) and "fresh" in picks}
                    other = {algo: picks["fresh"]["variant"] for algo, picks in theirs[name].get(env, {}).items()
                             if isinstance(picks, dict) and "fresh" in picks}
                    specs = part.specs(env, budget, own, other)
                    log(f"{env}: {name} ({len(specs)} runs, {sum(spec_key(s) not in runner.rows for s in specs)} to train)")
                    runner.run(specs)
                    continue
                rows, selected = frozen.search_task(part, runner, env, budget, log)
                trial_rows += rows if flat else [{"part": name, **r} for r in rows]
                frozen.describe_picks(part, env, budget, selected, every=not flat)
                if flat:
                    selection[env] = {"budget": budget, "updates_per_run": frozen.updates_per_run(env, budget, part.envs_dir), **selected}
                else:
                    selection.setdefault(env, {"budget": budget})[name] = selected
                write_trials(results / plan.files["trials"], trial_rows, TRIAL_COLUMNS[1:] if flat else TRIAL_COLUMNS)
                contract.atomic_write_json(results / plan.files["picks"], {"plan": recorded[MAIN] if flat else recorded, "selected": selection})
                frozen.score_task(part, runner, env, budget, selected, log)
    except SliceOver:
        log(f"slice over: {len(runner.rows)} runs in {runner.table_path} ({runner.trained} trained in this slice); run again to continue")
        return False
    log(f"study complete: {len(runner.rows)} runs in {runner.table_path} ({runner.trained} trained in this invocation)")
    return True


# ----------------------------------------------------------------------------------------------
# the commands (``python -m adaptive_po.bench.study {dry-run,study}`` on a searched plan)


def committed_cuts(plan: StudyPlan, results: Path, tasks: Sequence[Task], ratios: tuple[float, float],
                   envs_dir: str | None = None) -> tuple[dict[str, list[Any]], list[str], bool]:
    """(cuts, lines, committed): the cuts file's where it was written (before the first run; it
    stands), else the registered order's on the calibrated model."""
    path = results / plan.files["cuts"]
    if path.is_file() or path.is_symlink():
        written = contract.read_committed_json(path)
        if plan.files["cuts"] == plan.files.get("selection"):  # the pilot's selection records the cuts (the frozen study)
            written = written.get("cuts", {})
        cuts = cut_order.check_cuts(plan, written, path)
        return cuts, [f"cuts as committed in {path}: {cuts}"], True
    cuts, lines = plan_cuts(plan, tasks, ratios, envs_dir)
    return cuts, lines, False


def _prepare(plan: StudyPlan, results: Path, args: Any) -> tuple[dict[str, Part], dict[str, list[Any]], tuple[float, float], list[str]]:
    """The parts the cuts leave, the cuts, the calibration and the lines that say how the cuts were
    decided (logged by the caller once its inputs are checked: a refusal is one line)."""
    check_tasks_from(plan)
    tasks = fixed_tasks(plan, results)
    ratios = source_ratios(plan)
    cuts, lines, _ = committed_cuts(plan, results, tasks, ratios, args.envs_dir)
    made = all_parts(plan, tasks, cuts, args.out, args.envs_dir)
    for part in made.values():
        if not isinstance(part, LearningRatePart):
            part.check()
    return made, cuts, ratios, lines


def dry_run(plan: StudyPlan, results: Path, args: Any, log: Callable[[str], None]) -> int:
    """The plan after its cuts, each part's runs per task, those in the table, and the core-hours
    left by the model and calibrated; runs nothing, writes nothing."""
    import os

    from adaptive_po.bench.estimate import format_duration
    from adaptive_po.bench.study_table import checked_runner

    made, _, ratios, lines = _prepare(plan, results, args)
    table = checked_runner(results / plan.files["table"], None, args, log, dry=True).rows
    for line in lines:
        log(line)
    picks_path = results / plan.files["picks"]
    selected = contract.read_committed_json(picks_path).get("selected", {}) if picks_path.is_file() else {}
    rows = estimate(made, table, ratios, selected if isinstance(selected, dict) else {})
    cores = args.workers or os.cpu_count() or 1
    for r in rows:
        log(f"  {r['part']}: {r['env']} at {r['budget']:,} steps: {r['runs']} runs, {r['done']} in the table, ~{r['core_hours']:.1f} "
            f"core-hours left by the model, ~{r['calibrated_core_hours']:.1f} calibrated on the runs done")
    total, calibrated = sum(r["core_hours"] for r in rows), sum(r["calibrated_core_hours"] for r in rows)
    log(f"{plan.path.parent.name}: {sum(r['runs'] for r in rows)} runs; left: ~{format_duration(total / cores)} on {cores} cores by the model, "
        f"~{format_duration(calibrated / cores)} calibrated (on this study's runs done, else on the runs of the study its tasks come from)")
    return 0


def study(plan: StudyPlan, results: Path, args: Any, train: Callable[..., Any], failed: list[str], deadline: float | None,
          log: Callable[[str], None]) -> int:
    """The slice: the cuts written once (before the first run), the record at each slice's start,
    then :func:`run` under the results folder's lock."""
    from adaptive_po.bench.study_table import checked_runner, results_lock

    made, cuts, _, lines = _prepare(plan, results, args)
    with results_lock(results):  # one writer per results folder: the cuts, the record, the table
        runner = checked_runner(results / plan.files["table"], train, args, log, deadline=deadline)  # checked before anything is written
        cuts_path = results / plan.files["cuts"]
        if not cuts_path.is_file():
            contract.atomic_write_json(cuts_path, cuts)
        if "record" in plan.files:
            contract.atomic_write_json(results / plan.files["record"], record(made))
        for line in lines:
            log(line)
        try:
            run(plan, made, runner, results, log)
        finally:
            for line in failed:
                log(f"  failed (scored at the random score): {line}")
    return 0
