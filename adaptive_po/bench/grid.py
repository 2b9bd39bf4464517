"""The grid: which runs a sweep request means, validated before anything runs.

:class:`Grid` is a sweep request after the suite's defaults are filled in (environments,
algorithms and their variants, seeds, data conditions, budget, device, backend);
:func:`expand_grid` checks every axis (errors name the bad value) and lists its
:class:`~adaptive_po.bench.run_folder.RunSpec` runs, each carrying one
:class:`~adaptive_po.dials.DataDials`. :func:`parse_list` and :func:`seeds_from` read the command
line's comma-separated lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from adaptive_po.bench.config import MAX_GRID_RUNS, ConfigError, check_policy, check_run_limits, get_env_config
from adaptive_po.dials import DataDials
from adaptive_po.contract import check_name
from adaptive_po.bench.jobs import EXECUTORS
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.environments import resolve_backend, resolve_device
from adaptive_po.bench.suites import get_suite
from adaptive_po.bench.variants import parse_variant
from adaptive_po.hyperparams import VALUE_ALGORITHMS
from adaptive_po.objectives import get_objective


@dataclass
class Grid:
    """A sweep request after defaults from the suite were filled in."""

    suite: str
    envs: list[str]
    algos: list[str]
    seeds: list[int]
    #: the data conditions, one DataDials each (:func:`adaptive_po.dials.dial_product` builds a
    #: product of dial levels); each run's RunSpec carries one of these very objects
    conditions: list[DataDials]
    #: per algorithm, the variants to run ("" = the defaults); algorithms not named run "" only
    variants: dict[str, list[str]] | None = None
    timesteps: int | None = None
    device: str = "cpu"
    backend: str = "auto"
    out: str = "runs"
    suite_name: str | None = None
    envs_dir: str | None = None
    executor: str = "local"
    tensorboard: bool = True


def grid_conditions(grid: Grid) -> list[DataDials]:
    """The grid's data conditions, checked: a non-empty list of distinct DataDials."""
    if not grid.conditions:
        raise ValueError("no conditions selected")
    for condition in grid.conditions:
        if not isinstance(condition, DataDials):
            raise TypeError(f"a grid's conditions are DataDials, got {condition!r}")
    if len(set(grid.conditions)) < len(grid.conditions):
        raise ValueError(f"a data condition is listed twice in {[c.condition for c in grid.conditions]}")
    return list(grid.conditions)


def listed_once(values: Iterable[Any], what: str, folder: Path) -> None:
    """``ValueError`` naming the first of ``values`` listed twice (``what``: ``"seed"``, ...): two
    runs of one cell would write one folder under ``folder``."""
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{what} {value!r} is listed twice: two of its runs would write one run folder under {folder}")
        seen.add(value)


