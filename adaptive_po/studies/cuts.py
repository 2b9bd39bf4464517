"""The registered cut order under the core-hour limit, as a plan gives it (``[[cuts]]``).

Each entry of the order is applied in turn while the study's dry run exceeds the limit: listed
values (a lag, an arm) one by one; the dearest task (its budget x its seconds per million steps)
while more than ``keep`` remain; the highest scoring seed while more than ``keep`` remain. The cuts
are written once, before the study's first run (``cuts.json``), and read back through
:func:`check_cuts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .plan import StudyPlan

Task = tuple[str, int]


@dataclass(frozen=True)
class Runs:
    """The study's runs after the cuts: tasks with their budgets, arms, lags and scoring seeds."""

    tasks: tuple[Task, ...]
    arms: tuple[str, ...]
    lags: tuple[int, ...]
    seeds: tuple[int, ...]

    def runs(self) -> int:
        return len(self.tasks) * len(self.arms) * len(self.lags) * len(self.seeds)


def cut_key(plan: StudyPlan, what: str) -> str:
    """The key of a kind of cut in the cuts file (the tasks under the plan's word: "games")."""
    return plan.tasks_word if what == "tasks" else what


def no_cuts(plan: StudyPlan) -> dict[str, list[Any]]:
    return {cut_key(plan, c.what): [] for c in plan.cuts}


def apply_cuts(plan: StudyPlan, tasks: Sequence[Task], cuts: Mapping[str, Sequence[Any]] | None = None) -> Runs:
    cuts = cuts or {}
    d = plan.design
    return Runs(
        tasks=tuple(t for t in tasks if t[0] not in cuts.get(cut_key(plan, "tasks"), ())),
        arms=tuple(a for a in d.arms if a not in cuts.get("arms", ())),
        lags=tuple(lag for lag in d.lags if lag not in cuts.get("lags", ())),
        seeds=tuple(s for s in d.seeds if s not in cuts.get("seeds", ())),
    )


def plan_cuts(plan: StudyPlan, tasks: Sequence[Task], hours: Callable[[Runs], float], task_cost: Callable[[Task], float],
              limit: float | None = None) -> tuple[dict[str, list[Any]], list[str]]:
    """The registered cut order, applied while ``hours(runs)`` exceeds ``limit`` (the plan's
    core-hour limit by default); ``task_cost`` ranks the tasks (the dearest is cut first). Returns
    the cuts and the lines that say so (an overrun of the minimum design included)."""
    limit = plan.limit_core_hours if limit is None else limit
    cuts = no_cuts(plan)

    def left() -> float:
        return hours(apply_cuts(plan, tasks, cuts))

    lines = [f"The dry run before the study's first run: {len(tasks)} {plan.tasks_word}, {apply_cuts(plan, tasks, cuts).runs()} runs, "
             f"{left():.1f} core-hours (limit {limit:g}: about {limit / 2:g} h on 2 cores), at the pilot's measured seconds per run."]
    for cut in plan.cuts:
        key = cut_key(plan, cut.what)
        for value in cut.values:
            if left() > limit:
                cuts[key].append(value)
                lines.append(f"- cut {cut.what[:-1]} {value}: {left():.1f} core-hours left")
        if cut.rule == "dearest":
            while left() > limit and len(apply_cuts(plan, tasks, cuts).tasks) > cut.keep:
                dearest = max(apply_cuts(plan, tasks, cuts).tasks, key=task_cost)
                cuts[key].append(dearest[0])
                lines.append(f"- cut {plan.task_noun} {dearest[0]} (the dearest): {left():.1f} core-hours left")
        elif cut.rule == "highest":
            while left() > limit and len(apply_cuts(plan, tasks, cuts).seeds) > cut.keep:
                cuts[key].append(apply_cuts(plan, tasks, cuts).seeds[-1])
                lines.append(f"- cut seed {cuts[key][-1]}: {left():.1f} core-hours left")
    if left() > limit:
        lines.append(f"- the minimum design is still {left():.1f} core-hours: it runs anyway, as registered, and the overrun is reported")
    if not any(cuts.values()):
        lines.append("- within the limit: nothing is cut")
    return cuts, lines


def allowed_cuts(plan: StudyPlan) -> dict[str, list[Any]]:
    """What the registered order may cut, per key of the cuts file."""
    out: dict[str, list[Any]] = {}
    for cut in plan.cuts:
        if cut.values:
            out[cut_key(plan, cut.what)] = list(cut.values)
        elif cut.rule == "dearest":
            out[cut_key(plan, cut.what)] = list(plan.pilot.tasks)
        else:
            out[cut_key(plan, cut.what)] = list(plan.design.seeds[cut.keep:])
    return out


def check_cuts(plan: StudyPlan, cuts: Any, path: Path) -> dict[str, list[Any]]:
    """The cuts written before the study's first run, checked against the plan's order; a
    ``ValueError`` naming the file and the value that is not a registered cut."""
    allowed = allowed_cuts(plan)
    if not isinstance(cuts, dict) or set(cuts) != set(allowed):
        raise ValueError(f"{path}: expected the keys {sorted(allowed)}, got {cuts!r}")
    for kind, values in cuts.items():
        bad = [v for v in values if v not in allowed[kind]] if isinstance(values, list) else [values]
        if bad:
            raise ValueError(f"{path}: {kind} {bad} cannot be cut (allowed: {allowed[kind]})")
    return cuts
