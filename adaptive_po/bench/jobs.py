"""Jobs: the unit both executors run, and the callbacks through which they report.

A sweep's runs are split into *jobs* by :func:`plan_jobs`; a job is what one worker process
(:func:`adaptive_po.bench.local_executor.run_local`) or one Ray task
(:func:`adaptive_po.bench.ray_executor.run_ray`) trains: a population of runs (the population
engine, :mod:`adaptive_po.bench.population_engine`) or a single run (the process engine, and runs the
population engine does not support, such as gSDE or Dict observations).

Which runs may share a population (:func:`population_key`, :func:`supports_population`) and how
they are grouped (:func:`group_populations`) is decided here too. This module sits below both
executors and both engines: they import it, it imports none of them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.environments import resolve_backend

#: the engines: ``population`` trains the runs of one environment together in one process where
#: the runs allow it (MLP and CNN policies without gSDE), ``process`` gives every run its own process
ENGINES = ("population", "process")
#: the executors: ``local`` runs each job in a worker process (as many at once as ``workers``),
#: ``inline`` runs them one after another in the sweep's own process (tiny sweeps, debuggers),
#: ``ray`` hands each to a Ray task
EXECUTORS = ("local", "inline", "ray")

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

    ``population``: the runs :func:`supports_population` accepts
    are grouped by :func:`group_populations` (at most
    ``max_members`` each, default ``DEFAULT_MAX_MEMBERS``); every other run is a job of its own.
    ``process``: every run is a job of its own.
    """
    check_engine(engine)
    if engine == "process":
        jobs = [Job((spec,)) for spec in specs]
        check_learner_precision(jobs)
        return jobs
    # imported here: the population engine pulls in gymnasium, which a process-engine plan does
    # not need

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
    check_learner_precision(jobs)
    return sorted(jobs, key=lambda job: order[id(job.specs[0])])


def check_learner_precision(jobs: Sequence[Job]) -> None:
    """``ValueError`` naming the first run whose variant chooses a learner precision (``precision=bf16``)
    that its job cannot honour, before anything runs: the process engine (the SB3 classes) and the
    population engine's CNN policies train in float32 only."""
    from adaptive_po.bench.config import get_env_config
    from adaptive_po.bench.variants import DEFAULT_PRECISION, learner_precision

    for job in jobs:
        for spec in job.specs:
            precision = learner_precision(spec.algo, spec.variant)
            if precision == DEFAULT_PRECISION:
                continue
            if not job.population:
                raise ValueError(
                    f"run {spec.relative_dir}: precision={precision} runs on the population engine only (MLP policies "
                    "without gSDE); the process engine trains in fp32"
                )
            policy = get_env_config(spec.env, spec.envs_dir).hyperparams.policy
            if policy != "MlpPolicy":
                raise ValueError(f"run {spec.relative_dir}: precision={precision} runs MLP policies only; {spec.env} uses {policy}")


#: the largest population the bench builds by default (memory and evaluation stay bounded)
DEFAULT_MAX_MEMBERS = 64


def population_key(spec: RunSpec) -> tuple[Any, ...]:
    """Runs with equal keys can train in one population: everything but the seed and the
    per-member data dials (policy lag, action noise, behaviour recording, sampler temperature and
    precision) must agree, the variant's knobs included. Replay changes the amount of data per
    update, so it is shared too."""
    return (
        spec.suite, spec.env, spec.algo, spec.variant, spec.total_timesteps, spec.dials.replay, spec.device, spec.backend,
        spec.out, spec.envs_dir,
    )


def supports_population(spec: RunSpec) -> bool:
    """Whether the population engine can run ``spec``: MLP and CNN policies (classic control,
    Box2D, MinAtar, Atari) without gSDE, on Box observations with Discrete or one-dimensional Box
    actions (:func:`adaptive_po.population.check_population_spaces`); the process engine runs the
    rest (gSDE, Dict observations, multi-dimensional actions).
    """
    from adaptive_po.bench.config import get_env_config

    env_cfg = get_env_config(spec.env, spec.envs_dir)
    if env_cfg.hyperparams.policy not in ("MlpPolicy", "CnnPolicy") or env_cfg.hyperparams.use_sde:
        return False
    try:
        backend, env_id = resolve_backend(env_cfg.ids, spec.backend)
    except ValueError:
        return False  # the process engine records the reason in the run folder
    return _population_spaces(env_id, backend)


@functools.lru_cache(maxsize=None)
def _population_spaces(env_id: str, backend: str) -> bool:
    """Whether the population engine runs ``env_id``'s spaces (one environment is built to see them)."""
    from adaptive_po.environments import make_vec_env
    from adaptive_po.population import check_population_spaces

    try:
        env = make_vec_env(env_id, 1, 0, backend, training=False)
    except Exception:  # noqa: BLE001 - the process engine records the reason in the run folder
        return False
    try:
        check_population_spaces(env.observation_space, env.action_space)
    except ValueError:
        return False
    finally:
        env.close()
    return True


def group_populations(specs: Sequence[RunSpec], max_members: int = DEFAULT_MAX_MEMBERS) -> list[list[RunSpec]]:
    """Split ``specs`` into populations of at most ``max_members`` runs with equal
    :func:`population_key`, in the order the specs first appear."""
    if max_members < 1:
        raise ValueError(f"max_members must be >= 1, got {max_members!r}")
    groups: dict[tuple[Any, ...], list[RunSpec]] = {}
    for spec in specs:
        groups.setdefault(population_key(spec), []).append(spec)
    out: list[list[RunSpec]] = []
    for members in groups.values():
        out.extend(members[i : i + max_members] for i in range(0, len(members), max_members))
    return out
