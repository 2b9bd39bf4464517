"""The paper's claim under the paper's own update: the frozen-tuning study's pre-registered extension.

Pre-registered in ``docs/results/frozen-schedule/preregistration.md`` before any of its runs. The
published frozen-tuning study (``docs/results/frozen/``, :mod:`adaptive_po.bench.frozen`) ran every
``esspo`` run under PPO's schedule (many epochs of small minibatches); the ESS objective's authors
take one or a few optimizer steps per rollout, each on the whole rollout. This study is a plan over
the same machinery (:class:`~adaptive_po.bench.frozen.StudyPlan`, :class:`~adaptive_po.bench.frozen.TableRunner`,
the committed ``per_run.csv``), on the published study's four tasks and budgets:

* **main**: ``esspo`` and ``ppo``, each tuned once on fresh data over the schedule space
  (:class:`~adaptive_po.bench.tuning.ScheduleSpace`: rollout length, k whole-rollout steps per
  rollout or one pass of minibatches, learning rate, the KL estimator), frozen, swept at lags
  0-64 on seeds 0-9; ``esspo`` also tuned at lag 8 (its tax);
* **dppo-tax**: ``decoupled-ppo`` tuned at lag 8 in the published study's space, so that its
  retuning tax (against its published fresh configuration) makes the third endpoint a head to head;
* **luck**: on Pendulum-v1, a second search of the new ``esspo`` arm with another sampler seed,
  its selection scored at lag 0: how far two searches of one arm land apart.

The table is the record, as in the published study: a run in it is never run again, the search is
told the table's scores, and a slice (``--hours``) stops starting batches when its time is over.
"""

from __future__ import annotations

import csv
import io
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from adaptive_po import contract
from adaptive_po.bench.config import get_env_config
from adaptive_po.bench.study_table import add_run_arguments, check_run_arguments
from adaptive_po.bench.variants import apply_variant
from adaptive_po.bench.frozen import (
    LIMIT_CORE_HOURS, SCORE_SEEDS, SEARCH_SEEDS, SliceOver, StudyPlan, TableRunner, check_cuts, check_grids, checked_runner, describe_picks,
    estimate_hours, optimizer_steps_per_update, read_selection, read_table, score_task, search_task, updates_per_run,
)
from adaptive_po.bench.tuning import OWN_SPACE as TUNED_OWN_SPACE, ScheduleSpace, ZooFactorSpace

#: the published study's tasks and budgets (``docs/results/frozen/selection.json``), in its order
TASKS: tuple[tuple[str, int], ...] = (
    ("Acrobot-v1", 50_000), ("Pendulum-v1", 100_000), ("LunarLanderContinuous-v3", 300_000), ("LunarLander-v3", 500_000),
)
LAGS: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 64)
ARMS: tuple[str, ...] = ("esspo", "ppo")
TAX_ARMS: tuple[str, ...] = ("esspo",)
TAX_LAG = 8
TRIALS = 16
ROUND_SIZE = 4
#: the schedule space: the same for both arms; ``ppo`` adds its clip range, ``esspo`` its KL estimator
SPACE = ScheduleSpace(own={"ppo": {"clip_range": (0.1, 0.5, 0.2)}})
#: ``decoupled-ppo``'s lag-8 search: the published study's space and own knobs
DPPO = contract.SCHEDULE_DPPO
DPPO_SPACE = ZooFactorSpace({DPPO: {"clip_range": (0.1, 0.5, 0.2), "is_truncation": (0.5, 2.0, 1.0)}})
#: the second search of one arm (another sampler seed), scored at lag 0
LUCK_TASK, LUCK_ARM, LUCK_SAMPLER_SEED = contract.SCHEDULE_LUCK_TASK, contract.SCHEDULE_LUCK_ARM, 1

SEARCH_FOLDER = contract.SCHEDULE_SEARCH_FOLDER
DPPO_SEARCH_FOLDER = contract.SCHEDULE_DPPO_SEARCH_FOLDER
LUCK_SEARCH_FOLDER = contract.SCHEDULE_LUCK_SEARCH_FOLDER
SCORE_FOLDER = contract.SCHEDULE_SCORE_FOLDER
RESULTS = contract.SCHEDULE_RESULTS
#: the published study, whose ``ppo`` and ``decoupled-ppo`` runs are the comparators
PUBLISHED = contract.FROZEN_RESULTS
#: the sub-plans in the pre-registered cut order's reverse: the last is cut first (after lag 64)
PARTS: tuple[str, ...] = contract.SCHEDULE_PARTS


