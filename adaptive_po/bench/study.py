"""The generic runner of a pre-registered study: it trains what the study's plan file says.

``python -m adaptive_po.bench.study {dry-run,pilot,select,study} --results docs/results/<study>``
reads ``<results>/plan.toml`` (:mod:`adaptive_po.studies.plan`; ``--plan`` names another):

1. **pilot**: the pilot algorithm alone at the plan's fresh and stale lags on every candidate task,
   one population per (task, lag); then **select** (also alone, from the table): per task the first
   budget read that qualifies by the plan's rule (:mod:`adaptive_po.studies.pilot`), ordered from
   the cheapest, written to ``pilot.md`` and ``selection.json``.
2. **study**: the design's arms x lags x scoring seeds on the selected tasks (after a pilot of
   stressors: on the selected (task, stressor) pairs, each at lag 0, its midpoint and its stressor),
   cut to the plan's core-hour limit in its registered order (:mod:`adaptive_po.studies.cuts`) by a
   dry run calibrated on the pilot's own run times, the cuts written once before the first run.

The table, its checks and the runner are every study's (:mod:`adaptive_po.bench.study_table`): a
run in the table is never run again, and a slice (``--hours``) stops starting populations when its
time is over. The design's configurations are shared (one per arm, no search); a searched or a
frozen design comes with the frozen studies' port.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from adaptive_po import contract
from adaptive_po.bench.config import get_env_config
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.bench.study_table import (
    SliceOver, TableRunner, add_run_arguments, check_configs, check_normalization, check_run_arguments, checked_runner, preflight, read_checked_table, results_lock,
    spec_key, specs_for, train_with_sweep,
)
from adaptive_po.contract import FrozenKey as Key
from adaptive_po.studies import cuts as cut_order
from adaptive_po.studies import pilot as pilot_rule
from adaptive_po.studies.cuts import Runs, Task, pair_name, split_pair
from adaptive_po.studies.plan import PLAN_FILE, StudyPlan, load_plan


def pilot_specs(plan: StudyPlan, out: str = "runs", envs_dir: str | None = None) -> list[RunSpec]:
    """The pilot algorithm at the tasks' settings and the plan's seeds, on every task: at its two
    lags, or under each stressor (and fresh, unless its fresh runs are another study's)."""
    p = plan.pilot
    if not p.by_stressor:
        return [s for task in p.tasks for s in specs_for(task, p.algo, [""], p.lags, p.seeds, p.budget, p.folder, out, envs_dir)]
    fresh = [] if p.fresh_from else [(p.lags[0], "")]
    return [s for task in p.tasks for lag, sampler in (*fresh, *((x.lag, x.sampler) for x in p.stressors))
            for s in specs_for(task, p.algo, [""], [lag], p.seeds, p.budget, p.folder, out, envs_dir, sampler=sampler)]


def fresh_table(plan: StudyPlan, envs_dir: str | None = None) -> dict[Key, dict[str, Any]]:
    """The pilot's fresh runs read from another study's committed table (``fresh_from``; empty where
    the plan has none), checked: every one there, complete or scored, and trained with the
    configuration this pilot trains now (its recorded checksum); a ``ValueError`` naming the table
    and the first run otherwise, before anything trains."""
    rows = pilot_rule.fresh_from_rows(plan)
    if not rows:
        return rows
    path = plan.path.parent / plan.pilot.fresh_from.table
    check_normalization(path, rows, envs_dir)
    changed = check_configs(rows, envs_dir=envs_dir).changed
    if changed:
        key, why = next(iter(sorted(changed.items())))
        raise ValueError(f"{path}: the fresh run {key} was trained with another configuration than this pilot trains ({why}): "
                         "its runs are not this pilot's fresh runs")
    return rows


def arm_specs(plan: StudyPlan, runs: Runs, task: str, budget: int, arm: str, out: str = "runs", envs_dir: str | None = None) -> list[RunSpec]:
    """One arm's runs on one task at its lags and seeds; on a (task, stressor) pair, at the pair's conditions."""
    if runs.conditions:
        env = split_pair(task)[0]
        return [s for lag, sampler in runs.conditions[task]
                for s in specs_for(env, arm, [""], [lag], runs.seeds, budget, plan.design.folder, out, envs_dir, sampler=sampler)]
    return specs_for(task, arm, [""], runs.lags, runs.seeds, budget, plan.design.folder, out, envs_dir)


def study_specs(plan: StudyPlan, runs: Runs, out: str = "runs", envs_dir: str | None = None) -> list[RunSpec]:
    return [s for task, budget in runs.tasks for arm in runs.arms for s in arm_specs(plan, runs, task, budget, arm, out, envs_dir)]


def core_hours(plan: StudyPlan, runs: Runs, speeds: Mapping[str, float], table: Mapping[Key, Any] | None = None) -> float:
    """Core-hours of the runs not yet in ``table``, at ``speeds`` (seconds per million steps per run)."""
    table = table or {}
    return sum(s.total_timesteps / 1e6 * speeds[s.env] for s in study_specs(plan, runs) if spec_key(s) not in table) / 3600


def plan_cuts(plan: StudyPlan, tasks: Sequence[Task], speeds: Mapping[str, float], limit: float | None = None) -> tuple[dict[str, list[Any]], list[str]]:
    """The plan's cut order at ``speeds``: :func:`adaptive_po.studies.cuts.plan_cuts`; a task's
    cost is its runs' core-hours with nothing cut (a pair with a midpoint is dearer)."""
    def cost(task: Task) -> float:
        return core_hours(plan, cut_order.apply_cuts(plan, [task]), speeds)

    return cut_order.plan_cuts(plan, tasks, lambda runs: core_hours(plan, runs, speeds), cost, limit)


def read_cuts(plan: StudyPlan, path: Path) -> dict[str, list[Any]]:
    try:
        cuts = json.loads(contract.read_committed_text(path))
    except ValueError as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
    return cut_order.check_cuts(plan, cuts, path)


# ----------------------------------------------------------------------------------------------
# the pilot and its selection


def seconds_per_million(plan: StudyPlan, task: str, table: Mapping[Key, Mapping[str, Any]] | None = None, envs_dir: str | None = None) -> float:
    """Core-seconds per million steps of one run of ``task``: measured on the pilot's finished runs
    where the table has them (each run records its population's wall time, one population per
    core, the pilot's seeds in each), else this project's recorded speed (``measured_speeds.json``,
    an upper bound measured on a loaded machine)."""
    p = plan.pilot
    walls = [float(r["wall_time_s"]) for k, r in (table or {}).items()
             if k[0] == p.folder and k[1] == task and math.isfinite(float(r.get("wall_time_s", math.nan)))]
    if walls:
        hp = get_env_config(task, envs_dir).hyperparams
        trained = -(-p.budget // (hp.n_envs * hp.n_steps)) * hp.n_envs * hp.n_steps
        return float(np.mean(walls)) / len(p.seeds) / (trained / 1e6)
    from adaptive_po.bench.estimate import _seconds_per_million

    return _seconds_per_million("population", task, minatar=plan.recorded_speeds == "minatar")[0]


def pilot_core_hours(plan: StudyPlan, table: Mapping[Key, Mapping[str, Any]] | None = None) -> float:
    """The pilot's core-hours by the model (the runs not in ``table``)."""
    table = table or {}
    left = [s for s in pilot_specs(plan) if spec_key(s) not in table]
    return sum(plan.pilot.budget / 1e6 * seconds_per_million(plan, s.env) for s in left) / 3600


def write_selection(plan: StudyPlan, results: Path, envs_dir: str | None = None, log: Callable[[str], None] = print) -> list[Task] | None:
    """``pilot.md`` and ``selection.json`` from the table (None, and nothing written, while the pilot
    is not complete); the tasks ordered from the cheapest (their budget x the pilot's seconds per run)."""
    p, files = plan.pilot, plan.files
    table = read_checked_table(results / files["table"], envs_dir)
    rows = pilot_rule.pilot_rows(plan, {**table, **fresh_table(plan, envs_dir)})
    if not all(r["complete"] for r in rows):
        specs = pilot_specs(plan, envs_dir=envs_dir)
        log(f"the pilot is not complete ({sum(spec_key(s) in table for s in specs)} of {len(specs)} runs): no selection yet")
        return None
    speeds = {task: seconds_per_million(plan, task, table, envs_dir) for task in p.tasks}
    chosen = pilot_rule.select(plan, rows)
    if p.order == "cheapest":
        chosen = sorted(chosen, key=lambda t: t[-1] * speeds[t[0]])
    contract.atomic_write_text(results / files["pilot"], pilot_rule.pilot_text(plan, rows, chosen, pilot_rule.fresh_returns(plan, rows)))
    contract.atomic_write_json(results / files["selection"], {
        **({"pairs": [{"env": task, "stressor": name, "budget": budget} for task, name, budget in chosen]} if p.by_stressor else
           {plan.tasks_word: [{"env": task, "budget": budget} for task, budget in chosen]}),
        "order": ("from the cheapest (budget x the pilot's measured core-seconds per million steps per run)" if p.order == "cheapest"
                  else "in the registered order"),
        "seconds_per_million": speeds,
        "pilot": rows,
    })
    log(f"selected: {chosen} -> {results / files['pilot']}, {results / files['selection']}")
    return chosen


def read_selection(plan: StudyPlan, results: Path) -> tuple[list[Task], dict[str, float]]:
    """The pilot's selection (tasks and budgets, in order) and its speeds; a ``ValueError`` naming
    the file where it is missing, malformed or not of this plan's tasks and budgets."""
    path = results / plan.files["selection"]
    try:
        record = json.loads(contract.read_committed_text(path))
        if plan.pilot.by_stressor:  # a design on (task, stressor) pairs: each pair is a task of the study
            pairs = [(str(g["env"]), str(g["stressor"]), int(g["budget"])) for g in record["pairs"]]
            plan.check_selected(path, [(t, b) for t, _, b in pairs])
            unknown = [x for _, x, _ in pairs if x not in {s.name for s in plan.pilot.stressors}]
            if unknown:
                raise ValueError(f"stressor {unknown[0]!r} is not one of the plan's")
            tasks = [(pair_name(t, x), b) for t, x, b in pairs]
        else:
            tasks = [(str(g["env"]), int(g["budget"])) for g in record[plan.tasks_word]]
        speeds = {str(k): float(v) for k, v in record["seconds_per_million"].items()}
    except FileNotFoundError:
        raise ValueError(f"{path}: no selection yet: run the pilot first ({plan.commands['run']} pilot)") from None
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a selection of this study ({err})") from None
    if not plan.pilot.by_stressor:
        plan.check_selected(path, tasks)
    return tasks, speeds


# ----------------------------------------------------------------------------------------------
# the command line


def main(argv: Sequence[str] | None = None, prog: str = "python -m adaptive_po.bench.study", results: str | None = None, plan: str | None = None,
         name: str = "study") -> int:
    """The command line; a bad input (the plan file's included) is one line on stderr, naming
    ``name``, with exit status 2. ``results`` and ``plan``: the defaults of a study's own command."""
    return contract.one_line_errors(name, lambda: _main(argv, prog, results, plan))


def _main(argv: Sequence[str] | None, prog: str, default_results: str | None, default_plan: str | None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("dry-run", "the pilot's and (after it) the study's size and time; runs nothing"),
                       ("pilot", "the pilot algorithm alone at the plan's two lags on every task; then the selection"),
                       ("select", "the selection (pilot.md, selection.json) from the table alone"),
                       ("study", "the design's arms on the selected tasks, resuming from the table")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--results", default=default_results, required=default_results is None,
                       help="the study's committed folder (plan.toml, per_run.csv, selection.json, ...)")
        p.add_argument("--plan", default=default_plan, help="the study's plan file (default: the results folder's plan.toml)")
        p.add_argument("--envs-dir", default=None)
        if name in ("pilot", "study"):
            add_run_arguments(p)
        elif name == "dry-run":  # where the study's runs would go and how many cores share them
            add_run_arguments(p, hours=False)
    args = parser.parse_args(argv)
    check_run_arguments(args, max_hours=24)
    preflight()
    # the pilot starts the study and may make its folder; the dry run, the selection and the study read it
    folder = contract.report_folder if args.command == "pilot" else contract.existing_folder
    results = folder(args.results, "the study's results folder")
    plan = load_plan(args.plan or results / PLAN_FILE)
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    if plan.design.configurations == "searched":
        from adaptive_po.bench import searched

        if args.command not in ("dry-run", "study"):
            raise ValueError(f"{plan.path}: a searched design on fixed tasks has no pilot: its commands are dry-run and study"
                             if plan.pilot is None else
                             f"{plan.path}: a searched design's candidate-budget pilot is its study's own command ({plan.commands['run']} {args.command}); "
                             "this runner trains its search, sweep and tax on the selected tasks: dry-run and study")
        if args.command == "dry-run":
            return searched.dry_run(plan, results, args, log)
        deadline = time.monotonic() + args.hours * 3600 if args.hours is not None else None
        train, failed = train_with_sweep(args.workers, not args.no_progress, args.redo_changed, command=plan.path.parent.name, executor=args.executor)
        return searched.study(plan, results, args, train, failed, deadline, log)
    if plan.pilot is None or plan.pilot.candidates or plan.design.configurations != "shared" or plan.parts:
        raise ValueError(f"{plan.path}: this runner trains shared configurations after a pilot that reads its budgets off one set of runs; "
                         "a searched design is trained by adaptive_po.bench.searched (dry-run and study), after any pilot of its own")
    if plan.pilot.by_stressor:
        fresh_table(plan, args.envs_dir)  # the reused fresh runs checked before anything else
    if args.command == "select":
        write_selection(plan, results, args.envs_dir, log)
        return 0
    if args.command == "dry-run":
        return dry_run(plan, results, args.envs_dir, log)
    deadline = time.monotonic() + args.hours * 3600 if args.hours is not None else None
    train, failed = train_with_sweep(args.workers, not args.no_progress, args.redo_changed, command=plan.path.parent.name, executor=args.executor)
    if args.command == "pilot":
        specs = pilot_specs(plan, args.out, args.envs_dir)
        with results_lock(results):
            runner = checked_runner(results / plan.files["table"], train, args, log, deadline=deadline, curves=True)
            try:
                for task in plan.pilot.tasks:  # one batch per task: a population of its seeds per lag, one per core
                    runner.run([s for s in specs if s.env == task], max_members=len(plan.pilot.seeds))
            except SliceOver:
                log("the slice's time is over: the table holds every finished run; rerun to continue")
                return 0
            finally:
                for line in failed:
                    log(f"  failed (scored at the random score): {line}")
            write_selection(plan, results, args.envs_dir, log)
        return 0
    return run_study(plan, args, results, train, failed, deadline, log)


def dry_run(plan: StudyPlan, results: Path, envs_dir: str | None, log: Callable[[str], None]) -> int:
    table = read_checked_table(results / plan.files["table"], envs_dir)
    done = sum(spec_key(s) in table for s in pilot_specs(plan, envs_dir=envs_dir))  # the pilot's runs, not the folder's rows
    log(f"pilot: {len(pilot_specs(plan))} runs of {plan.pilot.budget:,} steps ({done} in the table), ~{pilot_core_hours(plan, table):.1f} "
        "core-hours left at the recorded speeds (an upper bound)")
    if not (results / plan.files["selection"]).exists():
        log("study: planned after the pilot (its size depends on the tasks it selects)")
        return 0
    tasks, speeds = read_selection(plan, results)
    cuts, lines = plan_cuts(plan, tasks, speeds)
    for line in lines:
        log(line)
    cuts_path = results / plan.files["cuts"]
    runs = cut_order.apply_cuts(plan, tasks, read_cuts(plan, cuts_path) if cuts_path.exists() else cuts)
    log(f"study: {runs.runs()} runs, {sum(1 for s in study_specs(plan, runs) if spec_key(s) in table)} in the table, "
        f"~{core_hours(plan, runs, speeds, table):.1f} core-hours left")
    return 0


def run_study(plan: StudyPlan, args: Any, results: Path, train: Callable[..., Any], failed: list[str], deadline: float | None,
              log: Callable[[str], None]) -> int:
    tasks, speeds = read_selection(plan, results)
    minimum = plan.pilot.rule.min_tasks
    if len(tasks) < minimum:
        raise ValueError(f"{results / plan.files['selection']}: {len(tasks)} {cut_order.cut_key(plan, 'tasks')} qualify, fewer than {minimum}: "
                         "as registered, the study is not run")
    table_path, cuts_path = results / plan.files["table"], results / plan.files["cuts"]
    with results_lock(results):
        if not cuts_path.exists():  # written once, before the study's first run
            cuts, lines = plan_cuts(plan, tasks, speeds)
            for line in lines:
                log(line)
            contract.atomic_write_json(cuts_path, cuts)
        runs = cut_order.apply_cuts(plan, tasks, read_cuts(plan, cuts_path))
        runner: TableRunner = checked_runner(table_path, train, args, log, deadline=deadline, curves=True)
        log(f"study: {runs.runs()} runs on {[t for t, _ in runs.tasks]}, lags {list(runs.lags)}, seeds {list(runs.seeds)}; "
            f"~{core_hours(plan, runs, speeds, runner.rows):.1f} core-hours left")
        try:
            for task, budget in runs.tasks:
                for arm in runs.arms:
                    specs = arm_specs(plan, runs, task, budget, arm, args.out, args.envs_dir)
                    runner.run(specs, max_members=math.ceil(len(specs) / 2))  # one (task, arm) in two halves, one per core
        except SliceOver:
            log("the slice's time is over: the table holds every finished run; rerun to continue")
        finally:
            for line in failed:
                log(f"  failed (scored at the random score): {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
