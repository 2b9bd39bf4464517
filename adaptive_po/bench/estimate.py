"""The dry run: how many runs, how many steps, what is already done, and how long the rest takes.

The cost estimate multiplies each run's budget by a measured speed (wall seconds per million
environment steps on one core, by engine and environment; ALE steps per core for Atari). The
measurements are data, in ``measured_speeds.json`` beside this module, with where and when each
was taken; ``make perf`` (benchmarks/engines_speed.py) measures them again.

A population's runs share its fixed costs (start-up, compilation, the per-step dispatch of the
stacked update), so a run in a population of 50 costs less than one in a population of 10. The
population engine's speeds are therefore recorded per population size, and a run is priced at the
size of the population the sweep will put it in (:func:`adaptive_po.bench.jobs.group_populations`):
between two measured sizes, linearly in ``1 / size`` (fixed costs divide by the size); below the
smallest measured size, along the same line from the two smallest (or at the smallest when only one
was measured); above the largest, at the largest (no gain is assumed that was not measured).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from adaptive_po.bench.config import get_env_config
from adaptive_po.bench.jobs import check_engine
from adaptive_po.bench.run_folder import RUN_CHANGED, RUN_DAMAGED, RUN_SAME, RunSpec
from adaptive_po.bench.resume import NAMED_RUNS, describe_changes, plan_resume


#: the measured speeds behind the estimate, with where and when each was measured
MEASURED_SPEEDS: dict[str, Any] = json.loads((Path(__file__).with_name("measured_speeds.json")).read_text())
#: wall seconds per million environment steps of one run on one core, by environment (the process engine)
PROCESS_SECONDS_PER_MILLION: dict[str, float] = MEASURED_SPEEDS["seconds_per_million_steps"]["process"]
#: the same for the population engine, by environment and population size
POPULATION_SECONDS_PER_MILLION: dict[str, dict[int, float]] = {
    env: {int(members): float(seconds) for members, seconds in by_size.items()}
    for env, by_size in MEASURED_SPEEDS["seconds_per_million_steps"]["population"].items()
}
#: the same for the MinAtar CNN (both engines)
MINATAR_SECONDS_PER_MILLION: dict[str, float] = MEASURED_SPEEDS["minatar_seconds_per_million_steps"]["population"]
#: ALE agent steps per second on one core (the Atari estimate is bound by them)
ALE_STEPS_PER_CORE: dict[str, float] = MEASURED_SPEEDS["ale_steps_per_core"]["speeds"]
#: the machine the Atari suite is sized for: one GPU and this many cores
ATARI_MACHINE_CORES: int = MEASURED_SPEEDS["ale_steps_per_core"]["machine_cores"]
#: wall seconds per million agent steps of one ALE run with the CNN learner on one CPU core
ALE_CPU_LEARNER_SECONDS_PER_MILLION: float = MEASURED_SPEEDS["ale_cpu_learner"]["seconds_per_million"]


def _atari_estimate(steps_by_env: dict[str, int], cores: int) -> list[str]:
    """The Atari lines of the dry run: environment-bound hours on the GPU machine and here."""
    core_seconds = atari_hours(steps_by_env, 1) * 3600
    guessed = sorted(set(steps_by_env) - set(ALE_STEPS_PER_CORE))
    total = sum(steps_by_env.values())
    lines = [
        f"  cost estimate (Atari, with a GPU learner): {total:,} agent steps; environment-bound "
        f"~{format_duration(core_seconds / ATARI_MACHINE_CORES / 3600)} on one GPU machine with {ATARI_MACHINE_CORES} cores, "
        f"~{format_duration(core_seconds / cores / 3600)} of ALE stepping alone on this machine's {cores} cores",
        "    measured where: ALE steps/s per core on the project's 2-core CPU machine (2026-11-30, "
        + ", ".join(f"{e} {v:.0f}" for e, v in ALE_STEPS_PER_CORE.items())
        + "); the GPU learner's speed is not measured (no GPU lent yet; `make gpu-check` measures it), so the estimate "
        "assumes the learner keeps up; on a CPU-only machine the CNN learner is far slower: `make bench-atari` runs the smoke grid there",
    ]
    if guessed:
        lines.append(f"    (not measured, estimated at the mean ALE speed: {', '.join(guessed)})")
    cpu_hours = total / 1e6 * ALE_CPU_LEARNER_SECONDS_PER_MILLION / 3600
    lines.append(f"  on CPU (--device cpu, one run per core, the CNN learner included): ~{format_duration(cpu_hours, 'CPU-core-')}, "
                 f"~{format_duration(cpu_hours / cores)} on this machine's {cores} cores ({MEASURED_SPEEDS['ale_cpu_learner']['measured']})")
    return lines


def population_speed(by_size: dict[int, float], members: int) -> float:
    """Seconds per million steps per run in a population of ``members``, from the speeds measured
    at the sizes in ``by_size``: linear in ``1 / members`` between two measured sizes, along the
    line of the two smallest below them, at the largest above them (see the module's docstring).

    ``population_speed({10: 46.0, 50: 30.0}, 30)`` -> ``32.67``: a sixth of the way (in 1/size)
    from 50's speed to 10's."""
    if members < 1:
        raise ValueError(f"a population has at least one member, got {members!r}")
    if not by_size or any(k < 1 or not v > 0 for k, v in by_size.items()):
        raise ValueError(f"measured speeds need population sizes >= 1 and positive seconds, got {by_size!r}")
    sizes = sorted(by_size)
    if len(sizes) == 1 or members >= sizes[-1]:
        return by_size[sizes[-1]]
    if members < sizes[0]:  # along the line of the two smallest, never cheaper than the smallest measured
        lo, hi = sizes[0], sizes[1]
    else:
        lo = max(k for k in sizes if k <= members)
        hi = sizes[sizes.index(lo) + 1]
    slope = (by_size[lo] - by_size[hi]) / (1 / lo - 1 / hi)
    speed = by_size[hi] + slope * (1 / members - 1 / hi)
    return max(speed, by_size[sizes[0]]) if members < sizes[0] else speed


def _seconds_per_million(engine: str, env: str, minatar: bool = False, members: int = 1) -> tuple[float, bool]:
    """(seconds per million steps, measured for this env?); ``members``: the size of the population
    the run trains in (the population engine); ``minatar``: an environment of the MinAtar backend,
    estimated from :data:`MINATAR_SECONDS_PER_MILLION` (measured in populations of 10)"""
    if minatar:
        table = MINATAR_SECONDS_PER_MILLION
        return table.get(env, sum(table.values()) / len(table)), env in table and engine == "population"
    if engine == "population":
        if env in POPULATION_SECONDS_PER_MILLION:
            return population_speed(POPULATION_SECONDS_PER_MILLION[env], members), True
        speeds = [population_speed(by_size, members) for by_size in POPULATION_SECONDS_PER_MILLION.values()]
        return sum(speeds) / len(speeds), False
    table = PROCESS_SECONDS_PER_MILLION
    if env in table:
        return table[env], True
    return sum(table.values()) / len(table), False


def format_duration(hours: float, prefix: str = "") -> str:
    """A cost estimate for people: minutes under an hour, hours (one decimal) from there.

    ``format_duration(0.1)`` -> ``"6 min"``, ``format_duration(9.44)`` -> ``"9.4 h"``;
    with ``prefix="CPU-core-"``: ``"6 CPU-core-minutes"``, ``"9.4 CPU-core-hours"``.
    """
    if hours < 0:
        raise ValueError(f"a duration cannot be negative, got {hours!r} h")
    minutes = hours * 60
    if round(minutes) < 60:
        count = "<1" if minutes < 0.5 else f"{minutes:.0f}"
        return f"{count} {prefix}minutes" if prefix else f"{count} min"
    return f"{hours:.1f} {prefix}hours" if prefix else f"{hours:.1f} h"


@dataclass(frozen=True)
class Cost:
    """What a list of runs costs by the measured speeds: CPU-core seconds and environment steps
    per engine (runs the population engine does not support count at the process engine's speed;
    Atari runs are counted apart, in agent steps per environment), and the environments whose
    speed was not measured (estimated at the mean)."""

    seconds: dict[str, float]
    steps: dict[str, int]
    atari_steps: dict[str, int]
    guessed: frozenset[str]

    def hours(self, cores: int) -> float:
        """Wall hours of the non-Atari runs on ``cores`` cores, one run per core."""
        return sum(self.seconds.values()) / 3600 / cores


def estimate_cost(specs: Sequence[RunSpec], engine: str = "population") -> Cost:
    """The cost estimate behind the dry run (:func:`describe_grid`) and every duration the
    documentation states: steps x the measured speed of ``engine`` per environment (for the
    population engine, at the size of each run's population)."""
    from adaptive_po.bench.jobs import group_populations, supports_population
    from adaptive_po.environments.ids import is_atari

    check_engine(engine)
    seconds = {"population": 0.0, "process": 0.0}
    steps_by_engine = {"population": 0, "process": 0}
    guessed: set[str] = set()
    atari_steps: dict[str, int] = {}
    by_env: dict[str, list[RunSpec]] = {}
    for spec in specs:
        by_env.setdefault(spec.env, []).append(spec)
    for env, runs in by_env.items():
        steps = sum(r.total_timesteps for r in runs)
        ids = get_env_config(env, runs[0].envs_dir).ids
        if any(is_atari(i) for i in ids.values()):
            atari_steps[env] = steps
            continue
        which = "population" if engine == "population" and supports_population(runs[0]) else "process"
        # each run at the size of the population the sweep puts it in (one per run for the process engine)
        groups = group_populations(runs) if which == "population" else [[run] for run in runs]
        for group in groups:
            speed, measured = _seconds_per_million(which, env, minatar="minatar" in ids, members=len(group))
            seconds[which] += sum(r.total_timesteps for r in group) / 1e6 * speed
        steps_by_engine[which] += steps
        if not measured:
            guessed.add(env)
    return Cost(seconds, steps_by_engine, atari_steps, frozenset(guessed))


def atari_hours(atari_steps: dict[str, int], cores: int) -> float:
    """Environment-bound wall hours of Atari runs on ``cores`` cores (ALE stepping at the measured speed)."""
    mean = sum(ALE_STEPS_PER_CORE.values()) / len(ALE_STEPS_PER_CORE)
    return sum(steps / ALE_STEPS_PER_CORE.get(env, mean) for env, steps in atari_steps.items()) / cores / 3600


def describe_grid(specs: Sequence[RunSpec], engine: str = "population", redo_changed: bool = False) -> str:
    """A dry-run listing: the runs per environment, what is complete already and which complete
    runs would be redone and why (damaged, or made with another configuration: the differing keys,
    old -> new), and a cost estimate (steps x the measured speed of ``engine``; runs the
    population engine does not support count at the process engine's speed; only the runs still to
    run count, so a resumed grid is priced at what is left). A summary, never a line per run: the dry run lists the run folders with ``--list-runs``."""
    from adaptive_po.bench.config import budget_notes
    from adaptive_po.hyperparams import VALUE_ALGORITHMS

    lines = [f"{len(specs)} runs, {sum(s.total_timesteps for s in specs):,} environment steps in all"]
    notes: list[str] = []
    by_env: dict[str, list[RunSpec]] = {}
    for spec in specs:
        by_env.setdefault(spec.env, []).append(spec)
    plan = plan_resume(specs)
    todo = plan.todo(redo_changed)
    cost = estimate_cost(todo, engine)
    seconds, steps_by_engine, guessed, atari_steps = cost.seconds, cost.steps, cost.guessed, cost.atari_steps
    for env, runs in by_env.items():
        algos = sorted({r.algo for r in runs})
        conditions = sorted({r.condition for r in runs})
        seeds = sorted({r.seed for r in runs})
        configs = sorted({r.algo_label for r in runs})
        variants = f" ({len(configs)} configurations with their knob variants)" if len(configs) > len(algos) else ""
        lines.append(
            f"  {env}: {len(runs)} runs = {len(algos)} algos {algos}{variants} x {len(conditions)} conditions x "
            f"{len(seeds)} seeds, {runs[0].total_timesteps:,} steps each"
        )
        # PQN's rollouts are its own (VALUE_ALGORITHMS): its notes come apart from the objectives'
        kinds = sorted({(r.total_timesteps, r.algo if r.algo in VALUE_ALGORITHMS else None) for r in runs}, key=str)
        for budget, algo in kinds:
            notes += [f"  {note}" + (f" ({algo})" if algo else "") for note in budget_notes(get_env_config(env, runs[0].envs_dir), budget, algo)]
    for axis, key in (("algorithms", lambda s: s.algo), ("conditions", lambda s: s.condition)):
        counts: dict[str, int] = {}
        for spec in specs:
            counts[key(spec)] = counts.get(key(spec), 0) + 1
        lines.append(f"  runs per {axis[:-1]}: " + ", ".join(f"{name} {n}" for name, n in counts.items()))
    lines += notes
    changed, damaged = plan.of(RUN_CHANGED), plan.of(RUN_DAMAGED)
    lines.append(f"  already complete: {len(plan.of(RUN_SAME))}; to run: {len(todo)}"
                 + (" (the cost estimate below is theirs)" if todo and len(todo) < len(specs) else ""))
    for spec, state in damaged[:NAMED_RUNS]:
        lines.append(f"    redo {spec.relative_dir}: {state.reasons[0]}")
    if len(damaged) > NAMED_RUNS:
        lines.append(f"    ... and {len(damaged) - NAMED_RUNS} more damaged runs redone")
    if changed:
        fate = ("redone (--redo-changed): their folders are cleared" if redo_changed
                else "kept: the bench refuses to run until --redo-changed is given or --out / --suite-name changes")
        lines.append(f"  complete with another configuration: {len(changed)}, {fate}")
        for spec, state in changed[:NAMED_RUNS]:
            lines.append(f"    {'redo ' if redo_changed else ''}{spec.relative_dir}: {describe_changes(state)}")
        if len(changed) > NAMED_RUNS:
            lines.append(f"    ... and {len(changed) - NAMED_RUNS} more")
    cores = os.cpu_count() or 1
    for which in ("population", "process"):
        if steps_by_engine[which]:
            hours = seconds[which] / 3600
            lines.append(
                f"  cost estimate ({which} engine): {steps_by_engine[which]:,} environment steps ~ "
                f"{format_duration(hours, 'CPU-core-')}, ~{format_duration(hours / cores)} on this machine's {cores} cores "
                f"(speeds per environment, and for populations per population size, measured by benchmarks/engines_speed.py and the quick suite; MinAtar: in the published MinAtar grid)"
            )
    if guessed:
        lines.append(f"  (not measured, estimated at the mean measured speed: {', '.join(sorted(guessed))})")
    if atari_steps:
        lines.extend(_atari_estimate(atari_steps, cores))
    return "\n".join(lines)