def plans(out: str = "runs", envs_dir: str | None = None, cuts: Mapping[str, Sequence[Any]] | None = None) -> dict[str, StudyPlan]:
    """The study's sub-plans by name, less the ``cuts`` (``{"lags": [...], "parts": [...], "tasks": [...]}``)."""
    cuts = cuts or {}
    tasks = tuple(t for t in TASKS if t[0] not in cuts.get("tasks", ()))
    lags = tuple(lag for lag in LAGS if lag not in cuts.get("lags", ()))
    common = dict(trials=TRIALS, round_size=ROUND_SIZE, search_seeds=SEARCH_SEEDS, score_seeds=SCORE_SEEDS, tax_lag=TAX_LAG,
                  score_folder=SCORE_FOLDER, out=out, envs_dir=envs_dir)
    made = {
        "main": StudyPlan(tasks=tasks, arms=ARMS, tax_arms=TAX_ARMS, lags=lags, space=SPACE, search_folder=SEARCH_FOLDER, **common),
        "dppo-tax": StudyPlan(tasks=tasks, arms=(DPPO,), tax_arms=(DPPO,), fresh_arms=(), lags=lags, space=DPPO_SPACE,
                              search_folder=DPPO_SEARCH_FOLDER, **common),
        "luck": StudyPlan(tasks=tuple(t for t in tasks if t[0] == LUCK_TASK), arms=(LUCK_ARM,), tax_arms=(), lags=(0,), space=SPACE,
                          search_folder=LUCK_SEARCH_FOLDER, sampler_seed=LUCK_SAMPLER_SEED, **common),
    }
    return {name: plan for name, plan in made.items() if name not in cuts.get("parts", ()) and plan.tasks}


def check_published(published: Path) -> None:
    """The tasks must be the published study's (its ``selection.json``, checked by
    :func:`~adaptive_po.bench.frozen.read_selection`), in its order."""
    path = published / "selection.json"
    _, theirs = read_selection(path)
    if theirs != TASKS:
        raise ValueError(f"{path}: tasks {list(theirs)} are not this study's {list(TASKS)}")


# ----------------------------------------------------------------------------------------------
# the corners of the space: what a run of each schedule is, in optimizer steps


def schedule_corners(envs_dir: str | None = None) -> list[dict[str, Any]]:
    """Per task and corner of the schedule space (shortest and longest rollout x 1 and 5
    whole-rollout steps, and one pass of the Zoo minibatches), with the Zoo's own schedule: the
    rollout's samples, updates per run, optimizer steps per update and per run."""
    out = []
    corners = [(min(SPACE.rollout_factors), 1), (min(SPACE.rollout_factors), max(s for s in SPACE.steps if isinstance(s, int))),
               (max(SPACE.rollout_factors), 1), (max(SPACE.rollout_factors), max(s for s in SPACE.steps if isinstance(s, int))),
               (min(SPACE.rollout_factors), "one-pass"), (1.0, "one-pass"), (max(SPACE.rollout_factors), "one-pass")]
    for env, budget in TASKS:
        rows = [("the Zoo's (published study's default)", "")]
        rows += [(f"rollout x{f:g}, {s if s == 'one-pass' else f'{s} whole-rollout step' + ('s' if s != 1 else '')}",
                  SPACE.variant("esspo", {"learning_rate": 1.0, "n_steps": f, "steps": s})) for f, s in corners]
        for name, variant in rows:
            hp, _ = apply_variant("esspo", variant, get_env_config(env, envs_dir).hyperparams, {})
            rollout = hp.n_envs * hp.n_steps
            updates = updates_per_run(env, budget, envs_dir, "esspo", variant)
            per_update = optimizer_steps_per_update(env, "esspo", variant, envs_dir)
            out.append({"env": env, "budget": budget, "schedule": name, "variant": variant, "rollout": rollout,
                        "samples_per_step": min(hp.batch_size, rollout), "updates_per_run": updates,
                        "steps_per_update": per_update, "steps_per_run": updates * per_update})
    return out


