"""The registered cut order under the core-hour limit, as a plan gives it (``[[cuts]]``).

Each entry of the order is applied in turn while the study's dry run exceeds the limit: listed
values (a lag, an arm) one by one; every midpoint lag at once; the dearest task (its budget x its
seconds per million steps; a design by stressor: the dearest (task, stressor) pair) while more than
``keep`` remain; the highest scoring seed while more than ``keep`` remain. The cuts
are written once, before the study's first run (``cuts.json``), and read back through
:func:`check_cuts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    #: a design on (task, stressor) pairs (its tasks are :func:`pair_name`\ s): each pair's
    #: conditions, ``(lag, sampler)``: lag 0 with the clean sampler, the midpoint (where not cut)
    #: and the stressor
    conditions: Mapping[str, tuple[tuple[int, str], ...]] = field(default_factory=dict)
    #: the cuts these runs are left by (``{key of the cuts file: values}``): a searched design's
    #: parts are built from them
    cuts: Mapping[str, Sequence[Any]] = field(default_factory=dict)

    def runs(self) -> int:
        if self.conditions:
            return sum(len(self.conditions[t]) for t, _ in self.tasks) * len(self.arms) * len(self.seeds)
        return len(self.tasks) * len(self.arms) * len(self.lags) * len(self.seeds)


def pair_name(task: str, stressor: str) -> str:
    """A (task, stressor) pair as a design by stressor names it (its "task"): ``Freeway-MinAtar/lag64``."""
    return f"{task}/{stressor}"


def split_pair(name: str) -> tuple[str, str]:
    task, _, stressor = name.rpartition("/")
    return task, stressor


def pair_conditions(plan: StudyPlan, name: str, midpoints: bool = True) -> tuple[tuple[int, str], ...]:
    """The conditions ``(lag, sampler)`` of the pair ``name``: lag 0 clean, the stressor's midpoint
    lag (``midpoints``, where the plan has one) and the stressor."""
    x = plan.pilot.stressor(split_pair(name)[1])
    middle = plan.design.midpoints.get(x.name) if midpoints else None
    return ((0, ""), *(((middle, ""),) if middle else ()), (x.lag, x.sampler))


def cut_key(plan: StudyPlan, what: str) -> str:
    """The key of a kind of cut in the cuts file (the tasks under the plan's word: "games"; a
    design by stressor's tasks are its "pairs")."""
    if what == "tasks":
        return "pairs" if plan.pilot is not None and plan.pilot.by_stressor else plan.tasks_word
    return what


def no_cuts(plan: StudyPlan) -> dict[str, list[Any]]:
    return {cut_key(plan, c.what): [] for c in plan.cuts}


def apply_cuts(plan: StudyPlan, tasks: Sequence[Task], cuts: Mapping[str, Sequence[Any]] | None = None) -> Runs:
    cuts = cuts or {}
    d = plan.design
    kept = tuple(t for t in tasks if t[0] not in cuts.get(cut_key(plan, "tasks"), ()))
    by_stressor = plan.pilot is not None and plan.pilot.by_stressor
    return Runs(
        tasks=kept,
        arms=tuple(a for a in d.arms if a not in cuts.get("arms", ())),
        lags=tuple(lag for lag in d.lags if lag not in cuts.get("lags", ())),
        seeds=tuple(s for s in d.seeds if s not in cuts.get("seeds", ())),
        conditions={t: pair_conditions(plan, t, not cuts.get("midpoints")) for t, _ in kept} if by_stressor else {},
        cuts={k: list(v) for k, v in cuts.items()},
    )


def plan_cuts(plan: StudyPlan, tasks: Sequence[Task], hours: Callable[[Runs], float], task_cost: Callable[[Task], float],
              limit: float | None = None, basis: str = "the pilot's measured seconds per run",
              count: Callable[[Runs], int] = Runs.runs) -> tuple[dict[str, list[Any]], list[str]]:
    """The registered cut order, applied while ``hours(runs)`` exceeds ``limit`` (the plan's
    core-hour limit by default); ``task_cost`` ranks the tasks (the dearest is cut first); ``basis``
    says what the hours are at, ``count`` counts the runs. Returns the cuts and the lines that say
    so (an overrun of the minimum design included)."""
    limit = plan.limit_core_hours if limit is None else limit
    cuts = no_cuts(plan)

    def left() -> float:
        return hours(apply_cuts(plan, tasks, cuts))

    lines = [f"The dry run before the study's first run: {len(tasks)} {'pairs' if cut_key(plan, 'tasks') == 'pairs' else plan.tasks_word}, {count(apply_cuts(plan, tasks, cuts))} runs, "
             f"{left():.1f} core-hours (limit {limit:g}: about {limit / 2:g} h on 2 cores), at {basis}."]
    for cut in plan.cuts:
        key = cut_key(plan, cut.what)
        if cut.what == "midpoints":
            if left() > limit:
                cuts[key] = sorted(plan.design.midpoints)
                lines.append(f"- cut the midpoint lags ({', '.join(f'{k}: {v}' for k, v in sorted(plan.design.midpoints.items()))}): "
                             f"{left():.1f} core-hours left")
            continue
        for value in cut.values:
            if left() > limit:
                cuts[key].append(value)
                lines.append(f"- cut {cut.what[:-1]} {value}: {left():.1f} core-hours left")
        if cut.rule == "dearest":
            while left() > limit and len(apply_cuts(plan, tasks, cuts).tasks) > cut.keep:
                dearest = max(apply_cuts(plan, tasks, cuts).tasks, key=task_cost)
                cuts[key].append(dearest[0])
                noun = "pair" if key == "pairs" else plan.task_noun
                lines.append(f"- cut {noun} {dearest[0]} (the dearest): {left():.1f} core-hours left")
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
        elif cut.what == "midpoints":
            out[cut.what] = sorted(plan.design.midpoints)
        elif cut.rule == "dearest" and plan.pilot is not None and plan.pilot.by_stressor:
            out[cut_key(plan, cut.what)] = [pair_name(t, x.name) for t in plan.pilot.tasks for x in plan.pilot.stressors]
        elif cut.rule == "dearest":
            out[cut_key(plan, cut.what)] = list(plan.pilot.tasks) if plan.pilot is not None else [t for t, _ in plan.design.tasks]
        else:
            out[cut_key(plan, cut.what)] = list(plan.design.seeds[cut.keep:])
    return out


def check_cuts(plan: StudyPlan, cuts: Any, path: Path) -> dict[str, list[Any]]:
    """The cuts written before the study's first run, checked against the plan's order; a
    ``ValueError`` naming the file and the value that is not a registered cut."""
    allowed = allowed_cuts(plan)
    if not isinstance(cuts, dict):
        raise ValueError(f"{path}: the cuts must be a JSON object of lists, got {cuts!r:.80}")
    unknown = sorted(set(cuts) - set(allowed))
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown} in the cuts; expected the keys {sorted(allowed)}")
    for kind, values in cuts.items():
        if not isinstance(values, list):
            raise ValueError(f"{path}: {kind!r} must be a list, got {values!r:.80}")
        bad = [v for v in values if isinstance(v, bool) or v not in allowed[kind]]
        if bad:
            raise ValueError(f"{path}: {kind} {bad} cannot be cut (allowed: {allowed[kind]})")
    if set(cuts) != set(allowed):
        raise ValueError(f"{path}: expected the keys {sorted(allowed)}, got {cuts!r}")
    return cuts
