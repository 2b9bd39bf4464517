"""The schedule space's corners: what a run of each update schedule is, in optimizer steps.

The frozen study's extension under the ESS objective's own update (``docs/results/frozen-schedule/``)
is a plan file, ``plan.toml``, trained by the generic runner (``python -m adaptive_po.bench.study
study --results docs/results/frozen-schedule``, :mod:`adaptive_po.bench.searched`). What stays here
is the table its pre-registration prints of the schedule space (:class:`~adaptive_po.bench.tuning.ScheduleSpace`):
per task, the rollout's samples, updates per run and optimizer steps per update and per run at the
space's corners (``python -m adaptive_po.bench.schedule_study corners``), read off the plan file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from adaptive_po import contract
from adaptive_po.bench.config import get_env_config
from adaptive_po.bench.frozen import optimizer_steps_per_update, updates_per_run
from adaptive_po.bench.variants import apply_variant
from adaptive_po.studies.plan import PLAN_FILE, load_plan

#: the study whose schedule space this is
RESULTS = contract.SCHEDULE_RESULTS


def plan_tasks_and_space(results: str | Path = RESULTS) -> tuple[tuple[tuple[str, int], ...], Any]:
    """(tasks, the schedule space) of the study's plan file."""
    from adaptive_po.bench.searched import search_space

    plan = load_plan(Path(results) / PLAN_FILE)
    return plan.design.tasks, search_space(plan.search["space"], plan.search["own"])


def schedule_corners(envs_dir: str | None = None) -> list[dict[str, Any]]:
    """Per task and corner of the schedule space (shortest and longest rollout x 1 and 5
    whole-rollout steps, and one pass of the Zoo minibatches), with the Zoo's own schedule: the
    rollout's samples, updates per run, optimizer steps per update and per run."""
    tasks, space = plan_tasks_and_space()
    out = []
    corners = [(min(space.rollout_factors), 1), (min(space.rollout_factors), max(s for s in space.steps if isinstance(s, int))),
               (max(space.rollout_factors), 1), (max(space.rollout_factors), max(s for s in space.steps if isinstance(s, int))),
               (min(space.rollout_factors), "one-pass"), (1.0, "one-pass"), (max(space.rollout_factors), "one-pass")]
    for env, budget in tasks:
        rows = [("the Zoo's (published study's default)", "")]
        rows += [(f"rollout x{f:g}, {s if s == 'one-pass' else f'{s} whole-rollout step' + ('s' if s != 1 else '')}",
                  space.variant("esspo", {"learning_rate": 1.0, "n_steps": f, "steps": s})) for f, s in corners]
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


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m adaptive_po.bench.schedule_study", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("corners", help="the optimizer steps per run at the corners of the schedule space (markdown)")
    parser.parse_args(argv)
    print(corners_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
