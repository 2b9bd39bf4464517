"""How much mismatch each sampler level induces, on trained policies (`make mismatch`, docs/results/sampler_mismatch.md).

Trains PPO (the Zoo settings of env_configs/<env>.yaml, process engine, fixed seed) on CartPole-v1 and
Pendulum-v1, then, for each sampler level (temperatures, precisions), rolls out a fresh batch with
that sampler acting with the trained parameters and measures on it:

* the mean analytic KL(pi_learner(.|s) || pi_sampler(.|s)) over the batch's states;
* the normalized ESS of the ratios pi_learner(a|s) / pi_sampler(a|s) of the sampled actions: the
  statistic the ESS objective reads (1 = no mismatch).

Usage: python benchmarks/sampler_mismatch.py [--out docs/results/sampler_mismatch.md]
       [--steps-cartpole 100000 --steps-pendulum 100000 --batch 4096]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from adaptive_po import distributions as D
from adaptive_po.algorithms import BatchPolicyOptimization
from adaptive_po.collector import Collector, distribution_params
from adaptive_po.environments import make_vec_env
from adaptive_po.bench.config import get_env_config
from adaptive_po.contract import atomic_write_text
from adaptive_po.environments import resolve_backend
from adaptive_po.objectives import effective_sample_size_from_log_ratios
from adaptive_po.sampler import PRECISIONS

LEVELS: tuple[tuple[float, str], ...] = (
    (1.0, "fp32"),
    (0.8, "fp32"),
    (1.2, "fp32"),
    (1.5, "fp32"),
    (2.0, "fp32"),
    *((1.0, p) for p in PRECISIONS if p != "fp32"),
    (1.2, "fp8-e4m3"),
)


def train(env_name: str, steps: int, seed: int = 0) -> BatchPolicyOptimization:
    cfg = get_env_config(env_name)
    backend, env_id = resolve_backend(cfg.ids, "auto")
    hp = cfg.hyperparams
    env = make_vec_env(env_id, hp.n_envs, seed, backend, training=True)
    model = BatchPolicyOptimization(
        hp.policy, env, objective="ppo", objective_kwargs=hp.tuned_values(("clip_range",)), seed=seed, device="cpu",
        **hp.algorithm_kwargs(),
    )
    return model.learn(steps)


@torch.no_grad()
def measure(model: BatchPolicyOptimization, env_name: str, temperature: float, precision: str, batch: int, seed: int = 1) -> dict:
    cfg = get_env_config(env_name)
    backend, env_id = resolve_backend(cfg.ids, "auto")
    n_envs = 16
    env = make_vec_env(env_id, n_envs, seed, backend, training=False)
    collector = Collector(sampler_temperature=temperature, sampler_precision=precision, seed=seed)
    collector.attach(model.policy)
    torch.manual_seed(seed)
    kind = D.kind_of_space(model.action_space)
    obs = env.reset()
    kls, log_ratios = [], []
    is_box = kind == "gaussian"
    for _ in range(batch // n_envs):
        obs_t = torch.as_tensor(obs, dtype=torch.float32)
        step = collector.act(obs_t)
        learner = distribution_params(model.policy.get_distribution(obs_t))
        kls.append(D.kl(kind, learner, step.behaviour_params))
        log_ratios.append(D.log_prob(kind, learner, step.actions) - step.behaviour_log_prob)
        actions = step.actions.numpy()
        if is_box:
            actions = np.clip(actions, model.action_space.low, model.action_space.high)
        obs, _, _, _ = env.step(actions)
    env.close()
    lr = torch.cat(log_ratios)
    return {
        "kl": float(torch.cat(kls).mean()),
        "ess": float(effective_sample_size_from_log_ratios(lr)),
        "ratio_max": float(lr.exp().max()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/results/sampler_mismatch.md")
    parser.add_argument("--steps-cartpole", type=int, default=100_000)
    parser.add_argument("--steps-pendulum", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=4096)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for env_name, steps in (("CartPole-v1", args.steps_cartpole), ("Pendulum-v1", args.steps_pendulum)):
        start = time.time()
        model = train(env_name, steps)
        print(f"{env_name}: trained PPO for {steps:,} steps in {time.time() - start:.0f}s", file=sys.stderr)
        for temperature, precision in LEVELS:
            m = measure(model, env_name, temperature, precision, args.batch)
            rows.append((env_name, temperature, precision, m))
            print(f"  T={temperature:g} {precision:9s} KL={m['kl']:.2e} ESS={m['ess']:.4f} max ratio={m['ratio_max']:.3g}", file=sys.stderr)
    lines = [
        "# Sampler mismatch by level",
        "",
        "Produced by `python benchmarks/sampler_mismatch.py` (`make mismatch`). PPO with the Zoo settings of",
        f"`env_configs/<env>.yaml`, seed 0, trained for {args.steps_cartpole:,} (CartPole-v1) and {args.steps_pendulum:,} (Pendulum-v1) steps;",
        f"then, for each sampler level, a fresh batch of {args.batch:,} transitions (16 envs) sampled by that sampler",
        "with the trained parameters. KL = mean analytic KL(pi_learner || pi_sampler) over the batch's states;",
        "ESS = normalized effective sample size of pi_learner(a|s) / pi_sampler(a|s) over the sampled actions",
        "(1 = no mismatch); max ratio = the largest of those ratios. The learner is float32 at T = 1.",
        "fp8 is per-tensor scaled and dequantized to float32 (CPU; see `adaptive_po/sampler.py`).",
        "",
        "| environment | temperature | precision | KL(learner ‖ sampler) | ESS | max ratio |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for env_name, temperature, precision, m in rows:
        lines.append(f"| {env_name} | {temperature:g} | {precision} | {m['kl']:.2e} | {m['ess']:.4f} | {m['ratio_max']:.3g} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, "\n".join(lines) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