def corners_text(envs_dir: str | None = None) -> str:
    lines = ["| task (budget) | schedule | rollout (samples) | samples per step | updates per run | optimizer steps per update | per run |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in schedule_corners(envs_dir):
        lines.append(f"| {r['env']} ({r['budget']:,}) | {r['schedule']} | {r['rollout']:,} | {r['samples_per_step']:,} | "
                     f"{r['updates_per_run']:,} | {r['steps_per_update']:,} | {r['steps_per_run']:,} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# the study


TRIAL_COLUMNS = ("part", "env", "budget", "algo", "tuned_at", "trial", "variant", "failed_runs", "search_return", "search_score")


def write_trials(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(TRIAL_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    contract.atomic_write_text(path, buf.getvalue())


def run_study(parts: Mapping[str, StudyPlan], runner: TableRunner, results: Path, log: Callable[[str], None] = print) -> bool:
    """Task by task (the published order: cheapest first), each part's search, then its sweep and
    tax; ``trials.csv`` and ``selected.json`` are rewritten after every search. True when complete,
    False when the slice's time ran out."""
    for plan in parts.values():
        check_grids(plan)
    trial_rows: list[dict[str, Any]] = []
    selection: dict[str, Any] = {}
    record = plan_record(parts)
    try:
        for env, budget in dict.fromkeys(t for plan in parts.values() for t in plan.tasks):
            for name, plan in parts.items():
                if (env, budget) not in plan.tasks:
                    continue
                rows, selected = search_task(plan, runner, env, budget, log)
                trial_rows += [{"part": name, **r} for r in rows]
                describe_picks(plan, env, budget, selected, every=True)
                selection.setdefault(env, {"budget": budget})[name] = selected
                write_trials(results / "trials.csv", trial_rows)
                contract.atomic_write_json(results / "selected.json", {"plan": record, "selected": selection})
                score_task(plan, runner, env, budget, selected, log)
    except SliceOver:
        log(f"slice over: {len(runner.rows)} runs in {runner.table_path} ({runner.trained} trained in this slice); run again to continue")
        return False
    log(f"study complete: {len(runner.rows)} runs in {runner.table_path} ({runner.trained} trained in this invocation)")
    return True


def published_ratios(published: Path) -> tuple[float, float]:
    """(search, scoring): the time the published study's runs took over what the model gave them."""
    from adaptive_po.bench.frozen import study_plan

    rows = estimate_hours(study_plan(published), read_table(published / "per_run.csv"))
    ratios = (rows[0]["search_ratio"], rows[0]["score_ratio"]) if rows else (math.nan, math.nan)
    return tuple(r if math.isfinite(r) else 1.0 for r in ratios)  # type: ignore[return-value]


def estimate(parts: Mapping[str, StudyPlan], table: Mapping[Any, Any], default_ratios: tuple[float, float] = (1.0, 1.0),
             selected: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Per part and task: runs, the part's planned runs done (by its selections in ``selected``,
    selected.json's ``selected``, where made: the parts share one scoring folder), core-hours left
    by the model and calibrated (on this study's runs done; before any, on ``default_ratios``, the
    published study's)."""
    out = []
    for name, plan in parts.items():
        picks = {env: chosen.get(name) for env, chosen in (selected or {}).items() if isinstance(chosen, Mapping) and isinstance(chosen.get(name), Mapping)}
        for r in estimate_hours(plan, table, default_ratios, picks=picks):
            out.append({"part": name, **r})
    return out


def plan_cuts(limit: float = LIMIT_CORE_HOURS, envs_dir: str | None = None, ratios: tuple[float, float] = (1.0, 1.0)) -> tuple[dict[str, list[Any]], list[str]]:
    """The pre-registered cut order while the dry run (calibrated on the published study's
    ``ratios``) exceeds ``limit`` core-hours: lag 64, then the luck search, then
    ``decoupled-ppo``'s tax, then the dearest task, repeated (never below 2 tasks)."""
    from adaptive_po.bench.frozen import seconds_per_million

    cuts: dict[str, list[Any]] = {"lags": [], "parts": [], "tasks": []}

    def hours() -> float:
        return sum(r["calibrated_core_hours"] for r in estimate(plans(envs_dir=envs_dir, cuts=cuts), {}, ratios))

    lines = [f"The dry run before any run of this study: {hours():.1f} core-hours, the model calibrated on the published study's runs "
             f"(search x{ratios[0]:.2f}, scoring x{ratios[1]:.2f}); limit {limit:g}, about {limit / 2:g} h on 2 cores."]
    steps: list[tuple[str, Any]] = [("lags", 64), ("parts", "luck"), ("parts", "dppo-tax")]
    while hours() > limit:
        if steps:
            kind, what = steps.pop(0)
            cuts[kind].append(what)
        else:
            remaining = [t for t in TASKS if t[0] not in cuts["tasks"]]
            if len(remaining) <= 2:
                break
            cuts["tasks"].append(max(remaining, key=lambda t: t[1] * seconds_per_million(t[0]))[0])
            kind, what = "tasks", cuts["tasks"][-1]
        lines.append(f"- cut {kind[:-1]} {what}: {hours():.1f} core-hours left")
    if not any(cuts.values()):
        lines.append("Within the limit: nothing is cut.")
    return cuts, lines


CUTS_FILE = contract.SCHEDULE_CUTS_FILE
#: what ``cuts.json`` may cut: lags, parts and tasks of the plan
CUT_CHOICES: dict[str, tuple[Any, ...]] = {"lags": LAGS, "parts": PARTS, "tasks": tuple(env for env, _ in TASKS)}
PLAN_FILE = contract.SCHEDULE_PLAN_FILE


def plan_record(parts: Mapping[str, StudyPlan]) -> dict[str, Any]:
    """``{part: its plan's record}``: what ``plan.json`` holds (the report reads the plan from it)."""
    return {name: plan.record() for name, plan in parts.items()}


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from adaptive_po.bench.estimate import format_duration

    parser = argparse.ArgumentParser(prog="python -m adaptive_po.bench.schedule_study", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("corners", help="the optimizer steps per run at the corners of the schedule space (markdown)")
    p = sub.add_parser("study", help="search, sweep and tax, resuming from the table")
    p.add_argument("--results", default=RESULTS, help="the study's committed folder (per_run.csv, trials.csv, selected.json)")
    p.add_argument("--published", default=PUBLISHED, help="the published frozen study's folder (its tasks)")
    add_run_arguments(p)
    p.add_argument("--dry-run", action="store_true", help="print the plan, its size and its time; run nothing")
    p.add_argument("--envs-dir", default=None)
    args = parser.parse_args(argv)
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    if args.command == "corners":
        print(corners_text(), end="")
        return 0
    try:
        from adaptive_po.bench.frozen import preflight

        preflight()
        check_run_arguments(args, max_hours=24)
        # a dry run reads the folder and never makes it; a study's first slice may
        folder = contract.existing_folder if args.dry_run else contract.report_folder
        results = folder(args.results, "the study's results folder")
        check_published(Path(args.published))
        ratios = published_ratios(Path(args.published))
        cuts_path = results / CUTS_FILE
        if os.path.lexists(cuts_path):  # the cut decided by the first dry run stands (it is committed)
            cuts = check_cuts(contract.read_committed_json(cuts_path), cuts_path, CUT_CHOICES)
            lines = [f"cuts as committed in {cuts_path}: {cuts}"]
        else:
            cuts, lines = plan_cuts(envs_dir=args.envs_dir, ratios=ratios)
        parts = plans(args.out, args.envs_dir, cuts)
        for plan in parts.values():
            plan.check()
        table_path = results / "per_run.csv"
        table = checked_runner(table_path, None, args, log, dry=True).rows
        selected_path = results / "selected.json"
        selected = contract.read_committed_json(selected_path).get("selected", {}) if os.path.lexists(selected_path) else {}
    except (ValueError, OSError) as err:
        print(f"schedule study: {err}", file=sys.stderr)
        return 2
    for line in lines:
        log(line)
    rows = estimate(parts, table, ratios, selected if isinstance(selected, dict) else {})
    cores = args.workers or os.cpu_count() or 1
    for r in rows:
        log(f"  {r['part']}: {r['env']} at {r['budget']:,} steps: {r['runs']} runs, {r['done']} in the table, ~{r['core_hours']:.1f} "
            f"core-hours left by the model, ~{r['calibrated_core_hours']:.1f} calibrated on the runs done")
    total, calibrated = sum(r["core_hours"] for r in rows), sum(r["calibrated_core_hours"] for r in rows)
    log(f"schedule study: {sum(r['runs'] for r in rows)} runs; left: ~{format_duration(total / cores)} on {cores} cores by the model, "
        f"~{format_duration(calibrated / cores)} calibrated (on this study's runs done, else on the published study's)")
    if args.dry_run:
        return 0
    from adaptive_po.bench.frozen import results_lock, train_with_sweep

    train, failed = train_with_sweep(args.workers, not args.no_progress, args.redo_changed, executor=args.executor)
    deadline = time.monotonic() + args.hours * 3600 if args.hours is not None else None
    try:
        with results_lock(results):  # one writer per results folder: the cut, the plan, the table
            if not cuts_path.is_file():
                contract.atomic_write_json(cuts_path, cuts)
            contract.atomic_write_json(results / PLAN_FILE, plan_record(parts))
            runner = checked_runner(table_path, train, args, log, deadline=deadline)  # read again under the lock
            run_study(parts, runner, results, log)
    except ValueError as err:  # SweepLocked, or a table damaged while the lock was awaited
        print(f"schedule study: {err}", file=sys.stderr)
        return 2
    for line in failed:
        log(f"  failed (scored at the random score): {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