def expand_grid(grid: Grid) -> list[RunSpec]:
    """Validate every axis of the grid (errors name the bad value) and list its runs.

    Each axis lists every value once, and the grid holds at most :data:`MAX_GRID_RUNS` runs
    (checked on the axes' sizes, before any run is listed). Order: environment, algorithm,
    condition, seed, so that a partial sweep already holds comparable runs for the first
    environments.
    """
    from adaptive_po.compile_setup import check_settings

    check_settings()  # $ADAPTIVE_PO_COMPILE and the compile path's variables: garbage would fail every run
    suite = get_suite(grid.suite)
    if grid.executor not in EXECUTORS:
        raise ValueError(f"unknown executor {grid.executor!r}; use {', '.join(EXECUTORS)}")
    if not grid.envs:
        raise ValueError("no environments selected")
    if not grid.algos:
        raise ValueError("no algorithms selected")
    if not grid.seeds:
        raise ValueError("no seeds selected")
    for seed in grid.seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    for algo in grid.algos:
        if algo not in VALUE_ALGORITHMS:  # PQN's variants (the dial, the width) are checked with the others below
            get_objective(algo)
    conditions = grid_conditions(grid)  # validated, each a DataDials
    variants = {algo: list((grid.variants or {}).get(algo, [""])) for algo in grid.algos}
    for algo, names in variants.items():
        if not names:
            raise ValueError(f"no variants selected for {algo}")
        for name in names:
            parse_variant(algo, name)
    unknown = sorted(set(grid.variants or {}) - set(grid.algos))
    if unknown:
        raise ValueError(f"variants given for algorithms not in the grid: {unknown}")
    if grid.timesteps is not None and (isinstance(grid.timesteps, bool) or grid.timesteps < 1):
        raise ValueError(f"timesteps must be a positive integer, got {grid.timesteps!r}")
    # a folder under --out, never a path (contract.check_name)
    suite_name = check_name("suite name", grid.suite_name if grid.suite_name is not None else suite.name)
    folder = Path(grid.out) / suite_name
    for values, what in ((grid.envs, "environment"), (grid.algos, "algorithm"), (grid.seeds, "seed")):
        listed_once(values, what, folder)
    for algo, names in variants.items():
        listed_once(names, f"variant of {algo}", folder)
    configurations = sum(len(names) for names in variants.values())
    total = len(grid.envs) * configurations * len(conditions) * len(grid.seeds)
    if total > MAX_GRID_RUNS:
        raise ValueError(
            f"the grid has {total:,} runs ({len(grid.envs):,} environments x {configurations:,} algorithm configurations x "
            f"{len(conditions):,} data conditions x {len(grid.seeds):,} seeds), more than the limit of {MAX_GRID_RUNS:,} runs "
            "per grid; run it as several smaller sweeps"
        )
    # Ray workers resolve "auto" themselves: the driver may have no GPU while the workers do
    device = grid.device if grid.executor == "ray" else resolve_device(grid.device)
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"unknown device {device!r}; use auto, cpu or cuda")

    specs: list[RunSpec] = []
    for env_name in grid.envs:
        env_cfg = get_env_config(env_name, grid.envs_dir)
        resolve_backend(env_cfg.ids, grid.backend)  # fails now, not in a worker
        check_policy(env_cfg, grid.backend)  # its policy_kwargs build a policy (only when it has some)
        if grid.timesteps is not None:
            total = grid.timesteps
        elif suite.name in env_cfg.budget:
            total = env_cfg.budget[suite.name]
        else:
            raise ConfigError(
                f"{env_cfg.path}: key 'budget.{suite.name}' is missing; give --timesteps or add a budget for suite {suite.name!r}"
            )
        check_run_limits(env_cfg, total, "--timesteps" if grid.timesteps is not None else f"{env_cfg.path}: key 'budget.{suite.name}'")
        runs = ((a, v, c, s) for a in grid.algos for v in variants[a] for c in conditions for s in grid.seeds)
        for algo, variant, condition, seed in runs:
            hp = env_cfg.pqn if algo in VALUE_ALGORITHMS else env_cfg.hyperparams
            rollout = hp.n_envs * hp.n_steps
            if total < rollout:
                raise ValueError(f"timesteps={total} is smaller than one rollout of {env_name} ({rollout} steps)")
            specs.append(
                RunSpec(
                    suite=suite_name,
                    env=env_name,
                    algo=algo,
                    seed=seed,
                    total_timesteps=total,
                    dials=condition,
                    variant=variant,
                    device=device,
                    backend=grid.backend,
                    out=grid.out,
                    envs_dir=grid.envs_dir,
                    tensorboard=grid.tensorboard,
                )
            )
    return specs


def parse_list(text: str | None, cast: Callable[[str], Any], name: str) -> list[Any] | None:
    """``"0,1,2"`` -> ``[0, 1, 2]``; a bad item is a ``ValueError`` naming the flag and item."""
    if text is None:
        return None
    out = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        try:
            out.append(cast(item))
        except ValueError:
            raise ValueError(f"{name}: {item!r} is not a valid {cast.__name__}") from None
    return out


def seeds_from(text: str | None, default: int, flag: str = "--seeds") -> list[int]:
    """``--seeds 5`` -> 0..4; ``--seeds 0,3,7`` -> those seeds (there are no ranges: a list holds
    what its text spells); ``--seeds 1,`` -> seed 1 alone (a trailing comma makes one seed a list). A count above :data:`MAX_GRID_RUNS` is refused before its list is made
    (each seed is a run at least)."""
    if text is None:
        return list(range(default))
    if "," not in text and "-" not in text.strip()[1:]:
        try:
            n = int(text)
        except ValueError:
            raise ValueError(f"{flag}: {text!r} is neither a count nor a comma-separated list") from None
        if n < 1:
            raise ValueError(f"{flag}: the count must be >= 1, got {n}")
        if n > MAX_GRID_RUNS:
            raise ValueError(f"{flag} {text.strip()}: {n:,} seeds, more than the limit of {MAX_GRID_RUNS:,} runs per grid")
        return list(range(n))
    return parse_list(text, int, flag) or []
