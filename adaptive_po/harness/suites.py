"""The benchmark tiers: which grid each ``--suite`` runs by default (each flag overrides)."""

from __future__ import annotations

from dataclasses import dataclass

from adaptive_po.objectives import OBJECTIVES


@dataclass(frozen=True)
class Suite:
    name: str
    envs: tuple[str, ...]
    algos: tuple[str, ...]
    seeds: int
    lags: tuple[int, ...]
    noise: tuple[float, ...]
    replay: tuple[int, ...]
    description: str


SUITES: dict[str, Suite] = {
    "quick": Suite(
        "quick",
        envs=("CartPole-v1", "Acrobot-v1"),
        algos=("esspo", "ppo"),
        seeds=5,
        lags=(0, 16),
        noise=(0.0,),
        replay=(0,),
        description="the question in minutes on 2 CPU cores: ESS objective vs tuned PPO, fresh vs 16-update-old actors",
    ),
    "classic": Suite(
        "classic",
        envs=("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3", "Pendulum-v1"),
        algos=tuple(OBJECTIVES),
        seeds=5,
        lags=(0, 1, 2, 4, 8),
        noise=(0.0, 0.5),
        replay=(0,),
        description="the full classic-control grid (hours on a laptop; meant for bigger machines or a Ray cluster)",
    ),
    "staleness": Suite(
        "staleness",
        envs=("CartPole-v1", "Acrobot-v1", "Pendulum-v1", "LunarLander-v3"),
        algos=("esspo", "ppo", "decoupled-ppo", "tis-pg"),
        seeds=5,
        lags=(0, 4, 16, 64),
        noise=(0.0,),
        replay=(0,),
        description="the staleness question on four classic tasks: four objectives x policy lags 0-64 (about an hour on 2 cores with the population engine)",
    ),
    "atari": Suite(
        "atari",
        envs=("Pong-v5", "Breakout-v5", "Seaquest-v5", "SpaceInvaders-v5"),
        algos=("esspo", "ppo", "decoupled-ppo"),
        seeds=3,
        lags=(0, 4),
        noise=(0.0,),
        replay=(0,),
        description="four Atari games with CnnPolicy, on one GPU",
    ),
}


def get_suite(name: str) -> Suite:
    try:
        return SUITES[name]
    except KeyError:
        raise ValueError(f"unknown suite {name!r}; available: {sorted(SUITES)}") from None
