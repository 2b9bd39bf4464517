"""The random-policy score of each MinAtar game, the 0 of its normalized score (``random_score`` in
``adaptive_po/env_configs/<Game>-MinAtar.yaml``): the mean return of uniform random actions over 1,000
episodes (50 environments, seeds 12345..12394, actions from ``numpy.random.default_rng(1)``), with
its standard error.

Usage: ``python benchmarks/minatar_random.py [--episodes 1000]``
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from adaptive_po.environments import MINATAR_GAMES, make_vec_env  # noqa: E402


def random_returns(env_id: str, episodes: int, n_envs: int = 50, seed: int = 12345) -> np.ndarray:
    env = make_vec_env(env_id, n_envs, seed)
    env.reset()
    rng = np.random.default_rng(1)
    returns: list[float] = []
    while len(returns) < episodes:
        _, _, _, infos = env.step(rng.integers(0, env.action_space.n, n_envs))
        returns += [info["episode"]["r"] for info in infos if "episode" in info]
    return np.asarray(returns[:episodes])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=1000)
    args = parser.parse_args()
    print("| game | random return (mean ± s.e.) |\n|---|---:|")
    for env_id in sorted(MINATAR_GAMES):
        r = random_returns(env_id, args.episodes)
        print(f"| {env_id} | {r.mean():.3f} ± {r.std() / np.sqrt(len(r)):.3f} |", flush=True)


if __name__ == "__main__":
    main()
