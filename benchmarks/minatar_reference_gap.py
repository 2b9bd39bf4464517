"""Why our PPO trails gymnax-blines' published PPO on MinAtar at 320k steps: the two setup
differences, one at a time (``docs/results/minatar/reference_gap.md``).

gymnax-blines trains a 2 x 256 ReLU MLP (separate actor and critic) on MinAtar *without* sticky
actions; our suite trains the MinAtar paper's CNN *with* MinAtar's sticky actions (0.1). On one game,
PPO at the published step, fresh data, the same seeds, three arms:

* ``cnn, sticky 0.1``: the suite's setting (the reference check's runs);
* ``cnn, sticky 0``: without sticky actions;
* ``mlp 2x256, sticky 0``: gymnax-blines' network and environment setting.

Each arm is a population through the bench's own code path (``execute_population``, in this
process, so that the sticky-action probability can be set for the arm); the table gives the mean
over seeds of the last training-episode return (what gymnax-blines logs) with a 95% bootstrap CI.

Usage: ``python benchmarks/minatar_reference_gap.py --env Breakout-MinAtar --seeds 3 --out docs/results/minatar/reference_gap.md``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from adaptive_po.environments import minatar as minatar_backend  # noqa: E402
from adaptive_po.bench.config import write_env_config_copy  # noqa: E402
from adaptive_po.bench.population_engine import execute_population  # noqa: E402
from adaptive_po.bench.run_folder import RunSpec  # noqa: E402
from adaptive_po.analysis.reports.minatar import PUBLISHED_PPO  # noqa: E402
from adaptive_po.analysis.stats import bootstrap_ci  # noqa: E402
from adaptive_po.analysis.verdicts import per_run_table  # noqa: E402

GYMNAX_MLP = {"net_arch": {"pi": [256, 256], "vf": [256, 256]}, "activation_fn": "ReLU"}
ARMS = (
    ("cnn, sticky 0.1", None, 0.1),
    ("cnn, sticky 0", None, 0.0),
    ("mlp 2x256, sticky 0", GYMNAX_MLP, 0.0),
)


def run_arm(env: str, name: str, mlp: dict | None, sticky: float, seeds: int, steps: int, root: Path) -> Path:
    envs_dir = root / name.replace(" ", "_").replace(",", "").replace(".", "")
    envs_dir.mkdir(parents=True)
    write_env_config_copy(env, envs_dir, **({} if mlp is None else {"hyperparams__policy": "MlpPolicy", "hyperparams__policy_kwargs": mlp}))
    minatar_backend.MINATAR_STICKY_ACTION_PROBABILITY = sticky  # read when the games are built
    out = envs_dir / "runs"
    specs = [RunSpec("gap", env, "ppo", seed, steps, out=str(out), device="cpu", envs_dir=str(envs_dir)) for seed in range(seeds)]
    results = execute_population(specs)
    bad = [r for r in results if r["status"] != "complete"]
    if bad:
        raise SystemExit(f"{name}: {bad[0].get('error')}")
    return out / "gap"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="Breakout-MinAtar")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=320_000)
    parser.add_argument("--out", default=None, help="also write the table to this Markdown file")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory(prefix="adaptive-po-gap-") as tmp:
        for name, mlp, sticky in ARMS:
            table = per_run_table(run_arm(args.env, name, mlp, sticky, args.seeds, args.steps, Path(tmp)))
            train = bootstrap_ci(table["final_train_return"].to_numpy(float), seed=0)
            final = bootstrap_ci(table["final_eval_return"].to_numpy(float), seed=0)
            rows.append((name, train, final))
            print(f"measured {name}", file=sys.stderr, flush=True)
    published = PUBLISHED_PPO.get(args.env)
    lines = [
        f"# {args.env}: our PPO against gymnax-blines' at {args.steps:,} steps, one setup difference at a time",
        "",
        f"Made by `python benchmarks/minatar_reference_gap.py --env {args.env} --seeds {args.seeds}`: PPO, fresh data, "
        f"seeds 0-{args.seeds - 1}, the suite's hyper-parameters (gymnax-blines'). Published (gymnax-blines, one seed, "
        f"sampled policy): {published['return']:.2f} at {published['steps']:,} steps." if published else "",
        "",
        "| arm | training episodes, last 100 [95% CI] | deterministic evaluation [95% CI] |",
        "|---|---:|---:|",
    ]
    for name, train, final in rows:
        lines.append(f"| {name} | {train[0]:.2f} [{train[1]:.2f}, {train[2]:.2f}] | {final[0]:.2f} [{final[1]:.2f}, {final[2]:.2f}] |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
