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
from adaptive_po.hyperparams import VALUE_ALGORITHMS

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
        check_seeds(jobs)
        return jobs
    # imported here: the population engine pulls in gymnasium, which a process-engine plan does
    # not need

    supported: dict[tuple[str, str | None, bool], bool] = {}  # one YAML read per environment (and PQN or not)

    def fits(spec: RunSpec) -> bool:
        if dial_variant(spec):  # the after-ABS dial turned on by the variant: the process engine
            return False
        key = (spec.env, spec.envs_dir, spec.algo in VALUE_ALGORITHMS)
        if key not in supported:
            supported[key] = supports_population(spec)
        return supported[key]

    order = {id(spec): i for i, spec in enumerate(specs)}
    groups = group_populations([s for s in specs if fits(s)], max_members or DEFAULT_MAX_MEMBERS)
    jobs = [Job(tuple(group), population=True) for group in groups]
    jobs += [Job((spec,)) for spec in specs if not fits(spec)]
    check_learner_precision(jobs)
    check_seeds(jobs)
    return sorted(jobs, key=lambda job: order[id(job.specs[0])])


#: the largest seed an environment pool takes (envpool's seeds are int32; the gymnasium backend
#: checks the same range)
INT32_MAX = 2**31 - 1
#: the offsets of the evaluation environments' seeds from the training ones': the process engine's
#: (per run) and the population engine's (per population)
PROCESS_EVAL_OFFSET, POPULATION_EVAL_OFFSET = 10_000, 10_000_000


def seed_ranges(seeds: Sequence[int], n_envs: int, n_eval: int, population: bool) -> list[tuple[str, int, int, int]]:
    """The environment seeds a job's runs use: ``(what, first, count, per_seed)`` per pool, where a
    pool's first seed is ``per_seed`` times the smallest run seed plus an offset. The process
    engine seeds a run's ``n_envs`` training environments from its seed and its ``n_eval``
    evaluation ones from seed + 10,000; the population engine one pool of ``k x n_envs`` from
    ``min(seeds) x 2 x k x n_envs`` and the evaluation pool of ``k x n_eval`` 10,000,000 above it
    (:class:`adaptive_po.bench.population_engine._Population`)."""
    k, low = len(seeds), min(seeds)
    if not population:
        return [("training", low, n_envs, 1), ("evaluation", low + PROCESS_EVAL_OFFSET, n_eval, 1)]
    per_seed = 2 * k * n_envs
    return [("training", low * per_seed, k * n_envs, per_seed), ("evaluation", low * per_seed + POPULATION_EVAL_OFFSET, k * n_eval, per_seed)]


def check_seeds(jobs: Sequence[Job]) -> None:
    """``ValueError`` naming the first run whose environments' seeds (:func:`seed_ranges`) would not
    fit int32, with the largest seed its job takes: refused before anything runs, not a failed run."""
    from adaptive_po.bench.run_folder import read_settings

    sizes: dict[tuple[Any, ...], tuple[int, int]] = {}  # one read per environment file and variant
    for job in jobs:
        seeds = [spec.seed for spec in job.specs]
        lead = job.specs[0]
        key = (lead.env, lead.envs_dir, lead.algo, lead.variant)
        if key not in sizes:
            settings = read_settings(lead)
            sizes[key] = settings.hp.n_envs, min(settings.env_cfg.eval_episodes, 10)
        n_envs, n_eval = sizes[key]
        ranges = seed_ranges(seeds, n_envs, n_eval, job.population)
        for what, start, count, per_seed in ranges:
            if start + count - 1 > INT32_MAX:
                spec = min(job.specs, key=lambda s: s.seed)
                # the largest smallest seed whose pools all fit
                largest = min((INT32_MAX - (f - spec.seed * p) - c + 1) // p for _, f, c, p in ranges)
                how = (f"a population of {len(seeds)} x {n_envs} environments is seeded from seed x {per_seed:,}" if job.population
                       else f"its {n_envs} environments are seeded from the seed on")
                raise ValueError(
                    f"run {spec.relative_dir}: seed {spec.seed:,} is too large: its {what} environments' seeds would reach "
                    f"{start + count - 1:,}, above int32's {INT32_MAX:,} ({how}); use seeds up to {max(largest, 0):,} here"
                )


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
    actions (:func:`adaptive_po.population.check_population_spaces`), for the policy objectives; the
    process engine runs the rest (gSDE, the after-ABS dial, Dict observations, multi-dimensional actions, PQN).
    """
    from adaptive_po.bench.config import get_env_config

    if spec.algo in VALUE_ALGORITHMS or dial_variant(spec):  # PQN: the SB3-style class only (the stacked engine runs policy objectives)
        return False
    env_cfg = get_env_config(spec.env, spec.envs_dir)
    hp = env_cfg.hyperparams
    if hp.policy not in ("MlpPolicy", "CnnPolicy") or hp.use_sde or hp.batch_scaling is not None:
        return False
    try:
        backend, env_id = resolve_backend(env_cfg.ids, spec.backend)
    except ValueError:
        return False  # the process engine records the reason in the run folder
    return _population_spaces(env_id, backend)


def dial_variant(spec: RunSpec) -> bool:
    """Whether ``spec``'s variant turns a data dial on (``batch_scaling=abs``,
    :data:`adaptive_po.bench.variants.DIAL_SETTINGS`), which the population engine does not run."""
    from adaptive_po.bench.variants import parse_variant

    return any(kind == "dial" for kind, _ in parse_variant(spec.algo, spec.variant).values())


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
