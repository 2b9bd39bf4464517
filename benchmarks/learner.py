"""Learner speed: time per ``train()`` call of ESSPO vs SB3's PPO on the same CartPole rollout.

Each algorithm is built with the RL Zoo's CartPole-v1 settings and the same seed, collects one
rollout (identical data at lag 0), then ``train()`` is timed repeatedly, interleaving the
algorithms so that machine noise hits them alike. Reported: median milliseconds per call and the
ratio to SB3's PPO. With ``--learn``, also the evaluation return each reaches at the same budget.

    python benchmarks/learner.py [--repeats 30] [--learn] [--timesteps 100000] [--seeds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.evaluation import evaluate_policy

from adaptive_po import ESSPO, PPO
from adaptive_po.environments import make_vec_env

ZOO = dict(n_steps=32, batch_size=256, n_epochs=20, gamma=0.98, gae_lambda=0.8)


def lin(x: float):
    return lambda progress: progress * x


def build(name: str, seed: int, lag: int = 0):
    env = make_vec_env("CartPole-v1", 8, seed, "envpool")
    kwargs = dict(learning_rate=lin(1e-3), seed=seed, device="cpu", verbose=0, **ZOO)
    if name == "sb3-ppo":
        return SB3PPO("MlpPolicy", env, clip_range=lin(0.2), **kwargs)
    if name == "ppo":
        return PPO("MlpPolicy", env, clip_range=lin(0.2), policy_lag=lag, **kwargs)
    if name == "esspo":
        return ESSPO("MlpPolicy", env, policy_lag=lag, **kwargs)
    if name == "esspo-sampled-kl":
        return ESSPO("MlpPolicy", env, kl="sampled", policy_lag=lag, **kwargs)
    raise ValueError(name)


def time_train(names: list[str], repeats: int) -> dict[str, list[float]]:
    models = {}
    for name in names:
        model = build(name, seed=0)
        _, callback = model._setup_learn(10**6, None)
        model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)
        models[name] = model
    times: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(3):  # warm-up
        for model in models.values():
            model.train()
    for _ in range(repeats):
        for name, model in models.items():
            start = time.perf_counter()
            model.train()
            times[name].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--learn", action="store_true", help="also train each to the budget and evaluate")
    parser.add_argument("--timesteps", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)

    names = ["sb3-ppo", "ppo", "esspo", "esspo-sampled-kl"]
    times = time_train(names, args.repeats)
    base = statistics.median(times["sb3-ppo"])
    print(f"time per train() call on one CartPole-v1 rollout (8 envs x 32 steps, 20 epochs, batch 256), torch threads = 1, {args.repeats} calls each")
    print(f"{'algorithm':18s} {'median ms':>10s} {'p90 ms':>8s} {'ratio to SB3 PPO':>17s}")
    for name in names:
        median = statistics.median(times[name])
        p90 = float(np.percentile(times[name], 90))
        print(f"{name:18s} {median * 1e3:10.2f} {p90 * 1e3:8.2f} {median / base:17.2f}")

    if args.learn:
        print(f"\nCartPole-v1 return after {args.timesteps:,} steps (deterministic evaluation, 20 episodes), Zoo settings")
        print(f"{'algorithm':18s} {'mean':>8s} {'per seed':>30s} {'wall s':>8s}")
        for name in ("sb3-ppo", "esspo"):
            finals, walls = [], []
            for seed in range(args.seeds):
                model = build(name, seed)
                start = time.perf_counter()
                model.learn(args.timesteps)
                walls.append(time.perf_counter() - start)
                mean, _ = evaluate_policy(model, make_vec_env("CartPole-v1", 10, 1000 + seed, "envpool", training=False), 20)
                finals.append(mean)
            print(f"{name:18s} {np.mean(finals):8.1f} {str([round(float(f), 1) for f in finals]):>30s} {np.mean(walls):8.1f}")


if __name__ == "__main__":
    main()
