"""Jobs: the unit both executors run, and the callbacks through which they report.

A sweep's runs are split into *jobs* by :func:`plan_jobs`; a job is what one worker process
(:func:`adaptive_po.bench.local_executor.run_local`) or one Ray task
(:func:`adaptive_po.bench.ray_executor.run_ray`) trains: a population of runs (the population
engine, :mod:`adaptive_po.bench.population_engine`) or a single run (the process engine, and runs the
population engine does not support, such as gSDE or Dict observations).

This module sits below both executors: they import it, it imports neither of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from adaptive_po.bench.run_folder import RunSpec

#: the engines: ``population`` trains the runs of one environment together in one process where
#: the runs allow it (MLP and CNN policies without gSDE), ``process`` gives every run its own process
ENGINES = ("population", "process")

#: ``on_result(spec, outcome)``: called once per run when its job has ended (and, on Ray, after
#: its run folder has landed); ``outcome`` is the engine's record (``status``, ``run_dir``, ...)
ResultCallback = Callable[[RunSpec, dict[str, Any]], None]
#: ``on_tick(running_specs)``: called periodically with the runs of the jobs in flight
TickCallback = Callable[[list[RunSpec]], None]


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; use {' or '.join(ENGINES)}")


@dataclass(frozen=True)
class Job:
    """What one worker process (or one Ray task) runs: one run, or a population of runs."""

    specs: tuple[RunSpec, ...]
    population: bool = False

    def __post_init__(self) -> None:
        if not self.specs:
            raise ValueError("a job needs at least one run")
        if not self.population and len(self.specs) != 1:
            raise ValueError(f"a job that is not a population holds one run, got {len(self.specs)}")

    @property
    def name(self) -> str:
        first = self.specs[0]
        if not self.population:
            return str(first.relative_dir)
        return f"population of {len(self.specs)}: {first.env} {first.algo} (from {first.relative_dir})"


def job_specs(jobs: Sequence[Job]) -> list[RunSpec]:
    """The runs of ``jobs``, in order."""
    return [spec for job in jobs for spec in job.specs]


def check_jobs(jobs: Sequence[Job]) -> None:
    """Refuse a job list that is not one: an item that is no :class:`Job` (e.g. a bare run spec:
    plan them with :func:`plan_jobs`) or two runs sharing a run folder."""
    for job in jobs:
        if not isinstance(job, Job):
            raise TypeError(f"expected planned jobs (adaptive_po.bench.jobs.plan_jobs), got {type(job).__name__}")
    keys = [str(spec.run_dir) for spec in job_specs(jobs)]
    if len(set(keys)) != len(keys):
        raise ValueError("two specs share a run folder")


def plan_jobs(specs: Sequence[RunSpec], engine: str = "population", max_members: int | None = None) -> list[Job]:
    """Split ``specs`` into jobs, in the order of their first run.

    ``population``: the runs :func:`~adaptive_po.bench.population_engine.supports_population` accepts
    are grouped by :func:`~adaptive_po.bench.population_engine.group_populations` (at most
    ``max_members`` each, default ``DEFAULT_MAX_MEMBERS``); every other run is a job of its own.
    ``process``: every run is a job of its own.
    """
    check_engine(engine)
    if engine == "process":
        return [Job((spec,)) for spec in specs]
    # imported here: the population engine pulls in gymnasium, which a process-engine plan does
    # not need
    from adaptive_po.bench.population_engine import DEFAULT_MAX_MEMBERS, group_populations, supports_population

    supported: dict[tuple[str, str | None], bool] = {}  # one YAML read per environment

    def fits(spec: RunSpec) -> bool:
        key = (spec.env, spec.envs_dir)
        if key not in supported:
            supported[key] = supports_population(spec)
        return supported[key]

    order = {id(spec): i for i, spec in enumerate(specs)}
    groups = group_populations([s for s in specs if fits(s)], max_members or DEFAULT_MAX_MEMBERS)
    jobs = [Job(tuple(group), population=True) for group in groups]
    jobs += [Job((spec,)) for spec in specs if not fits(spec)]
    return sorted(jobs, key=lambda job: order[id(job.specs[0])])
